"""Lexical constraints: target phrases a translation must contain (required), phrases it must not (avoided), and a
prefix it must start with, as target ids; and how far a hypothesis is in meeting the required ones.

A required phrase (`Constraints.required`, a positive constraint in the literature) lists one or more forms
("Hund" | "Hunde" as ids): writing any one of them meets it. Forcing a constraint in at the first step would put it
in the wrong place, and a beam left alone never writes it, so each step (decode/allocation.py) considers, beside
the 2K best extensions, every open hypothesis's best token and every token that starts or continues a form it has
not met yet (Post & Vilar, 2018). A candidate's *bank* is how far it got (`Progress.bank`): constraints met, then
tokens into a form under way. The beam keeps the best candidate of every bank, most advanced bank first, and fills
the rest by score (decode/allocation.py's `_allocation`), so the K beams hold hypotheses at every stage of meeting
the constraints, not only the likeliest ones (which have met none). With no constraints every candidate is in bank
0 and the order is plain beam search's. With one beam the most advanced bank always wins: each constraint is
written at the first step it can start (a beam of one cannot keep a hypothesis that waits for a better place).

A hypothesis may end (write EOS) only once every constraint is met, unless the tokens left before the
length limit are too few to meet them; the finished hypothesis then reports which were not met (None in
`Progress.spans`). A form must be written as the ids given: the model spelling the same text with other
subwords does not meet it (the Translator checks the text as well).

A glossary term replaces a word: the model's own translation of the term's source (`Constraints.replaced`, learned
by translate/replaced.py from a plain pass) is banned in the sentence, as an avoided phrase is, so the term takes
its place instead of joining it ("Ein junges Mädchen Mädel springt"). The ban holds at every step, not only while
the aligning attention reads the term's source: the attention of the step that writes a word is off by one word
often enough that a ban tied to it lets the model's word through beside the term.
"""

from dataclasses import dataclass, field

from torch import Tensor

Phrase = tuple[int, ...]


@dataclass(frozen=True)
class Constraints:
    """What one sentence's search must and must not write.

    required: phrases the output must contain, each a tuple of forms (any one meets it), each form non-empty target
        ids.
    avoided: phrases (target ids) never written.
    prefix: ids the output starts with, forced whatever the model prefers.
    allow_loops: the source itself repeats a phrase back to back, so the output may too (decode/bans.py).
    continuations: (V,) True on the ids that continue a word (subwords without a leading space): never written
        right after a form is met, so "Haus" is not met inside "Hauses" (None: no such rule).
    sources: per required phrase, the source tokens [start, end) it translates (a glossary term's), None for
        one that belongs nowhere in particular; empty: none does. A constraint with a source is offered to a
        hypothesis only at a step whose aligning cross-attention looks at those tokens (`Progress.wants`).
    replaced: per required phrase, the model's own words for its source (target ids, each in the spellings to
        ban), never written: the term replaces them (module docstring); empty: no constraint replaces any.
    """

    required: tuple[tuple[Phrase, ...], ...] = ()
    avoided: tuple[Phrase, ...] = ()
    prefix: Phrase = ()
    allow_loops: bool = False
    continuations: Tensor | None = field(default=None, compare=False, repr=False)
    sources: tuple[tuple[int, int] | None, ...] = ()  # per required phrase: source tokens [start, end) it translates
    replaced: tuple[tuple[Phrase, ...], ...] = ()  # per required phrase: the model's own words it replaces, banned

    def __post_init__(self) -> None:
        for name in ("sources", "replaced"):
            if (n := len(getattr(self, name))) and n != len(self.required):
                raise ValueError(f"{name}: one per constraint, got {n} for {len(self.required)} required")
        for c, forms in enumerate(self.required):
            if not forms or any(not form for form in forms):
                raise ValueError(f"required[{c}]: every constraint needs at least one non-empty form, got {forms}")
        if any(not phrase for phrase in self.banned):
            raise ValueError("avoided, replaced: an empty phrase cannot be banned")
        forms = [form for phrase in self.required for form in phrase]
        for phrase in (phrase for words in self.replaced for phrase in words):
            if any(_contains(form, phrase) for form in forms):
                raise ValueError(f"replaced: {phrase} is inside a required form, which could then never be written")

    @property
    def banned(self) -> tuple[Phrase, ...]:
        """Every phrase the output must not contain: the avoided ones and the words the terms replace."""
        return self.avoided + tuple(phrase for words in self.replaced for phrase in words)


NO_CONSTRAINTS = Constraints()


class ProgressTable:
    """One sentence's `Constraints` as one search reads them, with the memo that `Progress` fills.

    The search's set-up makes one per sentence (decode/beam.py's `_init`) and drops it with the search, so the
    memo, which grows as the beams go, never lives in the `Constraints` value that callers keep and share. The memo
    is there for speed: every candidate that starts or continues a form gets a new `Progress`, and its need, bank
    and wanted tokens depend only on which constraints are unmet and which forms are under way, the same few keys
    for every beam of the sentence.
    """

    def __init__(self, constraints: Constraints) -> None:
        forms = [form for phrase in constraints.required for form in phrase]
        self.constraints = constraints
        # banks per constraint met: the longest form's length, so that meeting one more outranks any progress in one
        self.width = max((len(form) for form in forms), default=0) + 1
        self.tokens = frozenset(token for form in forms for token in form)  # outside them, a token advances nothing
        self.first_tokens = frozenset(form[0] for form in forms)
        self.measured: dict[tuple, tuple[int, int]] = {}  # (unmet, partial) -> (tokens needed, bank)
        self.wanted: dict[tuple, set[int]] = {}  # (unmet, partial) -> the tokens that advance them, anywhere


@dataclass(frozen=True)
class Progress:
    """How far one hypothesis is in meeting its sentence's `required` phrases.

    spans: per constraint, the output positions [start, end) of the form that met it, None while unmet.
    partial: (constraint, form, tokens written) of every form under way: the output ends with that many of its
        first tokens.
    needed: the fewest tokens that could still meet every unmet constraint (forms under way counted as begun).
    bank: the allocation's bank: constraints met, then tokens into the furthest form under way.
    `needed` and `bank` are computed once, when the progress is made (`start`, `advance`): a step reads them for
    every candidate.
    """

    spans: tuple[tuple[int, int] | None, ...]
    partial: tuple[tuple[int, int, int], ...] = ()
    needed: int = 0
    bank: int = 0

    @classmethod
    def start(cls, table: ProgressTable) -> "Progress":
        return cls._of(table, (None,) * len(table.constraints.required), ())

    @classmethod
    def _of(
        cls,
        table: ProgressTable,
        spans: tuple[tuple[int, int] | None, ...],
        partial: tuple[tuple[int, int, int], ...],
    ) -> "Progress":
        unmet = tuple(span is None for span in spans)
        key = (unmet, partial)  # need and bank depend on which constraints are met, not where
        if (measured := table.measured.get(key)) is None:
            required, needed = table.constraints.required, 0
            for c, waiting in enumerate(unmet):
                if waiting:
                    begun = {f: n for c2, f, n in partial if c2 == c}
                    needed += min(len(form) - begun.get(f, 0) for f, form in enumerate(required[c]))
            met = len(unmet) - sum(unmet)
            measured = table.measured[key] = (needed, met * table.width + max((n for *_, n in partial), default=0))
        return cls(spans, partial, *measured)

    @property
    def met(self) -> int:
        return sum(span is not None for span in self.spans)

    @property
    def all_met(self) -> bool:
        return all(span is not None for span in self.spans)

    def advance(self, table: ProgressTable, token: int, position: int) -> "Progress":
        """The progress after writing `token` at output position `position`."""
        if token not in table.tokens:  # most tokens: nothing starts, whatever was under way breaks
            return self if not self.partial else self.broken(table)
        required = table.constraints.required
        spans, partial = list(self.spans), []
        steps = [(c, f, n) for c, f, n in self.partial] + [
            (c, f, 0) for c, span in enumerate(self.spans) if span is None for f in range(len(required[c]))
        ]
        taken = set(self.spans)  # an occurrence meets one constraint: a term the source holds twice is written twice
        for c, f, n in steps:
            form = required[c][f]
            if spans[c] is not None or form[n] != token:
                continue
            if n + 1 < len(form):
                partial.append((c, f, n + 1))
            elif (span := (position + 1 - len(form), position + 1)) not in taken:
                spans[c] = span
                taken.add(span)
        kept = tuple(sorted({p for p in partial if spans[p[0]] is None}))
        return Progress._of(table, tuple(spans), kept)

    def broken(self, table: ProgressTable) -> "Progress":
        """This progress with its forms under way broken off: what a token that continues none of them leaves."""
        return Progress._of(table, self.spans, ())

    def wants(self, table: ProgressTable, focus: int | None = None) -> set[int]:
        """The tokens that start a form of an unmet constraint or continue one under way. `focus`: the source token
        the step's aligning attention peaks on; a constraint tied to source tokens starts only when the focus is
        on them or next to them (where a translator would write it), else anywhere."""
        required, sources = table.constraints.required, table.constraints.sources
        anywhere = focus is None or not sources
        key = (tuple(span is None for span in self.spans), self.partial)
        if anywhere and (cached := table.wanted.get(key)) is not None:
            return cached
        wanted = {
            form[0]
            for c, span in enumerate(self.spans)
            if span is None and (anywhere or _near(sources[c], focus))
            for form in required[c]
        }
        wanted |= {required[c][f][n] for c, f, n in self.partial}
        if anywhere:
            table.wanted[key] = wanted
        return wanted

    def just_met(self, position: int) -> bool:
        """Was a form completed by the token at output position `position - 1` (the last one written)?"""
        return any(span is not None and span[1] == position for span in self.spans)

    def may_end(self, tokens_left: int) -> bool:
        """May the hypothesis write EOS now, with `tokens_left` tokens (this one included) before its limit? Only
        when every constraint is met, or when too few tokens are left to meet them."""
        return self.needed == 0 or self.needed > tokens_left


def _contains(form: Phrase, phrase: Phrase) -> bool:
    n = len(phrase)
    return any(form[i : i + n] == phrase for i in range(len(form) - n + 1))


def _near(source: tuple[int, int] | None, focus: int) -> bool:
    """Is the attention's peak on the source tokens [start, end), or one token either side?"""
    return source is None or source[0] - 1 <= focus <= source[1]
