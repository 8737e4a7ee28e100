"""PowerPoint presentations (.pptx), read and written by `python-pptx`: every paragraph of every text frame
(shapes, groups, tables, notes) is translated whole, its formatted runs carried to the aligned words as Word's
are (runs.py). Paragraphs holding fields or line breaks are left as they are for now."""

import copy
import io

import pptx
from pptx.oxml.ns import qn
from pptx.presentation import Presentation
from pptx.text.text import _Paragraph

from tnmt.documents.archive import open_archive
from tnmt.documents.runs import fragment, pieces, plain_run


def read_pptx(data: bytes, *, where: str) -> tuple[Presentation, list[_Paragraph], list[str]]:
    """The presentation, its paragraphs to translate, and each one as an inline-markup fragment.

    Raises:
        UserError: not a PowerPoint presentation (named after `where`).
    """
    presentation = open_archive(data, pptx.Presentation, where=where, kind="a PowerPoint presentation")
    paragraphs = [p for p in _paragraphs(presentation) if "".join(r.text for r in p.runs).strip() and _only_runs(p)]
    return presentation, paragraphs, [_fragment(p) for p in paragraphs]


def write_pptx(presentation: Presentation, paragraphs: list[_Paragraph], fragments: list[str]) -> bytes:
    """The presentation with each paragraph's runs replaced by its translated fragment's pieces."""
    for paragraph, translated in zip(paragraphs, fragments, strict=True):
        runs = list(paragraph.runs)
        plain = runs[plain_run([run.text for run in runs], [_format(run) for run in runs])]
        end = paragraph._p.find(qn("a:endParaRPr"))
        for run in runs:
            paragraph._p.remove(run._r)
        for source, text in pieces(translated):
            element = copy.deepcopy((runs[source] if source is not None else plain)._r)
            element.find(qn("a:t")).text = text
            if end is not None:
                end.addprevious(element)
            else:
                paragraph._p.append(element)
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def _paragraphs(presentation: Presentation) -> list[_Paragraph]:
    """Every paragraph of every text frame of every slide (groups and tables included) and of its notes."""
    found = []

    def walk(shapes) -> None:
        for shape in shapes:
            if shape.shape_type is not None and hasattr(shape, "shapes"):  # a group
                walk(shape.shapes)
            if getattr(shape, "has_text_frame", False) and shape.has_text_frame:
                found.extend(shape.text_frame.paragraphs)
            if getattr(shape, "has_table", False) and shape.has_table:
                for row in shape.table.rows:
                    for cell in row.cells:
                        found.extend(cell.text_frame.paragraphs)

    for slide in presentation.slides:
        walk(slide.shapes)
        if slide.has_notes_slide:
            found.extend(slide.notes_slide.notes_text_frame.paragraphs)
    return found


def _only_runs(paragraph: _Paragraph) -> bool:
    """Whether the paragraph's content is runs of text alone (fields and breaks are kept as they are for now)."""
    allowed = {qn("a:r"), qn("a:pPr"), qn("a:endParaRPr")}
    return all(child.tag in allowed for child in paragraph._p)


def _format(run) -> bytes:
    """A run's formatting, as its a:rPr element's XML (b"" for none)."""
    rpr = run._r.find(qn("a:rPr"))
    return b"" if rpr is None else rpr.xml.encode()


def _fragment(paragraph: _Paragraph) -> str:
    """The paragraph as inline markup (runs.py)."""
    runs = paragraph.runs
    return fragment([run.text for run in runs], [_format(run) for run in runs])
