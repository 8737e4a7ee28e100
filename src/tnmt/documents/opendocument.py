"""OpenDocument text (.odt), read and written by `odfpy`: each paragraph and heading (of the body, its tables,
lists, frames and notes, and of the page headers and footers) is translated whole, and its formatting follows the
words as Word's does (documents/inline.py): the stretches inside a styled `text:span` or a `text:a` link whose
formatting differs from the paragraph's commonest one become inline elements that tag transfer places on the
aligned words, and each translated piece is written back inside copies of the spans and links it came from (the
href kept).

- Spaces, tabs and line breaks: `text:s` is read as its spaces and written back by `odf.teletype`. A `text:tab`
  or `text:line-break` ends a sentence (a `<br>` in the fragment, which tag transfer passes through), so the
  translation keeps each one between the translations of what it separated; inside a sentence it would be lost.
- Left as they are: paragraphs holding anything else (fields such as page numbers and dates, notes, frames,
  annotations, tracked changes); the paragraphs inside their notes and text boxes are translated on their own.
  Bookmarks and soft page breaks do not stop a paragraph: they are kept, moved to its start.
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
from xml.etree.ElementTree import ParseError
from xml.sax import SAXException

from defusedxml import ElementTree as SafeET
from odf import teletype
from odf.element import Element, Node
from odf.namespaces import TEXTNS
from odf.opendocument import OpenDocument, load
from odf.text import LineBreak, Tab

from tnmt.documents.archive import check_archive, malformed_part
from tnmt.documents.inline import Text, fragment, items, plain_run
from tnmt.documents.units import Pending, marked
from tnmt.errors import UserError

KIND = "an OpenDocument text"
MIMETYPE = "application/vnd.oasis.opendocument.text"
PARSED = {"content.xml", "styles.xml", "meta.xml", "settings.xml", "manifest.xml"}  # the parts odfpy parses
MAX_DEPTH = 256  # odfpy writes XML recursively: deeper nesting would overflow Python's stack
MAX_SPACES = 1000  # a larger text:s is no text (the paragraph is kept as it is)
PARAGRAPHS = {(TEXTNS, "p"), (TEXTNS, "h")}
WRAPPERS = {(TEXTNS, "span"), (TEXTNS, "a")}  # inline formatting and links: their text is the paragraph's
KEPT = {(TEXTNS, n) for n in ("bookmark", "bookmark-start", "bookmark-end", "soft-page-break")}
BREAKS = {(TEXTNS, "tab"): "\t", (TEXTNS, "line-break"): "\n"}
MARKS = {"\t": "<br data-tab>", "\n": "<br>"}  # in a fragment: blocks, which end a sentence and pass through
MARKED = re.compile("(<br data-tab>|<br>)")
WHITESPACE = re.compile("[ \t\r\n]+")  # in XML text, any run of these is one space (ODF 1.2, 6.1.2)

Run = tuple[str, tuple[Element, ...]]  # a stretch of text, and the spans and links around it (outermost first)


@dataclass
class _Paragraph:
    """A paragraph to translate: its runs in lines (cut at its tabs and line breaks), and what it keeps."""

    element: Element
    part: str  # the archive entry that holds it
    lines: list[list[Run]] = field(default_factory=lambda: [[]])
    breaks: list[str] = field(default_factory=list)  # between lines: "\t" or "\n"
    kept: list[Element] = field(default_factory=list)  # bookmarks, soft page breaks

    def read(self, node: Element, chain: tuple[Element, ...] = ()) -> bool:
        """Reads `node`'s content into the runs; False when it holds something else than text."""
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
            elif child.qname in KEPT:
                self.kept.append(child)
            elif child.qname not in WRAPPERS or not self.read(child, (*chain, child)):
                return False
        return True

    def add(self, text: str, chain: tuple[Element, ...]) -> None:
        """Adds text to the current line, to its last run when that one is formatted alike."""
        line = self.lines[-1]
        if line and _format(line[-1][1]) == _format(chain):
            line[-1] = (line[-1][0] + text, line[-1][1])
        else:
            line.append((text, chain))

    def text(self) -> str:
        """The paragraph's text, breaks left out."""
        return "".join(text for line in self.lines for text, _ in line)

    def fragment(self) -> str:
        """The paragraph as inline markup: each line's runs (documents/inline.py), lines joined by their breaks'
        marks."""
        parts = [
            fragment([Text(k, t) for k, (t, _) in enumerate(line)], [_format(c) for _, c in line]) if line else ""
            for line in self.lines
        ]
        return parts[0] + "".join(MARKS[b] + part for b, part in zip(self.breaks, parts[1:], strict=True))

    def write(self, translated: str) -> None:
        """Replaces the paragraph by a copy holding its kept elements, then the translated fragment's pieces."""
        old = self.element
        new = Element(qname=old.qname, qattributes=old.attributes, check_grammar=False)
        for element in self.kept:
            new.addElement(element, check_grammar=False)
        parts = MARKED.split(translated)  # line, mark, line, mark, ..., line
        for k, part in enumerate(parts):
            if k % 2:
                new.addElement(Tab() if part == MARKS["\t"] else LineBreak())
                continue
            line = self.lines[k // 2]
            if not line:  # between two breaks: nothing to write
                continue
            plain = plain_run([t for t, _ in line], [_format(c) for _, c in line])
            for piece in (item for item in items(part) if isinstance(item, Text)):
                source, text = piece.run, piece.text
                parent = new
                for wrapper in line[plain if source is None else source][1]:
                    copy = Element(qname=wrapper.qname, qattributes=wrapper.attributes, check_grammar=False)
                    parent.addElement(copy, check_grammar=False)
                    parent = copy
                teletype.addTextToElement(parent, text)
        old.parentNode.insertBefore(new, old)
        old.parentNode.removeChild(old)


def read_odt(data: bytes, *, where: str) -> Pending:
    """The document waiting for its paragraphs' translations (each an inline-markup fragment).

    Raises:
        UserError: not an OpenDocument text, or XML it refuses to parse (named after `where`).
    """
    check_archive(data, where=where, kind=KIND)
    entries = _entries(data, where=where)
    try:
        document = load(io.BytesIO(data))
    except SAXException as error:  # a part that is not well-formed: named, with its line
        raise UserError(f"{where}: not {KIND} ({malformed_part(data) or f'{type(error).__name__}: {error}'})") from None
    except (KeyError, IndexError, TypeError, ValueError, zipfile.BadZipFile) as error:
        raise UserError(f"{where}: not {KIND} ({type(error).__name__}: {error})") from None
    if not document.mimetype.startswith(MIMETYPE):
        raise UserError(f"{where}: not {KIND} (its mimetype is {document.mimetype!r})")
    paragraphs = []
    for part, element in _candidates(document):
        paragraph = _Paragraph(element, part)
        if paragraph.read(element) and paragraph.text().strip():
            paragraphs.append(paragraph)
    return marked([p.fragment() for p in paragraphs], lambda out: _write(document, entries, paragraphs, out))


def _entries(data: bytes, *, where: str) -> list[tuple[zipfile.ZipInfo, bytes]]:
    """Every entry of the archive with its content, the XML parts odfpy parses checked (module docstring)."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    try:
        entries = [(info, archive.read(info)) for info in archive.infolist()]
    except (zipfile.BadZipFile, RuntimeError, NotImplementedError, OSError, EOFError, zlib.error) as error:
        raise UserError(f"{where}: not {KIND} ({error})") from None
    if "content.xml" not in {info.filename for info, _ in entries}:
        raise UserError(f"{where}: not {KIND} (no content.xml)")
    for info, content in entries:
        if PurePosixPath(info.filename).name in PARSED:
            depth = 0
            try:
                for event, _ in SafeET.iterparse(io.BytesIO(content), events=("start", "end")):
                    depth += 1 if event == "start" else -1
                    if depth > MAX_DEPTH:
                        raise ValueError(f"elements nested over {MAX_DEPTH} deep")
            except (ParseError, ValueError) as error:  # defusedxml's refusals are ValueErrors
                raise UserError(f"{where}: not {KIND} ({info.filename}: {type(error).__name__}: {error})") from None
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
