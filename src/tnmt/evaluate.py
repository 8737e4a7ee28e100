"""Translation quality with sacreBLEU: corpus BLEU and chrF, each with its signature.

sacreBLEU scores detokenised, cased text with its own fixed tokenisation, so numbers are comparable
across papers and toolkits; the signature records every setting that could change the score.
`evaluate_directions` scores every direction of a multilingual checkpoint (`tnmt evaluate --all-directions`).
"""

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sacrebleu

from tnmt.errors import UserError

if TYPE_CHECKING:  # not at run time: scoring needs no torch
    from tnmt.config import DecodeConfig
    from tnmt.translate.translator import Translator


@dataclass(frozen=True)
class Scores:
    bleu: float
    chrf: float
    bleu_signature: str
    chrf_signature: str

    def format(self) -> str:
        return f"BLEU = {self.bleu:.2f}  ({self.bleu_signature})\nchrF = {self.chrf:.2f}  ({self.chrf_signature})"


def score(hypotheses: list[str], references: list[str]) -> Scores:
    """Corpus-level BLEU and chrF of detokenised hypotheses against one reference each."""
    if len(hypotheses) != len(references):
        raise UserError(f"{len(hypotheses)} hypotheses but {len(references)} references: they must align line by line")
    bleu, chrf = sacrebleu.BLEU(), sacrebleu.CHRF()
    bleu_score = bleu.corpus_score(hypotheses, [references])
    chrf_score = chrf.corpus_score(hypotheses, [references])
    return Scores(
        bleu=bleu_score.score,
        chrf=chrf_score.score,
        bleu_signature=str(bleu.get_signature()),
        chrf_signature=str(chrf.get_signature()),
    )


def evaluate_directions(translator: "Translator", settings: "DecodeConfig", *, split: str) -> list[dict[str, Any]]:
    """Each direction `translator`'s checkpoint was trained on, translated and scored on Multi30k's `split`: one
    row per direction, in the checkpoint's order, with the sentences, sacreBLEU, chrF and the seconds it took.

    Raises:
        UserError: Multi30k is not available offline, or the checkpoint names no direction.
    """
    from tnmt.data.corpus import read_lines
    from tnmt.data.multi30k import find_multi30k, multi30k_paths
    from tnmt.directions import direction_name
    from tnmt.translate.stream import translate_stream

    if not translator.directions:
        raise UserError("the checkpoint names no language pair: evaluate it with --src and --ref")
    languages = sorted({language for pair in translator.directions for language in pair})
    root = find_multi30k(langs=languages)
    if root is None:
        raise UserError("Multi30k is not available offline: set TNMT_DATA_DIR to a local copy")
    rows = []
    for source, target in translator.directions:
        src, ref = multi30k_paths(root, split, source, target)
        pair = translator.for_pair(source, target)
        started = time.monotonic()
        hypotheses = [line for chunk in translate_stream(pair, read_lines(src), settings) for line in chunk]
        scores = score(hypotheses, read_lines(ref))
        row = {"direction": direction_name((source, target)), "sentences": len(hypotheses)}
        rows.append(row | {"bleu": scores.bleu, "chrf": scores.chrf, "seconds": time.monotonic() - started})
    return rows


def format_table(rows: list[dict[str, Any]]) -> str:
    """The rows of `evaluate_directions` as a plain-text table, with the mean of each score."""
    lines = [f"{'direction':<10} {'BLEU':>6} {'chrF':>6} {'sentences':>9}"]
    lines += [f"{r['direction']:<10} {r['bleu']:>6.2f} {r['chrf']:>6.2f} {r['sentences']:>9}" for r in rows]
    if len(rows) > 1:
        mean = {name: sum(r[name] for r in rows) / len(rows) for name in ("bleu", "chrf")}
        lines.append(f"{'mean':<10} {mean['bleu']:>6.2f} {mean['chrf']:>6.2f}")
    return "\n".join(lines)
