"""Formatting on the right words in documents: a bold word's translation bold, format by format (issue 66).

    python -m benchmarks.quality.documents --checkpoint /work/outputs/base45/best [--limit 1000] [--seed 0]
        [--formats docx,odt,...]

The markup benchmark's dictionary test (benchmarks/quality/markup.py), in documents: the English test captions
of test_2016_flickr (`TNMT_DATA_DIR` or ../shared/data/multi30k beside the repository) with a dictionary word
whose translation the model's plain output holds exactly once (`markup.dictionary_hits`) get that word bold, one
caption per paragraph (cue, message, unit), in a document of each format with inline formatting: Word, OpenDocument
text and presentations, PowerPoint, EPUB (pages of a hundred paragraphs), HTML, Markdown, XLIFF (a `<g>` code) and
WebVTT (a `<b>` tag), each built with the format's own library (EPUB's with zipfile: `epub_book`). Each document
goes through `tnmt.documents.formats.translate_file` and is read back with the same library: the bold words of
each paragraph must be exactly the German word (`held_share`, the target: >= 0.90; `contains_share`: it is among
them; `emptied_share`: the bold came back without words). The seconds each format took are beside those of the
same sentences as plain text. Writes benchmarks/results/documents_bold.json.
"""

import argparse
import html
import io
import json
import random
import re
import sys
import time
import zipfile
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path

from benchmarks.quality.markup import _bare, data_dir, dictionary_hits, read

Part = tuple[str, str, str]  # a paragraph: the text before the bold word, the word, the text after it


def parts(sources: list[str], hits: list[tuple[int, int, str]]) -> list[Part]:
    """Each hit's caption cut around its word (the word's punctuation outside the bold)."""
    out = []
    for k, i, _ in hits:
        words = sources[k].split()
        core = words[i].rstrip(".,;:!?")
        before = " ".join(words[:i]) + (" " if i else "")
        after = words[i][len(core) :] + ("" if i == len(words) - 1 else " " + " ".join(words[i + 1 :]))
        out.append((before, core, after))
    return out


def build_docx(paragraphs: list[Part]) -> bytes:
    import docx

    document = docx.Document()
    for before, word, after in paragraphs:
        paragraph = document.add_paragraph(before)
        paragraph.add_run(word).bold = True
        if after:
            paragraph.add_run(after)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def bold_docx(data: bytes) -> list[list[str]]:
    import docx

    paragraphs = docx.Document(io.BytesIO(data)).paragraphs
    return [" ".join(run.text for run in p.runs if run.bold).split() for p in paragraphs]


def build_pptx(paragraphs: list[Part]) -> bytes:
    import pptx
    from pptx.util import Inches

    presentation = pptx.Presentation()
    for at in range(0, len(paragraphs), 20):  # 20 paragraphs a slide
        slide = presentation.slides.add_slide(presentation.slide_layouts[6])
        frame = slide.shapes.add_textbox(0, 0, Inches(9), Inches(7)).text_frame
        for n, (before, word, after) in enumerate(paragraphs[at : at + 20]):
            paragraph = frame.paragraphs[0] if n == 0 else frame.add_paragraph()
            for text, bold in ((before, False), (word, True), (after, False)):
                if text:
                    run = paragraph.add_run()
                    run.text, run.font.bold = text, bold or None
    buffer = io.BytesIO()
    presentation.save(buffer)
    return buffer.getvalue()


def bold_pptx(data: bytes) -> list[list[str]]:
    import pptx

    found = []
    for slide in pptx.Presentation(io.BytesIO(data)).slides:
        for shape in slide.shapes:
            for p in shape.text_frame.paragraphs:
                found.append(" ".join(run.text for run in p.runs if run.font.bold).split())
    return found


def build_odt(paragraphs: list[Part]) -> bytes:
    from odf.opendocument import OpenDocumentText
    from odf.style import Style, TextProperties
    from odf.text import P, Span

    document = OpenDocumentText()
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    document.automaticstyles.addElement(bold)
    for before, word, after in paragraphs:
        paragraph = P(text=before)
        paragraph.addElement(Span(stylename=bold, text=word))
        paragraph.addText(after)
        document.text.addElement(paragraph)
    buffer = io.BytesIO()
    document.write(buffer)
    return buffer.getvalue()


def bold_odt(data: bytes, body: str = "text") -> list[list[str]]:  # body: the document's "text" or "presentation"
    from odf import teletype
    from odf.opendocument import load
    from odf.text import P, Span

    found = []
    for paragraph in getattr(load(io.BytesIO(data)), body).getElementsByType(P):
        spans = [s for s in paragraph.getElementsByType(Span) if s.getAttribute("stylename") == "Bold"]
        found.append(" ".join(teletype.extractText(s) for s in spans).split())
    return found


def build_odp(paragraphs: list[Part]) -> bytes:  # a slide of ten paragraphs in a text frame, as odt's spans
    from odf.draw import Frame, Page, TextBox
    from odf.opendocument import OpenDocumentPresentation
    from odf.style import MasterPage, PageLayout, Style, TextProperties
    from odf.text import P, Span

    document = OpenDocumentPresentation()
    layout = PageLayout(name="Layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="Master", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    bold = Style(name="Bold", family="text")
    bold.addElement(TextProperties(fontweight="bold"))
    document.automaticstyles.addElement(bold)
    for at in range(0, len(paragraphs), 10):
        page = Page(masterpagename=master)
        box = TextBox()
        frame = Frame(width="24cm", height="16cm", x="1cm", y="1cm")
        frame.addElement(box)
        page.addElement(frame)
        for before, word, after in paragraphs[at : at + 10]:
            paragraph = P(text=before)
            paragraph.addElement(Span(stylename=bold, text=word))
            paragraph.addText(after)
            box.addElement(paragraph)
        document.presentation.addElement(page)
    buffer = io.BytesIO()
    document.write(buffer)
    return buffer.getvalue()


def bold_odp(data: bytes) -> list[list[str]]:
    return bold_odt(data, body="presentation")


def epub_book(pages: list[str], *, title: str = "Captions", extra: tuple[tuple[str, str, bytes], ...] = ()) -> bytes:
    """An EPUB 3 book of XHTML pages (`pages`: each one's body), a navigation document listing them, its
    `title`, and `extra` files of the manifest (name, media type, bytes), as a book's writer lays it out
    (the `mimetype` first and stored, everything under OEBPS/)."""
    page = '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml"'
    page += (
        ' xmlns:epub="http://www.idpf.org/2007/ops"><head><title>{title}</title></head>\n<body>\n{body}</body></html>\n'
    )
    items = [f'<item id="p{k}" href="p{k}.xhtml" media-type="application/xhtml+xml"/>' for k in range(len(pages))]
    items += [f'<item id="x{k}" href="{name}" media-type="{media}"/>' for k, (name, media, _) in enumerate(extra)]
    links = "".join(f'<li><a href="p{k}.xhtml">Part {k + 1}</a></li>' for k in range(len(pages)))
    nav = f'<nav epub:type="toc"><ol>{links}</ol></nav>\n'
    package = f"""<?xml version="1.0" encoding="utf-8"?>
<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">
  <metadata xmlns:dc="http://purl.org/dc/elements/1.1/">
    <dc:identifier id="id">urn:uuid:00000000-0000-0000-0000-000000000000</dc:identifier>
    <dc:title>{html.escape(title, quote=False)}</dc:title>
    <dc:language>en</dc:language>
  </metadata>
  <manifest>
    <item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>
    {"".join(items)}
  </manifest>
  <spine>{"".join(f'<itemref idref="p{k}"/>' for k in range(len(pages)))}</spine>
</package>
"""
    container = """<?xml version="1.0"?>
<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">
  <rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles>
</container>
"""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        book.writestr("META-INF/container.xml", container)
        book.writestr("OEBPS/content.opf", package)
        book.writestr("OEBPS/nav.xhtml", page.format(title="Contents", body=nav))
        for k, body in enumerate(pages):
            book.writestr(f"OEBPS/p{k}.xhtml", page.format(title=f"Part {k + 1}", body=body))
        for name, _, data in extra:
            book.writestr(f"OEBPS/{name}", data)
    return buffer.getvalue()


def build_epub(paragraphs: list[Part]) -> bytes:  # pages of a hundred paragraphs, each as in the HTML page
    e = html.escape
    return epub_book(
        [
            "".join(f"<p>{e(b)}<b>{e(w)}</b>{e(a)}</p>\n" for b, w, a in paragraphs[at : at + 100])
            for at in range(0, len(paragraphs), 100)
        ]
    )


def bold_epub(data: bytes) -> list[list[str]]:  # the pages' paragraphs in spine order
    book = zipfile.ZipFile(io.BytesIO(data))
    pages = sorted((n for n in book.namelist() if re.fullmatch(r"OEBPS/p\d+\.xhtml", n)), key=lambda n: int(n[7:-6]))
    return [words for name in pages for words in bold_html(book.read(name))]


def build_html(paragraphs: list[Part]) -> bytes:
    e = html.escape
    body = "".join(f"<p>{e(b)}<b>{e(w)}</b>{e(a)}</p>\n" for b, w, a in paragraphs)
    return f"<!DOCTYPE html><html><body>\n{body}</body></html>\n".encode()


def bold_html(data: bytes) -> list[list[str]]:
    class Bold(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.found: list[list[str]] = []
            self.inside = 0

        def handle_starttag(self, tag, attrs) -> None:
            if tag == "p":
                self.found.append([])
            self.inside += tag == "b"

        def handle_endtag(self, tag) -> None:
            self.inside -= tag == "b" and self.inside > 0

        def handle_data(self, data) -> None:
            if self.inside and self.found:
                self.found[-1] += data.split()

    parser = Bold()
    parser.feed(data.decode())
    return parser.found


def build_md(paragraphs: list[Part]) -> bytes:
    return "".join(f"{b}**{w}**{a}\n\n" for b, w, a in paragraphs).encode()


def bold_md(data: bytes) -> list[list[str]]:
    blocks = [block for block in data.decode().split("\n\n") if block.strip()]
    return [" ".join(re.findall(r"\*\*(.+?)\*\*", block, flags=re.S)).split() for block in blocks]


XLIFF = '<?xml version="1.0" encoding="UTF-8"?>\n<xliff version="1.2" xmlns="urn:oasis:names:tc:xliff:document:1.2">'
XLIFF += '<file source-language="en" target-language="de" datatype="plaintext" original="captions"><body>\n{}'
XLIFF += "</body></file></xliff>\n"


def build_xliff(paragraphs: list[Part]) -> bytes:
    e = html.escape
    units = "".join(
        f'<trans-unit id="{k}"><source>{e(b)}<g id="b{k}" ctype="bold">{e(w)}</g>{e(a)}</source></trans-unit>\n'
        for k, (b, w, a) in enumerate(paragraphs)
    )
    return XLIFF.format(units).encode()


def bold_xliff(data: bytes) -> list[list[str]]:
    """Each unit's bold words: its target's (its source's when it has no target yet)."""
    from defusedxml import ElementTree

    ns = "{urn:oasis:names:tc:xliff:document:1.2}"
    found = []
    for unit in ElementTree.fromstring(data).iter(f"{ns}trans-unit"):
        text = unit.find(f"{ns}target") if unit.find(f"{ns}target") is not None else unit.find(f"{ns}source")
        found.append(" ".join("".join(g.itertext()) for g in text.iter(f"{ns}g")).split())
    return found


def build_vtt(paragraphs: list[Part]) -> bytes:
    e = html.escape
    cues = "".join(
        f"00:{k // 60:02d}:{k % 60:02d}.000 --> 00:{k // 60:02d}:{k % 60:02d}.900\n{e(b)}<b>{e(w)}</b>{e(a)}\n\n"
        for k, (b, w, a) in enumerate(paragraphs)
    )
    return f"WEBVTT\n\n{cues}".encode()


def bold_vtt(data: bytes) -> list[list[str]]:
    cues = data.decode().split("\n\n")[1:]
    return [" ".join(re.findall(r"<b>(.*?)</b>", cue, flags=re.S)).split() for cue in cues if cue.strip()]


FORMATS: dict[str, tuple[Callable[[list[Part]], bytes], Callable[[bytes], list[list[str]]]]] = {
    "docx": (build_docx, bold_docx),
    "odt": (build_odt, bold_odt),
    "pptx": (build_pptx, bold_pptx),
    "odp": (build_odp, bold_odp),
    "epub": (build_epub, bold_epub),
    "html": (build_html, bold_html),
    "md": (build_md, bold_md),
    "xlf": (build_xliff, bold_xliff),
    "vtt": (build_vtt, bold_vtt),
}


def judge(bold: list[list[str]], expected: list[str]) -> dict:
    """How often each paragraph's bold words are exactly its German word (see the module docstring)."""
    if len(bold) != len(expected):
        raise SystemExit(f"{len(bold)} paragraphs came back for {len(expected)}")
    held = sum([_bare(w) for w in words] == [_bare(e)] for words, e in zip(bold, expected, strict=True))
    contains = sum(_bare(e) in [_bare(w) for w in words] for words, e in zip(bold, expected, strict=True))
    emptied = sum(not words for words in bold)
    n = max(1, len(expected))
    shares = {"held_share": held, "contains_share": contains, "emptied_share": emptied}
    return {name: round(count / n, 4) for name, count in shares.items()}


def run(translator, sources: list[str], *, seed: int, formats: tuple[str, ...] = tuple(FORMATS)) -> dict:
    """Each format of `formats` (`FORMATS`' names) through translate_file (see the module docstring)."""
    from tnmt.documents.formats import translate_file

    plain = translator.translate(sources)
    hits = dictionary_hits(sources, plain, random.Random(seed))
    paragraphs = parts(sources, hits)
    expected = [german for _, _, german in hits]
    start = time.perf_counter()
    translator.translate([b + w + a for b, w, a in paragraphs])
    result = {"cases": len(hits), "plain_seconds": round(time.perf_counter() - start, 2), "formats": {}}
    for name in formats:
        build, bold = FORMATS[name]
        data = build(paragraphs)
        start = time.perf_counter()
        out = translate_file(translator, data, f"captions.{name}")
        seconds = time.perf_counter() - start
        result["formats"][name] = {**judge(bold(out), expected), "seconds": round(seconds, 2)}
        print(name, result["formats"][name], flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--limit", type=int, default=0, help="the first N captions only (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--formats", default=",".join(FORMATS), help="the formats to run, comma-separated")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "documents_bold.json"))
    args = parser.parse_args()

    import torch

    from benchmarks.common.host import describe
    from tnmt.translate.translator import Translator

    torch.set_num_threads(args.threads)
    translator = Translator.from_checkpoint(args.checkpoint)
    sources = read(data_dir() / "test_2016_flickr.en.gz")
    sources = sources[: args.limit] if args.limit else sources
    command = " ".join(["python -m benchmarks.quality.documents", *sys.argv[1:]])
    result = {"command": command, "host": describe(), "checkpoint": args.checkpoint, "seed": args.seed}
    result["threads"] = args.threads
    formats = tuple(args.formats.split(","))
    if unknown := sorted(set(formats) - set(FORMATS)):
        raise SystemExit(f"--formats: {', '.join(unknown)}: not one of {', '.join(FORMATS)}")
    result |= run(translator, sources, seed=args.seed, formats=formats)
    Path(args.out).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "host"}, indent=1))


if __name__ == "__main__":
    main()
