"""OpenDocument text (.odt) and presentations (.odp), read and written by `odfpy`: each paragraph and heading (of the
body, its tables, lists, frames and notes, a presentation's slides and notes pages, and the page headers and
footers) is translated whole, and its formatting follows the
words as Word's does (documents/inline.py): the stretches inside a styled `text:span` or a `text:a` link whose
formatting differs from the paragraph's commonest one become inline elements that tag transfer places on the
aligned words, and each translated piece is written back inside copies of the spans and links it came from (the
href kept).

- Spaces, tabs and line breaks: `text:s` is read as its spaces and written back by `odf.teletype`. A `text:tab`
  or `text:line-break` ends a sentence (a `<br>` in the fragment, which tag transfer passes through), so the
  translation keeps each one between the translations of what it separated; inside a sentence it would be lost.
- Kept as they are, beside the word they came with (`<img data-keep>` in the fragment): everything else a
  paragraph holds (fields such as page numbers and dates: their results are computed; notes, frames, annotations,
  tracked changes' marks, bookmarks, soft page breaks); the paragraphs inside notes, frames and annotations are
  translated on their own. A paragraph whose words are all kept is left as it was and named in the report's
  `left`, as is one whose `text:s` claims over `MAX_SPACES` spaces.
- Only content.xml (and styles.xml when a header or footer was translated) is written by odfpy; every other
  entry (mimetype first and stored, the manifest, meta.xml, settings.xml, pictures, macros, embedded objects)
  is copied as it was, because odfpy's own `save` rewrites them all (meta's generator, settings, manifest) and
  drops signatures and entries the manifest does not list.
- Safety: the archive passes `check_archive` first (limits, paths, no entity declarations); then every XML part
  odfpy will parse is parsed by `defusedxml` (no entities, nothing external, at most `MAX_DEPTH` deep), because
  odfpy prints a part it cannot parse and goes on without it, and writes XML recursively.
"""

import io
import re
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import NamedTuple
from xml.etree.ElementTree import ParseError
from xml.sax import SAXException

from defusedxml import ElementTree as SafeET
from odf import teletype
from odf.element import Element, Node
from odf.namespaces import TEXTNS
from odf.opendocument import OpenDocument, load
from odf.text import LineBreak, Tab

from tnmt.documents.archive import check_archive, malformed_part
from tnmt.documents.inline import Item, Keep, Text, fragment, items, plain_run
from tnmt.documents.units import Pending, marked
from tnmt.errors import UserError

KINDS = {  # what each OpenDocument format is called in errors, and its mimetype
    "odt": ("an OpenDocument text", "application/vnd.oasis.opendocument.text"),
    "odp": ("an OpenDocument presentation", "application/vnd.oasis.opendocument.presentation"),
}
PARSED = {"content.xml", "styles.xml", "meta.xml", "settings.xml", "manifest.xml"}  # the parts odfpy parses
MAX_DEPTH = 256  # odfpy writes XML recursively: deeper nesting would overflow Python's stack
MAX_SPACES = 1000  # a larger text:s is no text (the paragraph is kept as it is)
PARAGRAPHS = {(TEXTNS, "p"), (TEXTNS, "h")}
WRAPPERS = {(TEXTNS, "span"), (TEXTNS, "a")}  # inline formatting and links: their text is the paragraph's
BREAKS = {(TEXTNS, "tab"): "\t", (TEXTNS, "line-break"): "\n"}
MARKS = {"\t": "<br data-tab>", "\n": "<br>"}  # in a fragment: blocks, which end a sentence and pass through
MARKED = re.compile("(<br data-tab>|<br>)")
WHITESPACE = re.compile("[ \t\r\n]+")  # in XML text, any run of these is one space (ODF 1.2, 6.1.2)

Run = tuple[str, tuple[Element, ...]]  # a stretch of text, and the spans and links around it (outermost first)


class _Kept(NamedTuple):
    """An element kept as it is (a field, a note, a frame, an annotation, a bookmark, a tracked change's mark), and
    the spans and links around it."""

    element: Element
    chain: tuple[Element, ...]


@dataclass
class _Paragraph:
    """A paragraph to translate: its runs and kept elements in lines (cut at its tabs and line breaks)."""

    element: Element
    part: str  # the archive entry that holds it
    lines: list[list[Run | _Kept]] = field(default_factory=lambda: [[]])
    breaks: list[str] = field(default_factory=list)  # between lines: "\t" or "\n"

    def read(self, node: Element, chain: tuple[Element, ...] = ()) -> bool:
        """Reads `node`'s content into the lines; False when a `text:s` claims more than `MAX_SPACES` spaces."""
        for child in node.childNodes:
            if child.nodeType == Node.TEXT_NODE:
                self.add(WHITESPACE.sub(" ", child.data), chain)
            elif child.qname == (TEXTNS, "s"):
                count = str(child.getAttrNS(TEXTNS, "c") or 1)
                if not count.isdecimal() or int(count) > MAX_SPACES:
                    return False
                self.add(" " * int(count), chain)
            elif child.qname in BREAKS:
                self.breaks.append(BREAKS[child.qname])
                self.lines.append([])
            elif child.qname in WRAPPERS:
                if not self.read(child, (*chain, child)):
                    return False
            elif child.nodeType == Node.ELEMENT_NODE:
                self.lines[-1].append(_Kept(child, chain))
        return True

    def add(self, text: str, chain: tuple[Element, ...]) -> None:
        """Adds text to the current line, to its last run when that one is formatted alike."""
        line = self.lines[-1]
        if line and not isinstance(line[-1], _Kept) and _format(line[-1][1]) == _format(chain):
            line[-1] = (line[-1][0] + text, line[-1][1])
        else:
            line.append((text, chain))

    def words(self) -> str:
        """The text of the paragraph's runs (what is translated), breaks and kept elements left out."""
        return "".join(part[0] for line in self.lines for part in line if not isinstance(part, _Kept))

    def fragment(self) -> str:
        """The paragraph as inline markup: each line's runs and kept elements (documents/inline.py), lines joined
        by their breaks' marks."""
        parts = [fragment(*_items(line)) if line else "" for line in self.lines]
        return parts[0] + "".join(MARKS[b] + part for b, part in zip(self.breaks, parts[1:], strict=True))

    def write(self, translated: str) -> None:
        """Replaces the paragraph by a copy holding the translated fragment's pieces, each kept element moved to
        its place (a note's or a frame's own paragraphs are translated on their own)."""
        old = self.element
        new = Element(qname=old.qname, qattributes=old.attributes, check_grammar=False)
        parts = MARKED.split(translated)  # line, mark, line, mark, ..., line
        for k, part in enumerate(parts):
            if k % 2:
                new.addElement(Tab() if part == MARKS["\t"] else LineBreak())
                continue
            line = self.lines[k // 2]
            if not line:  # between two breaks: nothing to write
                continue
            runs = [r for r in line if not isinstance(r, _Kept)]
            kept = [r for r in line if isinstance(r, _Kept)]
            plain = plain_run([t for t, _ in runs], [_format(c) for _, c in runs]) if runs else 0
            for piece in items(part):
                if isinstance(piece, Keep):
                    _within(new, kept[piece.atom].chain).addElement(kept[piece.atom].element, check_grammar=False)
                else:
                    chain = runs[plain if piece.run is None else piece.run][1]
                    teletype.addTextToElement(_within(new, chain), piece.text)
        old.parentNode.insertBefore(new, old)
        old.parentNode.removeChild(old)


def _items(line: list[Run | _Kept]) -> tuple[list[Item], list[bytes]]:
    """A line's runs and kept elements as items (documents/inline.py), and its runs' formats."""
    found: list[Item] = []
    formats: list[bytes] = []
    for part in line:
        if isinstance(part, _Kept):
            found.append(Keep(len(found) - len(formats)))
        else:
            found.append(Text(len(formats), part[0]))
            formats.append(_format(part[1]))
    return found, formats


def _within(parent: Element, chain: tuple[Element, ...]) -> Element:
    """Copies of the spans and links of `chain` nested in `parent`: where a piece of the translation goes."""
    for wrapper in chain:
        copy = Element(qname=wrapper.qname, qattributes=wrapper.attributes, check_grammar=False)
        parent.addElement(copy, check_grammar=False)
        parent = copy
    return parent


def read_opendocument(data: bytes, *, where: str, fmt: str = "odt") -> Pending:
    """The document (`fmt`: "odt", a text, or "odp", a presentation: its slides' and notes' frames) waiting for its
    paragraphs' translations (each an inline-markup fragment).

    Raises:
        UserError: not a document of `fmt`, or XML it refuses to parse (named after `where`).
    """
    kind, mimetype = KINDS[fmt]
    check_archive(data, where=where, kind=kind)
    entries = _entries(data, where=where, kind=kind)
    try:
        document = load(io.BytesIO(data))
    except SAXException as error:  # a part that is not well-formed: named, with its line
        raise UserError(f"{where}: not {kind} ({malformed_part(data) or f'{type(error).__name__}: {error}'})") from None
    except (KeyError, IndexError, TypeError, ValueError, zipfile.BadZipFile) as error:
        raise UserError(f"{where}: not {kind} ({type(error).__name__}: {error})") from None
    if not document.mimetype.startswith(mimetype):
        raise UserError(f"{where}: not {kind} (its mimetype is {document.mimetype!r})")
    paragraphs, left, counted = [], [], {}
    for part, element in _candidates(document):
        paragraph, counted[part] = _Paragraph(element, part), counted.get(part, 0) + 1
        read = paragraph.read(element)
        if read and any(c.isalnum() for c in paragraph.words()):
            paragraphs.append(paragraph)
        elif any(c.isalnum() for c in teletype.extractText(element)):
            why = "its words are all kept (a field's result)" if read else f"a text:s of over {MAX_SPACES} spaces"
            left.append(f"{part} paragraph {counted[part]}: {why}")

    def write(out: list[str]) -> bytes:
        return _write(document, entries, paragraphs, out)

    return marked([p.fragment() for p in paragraphs], write, left=left)


def _entries(data: bytes, *, where: str, kind: str) -> list[tuple[zipfile.ZipInfo, bytes]]:
    """Every entry of the archive with its content, the XML parts odfpy parses checked (module docstring)."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    try:
        entries = [(info, archive.read(info)) for info in archive.infolist()]
    except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError, EOFError, zlib.error) as error:
        raise UserError(f"{where}: not {kind} ({error})") from None
    if "content.xml" not in {info.filename for info, _ in entries}:
        raise UserError(f"{where}: not {kind} (no content.xml)")
    for info, content in entries:
        if PurePosixPath(info.filename).name in PARSED:
            depth = 0
            try:
                for event, _ in SafeET.iterparse(io.BytesIO(content), events=("start", "end")):
                    depth += 1 if event == "start" else -1
                    if depth > MAX_DEPTH:
                        raise ValueError(f"elements nested over {MAX_DEPTH} deep")
            except (ParseError, ValueError) as error:  # defusedxml's refusals are ValueErrors
                raise UserError(f"{where}: not {kind} ({info.filename}: {type(error).__name__}: {error})") from None
    return entries


def _candidates(document: OpenDocument) -> Iterator[tuple[str, Element]]:
    """Every text:p and text:h of the body and of the master pages (headers, footers), in document order, with
    the archive entry that holds it."""
    for part, top in (("content.xml", document.body), ("styles.xml", document.masterstyles)):
        stack = [top]
        while stack:
            node = stack.pop()
            if node.qname in PARAGRAPHS:
                yield part, node
            stack.extend(reversed([c for c in node.childNodes if c.nodeType == Node.ELEMENT_NODE]))


def _format(chain: tuple[Element, ...]) -> bytes:
    """A run's formatting: the names and attributes (style, href) of the spans and links around it."""
    return repr([(e.qname, sorted(e.attributes.items())) for e in chain]).encode()


def _write(
    document: OpenDocument, entries: list[tuple[zipfile.ZipInfo, bytes]], paragraphs: list[_Paragraph], out: list[str]
) -> bytes:
    """The archive with the translated paragraphs: the parts holding them written by odfpy, the rest copied."""
    for paragraph, translated in zip(paragraphs, out, strict=True):
        paragraph.write(translated)
    parts = {p.part for p in paragraphs}
    written = {"content.xml": document.contentxml()} if "content.xml" in parts else {}
    if "styles.xml" in parts:
        written["styles.xml"] = document.stylesxml().encode("utf-8")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for info, content in entries:
            copy = zipfile.ZipInfo(info.filename, info.date_time)  # a fresh header: no stale sizes or extras
            copy.compress_type, copy.external_attr = info.compress_type, info.external_attr
            archive.writestr(copy, written.get(info.filename, content))
    return buffer.getvalue()
