"""Translation quality with sacreBLEU: corpus BLEU and chrF, each with its signature.

sacreBLEU scores detokenised, cased text with its own fixed tokenisation, so numbers are comparable
across papers and toolkits; the signature records every setting that could change the score.
"""

from dataclasses import dataclass

import sacrebleu

from tnmt.errors import UserError


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
