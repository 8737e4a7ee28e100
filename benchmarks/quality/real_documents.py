"""Does every paragraph of a real office document come back translated? Coverage on files tnmt did not make (issue 80).

    python -m benchmarks.quality.real_documents --checkpoint CKPT --corpus DIR [--out FILE]

DIR holds .docx, .pptx and .odt files from outside the project (the note names where they came from: the test files
of python-docx, python-pptx and odfpy, written by Word, PowerPoint, OpenOffice and LibreOffice; they are not
committed). Each goes through `tnmt.documents.formats` with the checkpoint's model, as `tnmt translate --file`
does. Then the paragraphs of the file and of its translation are read straight from their XML parts (every part
that holds text: Word's body, headers, footers, footnotes, endnotes and comments; PowerPoint's slides and notes
pages; OpenDocument's content.xml and styles.xml), each paragraph's own text (a text box's paragraphs inside it are
paragraphs of their own): a paragraph with words (two letters in a row) comes back translated when its text
changed. Per format: files, files refused (a 4xx-style one-line error, with it), paragraphs with words, the share
translated, and each one that came back unchanged, with whether the report's `left` names its part.
"""

import argparse
import io
import json
import re
import time
import zipfile
from collections import Counter
from pathlib import Path

from lxml import etree

from benchmarks.common.host import describe
from tnmt.documents.formats import read_file
from tnmt.errors import UserError
from tnmt.translate.translator import Translator

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
A = "http://schemas.openxmlformats.org/drawingml/2006/main"
TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
WORDS = re.compile(r"[^\W\d_]{2}")
PARTS = {  # the archive entries that hold text, the paragraph element, and the text elements
    ".docx": (
        re.compile(r"word/(document|header\d*|footer\d*|footnotes|endnotes|comments)\.xml$"),
        f"{{{W}}}p",
        (f"{{{W}}}t",),
    ),
    ".pptx": (re.compile(r"ppt/(slides/slide|notesSlides/notesSlide)\d+\.xml$"), f"{{{A}}}p", (f"{{{A}}}t",)),
    ".odt": (re.compile(r"(content|styles)\.xml$"), (f"{{{TEXT}}}p", f"{{{TEXT}}}h"), None),
}


def paragraphs(data: bytes, suffix: str) -> list[tuple[str, str]]:
    """(part, own text) of every paragraph, in document order."""
    pattern, tags, texts = PARTS[suffix]
    tags = (tags,) if isinstance(tags, str) else tags
    archive, found = zipfile.ZipFile(io.BytesIO(data)), []
    for name in sorted(n for n in archive.namelist() if pattern.search(n)):
        root = etree.fromstring(archive.read(name), etree.XMLParser(resolve_entities=False, huge_tree=False))
        for p in root.iter(*tags):
            found.append((name, _own_text(p, tags, texts)))
    return found


def _own_text(p: etree._Element, tags: tuple[str, ...], texts: tuple[str, ...] | None) -> str:
    """The paragraph's text, less the paragraphs nested in it (a text box's, a note's)."""
    out: list[str] = []

    def walk(node: etree._Element, top: bool) -> None:
        if not top and node.tag in tags:
            return
        if texts is None or node.tag in texts:
            out.append(node.text or "")
        for child in node:
            walk(child, False)
            if texts is None:
                out.append(child.tail or "")

    walk(p, True)
    return "".join(out)


def measure(translator: Translator, path: Path) -> dict:
    """One file: refused (with why), or its paragraphs with words and those that came back unchanged."""
    data = path.read_bytes()
    try:
        pending = read_file(data, path.name)
        out = pending.write(pending.translations(translator))
    except UserError as error:
        return {"file": path.name, "refused": str(error)}
    before, after = paragraphs(data, path.suffix), paragraphs(out, path.suffix)
    words = sum(bool(WORDS.search(text)) for _, text in before)
    if [p for p, _ in before] != [p for p, _ in after]:  # a paragraph lost or added: the file is not comparable
        return {"file": path.name, "paragraphs": words, "unchanged": [], "mismatch": len(after) - len(before)}
    unchanged = [
        {"part": part, "text": text[:120], "named": any(line.startswith(f"{part} ") for line in pending.left)}
        for (part, text), (_, new) in zip(before, after, strict=True)
        if WORDS.search(text) and text == new
    ]
    return {"file": path.name, "paragraphs": words, "unchanged": unchanged}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/real_documents.json"))
    args = parser.parse_args()
    translator = Translator.from_checkpoint(args.checkpoint)
    files = sorted(p for p in args.corpus.rglob("*") if p.suffix in PARTS)
    start, results = time.monotonic(), [measure(translator, path) for path in files]
    summary = {}
    for suffix in PARTS:
        mine = [r for r in results if r["file"].endswith(suffix)]
        read = [r for r in mine if "refused" not in r]
        total = sum(r["paragraphs"] for r in read)
        unchanged = sum(len(r["unchanged"]) for r in read)
        summary[suffix] = {
            "files": len(mine),
            "refused": len(mine) - len(read),
            "mismatched": sum("mismatch" in r for r in read),
            "paragraphs_with_words": total,
            "translated_share": round(1 - unchanged / total, 4) if total else None,
            "unchanged_named_in_left": sum(u["named"] for r in read for u in r["unchanged"]),
            "refusals": dict(Counter(r["refused"].split(": ", 1)[-1][:60] for r in mine if "refused" in r)),
        }
    out = {"host": describe(), "checkpoint": str(args.checkpoint), "seconds": round(time.monotonic() - start, 1)}
    out |= {"summary": summary, "files": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_suffix(".json.part")
    partial.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    partial.replace(args.out)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
