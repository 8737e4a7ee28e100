"""tnmt/documents/epub.py: EPUB books translated page by page on the tiny en -> it model, in reading order, with
the navigation and titles; every other entry and every other byte of the package document kept; bad books named."""

import gc
import html
import io
import time
import zipfile
from xml.etree import ElementTree

import bad_documents as docs
import pytest

from benchmarks.quality.documents import epub_book
from tnmt.config import DecodeConfig
from tnmt.documents.epub import read_epub
from tnmt.documents.formats import translate_file
from tnmt.documents.inline import XML_INVALID
from tnmt.errors import UserError
from tnmt.translate.evidence import Evidence
from tnmt.translate.translation import Translation

SETTINGS = DecodeConfig(beam_size=2, max_len=12)
STYLE = b"p { color: #123456 }\n"
PICTURE = bytes(range(256)) * 8
PAGES = ["<p>two hundred <b>and</b> five</p>\n<p>seven</p>\n", '<h1 id="c2">one thousand</h1>\n<p>three</p>\n']
NCX = b"""<?xml version="1.0" encoding="UTF-8"?>
<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1">
  <head><meta name="dtb:uid" content="x"/></head>
  <docTitle><text>two hundred</text></docTitle>
  <docAuthor><text>seven</text></docAuthor>
  <navMap><navPoint id="n1" playOrder="1"><navLabel><text>five</text></navLabel><content src="p0.xhtml"/></navPoint>
  </navMap>
</ncx>
"""


def book(**replace: bytes) -> bytes:
    """A book of PAGES with a style sheet, a picture and an EPUB 2 NCX; `replace`: entries given other bytes
    (`OEBPS_content_opf` names OEBPS/content.opf, as in bad_documents.edited), or added (named as they are)."""
    data = epub_book(
        PAGES,
        title="seven & five",
        extra=(
            ("style.css", "text/css", STYLE),
            ("pic.png", "image/png", PICTURE),
            ("toc.ncx", "application/x-dtbncx+xml", NCX),
        ),
    )
    if not replace:
        return data  # as the book's writer laid it out: the mimetype stored
    return docs.edited(data, **replace)


def opf(data: bytes) -> bytes:
    return zipfile.ZipFile(io.BytesIO(data)).read("OEBPS/content.opf")


def test_the_pages_navigation_and_titles_are_the_units_in_reading_order():
    units = [u.text for u in read_epub(book(), where="b.epub").units]
    # the package's title, the NCX's title and label (not its author), then the pages: nav first (the manifest's
    # first item, not in the spine) comes after the spine's pages
    assert units[:3] == ["seven & five", "two hundred", "five"]
    assert units[3:] == ["Part 1", "two hundred and five", "seven", "Part 2", "one thousand", "three"] + [
        "Contents",
        "Part 1",
        "Part 2",
    ]


def test_a_translated_book_keeps_every_other_entry_and_every_other_byte_of_its_package(tiny_translator):
    source = book()
    out = translate_file(tiny_translator, source, "b.epub", settings=SETTINGS)
    before, after = zipfile.ZipFile(io.BytesIO(source)), zipfile.ZipFile(io.BytesIO(out))
    assert [i.filename for i in after.infolist()] == [i.filename for i in before.infolist()]
    first = after.infolist()[0]
    assert first.filename == "mimetype" and first.compress_type == zipfile.ZIP_STORED
    for name in ("mimetype", "META-INF/container.xml", "OEBPS/style.css", "OEBPS/pic.png"):
        assert after.read(name) == before.read(name)
    assert [i.compress_type for i in after.infolist()] == [i.compress_type for i in before.infolist()]
    old, new = opf(source), opf(out)
    head, tail = old.split(b"<dc:title>")[0], old.split(b"</dc:title>")[1]
    assert new.startswith(head + b"<dc:title>") and new.endswith(b"</dc:title>" + tail) and new != old
    ncx = after.read("OEBPS/toc.ncx")
    assert b"<docAuthor><text>seven</text></docAuthor>" in ncx and b"<text>two hundred</text>" not in ncx
    for name in ("OEBPS/p0.xhtml", "OEBPS/p1.xhtml", "OEBPS/nav.xhtml", "OEBPS/content.opf", "OEBPS/toc.ncx"):
        ElementTree.fromstring(after.read(name))  # still well-formed XML
    page = after.read("OEBPS/p1.xhtml").decode()
    assert '<h1 id="c2">' in page and "one thousand" not in page and page.count("<p>") == 1


def test_the_translations_land_in_their_pages(tiny_translator):
    pending = read_epub(book(), where="b.epub")
    found = tiny_translator.translations([u.text for u in pending.units], SETTINGS, evidence=True)
    out = zipfile.ZipFile(io.BytesIO(pending.write(found)))
    texts = [XML_INVALID.sub("", html.escape(t.text, quote=False)) for t in found]
    assert f"<dc:title>{texts[0]}</dc:title>".encode() in out.read("OEBPS/content.opf")
    assert f"<docTitle><text>{texts[1]}</text></docTitle>".encode() in out.read("OEBPS/toc.ncx")
    assert f"<navLabel><text>{texts[2]}</text></navLabel>".encode() in out.read("OEBPS/toc.ncx")
    assert f"<title>{texts[3]}</title>" in out.read("OEBPS/p0.xhtml").decode()
    assert f"<p>{texts[8]}</p>" in out.read("OEBPS/p1.xhtml").decode()


def test_a_spine_page_that_is_not_xhtml_and_a_missing_page_are_named_in_left():
    package = opf(book()).replace(
        b"</manifest>",
        b'<item id="svg" href="cover.svg" media-type="image/svg+xml"/>'
        b'<item id="gone" href="gone.xhtml" media-type="application/xhtml+xml"/></manifest>',
    )
    package = package.replace(b"<spine>", b'<spine><itemref idref="svg"/><itemref idref="nowhere"/>')
    svg = b'<svg xmlns="http://www.w3.org/2000/svg"><text>seven</text></svg>'
    left = read_epub(book(**{"OEBPS_content_opf": package, "OEBPS/cover.svg": svg}), where="b.epub").left
    assert "OEBPS/cover.svg: a spine page of type image/svg+xml: kept as it was (tnmt translates XHTML)" in left
    assert any("'nowhere'" in line and "manifest lacks" in line for line in left)
    assert "OEBPS/gone.xhtml: in the manifest, not in the archive" in left


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        (
            {"META-INF_container_xml": b"<container/>"},
            "b.epub: not an EPUB book (META-INF/container.xml names no package document)",
        ),
        (
            {"OEBPS_content_opf": b"<package><metadata>"},
            "b.epub: OEBPS/content.opf: not well-formed XML (no element found: line 1, column 19)",
        ),
        ({"OEBPS_p0_xhtml": "<p>caf\xe9</p>".encode("latin-1")}, "b.epub: OEBPS/p0.xhtml is not UTF-8 text (byte 6)"),
        (
            {"OEBPS_toc_ncx": b'<!DOCTYPE ncx [<!ENTITY a "aaaa">]><ncx/>'},
            "b.epub: OEBPS/toc.ncx declares entities: refused (they could expand)",
        ),
    ],
)
def test_a_broken_book_is_refused_naming_its_entry(replace, message):
    with pytest.raises(UserError) as error:
        read_epub(book(**replace), where="b.epub")
    assert str(error.value) == message


def test_a_file_that_is_not_a_zip_or_lacks_a_container_is_not_a_book():
    with pytest.raises(UserError, match=r"^b.epub: not an EPUB book \("):
        read_epub(b"not a zip", where="b.epub")
    with pytest.raises(UserError, match=r"^b.epub: not an EPUB book \(no META-INF/container.xml in the archive\)$"):
        read_epub(docs.zipped(("mimetype", b"application/epub+zip")), where="b.epub")


def _read_and_write(data: bytes) -> bytes:
    pending = read_epub(data, where="b.epub")
    said = Translation("a", [], 0.0, 0.0, evidence=Evidence([(0, 0)], [1.0], 1.0, []))
    return pending.write([said] * len(pending.units))


def test_reading_and_writing_a_book_grows_linearly_in_its_package():
    """A package document of 10x the manifest items and spine entries costs under 20x: every look-up between
    the manifest, the spine and the pages is a set's, not a list's (quadratic in the items; an archive's entry
    limit bounds its pages, but nothing bounds the items a package document may name)."""

    def seconds(items: int) -> float:
        data = book()
        named = "".join(f'<item id="i{k}" href="i{k}.png" media-type="image/png"/>' for k in range(items))
        package = opf(data).replace(b"</manifest>", f"{named}</manifest>".encode())
        package = package.replace(
            b"</spine>", "".join(f'<itemref idref="i{k}"/>' for k in range(items)).encode() + b"</spine>"
        )
        data = docs.edited(data, OEBPS_content_opf=package)
        gc.collect()
        start = time.perf_counter()
        _read_and_write(data)
        return time.perf_counter() - start

    small = min(seconds(3_000) for _ in range(2))
    large = seconds(30_000)
    assert large < 20 * small + 0.05, f"3,000 items: {small:.3f} s, 30,000 items: {large:.3f} s"
