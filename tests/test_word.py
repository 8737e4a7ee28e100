"""Word documents (documents/word.py): every paragraph a reader sees is read, whatever it holds (hyperlinks, fields,
bookmarks, comments, tracked changes, content controls, breaks, footnotes, text boxes, headers), and written back
with what is not text kept, each thing exactly once."""

import io
import re
import zipfile

import docx
import pytest
from docx.oxml.parser import parse_xml

from tnmt.documents.formats import read_file
from tnmt.documents.word import read_docx, write_docx

W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
R = 'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships"'


def _run(text: str, bold: bool = False) -> str:
    props = "<w:rPr><w:b/></w:rPr>" if bold else ""
    return f'<w:r {W}>{props}<w:t xml:space="preserve">{text}</w:t></w:r>'


def _document(*paragraphs: str) -> bytes:
    """A .docx whose body holds these paragraphs' content (w:p children, as XML in the w: namespace)."""
    document = docx.Document()
    for content in paragraphs:
        p = document.add_paragraph()._p
        for child in parse_xml(f"<w:p {W} {R}>{content}</w:p>"):
            p.append(child)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def _upper(fragment: str) -> str:
    """A stand-in translation: the fragment's text upper-cased, its markup as it was."""
    return re.sub(r"(^|>)([^<]*)", lambda m: m.group(1) + m.group(2).upper(), fragment)


def _body(data: bytes) -> str:
    return zipfile.ZipFile(io.BytesIO(data)).read("word/document.xml").decode()


HYPERLINK = (
    f'<w:hyperlink {W} {R} r:id="rId99"><w:r><w:rPr><w:rStyle w:val="Hyperlink"/></w:rPr>'
    "<w:t>the site</w:t></w:r></w:hyperlink>"
)
BOOKMARK = f'<w:bookmarkStart {W} w:id="7" w:name="here"/>'
PAGE_FIELD = (
    f'<w:r {W}><w:fldChar w:fldCharType="begin"/></w:r><w:r {W}><w:instrText> PAGE </w:instrText></w:r>'
    f'<w:r {W}><w:fldChar w:fldCharType="separate"/></w:r><w:r {W}><w:t>3</w:t></w:r>'
    f'<w:r {W}><w:fldChar w:fldCharType="end"/></w:r>'
)
LINK_FIELD = (
    f'<w:r {W}><w:fldChar w:fldCharType="begin"/></w:r>'
    f'<w:r {W}><w:instrText> HYPERLINK "https://x.org" </w:instrText></w:r>'
    f'<w:r {W}><w:fldChar w:fldCharType="separate"/></w:r><w:r {W}><w:t>our page</w:t></w:r>'
    f'<w:r {W}><w:fldChar w:fldCharType="end"/></w:r>'
)


@pytest.mark.parametrize(
    ("content", "fragment", "kept"),
    [
        (
            _run("Read ") + HYPERLINK + _run(" today."),
            'Read <span data-wrap="0"><span data-run="1">the site</span></span> today.',
            ['r:id="rId99"'],
        ),
        (
            _run("A ") + BOOKMARK + _run("dog") + f'<w:bookmarkEnd {W} w:id="7"/>',
            'A <img data-keep="0">dog<img data-keep="1">',
            ['w:name="here"', "bookmarkEnd"],
        ),
        (
            _run("Page ") + PAGE_FIELD + _run(" of the book"),
            'Page <img data-keep="0"> of the book',
            ["> PAGE <", "<w:t>3</w:t>"],
        ),
        (_run("See ") + LINK_FIELD + _run(" now"), 'See <span data-wrap="0">our page</span> now', ["HYPERLINK"]),
        (
            _run("A red ") + f'<w:ins {W} w:id="1" w:author="me">' + _run("small") + "</w:ins>" + _run(" car"),
            'A red <span data-wrap="0">small</span> car',
            ['w:author="me"'],
        ),
        (
            _run("A ")
            + f'<w:del {W} w:id="2" w:author="me"><w:r><w:delText>big</w:delText></w:r></w:del>'
            + _run("car"),
            'A <img data-keep="0">car',
            ["<w:delText>big</w:delText>"],
        ),
        (
            _run("One line") + f"<w:r {W}><w:br/></w:r>" + _run("and the next"),
            'One line<br data-keep="0">and the next',
            ["<w:br/>"],
        ),
        (
            _run("Mind ")
            + f'<w:commentRangeStart {W} w:id="0"/>'
            + _run("this")
            + f'<w:commentRangeEnd {W} w:id="0"/><w:r {W}><w:commentReference w:id="0"/></w:r>',
            'Mind <img data-keep="0">this<img data-keep="1"><img data-keep="2">',
            ["commentRangeStart", "commentRangeEnd", "commentReference"],
        ),
        (
            f'<w:sdt {W}><w:sdtPr><w:alias w:val="Name"/></w:sdtPr><w:sdtContent>'
            + _run("your name")
            + "</w:sdtContent></w:sdt>"
            + _run(" here"),
            '<span data-wrap="0">your name</span> here',
            ['w:alias w:val="Name"'],
        ),
    ],
    ids=[
        "hyperlink",
        "bookmark",
        "page-field",
        "hyperlink-field",
        "insertion",
        "deletion",
        "break",
        "comment",
        "content-control",
    ],
)
def test_each_kind_of_content_is_read_and_written_back_with_what_it_keeps(content, fragment, kept):
    read, fragments = read_docx(_document(content), where="d.docx")
    assert fragments == [fragment]
    before = _body(_document(content))
    body = _body(write_docx(read, [_upper(fragment)]))
    for mark in kept:
        assert body.count(mark) == before.count(mark) >= 1, mark  # kept, once
    text = "".join(re.findall(r"<w:t(?: [^>]*)?>([^<]*)</w:t>", body))
    words = re.sub(r"<[^>]+>", "", fragment)
    assert words.upper() in text.replace("3", "")  # every word of the fragment written, as translated


def test_the_paragraph_s_own_properties_and_a_text_box_s_paragraphs_stay():
    box = (
        f'<w:r {W}><w:pict><v:shape xmlns:v="urn:schemas-microsoft-com:vml"><v:textbox><w:txbxContent>'
        f"<w:p>{_run('inside the box')}</w:p></w:txbxContent></v:textbox></v:shape></w:pict></w:r>"
    )
    data = _document(_run("A box: ") + box)
    read, fragments = read_docx(data, where="d.docx")
    assert fragments == ['A box: <img data-keep="0">', "inside the box"]
    alone, _ = read_docx(_document(box), where="d.docx")
    assert alone.left == []  # a paragraph of a text box alone: its words are the box's, translated
    body = _body(write_docx(read, [_upper(f) for f in fragments]))
    assert "A BOX: " in body and "INSIDE THE BOX" in body and body.count("<w:txbxContent>") == 1


DATE_FIELD = PAGE_FIELD.replace(" PAGE ", " DATE ").replace("<w:t>3</w:t>", "<w:t>December</w:t>")


def test_a_paragraph_whose_words_are_all_kept_is_named_in_left():
    read, fragments = read_docx(_document(DATE_FIELD, _run("Words."), PAGE_FIELD), where="d.docx")
    assert fragments == ["Words."]  # the page number's paragraph has no words: not left, nothing to translate
    assert read.left == ["word/document.xml paragraph 1: its words are all kept (a field's result or a deletion)"]
    pending = read_file(_document(DATE_FIELD, _run("Words.")), "d.docx")
    assert list(pending.left) == read.left


def test_headers_footnotes_and_comments_are_translated_too():
    document = docx.Document()
    document.add_paragraph("Body text.")
    document.sections[0].first_page_header.add_paragraph("First page header.")
    document.sections[0].different_first_page_header_footer = True
    document.add_comment(
        document.paragraphs[0].runs or [document.paragraphs[0].add_run("x")], text="A comment's words."
    )
    buffer = io.BytesIO()
    document.save(buffer)
    read, fragments = read_docx(buffer.getvalue(), where="d.docx")
    words = {re.sub("<[^>]+>", "", f) for f in fragments}  # the comment's anchors and mark kept around them
    assert {"Body text.", "First page header.", "A comment's words."} <= words
    out = docx.Document(io.BytesIO(write_docx(read, [_upper(f) for f in fragments])))
    assert out.paragraphs[0].text == "BODY TEXT."
    assert out.sections[0].first_page_header.paragraphs[-1].text == "FIRST PAGE HEADER."
    assert [c.text for c in out.comments] == ["A COMMENT'S WORDS."]


def test_footnotes_kept_as_bytes_by_python_docx_are_parsed_and_written_back():
    data = _document(_run("A note") + f'<w:r {W}><w:footnoteReference w:id="1"/></w:r>')
    notes = (
        f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:footnotes {W}><w:footnote w:id="1">'
        f"<w:p>{_run('The note itself.')}</w:p></w:footnote></w:footnotes>"
    ).encode()
    data = _with_part(
        data,
        "word/footnotes.xml",
        notes,
        "application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml",
        "footnotes",
    )
    read, fragments = read_docx(data, where="d.docx")
    assert fragments == ['A note<img data-keep="0">', "The note itself."]
    out = zipfile.ZipFile(io.BytesIO(write_docx(read, [_upper(f) for f in fragments])))
    assert "THE NOTE ITSELF." in out.read("word/footnotes.xml").decode()
    assert 'w:footnoteReference w:id="1"' in out.read("word/document.xml").decode()


def _with_part(data: bytes, name: str, content: bytes, content_type: str, relation: str) -> bytes:
    """`data` with one more part, declared and related to the body."""
    source, buffer = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as out:
        for info in source.infolist():
            body = source.read(info)
            if info.filename == "[Content_Types].xml":
                body = body.replace(
                    b"</Types>", f'<Override PartName="/{name}" ContentType="{content_type}"/></Types>'.encode()
                )
            if info.filename == "word/_rels/document.xml.rels":
                rel = f"http://schemas.openxmlformats.org/officeDocument/2006/relationships/{relation}"
                target = name.removeprefix("word/")
                body = body.replace(
                    b"</Relationships>",
                    f'<Relationship Id="rId900" Type="{rel}" Target="{target}"/></Relationships>'.encode(),
                )
            out.writestr(info, body)
        out.writestr(name, content)
    return buffer.getvalue()


def test_a_malformed_footnotes_part_is_named():
    from tnmt.errors import UserError

    data = _with_part(
        _document(_run("Text")),
        "word/footnotes.xml",
        b"<w:footnotes",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.footnotes+xml",
        "footnotes",
    )
    with pytest.raises(UserError, match=r"^d\.docx: not a Word document \(word/footnotes\.xml is not well-formed XML"):
        read_docx(data, where="d.docx")


def test_reading_changes_nothing_in_a_paragraph_left_as_it_was():
    box = f'<w:r {W}><w:drawing><wp:inline xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing"/></w:drawing></w:r>'
    data = _document(box, _run("Words."))
    read, fragments = read_docx(data, where="d.docx")
    body = _body(write_docx(read, fragments))
    assert body.count("<w:drawing>") == 1  # a paragraph of a picture alone: not read, not lost


def test_the_server_s_report_names_what_was_left(tiny_checkpoint):
    from fastapi.testclient import TestClient

    from tnmt.config import ServeConfig
    from tnmt.serve.app import create_app
    from tnmt.serve.models import load_models

    config, data = ServeConfig(), _document(DATE_FIELD, _run("two hundred"))
    with TestClient(create_app(load_models([tiny_checkpoint], config), config)) as client:
        answer = client.post("/v1/translate_file", files={"file": ("d.docx", data)}, data={"evidence": "true"})
    assert answer.status_code == 200, answer.text
    report = answer.json()["report"]
    assert report["left"] == ["word/document.xml paragraph 1: its words are all kept (a field's result or a deletion)"]
    assert report["summary"]["left"] == 1 and [s["source"] for s in report["segments"]] == ["two hundred"]
