"""tnmt/documents/opendocument.py: OpenDocument texts translated paragraph by paragraph on the tiny en -> it model,
their structure, formatting, links, fields and other archive entries kept; bad files refused by name."""

import io
import re
import zipfile

import pytest
from odf import teletype
from odf.namespaces import TEXTNS, XLINKNS
from odf.opendocument import OpenDocumentChart, OpenDocumentText, load
from odf.style import Footer, Header, MasterPage, PageLayout, Style, TextProperties
from odf.table import Table, TableCell, TableColumn, TableRow
from odf.text import A, Bookmark, H, List, ListItem, P, PageNumber, Span

from tnmt.config import DecodeConfig
from tnmt.documents.formats import translate_file
from tnmt.errors import UserError

SETTINGS = DecodeConfig(beam_size=2, max_len=12)
BOLD = "Bold"


class Recording:
    """The translator, recording every translation it returns (one per unit, in the document's order)."""

    def __init__(self, translator) -> None:
        self.translator, self.found = translator, []

    def translations(self, *args, **kwargs):
        found = self.translator.translations(*args, **kwargs)
        self.found.extend(t.text for t in found)
        return found


def document() -> bytes:
    """A document of every kind of paragraph, with a header, a picture, an embedded chart and a macro entry."""
    doc = OpenDocumentText()
    bold = Style(name=BOLD, family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    layout = PageLayout(name="pm1")
    doc.automaticstyles.addElement(layout)
    page = MasterPage(name="Standard", pagelayoutname=layout)
    page.addElement(Header())
    page.firstChild.addElement(P(text="seven"))
    page.addElement(Footer())
    doc.masterstyles.addElement(page)

    doc.text.addElement(H(outlinelevel=1, text="two hundred"))
    formatted = P(text="two ")  # 0: a bold span
    formatted.addElement(Span(stylename=bold, text="hundred"))
    formatted.addText(" and five")
    doc.text.addElement(formatted)
    linked = P(text="seven ")  # 1: a link
    linked.addElement(A(href="https://example.com/five", type="simple", text="hundred"))
    doc.text.addElement(linked)
    field = P(text="page two ")  # 2: a field: kept as it is, its paragraph's words translated
    field.addElement(PageNumber(selectpage="current", text="1"))
    doc.text.addElement(field)
    spaced = P()  # 3: a tab, a line break, spaces
    teletype.addTextToElement(spaced, "two hundred\tfive\n   seven")
    doc.text.addElement(spaced)
    marked = P()  # 4: a bookmark does not stop the translation
    marked.addElement(Bookmark(name="here"))
    marked.addText("five hundred")
    doc.text.addElement(marked)
    table = Table(name="T")
    table.addElement(TableColumn())
    row = TableRow()
    row.addElement(TableCell())
    row.firstChild.addElement(P(text="two"))
    table.addElement(row)
    doc.text.addElement(table)
    items = List()
    items.addElement(ListItem())
    items.firstChild.addElement(P(text="five"))
    doc.text.addElement(items)
    doc.addPictureFromString(b"\x89PNG not really", "image/png")
    doc.addObject(OpenDocumentChart())
    buffer = io.BytesIO()
    doc.save(buffer)
    return with_entries(buffer.getvalue(), {"Basic/Standard/Module1.xml": b"<script:module/>"})


def with_entries(data: bytes, replaced: dict[str, bytes], *, drop: tuple[str, ...] = ()) -> bytes:
    """The archive with entries replaced or added (in the order given) and some dropped."""
    source = zipfile.ZipFile(io.BytesIO(data))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for info in source.infolist():
            if info.filename not in drop:
                archive.writestr(info, replaced.pop(info.filename, source.read(info)))
        for name, content in replaced.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def text(element) -> str:
    """The element's text, its text:s, text:tab and text:line-break read as the characters they stand for."""
    return teletype.extractText(element)


def xml(text: str) -> str:
    """The text as XML can hold it (a model may write control characters, which the writer leaves out)."""
    return re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f]", "", text)


def letters(text: str) -> str:
    """The text without its whitespace: tag transfer joins a sentence's words by single spaces."""
    return "".join(xml(text).split())


def test_each_paragraph_is_read_whole_cut_at_its_tabs_and_line_breaks_fields_kept():
    from tnmt.documents.opendocument import read_opendocument as read_odt

    pending = read_odt(document(), where="x.odt")
    assert [u.text for u in pending.units] == [
        *("two hundred", "two hundred and five", "seven hundred"),  # heading, bold span, link
        "page two",  # a field is kept beside its words
        *("two hundred", "five", "seven"),  # a tab and a line break end a sentence
        *("five hundred", "two", "five", "seven"),  # bookmark, table cell, list item; the header, in styles.xml
    ]
    assert pending.left == []


def test_a_document_keeps_its_structure_formatting_links_and_fields(tiny_translator):
    source = document()
    translator = Recording(tiny_translator)
    data = translate_file(translator, source, "x.odt", settings=SETTINGS)
    before, after = load(io.BytesIO(source)), load(io.BytesIO(data))
    for kind in (P, H, Table, TableCell, ListItem, Header, Bookmark, PageNumber):
        assert len(before.getElementsByType(kind)) == len(after.getElementsByType(kind)), kind
    heading, paragraphs = after.getElementsByType(H)[0], after.text.getElementsByType(P)
    found = translator.found  # heading, 2 paragraphs, field, tab, line, line, bookmark, cell, list item; header
    assert len(found) == 11
    assert letters(text(heading)) == letters(found[0])
    assert [letters(text(p)) for p in paragraphs[:2]] == [letters(found[1]), letters(found[2])]
    assert letters(text(paragraphs[2])).replace("1", "") == letters(found[3]).replace("1", "")  # the field's "1" kept
    assert len(paragraphs[2].getElementsByType(PageNumber)) == 1
    [tab, line, spaced] = (xml(t) for t in found[4:7])
    assert text(paragraphs[3]) == f"{tab}\t{line}\n   {spaced}"  # each break and space where it was
    assert [letters(text(p)) for p in paragraphs[4:]] == [letters(t) for t in found[7:10]]
    assert letters(text(after.getElementsByType(Header)[0])) == letters(found[10])
    assert len(paragraphs[4].getElementsByType(Bookmark)) == 1

    # each span and link placed once at most (on the words aligned to its own), in its paragraph, as it was
    spans, links = after.getElementsByType(Span), after.getElementsByType(A)
    assert len(spans) <= 1 and all(s.getAttrNS(TEXTNS, "style-name") == BOLD for s in spans)
    assert paragraphs[0].getElementsByType(Span) == spans
    assert len(links) <= 1 and all(a.getAttrNS(XLINKNS, "href") == "https://example.com/five" for a in links)
    assert paragraphs[1].getElementsByType(A) == links

    old, new = zipfile.ZipFile(io.BytesIO(source)), zipfile.ZipFile(io.BytesIO(data))
    assert new.namelist() == old.namelist() and new.infolist()[0].filename == "mimetype"
    assert new.infolist()[0].compress_type == zipfile.ZIP_STORED
    changed = {name for name in old.namelist() if old.read(name) != new.read(name)}
    assert changed == {"content.xml", "styles.xml"}  # pictures, the chart, meta, settings, manifest, macros: as were


def test_a_document_with_nothing_to_translate_comes_back_as_it_was(tiny_translator):
    doc = OpenDocumentText()
    field = P()  # a field alone: its result is computed, nothing to translate
    field.addElement(PageNumber(selectpage="current", text="1"))
    doc.text.addElement(field)
    buffer = io.BytesIO()
    doc.save(buffer)
    out = translate_file(tiny_translator, buffer.getvalue(), "x.odt", settings=SETTINGS)
    source = zipfile.ZipFile(buffer)
    assert {n: zipfile.ZipFile(io.BytesIO(out)).read(n) for n in source.namelist()} == {
        n: source.read(n) for n in source.namelist()
    }


LAUGHS = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>
<text:p>&lol3;</text:p></office:text></office:body></office:document-content>"""
EXTERNAL = (
    LAUGHS.split(b"\n<!DOCTYPE")[0]
    + b'\n<!DOCTYPE x [<!ENTITY lol3 SYSTEM "file:///etc/passwd">]>'
    + (LAUGHS.split(b"]>", 1)[1])
)


def bad_file(case: str) -> bytes:
    import docx

    word = io.BytesIO()
    docx.Document().save(word)
    good = document()
    deep = b"<r>" + b"<a>" * 300 + b"</a>" * 300 + b"</r>"
    return {
        "not a zip": b"plain text",
        "no content.xml": with_entries(good, {}, drop=("content.xml",)),
        "no manifest": with_entries(good, {}, drop=("META-INF/manifest.xml",)),
        "a Word document": word.getvalue(),
        "a spreadsheet": with_entries(good, {"mimetype": b"application/vnd.oasis.opendocument.spreadsheet"}),
        "malformed XML": with_entries(good, {"content.xml": b"<office:document-content><text:p>"}),
        "too deep": with_entries(good, {"content.xml": deep}),
        "entities": with_entries(good, {"content.xml": LAUGHS}),
        "external entities": with_entries(good, {"styles.xml": EXTERNAL}),
    }[case]


@pytest.mark.parametrize(
    "case",
    ["not a zip", "no content.xml", "no manifest", "a Word document", "a spreadsheet", "malformed XML", "too deep"],
)
def test_a_file_that_is_not_an_opendocument_text_is_named_on_one_line(tiny_translator, case):
    with pytest.raises(UserError, match=r"^x\.odt: not an OpenDocument text \(") as error:
        translate_file(tiny_translator, bad_file(case), "x.odt", settings=SETTINGS)
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("case", ["entities", "external entities"])
def test_entities_are_refused_by_each_layer_never_expanded(monkeypatch, case):
    from tnmt.documents import opendocument

    data = bad_file(case)
    with pytest.raises(UserError, match=r"^x\.odt: .*declares entities"):  # the archive's check (archive.py)
        opendocument.read_opendocument(data, where="x.odt")
    monkeypatch.setattr(opendocument, "check_archive", lambda *args, **kwargs: None)
    with pytest.raises(UserError, match=r"^x\.odt: not an OpenDocument text \(\w+\.xml: EntitiesForbidden"):
        opendocument.read_opendocument(data, where="x.odt")  # this module's own parse before odfpy's
    with pytest.raises(ValueError, match="EntitiesForbidden"):
        load(io.BytesIO(data))  # and odfpy's parser (defusedxml.sax)


def footnote(words: str):
    """A footnote (text:note) whose body is one paragraph of `words`."""
    from odf.text import Note, NoteBody, NoteCitation

    note = Note(noteclass="footnote", id="n1")
    note.addElement(NoteCitation(text="1"))
    body = NoteBody()
    body.addElement(P(text=words))
    note.addElement(body)
    return note


def test_notes_frames_and_annotations_are_kept_in_place_and_their_paragraphs_translated(tiny_translator):
    from odf.draw import Frame, TextBox
    from odf.office import Annotation
    from odf.text import Note, NoteBody

    doc = OpenDocumentText()
    p = P(text="two hundred")
    p.addElement(footnote("five"))
    p.addText(" and seven")
    annotation = Annotation()
    annotation.addElement(P(text="seven hundred"))
    p.addElement(annotation)
    frame = Frame(name="f", anchortype="as-char", width="2cm", height="1cm")
    box = TextBox()
    box.addElement(P(text="two"))
    frame.addElement(box)
    p.addElement(frame)
    doc.text.addElement(p)
    field = P()
    field.addElement(PageNumber(selectpage="current", text="1"))
    doc.text.addElement(field)
    buffer = io.BytesIO()
    doc.save(buffer)

    from tnmt.documents.opendocument import read_opendocument as read_odt

    pending = read_odt(buffer.getvalue(), where="x.odt")
    assert [u.text for u in pending.units] == ["two hundred and seven", "five", "seven hundred", "two"]
    assert pending.left == ["content.xml paragraph 5: its words are all kept (a field's result)"]
    translator = Recording(tiny_translator)
    after = load(io.BytesIO(translate_file(translator, buffer.getvalue(), "x.odt", settings=SETTINGS)))
    outer = after.text.getElementsByType(P)[0]
    for kind in (Note, Annotation, Frame):
        assert len(outer.getElementsByType(kind)) == 1, kind  # each kept once, inside its paragraph
    assert letters(text(after.getElementsByType(NoteBody)[0])) == letters(translator.found[1])
    assert letters(text(after.getElementsByType(TextBox)[0])) == letters(translator.found[3])


def presentation() -> bytes:
    """An OpenDocument presentation: a slide with a text frame (a bold span, a page-number field) and notes."""
    from odf.draw import Frame, Page, TextBox
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.style import MasterPage, PageLayout

    doc = OpenDocumentPresentation()
    layout = PageLayout(name="pl")
    doc.automaticstyles.addElement(layout)
    master = MasterPage(name="Default", pagelayoutname=layout)
    doc.masterstyles.addElement(master)
    bold = Style(name=BOLD, family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    page = Page(name="one", masterpagename=master)
    frame = Frame(width="10cm", height="2cm", x="1cm", y="1cm")
    box = TextBox()
    p = P(text="two ")
    p.addElement(Span(stylename=bold, text="hundred"))
    p.addElement(PageNumber(selectpage="current", text="1"))
    box.addElement(p)
    frame.addElement(box)
    page.addElement(frame)
    notes = Notes()
    notes_frame = Frame(width="10cm", height="2cm", x="1cm", y="1cm")
    notes_box = TextBox()
    notes_box.addElement(P(text="seven"))
    notes_frame.addElement(notes_box)
    notes.addElement(notes_frame)
    page.addElement(notes)
    doc.presentation.addElement(page)
    buffer = io.BytesIO()
    doc.save(buffer)
    return buffer.getvalue()


def test_a_presentation_s_slides_and_notes_are_translated_its_field_kept(tiny_translator):
    from odf.draw import Page
    from odf.presentation import Notes

    from tnmt.documents.formats import read_file

    source = presentation()
    assert [u.text for u in read_file(source, "p.odp").units] == ["two hundred", "seven"]
    translator = Recording(tiny_translator)
    after = load(io.BytesIO(translate_file(translator, source, "p.odp", settings=SETTINGS)))
    assert after.mimetype == "application/vnd.oasis.opendocument.presentation"
    [page] = after.getElementsByType(Page)
    [slide, note] = page.getElementsByType(P)
    assert letters(text(slide)).replace("1", "") == letters(translator.found[0]).replace("1", "")
    assert len(slide.getElementsByType(PageNumber)) == 1 and len(slide.getElementsByType(Span)) <= 1
    assert letters(text(after.getElementsByType(Notes)[0])) == letters(translator.found[1])
    with pytest.raises(UserError, match=r"^p\.odp: not an OpenDocument presentation \(its mimetype is"):
        translate_file(tiny_translator, document(), "p.odp", settings=SETTINGS)  # a text named as a presentation
