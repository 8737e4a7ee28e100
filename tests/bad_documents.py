"""Documents built for tests, good and hostile: the file section of docs/errors.md (tests/test_errors_doc.py) and
tests/test_documents.py read them."""

import io
import zipfile

BILLION_LAUGHS = (
    b'<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa">'
    + b"".join(b'<!ENTITY %c "%s">' % (ord("b") + k, b"&%c;" % (ord("a") + k) * 10) for k in range(8))
    + b"]>"
)
MACROS = b"\xd0\xcf\x11\xe0 a compound file: the project's macros"  # vbaProject.bin's first bytes, and some


def zipped(*entries: tuple[str, bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    """A zip archive of `entries` (name, content), in order."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, content in entries:
            archive.writestr(name, content)
    return buffer.getvalue()


def word(*paragraphs: str) -> bytes:
    """A Word document of `paragraphs` (python-docx's default template)."""
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def presentation() -> bytes:
    """An empty PowerPoint presentation (python-pptx's default template)."""
    import pptx

    buffer = io.BytesIO()
    pptx.Presentation().save(buffer)
    return buffer.getvalue()


def edited(archive: bytes, **entries: bytes) -> bytes:
    """`archive` with the named entries' contents replaced or added (`word_document_xml` names word/document.xml:
    `/` as `_`, `.` as `_`; added names are given as they are)."""
    source = zipfile.ZipFile(io.BytesIO(archive))
    names = {info.filename.replace("/", "_").replace(".", "_"): info.filename for info in source.infolist()}
    replaced = {names.get(key, key): content for key, content in entries.items()}
    kept = [(info.filename, replaced.pop(info.filename, None) or source.read(info)) for info in source.infolist()]
    return zipped(*kept, *replaced.items())


def entities_in_word() -> bytes:
    """A Word document whose body declares a DTD of entities that expand to 10^9 characters."""
    body = zipfile.ZipFile(io.BytesIO(word("two"))).read("word/document.xml")
    start = body.index(b"<w:document")
    declared = BILLION_LAUGHS.replace(b"DOCTYPE d", b"DOCTYPE w:document")
    return edited(word("two"), word_document_xml=declared + body[start:])


def outside() -> bytes:
    """A Word document with an entry named to land outside any directory it would be extracted to."""
    return edited(word("two"), **{"../../evil.xml": b"x"})


def with_macros() -> bytes:
    """A Word document carrying a macro project and an embedded object, each related to the body as Word relates
    them (kept as they are, never run or opened)."""
    base = word("two hundred")
    source = zipfile.ZipFile(io.BytesIO(base))
    rels = source.read("word/_rels/document.xml.rels").replace(
        b"</Relationships>",
        b'<Relationship Id="rIdMacros" Type="http://schemas.microsoft.com/office/2006/relationships/vbaProject"'
        b' Target="vbaProject.bin"/><Relationship Id="rIdObject" Type="http://schemas.openxmlformats.org/'
        b'officeDocument/2006/relationships/oleObject" Target="embeddings/oleObject1.bin"/></Relationships>',
    )
    types = source.read("[Content_Types].xml").replace(
        b"</Types>",
        b'<Override PartName="/word/vbaProject.bin" ContentType="application/vnd.ms-office.vbaProject"/>'
        b'<Default Extension="bin" ContentType="application/vnd.openxmlformats-officedocument.oleObject"/></Types>',
    )
    entries = {"word/vbaProject.bin": MACROS, "word/embeddings/oleObject1.bin": MACROS}
    return edited(base, word__rels_document_xml_rels=rels, **{"[Content_Types]_xml": types}, **entries)


def malformed(archive: bytes, part: str) -> bytes:
    """`archive` with its XML `part` cut in half: still a valid zip, no longer well-formed XML."""
    body = zipfile.ZipFile(io.BytesIO(archive)).read(part)
    return edited(archive, **{part.replace("/", "_").replace(".", "_"): body[: len(body) // 2]})


def encrypted_pdf() -> bytes:
    """A one-page PDF encrypted with a password (AES-256)."""
    import pymupdf

    pdf = pymupdf.open()
    pdf.new_page().insert_text((72, 72), "two hundred")
    return pdf.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="user", owner_pw="owner")
