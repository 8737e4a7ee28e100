"""Do-not-translate spans: stretches of a sentence that its translation carries over verbatim.

Two kinds. The user's do-not-translate terms (brand and product names, identifiers), found by the rules of
`terms.py` but case-sensitively: a user listing "Apple" or "Word" wants the name kept, not the fruit or the
noun. And what a model cannot read, always: URLs, e-mail addresses, emoji and, given the tokenizer's
vocabulary check, characters outside its vocabulary. In HTML, `notranslate_element` says which elements
the page marks so (`translate="no"`, `class="notranslate"`, as DeepL and Google Translate honour them).

- URLs: `http://` or `https://` and what follows up to whitespace, `<`, `>`, a quote or CJK punctuation;
  `www.` with a dot in the rest of its host (`www.x.y`). Punctuation that ends the sentence around it is not
  part of it: "see https://x.org/a." keeps "https://x.org/a"; a closing bracket only when the URL has no
  matching opening one ("(https://x.org/a)", but "https://w.org/Foo_(bar)" whole).
- Emoji: pictographs, with their presentation selectors, skin tones and tags, joined by ZWJ into one
  (👩‍👩‍👧); flags (pairs of regional indicators); keycaps (1️⃣); any symbol followed by VS16 (©️, while a
  plain © stays text, as it is in most vocabularies).
- Unreadable characters (`readable(ch)` False): maximal runs, with the combining marks that follow them;
  whitespace always counts as readable, so two unreadable words make two spans.
- Markup sent as plain text (a client that sends HTML without `format: "html"`): tags, comments and character
  references ("&amp;", "&#x1F436;") stay as written; the words between them are translated.
- Spans that overlap or touch merge into one: "🐶🐶" is one span, "🐶 🚲" two.

The model reads the text without them (`take_out`), and they go back into its translation as written
(`put_back`), beside the target word the alignment links to their neighbour (translate/evidence.py).
"""

import os
import re
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

from tnmt.translate.evidence import Evidence
from tnmt.translate.terms import clean_term, find_terms, read_list

CODE_ELEMENTS = frozenset(("code", "kbd", "samp", "var"))  # HTML's computer code, input, output, variables

_STOPS = '\\s<>"“”‘’«»。，、；：！？（）【】「」『』《》'  # never inside a URL as written in running text
_URL = re.compile(rf"(?<![a-z0-9.+-])(?:(https?://)|www\.)[^{_STOPS}]+", re.IGNORECASE)  # CJK text has no spaces
_URL_TRAILERS = ".,;:!?'…)]}*"  # sentence punctuation after a URL; closing brackets if unmatched in it
_OPENERS = {")": "(", "]": "[", "}": "{"}
# an e-mail address: a local part ("\w[\w.%+'-]*") before "@", a dotted domain after it; found from each "@"
# outward (`_emails`), since a pattern that starts the local part anywhere re-reads a long word from each letter
_LOCAL_REVERSED = re.compile(r"[\w.%+'-]*+")  # the local part's characters, read backwards from its "@"
_LOCAL_START = re.compile(r"\w")
_DOMAIN = re.compile(r"@[\w-]++(?:\.[\w-]++)+")

_PICTOGRAPH = (  # Unicode's emoji blocks, and the emoji-by-default characters outside them
    "\U0001f000-\U0001faff\u2600-\u27bf\u231a\u231b\u23e9-\u23f3\u23f8-\u23fa\u2b1b\u2b1c\u2b50\u2b55"
)
_MODIFIER = "[\ufe0e\ufe0f\u20e3\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f]"  # presentation, keycap, skin, tag
_ELEMENT = f"(?:[0-9#*]\ufe0f?\u20e3|[{_PICTOGRAPH}]|[^\\s\\w\u200d]\ufe0f)"
_EMOJI = re.compile(f"{_ELEMENT}{_MODIFIER}*(?:\u200d{_ELEMENT}{_MODIFIER}*)*")
# markup sent as plain text: tags and character references ("&amp;", "&#x1F436;"), and comments (`_markup`:
# found with str.find, since "<!--.*?-->" reads to the text's end from every "<!--" that is never closed)
_TAG = re.compile(r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>|&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")


@dataclass(frozen=True)
class KeptSpan:
    """A span of the text the model does not read: its text, the word of the read text it stands before, whether
    it touches the character before it and after it (no space: "<b>red"), and its words in the full text."""

    text: str
    word: int
    glue_left: bool = False
    glue_right: bool = False
    source_words: tuple[int, ...] = ()


def load_terms(path: str | os.PathLike[str]) -> list[str]:
    """The terms of a do-not-translate list: one per line, blank lines and lines starting with "#" skipped,
    each stripped and its inner whitespace runs made one space. A repeated term is kept once: unlike a
    glossary's, a repetition cannot conflict.

    Raises:
        UserError: naming the file (and line): missing, a directory, empty, not UTF-8, a line with a tab.
    """
    return list(dict.fromkeys(clean_term(line, what="term", where=f"{path}:{n}") for n, line in read_list(path)))


def find_kept(
    text: str, terms: Sequence[str], *, readable: Callable[[str], bool] | None = None
) -> list[tuple[int, int]]:
    """The spans of `text` to keep as written (the module docstring says which).

    Args:
        text: A sentence, with HTML entities already decoded.
        terms: Do-not-translate terms, matched case-sensitively.
        readable: Whether the model's vocabulary holds a character; called once per distinct character.

    Returns:
        Sorted (start, end) offsets, neither overlapping nor touching.
    """
    spans = [(start, end) for start, end, _ in find_terms(text, terms, casefold=False)]
    spans += _urls(text)
    spans += _emails(text)
    spans += [m.span() for m in _EMOJI.finditer(text)]
    spans += _markup(text)
    if readable is not None:
        spans += _unreadable(text, readable)
    return merge_spans(spans)


def notranslate_element(tag_name: str, attrs: list[tuple[str, str | None]]) -> bool:
    """Whether an HTML element's content is to be kept as is, from its start tag (as `HTMLParser` gives it).

    True for `translate="no"` (any case) and a class list holding "notranslate"; otherwise True for
    `CODE_ELEMENTS` (`<code>`, `<kbd>` ...: code is not prose) unless they say `translate="yes"`. The attribute
    is inherited in HTML: the caller keeps that state for the element's descendants, which a `translate="yes"`
    inside may turn back on.
    """
    translate = next((value or "" for name, value in attrs if name.lower() == "translate"), None)
    classes = next((value or "" for name, value in attrs if name.lower() == "class"), "").split()
    if (translate is not None and translate.strip().lower() == "no") or "notranslate" in classes:
        return True
    explicit_yes = translate is not None and translate.strip().lower() in ("yes", "")
    return tag_name.lower() in CODE_ELEMENTS and not explicit_yes


def _urls(text: str) -> list[tuple[int, int]]:
    """The spans of the URLs in `text`, without the punctuation that follows them."""
    spans = []
    for m in _URL.finditer(text):
        url = m.group()
        end = _without_trailers(url)
        host = re.split(r"[/?#]", url[len(m.group(1) or "www.") : end], maxsplit=1)[0]
        if host and (m.group(1) or "." in host.strip(".")):  # "www." needs a dot after it: "www.x.y"
            spans.append((m.start(), m.start() + end))
    return spans


def _without_trailers(url: str) -> int:
    """The length of `url` less the sentence punctuation after it; a closing bracket goes only while the URL has
    more of it than of its opening one ("https://w.org/Foo_(bar)" keeps its own). The surplus is counted once,
    so a URL followed by many brackets costs its length, not its length times theirs."""
    surplus = {closer: url.count(closer) - url.count(opener) for closer, opener in _OPENERS.items()}
    end = len(url)
    while end and url[end - 1] in _URL_TRAILERS:
        closer = url[end - 1]
        if closer in surplus:
            if surplus[closer] <= 0:
                break  # the URL's own bracket
            surplus[closer] -= 1
        end -= 1
    return end


def _emails(text: str) -> list[tuple[int, int]]:
    """The spans of the e-mail addresses in `text`, the matches `_LOCAL_START`, the local part and `_DOMAIN` would
    give as one pattern read left to right, found from each "@": its domain forwards, its local part backwards (on
    the reversed text) down to where the last address ended, starting at the first word character of that run.
    Each character is read a bounded number of times."""
    spans: list[tuple[int, int]] = []
    backwards = ""
    done = 0  # where the last address ended: the next one starts after it
    at = text.find("@")
    while at >= 0:
        if domain := _DOMAIN.match(text, at):
            backwards = backwards or text[::-1]
            run = _LOCAL_REVERSED.match(backwards, len(text) - at).end() - (len(text) - at)
            if first := _LOCAL_START.search(text, max(at - run, done), at):
                spans.append((first.start(), domain.end()))
                done = domain.end()
        at = text.find("@", max(at + 1, done))
    return spans


def _markup(text: str) -> list[tuple[int, int]]:
    """The spans of tags, character references and comments ("<!--" to the first "-->" after it) in `text`, as
    one left-to-right pattern finds them: tags and references between comments, none inside one. A comment
    never closed ends the comments: every later "<!--" is unclosed too."""
    spans: list[tuple[int, int]] = []
    at = 0
    while True:
        opening = text.find("<!--", at)
        closing = text.find("-->", opening + 4) if opening >= 0 else -1
        spans += [m.span() for m in _TAG.finditer(text, at, opening if closing >= 0 else len(text))]
        if closing < 0:
            return spans
        spans.append((opening, closing + 3))
        at = closing + 3


def _unreadable(text: str, readable: Callable[[str], bool]) -> list[tuple[int, int]]:
    """Maximal runs of characters that `readable` refuses, each with the combining marks that follow it."""
    refused = {ch for ch in set(text) if not ch.isspace() and not readable(ch)}
    spans: list[tuple[int, int]] = []
    start = None
    for i, ch in enumerate(text):
        inside = ch in refused or (start is not None and unicodedata.category(ch)[0] == "M")
        if inside and start is None:
            start = i
        elif not inside and start is not None:
            spans.append((start, i))
            start = None
    return spans if start is None else [*spans, (start, len(text))]


def merge_spans(spans: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted spans, those that overlap or touch merged."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def take_out(text: str, spans: Sequence[tuple[int, int]]) -> tuple[str, list[KeptSpan], tuple[int, ...]]:
    """The text without `spans` (whitespace runs made one space), each span as a `KeptSpan`, and the index in the
    full text's words of each word of the result."""
    masked = list(text)
    for start, end in spans:
        masked[start:end] = " " * (end - start)
    full = [m.start() for m in re.finditer(r"\S+", text)]  # where the full text's words start
    read = list(re.finditer(r"\S+", "".join(masked)))
    source_words = tuple(bisect_right(full, m.start()) - 1 for m in read)
    read_starts = [m.start() for m in read]
    kept = []
    for start, end in spans:
        before = bisect_left(read_starts, start)  # the read words that start before the span
        glue_left = start > 0 and not text[start - 1].isspace()
        glue_right = end < len(text) and not text[end].isspace()
        words = tuple(sorted({bisect_right(full, i) - 1 for i in range(start, end) if not text[i].isspace()}))
        kept.append(KeptSpan(text[start:end], before, glue_left, glue_right, words))
    return " ".join(m.group() for m in read), kept, source_words


def put_back(
    translation: str,
    read: str,
    kept: Sequence[KeptSpan],
    evidence: Evidence | None,
    source_words: Sequence[int],
) -> tuple[str, list[int], Evidence | None]:
    """The `translation` of the `read` text with its kept spans put back, each beside the target word aligned to
    its neighbour (`evidence`'s alignment; without one, at the ends); each translation word's index in the result;
    and the evidence over the full source and target (`source_words`: each read word's index in the full text)."""
    out_words = translation.split()
    alignment = evidence.alignment if evidence is not None else []
    by_source: dict[int, list[int]] = {}
    for i, j in alignment:
        by_source.setdefault(i, []).append(j)
    aligned = sorted(by_source)
    gaps = [_anchor(k.word, by_source, aligned, len(out_words)) for k in kept]
    # a span sticks only to a word it touched that has letters or digits (an aligned ":" says little)
    read_words = read.split()
    worded = {(i, j) for i, j in alignment if i < len(read_words) and any(c.isalnum() for c in read_words[i])}
    final, word_at, kept_at = _render(out_words, kept, gaps, worded)
    return final, word_at, _full_evidence(evidence, kept, source_words, word_at, kept_at, len(final.split()))


def _render(
    out_words: list[str], kept: Sequence[KeptSpan], gaps: list[int], alignment: set[tuple[int, int]]
) -> tuple[str, list[int], list[list[int]]]:
    """The translation's words with each kept span put in its gap, glued to its neighbour when that word is aligned
    to the source word the span touched ("<b>red</b>" -> "<b>rote</b>", but "Jonas: A man" -> "Jonas Ein Mann":
    the ":" it touched was not translated); and where things went: each translation word's index in the result,
    and the result's words each kept span is part of (counted as the result is written, in one pass)."""
    in_gap: dict[int, list[int]] = {}
    for n, gap in enumerate(gaps):
        in_gap.setdefault(gap, []).append(n)
    owners: list[int] = []  # translation word j >= 0, kept span n as -1 - n, in output order
    for j in range(len(out_words) + 1):
        owners += [-1 - n for n in in_gap.get(j, ())]
        owners += [j] if j < len(out_words) else []
    pieces: list[str] = []
    words, after_space = 0, True  # the result's words so far; whether it is empty or ends in whitespace
    word_at = [0] * len(out_words)
    kept_at: list[list[int]] = [[] for _ in kept]
    for i, owner in enumerate(owners):
        previous = owners[i - 1] if i else None
        glued = previous is not None and (
            (
                previous < 0 <= owner
                and kept[-1 - previous].glue_right
                and (kept[-1 - previous].word, owner) in alignment
            )
            or (
                owner < 0 <= previous
                and kept[-1 - owner].glue_left
                and (kept[-1 - owner].word - 1, previous) in alignment
            )
        )
        if pieces and not glued:
            pieces.append(" ")
            after_space = True
        piece = out_words[owner] if owner >= 0 else kept[-1 - owner].text
        held = []  # the result's word index of each of the piece's non-space characters
        for char in piece:
            if char.isspace():
                after_space = True
                continue
            words += after_space
            after_space = False
            held.append(words - 1)
        pieces.append(piece)
        if owner >= 0:
            word_at[owner] = held[0]
        else:
            kept_at[-1 - owner] = sorted(set(held))
    return "".join(pieces), word_at, kept_at


def _full_evidence(
    evidence: Evidence | None,
    kept: Sequence[KeptSpan],
    source_words: Sequence[int],
    word_at: list[int],
    kept_at: list[list[int]],
    n_target: int,
) -> Evidence | None:
    """The evidence over the full source and target: kept words aligned to themselves, probability 1 (a word
    that a kept span is glued to keeps its own)."""
    if evidence is None:
        return None
    alignment = [(source_words[i], word_at[j]) for i, j in evidence.alignment]
    probs: list[float] = [1.0] * n_target
    for j, p in enumerate(evidence.word_probs):
        probs[word_at[j]] = p
    for k, targets in zip(kept, kept_at, strict=True):
        alignment += list(zip(k.source_words, targets, strict=False))
    return replace(evidence, alignment=sorted(set(alignment)), word_probs=probs)


def _anchor(word: int, by_source: dict[int, list[int]], aligned: list[int], n_target: int) -> int:
    """The target gap [0, n_target] for a span standing before read source word `word`: after the target of the
    nearest aligned source word before it, else before that of the nearest one after it, else pro rata
    (`by_source`: each aligned source word's targets; `aligned`: those source words, sorted)."""
    at = bisect_left(aligned, word)
    if at > 0:
        return max(by_source[aligned[at - 1]]) + 1
    if at < len(aligned):
        return min(by_source[aligned[at]])
    return n_target if word > 0 else 0
