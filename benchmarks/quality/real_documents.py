"""Does every paragraph of a real office document come back translated? Coverage on files tnmt did not make (issue 80).

    python -m benchmarks.quality.real_documents --checkpoint CKPT --corpus DIR [--office] [--out FILE]

DIR holds .docx, .pptx, .odt and .odp files from outside the project (the note names where they came from: the test
files of python-docx, python-pptx and odfpy, written by Word, PowerPoint, OpenOffice and LibreOffice; they are not
committed). Each goes through `tnmt.documents.formats` with the checkpoint's model, as `tnmt translate --file` does.
Then the paragraphs of the file and of its translation are read straight from their XML parts (every part that holds
text: Word's body, headers, footers, footnotes, endnotes and comments; PowerPoint's slides and notes pages;
OpenDocument's content.xml and styles.xml, not an embedded object's, which is kept byte for byte), each paragraph's
own text (a text box's paragraphs inside it are paragraphs of their own): a paragraph with words (two letters in a
row) comes back translated when its text changed. Per format: files, files refused (a 4xx-style one-line error, with
it), paragraphs with words, the share translated, and each one that came back unchanged, with whether the report's
`left` names its part; the archive entries without text that came back with other bytes (`rewritten`: what the
format's library re-serialises on save). With `--office`, Debian's LibreOffice converts every input and every
translation to PDF (headless, in batches), and each output whose input opens must open (`outputs_open` of
`inputs_open`).
"""

import argparse
import io
import json
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from collections import Counter
from pathlib import Path

from lxml import etree

from benchmarks.common.host import describe
from tnmt.documents.formats import read_file
from tnmt.documents.report import segment_report
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
    ".odt": (re.compile(r"^(content|styles)\.xml$"), (f"{{{TEXT}}}p", f"{{{TEXT}}}h"), None),
    ".odp": (re.compile(r"^(content|styles)\.xml$"), (f"{{{TEXT}}}p", f"{{{TEXT}}}h"), None),
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


def rewritten(data: bytes, out: bytes, suffix: str) -> list[str]:
    """The entries of the archive that hold no text (not a part of `PARTS`) yet came back with other bytes."""
    before, after = zipfile.ZipFile(io.BytesIO(data)), zipfile.ZipFile(io.BytesIO(out))
    names = set(after.namelist())
    return [
        name
        for name in before.namelist()
        if not PARTS[suffix][0].search(name) and name in names and before.read(name) != after.read(name)
    ]


def office_opens(paths: list[Path], work: Path) -> set[Path]:
    """The `paths` Debian's LibreOffice converts to PDF (headless, 20 files a call, one profile; each copied under
    a name of its own first, so that a.docx and a.pptx do not make one a.pdf)."""
    copies, made = work / "files", work / "pdf"
    copies.mkdir(parents=True)
    named = {copies / f"{k:04d}{path.suffix}": path for k, path in enumerate(paths)}
    for copy, path in named.items():
        shutil.copyfile(path, copy)
    profile = f"-env:UserInstallation=file://{work / 'profile'}"
    batch = list(named)
    for at in range(0, len(batch), 20):
        command = ["soffice", "--headless", profile, "--convert-to", "pdf", "--outdir", str(made)]
        subprocess.run([*command, *map(str, batch[at : at + 20])], capture_output=True, timeout=900, check=False)
    return {path for copy, path in named.items() if (made / f"{copy.stem}.pdf").is_file()}


def _names(line: str, part: str, text: str) -> bool:
    """Whether a `left` line names a paragraph: the reader's name its part ("content.xml paragraph 5: ..."), the
    report's a segment that came back as it was by its text ("segment 3 ('Cover'): ...")."""
    return line.startswith(f"{part} ") or (line.startswith("segment ") and text.strip()[:30] in line)


def measure(translator: Translator, path: Path, keep: Path) -> dict:
    """One file: refused (with why), or its paragraphs with words and those that came back unchanged (its
    translation written to `keep`)."""
    data = path.read_bytes()
    try:
        pending = read_file(data, path.name)
        found = pending.translations(translator)
        out = pending.write(found)
    except UserError as error:
        return {"file": path.name, "refused": str(error)}
    keep.write_bytes(out)
    before, after = paragraphs(data, path.suffix), paragraphs(out, path.suffix)
    words = sum(bool(WORDS.search(text)) for _, text in before)
    if [p for p, _ in before] != [p for p, _ in after]:  # a paragraph lost or added: the file is not comparable
        return {"file": path.name, "paragraphs": words, "unchanged": [], "mismatch": len(after) - len(before)}
    left = segment_report(pending.units, found, pending.left)["left"]  # the reader's, then unchanged segments
    unchanged = [
        {"part": part, "text": text[:120], "named": any(_names(line, part, text) for line in left)}
        for (part, text), (_, new) in zip(before, after, strict=True)
        if WORDS.search(text) and text == new
    ]
    return {
        "file": path.name,
        "paragraphs": words,
        "unchanged": unchanged,
        "rewritten": rewritten(data, out, path.suffix),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/real_documents.json"))
    parser.add_argument("--office", action="store_true", help="LibreOffice converts inputs and outputs to PDF")
    args = parser.parse_args()
    if args.office and shutil.which("soffice") is None:
        raise SystemExit("--office: soffice (LibreOffice) is not installed")
    translator = Translator.from_checkpoint(args.checkpoint)
    files = sorted(p for p in args.corpus.rglob("*") if p.suffix in PARTS)
    work = Path(tempfile.mkdtemp(prefix="real_documents_"))
    outputs = [work / "out" / f"{k:04d}{path.suffix}" for k, path in enumerate(files)]
    outputs[0].parent.mkdir()
    start = time.monotonic()
    results = [measure(translator, path, out) for path, out in zip(files, outputs, strict=True)]
    if args.office:
        opened_in = office_opens(files, work / "in")
        opened_out = office_opens([out for out in outputs if out.exists()], work / "translated")
        for path, out, r in zip(files, outputs, results, strict=True):
            r["input_opens"], r["output_opens"] = path in opened_in, out in opened_out
    shutil.rmtree(work)
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
            "rewritten": dict(Counter(re.sub(r"\d+", "N", n) for r in read for n in r["rewritten"])),
        }
        if args.office:
            opens = [r for r in read if r["input_opens"]]
            summary[suffix] |= {"inputs_open": len(opens), "outputs_open": sum(r["output_opens"] for r in opens)}
    out = {"host": describe(), "checkpoint": str(args.checkpoint), "seconds": round(time.monotonic() - start, 1)}
    out |= {"summary": summary, "files": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_suffix(".json.part")
    partial.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    partial.replace(args.out)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
