"""A text prepared once for the search: its steering planned and what the model reads of it tokenised.

Every feature of a `Translator` (translations, a trace, word replacements, a look inside) and the server's
batcher read a text through its `Prepared` form, so nothing is planned or tokenised twice, and what a feature
shows is what the search saw: the text less its kept spans (URLs, emoji, do-not-translate terms), cut to the
model's positions.
"""

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from tnmt.data.tokenizer import starts_word
from tnmt.decode.rules import fit_source
from tnmt.errors import UserError
from tnmt.translate.inflections import Inflections
from tnmt.translate.kept import take_out
from tnmt.translate.steering import Plan, Steering, SteeringTokenizer, kept_spans
from tnmt.translate.steering import plan as plan_of

KNOWN_CHARS = 65536  # characters whose readability a planner remembers
WORD_ENDS = frozenset(".,;:!?)]}\"'»«“”„…/")  # what may follow a met constraint without a space


@dataclass(frozen=True)
class Source:
    """What the model reads of a text, tokenised once: the ids decoded, and the pieces of the whole text, which
    label its attention and map its subwords onto words for the evidence."""

    ids: list[int]  # without EOS, cut to the model's max_len - 1 positions
    pieces: list[str] | None  # every piece of the text (more than `ids` when it was cut); None: ids given alone,
    # by a caller that asks for neither attention nor evidence (validation during training)
    start: int  # the decoder's first input: BOS, or the target language's tag (a multilingual model)


@dataclass(frozen=True)
class Prepared:
    """One text as a translator searches it: its plan and its source."""

    text: str  # as the caller gave it
    plan: Plan | None  # what the model reads and the search obeys; None: ids given alone (`given_ids`)
    source: Source | None  # the ids of what the model reads; None: nothing is decoded (empty, or all kept)

    @property
    def read(self) -> str:
        """The text the model reads: the caller's less its kept spans."""
        return self.text if self.plan is None else self.plan.text

    @property
    def steers(self) -> bool:
        """Does its search or its answer differ from a plain translation's?"""
        return self.plan is not None and self.plan.steers

    def searched(self) -> Source:
        """The source, for a feature that reads the model (a trace, a look inside).

        Raises:
            UserError: the model reads nothing of the text (all of it kept as written).
        """
        if self.source is None:
            raise UserError("nothing of this text is translated: it is all kept as written")
        return self.source

    def with_prefix(self, prefix: tuple[int, ...]) -> "Prepared":
        """This text with its output forced to start with `prefix` (target ids), its other steering kept."""
        plan = replace(self.plan, constraints=replace(self.plan.constraints, prefix=prefix))
        return replace(self, plan=plan)


class Tokenised:
    """What the model reads of each segment, tokenised once: the fit test, the steering plan and the prepared
    source of one read (`Reader.split`) all ask it, so no segment is tokenised twice."""

    def __init__(self, tokenizer: SteeringTokenizer) -> None:
        self.tokenizer = tokenizer
        self._read: dict[str, tuple[list[int], list[str]]] = {}

    def __call__(self, text: str) -> tuple[list[int], list[str]]:
        """The source ids and pieces of `text` (copies: a caller may insert into them)."""
        found = self._read.get(text)
        if found is None:
            found = self._read[text] = self.tokenizer.encode_source_pieces(text)
        return list(found[0]), list(found[1])

    def fits(self, text: str, limit: int) -> bool:
        """Whether `text` is at most `limit` source tokens. Its reading is kept only when it fits: a segment that
        does not is cut and its parts read instead, so one giant sentence's halvings are not all held."""
        found = self._read.get(text) or self.tokenizer.encode_source_pieces(text)
        if len(found[0]) > limit:
            return False
        self._read[text] = found
        return True


class Planner:
    """`plan` for every text a translator reads, with what it learns of its vocabularies once: which characters
    the source vocabulary reads (`keep_unreadable` asks per character) and which target ids continue a word."""

    def __init__(self, tokenizer: SteeringTokenizer, *, target_vocab_size: int, device: torch.device) -> None:
        self.tokenizer = tokenizer
        self.target_vocab_size = target_vocab_size
        self.device = device
        self._known_chars: dict[str, bool] = {}
        self._joiners: Tensor | None = None
        self._pieces: list[str] | None = None
        self._inflections: Inflections | None = None
        self._lock = threading.Lock()  # a server's threads plan and search at once: each table is built once

    def plans(
        self,
        texts: Sequence[str],
        steering: Sequence[Steering | None],
        *,
        max_tokens: int,
        tokenise: "Tokenised | None" = None,
    ) -> list[Plan]:
        """Each text as the model will read it and the constraints of its search (`plan`).

        Raises:
            UserError: an entry that cannot be met, or not one steering per text.
        """
        if len(steering) != len(texts):
            raise UserError(f"one steering per text: got {len(steering)} for {len(texts)} texts")
        joiners = self._continuations() if any(s is not None for s in steering) else None
        options = {"readable": self._readable, "max_tokens": max_tokens, "continuations": joiners, "tokenise": tokenise}
        return [plan_of(text, s, self.tokenizer, **options) for text, s in zip(texts, steering, strict=True)]

    @property
    def target_pieces(self) -> list[str]:
        """Every piece of the target vocabulary, by id. Read once."""
        if self._pieces is None:
            with self._lock:
                if self._pieces is None:
                    self._pieces = self.tokenizer.target_pieces(range(self.target_vocab_size))
        return self._pieces

    @property
    def inflections(self) -> Inflections:
        """The target vocabulary's word-starting pieces by stem, for the words glossary terms replace. Built once,
        when a glossary first applies."""
        if self._inflections is None:
            pieces = self.target_pieces
            with self._lock:
                if self._inflections is None:
                    self._inflections = Inflections(pieces)
        return self._inflections

    def _continuations(self) -> Tensor:
        """(V,) True on the target ids that continue a word (`Constraints.continuations`): pieces that do not start
        a word other than closing punctuation ("Haus" + "es", "Jonas" + "-Shirt"; not "Haus" + "."), the special
        tokens excepted. Built once."""
        if self._joiners is None:
            t = self.tokenizer
            specials = {t.pad_id, t.bos_id, t.eos_id, t.unk_id}
            joins = [
                i not in specials and not starts_word(piece) and piece[:1] not in WORD_ENDS
                for i, piece in enumerate(self.target_pieces)
            ]
            self._joiners = torch.tensor(joins, dtype=torch.bool, device=self.device)
        return self._joiners

    def read(self, text: str, steering: Steering | None) -> str:
        """What the model reads of `text` under `steering`: the text less the spans kept as written (`plan`'s),
        which is what a segment's fit is measured on."""
        return take_out(text, kept_spans(text, steering or Steering(), readable=self._readable))[0]

    def _readable(self, char: str) -> bool:
        """Is `char` in the source vocabulary (encoded without an unknown piece)? Cached: a text asks per char."""
        known = self._known_chars.get(char)
        if known is None:
            if len(self._known_chars) >= KNOWN_CHARS:  # a server fed every code point keeps a bounded cache
                self._known_chars.clear()
            known = self._known_chars[char] = self.tokenizer.unk_id not in self.tokenizer.encode_source_pieces(char)[0]
        return known


def prepare(
    texts: Sequence[str],
    steering: Sequence[Steering | None],
    *,
    planner: Planner,
    tokenizer: SteeringTokenizer,
    start: int,
    model_max_len: int,
    max_tokens: int,
    lines: Sequence[int],
    tokenise: "Tokenised | None" = None,
) -> list[Prepared]:
    """Each text planned (`Planner.plans`; `max_tokens`: the most output tokens) and what the model reads of it
    tokenised (by `tokenise`, which holds what was read already, when given), cut to `model_max_len - 1` positions
    with a warning naming its line (`lines`: each text's), its decoder starting from `start`.

    Raises:
        UserError: a steering entry that cannot be met, or not one steering per text.
    """
    prepared = []
    tokenise = tokenise or Tokenised(tokenizer)
    plans = planner.plans(texts, steering, max_tokens=max_tokens, tokenise=tokenise)
    for text, plan, line in zip(texts, plans, lines, strict=True):
        source = None
        if plan.text.strip():
            ids, pieces = tokenise(plan.text)
            for at, inserted in reversed(plan.inline):  # a model trained to read its glossary's terms inline
                ids[at:at], pieces[at:at] = list(inserted), tokenizer.target_pieces(inserted)
            source = Source(fit_source(ids, model_max_len=model_max_len, line=line), pieces, start)
        prepared.append(Prepared(text, plan, source))
    return prepared


def given_ids(texts: Sequence[str], ids: Sequence[list[int]], starts: Sequence[int]) -> list[Prepared]:
    """Texts with their source ids (fitted to the model, no EOS) and start tokens, read as they are: nothing
    planned, kept or reported (validation during training, which tokenised them already)."""
    return [
        Prepared(text, None, Source(row, None, start) if text.strip() else None)
        for text, row, start in zip(texts, ids, starts, strict=True)
    ]


def length_batches(prepared: Sequence[Prepared], batch_size: int) -> list[list[int]]:
    """The indices of `prepared` by source length, longest first (a batch pads little), `batch_size` per batch;
    texts without a source in none. The sort is stable and every batch but the last is full."""
    lengths = {i: len(p.source.ids) for i, p in enumerate(prepared) if p.source is not None}
    order = sorted(lengths, key=lambda i: -lengths[i])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
