"""The checks a zip-based document (docx, pptx, odt, odp, epub) passes before its library opens it.

A server that opens files from the network must not be made to inflate a zip bomb or to trust an archive's
names. So before python-docx or python-pptx reads a file, its zip directory is read (nothing inflated) and the
file is refused when it has more than `MAX_ENTRIES` entries, declares more than `MAX_UNCOMPRESSED` bytes in all
or an entry compressed more than `MAX_RATIO` times (a bomb's signature: real documents stay far below), or names
an entry with an absolute path or "..". An XML entry that declares entities (a DTD with an internal subset, or an
`<!ENTITY`) is refused too: Office and OpenDocument files never do, and that is where entity expansion (a "billion
laughs") and external entities live; the libraries' own parsers do not resolve entities either. A DTD named by
reference alone is allowed: LibreOffice writes one into each Basic macro module it stores, and no parser here
fetches it. Nothing is ever extracted to disk.
"""

import io
import re
import zipfile
import zlib
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import IO, TypeVar
from xml.etree import ElementTree

from tnmt.errors import UserError

T = TypeVar("T")

MAX_ENTRIES = 10_000
MAX_UNCOMPRESSED = 256 * 2**20  # bytes declared by all entries together
MAX_RATIO = 200  # uncompressed / compressed size of one entry (past a few kB)
PROLOG_BYTES = 65_536  # of each XML entry read for a DTD: a DTD comes before the root element
_DOCTYPE = re.compile(rb"<!DOCTYPE", re.IGNORECASE)
_ENTITY = re.compile(rb"<!ENTITY", re.IGNORECASE)
XML_PARTS = (".xml", ".rels", ".opf", ".ncx", ".xhtml", ".html", ".htm", ".svg")  # entries read for a DTD


def check_archive(
    data: bytes,
    *,
    where: str,
    kind: str,
    max_entries: int = MAX_ENTRIES,
    max_uncompressed: int = MAX_UNCOMPRESSED,
    max_ratio: int = MAX_RATIO,
) -> None:
    """Refuse `data` unless it is a zip archive within the limits (the module docstring says which).

    Raises:
        UserError: naming `where`, what it is not (`kind`: "a Word document") or the limit it is over.
    """
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        entries = archive.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as error:
        raise UserError(f"{where}: not {kind} ({error})") from None
    if len(entries) > max_entries:
        raise UserError(f"{where}: {len(entries)} entries in the archive: over {max_entries}")
    total = sum(entry.file_size for entry in entries)
    if total > max_uncompressed:
        raise UserError(f"{where}: {total} bytes once uncompressed: over {max_uncompressed}")
    for entry in entries:
        path = PurePosixPath(entry.filename.replace("\\", "/"))
        if path.is_absolute() or ".." in path.parts:
            raise UserError(f"{where}: an archive entry names a path outside it ({entry.filename!r})")
        if entry.file_size > 4096 and entry.file_size > max_ratio * max(entry.compress_size, 1):
            raise UserError(
                f"{where}: {entry.filename} is compressed {entry.file_size // max(entry.compress_size, 1)} times:"
                f" over {max_ratio} (a zip bomb?)"
            )
    for entry in entries:
        xml = entry.filename.lower().endswith(XML_PARTS)
        if xml and _declares_entities(_prolog(archive, entry, where, kind)):
            raise UserError(f"{where}: {entry.filename} declares entities: refused (they could expand)")


def open_archive(data: bytes, load: Callable[[IO[bytes]], T], *, where: str, kind: str) -> T:
    """`data` checked (`check_archive`), then opened by its library's `load` (python-docx's `Document`).

    Raises:
        UserError: over a limit, or refused by the library: not `kind`, with the library's reason in one line.
    """
    check_archive(data, where=where, kind=kind)
    try:
        return load(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as error:
        raise UserError(f"{where}: not {kind} ({_library_reason(error)})") from None
    except SyntaxError as error:  # lxml's XMLSyntaxError: a part that is not well-formed
        raise UserError(f"{where}: not {kind} ({malformed_part(data) or _library_reason(error)})") from None


def keep_untouched(original: bytes, written: bytes) -> bytes:
    """`written` (the archive a library saved from `original`) with the original bytes of every entry it wrote back
    the same: python-docx and python-pptx re-serialise every XML part they loaded (styles, settings, relationships,
    masters, layouts, charts) on save, which changes quoting, declarations and whitespace, not content. An XML entry
    is the same when both parse to one canonical form (C14N, whitespace between elements dropped, as the libraries
    drop it; in the package's content types and relationships, whose entries are sets (ECMA-376 part 2), in any
    order: python-docx writes its content types anew, sorted); any other entry when its bytes are. Entries keep the
    written archive's order and compression."""
    source, saved = zipfile.ZipFile(io.BytesIO(original)), zipfile.ZipFile(io.BytesIO(written))
    names = set(source.namelist())
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for info in saved.infolist():
            data = saved.read(info)
            if info.filename in names and info.filename.lower().endswith(XML_PARTS):
                before = source.read(info.filename)
                unordered = info.filename == "[Content_Types].xml" or info.filename.endswith(".rels")
                data = before if before == data or _same_xml(before, data, unordered=unordered) else data
            archive.writestr(info, data)
    return out.getvalue()


def _same_xml(a: bytes, b: bytes, *, unordered: bool = False) -> bool:
    """Whether two XML parts have one canonical form (a part that does not parse is the same as none);
    `unordered`: the root's children compared as a set."""
    canonical = _canonical(a, unordered)
    return canonical is not None and canonical == _canonical(b, unordered)


def _canonical(xml: bytes, unordered: bool) -> bytes | list[bytes] | None:
    """An XML part's canonical form (with `unordered`, its root's attributes and its children's canonical forms,
    sorted), None when it does not parse."""
    from lxml import etree  # python-docx's own parser: there whenever a document library is

    try:
        root = etree.fromstring(xml, etree.XMLParser(remove_blank_text=True, resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError:
        return None
    if not unordered:
        return etree.tostring(root, method="c14n")
    children = sorted(etree.tostring(child, method="c14n") for child in root)
    return [root.tag.encode(), repr(sorted(root.attrib.items())).encode(), *children]


def malformed_part(data: bytes) -> str | None:
    """Which XML part of a checked archive is not well-formed, and where ("word/document.xml is not well-formed
    XML (mismatched tag: line 2, column 14)"); None when each is. Read only once a library has refused the
    file, to name the part its error does not name. Entities are not expanded: `check_archive` refused them."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    for entry in archive.infolist():
        if entry.filename.lower().endswith((".xml", ".rels")):
            try:
                ElementTree.fromstring(archive.read(entry))
            except ElementTree.ParseError as error:
                return f"{entry.filename} is not well-formed XML ({error})"
    return None


def _declares_entities(prolog: bytes) -> bool:
    """Whether an XML prolog declares entities: an `<!ENTITY`, or a `<!DOCTYPE` with an internal subset (a "["
    before its ">"). Read in one pass: each DOCTYPE's search ends at its ">", where the next one's begins."""
    if _ENTITY.search(prolog):
        return True
    at = 0
    while doctype := _DOCTYPE.search(prolog, at):
        close = prolog.find(b">", doctype.end())
        if prolog.find(b"[", doctype.end(), close if close >= 0 else len(prolog)) >= 0:
            return True
        if close < 0:
            return False
        at = close
    return False


def _library_reason(error: Exception) -> str:
    """A document library's error as a one-line reason, without the stream's address it names
    (python-docx: "file '<_io.BytesIO object at 0x7f...>' is not a Word file")."""
    reason = re.sub(r"file '<[^>]*>' is not an? [\w ]+ file, content type is", "its content type is", str(error))
    return " ".join(reason.split())


def _prolog(archive: zipfile.ZipFile, entry: zipfile.ZipInfo, where: str, kind: str) -> bytes:
    """The first `PROLOG_BYTES` of an entry, inflated; a damaged entry is a damaged document."""
    try:
        with archive.open(entry) as stream:
            return stream.read(PROLOG_BYTES)
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError) as error:
        raise UserError(f"{where}: not {kind} ({entry.filename}: {error})") from None
