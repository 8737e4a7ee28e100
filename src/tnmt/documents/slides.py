"""PowerPoint presentations (.pptx), read and written by `python-pptx`: every paragraph of every text frame
(shapes, groups, tables, and every shape of the notes pages) is translated whole, its formatted runs carried to
the aligned words as Word's are (documents/inline.py; a hyperlink is a run's formatting here). Fields (slide
numbers, dates: computed) and line breaks are kept where they are, a break ending a sentence."""

import copy
import io

import pptx
from pptx.oxml.ns import qn
from pptx.presentation import Presentation
from pptx.text.text import _Paragraph

from tnmt.documents.archive import open_archive
from tnmt.documents.inline import Item, Keep, Text, fragment, items, plain_run


def read_pptx(data: bytes, *, where: str) -> tuple[Presentation, list[_Paragraph], list[str]]:
    """The presentation, its paragraphs to translate, and each one as an inline-markup fragment.

    Raises:
        UserError: not a PowerPoint presentation (named after `where`).
    """
    presentation = open_archive(data, pptx.Presentation, where=where, kind="a PowerPoint presentation")
    paragraphs = [p for p in _paragraphs(presentation) if any(c.isalnum() for r in p.runs for c in r.text)]
    return presentation, paragraphs, [fragment(_items(p), [_format(r) for r in p.runs]) for p in paragraphs]


def write_pptx(presentation: Presentation, paragraphs: list[_Paragraph], fragments: list[str]) -> bytes:
    """The presentation with each paragraph's content written from its translated fragment: runs with the
    formatting of the runs their words came from, each field and break moved to its place."""
    for paragraph, translated in zip(paragraphs, fragments, strict=True):
        runs = [run._r for run in paragraph.runs]
        kept = [child for child in paragraph._p if child.tag in (qn("a:fld"), qn("a:br"))]
        plain = runs[plain_run([r.text for r in paragraph.runs], [_format(r) for r in paragraph.runs])]
        end = paragraph._p.find(qn("a:endParaRPr"))
        for child in list(paragraph._p):
            if child.tag not in (qn("a:pPr"), qn("a:endParaRPr")):
                paragraph._p.remove(child)
        for item in items(translated):
            if isinstance(item, Keep):
                element = kept[item.atom]
            else:
                element = copy.deepcopy(runs[item.run] if item.run is not None else plain)
                element.find(qn("a:t")).text = item.text
            if end is not None:
                end.addprevious(element)
            else:
                paragraph._p.append(element)
    out = io.BytesIO()
    presentation.save(out)
    return out.getvalue()


def _paragraphs(presentation: Presentation) -> list[_Paragraph]:
    """Every paragraph of every text frame of every slide (groups and tables included) and of its notes page
    (every shape of it: a notes page LibreOffice writes has no notes placeholder)."""
    found = []

    def walk(shapes) -> None:
        for shape in shapes:
            if shape.shape_type is not None and hasattr(shape, "shapes"):  # a group
                walk(shape.shapes)
            if getattr(shape, "has_text_frame", False) and shape.has_text_frame and _holds_text(shape):
                found.extend(shape.text_frame.paragraphs)
            if getattr(shape, "has_table", False) and shape.has_table:
                for row in shape.table.rows:
                    for cell in row.cells:
                        found.extend(cell.text_frame.paragraphs)

    for slide in presentation.slides:
        walk(slide.shapes)
        if slide.has_notes_slide:
            walk(slide.notes_slide.shapes)
    return found


def _holds_text(shape) -> bool:
    """Whether the shape has a text body: python-pptx's `text_frame` adds an empty one to a placeholder without,
    which would change a slide the translation does not touch."""
    return shape._element.find(qn("p:txBody")) is not None


def _items(paragraph: _Paragraph) -> list[Item]:
    """The paragraph's runs as text (in the order of `paragraph.runs`), its fields and breaks kept."""
    found: list[Item] = []
    run = atom = 0
    for child in paragraph._p:
        if child.tag == qn("a:r"):
            found.append(Text(run, child.findtext(qn("a:t")) or ""))
            run += 1
        elif child.tag in (qn("a:fld"), qn("a:br")):
            found.append(Keep(atom, breaks=child.tag == qn("a:br")))
            atom += 1
    return found


def _format(run) -> bytes:
    """A run's formatting, as its a:rPr element's XML (b"" for none)."""
    rpr = run._r.find(qn("a:rPr"))
    return b"" if rpr is None else rpr.xml.encode()
