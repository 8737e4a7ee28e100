"""A text prepared once for the search: its steering planned and what the model reads of it tokenised.

Every feature of a `Translator` (translations, a trace, word replacements, a look inside) and the server's
batcher read a text through its `Prepared` form, so nothing is planned or tokenised twice, and what a feature
shows is what the search saw: the text less its kept spans (URLs, emoji, do-not-translate terms), cut to the
model's positions.
"""

from collections.abc import Sequence
from dataclasses import dataclass, replace

from tnmt.decode.rules import fit_source
from tnmt.errors import UserError
from tnmt.translate.steering import Plan, Planner, Steering, SteeringTokenizer


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
) -> list[Prepared]:
    """Each text planned (`Planner.plans`; `max_tokens`: the most output tokens) and what the model reads of it
    tokenised, cut to `model_max_len - 1` positions with a warning naming its line (`lines`: each text's),
    its decoder starting from `start`.

    Raises:
        UserError: a steering entry that cannot be met, or not one steering per text.
    """
    prepared = []
    plans = planner.plans(texts, steering, max_tokens=max_tokens)
    for text, plan, line in zip(texts, plans, lines, strict=True):
        source = None
        if plan.text.strip():
            ids, pieces = tokenizer.encode_source_pieces(plan.text)
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
