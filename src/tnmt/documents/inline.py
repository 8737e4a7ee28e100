"""A paragraph of an office document as inline markup, and back: its formatted runs, the elements that wrap
some of them (a hyperlink, a tracked insertion, a content control) and the things in it that are not text to
translate (a bookmark, a comment's anchor, a field whose result is computed, a picture, a footnote's mark, a line
break).

A format reads a paragraph into `Item`s, in order: `Text` (a run's text, inside the wrappers open around it) and
`Keep` (one thing kept as it is, by its index in the format's list). `fragment` writes them as markup that
documents/markup.py translates sentence by sentence and tag transfer carries to the aligned words:

- the runs whose formatting differs from the paragraph's commonest one (by characters) are `<span data-run="k">`
  around their text; the commonest formatting is the paragraph's plain text;
- a wrapper is `<span data-wrap="w">` around what it holds;
- a kept thing is `<img data-keep="j">` beside the word it came with, or `<br data-keep="j">` where it breaks the
  line (a break ends a sentence: the words either side are not one sentence).

`items` reads a translated fragment back into `Item`s (a text outside every run's span is the plain run's:
`run=None`), which the format writes as runs with those runs' formatting, wrapped as the markup says, each kept
thing in its place.
"""

import html
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from html.parser import HTMLParser

XML_INVALID = re.compile("[\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\ufffe\\uffff\\ud800-\\udfff]")  # a model may write them


@dataclass(frozen=True)
class Text:
    """A run's text: `run` indexes the paragraph's runs (None: the plain run's formatting), `wrappers` the
    wrappers open around it, outermost first."""

    run: int | None
    text: str
    wrappers: tuple[int, ...] = ()


@dataclass(frozen=True)
class Keep:
    """A thing kept as it is (`atom` indexes the format's list of them); `breaks`: it breaks the line."""

    atom: int
    breaks: bool = False
    wrappers: tuple[int, ...] = ()


Item = Text | Keep


def plain_run(runs: Sequence[str], formats: Sequence[bytes]) -> int:
    """The index of the first run with the paragraph's commonest formatting, by characters (`runs`: each run's
    text)."""
    weights: Counter[bytes] = Counter()
    for text, form in zip(runs, formats, strict=True):
        weights[form] += len(text)
    return formats.index(weights.most_common(1)[0][0])


def fragment(items: Sequence[Item], formats: Sequence[bytes]) -> str:
    """The paragraph as inline markup: `items` in order, `formats` each run's formatting (by `Text.run`)."""
    texts = [""] * len(formats)
    for item in items:
        if isinstance(item, Text):
            texts[item.run] += item.text
    plain = formats[plain_run(texts, formats)] if formats else b""
    parts: list[str] = []
    open_: list[int] = []
    for item in items:
        common = 0
        while common < min(len(open_), len(item.wrappers)) and open_[common] == item.wrappers[common]:
            common += 1
        parts += ["</span>"] * (len(open_) - common)
        parts += [f'<span data-wrap="{w}">' for w in item.wrappers[common:]]
        open_ = list(item.wrappers)
        if isinstance(item, Keep):
            parts.append(f'<{"br" if item.breaks else "img"} data-keep="{item.atom}">')
            continue
        escaped = html.escape(item.text, quote=False)
        parts.append(escaped if formats[item.run] == plain else f'<span data-run="{item.run}">{escaped}</span>')
    parts += ["</span>"] * len(open_)
    return "".join(parts)


class _Items(HTMLParser):
    """A translated fragment as `Item`s in order; text outside every run's span is the plain run's (None)."""

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list[Item] = []
        self._open: list[tuple[str, int | None]] = []  # ("run" | "wrap" | "other", index)
        self.feed(markup)
        self.close()

    def _wrappers(self) -> tuple[int, ...]:
        return tuple(k for kind, k in self._open if kind == "wrap" and k is not None)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        named = dict(attrs)
        keep = _index(named.get("data-keep"))
        if keep is not None:
            self.items.append(Keep(keep, tag == "br", self._wrappers()))
            return
        if tag in ("img", "br"):
            return
        for kind in ("run", "wrap"):
            if (k := _index(named.get(f"data-{kind}"))) is not None:
                self._open.append((kind, k))
                return
        self._open.append(("other", None))

    def handle_endtag(self, tag: str) -> None:
        if self._open and tag not in ("img", "br"):
            self._open.pop()

    def handle_data(self, data: str) -> None:
        run = next((k for kind, k in reversed(self._open) if kind == "run"), None)
        data, wrappers = XML_INVALID.sub("", data), self._wrappers()
        last = self.items[-1] if self.items else None
        if isinstance(last, Text) and (last.run, last.wrappers) == (run, wrappers):
            self.items[-1] = Text(run, last.text + data, wrappers)
        elif data:
            self.items.append(Text(run, data, wrappers))


def items(markup: str) -> list[Item]:
    """The translated fragment's items (see `_Items`)."""
    return _Items(markup).items


def _index(value: str | None) -> int | None:
    return int(value) if value is not None and value.isdigit() else None
