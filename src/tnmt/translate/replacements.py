"""Click a word, pick another, the rest follows: the likeliest replacements of one word of a translation, each
with the best translation that keeps the words before it, uses it, and translates the rest again.

Most words of a good translation are 98-99% certain: their alternatives are not worth showing, and the ones
that are unsure are where a user wants a choice. For target word j, one teacher-forced pass gives the model's
distribution over the token that starts word j after words 0..j-1; its k likeliest word-starting tokens
(the current one excluded) are the replacements. Each then becomes a forced prefix (decode/bans.py) of a search
that writes the rest, and the k searches run as one batch.
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch

from tnmt.config import DecodeConfig
from tnmt.decode.search import search
from tnmt.errors import UserError
from tnmt.translate.evidence import piece_words
from tnmt.translate.steering import Steering, finish
from tnmt.translate.translator import Translation, Translator

MAX_K = 20


@dataclass(frozen=True)
class Alternative:
    """A replacement of the word: the word as the new translation spells it, its probability there (all its
    tokens), and that translation."""

    word: str
    probability: float
    translation: str


@dataclass(frozen=True)
class WordAlternatives:
    """The translation, the position and word asked about, and its replacements, likeliest first."""

    translation: Translation
    position: int
    word: str
    alternatives: tuple[Alternative, ...]


def word_alternatives(
    translator: Translator,
    text: str,
    position: int,
    k: int = 5,
    settings: DecodeConfig | None = None,
    *,
    steering: Steering | None = None,
) -> WordAlternatives:
    """The `k` likeliest replacements of target word `position` (0-based over `translation.text.split()`) of
    `text`'s translation, each with the translation it leads to.

    Raises:
        UserError: an empty text, k outside [1, MAX_K], a position outside the translation's words or on a word
            the translation keeps verbatim (translate/steering.py).
    """
    if not text.strip():
        raise UserError("an empty text has no words to replace")
    if not 1 <= k <= MAX_K:
        raise UserError(f"k = {k}: must be from 1 to {MAX_K}")
    settings = settings or translator.decode
    plan = translator.plans([text], [steering])[0]
    best = translator.translations([text], settings, plans=[plan])[0]
    final_words = best.text.split()
    if not 0 <= position < len(final_words):
        raise UserError(
            f"position {position}: the translation has {len(final_words)} words (0 to {len(final_words) - 1})"
        )
    read_text = translator.tokenizer.decode_target(best.tokens)
    read_position = _read_position(final_words, read_text.split(), position)
    if read_position is None:
        raise UserError(f"position {position}: {final_words[position]!r} is kept as written, not translated")
    words_of = piece_words(translator.tokenizer.target_pieces(best.tokens), read_text)
    starts = [t for t, w in enumerate(words_of) if w == read_position]
    prefix = tuple(best.tokens[: starts[0]])
    current = best.tokens[starts[0]]
    candidates = _next_tokens(translator, plan.text, prefix, current, k)
    if not candidates:
        return WordAlternatives(best, position, final_words[position], ())
    constraints = [replace(plan.constraints, prefix=(*prefix, token)) for token, _ in candidates]
    sources = translator.encode([plan.text] * len(candidates))
    with torch.inference_mode():
        src = translator.source_batch(sources)
        found = search(translator.model, src, settings, decoder=translator.decoder, constraints=constraints)
    alternatives = []
    for hypotheses in found:
        h = hypotheses[0]
        out = translator.tokenizer.decode_target(h.tokens)
        pieces = piece_words(translator.tokenizer.target_pieces(h.tokens), out)
        in_word = [t for t, w in enumerate(pieces) if w == read_position]
        probability = float(torch.tensor([h.token_log_probs[t] for t in in_word]).sum().exp()) if in_word else 0.0
        word = out.split()[read_position] if read_position < len(out.split()) else ""
        final, _, _ = finish(plan, out, h.tokens, h.constraints, None, translator.tokenizer)
        alternatives.append(Alternative(word, probability, final))
    alternatives.sort(key=lambda a: -a.probability)
    return WordAlternatives(best, position, final_words[position], tuple(alternatives))


def _next_tokens(
    translator: Translator, read_text: str, prefix: Sequence[int], current: int, k: int
) -> list[tuple[int, float]]:
    """The k likeliest tokens that start a word after `prefix`, `current` (the translation's own) and the specials
    excluded, with their probabilities: one teacher-forced pass."""
    tokenizer, config = translator.tokenizer, translator.model.config
    source = translator.encode([read_text])[0]
    with torch.inference_mode():
        src = translator.source_batch([source])
        tgt = torch.tensor([[source.start, *prefix]], device=src.device)
        probs = translator.model(src, tgt)[0, -1].float().softmax(dim=-1)  # (V,)
    excluded = {current, config.pad_id, config.bos_id, config.eos_id, tokenizer.unk_id, *config.language_ids}
    order = probs.argsort(descending=True).tolist()
    found = []
    for token in order[: 50 * k]:
        if token in excluded or not tokenizer.target_pieces([token])[0].startswith("▁"):
            continue
        found.append((token, float(probs[token])))
        if len(found) == k:
            break
    return found


def _read_position(final: list[str], read: list[str], position: int) -> int | None:
    """Word `position` of the final translation as a word of the model's own (the final one has kept spans put
    in: translate/steering.py); None for a kept word."""
    if final == read:
        return position
    j = 0
    for i, word in enumerate(final):
        matches = j < len(read) and word == read[j]
        if i == position:
            return j if matches else None
        j += matches
    return None
