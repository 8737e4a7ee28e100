"""Spans of a text to copy to its translation as written: do-not-translate terms, and what a model cannot read.

A translation model trained on captions has never seen a URL, an e-mail address or an emoji: fed one, it
writes a loop of subwords ("🐶🐶 🚲" came back as "Medizelschachtachtacht..."). Such spans are found here,
with the terms a user lists; decode/steering.py keeps them out of what the model reads and puts them back
beside the target word aligned to their neighbour.

- Listed terms match as whole words, case-sensitively: listing "Apple" keeps the company, not the fruit.
- URLs (`http(s)://...`, `www.x.y...`) end before trailing sentence punctuation and an unbalanced ")".
- E-mail addresses; emoji with their modifiers, joiners (one family is one span), keycaps and flags.
- Markup sent as plain text (a client that sends HTML without `format: "html"`): tags, comments and character
  references ("&amp;", "&#x1F436;") stay as they are; the words between them are translated.
- With `readable`, every run of non-space characters the model's vocabulary lacks.
Overlapping or touching spans merge into one.
"""

import re
from collections.abc import Callable, Sequence

_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"']+", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_PICTOGRAPH = (  # Extended_Pictographic's blocks: symbols, dingbats, arrows, and U+1F000 on
    "\u00a9\u00ae\u203c\u2049\u2122\u2139\u2194-\u21aa\u231a-\u23ff\u24c2\u25aa-\u27bf\u2934\u2935"
    "\u2b05-\u2b55\u3030\u303d\u3297\u3299\U0001f000-\U0001faff"
)
_MODIFIER = "\ufe0e\ufe0f\u20e3\U0001f3fb-\U0001f3ff\U000e0020-\U000e007f"
_EMOJI = re.compile(rf"[{_PICTOGRAPH}][{_MODIFIER}]*(?:\u200d[{_PICTOGRAPH}][{_MODIFIER}]*)*")
_MARKUP = re.compile(
    r"<!--.*?-->|</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>|&(?:#\d+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);", re.DOTALL
)
_TRAILING = ".,;:!?'\"»”’"


def find_verbatim(
    text: str, terms: Sequence[str] = (), *, readable: Callable[[str], bool] | None = None
) -> list[tuple[int, int]]:
    """The character spans [start, end) of `text` to copy as written (the module docstring's rules), sorted and
    disjoint."""
    spans = [_url_end(text, m.start(), m.end()) for m in _URL.finditer(text)]
    spans += [m.span() for m in _EMAIL.finditer(text)]
    spans += [m.span() for m in _EMOJI.finditer(text)]
    spans += [m.span() for m in _MARKUP.finditer(text)]
    for term in dict.fromkeys(" ".join(t.split()) for t in terms if t.strip()):
        words = r"\s+".join(re.escape(word) for word in term.split(" "))
        spans += [m.span() for m in re.finditer(rf"(?<!\w){words}(?!\w)", text)]
    if readable is not None:
        start = None
        for i, char in enumerate(text + " "):
            unreadable = not char.isspace() and not readable(char)
            if unreadable and start is None:
                start = i
            elif not unreadable and start is not None:
                spans.append((start, i))
                start = None
    return _merged(spans)


def notranslate_element(tag: str, attrs: Sequence[tuple[str, str | None]]) -> bool:
    """Does an HTML element ask not to be translated (`translate="no"`, or the class `notranslate` that Google
    and DeepL honour)?"""
    for name, value in attrs:
        name, value = name.lower(), (value or "")
        if name == "translate" and value.strip().lower() == "no":
            return True
        if name == "class" and "notranslate" in value.lower().split():
            return True
    return False


def _url_end(text: str, start: int, end: int) -> tuple[int, int]:
    """A URL's span without the punctuation that ends the sentence around it, nor a ")" it did not open."""
    while end > start and (
        text[end - 1] in _TRAILING or (text[end - 1] == ")" and text[start:end].count("(") < text[start:end].count(")"))
    ):
        end -= 1
    return start, end


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[0] < s[1]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged
