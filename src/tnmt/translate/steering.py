"""Steering a translation by text: a glossary, do-not-translate terms, required and avoided phrases, a prefix.

A `Steering` says in words what a user wants of one text's translation; `plan` turns it into what the model
reads and the search obeys, and `finish` puts the result back into the user's terms:

- A glossary entry applies where its source term occurs in the text (translate/glossary.py's matching rules) and
  becomes a positive constraint whose forms are its target terms (decode/constraints.py); a required phrase
  (`include`) is one wherever it applies.
- A do-not-translate term, and always URLs, e-mail addresses, emoji, markup and runs of characters outside the
  source vocabulary (translate/kept.py), is taken out of the text the model reads, so it cannot derail the
  translation (a small model fed an unknown name writes it into a compound, or loops on an emoji), and `finish`
  puts it back, as written, beside the target word aligned to its neighbour (the evidence's word alignment).
- An avoided phrase is banned in the spellings a writer would use (as given, and with its first letter in
  upper and lower case), each in its likeliest subword segmentations, at the start of a word or glued to what
  precedes it ("braun-brauner"); the prefix is forced, token by token.

Every check names the entry it refuses (`glossary[2]`, `include[0]`, ...), so a server can answer 4xx.
"""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

import torch
from torch import Tensor

from tnmt.data.tokenizer import WORD_START, starts_word
from tnmt.decode.bans import LONGEST_AVOIDED, has_loop
from tnmt.decode.constraints import Constraints
from tnmt.errors import UserError
from tnmt.translate.evidence import Evidence, piece_words
from tnmt.translate.glossary import GlossaryEntry, match_glossary
from tnmt.translate.kept import Kept, find_kept, merge_spans, put_back, take_out

KNOWN_CHARS = 65536  # characters whose readability a planner remembers
WORD_ENDS = frozenset(".,;:!?)]}\"'»«“”„…/")  # what may follow a met constraint without a space
MAX_CONSTRAINTS = 32  # positive constraints per text: every step considers each one's next tokens
SPELLINGS = 8  # subword segmentations of an avoided phrase that are banned


class SteeringTokenizer(Protocol):
    unk_id: int
    pad_id: int
    bos_id: int
    eos_id: int

    def encode_source_pieces(self, text: str) -> tuple[list[int], list[str]]: ...
    def encode_target(self, text: str) -> list[int]: ...
    def target_segmentations(self, text: str, n: int) -> list[list[int]]: ...
    def target_piece_id(self, piece: str) -> int | None: ...
    def decode_target(self, ids: Sequence[int]) -> str: ...
    def target_pieces(self, ids: Sequence[int]) -> list[str]: ...


@dataclass(frozen=True)
class Steering:
    """What a user asks of one text's translation, in words.

    glossary: source term -> target forms, applied where the source term occurs.
    do_not_translate: terms copied to the output as they are.
    include: phrases the output must contain, each as its forms (any one will do).
    avoid: phrases the output must not contain.
    prefix: the start of the output, as written.
    keep_unreadable: pass URLs, e-mail addresses, emoji and characters the model cannot read through untouched.
    """

    glossary: tuple[GlossaryEntry, ...] = ()
    do_not_translate: tuple[str, ...] = ()
    include: tuple[tuple[str, ...], ...] = ()
    avoid: tuple[str, ...] = ()
    prefix: str = ""
    keep_unreadable: bool = True


@dataclass(frozen=True)
class ConstraintReport:
    """How a translation met one positive constraint: its forms as the user gave them ("Hund | Hunde"), where it
    came from ("glossary" or "include"), and the target words that meet it (empty: not met)."""

    target: str
    met: bool
    words: tuple[int, ...] = ()
    source: str = "include"


@dataclass(frozen=True)
class Plan:
    """One text as the model reads it and the search obeys it (`plan`), and what `finish` needs to answer."""

    text: str  # the text less its kept spans
    constraints: Constraints
    labels: tuple[tuple[str, str], ...] = ()  # per positive constraint: (its forms joined by " | ", its source)
    kept: tuple[Kept, ...] = ()
    forms: tuple[tuple[str, ...], ...] = field(default=(), compare=False)  # per positive constraint, as text
    source_words: tuple[int, ...] = ()  # each word of `text`: its index among the full text's words

    @property
    def steers(self) -> bool:
        """Does the search or the answer differ from a plain translation's?"""
        c = self.constraints
        return bool(c.required or c.avoided or c.prefix or c.allow_loops or self.kept)


class Planner:
    """`plan` for every text a translator reads, with what it learns of its vocabularies once: which characters
    the source vocabulary reads (`keep_unreadable` asks per character) and which target ids continue a word."""

    def __init__(self, tokenizer: SteeringTokenizer, *, target_vocab_size: int, device: torch.device) -> None:
        self.tokenizer = tokenizer
        self.target_vocab_size = target_vocab_size
        self.device = device
        self._known_chars: dict[str, bool] = {}
        self._joiners: Tensor | None = None

    def plans(self, texts: Sequence[str], steering: Sequence[Steering | None], *, max_tokens: int) -> list[Plan]:
        """Each text as the model will read it and the constraints of its search (`plan`).

        Raises:
            UserError: an entry that cannot be met, or not one steering per text.
        """
        if len(steering) != len(texts):
            raise UserError(f"one steering per text: got {len(steering)} for {len(texts)} texts")
        joiners = self._continuations() if any(s is not None for s in steering) else None
        return [
            plan(text, s, self.tokenizer, readable=self._readable, max_tokens=max_tokens, continuations=joiners)
            for text, s in zip(texts, steering, strict=True)
        ]

    def _continuations(self) -> Tensor:
        """(V,) True on the target ids that continue a word (`Constraints.continuations`): pieces that do not start
        a word other than closing punctuation ("Haus" + "es", "Jonas" + "-Shirt"; not "Haus" + "."), the special
        tokens excepted. Built once."""
        if self._joiners is None:
            t = self.tokenizer
            specials = {t.pad_id, t.bos_id, t.eos_id, t.unk_id}
            joins = [
                i not in specials and not starts_word(piece) and piece[:1] not in WORD_ENDS
                for i, piece in enumerate(t.target_pieces(range(self.target_vocab_size)))
            ]
            self._joiners = torch.tensor(joins, dtype=torch.bool, device=self.device)
        return self._joiners

    def _readable(self, char: str) -> bool:
        """Is `char` in the source vocabulary (encoded without an unknown piece)? Cached: a text asks per char."""
        known = self._known_chars.get(char)
        if known is None:
            if len(self._known_chars) >= KNOWN_CHARS:  # a server fed every code point keeps a bounded cache
                self._known_chars.clear()
            known = self._known_chars[char] = self.tokenizer.unk_id not in self.tokenizer.encode_source_pieces(char)[0]
        return known


def plan(
    text: str,
    steering: Steering | None,
    tokenizer: SteeringTokenizer,
    *,
    readable: Callable[[str], bool] | None,
    max_tokens: int,
    continuations: Tensor | None = None,
) -> Plan:
    """What the model reads of `text` and the constraints of its search; `readable(char)`: is a character in the
    source vocabulary; `max_tokens`: the most output tokens the model can write (a constraint longer is refused);
    `continuations`: (V,) True on target ids that continue a word (`Constraints.continuations`).

    Raises:
        UserError: an entry that cannot be met (empty, longer than the model's positions, more constraints than
            `MAX_CONSTRAINTS`, a required form or the prefix containing an avoided phrase); the message names it.
    """
    steering = steering or Steering()
    auto = find_kept(text, (), readable=readable) if steering.keep_unreadable else []
    listed = find_kept(text, steering.do_not_translate) if steering.do_not_translate else []
    read, kept, source_words_full = take_out(text, merge_spans([*auto, *listed]))
    glossed = bool(steering.glossary) and bool(read)  # the source tokens of its terms: only a glossary needs them
    source_words = piece_words(tokenizer.encode_source_pieces(read)[1], read) if glossed else []
    include: list[tuple[tuple[int, ...], ...]] = []
    labels: list[tuple[str, str]] = []
    forms_text: list[tuple[str, ...]] = []
    sources: list[tuple[int, int] | None] = []
    for match in match_glossary(read, steering.glossary):
        where = f"glossary entry {match.entry.source!r}"
        include.append(_forms(match.entry.targets, tokenizer, where=where, max_tokens=max_tokens))
        labels.append((" | ".join(match.entry.targets), "glossary"))
        forms_text.append(match.entry.targets)
        sources.append(_source_tokens(read, match.start, match.end, source_words))
    for c, forms in enumerate(steering.include):
        include.append(_forms(forms, tokenizer, where=f"include[{c}]", max_tokens=max_tokens))
        labels.append((" | ".join(forms), "include"))
        forms_text.append(tuple(forms))
        sources.append(None)
    if len(include) > MAX_CONSTRAINTS:
        raise UserError(f"{len(include)} phrases to include in one text: at most {MAX_CONSTRAINTS}")
    if sum(min(len(form) for form in forms) for forms in include) > max_tokens:
        raise UserError(f"the phrases to include need more than the {max_tokens} tokens the output may have")
    avoid = _avoided(steering.avoid, tokenizer, max_tokens=max_tokens)
    prefix = tuple(tokenizer.encode_target(steering.prefix)) if steering.prefix.strip() else ()
    if len(prefix) > max_tokens:
        raise UserError(f"prefix: {len(prefix)} tokens, more than the {max_tokens} the output may have")
    _check_conflicts(include, labels, prefix, avoid, tokenizer)
    constraints = Constraints(
        tuple(include),
        avoid,
        prefix,
        allow_loops=has_loop(read.lower().split()),
        continuations=continuations,
        sources=tuple(sources) if any(span is not None for span in sources) else (),
    )
    return Plan(read, constraints, tuple(labels), tuple(kept), tuple(forms_text), source_words_full)


def finish(
    plan_: Plan,
    text: str,
    tokens: Sequence[int],
    spans: Sequence[tuple[int, int] | None],
    evidence: Evidence | None,
    tokenizer: SteeringTokenizer,
) -> tuple[str, tuple[ConstraintReport, ...], Evidence | None]:
    """A translation `text` (ids `tokens`, the search's constraint `spans`) in the user's terms: the kept spans
    placed by `evidence`'s alignment, each positive constraint's report, and the evidence over the full texts."""
    words_of = piece_words(tokenizer.target_pieces(list(tokens)), text) if tokens else []
    reports = []
    for (label, source), forms, span in zip(plan_.labels, plan_.forms, _padded(spans, len(plan_.labels)), strict=True):
        if span is not None and words_of:
            words = tuple(sorted({words_of[t] for t in range(*span)}))
        else:  # the model may spell a form with other subwords: the text decides
            words = _find_words(text, forms)
        reports.append(ConstraintReport(label, bool(words), words, source))
    if not plan_.kept:
        return text, tuple(reports), evidence
    final, word_at, proof = put_back(text, plan_.text, plan_.kept, evidence, plan_.source_words)
    reports = [replace(r, words=tuple(word_at[j] for j in r.words)) for r in reports]
    return final, tuple(reports), proof


def _source_tokens(text: str, start: int, end: int, piece_word: Sequence[int]) -> tuple[int, int] | None:
    """The source tokens [first, last + 1) of the words that characters [start, end) of `text` touch, given the
    word of each source piece; None when the source's pieces do not reach them."""
    first, last = len(text[:start].split()), len(text[:end].split()) - 1
    tokens = [t for t, word in enumerate(piece_word) if first <= word <= last]
    return (tokens[0], tokens[-1] + 1) if tokens else None


def _forms(
    forms: Sequence[str], tokenizer: SteeringTokenizer, *, where: str, max_tokens: int
) -> tuple[tuple[int, ...], ...]:
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


def _avoided(phrases: Sequence[str], tokenizer: SteeringTokenizer, *, max_tokens: int) -> tuple[tuple[int, ...], ...]:
    """Each avoided phrase in the spellings a writer would use (as given, and with its first letter in upper and
    lower case), each in the `SPELLINGS` likeliest ways to write it in subwords: the model may pick another."""
    out: dict[tuple[int, ...], None] = {}
    for n, phrase in enumerate(phrases):
        phrase = phrase.strip()
        if not phrase:
            raise UserError(f"avoid[{n}]: an empty phrase")
        for variant in dict.fromkeys((phrase, phrase[0].upper() + phrase[1:], phrase[0].lower() + phrase[1:])):
            for spelling in tokenizer.target_segmentations(variant, SPELLINGS):
                ids = tuple(spelling)
                if len(ids) > LONGEST_AVOIDED:
                    raise UserError(
                        f"avoid[{n}]: {phrase!r} is {len(ids)} tokens, more than the {LONGEST_AVOIDED} a search checks"
                    )
                out[ids] = None
                if (glued := _glued(ids, tokenizer)) is not None:
                    out[glued] = None
    return tuple(ids for ids in out if ids)


def _glued(ids: tuple[int, ...], tokenizer: SteeringTokenizer) -> tuple[int, ...] | None:
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


def _check_conflicts(
    include: Sequence[tuple[tuple[int, ...], ...]],
    labels: Sequence[tuple[str, str]],
    prefix: tuple[int, ...],
    avoid: Sequence[tuple[int, ...]],
    tokenizer: SteeringTokenizer,
) -> None:
    """A required form or the prefix that contains an avoided phrase can never be written: name both."""
    for phrase in avoid:
        n = len(phrase)
        for (label, _), forms in zip(labels, include, strict=True):
            if all(any(form[i : i + n] == phrase for i in range(len(form) - n + 1)) for form in forms):
                raise UserError(f"{label!r} is required and avoided ({tokenizer.decode_target(phrase)!r})")
        if any(prefix[i : i + n] == phrase for i in range(len(prefix) - n + 1)):
            raise UserError(f"the prefix contains the avoided {tokenizer.decode_target(phrase)!r}")


def _padded(spans: Sequence[tuple[int, int] | None], n: int) -> list[tuple[int, int] | None]:
    return list(spans) + [None] * (n - len(spans))


def _find_words(text: str, forms: Sequence[str]) -> tuple[int, ...]:
    """The words of `text` that spell one of `forms` (case-insensitive, whole words), first occurrence."""
    words = [w.strip(".,;:!?\"'()[]").casefold() for w in text.split()]
    for form in forms:
        wanted = form.casefold().split()
        for j in range(len(words) - len(wanted) + 1):
            if words[j : j + len(wanted)] == wanted:
                return tuple(range(j, j + len(wanted)))
    return ()
