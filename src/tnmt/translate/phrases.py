"""A phrase in target ids: the forms a positive constraint accepts, and every spelling a search must ban.

A glossary term or a phrase to include is required in one of its forms, each as the tokenizer writes it
(`target_forms`); a phrase to avoid, or a word a term replaces (translate/replaced.py), is banned in every way the
model could write it (`spellings`): as a writer would spell it, in its likeliest subword segmentations, and glued
to the word before. A required form that contains an avoided phrase can never be written (`check_conflicts`).
"""

from collections.abc import Sequence
from typing import Protocol

from tnmt.data.tokenizer import WORD_START, starts_word
from tnmt.decode.bans import LONGEST_AVOIDED
from tnmt.errors import UserError


class PhraseTokenizer(Protocol):
    """What a phrase's ids need of `tnmt.data.tokenizer.Tokenizer` (a `SteeringTokenizer` is one)."""

    def encode_target(self, text: str) -> list[int]: ...
    def target_segmentations(self, text: str, n: int) -> list[list[int]]: ...
    def target_piece_id(self, piece: str) -> int | None: ...
    def decode_target(self, ids: Sequence[int]) -> str: ...
    def target_pieces(self, ids: Sequence[int]) -> list[str]: ...


SPELLINGS = 8  # subword segmentations of an avoided phrase that are banned


def target_forms(
    forms: Sequence[str], tokenizer: PhraseTokenizer, *, where: str, max_tokens: int
) -> tuple[tuple[int, ...], ...]:
    """A phrase's forms as target ids (each stripped, duplicates dropped), for a positive constraint.

    Raises:
        UserError: an empty form, or one longer than `max_tokens`; the message starts with `where`.
    """
    encoded = []
    for form in forms:
        if not form.strip():
            raise UserError(f"{where}: an empty target term")
        ids = tuple(tokenizer.encode_target(form.strip()))
        if len(ids) > max_tokens:
            raise UserError(f"{where}: {form!r} is {len(ids)} tokens, more than the {max_tokens} the output may have")
        encoded.append(ids)
    if not encoded:
        raise UserError(f"{where}: no target term")
    return tuple(dict.fromkeys(encoded))


def avoided(phrases: Sequence[str], tokenizer: PhraseTokenizer, *, max_tokens: int) -> tuple[tuple[int, ...], ...]:
    """Each avoided phrase in every spelling a search must ban (`spellings`)."""
    out: dict[tuple[int, ...], None] = {}
    for n, phrase in enumerate(phrases):
        phrase = phrase.strip()
        if not phrase:
            raise UserError(f"avoid[{n}]: an empty phrase")
        for ids in spellings(phrase, tokenizer):
            if len(ids) > LONGEST_AVOIDED:
                raise UserError(
                    f"avoid[{n}]: {phrase!r} is {len(ids)} tokens, more than the {LONGEST_AVOIDED} a search checks"
                )
            out[ids] = None
    return tuple(out)


def spellings(phrase: str, tokenizer: PhraseTokenizer) -> list[tuple[int, ...]]:
    """The ways a search must ban to never write `phrase` (a non-blank text): the spellings a writer would use (as
    given, and with its first letter in upper and lower case), each in the `SPELLINGS` likeliest ways to write it
    in subwords (the model may pick another), and each glued to what precedes it (`_glued`)."""
    out: dict[tuple[int, ...], None] = {}
    for variant in dict.fromkeys((phrase, phrase[0].upper() + phrase[1:], phrase[0].lower() + phrase[1:])):
        for spelling in tokenizer.target_segmentations(variant, SPELLINGS):
            out[tuple(spelling)] = None
            if spelling and (glued := _glued(tuple(spelling), tokenizer)) is not None:
                out[glued] = None
    return [ids for ids in out if ids]


def _glued(ids: tuple[int, ...], tokenizer: PhraseTokenizer) -> tuple[int, ...] | None:
    """A spelling as it reads glued to what comes before ("braun-brauner", "T-T-Shirt", "„Mo-Mo"): its first
    piece without sentencepiece's "▁" (a lone "▁" dropped); None when the vocabulary has no such piece, or when
    it would be one piece of 3 letters or fewer, which many words hold."""
    first = tokenizer.target_pieces(ids[:1])[0]
    if not starts_word(first):
        return None
    if first == WORD_START:
        return ids[1:] or None
    bare = tokenizer.target_piece_id(first[1:])
    if bare is None or (len(ids) == 1 and len(first) <= 4):  # a short lone piece ("er") is inside many words
        return None
    return (bare, *ids[1:])


def check_conflicts(
    include: Sequence[tuple[tuple[int, ...], ...]],
    labels: Sequence[tuple[str, str]],
    prefix: tuple[int, ...],
    avoid: Sequence[tuple[int, ...]],
    tokenizer: PhraseTokenizer,
) -> None:
    """A required form or the prefix that contains an avoided phrase can never be written: name both."""
    for phrase in avoid:
        n = len(phrase)
        for (label, _), forms in zip(labels, include, strict=True):
            if all(any(form[i : i + n] == phrase for i in range(len(form) - n + 1)) for form in forms):
                raise UserError(f"{label!r} is required and avoided ({tokenizer.decode_target(phrase)!r})")
        if any(prefix[i : i + n] == phrase for i in range(len(prefix) - n + 1)):
            raise UserError(f"the prefix contains the avoided {tokenizer.decode_target(phrase)!r}")
