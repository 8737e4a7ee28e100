"""The evidence behind a translation: which source words each target word came from, how sure the model
was, and what looks wrong.

Everything here is read off the search and one teacher-forced pass over its outputs, batched like the search:
the search gives every output token's probability (the model's own, from the full softmax, as it chose the
token), and the pass, on the search's own encoded sources and only through the aligning layer, that layer's
cross-attention. Only the alignment is trained for: the Multi30k recipes teach one head eflomal's word
alignments (guided alignment, Garg et al. 2019), and the `DecodeConfig` names the layer and head to read.

Words are the whitespace-separated tokens of the text as sent and as returned (what a client can index
without knowing the tokenizer); subword pieces are mapped onto them by their characters (`piece_words`).

- Alignment: the aligning attention, summed per source word and averaged per target word, read both ways
  and symmetrised (`_alignment`); a target word whose strongest entry is the source's EOS, where attention
  rests when it has nowhere better to go, has no link of its own. The row of a target token is the step that
  writes it; `alignment_shift` takes the step that reads it as the decoder's input instead (Chen et al.
  2020). A model trained with guided alignment is read from its trained head (test AER 0.146 against
  eflomal on the shipped recipe's model, 0.177 read one way); one trained without it from the mean of the
  penultimate layer's heads, its best layer on validation (benchmarks/quality/evidence.py, NOTEBOOK "Alignment
  that carries markup").
- Confidence: a word's probability is the product of its subwords' (the probability the model gave to
  writing that word there); the sentence's is the geometric mean of its tokens' probabilities, EOS
  included, so a long sentence is not less sure for being long.
- Warnings (`WARNINGS`): short codes, empty for a clean translation. They are tuned to stay quiet on
  clean translations (the references of validation, benchmarks/quality/evidence.py): each flags a symptom of
  a broken output, not every weak one.
"""

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from torch import Tensor

from tnmt.aligning_head import alignment_rows
from tnmt.config import DecodeConfig
from tnmt.data.alignment import grow_diag_final_and
from tnmt.data.tokenizer import TERM_MARKERS, WORD_START, starts_word
from tnmt.decode.bans import has_loop
from tnmt.model import AttentionMaps

WARNINGS = {
    "repetition": "the output repeats a word, a phrase or a piece of a word in a loop",
    "copy": "the output copies the source instead of translating it",
    "length_ratio": "the output is much shorter or longer than the training data's translations of such a source",
    "uncovered_source": "a source word received almost no attention: it may be missing from the output",
    "truncated": "the source was longer than the model's max_len and only its beginning was translated",
    "sentence_split": "a sentence was longer than the model reads well and was translated in parts",
    "term_doubled": "a glossary term's source is translated twice: by the term and by the model's own word",
    "term_lost_words": "words near a glossary term lost their translation when the term was placed",
}
COPY_SHARE = 0.75  # this share of the output's words found verbatim in the source (and at least COPY_MIN_WORDS)
COPY_MIN_WORDS = 3
LENGTH_RATIO_QUANTILES = (0.001, 0.999)  # of the training pairs: outside them, a translation is flagged
REVERSE_MIN = 0.1  # a source word's strongest target word counts when it takes this share of that word's row
COVERAGE_MIN = 0.05  # attention a source word with letters must receive, summed over the output's tokens
_LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class Evidence:
    """What supports one translation (see the module docstring for how each part is read).

    alignment: (source word i, target word j) pairs, 0-based over `source.split()` and `translation.split()`.
    word_probs: the probability of each target word, in [0, 1].
    confidence: the geometric mean of the output tokens' probabilities (EOS included), in [0, 1].
    warnings: codes of `WARNINGS`, in that order; empty when nothing looks wrong.
    """

    alignment: list[tuple[int, int]]
    word_probs: list[float]
    confidence: float
    warnings: list[str]


@dataclass(frozen=True)
class Sentence:
    """One translated sentence as the evidence pass sees it."""

    source_text: str
    source_ids: list[int]  # what was decoded, without EOS
    source_pieces: list[str]  # the pieces of the whole text: more than the ids when the source was truncated
    output_text: str
    output_ids: list[int]  # without BOS and EOS
    output_pieces: list[str]
    ended: bool  # the search wrote EOS (it did not stop at its length limit)
    token_log_probs: Sequence[float]  # each output token's log-probability, and EOS's when it ended


class TokenAttention(NamedTuple):
    """The attention weights behind one translation, labelled by subword pieces.

    `source_pieces` ends with EOS; `target_pieces` is the decoder's input (BOS or the target language's tag,
    then the output): row i of a decoder map is where the token after piece i was chosen. `maps` holds every
    layer's weights for batch size 1.
    """

    source_pieces: list[str]
    target_pieces: list[str]
    maps: AttentionMaps


def token_attention(
    b: int,
    sentence: Sentence,
    labels: tuple[list[str], list[str]],
    encoder: Sequence[Tensor],
    decoder: Sequence[tuple[Tensor, Tensor]],
) -> TokenAttention:
    """Sentence b's maps, cut from its batch's weights (per layer: `encoder` (B, H, S, S) and `decoder`'s (self
    (B, H, T, T), cross (B, H, T, S))) to its own source (with EOS) and decoder input (the start token and the
    output): what a pass over that sentence alone gives. `labels`: its (source, target) pieces."""
    s, t = len(sentence.source_ids) + 1, len(sentence.output_ids) + 1
    maps = AttentionMaps(
        encoder=[layer[b : b + 1, :, :s, :s] for layer in encoder],
        decoder_self=[self_w[b : b + 1, :, :t, :t] for self_w, _ in decoder],
        cross=[cross[b : b + 1, :, :t, :s] for _, cross in decoder],
    )
    return TokenAttention(*labels, maps)


def piece_words(pieces: Sequence[str], text: str) -> list[int]:
    """The index of the word of `text.split()` that each sentencepiece piece belongs to.

    Pieces are matched to the text by their non-space characters in order ("▁" marks a space, `<0xNN>`
    byte pieces spell characters the vocabulary lacks, " ⁇ " is an unknown piece in decoded text). A piece
    with no character of its own (a lone "▁", a byte continuing a character) joins the word of the piece
    after it when it starts a word, else the word before it. A glossary term read inline (its markers and what they
    enclose, data/annotate.py) belongs to the word before it.
    """
    inline = _inline(pieces)
    if any(inline):  # a glossary term read inline (data/annotate.py) is part of the word it follows
        words = iter(piece_words([piece for piece, term in zip(pieces, inline, strict=True) if not term], text))
        found, word = [], 0
        for term in inline:
            word = word if term else next(words)
            found.append(word)
        return found
    char_word = [i for i, word in enumerate(text.split()) for _ in word]  # word of each non-space character
    if not char_word:
        return [0] * len(pieces)
    surfaces = _surfaces(pieces)
    words: list[int | None] = []
    position = 0
    for surface in surfaces:
        visible = sum(1 for char in surface if not char.isspace())
        words.append(char_word[min(position, len(char_word) - 1)] if visible else None)
        position += visible
    result, previous = [], 0
    for k, word in enumerate(words):
        if word is None:
            later = next((w for w in words[k + 1 :] if w is not None), previous)
            word = later if starts_word(pieces[k]) else previous
        result.append(word)
        previous = word
    return result


def _inline(pieces: Sequence[str]) -> list[bool]:
    """True on the pieces of a term inline in a source: its markers (`TERM_MARKERS`) and what they enclose."""
    start, end = TERM_MARKERS
    inside, found = False, []
    for piece in pieces:
        inside = inside or piece == start
        found.append(inside)
        inside = inside and piece != end
    return found


def _surfaces(pieces: Sequence[str]) -> list[str]:
    """The text each piece stands for; a run of byte pieces is decoded together and given to its first piece."""
    surfaces, run, run_start = [], b"", 0
    for k, piece in enumerate(pieces):
        if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
            if not run:
                run_start = k
            run += bytes([int(piece[3:5], 16)])
            surfaces.append("")
            continue
        if run:
            surfaces[run_start], run = run.decode("utf-8", errors="replace"), b""
        surfaces.append(" ⁇ " if piece == "<unk>" else piece.replace(WORD_START, " "))
    if run:
        surfaces[run_start] = run.decode("utf-8", errors="replace")
    return surfaces


def gather_evidence(sentences: Sequence[Sentence], cross: Tensor, settings: DecodeConfig) -> list[Evidence]:
    """The `Evidence` of a batch of translations, given the aligning layer's cross-attention (B, H, T, S) of a
    teacher-forced pass over BOS + each output (`ModelDoor.teacher_forced`)."""
    rows = alignment_rows(cross, settings.alignment_head).float().cpu()  # (B, T, S)
    # coverage reads all heads: one guided head is peaked on single words and leaves the others at ~0
    mean = rows if settings.alignment_head == 0 else cross.mean(dim=1).float().cpu()  # (B, T, S)
    return [_evidence(s, rows[b], settings, coverage=mean[b]) for b, s in enumerate(sentences)]


def explain(
    sentences: Sequence[Sentence],
    weights: Sequence[tuple[Tensor, Tensor]],
    settings: DecodeConfig,
    *,
    aligning: int,
    evidence: bool,
    maps: tuple[Sequence[Tensor], Sequence[tuple[list[str], list[str]]]] | None,
) -> list[tuple[TokenAttention | None, Evidence | None]]:
    """A batch of translations' evidence (when asked) and attention maps (when `maps` gives the encoder's weights
    and each sentence's (source, target) labels), from one teacher-forced pass over them: `weights`, per decoder
    layer (self, cross), through the aligning layer `aligning` at least."""
    proofs = gather_evidence(sentences, weights[aligning][1], settings) if evidence else [None] * len(sentences)
    if maps is None:
        return [(None, proof) for proof in proofs]
    encoder, labels = maps
    return [
        (token_attention(b, sentence, labels[b], encoder, weights), proof)
        for b, (sentence, proof) in enumerate(zip(sentences, proofs, strict=True))
    ]


def _evidence(s: Sentence, rows: Tensor, settings: DecodeConfig, *, coverage: Tensor | None = None) -> Evidence:
    """One sentence's evidence from its aligning attention rows (T, S) and the rows whose sums tell what was read
    (the heads' mean; default: `rows`)."""
    n_out, n_src = len(s.output_ids), len(s.source_ids)
    log_probs = s.token_log_probs  # the output's tokens, and EOS when it was written
    confidence = math.exp(sum(log_probs) / len(log_probs)) if log_probs else 0.0
    target_words = piece_words(s.output_pieces, s.output_text)
    source_words = piece_words(s.source_pieces, s.source_text)[:n_src]
    n_target_words = len(s.output_text.split())
    word_log_probs = [0.0] * n_target_words
    for k, word in enumerate(target_words if n_target_words else []):
        word_log_probs[word] += log_probs[k]
    attention = _output_rows(rows, n_out, n_src, shift=settings.alignment_shift)  # (n_out, n_src + 1)
    alignment = _alignment(attention, source_words, target_words) if n_out and n_src and n_target_words else []
    read = attention if coverage is None else _output_rows(coverage, n_out, n_src, shift=settings.alignment_shift)
    return Evidence(
        alignment=alignment,
        word_probs=[min(1.0, math.exp(x)) for x in word_log_probs],
        confidence=min(1.0, confidence),
        warnings=_warnings(s, read[:, :n_src], source_words, settings),
    )


def word_alignment(
    rows: Tensor, source_words: list[int], target_words: list[int], *, shift: bool
) -> list[tuple[int, int]]:
    """One sentence's word links from its aligning attention `rows` (T, S) of a teacher-forced pass over BOS +
    the output (`alignment_rows`), given the word of each source subword (without EOS) and of each output
    subword (`piece_words`)."""
    attention = _output_rows(rows, len(target_words), len(source_words), shift=shift)
    return _alignment(attention, source_words, target_words) if target_words and source_words else []


def _output_rows(rows: Tensor, n_out: int, n_src: int, *, shift: bool) -> Tensor:
    """The row of each output token (n_out, n_src + 1), over the source and its EOS: row t writes output token t,
    row t + 1 reads it."""
    start = 1 if shift else 0
    return rows[start : start + n_out, : n_src + 1]


def target_word_attention(rows: Tensor, source_words: list[int], target_words: list[int], *, shift: bool) -> np.ndarray:
    """Each target word's aligning attention over the source words and EOS (target words, source words + 1), from
    the rows (T, S) of a teacher-forced pass (as `word_alignment` reads them): where the word looked."""
    return word_attention(
        _output_rows(rows, len(target_words), len(source_words), shift=shift), source_words, target_words
    )


def word_attention(attention: Tensor, source_words: list[int], target_words: list[int]) -> np.ndarray:
    """Subword attention (n_out, n_src + 1, the source EOS last) as words: (target words, source words + EOS),
    summed over each source word's subwords and averaged over each target word's."""
    # numpy: a dozen small ops per sentence, 1.6x faster than the same in torch (evidence is on every request)
    rows = attention.numpy()
    n_words, n_targets = max(source_words) + 1, max(target_words) + 1
    by_source = np.zeros((rows.shape[0], n_words + 1), dtype=rows.dtype)  # (n_out, words + EOS)
    np.add.at(by_source.T, [*source_words, n_words], rows.T)
    words = np.zeros((n_targets, n_words + 1), dtype=rows.dtype)  # (target words, words + EOS)
    np.add.at(words, target_words, by_source)
    words /= np.maximum(np.bincount(target_words, minlength=n_targets), 1)[:, None]
    return words


def _alignment(attention: Tensor, source_words: list[int], target_words: list[int]) -> list[tuple[int, int]]:
    """Word links from subword attention (n_out, n_src + 1, the source EOS last), read both ways and symmetrised.

    The attention is summed over each source word's subwords and averaged over each target word's, giving
    one row per target word over the source words and EOS. Target to source: each row's strongest source word,
    none where that is EOS. Source to target: each source word's strongest row, where it holds at least
    `REVERSE_MIN` of that row. grow-diag-final-and joins the two (as it joins eflomal's two directions,
    data/alignment.py): their agreement, grown by neighbouring links of either. One direction alone links
    every word of a row to one source word and each source word to one target word; the two reads keep a
    compound's second source word and drop a row's guess that no source word confirms.
    """
    words = word_attention(attention, source_words, target_words)
    n_words = words.shape[1] - 1
    forward = {(int(i), j) for j, i in enumerate(words.argmax(axis=1)) if i != n_words}
    strongest = words[:, :n_words].argmax(axis=0)  # (words,): each source word's strongest row
    best = words[strongest, np.arange(n_words)]
    reverse = {(i, int(strongest[i])) for i in range(n_words) if best[i] >= REVERSE_MIN}
    return sorted(grow_diag_final_and(forward, reverse))


def _warnings(s: Sentence, attention: Tensor, source_words: list[int], settings: DecodeConfig) -> list[str]:
    """The codes of what looks wrong with one translation (see `WARNINGS`)."""
    found = set()
    words = s.output_text.lower().split()
    if has_loop(words) or has_loop(s.output_ids):  # a loop of words, or of pieces inside one ("Allammmmmm")
        found.add("repetition")
    source_set = set(s.source_text.lower().split())
    lettered = [w for w in words if _LETTER.search(w)]
    if len(lettered) >= COPY_MIN_WORDS and sum(w in source_set for w in lettered) >= COPY_SHARE * len(lettered):
        found.add("copy")
    # (an empty output too: the search gave up on a source it was given, the shortest output there is)
    if not _length_ratio_fits(len(s.source_ids), len(s.output_ids), settings):
        found.add("length_ratio")
    if s.output_ids and _uncovered(s.source_text.split(), source_words, attention.sum(dim=0)):
        found.add("uncovered_source")
    if len(s.source_pieces) > len(s.source_ids):
        found.add("truncated")
    return [code for code in WARNINGS if code in found]


def with_warnings(warnings: Sequence[str], more: Sequence[str]) -> list[str]:
    """`warnings` and `more`, each code once, in the order of `WARNINGS`."""
    found = {*warnings, *more}
    return [code for code in WARNINGS if code in found]


def length_ratio(source_tokens: int, output_tokens: int) -> float:
    """(output tokens + 1) / (source tokens + 1): the ratio the training data's bounds are learned on (the
    + 1 counts EOS and keeps one-word sentences from swinging the ratio by whole multiples)."""
    return (output_tokens + 1) / (source_tokens + 1)


def length_ratio_bounds(source_tokens: np.ndarray, target_tokens: np.ndarray) -> tuple[float, float]:
    """The `LENGTH_RATIO_QUANTILES` of a training corpus's `length_ratio`s: (N,) tokens per side -> (low, high),
    what `tnmt train` stores in the checkpoint's decoding settings."""
    ratios = (target_tokens.astype(np.float64) + 1) / (source_tokens.astype(np.float64) + 1)
    low, high = np.quantile(ratios, LENGTH_RATIO_QUANTILES)
    return round(float(low), 4), round(float(high), 4)


def _length_ratio_fits(source_tokens: int, output_tokens: int, settings: DecodeConfig) -> bool:
    """Within the settings' bounds, each 0 meaning no bound on that side."""
    ratio = length_ratio(source_tokens, output_tokens)
    low, high = settings.length_ratio_min, settings.length_ratio_max
    return (not low or ratio >= low) and (not high or ratio <= high)


def _uncovered(words: list[str], source_words: list[int], coverage: Tensor) -> bool:
    """Whether a source word with letters received less than COVERAGE_MIN attention in all (coverage: (n_src,)
    summed over the output's tokens, per source subword)."""
    per_word = [0.0] * len(words)
    for k, word in enumerate(source_words):
        per_word[word] += float(coverage[k])
    seen = set(source_words)  # words past a truncation were not decoded: "truncated" says so
    return any(i in seen and _LETTER.search(w) and per_word[i] < COVERAGE_MIN for i, w in enumerate(words))
