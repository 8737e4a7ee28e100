"""Markdown documents (.md), parsed by `markdown-it-py` (CommonMark, GitHub's tables and strikethrough): the text
of each paragraph, heading and table cell is translated, and every other byte of the file stays as it was.

- Kept as written: front matter (a leading `---` block), code blocks, HTML blocks (not translated), reference
  definitions, rules, blank lines, list markers, indentation, `>` markers, table pipes and alignment rows; in the
  text, code spans, autolinks, lone inline HTML tags, link and image destinations and titles (`](url "t")`,
  `][ref]`; a shortcut `[text]` is written in full, `[testo][text]`), and placeholders (units.py).
- Carried to the aligned words by tag transfer (`units.marked`): emphasis, strong, strikethrough, links, images
  (the alt text is translated with the sentence around it, as a link's text is) and paired inline HTML elements,
  kept whole when marked not to be translated (`<kbd>`, `translate="no"`: kept.py). A block's text is an HTML
  fragment whose elements say what they stand for (`<em data-md="3">`, `<code data-md="5"></code>` for what is
  kept), and its translation is written back with the source's own delimiters. An element that the alignment
  leaves without words takes the nearest word (Markdown has no empty emphasis); an image's alt may be empty.
- Lines: soft line breaks become spaces (the model reads a paragraph's sentences whole), so a block is written
  on one line per hard break, after its source line's prefix (`> `, `- `, `## `, indentation) and before its
  last line's rest (a hard break's spaces, a closing `#`, the next cell); its other lines go.
- Escaped where the translation would read as Markdown: `\\`, `` ` ``, `*`, `[`, `]`, `<`, `~`, `_` at a word's
  edge, an entity-like `&`, `|` in a cell, a line start that would open a block (`#`, `>`, `-`, `1.`).
- Left as they are: a block translated into itself or into nothing, and one whose text the parser changed from
  its lines (tabs expanded).
"""

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from html.parser import HTMLParser

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline
from markdown_it.token import Token

from tnmt.documents.markup import VOID
from tnmt.documents.units import Pending, marked

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # markdown-it's line breaks
_FRONT_MATTER = re.compile(r"---[ \t]*\r?\n(?:.*?\r?\n)??(?:---|\.\.\.)[ \t]*(?:\r?\n|$)", re.DOTALL)
_BREAK = "\x00"  # a hard break in a written block (markdown-it reads U+0000 as U+FFFD: never in the source)
_SPECIAL = re.compile(r"[\\`*\[\]<~]|(?<![^\W_])_|_(?![^\W_])|&(?=#?\w+;)")
_BLOCK_START = re.compile(r"(?:#{1,6}|[-+*]|\d{1,9}[.)])(?:\s|$)|>|(?:=+|-+)\s*$")
_HTML_TAG = re.compile(r"<(/?)([A-Za-z][\w-]*)[^>]*?(/?)>$")
_EMPTY = re.compile(r'<(?!code\b)([\w-]+) data-md="(\d+)"[^>]*>')  # the start tag of an element that can hold words


@dataclass
class _Inline:
    """A paragraph, heading or table cell: where its text is in its lines (`spans`, from line `first` on), the
    lines that start after a hard break, its text as a fragment, and what the fragment's elements stand for."""

    first: int
    spans: list[tuple[int, int]]
    cell: bool
    breaks: list[int] = field(default_factory=list)
    fragment: str = ""
    delimiters: dict[int, tuple[str, str]] = field(default_factory=dict)  # element k: Markdown around its text
    kept: dict[int, str] = field(default_factory=dict)  # element k: its Markdown, written as it was

    def build(self, tokens: list[Token], src: str, *, nested: bool = False) -> str:
        """`tokens` (an inline token's children, parsed from `src`) as an inline-markup fragment."""
        out, pairs, ends, autolink = [], _html_pairs(tokens), {}, False
        for i, t in enumerate(tokens):
            k, source = len(self.delimiters) + len(self.kept), src[slice(*t.meta.get("span", (0, 0)))]
            if autolink:  # its text and end are in its source, kept
                autolink = t.type != "link_close"
            elif t.type == "text":
                out.append(html.escape(t.content, quote=False))
            elif t.type == "softbreak" or (t.type == "hardbreak" and nested):
                out.append(" ")
            elif t.type == "hardbreak":  # ends a sentence (markup.py) and a line
                self.kept[k] = ("\\" if source.startswith("\\") else "") + _BREAK
                self.breaks.append(src.count("\n", 0, t.meta["span"][0]) + 1)
                out.append(f'<br data-md="{k}">')
            elif i in pairs:  # an HTML element: its start tag marked, its end tag named
                name = ends[pairs[i]] = _HTML_TAG.match(t.content)[2]
                self.delimiters[k] = (t.content, tokens[pairs[i]].content)
                out.append(f'{t.content[: 1 + len(name)]} data-md="{k}"{t.content[1 + len(name) :]}')
            elif i in ends:
                out.append(f"</{ends[i]}>")
            elif t.type in ("code_inline", "html_inline") or t.markup == "autolink":
                self.kept[k], autolink = source, t.markup == "autolink"
                out.append(f'<code data-md="{k}"></code>')
            elif t.type == "image":
                self.delimiters[k] = ("![", t.meta["close"])
                out.append(f'<span data-md="{k}">{self.build(t.children or [], t.content, nested=True)}</span>')
            elif t.nesting == 1:  # emphasis, strong, strikethrough, link
                self.delimiters[k] = ("[", t.meta["close"]) if t.type == "link_open" else (t.markup, t.markup)
                out.append(f'<{t.tag} data-md="{k}">')
            elif t.nesting == -1:
                out.append(f"</{t.tag}>")
        return "".join(out)


def read_markdown(text: str, *, where: str) -> Pending:
    """A Markdown document waiting for the translations of its paragraphs, headings and table cells.

    `where` names the file, as for every format; no text is refused (anything is Markdown).
    """
    lines, blocks = _blocks(text)
    return marked([b.fragment for b in blocks], lambda translated: _write(lines, blocks, translated).encode())


def _blocks(text: str) -> tuple[list[str], list[_Inline]]:
    """The document's lines (with their line breaks) and its blocks of text."""
    lines = _LINE.findall(text)
    front = _FRONT_MATTER.match(text)
    skipped = len(_LINE.findall(front.group())) if front else 0
    tokens = _parser().parse("\n" * skipped + "".join(lines[skipped:]))
    blocks, cursor = [], {}  # cursor: where the next cell of a table row may start
    for at, token in enumerate(tokens):
        if token.type != "inline" or not token.content.strip() or token.map is None:
            continue
        cell = tokens[at - 1].type in ("th_open", "td_open")
        first, end = token.map
        parts, spans = token.content.split("\n"), []
        for n, part in zip(range(first, end), parts, strict=False):
            needle, body = part.strip().replace("|", "\\|" if cell else "|"), lines[n].rstrip("\r\n")
            start = body.find(needle, cursor.get(n, 0)) if cell else body.rfind(needle)
            if start >= 0:
                spans.append((start, start + len(needle)))
                cursor[n] = start + len(needle)
        if len(parts) == len(spans) == end - first:
            block = _Inline(first, spans, cell)
            block.fragment = block.build(token.children or [], token.content)
            blocks.append(block)
    return lines, blocks


def _write(lines: list[str], blocks: list[_Inline], translated: list[str]) -> str:
    """The document with each block's text replaced by its translated fragment written as Markdown."""
    lines = list(lines)
    for block, fragment in reversed(list(zip(blocks, translated, strict=True))):
        segments = _markdown(block, fragment) if fragment != block.fragment else []
        if not segments or not all(segments):
            continue
        bounds = [0, *block.breaks, len(block.spans)]
        written = []
        for a, b, segment in zip(bounds[:-1], bounds[1:], segments, strict=True):
            head, tail = lines[block.first + a], lines[block.first + b - 1]
            written.append(head[: block.spans[a][0]] + segment + tail[block.spans[b - 1][1] :])
        lines[block.first : block.first + len(block.spans)] = written
    return "".join(lines)


def _markdown(block: _Inline, fragment: str) -> list[str]:
    """A block's translated fragment as Markdown, one string per line (hard breaks), escaped as it must be."""
    segments = [s.strip() for s in _Markdown(block, _filled(block, fragment)).text.split(_BREAK)]
    if block.cell:
        return [s.replace("|", "\\|") for s in segments]
    return [_escape_line(s) for s in segments]


def _filled(block: _Inline, fragment: str) -> str:
    """The fragment with each element that the alignment left without words around the nearest word before it,
    else after it: Markdown has no empty emphasis, and an empty link is not seen. An image's alt may be empty."""
    pieces = re.split(r"(<[^>]*>)", fragment)  # text at even places, tags at odd ones
    hosts: dict[tuple[int, int, int], list[tuple[str, str]]] = {}  # (piece, word span): the tags to put around
    for i in range(1, len(pieces) - 2, 2):
        found = _EMPTY.fullmatch(pieces[i])
        if (
            not found
            or pieces[i + 1]
            or pieces[i + 2] != f"</{found[1]}>"
            or block.delimiters.get(int(found[2]), ("",))[0] == "!["
        ):
            continue
        near = [*range(i - 1, -1, -2), *range(i + 3, len(pieces), 2)]
        host = next((j for j in near if pieces[j].strip()), None)
        if host is not None:
            words = [m.span() for m in re.finditer(r"\S+", pieces[host])]
            hosts.setdefault((host, *words[-1 if host < i else 0]), []).append((pieces[i], pieces[i + 2]))
            pieces[i] = pieces[i + 2] = ""
    for (j, a, b), tags in sorted(hosts.items(), reverse=True):  # the later words of a piece first
        starts, ends = "".join(s for s, _ in tags), "".join(e for _, e in reversed(tags))
        pieces[j] = pieces[j][:a] + starts + pieces[j][a:b] + ends + pieces[j][b:]
    return "".join(pieces)


def _escape_line(line: str) -> str:
    """`line` with a backslash before what would start a block (a heading, a list item, a quote) or close a
    heading (a last `#`)."""
    line = re.sub(r"(?<=\s)(#+)$", r"\\\1", line)
    found = _BLOCK_START.match(line)
    if not found:
        return line
    at = len(found.group()) - len(found.group().lstrip("0123456789"))
    return line[:at] + "\\" + line[at:]


class _Markdown(HTMLParser):
    """A block's translated fragment written back as Markdown (`text`): each element as its source delimiters
    around its text (the whitespace moved out of them), or as its kept source; the words escaped."""

    def __init__(self, block: _Inline, fragment: str) -> None:
        super().__init__(convert_charrefs=True)
        self.block = block
        self._out: list[str] = []
        self._open: list[tuple[str, int | None, int]] = []  # element name, its k (None: kept), where its text starts
        self.feed(fragment)
        self.close()
        self.text = "".join(self._out)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        named = next((value for name, value in attrs if name == "data-md"), None)  # ours comes first
        k = int(named) if named and named.isdigit() else None
        if k in self.block.kept:
            self._out.append(self.block.kept[k])
        if tag not in VOID:
            self._open.append((tag, None if k in self.block.kept else k, len(self._out)))

    def handle_endtag(self, tag: str) -> None:
        at = next((i for i in reversed(range(len(self._open))) if self._open[i][0] == tag), None)
        if at is None:
            return
        _, k, start = self._open.pop(at)
        if k not in self.block.delimiters:
            return
        (before, after), inner = self.block.delimiters[k], "".join(self._out[start:])
        text = inner.strip()
        if not text and not before.strip("*_~"):  # emphasis without words (none to take, `_filled`): none
            before = after = ""
        lead, trail = inner[: len(inner) - len(inner.lstrip())], inner[len(inner.rstrip()) :]
        self._out[start:] = [lead, before, text, after, trail]

    def handle_data(self, data: str) -> None:
        data = re.sub(r"[\r\n]", " ", data.replace(_BREAK, ""))
        self._out.append(_SPECIAL.sub(lambda m: "\\" + m.group(), data))


def _html_pairs(tokens: list[Token]) -> dict[int, int]:
    """The inline HTML start tags among `tokens` that an end tag among them closes: start index -> end index."""
    pairs: dict[int, int] = {}
    started: list[tuple[str, int]] = []  # the start tags still open: name, index
    for i, t in enumerate(tokens):
        tag = _HTML_TAG.match(t.content) if t.type == "html_inline" else None
        name = tag[2].lower() if tag and not tag[3] and tag[2].lower() not in VOID else None
        if name and not tag[1]:
            started.append((name, i))
        elif name in [n for n, _ in started]:
            at = max(n for n, (other, _) in enumerate(started) if other == name)
            pairs[started[at][1]] = i
            del started[at:]
    return pairs


@cache
def _parser() -> MarkdownIt:
    """CommonMark with tables and strikethrough, its inline rules noting where their tokens come from."""
    md = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    for rule in list(md.inline.ruler.__rules__):
        md.inline.ruler.at(rule.name, _noting(rule.name, rule.fn))
    return md


def _noting(name: str, rule: Callable[[StateInline, bool], bool]) -> Callable[[StateInline, bool], bool]:
    """`rule`, noting on the first token it makes (not pending text) where in the source it comes from
    (`meta["span"]`), and for a link or an image, the Markdown after its text (`meta["close"]`)."""

    def noted(state: StateInline, silent: bool) -> bool:
        start, before = state.pos, len(state.tokens)
        if not rule(state, silent):
            return False
        made = next((t for t in state.tokens[before:] if t.type != "text"), None)
        if not silent and made is not None:
            made.meta["span"] = (start, state.pos)
            if name in ("link", "image"):
                image = name == "image"
                end = state.md.helpers.parseLinkLabel(state, start + image, not image)
                close = state.src[end : state.pos]
                label = state.src[start + 1 + image : end]
                made.meta["close"] = f"][{label}]" if close in ("]", "][]") else close  # the label finds the URL
        return True

    return noted
