"""EPUB books (EPUB 2 and 3): every page of the book translated, the rest of the archive kept as it was.

A book is a zip archive (checked as the office files are, archive.py) whose `META-INF/container.xml` names its
package document (the OPF): the manifest lists the book's files and the spine their reading order. Translated:
- every XHTML document of the manifest, the spine's in reading order first, through the HTML path (markup.py:
  the page whole, its inline markup carried by word alignment); the EPUB 3 navigation document is one of them;
- the navigation of EPUB 2 (the NCX's `docTitle` and each `navLabel` text);
- the metadata titles (each `dc:title` of the package document).
Every other entry (styles, images, fonts, the `mimetype` first and stored) is written back with the same name,
bytes, date and compression, in the same order. The package document and the NCX are edited in place: only the
text of the elements translated changes, byte offsets found by expat, so every other byte of them stays too (a
library that parses and re-serialises the XML would rewrite quoting, prefixes and empty elements). A spine item
that is not XHTML (an SVG page) or a manifest item missing from the archive is named in the report's `left`.

No EPUB library is used: ebooklib (the common one) is AGPL and rewrites every file it saves.
"""

import html
import io
import posixpath
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote
from xml.parsers import expat

from tnmt.documents.archive import check_archive
from tnmt.documents.inline import XML_INVALID
from tnmt.documents.units import Pending, marked
from tnmt.errors import UserError

KIND = "an EPUB book"
_CONTAINER = "META-INF/container.xml"
_ROOTFILE = "urn:oasis:names:tc:opendocument:xmlns:container rootfile"
_OPF_NS = "http://www.idpf.org/2007/opf"
_DC_TITLE = "http://purl.org/dc/elements/1.1/ title"
_NCX_NS = "http://www.daisy.org/z3986/2005/ncx/"
_NCX_TEXT = f"{_NCX_NS} text"
_NCX_LABELS = (f"{_NCX_NS} navLabel", f"{_NCX_NS} docTitle")  # the parents of the NCX texts a reader sees
_XHTML = ("application/xhtml+xml", "text/html")
_NCX = "application/x-dtbncx+xml"


@dataclass
class _Scan:
    """One expat pass over an XML part: the elements named in `collect` (name, attributes), and the byte range
    of the text of each element `wanted(name, parent)` says to translate (text only: one with child elements is
    not a title)."""

    data: bytes
    where: str
    collect: frozenset[str] = frozenset()
    wanted: Callable[[str, str], bool] | None = None  # (name, its parent's name) -> translate its text
    elements: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    spans: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, text) in bytes of `data`

    def run(self) -> "_Scan":
        parser = expat.ParserCreate(namespace_separator=" ")
        parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
        stack: list[str] = []
        open_text: list[object] = []  # [start byte or None, pieces of text] of the wanted element open, or []

        def after_tag() -> None:  # the first event after a wanted start tag: its content starts here
            if open_text and open_text[0] is None:
                open_text[0] = parser.CurrentByteIndex

        def start(name: str, attrs: dict[str, str]) -> None:
            after_tag()
            if open_text:
                open_text.clear()  # an element inside: not a plain text
            if name in self.collect:
                self.elements.append((name, attrs))
            if self.wanted is not None and self.wanted(name, stack[-1] if stack else ""):
                open_text[:] = [None, []]
            stack.append(name)

        def end(name: str) -> None:
            after_tag()
            stack.pop()
            if open_text:
                begin, pieces = open_text
                text = "".join(pieces)
                if text.strip():
                    self.spans.append((begin, parser.CurrentByteIndex, text))
                open_text.clear()

        def text(data: str) -> None:
            after_tag()
            if open_text:
                open_text[1].append(data)

        def refuse(*_: object) -> None:
            raise UserError(f"{self.where}: declares entities: refused (they could expand)")

        parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, text
        parser.CommentHandler = parser.ProcessingInstructionHandler = lambda *_: after_tag()
        parser.StartCdataSectionHandler = after_tag  # a title in CDATA: replaced from its "<![CDATA["
        parser.EntityDeclHandler = refuse
        try:
            parser.Parse(self.data, True)
        except expat.ExpatError as error:
            raise UserError(f"{self.where}: not well-formed XML ({error})") from None
        return self


def _member(archive: zipfile.ZipFile, name: str, where: str) -> bytes:
    try:
        return archive.read(name)
    except KeyError:
        raise UserError(f"{where}: not {KIND} (no {name} in the archive)") from None


def _package_path(archive: zipfile.ZipFile, where: str) -> str:
    """The package document's path: the container's first rootfile of the OPF media type."""
    scan = _Scan(_member(archive, _CONTAINER, where), f"{where}: {_CONTAINER}", frozenset({_ROOTFILE})).run()
    for _, attrs in scan.elements:
        media = attrs.get("media-type", "application/oebps-package+xml")
        if media == "application/oebps-package+xml" and "full-path" in attrs:
            return attrs["full-path"]
    raise UserError(f"{where}: not {KIND} ({_CONTAINER} names no package document)")


def _splice(data: bytes, spans: list[tuple[int, int, str]], texts: list[str]) -> bytes:
    """`data` with each span's bytes replaced by its text (escaped markup, UTF-8), the rest as it was."""
    out, at = [], 0
    for (begin, end, _), text in zip(spans, texts, strict=True):
        out += [data[at:begin], text.encode()]
        at = end
    return b"".join([*out, data[at:]])


def read_epub(data: bytes, *, where: str) -> Pending:
    """An EPUB book waiting for its pages', navigation's and titles' translations (the module docstring says
    which are translated and what is kept).

    Raises:
        UserError: not a zip archive within the limits, no container or package document, a part that is not
            well-formed XML or declares entities, an XHTML page that is not UTF-8; each names the entry.
    """
    check_archive(data, where=where, kind=KIND)
    archive = zipfile.ZipFile(io.BytesIO(data))
    opf_path = _package_path(archive, where)
    names = set(archive.namelist())
    item_tag, itemref_tag, spine_tag = f"{_OPF_NS} item", f"{_OPF_NS} itemref", f"{_OPF_NS} spine"
    package = _Scan(
        _member(archive, opf_path, where),
        f"{where}: {opf_path}",
        frozenset({item_tag, itemref_tag, spine_tag}),
        lambda name, parent: name == _DC_TITLE,
    ).run()
    base = posixpath.dirname(opf_path)
    manifest: dict[str, tuple[str, str]] = {}  # id -> (path in the archive, media type)
    order: list[str] = []  # ids: the spine's, then the rest of the manifest's
    toc = None
    for name, attrs in package.elements:
        if name == item_tag and "id" in attrs and "href" in attrs:
            href = unquote(attrs["href"].split("#", 1)[0])
            manifest[attrs["id"]] = (posixpath.normpath(posixpath.join(base, href)), attrs.get("media-type", ""))
        elif name == itemref_tag:
            order.append(attrs.get("idref", ""))
        elif name == spine_tag:
            toc = attrs.get("toc")  # EPUB 2: the NCX's id
    left, pages, ncx = [], {}, None  # pages: a dict, ordered and with a constant-time membership test
    in_spine = set(order)
    for item in [*order, *(i for i in manifest if i not in in_spine)]:
        path, media = manifest.get(item, ("", ""))
        if item in in_spine and item not in manifest:
            left.append(f"{opf_path}: the spine names {item!r}, which the manifest lacks")
        elif path not in names:
            if media in _XHTML or media == _NCX:
                left.append(f"{path}: in the manifest, not in the archive")
        elif media in _XHTML:
            pages[path] = None
        elif media == _NCX or item == toc:
            ncx = path
        elif item in in_spine:
            left.append(f"{path}: a spine page of type {media or 'unknown'}: kept as it was (tnmt translates XHTML)")
    parts: dict[str, _Scan] = {opf_path: package}
    if ncx is not None:
        parts[ncx] = _Scan(
            archive.read(ncx),
            f"{where}: {ncx}",
            wanted=lambda name, parent: name == _NCX_TEXT and parent in _NCX_LABELS,
        ).run()
    fragments = [html.escape(text, quote=False) for part in parts.values() for _, _, text in part.spans]
    for page in pages:
        try:
            fragments.append(archive.read(page).decode("utf-8-sig"))
        except UnicodeDecodeError as error:
            raise UserError(f"{where}: {page} is not UTF-8 text (byte {error.start})") from None

    def write(translated: list[str]) -> bytes:
        translated = [XML_INVALID.sub("", text) for text in translated]  # a model's control characters: not XML
        replaced, at = {}, 0
        for path, part in parts.items():
            if part.spans:
                replaced[path] = _splice(part.data, part.spans, translated[at : at + len(part.spans)])
                at += len(part.spans)
        replaced.update((page, text.encode()) for page, text in zip(pages, translated[at:], strict=True))
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w") as book:
            book.comment = archive.comment
            for info in archive.infolist():
                book.writestr(info, replaced[info.filename] if info.filename in replaced else archive.read(info))
        return out.getvalue()

    return marked(fragments, write, left=left)
