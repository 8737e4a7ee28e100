"""Word documents (.docx), read and written by `python-docx`: each paragraph (of the body, its tables, headers
and footers) is translated whole, and its formatting follows the words: the runs whose formatting differs from
the paragraph's commonest one (by characters) become inline elements, which tag transfer places around the
translated words aligned to theirs (documents/tag_transfer.py), and each piece of the translation
is written as a run with the formatting of the run it came from. Paragraphs holding anything but runs of text
(hyperlinks, fields, drawings) are left as they are for now."""

import copy
import io

import docx
from docx.document import Document
from docx.oxml.ns import qn
from docx.text.paragraph import Paragraph

from tnmt.documents.archive import open_archive
from tnmt.documents.runs import fragment, pieces, plain_run


def read_docx(data: bytes, *, where: str) -> tuple[Document, list[Paragraph], list[str]]:
    """The document, its paragraphs to translate, and each one as an inline-markup fragment.

    Raises:
        UserError: not a Word document (named after `where`).
    """
    document = open_archive(data, docx.Document, where=where, kind="a Word document")
    paragraphs = [p for p in _paragraphs(document) if p.text.strip() and _only_runs(p)]
    return document, paragraphs, [_fragment(p) for p in paragraphs]


def write_docx(document: Document, paragraphs: list[Paragraph], fragments: list[str]) -> bytes:
    """The document with each paragraph's runs replaced by its translated fragment's pieces."""
    for paragraph, translated in zip(paragraphs, fragments, strict=True):
        runs = list(paragraph.runs)
        plain = runs[plain_run([run.text for run in runs], [_format(run) for run in runs])]
        for run in runs:
            paragraph._p.remove(run._r)
        for source, text in pieces(translated):
            element = copy.deepcopy((runs[source] if source is not None else plain)._r)
            for child in list(element):
                if child.tag != qn("w:rPr"):
                    element.remove(child)
            paragraph._p.append(element)
            paragraph.runs[-1].text = text
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def _paragraphs(document: Document) -> list[Paragraph]:
    """Every paragraph of the body, of its tables (nested too) and of its headers and footers, in order."""
    found = []

    def walk(container) -> None:
        found.extend(container.paragraphs)
        for table in getattr(container, "tables", []):
            for row in table.rows:
                for cell in row.cells:
                    walk(cell)

    walk(document)
    for section in document.sections:
        for part in (section.header, section.footer):
            if not part.is_linked_to_previous:
                walk(part)
    return found


def _only_runs(paragraph: Paragraph) -> bool:
    """Whether the paragraph's content is runs of text alone (the other content is kept as it is for now)."""
    allowed = {qn("w:r"), qn("w:pPr"), qn("w:proofErr"), qn("w:bookmarkStart"), qn("w:bookmarkEnd")}
    return all(child.tag in allowed for child in paragraph._p) and all(
        all(c.tag in {qn("w:rPr"), qn("w:t"), qn("w:tab")} for c in run._r) for run in paragraph.runs
    )


def _format(run) -> bytes:
    """A run's formatting, as its w:rPr element's XML (b"" for none)."""
    rpr = run._r.find(qn("w:rPr"))
    return b"" if rpr is None else rpr.xml.encode()


def _fragment(paragraph: Paragraph) -> str:
    """The paragraph as inline markup (runs.py)."""
    runs = paragraph.runs
    return fragment([run.text for run in runs], [_format(run) for run in runs])
