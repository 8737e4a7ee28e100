"""Steering a translation by text: a glossary, do-not-translate terms, required and avoided phrases, a prefix.

A `Steering` says in words what a user wants of one text's translation; `plan` turns it into what the model
reads and the search obeys, and `finish` puts the result back into the user's terms:

- A glossary entry applies where its source term occurs in the text (translate/glossary.py's matching rules) and
  becomes a positive constraint whose forms are its target terms (decode/constraints.py), tied to the source
  tokens it translates; the term replaces the model's own word for them (translate/replaced.py learns which
  before the search). A model trained with inline term annotations (data/annotate.py: its tokenizer has term
  markers) also reads the term in its source, after its source word (`Plan.inline`), so it places and inflects
  it; the constraint still guarantees it. A required phrase (`include`) is one wherever it applies.
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
from typing import NamedTuple, Protocol

from torch import Tensor

from tnmt.data.annotate import insertion_point
from tnmt.decode.bans import has_loop
from tnmt.decode.constraints import Constraints
from tnmt.errors import UserError
from tnmt.translate.evidence import Evidence, piece_words, with_warnings
from tnmt.translate.glossary import GlossaryEntry, match_glossary
from tnmt.translate.kept import KeptSpan, find_kept, merge_spans, put_back, take_out
from tnmt.translate.phrases import avoided, check_conflicts, target_forms

MAX_CONSTRAINTS = 32  # positive constraints per text: every step considers each one's next tokens


TermChecks = Callable[[str, Evidence | None, Sequence[tuple[int, ...]]], Sequence[tuple[bool, tuple[str, ...]]]]
"""(translation text, its evidence, per constraint the words that meet it) -> per constraint (doubled, lost)."""


class SteeringTokenizer(Protocol):
    unk_id: int
    pad_id: int
    bos_id: int
    eos_id: int
    term_markers: tuple[int, int] | None  # a model trained to read terms inline (data/annotate.py)

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
    """How a translation met one positive constraint.

    target: its forms as the user gave them ("Hund | Hunde"); source: where it came from ("glossary", "include").
    met, words: whether it is in the translation, and the target words that meet it (empty: not met).
    form: the form written ("Hunde"), "" when not met.
    doubled: a glossary term's source is also translated by the model's own word, beside the term.
    lost: source words near a glossary term that the plain translation rendered and this one leaves without a
        target word (translate/replaced.py): what placing the term may have cost.
    """

    target: str
    met: bool
    words: tuple[int, ...] = ()
    source: str = "include"
    form: str = ""
    doubled: bool = False
    lost: tuple[str, ...] = ()


@dataclass(frozen=True)
class Plan:
    """One text as the model reads it and the search obeys it (`plan`), and what `finish` needs to answer."""

    text: str  # the text less its kept spans
    constraints: Constraints
    labels: tuple[tuple[str, str], ...] = ()  # per positive constraint: (its forms joined by " | ", its source)
    kept: tuple[KeptSpan, ...] = ()
    forms: tuple[tuple[str, ...], ...] = field(default=(), compare=False)  # per positive constraint, as text
    source_words: tuple[int, ...] = ()  # each word of `text`: its index among the full text's words
    term_words: tuple[tuple[int, int] | None, ...] = ()  # per positive constraint: a glossary term's words [first,
    # last + 1) in `text`; None for a phrase to include (it translates no word in particular)
    inline: tuple[tuple[int, tuple[int, ...]], ...] = ()  # (source token, ids inserted before it): the glossary's
    # terms between term markers, for a model trained to read them (data/annotate.py); by position

    @property
    def glossed(self) -> bool:
        """Does a glossary term apply to a word the model reads?"""
        return any(span is not None for span in self.constraints.sources)

    @property
    def steers(self) -> bool:
        """Does the search or the answer differ from a plain translation's?"""
        c = self.constraints
        return bool(c.required or c.avoided or c.prefix or c.allow_loops or self.kept)


def kept_spans(text: str, steering: Steering, *, readable: Callable[[str], bool] | None) -> list[tuple[int, int]]:
    """The spans of `text` kept as written: what the model cannot read (URLs, e-mail addresses, emoji, markup,
    characters `readable` refuses) unless `keep_unreadable` is off, and the do-not-translate terms."""
    auto = find_kept(text, (), readable=readable) if steering.keep_unreadable else []
    listed = find_kept(text, steering.do_not_translate) if steering.do_not_translate else []
    return merge_spans([*auto, *listed])


def plan(
    text: str,
    steering: Steering | None,
    tokenizer: SteeringTokenizer,
    *,
    readable: Callable[[str], bool] | None,
    max_tokens: int,
    continuations: Tensor | None = None,
    tokenise: Callable[[str], tuple[list[int], list[str]]] | None = None,
) -> Plan:
    """What the model reads of `text` and the constraints of its search; `readable(char)`: is a character in the
    source vocabulary; `max_tokens`: the most output tokens the model can write (a constraint longer is refused);
    `continuations`: (V,) True on target ids that continue a word (`Constraints.continuations`); `tokenise`: the
    source ids and pieces of a text, as read already (default: the tokenizer's).

    Raises:
        UserError: an entry that cannot be met (empty, longer than the model's positions, more constraints than
            `MAX_CONSTRAINTS`, a required form or the prefix containing an avoided phrase); the message names it.
    """
    steering = steering or Steering()
    read, kept, source_words_full = take_out(text, kept_spans(text, steering, readable=readable))
    glossed = bool(steering.glossary) and bool(read)  # the source tokens of its terms: only a glossary needs them
    source_pieces = (tokenise or tokenizer.encode_source_pieces)(read)[1] if glossed else []
    source_words = piece_words(source_pieces, read)
    positives = _positives(read, steering, tokenizer, source_words, max_tokens=max_tokens)
    include, labels, forms_text, sources, term_words = positives
    if len(include) > MAX_CONSTRAINTS:
        raise UserError(f"{len(include)} phrases to include in one text: at most {MAX_CONSTRAINTS}")
    if sum(min(len(form) for form in forms) for forms in include) > max_tokens:
        raise UserError(f"the phrases to include need more than the {max_tokens} tokens the output may have")
    avoid = avoided(steering.avoid, tokenizer, max_tokens=max_tokens)
    prefix = tuple(tokenizer.encode_target(steering.prefix)) if steering.prefix.strip() else ()
    if len(prefix) > max_tokens:
        raise UserError(f"prefix: {len(prefix)} tokens, more than the {max_tokens} the output may have")
    check_conflicts(include, labels, prefix, avoid, tokenizer)
    inline: list[tuple[int, tuple[int, ...]]] = []
    if glossed and (markers := tokenizer.term_markers) is not None:
        inline = _inline_terms(sources, forms_text, source_pieces, tokenizer, markers)
        sources = [_moved(span, inline) for span in sources]
    constraints = Constraints(
        tuple(include),
        avoid,
        prefix,
        allow_loops=has_loop(read.lower().split()),
        continuations=continuations,
        sources=tuple(sources) if any(span is not None for span in sources) else (),
    )
    plan_ = Plan(read, constraints, tuple(labels), tuple(kept), tuple(forms_text), source_words_full, tuple(term_words))
    return replace(plan_, inline=tuple(inline))


class _Positives(NamedTuple):
    """Per positive constraint of a text (its glossary terms that apply, then its phrases to include)."""

    include: list[tuple[tuple[int, ...], ...]]  # its forms as target ids
    labels: list[tuple[str, str]]  # (its forms joined by " | ", its source)
    forms: list[tuple[str, ...]]  # its forms as text
    sources: list[tuple[int, int] | None]  # a term's source tokens, None for a phrase to include
    term_words: list[tuple[int, int] | None]  # a term's words in the text read, None for a phrase to include


def _positives(
    read: str, steering: Steering, tokenizer: SteeringTokenizer, source_words: Sequence[int], *, max_tokens: int
) -> _Positives:
    """The positive constraints of the text the model reads (`source_words`: each source piece's word).

    Raises:
        UserError: an empty form or one longer than `max_tokens`, naming its entry.
    """
    found = _Positives([], [], [], [], [])
    for match in match_glossary(read, steering.glossary):
        where = f"glossary entry {match.entry.source!r}"
        found.include.append(target_forms(match.entry.targets, tokenizer, where=where, max_tokens=max_tokens))
        found.labels.append((" | ".join(match.entry.targets), "glossary"))
        found.forms.append(match.entry.targets)
        found.term_words.append(_word_span(read, match.start, match.end))
        found.sources.append(_source_tokens(found.term_words[-1], source_words))
    for c, forms in enumerate(steering.include):
        found.include.append(target_forms(forms, tokenizer, where=f"include[{c}]", max_tokens=max_tokens))
        found.labels.append((" | ".join(forms), "include"))
        found.forms.append(tuple(forms))
        found.sources.append(None)
        found.term_words.append(None)
    return found


def finish(
    plan_: Plan,
    text: str,
    tokens: Sequence[int],
    spans: Sequence[tuple[int, int] | None],
    evidence: Evidence | None,
    tokenizer: SteeringTokenizer,
    checks: TermChecks | None = None,
) -> tuple[str, tuple[ConstraintReport, ...], Evidence | None]:
    """A translation `text` (ids `tokens`, the search's constraint `spans`) in the user's terms: the kept spans
    placed by `evidence`'s alignment, each positive constraint's report (`checks` tells whether its term is doubled
    and which source words it lost: translate/replaced.py), and the evidence over the full texts, warning of a
    doubled term or lost words."""
    words_of = piece_words(tokenizer.target_pieces(list(tokens)), text) if tokens else []
    met = []
    for forms, span in zip(plan_.forms, _padded(spans, len(plan_.labels)), strict=True):
        if span is not None and words_of:
            met.append(tuple(sorted({words_of[t] for t in range(*span)})))
        else:  # the model may spell a form with other subwords: the text decides
            met.append(_find_words(text, forms))
    checked = list(checks(text, evidence, met)) if checks is not None else []
    reports = [
        ConstraintReport(label, bool(words), words, source, _form_of(forms, [text.split()[j] for j in words]))
        for (label, source), forms, words in zip(plan_.labels, plan_.forms, met, strict=True)
    ]
    if checked:
        reports = [replace(r, doubled=doubled, lost=lost) for r, (doubled, lost) in zip(reports, checked, strict=True)]
        found = {"term_doubled": any(r.doubled for r in reports), "term_lost_words": any(r.lost for r in reports)}
        if evidence is not None:
            codes = [code for code, on in found.items() if on]
            evidence = replace(evidence, warnings=with_warnings(evidence.warnings, codes))
    if not plan_.kept:
        return text, tuple(reports), evidence
    final, word_at, proof = put_back(text, plan_.text, plan_.kept, evidence, plan_.source_words)
    reports = [replace(r, words=tuple(word_at[j] for j in r.words)) for r in reports]
    return final, tuple(reports), proof


def _inline_terms(
    sources: Sequence[tuple[int, int] | None],
    forms: Sequence[tuple[str, ...]],
    pieces: Sequence[str],
    tokenizer: SteeringTokenizer,
    markers: tuple[int, int],
) -> list[tuple[int, tuple[int, ...]]]:
    """Each glossary term's first form between the term markers, inserted as training inserted them
    (data/annotate.py's `insertion_point`) after its source tokens (`sources`, None for a phrase to include):
    (source token, ids) by position."""
    inline = []
    for span, term in zip(sources, forms, strict=True):
        if span is not None:
            ids = tokenizer.encode_target(term[0])
            ids = ids[: insertion_point(tokenizer.target_pieces(ids))]
            inline.append((span[0] + insertion_point(list(pieces[span[0] : span[1]])), (markers[0], *ids, markers[1])))
    return sorted(inline)


def _moved(span: tuple[int, int] | None, inline: Sequence[tuple[int, tuple[int, ...]]]) -> tuple[int, int] | None:
    """Source tokens [start, end) once the `inline` ids are inserted: its own term's inside the span."""
    if span is None:
        return None
    return span[0] + sum(len(ids) for at, ids in inline if at <= span[0]), span[1] + sum(
        len(ids) for at, ids in inline if at <= span[1]
    )


def _word_span(text: str, start: int, end: int) -> tuple[int, int]:
    """The words [first, last + 1) of `text.split()` that characters [start, end) touch ("dog" in "(dog)," is the
    word "(dog),")."""
    before = text[:start].split()
    first = len(before) - (1 if before and not text[start - 1].isspace() else 0)
    return first, len(text[:end].split())


def _source_tokens(words: tuple[int, int], piece_word: Sequence[int]) -> tuple[int, int] | None:
    """The source tokens [first, last + 1) of the words [first, last + 1), given the word of each source piece; None
    when the source's pieces do not reach them."""
    tokens = [t for t, word in enumerate(piece_word) if words[0] <= word < words[1]]
    return (tokens[0], tokens[-1] + 1) if tokens else None


def _padded(spans: Sequence[tuple[int, int] | None], n: int) -> list[tuple[int, int] | None]:
    return list(spans) + [None] * (n - len(spans))


def _form_of(forms: Sequence[str], words: Sequence[str]) -> str:
    """Which of `forms` the target `words` that met a constraint spell (case and closing punctuation ignored);
    the words as written when none does exactly (the model may glue a form to punctuation)."""
    written = " ".join(w.strip(".,;:!?\"'()[]") for w in words)
    return next((form for form in forms if form.casefold() == written.casefold()), written)


def _find_words(text: str, forms: Sequence[str]) -> tuple[int, ...]:
    """The words of `text` that spell one of `forms` (case-insensitive, whole words), first occurrence."""
    words = [w.strip(".,;:!?\"'()[]").casefold() for w in text.split()]
    for form in forms:
        wanted = form.casefold().split()
        for j in range(len(words) - len(wanted) + 1):
            if words[j : j + len(wanted)] == wanted:
                return tuple(range(j, j + len(wanted)))
    return ()
