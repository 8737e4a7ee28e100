"""Inline elements carried from a sentence's source words to its translation's words through a word alignment.

The source side is a tree of elements over source word spans (`markup.py` builds it from HTML);
`transfer` gives every element a span of target words and writes the translation with the tags around
them. Like bergamot-translator's html.cpp the tags follow the words through the alignment; unlike a
per-word stack of open tags, spans are placed top-down, so nesting holds by construction:

- An element gets a contiguous part of its parent's target words, disjoint from its siblings' parts
  (`segment`: the covering span of its aligned words, clipped to the parent, with the words claimed by
  two siblings given to the one aligned to them and unaligned words at the edges left out). Siblings
  take the order of their words in the translation.
- An element whose words are aligned to target words wins at least one of them, though words outside it be
  aligned there too (`_labels`): it is left empty only when its words are aligned to no target word, or
  only to words a sibling won.
- An element without target words (none aligned, or all taken by siblings) stays, empty, right after the
  target of the nearest aligned source word before it (a void element or comment: beside the word it
  touched, else before the next word); pro rata when nothing near it is aligned (`anchor`).
- An element opened in an earlier sentence starts at the first word, one closed in a later sentence
  ends at the last: their other tag is not in this sentence.
- Every start and end tag is written exactly once, so the output is as well-formed as the input.
"""

import html
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

_PUNCTUATION = ".,;:!?…\"')»«“”„"  # what ends a word without being part of it
Alignment = Sequence[tuple[int, int]]  # (source word i, target word j), 0-based over str.split()
Span = tuple[int, int]  # target words [start, end)


@dataclass(eq=False)
class Element:
    """An inline element of one sentence; also the sentence itself (the root, no tags) and a word with tags
    inside it (no tags of its own: `folded` is the word as given, used when the word is not translated).

    `first`/`last` are the source words [first, last) it covers (equal: it has none, and stands between
    words first - 1 and first). An element opened in an earlier sentence has no start tag here
    (`pin_start`), one closed in a later sentence no end tag (`pin_end`). `name`, `begin`, `stop`,
    `inside` and `order` are the parser's (character offsets, event numbers).
    """

    start: str = ""
    end: str = ""
    children: list["Element"] = field(default_factory=list)
    first: int = 0
    last: int = 0
    touches_previous: bool = False  # without source words: written right after a word, not before one
    standalone: bool = False  # a kept element spaced off its neighbours in the source: written as a word of its own
    bare_end: bool = False  # it ended before the punctuation ending its last word ("car</b>."): so it does here
    pin_start: bool = False
    pin_end: bool = False
    folded: str = ""
    source_word: str = ""
    name: str = ""
    begin: int = 0
    stop: int = 0
    inside: int | None = None
    order: tuple[int, int] = (-1, -1)

    @property
    def follows(self) -> bool:
        """Left without target words, does it go after the target of the word before it (else before the
        next word's)? An element that had words keeps its place after its neighbour; a tag between words
        stays with the word it touched."""
        return self.touches_previous or self.first < self.last

    def walk(self) -> Iterator["Element"]:
        """This element and every element below it, parents before children."""
        yield self
        for child in self.children:
            yield from child.walk()


def transfer(root: Element, translation: str, alignment: Alignment) -> str:
    """The words of `translation` with the tags of the elements below `root` around the words aligned to theirs.

    Words are escaped (`html.escape(quote=False)`) and joined by single spaces.

    Raises:
        ValueError: an alignment pair outside the source words of `root` or the words of `translation`.
    """
    words = translation.split()
    targets: list[list[int]] = [[] for _ in range(root.last)]
    for i, j in alignment:
        if not (0 <= i < root.last and 0 <= j < len(words)):
            raise ValueError(f"alignment pair ({i}, {j}) outside {root.last} source x {len(words)} target words")
        targets[i].append(j)
    spans: dict[Element, Span] = {}
    place(root, (0, len(words)), targets, spans)
    return join(tokens(root, spans, words))


def place(node: Element, span: Span, targets: list[list[int]], spans: dict[Element, Span]) -> None:
    """Record `span` as `node`'s target words in `spans`, and a part of it for each element below, recursively.

    Children with target words of their own get disjoint, contiguous parts (`segment`); the others go
    where `anchor` puts them, moved out of their siblings' parts. `targets[i]`: the target words of
    source word i.
    """
    spans[node] = span
    lo, hi = span
    kids = node.children
    labels = _labels(kids, span, targets)
    active = sorted(
        {c for c in labels if c is not None and c >= 0},
        key=lambda c: (not kids[c].pin_start, kids[c].pin_end, _median([j for j, x in enumerate(labels) if x == c]), c),
    )
    for c, (start, end) in segment(labels, active).items():  # one with a tag in another sentence: to the edge
        spans[kids[c]] = (lo if kids[c].pin_start else lo + start, hi if kids[c].pin_end else lo + end)
    floor = max([spans[k][1] for k in kids if k.pin_start and k in spans], default=lo)
    ceiling = min([spans[k][0] for k in kids if k.pin_end and k in spans], default=hi)
    taken = [spans[kids[c]] for c in active]
    for kid in kids:
        if kid not in spans:
            at = min(max(anchor(kid, node, span, targets), floor), ceiling)
            at = next((end if kid.follows else start for start, end in taken if start < at < end), at)
            spans[kid] = (at, at)
    for kid in kids:
        place(kid, spans[kid], targets, spans)


def _labels(kids: list[Element], span: Span, targets: list[list[int]]) -> list[int | None]:
    """For each target word in `span`: the index of the child with most source words aligned to it (ties: a
    child before the words outside every child, an earlier child before a later one); -1 where the words
    outside every child have more; None where nothing is aligned.

    A child that wins no word although one of its words is aligned into `span` then takes, of the words its
    own words are aligned to and no sibling won, the one they are aligned to most (the first of equals): an
    element marks the words it wraps, so it is not emptied while one of them has a translation ("the <b>red</b>
    car" -> "das <b>rote</b> Auto" also when "rote" is aligned to "car" as well, as an adjective's writing step
    often is).
    """
    lo, hi = span
    counts = [[0] * (len(kids) + 1) for _ in range(hi - lo)]  # the last column: source words in no child
    owner = {i: c for c in reversed(range(len(kids))) for i in range(kids[c].first, kids[c].last)}
    for i, js in enumerate(targets):
        for j in js:
            if lo <= j < hi:
                counts[j - lo][owner.get(i, -1)] += 1
    labels: list[int | None] = []
    for row in counts:
        best = max(range(len(kids)), key=lambda c: (row[c], -c), default=-1)
        if best >= 0 and row[best] and row[best] >= row[-1]:
            labels.append(best)
        else:
            labels.append(-1 if row[-1] else None)
    for c in sorted(set(range(len(kids))) - set(labels)):  # an earlier child first
        free = [t for t, row in enumerate(counts) if row[c] and (labels[t] is None or labels[t] < 0)]
        if free:
            labels[max(free, key=lambda t: (counts[t][c], -t))] = c
    return labels


def _median(values: list[int]) -> int:
    return sorted(values)[(len(values) - 1) // 2]


def segment(labels: list[int | None], order: list[int]) -> dict[int, Span]:
    """Cut a run of target words into a gap, a part for order[0], a gap, a part for order[1], ..., a gap.

    `labels[t]` says whose word t is (`_labels`: a child's index, -1 for someone else's, None for no one's).
    The cut maximises the words inside their own child's part minus the words inside another's part; among
    equal cuts, it keeps more words in their own part (the covering spans, with the overlaps between
    siblings cut where fewest words go astray), then leaves out the unaligned words at the edges of a
    part (an unaligned word between two of its own stays in). Dynamic programming over (word, state), the
    states alternating gap and part: O(words x children).

    Returns:
        {child: (start, end)}, positions in `labels`; a child whose words all went elsewhere gets an empty part.
    """
    n_states, unit = 2 * len(order) + 1, len(labels) + 1  # state 2k + 1: inside order[k]; even: gaps
    score, back = [0.0] + [float("-inf")] * (n_states - 1), []
    for label in labels:
        reach, best = [], (float("-inf"), 0)  # reach[s]: the best (score, state) of the states <= s; ties: the
        for state in range(n_states):  # later state, so that of two equal cuts the one placing parts earlier wins
            best = max(best, (score[state], state))
            reach.append(best)
        back.append([state for _, state in reach])
        gains = [_gain(state, label, order, unit) for state in range(n_states)]
        score = [value + gain for (value, _), gain in zip(reach, gains, strict=True)]
    state = max(range(n_states), key=lambda s: (score[s], s))
    states = []
    for t in reversed(range(len(labels))):
        states.append(state)
        state = back[t][state]
    return {c: (sum(s < 2 * k + 1 for s in states), sum(s <= 2 * k + 1 for s in states)) for k, c in enumerate(order)}


def _gain(state: int, label: int | None, order: list[int], unit: int) -> int:
    """What a word labelled `label` adds to the score in `state`: three criteria in one number (`segment`),
    `unit` being more than the words, so that no sum of lower terms outweighs one higher."""
    if state % 2 == 0:  # a gap
        return 0
    if label is None:  # unaligned, inside a part: worth it only between two of the part's own words
        return -1
    return unit * unit + unit if label == order[state // 2] else -unit * unit


def anchor(kid: Element, parent: Element, span: Span, targets: list[list[int]]) -> int:
    """The target position of an element without target words, within `parent`'s `span`.

    Right after the target of the nearest aligned source word before it, or right before that of the
    nearest one after it (which is tried first: `kid.follows`); pro rata when no word of the parent is
    aligned. An element opened in an earlier sentence goes first, one closed in a later sentence last.
    """
    lo, hi = span
    if kid.pin_start or kid.pin_end:
        return lo if kid.pin_start else hi
    before = (max(js) + 1 for w in range(kid.first - 1, parent.first - 1, -1) if (js := _within(targets[w], span)))
    after = (min(js) for w in range(kid.last, parent.last) if (js := _within(targets[w], span)))
    for found in (before, after) if kid.follows else (after, before):
        if (at := next(found, None)) is not None:
            return at
    return lo + round((kid.first - parent.first) * (hi - lo) / max(1, parent.last - parent.first))


def _within(js: list[int], span: Span) -> list[int]:
    return [j for j in js if span[0] <= j < span[1]]


def tokens(node: Element, spans: dict[Element, Span], words: list[str]) -> list[tuple[str, str]]:
    """`node` over its target words as (text, kind) tokens, kind "word", "tag", "glued" (a tag that keeps to the
    word before it: an end tag, or the start of an element without words that follows a word) or "punct" (the
    punctuation ending a word, glued to it: an element that ended before its source word's punctuation ends
    before its translation's too)."""
    lo, hi = spans[node]
    if node.folded and hi == lo + 1 and words[lo] == node.source_word:
        return [(node.folded, "word")]  # the word came back unchanged: its inner markup as given
    if node.standalone and lo == hi:
        return [(node.start, "word")]  # spaced as a word: "Ruf <span translate="no">Acme</span> heute an"
    out = [(node.start, "glued" if lo == hi and node.follows else "tag")] if node.start else []
    at = lo
    for kid in sorted(node.children, key=lambda k: (spans[k][0], spans[k][0] < spans[k][1])):  # stable: ties as given
        out += [token for word in words[at : spans[kid][0]] for token in _word_tokens(word)]
        out += tokens(kid, spans, words)
        at = max(at, spans[kid][1])
    out += [token for word in words[at:hi] for token in _word_tokens(word)]
    if not node.end:
        return out
    last_word = max((k for k, (_, kind) in enumerate(out) if kind == "word"), default=len(out) - 1)
    punct = next((k for k in range(last_word + 1, len(out)) if out[k][1] == "punct"), None)
    if node.bare_end and punct is not None:
        return [*out[:punct], (node.end, "glued"), *out[punct:]]
    return [*out, (node.end, "glued")]


def _word_tokens(word: str) -> list[tuple[str, str]]:
    """A target word as tokens: its text, and the punctuation it ends with as a token of its own."""
    core = word.rstrip(_PUNCTUATION)
    if not core or core == word:
        return [(html.escape(word, quote=False), "word")]
    return [(html.escape(core, quote=False), "word"), (html.escape(word[len(core) :], quote=False), "punct")]


def join(items: list[tuple[str, str]]) -> str:
    """The `tokens` with one space between consecutive words: after the glued tags that follow the first word,
    before the other tags."""
    last_word = max((i for i, (_, kind) in enumerate(items) if kind == "word"), default=-1)
    pieces, space_due = [], False
    for i, (text, kind) in enumerate(items):
        if space_due and kind not in ("glued", "punct"):
            pieces.append(" ")
            space_due = False
        pieces.append(text)
        space_due = space_due or (kind == "word" and i < last_word)
    return "".join(pieces)
