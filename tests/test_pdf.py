"""tnmt/documents/pdf.py: a PDF's text blocks replaced in place on the tiny en -> it model, their place, size and
colour kept, bold carried, links and pictures kept; rotated text and scanned pages named in `left`; bad files named."""

import gc
import time

import pytest

from tnmt.config import DecodeConfig
from tnmt.documents.formats import translate_file
from tnmt.documents.pdf import MOST_REDACTIONS, _bands, read_pdf
from tnmt.errors import UserError
from tnmt.translate.evidence import Evidence
from tnmt.translate.translation import Translation

pymupdf = pytest.importorskip("pymupdf", reason="PyMuPDF is not installed (the pdf extra)")

SETTINGS = DecodeConfig(beam_size=2, max_len=12)
RED = (0.8, 0.0, 0.0)
LINK = "https://example.com/two"


def document() -> bytes:
    """A page of a red title, a paragraph with a bold word over two lines (a word hyphenated across them), a
    link over the title and a picture; a rotated label; and a second page with a picture only."""
    pdf = pymupdf.open()
    page = pdf.new_page()
    page.insert_text((72, 72), "two hundred and five", fontsize=14, fontname="helv", color=RED)
    writer = pymupdf.TextWriter(page.rect)
    bold, regular = pymupdf.Font("hebo"), pymupdf.Font("helv")
    writer.append((72, 110), "seven ", font=regular, fontsize=11)
    writer.append(writer.last_point, "thousand", font=bold, fontsize=11)
    writer.append(writer.last_point, " and thou-", font=regular, fontsize=11)
    writer.append((72, 124), "sand three", font=regular, fontsize=11)
    writer.write_text(page)
    page.insert_text((400, 400), "five", fontsize=10, rotate=90)
    page.insert_link({"kind": pymupdf.LINK_URI, "from": pymupdf.Rect(72, 58, 220, 76), "uri": LINK})
    picture = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 8, 8), False)
    picture.set_rect(picture.irect, (0, 128, 255))
    page.insert_image(pymupdf.Rect(300, 200, 340, 240), pixmap=picture)
    scan = pdf.new_page()
    scan.insert_image(pymupdf.Rect(72, 72, 300, 300), pixmap=picture)
    return pdf.tobytes()


def blocks(data: bytes, page: int = 0) -> list[dict]:
    return [b for b in pymupdf.open(stream=data, filetype="pdf")[page].get_text("dict")["blocks"] if b["type"] == 0]


def test_a_block_is_one_unit_its_lines_joined_its_bold_marked():
    pending = read_pdf(document(), where="d.pdf")
    assert [u.text for u in pending.units] == ["two hundred and five", "seven thousand and thousand three"]
    assert pending.left == [
        "page 1 block 3: rotated or vertical text: kept as it was",
        "page 2: no text to read (a scanned page is a picture): kept as it was",
    ]


def test_each_block_is_replaced_in_its_place_size_and_colour_with_links_and_pictures_kept(tiny_translator):
    source = document()
    out = translate_file(tiny_translator, source, "d.pdf", settings=SETTINGS)
    before, after = pymupdf.open(stream=source, filetype="pdf"), pymupdf.open(stream=out, filetype="pdf")
    assert len(after) == len(before) == 2
    old, new = blocks(source), blocks(out)
    title = [b for b in new if b["bbox"][1] < 90]
    assert title and all(pymupdf.Rect(b["bbox"]).intersects(pymupdf.Rect(old[0]["bbox"])) for b in title)
    spans = [s for b in title for line in b["lines"] for s in line["spans"]]
    assert {s["color"] for s in spans} == {0xCC0000} and all(s["size"] <= 14.01 for s in spans)
    assert "two hundred and five" not in after[0].get_text()
    rotated = [b for b in blocks(out) if tuple(b["lines"][0]["dir"]) != (1.0, 0.0)]
    assert [s["text"] for b in rotated for line in b["lines"] for s in line["spans"]] == ["five"]  # kept
    assert [(link["uri"], link["from"]) for link in after[0].get_links()] == [(LINK, pymupdf.Rect(72, 58, 220, 76))]
    assert len(after[0].get_images()) == len(before[0].get_images()) == 1 and len(after[1].get_images()) == 1


def test_a_bold_span_comes_back_bold(tiny_translator):
    out = translate_file(tiny_translator, document(), "d.pdf", settings=SETTINGS)
    paragraph = [b for b in blocks(out) if b["bbox"][1] > 90 and b["bbox"][0] < 300]
    fonts = [s["font"] for b in paragraph for line in b["lines"] for s in line["spans"] if s["text"].strip()]
    # the bold on some words, not on all, in Helvetica's family (sans-serif; a glyph it lacks falls back to Noto)
    assert "NimbusSans-Bold" in fonts and "NimbusSans-Regular" in fonts


def test_a_file_that_is_not_a_pdf_or_is_encrypted_is_named():
    with pytest.raises(UserError, match=r"^d\.pdf: not a PDF document \("):
        read_pdf(b"%PDF-1.7 nothing else", where="d.pdf")
    pdf = pymupdf.open()
    pdf.new_page().insert_text((72, 72), "seven")
    locked = pdf.tobytes(encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="u", owner_pw="o")
    with pytest.raises(UserError, match=r"^d\.pdf: the PDF is encrypted: tnmt cannot rewrite it$"):
        read_pdf(locked, where="d.pdf")


def test_without_pymupdf_the_error_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pymupdf", None)
    with pytest.raises(UserError, match=r"^PDF files need PyMuPDF: pip install 'tnmt\[pdf\]'"):
        read_pdf(document(), where="d.pdf")


def test_blocks_are_redacted_in_bands_that_touch_no_kept_block():
    rects = [(72.0, 20.0 + 10 * k, 200.0, 28.0 + 10 * k) for k in range(1000)]
    kept = [(72.0, 20.0 + 10 * 500, 90.0, 28.0 + 10 * 500)]  # a number between the words
    bands = _bands(rects[:500] + rects[501:], kept)
    assert len(bands) <= MOST_REDACTIONS + 8  # the band holding the kept block halved a few times
    assert not any(b[0] < k[2] and k[0] < b[2] and b[1] < k[3] and k[1] < b[3] for b in bands for k in kept)
    assert all(any(b[1] <= r[1] and r[3] <= b[3] for b in bands) for r in rects if r != rects[500])


def _page_of(blocks: int) -> bytes:
    """One page of `blocks` one-line blocks in columns of 50, every tenth a number (kept as it is)."""
    pdf = pymupdf.open()
    page = pdf.new_page(width=100 * (blocks // 50 + 1), height=16 * 50 + 40)
    for k in range(blocks):
        at = (20 + 100 * (k // 50), 20 + 16 * (k % 50))
        page.insert_text(at, str(k) if k % 10 == 0 else "seven dogs", fontsize=8)
    return pdf.tobytes()


def test_rewriting_a_page_grows_linearly_in_its_blocks():
    """A page of 10x the blocks costs under 20x to read and write: each block laid out on one scratch page put on
    the page once, the redactions in bands (PyMuPDF's own calls per block are quadratic and worse)."""
    said = Translation("a", [], 0.0, 0.0, evidence=Evidence([(0, 0)], [1.0], 1.0, []))

    def seconds(blocks: int) -> tuple[float, bytes]:
        data = _page_of(blocks)
        gc.collect()
        start = time.perf_counter()
        pending = read_pdf(data, where="d.pdf")
        out = pending.write([said] * len(pending.units))
        return time.perf_counter() - start, out

    small = min(seconds(150)[0] for _ in range(2))
    large, out = seconds(1500)
    assert large < 20 * small + 0.05, f"150 blocks: {small:.3f} s, 1,500 blocks: {large:.3f} s"
    text = pymupdf.open(stream=out, filetype="pdf")[0].get_text()
    assert "seven" not in text and text.split().count("a") == 1350 and "1490" in text.split()
