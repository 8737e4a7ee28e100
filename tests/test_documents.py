"""tnmt/documents (issue 66, in progress): units with placeholders kept, subtitles and gettext catalogues
translated in their own format, on the tiny en -> it model."""

import html
import itertools
import re
import zipfile
from datetime import timedelta

import bad_documents as docs
import polib
import pytest
import srt
from hypothesis import given
from hypothesis import strategies as st

from tnmt.config import DecodeConfig
from tnmt.documents.gettext import read_po, write_po
from tnmt.documents.subtitles import read_srt, reflow, write_srt
from tnmt.documents.units import Pending, marked, unit
from tnmt.errors import UserError

SETTINGS = DecodeConfig(beam_size=2, max_len=12)


def translate_units(translator, units, settings):
    """Each unit's translation, steered as a pending document steers it (its placeholders kept)."""
    steering = Pending(units, bytes).steering(None)
    return translator.translations([u.text for u in units], settings, steering=steering)


SUBTITLES = """1
00:00:01,000 --> 00:00:02,500
two hundred
and five

2
00:00:03,000 --> 00:00:04,000
seven
"""

CATALOGUE = r"""msgid ""
msgstr ""
"Content-Type: text/plain; charset=UTF-8\n"
"Plural-Forms: nplurals=2; plural=(n != 1);\n"

#: app.py:3
msgid "two %s hundred"
msgstr ""

msgid "one thousand"
msgid_plural "{count} thousand"
msgstr[0] ""
msgstr[1] ""

msgid "seven"
msgstr "sette"
"""


def test_placeholders_are_units_strings_to_keep():
    assert unit("Delete %s files from {folder} (%(count)d left), ${HOME}").keep == (
        "%s",
        "{folder}",
        "%(count)d",
        "${HOME}",
    )
    assert unit("no placeholder here").keep == ()


def test_units_keep_their_placeholders_through_the_translation(tiny_translator):
    [found] = translate_units(tiny_translator, [unit("two %s hundred {name}")], SETTINGS)
    assert "%s" in found.text.split() and "{name}" in found.text.split()


@pytest.mark.parametrize(
    ("text", "lines", "expected"),
    [
        ("uno due tre quattro", 2, ["uno due", "tre quattro"]),
        ("a bb ccc dddd eeeee", 2, ["a bb ccc", "dddd eeeee"]),
        ("solo", 3, ["solo"]),
        ("uno due tre", 1, ["uno due tre"]),
        ("a b c", 3, ["a", "b", "c"]),
    ],
)
def test_reflow_keeps_the_cues_number_of_lines(text, lines, expected):
    assert reflow(text, lines) == expected


@given(st.lists(st.integers(1, 6), min_size=1, max_size=8), st.integers(1, 5))
def test_reflow_is_the_narrowest_layout_with_the_shortest_upper_lines(lengths, lines):
    """Against every layout of the words: the longest line is the shortest possible, and of the layouts that
    narrow, the widths from the top are the smallest (what bisection and the greedy cut promise)."""
    words = ["x" * n for n in lengths]
    lines = min(lines, len(words))
    layouts = [
        [" ".join(words[a:b]) for a, b in zip((0, *cuts), (*cuts, len(words)), strict=True)]
        for cuts in itertools.combinations(range(1, len(words)), lines - 1)
    ]
    best = min(layouts, key=lambda layout: (max(map(len, layout)), [len(line) for line in layout]))
    assert reflow(" ".join(words), lines) == best


def test_subtitles_keep_numbers_and_timings_and_each_cue_its_lines(tiny_translator):
    cues, units = read_srt(SUBTITLES, where="s.srt")
    assert [u.text for u in units] == ["two hundred and five", "seven"]
    translations = [t.text for t in translate_units(tiny_translator, units, SETTINGS)]
    out = list(srt.parse(write_srt(cues, translations)))
    assert [(c.index, c.start, c.end) for c in out] == [
        (1, timedelta(seconds=1), timedelta(seconds=2.5)),
        (2, timedelta(seconds=3), timedelta(seconds=4)),
    ]
    assert [" ".join(c.content.split()) for c in out] == [" ".join(t.split()) for t in translations]
    assert len(out[0].content.splitlines()) == min(2, len(translations[0].split()) or 1)


def test_a_file_that_is_not_subrip_is_named():
    with pytest.raises(UserError, match=r"^s\.srt: not a SubRip file"):
        read_srt("1\nnot a timing\nhello\n", where="s.srt")


def test_a_catalogue_fills_msgstr_and_plurals_marks_fuzzy_and_keeps_the_rest(tiny_translator):
    catalogue, places, units = read_po(CATALOGUE, where="m.po")
    assert [u.text for u in units] == ["two %s hundred", "one thousand", "{count} thousand"]
    translations = [t.text for t in translate_units(tiny_translator, units, SETTINGS)]
    out = polib.pofile(write_po(catalogue, places, translations))
    first, plural, done = out[0], out[1], out[2]
    assert first.msgstr == translations[0] and "%s" in first.msgstr and "fuzzy" in first.flags
    assert first.occurrences == [("app.py", "3")]
    assert plural.msgstr_plural == {0: translations[1], 1: translations[2]} and "{count}" in plural.msgstr_plural[1]
    assert (done.msgstr, done.flags) == ("sette", [])  # translated already: left alone
    assert out.metadata["Plural-Forms"] == "nplurals=2; plural=(n != 1);"


def test_a_word_document_keeps_its_paragraphs_and_runs_formatting_on_the_aligned_words(tiny_translator):
    import io

    import docx

    from tnmt.documents.word import read_docx, write_docx

    document = docx.Document()
    paragraph = document.add_paragraph("two ")
    paragraph.add_run("hundred").bold = True
    paragraph.add_run(" and five")
    document.add_paragraph("")
    document.add_table(rows=1, cols=1).cell(0, 0).text = "seven"
    buffer = io.BytesIO()
    document.save(buffer)

    loaded, fragments = read_docx(buffer.getvalue(), where="d.docx")
    assert fragments == ['two <span data-run="1">hundred</span> and five', "seven"]
    translated = []
    written = marked(fragments, lambda out: translated.extend(out) or write_docx(loaded, out))
    out = docx.Document(io.BytesIO(written.translate(tiny_translator, SETTINGS)))
    assert len(out.paragraphs) == 2 and len(out.tables) == 1  # the same structure
    runs = out.paragraphs[0].runs
    assert [run.bold for run in runs].count(True) <= 1 and all(run.bold in (None, True) for run in runs)
    plain = [re.sub(r"</?span[^>]*>", "", fragment) for fragment in translated]
    expected = [re.sub("[\x00-\x08\x0b\x0c\x0e-\x1f]", "", html.unescape(text)) for text in plain]  # not XML
    assert [out.paragraphs[0].text, out.tables[0].cell(0, 0).text] == expected


def test_a_file_that_is_not_a_word_document_is_named():
    from tnmt.documents.word import read_docx

    with pytest.raises(UserError, match=r"^d\.docx: not a Word document"):
        read_docx(b"PK\x03\x04 not really", where="d.docx")


def test_a_file_is_translated_in_the_format_its_name_says(tiny_translator):
    from tnmt.documents.formats import file_format, translate_file

    text = "two hundred.\n\n  - seven\n"
    assert (
        translate_file(tiny_translator, text.encode(), "a.txt", settings=SETTINGS).decode()
        == (tiny_translator.translate([text], SETTINGS)[0])
    )
    srt_out = translate_file(tiny_translator, SUBTITLES.encode(), "S.SRT", settings=SETTINGS).decode()
    assert [c.index for c in srt.parse(srt_out)] == [1, 2]
    assert file_format("notes", "po").name == "po"
    with pytest.raises(
        UserError, match=r"^x\.rtf: cannot tell its format from its name \(formats: docx, epub, html, markdown, odp,"
    ):
        file_format("x.rtf")
    with pytest.raises(UserError, match=r"^a\.txt: not UTF-8 text \(byte 0\)"):
        translate_file(tiny_translator, b"\xff\xfe", "a.txt")


def test_the_cli_translates_a_file_into_another(tiny_checkpoint, tmp_path, capsys):
    import json

    from tnmt.cli import main

    (tmp_path / "s.srt").write_text(SUBTITLES, encoding="utf-8")
    out, report = tmp_path / "s.it.srt", tmp_path / "report.json"
    command = ["translate", "--checkpoint", str(tiny_checkpoint), "--file", str(tmp_path / "s.srt"), "--out", str(out)]
    assert main([*command, "--report", str(report)]) == 0
    assert [c.index for c in srt.parse(out.read_text(encoding="utf-8"))] == [1, 2]
    segments = json.loads(report.read_text(encoding="utf-8"))["segments"]
    assert [s["source"] for s in segments] == ["two hundred and five", "seven"]
    cues = srt.parse(out.read_text(encoding="utf-8"))
    assert [" ".join(s["translation"].split()) for s in segments] == [" ".join(c.content.split()) for c in cues]
    assert main(["translate", "--checkpoint", str(tiny_checkpoint), "--file", str(tmp_path / "x.rtf")]) == 2
    assert "x.rtf: cannot tell its format from its name" in capsys.readouterr().err


def test_a_presentation_keeps_its_slides_and_runs_formatting(tiny_translator):
    import io

    import pptx

    from tnmt.documents.formats import translate_file

    presentation = pptx.Presentation()
    slide = presentation.slides.add_slide(presentation.slide_layouts[1])
    slide.shapes.title.text = "seven"
    paragraph = slide.placeholders[1].text_frame.paragraphs[0]
    for text, bold in (("two ", None), ("hundred", True), (" and five", None)):
        run = paragraph.add_run()
        run.text, run.font.bold = text, bold
    buffer = io.BytesIO()
    presentation.save(buffer)
    out = pptx.Presentation(io.BytesIO(translate_file(tiny_translator, buffer.getvalue(), "p.pptx", settings=SETTINGS)))
    assert len(out.slides) == 1 and len(list(out.slides[0].shapes)) == 2  # the same structure
    runs = out.slides[0].placeholders[1].text_frame.paragraphs[0].runs
    assert [run.font.bold for run in runs].count(True) <= 1 and all(run.font.bold in (None, True) for run in runs)


def zipped(*entries: tuple[str, bytes]) -> bytes:
    import io
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in entries:
            archive.writestr(name, content)
    return buffer.getvalue()


def test_archives_over_the_limits_or_naming_paths_outside_are_refused_before_they_are_opened():
    from tnmt.documents.archive import check_archive

    word = {"where": "d.docx", "kind": "a Word document"}
    check_archive(zipped(("word/document.xml", b"<x/>")), **word)  # within every limit
    with pytest.raises(UserError, match=r"^d\.docx: not a Word document"):
        check_archive(b"not a zip", **word)
    with pytest.raises(UserError, match=r"^d\.docx: 3 entries in the archive: over 2$"):
        check_archive(zipped(("a", b""), ("b", b""), ("c", b"")), **word, max_entries=2)
    with pytest.raises(UserError, match=r"^d\.docx: 5000 bytes once uncompressed: over 4000$"):
        check_archive(zipped(("a", b"x" * 5000)), **word, max_uncompressed=4000)
    with pytest.raises(UserError, match=r"^d\.docx: a is compressed \d+ times: over 200 \(a zip bomb\?\)$"):
        check_archive(zipped(("a", b"\0" * 1_000_000)), **word)
    module = b'<?xml version="1.0"?><!DOCTYPE script:module PUBLIC "-//OpenOffice.org//DTD" "module.dtd"><m/>'
    check_archive(zipped(("Basic/Standard/Module1.xml", module)), **word)  # a DTD by reference: LibreOffice's macros
    with pytest.raises(UserError, match=r"^d\.docx: a\.xml declares entities: refused \(they could expand\)$"):
        check_archive(zipped(("a.xml", docs.BILLION_LAUGHS + b"<d/>")), **word)
    for name in ("../evil.xml", "/etc/passwd", "word\\..\\..\\evil"):
        with pytest.raises(UserError, match=r"names a path outside it"):
            check_archive(zipped((name, b"x")), **word)
    for declared in (b"<!DOCTYPE d [", b"<!doctype a>x<!DOCTYPE b [", b"<!ENTITY x 'y'>"):
        with pytest.raises(UserError, match=r"declares entities"):
            check_archive(zipped(("a.xml", declared + b"<d/>")), **word)
    hostile = docs.zipped(("a.xml", b"<!DOCTYPE" * 7000 + b">[<d/>"), method=zipfile.ZIP_STORED)
    check_archive(hostile, **word)  # its prolog read once (2 s when each DOCTYPE read on to the end)


@pytest.mark.parametrize(
    ("name", "data", "part"),
    [
        ("d.docx", lambda: docs.word("two"), "word/document.xml"),
        ("p.pptx", docs.presentation, "ppt/presentation.xml"),
    ],
)
def test_an_office_part_that_is_not_well_formed_xml_is_named_with_its_line(name, data, part):
    from tnmt.documents.formats import read_file

    with pytest.raises(UserError) as refused:
        read_file(docs.malformed(data(), part), name)
    message = str(refused.value)
    assert message.startswith(f"{name}: not a ") and f"({part} is not well-formed XML (" in message, message
    assert re.search(r"line \d+, column \d+\)\)$", message) and "\n" not in message


VTT = """WEBVTT

00:00:01.000 --> 00:00:02.500 align:start
two <i>hundred</i>
and five

NOTE kept as it is

00:00:03.000 --> 00:00:04.000
<v Roger>seven</v>
"""


def test_webvtt_keeps_header_notes_timings_settings_and_tags(tiny_translator):
    import webvtt

    from tnmt.documents.formats import translate_file

    out = translate_file(tiny_translator, VTT.encode(), "s.vtt", settings=SETTINGS).decode()
    assert out.startswith("WEBVTT\n") and "NOTE kept as it is" in out and "align:start" in out
    captions = list(webvtt.from_string(out))
    assert [(c.start, c.end) for c in captions] == [("00:00:01.000", "00:00:02.500"), ("00:00:03.000", "00:00:04.000")]
    assert captions[0].raw_text.count("<i>") == 1 and captions[1].raw_text.startswith("<v Roger>")
    assert len(captions[0].raw_text.splitlines()) <= 2


@pytest.mark.parametrize(
    ("markup", "lines", "expected"),
    [
        (
            "<v Roger>Ein Mann</v> fährt <i>auf einem</i> Fahrrad.",
            2,
            "<v Roger>Ein Mann</v> fährt\n<i>auf einem</i> Fahrrad.",
        ),
        ("a<i>b</i> c d", 2, "a<i>b</i>\nc d"),
        ("one", 2, "one"),
    ],
)
def test_reflow_markup_breaks_lines_between_words_and_keeps_every_tag(markup, lines, expected):
    from tnmt.documents.subtitles import reflow_markup

    assert reflow_markup(markup, lines) == expected


def test_the_server_translates_a_file_into_the_same_format(tiny_checkpoint):
    from fastapi.testclient import TestClient

    from tnmt.config import ServeConfig
    from tnmt.serve.app import create_app
    from tnmt.serve.models import load_models

    config = ServeConfig()
    with TestClient(create_app(load_models([tiny_checkpoint], config), config)) as client:
        answer = client.post("/v1/translate_file", files={"file": ("talk.srt", SUBTITLES.encode())})
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-disposition"] == 'attachment; filename="talk.it.srt"'
        assert [c.index for c in srt.parse(answer.text)] == [1, 2]
        refused = client.post("/v1/translate_file", files={"file": ("talk.rtf", b"{\\rtf1}")})
        assert refused.status_code == 415 and "cannot tell its format" in refused.json()["error"]
        broken = client.post("/v1/translate_file", files={"file": ("d.docx", b"PK\x03\x04 broken")})
        assert broken.status_code == 422 and broken.json()["error"].startswith("d.docx: not a Word document")


def test_an_upload_s_progress_is_read_under_its_token_while_it_is_translated(tiny_checkpoint, monkeypatch):
    import asyncio
    import threading
    import time

    from fastapi.testclient import TestClient

    from tnmt.config import ServeConfig
    from tnmt.serve import files
    from tnmt.serve.app import create_app
    from tnmt.serve.models import load_models

    gate, real = threading.Event(), files.translations

    async def held(*args, progress, **kwargs):  # the document cut into 2 segments, then held until the test says
        progress(0, 2)
        while not gate.is_set():
            await asyncio.sleep(0.01)
        return await real(*args, progress=progress, **kwargs)

    monkeypatch.setattr(files, "translations", held)
    config, token = ServeConfig(), "0123456789abcdef"
    with TestClient(create_app(load_models([tiny_checkpoint], config), config)) as client:
        upload = {"file": ("talk.srt", SUBTITLES.encode())}
        answers = []
        sender = threading.Thread(
            target=lambda: answers.append(client.post("/v1/translate_file", files=upload, data={"progress": token}))
        )
        sender.start()
        path = f"/v1/translate_file/progress/{token}"
        while (seen := client.get(path)).status_code == 404 or seen.json()["segments"] == 0:
            assert sender.is_alive()
            time.sleep(0.01)
        assert seen.json() == {"done": 0, "segments": 2}
        taken = client.post("/v1/translate_file", files=upload, data={"progress": token})
        assert taken.status_code == 422 and "not one in use" in taken.json()["error"]
        gate.set()
        sender.join(60)
        assert answers[0].status_code == 200 and [c.index for c in srt.parse(answers[0].text)] == [1, 2]
        gone = client.get(path)  # answered: forgotten
        assert gone.status_code == 404 and gone.json() == {
            "error": f"progress {token!r}: no upload of this token is being translated"
        }
        bad = client.post("/v1/translate_file", files=upload, data={"progress": "../x"})
        assert bad.status_code == 422 and bad.json()["error"].startswith("progress: a token of 8 to 64 letters")


def test_libretranslate_s_file_translation_answers_a_url_that_serves_the_file(tiny_checkpoint):
    from fastapi.testclient import TestClient

    from tnmt.config import ServeConfig
    from tnmt.serve.app import create_app
    from tnmt.serve.models import load_models

    config = ServeConfig()
    with TestClient(create_app(load_models([tiny_checkpoint], config), config)) as client:
        settings = client.get("/frontend/settings").json()
        assert settings["filesTranslation"] is True and ".srt" in settings["supportedFilesFormat"]
        body = {"source": "en", "target": "it"}
        # LibreTranslate's own page sends this form (static/js/app.js, translateFile): its source may be "auto"
        page_form = {"source": "auto", "target": "it", "api_key": ""}
        answer = client.post("/translate_file", data=page_form, files={"file": ("../../talk.srt", SUBTITLES.encode())})
        assert answer.status_code == 200, answer.text
        url = answer.json()["translatedFileUrl"]
        assert url.startswith("http://testserver/download_file/") and url.endswith(".talk.it.srt")
        download = client.get(url)
        assert download.status_code == 200 and [c.index for c in srt.parse(download.text)] == [1, 2]
        for bad in ("../../etc/passwd", "x" * 32 + ".talk.it.srt", "%2e%2e%2fapp.py"):
            assert client.get(f"/download_file/{bad}").status_code == 404
        refused = client.post("/translate_file", data=body, files={"file": ("a.rtf", b"{\\rtf1}")})
        assert refused.status_code == 400 and "cannot tell its format" in refused.json()["error"]


def test_refused_documents_leave_nothing_in_the_store(tiny_checkpoint):
    from fastapi.testclient import TestClient

    from tnmt.config import ServeConfig
    from tnmt.serve.app import create_app
    from tnmt.serve.models import load_models

    config = ServeConfig()
    app = create_app(load_models([tiny_checkpoint], config), config)
    body = {"source": "en", "target": "it"}
    hostile = [docs.entities_in_word(), docs.outside(), docs.zipped(("word/document.xml", bytes(2_000_000)))]
    with TestClient(app) as client:
        for data in [*hostile, docs.presentation(), b""]:
            assert client.post("/translate_file", data=body, files={"file": ("d.docx", data)}).status_code == 400
            assert client.post("/v1/translate_file", files={"file": ("d.docx", data)}).status_code == 422
        assert app.state.file_store._directory is None  # nothing was ever written
        assert client.get("/health").status_code == 200


def test_macros_and_embedded_objects_are_kept_byte_for_byte(tiny_translator):
    import io
    import zipfile

    from tnmt.documents.formats import translate_file

    out = zipfile.ZipFile(io.BytesIO(translate_file(tiny_translator, docs.with_macros(), "d.docx", settings=SETTINGS)))
    assert out.read("word/vbaProject.bin") == out.read("word/embeddings/oleObject1.bin") == docs.MACROS


def test_the_evidence_report_has_a_segment_per_unit_with_its_confidence_terms_and_splits(tiny_checkpoint):
    import base64

    from fastapi.testclient import TestClient

    from tnmt.config import ServeConfig
    from tnmt.documents.report import lowest
    from tnmt.serve.app import create_app
    from tnmt.serve.models import load_models

    config = ServeConfig()
    with TestClient(create_app(load_models([tiny_checkpoint], config), config)) as client:
        plain = client.post("/v1/translate_file", files={"file": ("talk.srt", SUBTITLES.encode())})
        answer = client.post(
            "/v1/translate_file", files={"file": ("talk.srt", SUBTITLES.encode())}, data={"evidence": "true"}
        )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert base64.b64decode(body["file"]) == plain.content  # the same file, in JSON
    assert body["filename"] == "talk.it.srt" and body["media_type"].startswith("application/x-subrip")
    segments = body["report"]["segments"]
    assert [s["source"] for s in segments] == ["two hundred and five", "seven"]
    assert all(0 <= s["confidence"] <= 1 and s["sentences"] == 1 and not s["split"] for s in segments)
    summary = body["report"]["summary"]
    assert summary["segments"] == 2 and summary["lowest_confidence"] == min(s["confidence"] for s in segments)
    assert [s["index"] for s in lowest(body["report"], 1)] == [min(segments, key=lambda s: s["confidence"])["index"]]


def test_the_report_names_glossary_terms_met_and_placeholders_kept(tiny_translator):
    from tnmt.documents.report import segment_report
    from tnmt.translate.glossary import glossary_entry
    from tnmt.translate.steering import Steering

    pending = Pending([unit("two %s hundred"), unit("seven")], bytes)
    steering = Steering(glossary=(glossary_entry("seven", "sette", where="test"),))
    report = segment_report(pending.units, pending.translations(tiny_translator, SETTINGS, steering=steering))
    first, second = report["segments"]
    assert first["kept"] == ["%s"] and first["terms"] == [] and "%s" in first["translation"]
    assert second["terms"] == [{"term": "sette", "met": True, "form": "sette"}]
    assert report["summary"]["terms_missed"] == 0


def test_the_report_names_every_segment_that_came_back_as_it_was_with_why():
    """A paragraph of a URL alone comes back as written, and one the model wrote back unchanged too: neither is
    silent (`left`), and a segment without letters ("2024") or translated is not named."""
    from tnmt.documents.report import segment_report
    from tnmt.translate.evidence import Evidence
    from tnmt.translate.translation import Translation

    units = [unit("see https://example.com/a"), unit("https://example.com/a"), unit("Cover"), unit("2024")]
    said = [("vedi https://example.com/a", [5, 6]), ("https://example.com/a", []), ("Cover", [7]), ("2024", [8])]
    # no tokens: the model read nothing of the URL alone
    found = [Translation(text, ids, 0.0, 0.0, evidence=Evidence([], [], 0.9, [])) for text, ids in said]
    report = segment_report(units, found, ["word/document.xml paragraph 3: a field's result"])
    assert report["left"] == [
        "word/document.xml paragraph 3: a field's result",
        "segment 1 ('https://example.com/a'): came back as it was: only strings kept as written (a URL, an address)",
        "segment 2 ('Cover'): came back as it was: the model wrote it back as it was",
    ]
    assert report["summary"]["left"] == 3


def test_an_html_page_keeps_its_markup_and_translates_its_text(tiny_translator):
    from html.parser import HTMLParser

    from tnmt.documents.formats import translate_file

    page = (
        "<!DOCTYPE html><html><head><style>p{}</style></head>"
        "<body><p>two <b>hundred</b>.</p><ul><li>seven</li></ul></body></html>"
    )
    out = translate_file(tiny_translator, page.encode(), "p.html", settings=SETTINGS).decode()
    tags = []

    class Tags(HTMLParser):
        def handle_starttag(self, tag, attrs):
            tags.append(tag)

    Tags().feed(out)
    assert tags == ["html", "head", "style", "body", "p", "b", "ul", "li"] and "<style>p{}</style>" in out


XLIFF = """<?xml version="1.0" encoding="UTF-8"?>
<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">
  <file source-language="en" target-language="it" datatype="plaintext" original="app">
    <body>
      <trans-unit id="1"><source>two <g id="b">hundred</g> and <x id="br"/>five</source></trans-unit>
      <trans-unit id="2"><source>seven</source><target>sette</target></trans-unit>
      <trans-unit id="3" translate="no"><source>nine</source></trans-unit>
    </body>
  </file>
</xliff>
"""


def test_xliff_fills_targets_and_keeps_every_inline_code_once(tiny_translator):
    import xml.etree.ElementTree as ET

    from tnmt.documents.formats import translate_file

    out = translate_file(tiny_translator, XLIFF.encode(), "app.xlf", settings=SETTINGS)
    ns = {"x": "urn:oasis:names:tc:xliff:document:1.2"}
    units = ET.fromstring(out).findall(".//x:trans-unit", ns)
    first = units[0].find("x:target", ns)
    assert first.get("state") == "needs-review-translation"
    assert sorted(c.tag.split("}")[1] for c in first.iter() if c is not first) == ["g", "x"]  # each code once
    assert units[1].find("x:target", ns).text == "sette" and units[2].find("x:target", ns) is None


def test_xliff_with_entities_is_refused_not_expanded():
    from tnmt.documents.xliff import read_xliff

    bomb = b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><xliff>&b;</xliff>'
    with pytest.raises(UserError, match=r"^b\.xlf: declares a DTD: refused \(its entities could expand\)$"):
        read_xliff(bomb, where="b.xlf")
    with pytest.raises(UserError, match=r"^c\.xlf: not an XLIFF 1\.2 file"):
        read_xliff(b"<root/>", where="c.xlf")


def test_office_parts_the_translation_did_not_touch_keep_their_bytes(tiny_translator):
    import io
    import zipfile

    import pptx

    from tnmt.documents.formats import translate_file

    deck = pptx.Presentation()
    deck.slides.add_slide(deck.slide_layouts[1]).shapes.title.text = "two hundred"
    buffer = io.BytesIO()
    deck.save(buffer)
    for name, source, text in (
        ("d.docx", docs.word("two"), "word/document.xml"),
        ("p.pptx", buffer.getvalue(), "ppt/slides/slide1.xml"),
    ):
        before = zipfile.ZipFile(io.BytesIO(source))
        after = zipfile.ZipFile(io.BytesIO(translate_file(tiny_translator, source, name, settings=SETTINGS)))
        assert sorted(after.namelist()) == sorted(before.namelist())  # in the order the library writes them
        assert [n for n in before.namelist() if before.read(n) != after.read(n)] == [text]  # only the text's part


def test_content_types_and_relationships_in_another_order_keep_their_bytes(tiny_translator):
    """Word and PowerPoint list content types and relationships as sets; python-docx writes its content types
    anew, sorted, so a file that lists them in another order (Word's own does) gets its bytes back, not a copy
    sorted; a part whose entries differ is not one of them (the test above: only the text's part changes)."""
    import io
    import re
    import zipfile

    from tnmt.documents.formats import translate_file

    source = zipfile.ZipFile(io.BytesIO(docs.word("two")))
    types, rels = source.read("[Content_Types].xml"), source.read("_rels/.rels")

    def reversed_children(xml: bytes) -> bytes:
        head, body, tail = re.match(rb"(.*?<(?:Types|Relationships)[^>]*>)(.*)(</[^>]+>\s*)$", xml, re.S).groups()
        children = re.findall(rb"<[^>]+/>", body)
        return head + b"\r\n" + b"".join(reversed(children)) + tail

    reordered = docs.edited(
        docs.word("two"), **{"[Content_Types]_xml": reversed_children(types), "_rels__rels": reversed_children(rels)}
    )
    after = zipfile.ZipFile(io.BytesIO(translate_file(tiny_translator, reordered, "d.docx", settings=SETTINGS)))
    assert after.read("[Content_Types].xml") == reversed_children(types) != types
    assert after.read("_rels/.rels") == reversed_children(rels)
