"""PowerPoint presentations (documents/slides.py): every text frame of the slides and of their notes pages, fields
and line breaks kept where they are."""

import io
import re

import pptx
from pptx.oxml.ns import qn
from pptx.util import Inches

from tnmt.documents.slides import read_pptx, write_pptx


def _upper(fragment: str) -> str:
    return re.sub(r"(^|>)([^<]*)", lambda m: m.group(1) + m.group(2).upper(), fragment)


def _presentation(notes_placeholder: bool) -> bytes:
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[6])
    frame = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text_frame
    frame.text = "Two dogs"
    paragraph = frame.paragraphs[0]
    paragraph._p.append(paragraph._p.makeelement(qn("a:br"), {}))
    paragraph.add_run().text = "play on slide "
    field = paragraph._p.makeelement(qn("a:fld"), {"id": "{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}", "type": "slidenum"})
    field.append(field.makeelement(qn("a:t"), {}))
    field[0].text = "1"
    paragraph._p.append(field)
    notes = slide.notes_slide
    if not notes_placeholder:  # as LibreOffice writes them: the notes in a shape of their own
        box = slide.shapes.add_textbox(Inches(1), Inches(3), Inches(4), Inches(1))
        box.text_frame.text = "Say it slowly."
        notes.shapes._spTree.remove(notes.notes_placeholder._element)
        notes.shapes._spTree.append(box._element)  # moved from the slide
    else:
        notes.notes_text_frame.text = "Say it slowly."
    buffer = io.BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()


def test_notes_without_a_notes_placeholder_are_translated():
    read, paragraphs, fragments = read_pptx(_presentation(notes_placeholder=False), where="p.pptx")
    assert "Say it slowly." in fragments
    out = pptx.Presentation(io.BytesIO(write_pptx(read, paragraphs, [_upper(f) for f in fragments])))
    texts = [s.text_frame.text for s in out.slides[0].notes_slide.shapes if s.has_text_frame]
    assert "SAY IT SLOWLY." in texts


def test_a_field_and_a_line_break_are_kept_where_they_are():
    read, paragraphs, fragments = read_pptx(_presentation(notes_placeholder=True), where="p.pptx")
    assert fragments[0] == 'Two dogs<br data-keep="0">play on slide <img data-keep="1">'
    out = pptx.Presentation(io.BytesIO(write_pptx(read, paragraphs, [_upper(f) for f in fragments])))
    p = out.slides[0].shapes[0].text_frame.paragraphs[0]._p
    assert [child.tag.split("}")[1] for child in p] == ["r", "br", "r", "fld"]
    assert "".join(t.text for t in p.iter(qn("a:t"))) == "TWO DOGSPLAY ON SLIDE 1"
    assert out.slides[0].notes_slide.notes_text_frame.text == "SAY IT SLOWLY."


def test_a_shape_without_a_text_body_is_not_given_one():
    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])
    title, body = slide.placeholders[0], slide.placeholders[1]
    title.text_frame.text = "Two dogs"
    body._element.remove(body._element.find(qn("p:txBody")))  # an unpopulated placeholder, as PowerPoint saves one
    buffer = io.BytesIO()
    presentation.save(buffer)
    read, paragraphs, fragments = read_pptx(buffer.getvalue(), where="p.pptx")
    assert fragments == ["Two dogs"]
    out = pptx.Presentation(io.BytesIO(write_pptx(read, paragraphs, [_upper(f) for f in fragments])))
    assert out.slides[0].placeholders[1]._element.find(qn("p:txBody")) is None
