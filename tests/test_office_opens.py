"""Office suites are the judge of a written file (issue 80): Debian's LibreOffice, headless, opens every document tnmt
writes (converted to PDF), from inputs built by the format's library and from the same inputs as LibreOffice itself
writes them (its own .docx, .pptx, .odt and .odp: notes pages without a notes placeholder, its bookmarks and fields).
Skipped, with one line, where `soffice` is not installed (`.ci/run` installs it)."""

import shutil
import subprocess
from pathlib import Path

import pytest
from test_opendocument import footnote, presentation
from test_slides import _presentation
from test_word import BOOKMARK, DATE_FIELD, HYPERLINK, _document, _run

from tnmt.config import DecodeConfig
from tnmt.documents.formats import translate_file

pytestmark = pytest.mark.skipif(shutil.which("soffice") is None, reason="LibreOffice (soffice) is not installed")
SETTINGS = DecodeConfig(beam_size=2, max_len=12)
FILTERS = {
    ".docx": "docx:MS Word 2007 XML",
    ".pptx": "pptx:Impress MS PowerPoint 2007 XML",
    ".odt": "odt",
    ".odp": "odp",
}


def _odt() -> bytes:
    """An OpenDocument text with a bold span, a link, a page-number field and a footnote (odfpy's)."""
    import io

    from odf.opendocument import OpenDocumentText
    from odf.style import Style, TextProperties
    from odf.text import A, P, PageNumber, Span

    doc = OpenDocumentText()
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    doc.automaticstyles.addElement(bold)
    p = P(text="two ")
    p.addElement(Span(stylename=bold, text="hundred"))
    p.addElement(A(href="https://example.com", type="simple", text=" and five"))
    p.addElement(footnote("seven"))
    doc.text.addElement(p)
    page = P(text="page ")
    page.addElement(PageNumber(selectpage="current", text="1"))
    doc.text.addElement(page)
    buffer = io.BytesIO()
    doc.save(buffer)
    return buffer.getvalue()


def _inputs() -> dict[str, bytes]:
    word = _document(
        _run("two ") + HYPERLINK.replace("the site", "hundred") + _run(" and five"),
        BOOKMARK + _run("seven"),
        DATE_FIELD,
    )
    return {"d.docx": word, "p.pptx": _presentation(notes_placeholder=False), "o.odt": _odt(), "s.odp": presentation()}


def _convert(path: Path, target: str, profile: Path) -> Path:
    """`path` converted by LibreOffice to `target` (a filter, "pdf"), beside it in a folder of its own."""
    out = path.parent / f"{path.stem}-{target.split(':')[0]}"
    command = ["soffice", "--headless", f"-env:UserInstallation=file://{profile}", "--convert-to", target]
    done = subprocess.run([*command, "--outdir", str(out), str(path)], capture_output=True, text=True, timeout=180)
    [written] = list(out.glob("*")) or [None]
    assert written is not None and written.stat().st_size > 0, (
        f"LibreOffice did not open {path.name}: {done.stdout}{done.stderr}"
    )
    return written


@pytest.mark.parametrize("name", ["d.docx", "p.pptx", "o.odt", "s.odp"])
def test_libreoffice_opens_what_tnmt_writes_from_its_own_files_and_from_the_library_s(tiny_translator, tmp_path, name):
    profile = tmp_path / "profile"
    source = tmp_path / name
    source.write_bytes(_inputs()[name])
    rewritten = _convert(source, FILTERS[source.suffix], profile)  # the same document, as LibreOffice writes it
    for given in (source, rewritten):
        translated = tmp_path / f"{given.stem}.it{given.suffix}"
        translated.write_bytes(translate_file(tiny_translator, given.read_bytes(), given.name, settings=SETTINGS))
        assert _convert(translated, "pdf", profile).read_bytes().startswith(b"%PDF")
