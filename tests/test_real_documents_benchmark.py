"""benchmarks/quality/real_documents.py: a paragraph's own text (nested paragraphs apart), and a file measured."""

import io
import shutil

import docx
import pytest

from benchmarks.quality.real_documents import measure, office_opens, paragraphs


def test_a_text_box_s_paragraph_is_its_own(tmp_path):
    from docx.oxml.parser import parse_xml

    w = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'
    document = docx.Document()
    p = document.add_paragraph("Outer words ")._p
    p.append(
        parse_xml(
            f"<w:r {w}><w:pict><w:txbxContent><w:p><w:r><w:t>inner words</w:t></w:r></w:p></w:txbxContent>"
            "</w:pict></w:r>"
        )
    )
    buffer = io.BytesIO()
    document.save(buffer)
    assert paragraphs(buffer.getvalue(), ".docx") == [
        ("word/document.xml", "Outer words "),
        ("word/document.xml", "inner words"),
    ]


def test_a_file_is_measured_paragraph_by_paragraph(tiny_translator, tmp_path):
    document = docx.Document()
    document.add_paragraph("two hundred")
    document.add_paragraph("5")  # no words: not counted
    path = tmp_path / "d.docx"
    document.save(path)
    found = measure(tiny_translator, path, tmp_path / "out.docx")
    assert found["paragraphs"] == 1 and "mismatch" not in found
    assert len(found["unchanged"]) <= 1
    assert len(docx.Document(tmp_path / "out.docx").paragraphs) == 2  # the translation, written where told
    assert "word/settings.xml" not in found["rewritten"]  # a part without text python-docx writes back as it was
    (tmp_path / "x.docx").write_bytes(b"not a zip")
    refused = measure(tiny_translator, tmp_path / "x.docx", tmp_path / "x.out.docx")
    assert refused["refused"].startswith("x.docx: not a Word document") and not (tmp_path / "x.out.docx").exists()


@pytest.mark.skipif(shutil.which("soffice") is None, reason="LibreOffice (soffice) is not installed")
def test_office_opens_names_the_files_libreoffice_converts(tmp_path):
    good, broken = tmp_path / "a.docx", tmp_path / "b" / "a.docx"  # one name twice: each is converted
    docx.Document().save(good)
    broken.parent.mkdir()
    broken.write_bytes(b"PK\x03\x04 not a document")
    assert office_opens([good, broken], tmp_path / "work") == {good}
