"""One model, many language pairs: directions, target-language tags and how often each direction is trained.

A multilingual model (Johnson et al., 2017) is a plain Transformer trained on the union of several
directions (en->de, de->fr, ...) with one shared vocabulary; what tells it which language to write is a
tag. Johnson et al. put a `<2de>` token at the start of the *source*; tnmt puts it where the decoder
starts, in place of BOS (as mBART and M2M-100 start the decoder from the target language's token). The
encoder then reads exactly the user's text, so everything that maps source pieces back to words (the
alignment, html tags, glossary terms, `tnmt inspect`) needs no exception for a tag, and a batch that mixes
directions differs from a one-pair batch only in its first decoder token. The known price: a model that
sees the target language only through the decoder is more often "off target" in zero-shot directions it
was not trained on (Wu et al., 2021); benchmarks/quality/multilingual.py measures that rate (on Multi30k,
zero-shot en<->cs: 0.2-0.3% of outputs, and 2-2.5 BLEU above pivoting through German: BENCHMARKS).

The tags are sentencepiece control symbols (`<2en>`, ...): ids of their own that no text encodes to.
A direction is written "en-de". The source language never reaches the model; it names which trained
direction a request asks for, and a pair the model was not trained on is refused unless zero-shot
translation is asked for (`check_direction`).
"""

from collections.abc import Sequence

import numpy as np

from tnmt.errors import UserError

Direction = tuple[str, str]  # (source language, target language)


def language_tag(language: str) -> str:
    """The piece that starts the decoder of a multilingual model writing `language`."""
    return f"<2{language}>"


def parse_direction(text: str) -> Direction:
    """("en", "de") of "en-de".

    Raises:
        ValueError: not two different codes joined by one "-".
    """
    source, sep, target = text.partition("-")
    if not sep or not source.strip() or not target.strip() or "-" in target or source == target:
        raise ValueError(f"{text!r} is not a direction such as 'en-de' (two different language codes)")
    return source, target


def direction_name(direction: Direction) -> str:
    return f"{direction[0]}-{direction[1]}"


def all_directions(languages: Sequence[str]) -> list[Direction]:
    """Every ordered pair of different `languages`, the source's order first: 4 languages, 12 directions."""
    return [(a, b) for a in languages for b in languages if a != b]


def directions_of(languages: Sequence[str], listed: Sequence[str]) -> list[Direction]:
    """The directions a recipe trains: those `listed` ("en-de", in their order), or with none listed every pair."""
    return [parse_direction(text) for text in listed] if listed else all_directions(languages)


def check_direction(
    source: str, target: str, *, languages: Sequence[str], trained: Sequence[Direction], zero_shot: bool = False
) -> None:
    """Refuse a pair the model cannot translate, in one line: a language it does not know, or (unless `zero_shot`)
    a direction between known languages that it was not trained on.

    Raises:
        ValueError: naming the pair and what the model translates.
    """
    served = ", ".join(direction_name(d) for d in trained)
    for language in (source, target):
        if language not in languages:
            raise ValueError(f"{source}-{target}: this model knows {', '.join(languages)}, not {language!r}")
    if source == target:
        raise ValueError(f"{source}-{target}: source and target are the same language")
    if (source, target) not in trained and not zero_shot:
        raise ValueError(
            f"{source}-{target} was not trained (trained: {served}); ask for zero-shot translation to try it anyway"
        )


def check_pair(
    source: str, target: str, *, languages: Sequence[str], directions: Sequence[Direction], zero_shot: bool = False
) -> None:
    """Whether a model writing `languages` (none: a one-pair model) and trained on `directions` (() when not known)
    translates `source` -> `target`.

    Raises:
        UserError: a language it does not know, or (unless `zero_shot`) a direction it was not trained on, in one
            line.
    """
    if not languages:
        if directions and (source, target) != directions[0]:
            raise UserError(f"{source}-{target}: this model translates {direction_name(directions[0])} only")
        return
    trained = directions or all_directions(languages)
    try:
        check_direction(source, target, languages=languages, trained=trained, zero_shot=zero_shot)
    except ValueError as err:
        raise UserError(str(err)) from None


def epoch_counts(sizes: Sequence[int], temperature: float) -> list[int]:
    """How many pairs of each direction one epoch trains on: the corpus's pairs in all, shared in proportion to
    size_d^(1/T). T = 1 keeps each direction's size; a large T moves toward equal shares, so a small direction
    is seen more often (its pairs repeated) and a large one less (a sample of its pairs)."""
    sizes_ = np.asarray(sizes, dtype=np.float64)
    if not len(sizes_) or sizes_.sum() == 0:
        return [0] * len(sizes_)
    weights = np.where(sizes_ > 0, sizes_ ** (1.0 / temperature), 0.0)
    shares = weights / weights.sum() * sizes_.sum()
    counts = np.floor(shares).astype(np.int64)
    # the largest remainders get the pairs floor() dropped, so the total is the corpus's
    for i in np.argsort(-(shares - counts), kind="stable")[: int(sizes_.sum() - counts.sum())]:
        counts[i] += 1
    return counts.tolist()


def epoch_indices(sizes: Sequence[int], temperature: float, *, seed: int, epoch: int) -> np.ndarray:
    """The pairs one epoch trains on, as indices into the directions' pairs laid end to end (direction 0's
    first): per direction, `epoch_counts` of them, every pair once when the count is its size, a fresh random
    sample (seeded by seed and epoch) without repeats below it, and all of them plus a sample above it.
    With T = 1, or equal sizes, that is every pair exactly once, as a one-pair corpus trains."""
    counts = epoch_counts(sizes, temperature)
    rng = np.random.default_rng([seed, epoch, 0x3D1])
    parts, start = [], 0
    for size, count in zip(sizes, counts, strict=True):
        whole, rest = divmod(count, size) if size else (0, 0)
        parts += [np.arange(start, start + size)] * whole
        if rest:
            parts.append(start + np.sort(rng.choice(size, rest, replace=False)))
        start += size
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
