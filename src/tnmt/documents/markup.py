"""HTML translated sentence by sentence, its inline markup carried to the translation by word alignment.

Translating each text node on its own (`<p>The <b>red</b> car</p>` as "The", "red", "car") breaks the
sentence apart; here the sentence is translated whole and its tags are put back around the words
aligned to theirs (`tag_transfer.py` says how). `parse(fragment).texts` are the sentences to
translate; `render` takes each one's translation and word alignment and returns the translated HTML.

- Block elements (every element not in `INLINE`, `<br>` and `<hr>` too), `<!DOCTYPE>`, CDATA, and
  `<script>` and `<style>` with their content end a sentence and pass through as given, as does every
  stretch without a letter or digit (whitespace and comments between blocks).
- A sentence's text is its words joined by single spaces (words: whitespace-separated, entities
  decoded), however its inline tags cut it. Its inline elements (`INLINE`), void ones (`<img>`) and
  comments inside it are carried to the translation, each tag exactly once, nested as given (an end tag
  that closes nothing open is carried as a tag on its own: misnested input stays misnested).
- A tag inside a word (`H<sub>2</sub>O`, `<b>red</b>dish`, `<a>here</a>.`) does not split it: "H2O" is
  one word to translate. When the word comes back unchanged its inner markup is kept as given; when it
  is translated, the elements inside it wrap the whole target word (`<a>hier.</a>`).
- Tags (attributes included) are copied as given; translations are escaped (`html.escape(quote=False)`);
  the whitespace around a sentence is kept. A sentence without tags becomes its translation exactly;
  the words of one with tags are joined by single spaces.
- An inline element cut by a block (`<b>a<p>b</p>c</b>`) gets its start tag in one sentence and its end
  tag in a later one: it runs to the end of the first and from the start of the last.
- A block of more than `MAX_WORDS` words is cut into sentences of at most that many, each after a word that
  ends a sentence (".", "!", "?", ...) where one lies in the second half of the stretch, as a block cuts: the
  alignment's work on a sentence grows with its words times its elements, so an unbounded block would cost
  the square of its length. (The translator cuts each into the sentences it reads anyway.)
"""

import html
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import NamedTuple

from tnmt.documents.tag_transfer import Alignment, Element, transfer
from tnmt.translate.kept import notranslate_element

_INLINE_NAMES = (
    "a abbr acronym b bdi bdo big cite code data del dfn em font i img input ins kbd label mark q s samp small"
    " span strike strong sub sup time tt u var wbr"
)
INLINE = frozenset(_INLINE_NAMES.split())  # phrasing elements: part of the sentence around them
VOID = frozenset(("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"))
RAW_TEXT = frozenset(("script", "style"))  # their content is code, not text
MAX_DEPTH = 100  # inline elements open at once; deeper start tags are carried as tags on their own (no recursion limit)
MAX_WORDS = 200  # of one sentence: a longer block is cut (the module docstring says where)
_SENTENCE_END = frozenset(".!?…。！？")
_CLOSERS = "\"')»”’]"  # after a sentence's end mark: "He left." she said


class _Event(NamedTuple):
    """One piece of a fragment as HTMLParser reports it.

    `kind`: "start"/"end" (an inline element's tags), "atom" (a void inline element, `<b/>`, a comment), "kept"
    (an inline element marked not to be translated, whole, content included),
    "text" (`text` has the entities decoded), or "block" (anything that ends a sentence and passes through).
    """

    kind: str
    name: str
    text: str
    raw: str  # exactly as in the fragment: the raw texts of all events add up to it


class _Events(HTMLParser):
    """The events of a fragment, in order (`events`)."""

    def __init__(self, fragment: str) -> None:
        super().__init__(convert_charrefs=True)
        self._found: list[tuple[str, str, str, int]] = []  # (kind, name, text, offset where it starts)
        self._line_starts = [0] + [i + 1 for i, ch in enumerate(fragment) if ch == "\n"]
        self._raw: str | None = None  # inside <script> or <style>
        self._kept: list[str] = []  # the element kept as written (`translate="no"`) and the same names open in it
        self._closes: tuple[str, int] = ("", -1)  # a text HTMLParser reads, and where its last "-->" starts
        self._ending = False  # close() was called: nothing more comes
        # Python 3.11's HTMLParser reads on to the end from every "<" of a construct that never closes ("<a " with
        # no ">", "<!--" with no "-->"), which is quadratic in the text: after the last ">" nothing can close, so
        # that tail is text (as the parser would give it), and an unclosed comment runs to the end (as HTML5 says)
        head = fragment[: fragment.rfind(">") + 1]
        self.feed(head)
        self._ending = True
        self.close()
        if tail := fragment[len(head) :]:
            self._found.append(("block" if self._raw else "text", "", html.unescape(tail), len(head)))
        offsets = [offset for *_, offset in self._found] + [len(fragment)]  # each event runs to the next one
        self.events = [
            _Event(kind, name, text, fragment[offsets[i] : offsets[i + 1]])
            for i, (kind, name, text, _) in enumerate(self._found)
        ]

    def parse_comment(self, i: int, report: bool = True) -> int:
        """HTMLParser's, without its search for "-->" from each "<!--" that none follows: such a comment is one to
        the end once the text is all read (an event of its own), and waits for more before."""
        if self._closes[0] is not self.rawdata:  # HTMLParser keeps its unread rest as a new string
            self._closes = (self.rawdata, self.rawdata.rfind("-->"))
        if self._closes[1] >= i + 4:
            return super().parse_comment(i, report)
        if not self._ending:
            return -1
        if report:
            self.handle_comment(self.rawdata[i + 4 :])
        return len(self.rawdata)

    def _add(self, kind: str, name: str = "", text: str = "") -> None:
        line, column = self.getpos()  # where the event starts: HTMLParser moves on after the handler returns
        self._found.append((kind, name, text, self._line_starts[line - 1] + column))

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if self._kept:  # inside an element kept as written: part of its one event
            self._kept += [tag] if tag == self._kept[0] else []
            return
        if tag not in VOID and notranslate_element(tag, attrs):  # the whole element is one event, as written
            self._kept = [tag]
            self._add("kept" if tag in INLINE else "block", tag)
            return
        self._add(("atom" if tag in VOID else "start") if tag in INLINE else "block", tag)
        self._raw = tag if tag in RAW_TEXT else None

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        if not self._kept:
            self._add("atom" if tag in INLINE else "block", tag)

    def handle_endtag(self, tag: str) -> None:
        if self._kept:
            if tag == self._kept[0]:
                self._kept.pop()
            return
        self._add("end" if tag in INLINE else "block", tag)
        self._raw = None

    def handle_data(self, data: str) -> None:
        if not self._kept:
            self._add("block" if self._raw else "text", text=data)

    def handle_comment(self, data: str) -> None:
        if not self._kept:
            self._add("atom")

    def handle_pi(self, data: str) -> None:
        if not self._kept:
            self._add("atom")

    def handle_decl(self, decl: str) -> None:
        self._add("block")

    def unknown_decl(self, data: str) -> None:
        self._add("block")


@dataclass(eq=False)
class _Sentence:
    """A sentence to translate: its words, the whitespace around it and the tree of its inline elements."""

    words: list[str]
    root: Element
    lead: str
    trail: str

    @property
    def text(self) -> str:
        return " ".join(self.words)

    def render(self, translation: str, alignment: Alignment) -> str:
        """The translation with this sentence's inline elements around the words aligned to theirs."""
        if not self.root.children:  # nothing to carry: the translation as it is
            return self.lead + html.escape(translation, quote=False) + self.trail
        return self.lead + transfer(self.root, translation, alignment) + self.trail


@dataclass(frozen=True)
class Markup:
    """A parsed HTML fragment: what passes through as given, and the sentences to translate, in order."""

    segments: tuple[str | _Sentence, ...]

    @property
    def texts(self) -> list[str]:
        """The sentences to translate, in document order."""
        return [segment.text for segment in self.segments if isinstance(segment, _Sentence)]

    def render(self, outputs: Sequence[tuple[str, Alignment]]) -> str:
        """The translated fragment, from one (translation, alignment) per text of `texts`, in order.

        A sentence without tags needs no alignment: its translation replaces it as it is.

        Raises:
            ValueError: not one output per text, or an alignment pair outside its sentence.
        """
        sentences = [segment for segment in self.segments if isinstance(segment, _Sentence)]
        if len(outputs) != len(sentences):
            raise ValueError(f"{len(outputs)} translations for {len(sentences)} texts")
        rendered = iter([sentence.render(*output) for sentence, output in zip(sentences, outputs, strict=True)])
        return "".join(segment if isinstance(segment, str) else next(rendered) for segment in self.segments)


def parse(fragment: str) -> Markup:
    """Cut an HTML fragment into passthrough text and sentences to translate (the module docstring says how)."""
    segments: list[str | _Sentence] = []
    pending: list[_Event] = []
    open_names: list[str] = []  # inline elements still open where the last sentence ended
    for event in [*_Events(fragment).events, _Event("block", "", "", "")]:
        if event.kind != "block":
            pending.append(event)
            continue
        for piece in _pieces(pending):
            sentence, open_names = _sentence(piece, open_names)
            segments.append(sentence or "".join(e.raw for e in piece))
        pending = []
        segments.append(event.raw)
    return Markup(tuple(segment for segment in segments if segment != ""))


def _pieces(events: list[_Event]) -> list[list[_Event]]:
    """A block's inline events cut into sentences of at most `MAX_WORDS` words (none when it has no events): each
    cut at the whitespace before a sentence's first word, which starts the next piece with its tags."""
    if not events:
        return []
    text = "".join(e.text for e in events if e.kind == "text")
    if len(text.split()) <= MAX_WORDS:  # most blocks: counted in C, not walked character by character
        return [events]
    starts, ends = _word_bounds(text)
    cuts, first = [], 0  # where each later piece starts in `text`; the first word of the current piece
    while len(starts) - first > MAX_WORDS:
        last = first + MAX_WORDS  # the piece's words: [first, last)
        ending = next((k for k in range(last, first + MAX_WORDS // 2, -1) if _ends_sentence(text, ends[k - 1])), last)
        cuts.append(ends[ending - 1])
        first = ending
    pieces: list[list[_Event]] = [[]]
    at, cut = 0, iter(cuts)  # `text` offset where the event starts; the next cut
    c = next(cut)
    for event in events:
        if event.kind == "text":
            while c is not None and c < at + len(event.text):  # the whitespace at c starts the next piece
                if c > at:
                    left, event = _split(event, c - at)
                    pieces[-1].append(left)
                    at = c
                pieces.append([])
                c = next(cut, None)
            at += len(event.text)
        pieces[-1].append(event)
    return pieces


def _split(event: _Event, k: int) -> tuple[_Event, _Event]:
    """A text event cut before character `k` of its text; its raw cut at the same place when it is the text as
    written, else each side written escaped (a character reference is not cut in two)."""
    left, right = event.text[:k], event.text[k:]
    if event.raw == event.text:
        return event._replace(text=left, raw=left), event._replace(text=right, raw=right)
    return (
        event._replace(text=left, raw=html.escape(left, quote=False)),
        event._replace(text=right, raw=html.escape(right, quote=False)),
    )


def _ends_sentence(text: str, end: int) -> bool:
    """Whether the word ending at `end` ends a sentence: its last character, after closing quotes and brackets,
    is a sentence's end mark."""
    while end > 0 and text[end - 1] in _CLOSERS:
        end -= 1
    return end > 0 and text[end - 1] in _SENTENCE_END


def _sentence(events: list[_Event], open_names: list[str]) -> tuple[_Sentence | None, list[str]]:
    """The sentence in these inline events (None without a letter or digit), and the elements left open."""
    root, text, stack = Element(), "", []
    stack.append(root)
    for name in open_names:  # opened before this sentence: their start tags are not here
        stack[-1].children.append(Element(name=name, pin_start=True))
        stack.append(stack[-1].children[-1])
    for index, (kind, name, decoded, raw) in enumerate(events):
        if kind == "text":
            text += decoded
        elif kind == "start" and len(stack) <= MAX_DEPTH:
            stack[-1].children.append(Element(start=raw, name=name, begin=len(text), order=(index, -1)))
            stack.append(stack[-1].children[-1])
        elif kind == "end" and len(stack) > 1 and stack[-1].name == name:
            node = stack.pop()
            node.end, node.stop, node.order = raw, len(text), (node.order[0], index)
        else:  # a void element, a comment, a kept element, an end tag that closes nothing open: a tag on its own
            kept = kind == "kept"
            stack[-1].children.append(
                Element(start=raw, begin=len(text), stop=len(text), order=(index, index), standalone=kept)
            )
    for node in stack[1:]:
        node.stop, node.pin_end = len(text), True
    for node in stack[1:]:
        if node.pin_start:  # neither tag in this sentence: the element only surrounds it
            parent = next(p for p in stack if node in p.children)
            index = parent.children.index(node)
            parent.children[index : index + 1] = node.children
    remaining = [node.name for node in stack[1:]]
    if not any(ch.isalnum() for ch in text):
        return None, remaining
    starts, ends = _word_bounds(text)
    words = [text[b:e] for b, e in zip(starts, ends, strict=True)]
    root.stop, root.last = len(text), len(words)
    _locate(root, text, starts, ends)
    _group_words(root, text, starts, ends)
    return _Sentence(words, root, text[: starts[0]], text[ends[-1] :]), remaining


def _word_bounds(text: str) -> tuple[list[int], list[int]]:
    """Start and end offsets of the whitespace-separated words of `text` (as `str.split` cuts them)."""
    starts, ends = [], []
    for i, ch in enumerate(text):
        if not ch.isspace() and (i == 0 or text[i - 1].isspace()):
            starts.append(i)
        if not ch.isspace() and (i + 1 == len(text) or text[i + 1].isspace()):
            ends.append(i + 1)
    return starts, ends


def _locate(node: Element, text: str, starts: list[int], ends: list[int]) -> None:
    """Give every element below `node` its source words: a tag boundary inside a word takes the whole word,
    except that an element ending before the punctuation that ends its last word ("car</b>.") says so, to end
    before the translation's punctuation too."""
    for child in node.children:
        b, e = child.begin, child.stop
        word = bisect_right(ends, b)  # the word holding `begin`, or the next one
        within = word < len(starts) and starts[word] <= b and e <= ends[word] and (b, e) != (starts[word], ends[word])
        if within and (starts[word] < b or b < e) and not (child.pin_start or child.pin_end):
            child.inside = word  # holding characters of the word, or a lone tag between two of them
        child.first, child.last = word, max(word, bisect_left(starts, e))
        if child.inside is not None:
            child.last = word + 1 if b < e else word
        child.touches_previous = word > 0 and ends[word - 1] == b
        touches_next = word < len(starts) and starts[word] == e
        child.standalone = child.standalone and not (child.touches_previous or touches_next)
        tail = text[e : ends[child.last - 1]] if child.last > child.first and child.end else ""
        child.bare_end = bool(tail) and not any(ch.isalnum() for ch in tail)
        _locate(child, text, starts, ends)


def _group_words(node: Element, text: str, starts: list[int], ends: list[int]) -> None:
    """Put the elements inside one word under a tagless node for that word, which can fold back to it as given.

    Only when they share a parent and no other element begins or ends inside that word (else they stay
    ordinary elements over the whole word).
    """
    cut = {w for n in node.walk() if n.inside is None for w in _cut_words(n, starts, ends)}
    for parent in list(node.walk()):
        runs: dict[int, list[Element]] = {}
        for child in parent.children:
            if child.inside is not None and parent.inside != child.inside and child.inside not in cut:
                runs.setdefault(child.inside, []).append(child)
        for word, members in runs.items():
            at = parent.children.index(members[0])
            parent.children = [c for c in parent.children if c not in members]
            group = Element(children=members, first=word, last=word + 1, source_word=text[starts[word] : ends[word]])
            group.folded = _folded(members, text, starts[word], ends[word])
            parent.children.insert(at, group)


def _cut_words(node: Element, starts: list[int], ends: list[int]) -> list[int]:
    """The words that one of this element's tags falls strictly inside."""
    return [w for w, (b, e) in enumerate(zip(starts, ends, strict=True)) if b < node.begin < e or b < node.stop < e]


def _folded(members: list[Element], text: str, begin: int, end: int) -> str:
    """The word text[begin:end] as given: escaped characters with the tags of `members` where they were."""
    tags = sorted(  # (event, offset, tag), as they came
        (event, offset, tag)
        for member in members
        for node in member.walk()
        for event, offset, tag in ((node.order[0], node.begin, node.start), (node.order[1], node.stop, node.end))
    )
    pieces, at = [], begin
    for _, offset, tag in tags:
        pieces += [html.escape(text[at:offset], quote=False), tag]
        at = offset
    return "".join(pieces) + html.escape(text[at:end], quote=False)
