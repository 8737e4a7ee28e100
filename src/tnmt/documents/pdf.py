"""PDF files: each block of text replaced in place by its translation, the rest of each page kept.

A PDF has no paragraphs, only glyphs placed on a page; PyMuPDF (the `pdf` extra: `pip install 'tnmt[pdf]'`;
AGPL-3.0, which is why it is not a core dependency) reads them back as blocks of lines of spans, each span with its
font, size, colour and flags. A block is one unit: its lines joined (a word hyphenated across a line break joined
again), its bold and italic spans as `<b>`/`<i>` where they differ from the block's commonest style, so tag transfer
carries them to the translated words. Writing, the block's glyphs are redacted (nothing else: pictures and vector
graphics under and around it stay) and the translation laid out in the same rectangle by PyMuPDF's HTML layout
(its `Story`, as `insert_htmlbox` uses it) in the block's commonest size and colour and the nearest of the serif,
sans-serif and monospace families, shrunk until it fits when it is longer than the source. Links are put back where
they were (redaction drops them). Kept as they were, and named in the report's `left` with why: rotated or
vertical text, and pages with no text to read (a scanned page is a picture). Every other block is rewritten in
place, so no page needs another format. A page costs in proportion to its blocks (`_lay_out`, `_bands`).

pypdf and pdfminer.six (BSD and MIT) were weighed: pdfminer.six reads the same blocks but writes nothing, and pypdf
can neither remove a text's glyphs from a content stream nor lay out a paragraph, so neither can replace a block.
"""

import html
import io
from collections import Counter
from collections.abc import Sequence
from typing import Any

from tnmt.documents.units import Pending, marked
from tnmt.errors import UserError

KIND = "a PDF document"
_BOLD, _ITALIC, _SERIF, _MONO = 16, 2, 4, 8  # PyMuPDF's span flags
_FAMILIES = (
    ("monospace", ("courier", "mono", "consol", "code")),
    ("sans-serif", ("helv", "arial", "sans", "verdana", "calibri", "segoe", "tahoma")),
    ("serif", ("times", "serif", "roman", "georgia", "garamond", "cambria", "tiro", "minion")),
)
_CSS = "* {{margin: 0; padding: 0; line-height: 1.15; font-size: {size:.1f}pt; color: #{color:06x};"
_CSS += " font-family: {family}}}"
MOST_REDACTIONS = 64  # per page: _bands says why


def _pymupdf() -> Any:
    try:
        import pymupdf
    except ImportError:
        raise UserError(
            "PDF files need PyMuPDF: pip install 'tnmt[pdf]' (AGPL-3.0, so not installed by default)"
        ) from None
    return pymupdf


def _style(span: dict[str, Any]) -> tuple[bool, bool]:
    return bool(span["flags"] & _BOLD), bool(span["flags"] & _ITALIC)


def _fragment(lines: Sequence[dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    """A block's lines as one inline-markup fragment, and its commonest span (by characters: size, colour, font)."""
    spans = [span for line in lines for span in line["spans"] if span["text"]]
    weight: Counter[tuple[bool, bool]] = Counter()
    for span in spans:
        weight[_style(span)] += len(span["text"])
    common = weight.most_common(1)[0][0]
    main = max(spans, key=lambda span: (_style(span) == common, len(span["text"])))
    pieces: list[str] = []
    for k, line in enumerate(lines):
        for span in line["spans"]:
            text = html.escape(span["text"], quote=False)
            bold, italic = _style(span)
            if italic and not common[1]:
                text = f"<i>{text}</i>"
            if bold and not common[0]:
                text = f"<b>{text}</b>"
            pieces.append(text)
        if k < len(lines) - 1:
            pieces.append(_joint(pieces))
    return "".join(pieces).strip(), main


def _joint(pieces: list[str]) -> str:
    """What joins a line to the next: nothing after a hyphenated word (its hyphen dropped), else a space."""
    last = pieces[-1] if pieces else ""
    if last.endswith("-") and len(last) > 1 and last[-2].isalpha():
        pieces[-1] = last[:-1]
        return ""
    return " "


def _family(span: dict[str, Any]) -> str:
    """The CSS family nearest the span's font: by its name where it says (the flags of an embedded subset often
    call Helvetica serifed), else by its flags."""
    name = span["font"].lower()
    for family, words in _FAMILIES:
        if any(word in name for word in words):
            return family
    if span["flags"] & _MONO:
        return "monospace"
    return "serif" if span["flags"] & _SERIF else "sans-serif"


def _overlap(a: Sequence[float], b: Sequence[float]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _bands(rects: list[tuple[float, ...]], kept: list[tuple[float, ...]]) -> list[tuple[float, ...]]:
    """The rectangles to redact for `rects`: taken top to bottom in at most about `MOST_REDACTIONS` bands, each
    the union of its blocks; a band that would touch a block kept as it was (`kept`) halved until it does not, down
    to single blocks. Why: MuPDF tests each glyph of the page against each redaction, so a page of thousands of
    blocks redacted one by one costs the square of its blocks."""
    order = sorted(rects, key=lambda r: (r[1], r[0]))
    out: list[tuple[float, ...]] = []

    def add(group: list[tuple[float, ...]]) -> None:
        union = tuple(f(r[i] for r in group) for i, f in enumerate((min, min, max, max)))
        if len(group) == 1 or not any(_overlap(union, k) for k in kept):
            out.append(union)
        else:
            add(group[: len(group) // 2])
            add(group[len(group) // 2 :])

    size = -(-len(order) // MOST_REDACTIONS)
    for at in range(0, len(order), size):
        add(order[at : at + size])
    return out


def _remove_text(pymupdf: Any, page: Any, rects: list[tuple[float, ...]]) -> None:
    """The glyphs touching each rectangle removed from `page`, its pictures and vector graphics kept: MuPDF's
    redaction, through its own binding (`pymupdf.mupdf`). Why not `add_redact_annot` and `apply_redactions`:
    PyMuPDF names each annotation by searching a list of the page's names for a free one, and loads every one again
    to apply them, so a page of a thousand blocks took many seconds (cubic in its blocks)."""
    mupdf = pymupdf.mupdf
    low = mupdf.pdf_page_from_fz_page(page.this)
    for x0, y0, x1, y1 in rects:
        mupdf.pdf_set_annot_rect(mupdf.pdf_create_annot(low, mupdf.PDF_ANNOT_REDACT), mupdf.FzRect(x0, y0, x1, y1))
    options = mupdf.PdfRedactOptions()
    options.black_boxes, options.text = 0, mupdf.PDF_REDACT_TEXT_REMOVE
    options.image_method, options.line_art = mupdf.PDF_REDACT_IMAGE_NONE, mupdf.PDF_REDACT_LINE_ART_NONE
    mupdf.pdf_redact_page(low.doc(), low, options)  # it deletes the redaction annotations it applied


def _lay_out(pymupdf: Any, page: Any, placed: list[tuple[tuple[float, ...], str, dict[str, Any]]]) -> None:
    """Each (rectangle, translated fragment, commonest span) laid out in its rectangle on `page`, shrunk until it
    fits: every block drawn on one scratch page of the page's size, which is then put on the page once.

    Why not `insert_htmlbox` per block: each call puts a page of its own on the target, and each such put rescans
    every resource the target holds, the earlier blocks' among them; a page of a thousand blocks took minutes."""
    scratch = io.BytesIO()
    writer = pymupdf.DocumentWriter(scratch)
    device = writer.begin_page(page.rect)
    no_overflow = pymupdf.mupdf.FZ_PLACE_STORY_FLAG_NO_OVERFLOW  # a word wider than the box shrinks the text
    for rect, text, main in placed:
        box = pymupdf.Rect(rect)
        css = _CSS.format(size=main["size"], color=main["color"], family=_family(main))
        story = pymupdf.Story(html=text, user_css="body {margin: 1px}" + css)
        # laid out in a rectangle of the block's shape grown until the text fits, then drawn scaled back down
        fit = story.fit_scale(pymupdf.Rect(0, 0, box.width, box.height), scale_min=1, flags=no_overflow)
        story.reset()
        story.place(fit.rect, flags=no_overflow)
        scale = 1 / fit.parameter
        story.draw(device, pymupdf.Matrix(scale, 0, 0, scale, box.x0, box.y0))
    writer.end_page()
    writer.close()
    page.show_pdf_page(page.rect, pymupdf.open("pdf", scratch.getvalue()), 0)


def read_pdf(data: bytes, *, where: str) -> Pending:
    """A PDF waiting for its text blocks' translations (the module docstring says what is replaced and kept).

    Raises:
        UserError: PyMuPDF is not installed, the file is not a PDF, or it is encrypted.
    """
    pymupdf = _pymupdf()
    try:
        document = pymupdf.open(stream=data, filetype="pdf")
    except (RuntimeError, ValueError) as error:  # PyMuPDF's FileDataError is a RuntimeError
        raise UserError(f"{where}: not {KIND} ({' '.join(str(error).split())})") from None
    if document.needs_pass or document.is_encrypted:
        raise UserError(f"{where}: the PDF is encrypted: tnmt cannot rewrite it")
    blocks: list[tuple[int, tuple[float, ...], dict[str, Any]]] = []  # (page, rectangle, commonest span)
    kept: dict[int, list[tuple[float, ...]]] = {}  # page -> the rectangles of its text blocks kept as they were
    fragments: list[str] = []
    left: list[str] = []
    for number, page in enumerate(document, start=1):
        found = page.get_text("dict", flags=pymupdf.TEXTFLAGS_TEXT)["blocks"]
        text_blocks = [
            b for b in found if b["type"] == 0 and any(s["text"].strip() for ln in b["lines"] for s in ln["spans"])
        ]
        if not text_blocks:
            left.append(f"page {number}: no text to read (a scanned page is a picture): kept as it was")
        for k, block in enumerate(text_blocks, start=1):
            fragment, main = _fragment(block["lines"])
            rotated = any(tuple(line["dir"]) != (1.0, 0.0) for line in block["lines"])
            if rotated:
                left.append(f"page {number} block {k}: rotated or vertical text: kept as it was")
            if rotated or not any(ch.isalpha() for ch in fragment):  # numbers and marks alone: nothing to translate
                kept.setdefault(number - 1, []).append(tuple(block["bbox"]))
                continue
            blocks.append((number - 1, tuple(block["bbox"]), main))
            fragments.append(fragment)

    def write(translated: list[str]) -> bytes:
        by_page: dict[int, list[int]] = {}
        for k, (page, _, _) in enumerate(blocks):
            by_page.setdefault(page, []).append(k)
        for number, indices in by_page.items():
            page = document[number]
            links = [{key: v for key, v in link.items() if key not in ("xref", "id")} for link in page.get_links()]
            _remove_text(pymupdf, page, _bands([blocks[k][1] for k in indices], kept.get(number, [])))
            _lay_out(pymupdf, page, [(blocks[k][1], translated[k], blocks[k][2]) for k in indices])
            for link in links:
                page.insert_link(link)
        return document.tobytes(garbage=3, deflate=True)

    return marked(fragments, write, left=left)
