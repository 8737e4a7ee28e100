"""Click a word, pick another, the rest follows: the likeliest replacements of one word of a translation, each
with the best translation that keeps the words before it, uses it, and translates the rest again.

Most words of a good translation are 98-99% certain: their alternatives are not worth showing, and the ones
that are unsure are where a user wants a choice. For target word j, one teacher-forced pass gives the model's
distribution over the token that starts word j after words 0..j-1 (`ModelDoor.teacher_forced`); its k likeliest
word-starting tokens (the current one excluded) are the replacements. Each then becomes a forced prefix of the
text's own prepared search (its steering kept: `Prepared.with_prefix`), and the k translations run as one batch:
each is exactly what a translation asked for with that prefix gives.

"Replacements" are other words for one word; the n-best list (`Translation.alternatives`) is other translations
of the whole text. The server's `/v1/alternatives` answers with replacements (its name is the API's).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tnmt.config import DecodeConfig
from tnmt.data.tokenizer import starts_word
from tnmt.errors import UserError
from tnmt.translate.evidence import piece_words
from tnmt.translate.prepared import Prepared
from tnmt.translate.steering import Steering
from tnmt.translate.translation import Translation
from tnmt.translate.translator import Translator
from tnmt.translate.whole import Split, word_places

MAX_K = 20


@dataclass(frozen=True)
class Replacement:
    """A replacement of the word: the word as the new translation spells it, its probability there (all its
    tokens), and that translation."""

    word: str
    probability: float
    translation: str


@dataclass(frozen=True)
class WordReplacements:
    """The translation, the position and word asked about, and its replacements, likeliest first."""

    translation: Translation
    position: int
    word: str
    replacements: tuple[Replacement, ...]


def word_replacements(
    translator: Translator,
    text: str,
    position: int,
    k: int = 5,
    settings: DecodeConfig | None = None,
    *,
    steering: Steering | None = None,
    prepared: Prepared | None = None,
) -> WordReplacements:
    """The `k` likeliest replacements of target word `position` (0-based over `translation.text.split()`) of
    `text`'s translation, each with the translation it leads to. `prepared`: the text as `Translator.prepare` gave
    it with `steering`, when the caller has it (a server prepares when a request arrives).

    Raises:
        UserError: an empty text, k outside [1, MAX_K], a position outside the translation's words or on a word
            the translation keeps verbatim (translate/steering.py).
    """
    if not text.strip():
        raise UserError("an empty text has no words to replace")
    if not 1 <= k <= MAX_K:
        raise UserError(f"k = {k}: must be from 1 to {MAX_K}")
    settings = settings or translator.decode
    prepared = prepared or translator.prepare([text], [steering], settings)[0]
    best = translator.translate_prepared([prepared], settings)[0]
    final_words = best.text.split()
    if not 0 <= position < len(final_words):
        raise UserError(
            f"position {position}: the translation has {len(final_words)} words (0 to {len(final_words) - 1})"
        )
    read_text = translator.tokenizer.decode_target(best.tokens)  # the model's own words, kept spans out
    read_position = _read_position(final_words, read_text.split(), position)
    if read_position is None:
        raise UserError(f"position {position}: {final_words[position]!r} is kept as written, not translated")
    first = _word_tokens(translator, best.tokens, read_text, read_position)[0]
    prefix = tuple(best.tokens[:first])
    candidates = _next_tokens(translator, prepared, prefix, best.tokens[first], k)
    forced = [prepared.with_prefix((*prefix, token)) for token, _ in candidates]
    found = translator.translate_prepared(forced, settings)
    replacements = sorted((_replacement(translator, t, read_position) for t in found), key=lambda r: -r.probability)
    return WordReplacements(best, position, final_words[position], tuple(replacements))


def _replacement(translator: Translator, translation: Translation, read_position: int) -> Replacement:
    """One re-translation as a replacement: its word at the position (the model's own words) and that word's
    probability (all its tokens)."""
    text = translator.tokenizer.decode_target(translation.tokens)
    words = text.split()
    in_word = _word_tokens(translator, translation.tokens, text, read_position)
    probability = math.exp(sum(translation.token_log_probs[t] for t in in_word)) if in_word else 0.0
    word = words[read_position] if read_position < len(words) else ""
    return Replacement(word, probability, translation.text)


def _word_tokens(translator: Translator, tokens: Sequence[int], text: str, word: int) -> list[int]:
    """The positions of the tokens that spell word `word` of the model's output `tokens` (decoded: `text`)."""
    words_of = piece_words(translator.tokenizer.target_pieces(list(tokens)), text)
    return [t for t, w in enumerate(words_of) if w == word]


def _next_tokens(
    translator: Translator, prepared: Prepared, prefix: Sequence[int], current: int, k: int
) -> list[tuple[int, float]]:
    """The k likeliest tokens that start a word after `prefix`, `current` (the translation's own) and the specials
    excluded, with their probabilities: one teacher-forced pass."""
    tokenizer, config = translator.tokenizer, translator.model.config
    forced = translator.door.teacher_forced([prepared.source], [prefix], weights=False)
    probs = forced.logits[0, -1].float().softmax(dim=-1)  # (V,)
    excluded = {current, config.pad_id, config.bos_id, config.eos_id, tokenizer.unk_id, *config.language_ids}
    found = []
    for token in probs.argsort(descending=True)[: 50 * k].tolist():
        if token in excluded or not starts_word(tokenizer.target_pieces([token])[0]):
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


def text_replacements(
    translator: Translator, split: Split, position: int, k: int = 5, settings: DecodeConfig | None = None
) -> WordReplacements:
    """`word_replacements` over a text cut into sentences (`Translator.split` of one text): `position` counts the
    whole translation's words, the sentence that holds it is re-translated with each replacement, and every
    translation returned is the whole text's, the other sentences as they were.

    Raises:
        UserError: as `word_replacements`, and a position on a word copied between sentences (a list marker).
    """
    settings = settings or translator.decode
    if split.layouts is None:
        [prepared] = split.prepared
        return word_replacements(translator, prepared.text, position, k, settings, prepared=prepared)
    [layout] = split.layouts
    segments = translator.translate_prepared(split.prepared, settings)
    [whole] = translator.translated(split, settings, segments=segments)
    words = whole.text.split()
    if not 0 <= position < len(words):
        raise UserError(f"position {position}: the translation has {len(words)} words (0 to {len(words) - 1})")
    for i, (_, first) in enumerate(word_places(layout, segments)):
        if first <= position < first + len(segments[i].text.split()):
            break
    else:
        raise UserError(f"position {position}: {words[position]!r} is copied as written, not translated")
    prepared = split.prepared[i]
    found = word_replacements(translator, prepared.text, position - first, k, settings, prepared=prepared)
    texts = [s.text for s in segments]
    replaced = tuple(
        replace(r, translation=layout.join([*texts[:i], r.translation, *texts[i + 1 :]])) for r in found.replacements
    )
    return WordReplacements(whole, position, found.word, replaced)
