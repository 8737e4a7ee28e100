"""Word documents (.docx), read and written by `python-docx`: every paragraph a reader sees is translated whole, in
every part that holds text (the body with its tables and text boxes, every header and footer, footnotes,
endnotes, comments), its formatting following the words (documents/inline.py).

What a paragraph holds, and what becomes of it:
- runs of text (`w:t`, tabs, non-breaking hyphens): translated, each piece written with the formatting of the run
  it came from;
- wrappers around runs (a hyperlink, its target kept; a tracked insertion; a smart tag, custom XML, a content
  control): kept around the translated words aligned to the words they wrapped;
- a HYPERLINK field (`w:fldSimple`, or `w:fldChar` begin ... separate ... end): its displayed text translated as a
  wrapper's, its instruction kept;
- kept as they are, beside the aligned word: bookmarks, comments' anchors and marks, footnote and endnote marks,
  pictures and text boxes (whose own paragraphs are translated as paragraphs), tracked deletions, equations, every
  other field (its result is computed: page numbers, dates, cross-references), and line and page breaks (which end
  a sentence).
A paragraph whose words are all kept (a field's result, a deletion) is left as it was, and named with the reason
in `read_docx`'s `left`.
"""

import copy
import io
from collections.abc import Iterator
from dataclasses import dataclass, field

import docx
from docx.document import Document
from docx.opc.constants import CONTENT_TYPE as CT
from docx.opc.oxml import serialize_part_xml
from docx.oxml.ns import qn
from docx.oxml.parser import parse_xml
from lxml import etree

from tnmt.documents.archive import malformed_part, open_archive
from tnmt.documents.inline import Item, Keep, Text, fragment, items, plain_run
from tnmt.errors import UserError

_TEXT_PARTS = (CT.WML_DOCUMENT_MAIN, CT.WML_HEADER, CT.WML_FOOTER, CT.WML_FOOTNOTES, CT.WML_ENDNOTES, CT.WML_COMMENTS)
_WRAPPERS = frozenset(qn(f"w:{tag}") for tag in ("hyperlink", "ins", "smartTag", "customXml", "moveTo", "dir", "bdo"))
_DROPPED = frozenset(qn(f"w:{tag}") for tag in ("proofErr", "lastRenderedPageBreak", "rPr", "pPr"))
_RUN_TEXT = {qn("w:t"): None, qn("w:tab"): "\t", qn("w:noBreakHyphen"): "\u2011"}
_BREAKS = frozenset((qn("w:br"), qn("w:cr")))


@dataclass
class _Paragraph:
    """One paragraph read: its runs (each an empty copy of the run its text came from), its wrappers (each an
    emptied copy, or None and the elements written before and after its content: a field's instruction and end),
    its kept things (the elements each is, and the run they are in when they are a run's), and the items of its
    content. Reading changes nothing in the document: `_write` moves the kept elements."""

    element: etree._Element
    runs: list[etree._Element] = field(default_factory=list)
    wrappers: list[tuple[etree._Element | None, list, list]] = field(default_factory=list)
    atoms: list[tuple[etree._Element | None, list[etree._Element]]] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)

    def keep(self, elements: list, stack: tuple[int, ...], *, run=None, breaks: bool = False) -> None:
        """Keep `elements` as they are (`run`: the run they are in, whose formatting they keep)."""
        self.atoms.append((run, elements))
        self.items.append(Keep(len(self.atoms) - 1, breaks, stack))

    def wrap(self, shell: etree._Element | None, before: list, after: list) -> int:
        self.wrappers.append((shell, before, after))
        return len(self.wrappers) - 1


@dataclass
class WordDocument:
    """A Word document read: the document, its paragraphs to translate (as read), the parts kept as bytes in the
    package whose XML was parsed here (footnotes, endnotes), and the paragraphs left as they were, with why."""

    document: Document
    paragraphs: list[_Paragraph]
    parsed: list[tuple[object, etree._Element]]
    left: list[str]


def read_docx(data: bytes, *, where: str) -> tuple[WordDocument, list[str]]:
    """The document read, and each paragraph to translate as an inline-markup fragment.

    Raises:
        UserError: not a Word document (named after `where`), or one of its parts is not well-formed XML.
    """
    document = open_archive(data, docx.Document, where=where, kind="a Word document")
    read = WordDocument(document, [], [], [])
    for name, root in _text_parts(read, data, where):
        for n, element in enumerate(list(root.iter(qn("w:p"))), start=1):
            paragraph = _read(element)
            words = "".join(i.text for i in paragraph.items if isinstance(i, Text))
            if any(c.isalnum() for c in words):
                read.paragraphs.append(paragraph)
            elif any(c.isalpha() for c in _own_text(element)):
                read.left.append(f"{name} paragraph {n}: its words are all kept (a field's result or a deletion)")
    fragments = [fragment(p.items, [_format(run) for run in p.runs]) for p in read.paragraphs]
    return read, fragments


def write_docx(read: WordDocument, fragments: list[str]) -> bytes:
    """The document with each paragraph's content written from its translated fragment."""
    for paragraph, translated in zip(read.paragraphs, fragments, strict=True):
        _write(paragraph, items(translated))
    for part, root in read.parsed:
        part._blob = serialize_part_xml(root)
    out = io.BytesIO()
    read.document.save(out)
    return out.getvalue()


def _own_text(element: etree._Element) -> str:
    """The text of a paragraph's own runs, deletions included: a text box's paragraphs inside it are their own."""
    marks = element.iter(qn("w:t"), qn("w:delText"))  # what a reader sees: not a field's instruction
    return "".join(t.text or "" for t in marks if next(t.iterancestors(qn("w:p"))) is element)


def _text_parts(read: WordDocument, data: bytes, where: str) -> Iterator[tuple[str, etree._Element]]:
    """(part name, root element) of every part that holds text, the body first."""
    parts = [p for p in read.document.part.package.iter_parts() if p.content_type in _TEXT_PARTS]
    parts.sort(key=lambda p: p.content_type != CT.WML_DOCUMENT_MAIN)
    for part in parts:
        name = str(part.partname).lstrip("/")
        if hasattr(part, "element"):
            yield name, part.element
            continue
        try:  # a part python-docx keeps as bytes: parsed here, written back by `write_docx`
            root = parse_xml(part.blob)
        except etree.XMLSyntaxError as error:
            raise UserError(f"{where}: not a Word document ({malformed_part(data) or error})") from None
        read.parsed.append((part, root))
        yield name, root


def _read(element: etree._Element) -> _Paragraph:
    """A paragraph's content as items."""
    paragraph = _Paragraph(element)
    _read_children(paragraph, list(element), ())
    return paragraph


def _read_children(paragraph: _Paragraph, children: list, stack: tuple[int, ...]) -> None:
    """The items of `children` (siblings in order) inside the wrappers `stack`."""
    k = 0
    while k < len(children):
        child = children[k]
        if _field_char(child) == "begin":
            k = _read_field(paragraph, children, k, stack)
            continue
        k += 1
        if child.tag in _DROPPED:
            continue
        if child.tag == qn("w:r"):
            _read_run(paragraph, child, stack)
        elif child.tag in _WRAPPERS or child.tag == qn("w:sdt"):
            content = child.find(qn("w:sdtContent")) if child.tag == qn("w:sdt") else child
            inside = list(content) if content is not None else []
            w = paragraph.wrap(_shell(child), [], [])
            _read_children(paragraph, inside, (*stack, w))
        elif child.tag == qn("w:fldSimple") and _is_hyperlink(child.get(qn("w:instr"), "")):
            w = paragraph.wrap(_shell(child), [], [])
            _read_children(paragraph, list(child), (*stack, w))
        else:  # bookmarks, comments' anchors, deletions, equations, other fields: kept where they are
            paragraph.keep([child], stack)


def _read_field(paragraph: _Paragraph, children: list, begin: int, stack: tuple[int, ...]) -> int:
    """A complex field from `children[begin]` (its begin mark) to its end: a HYPERLINK field's result read as a
    wrapper's content, any other field kept whole. Returns the index after its end."""
    depth, separate, end = 0, None, len(children) - 1
    for k in range(begin, len(children)):
        mark = _field_char(children[k])
        depth += {"begin": 1, "end": -1}.get(mark, 0)
        if mark == "separate" and depth == 1 and separate is None:
            separate = k
        if depth == 0:
            end = k
            break
    instruction = "".join(t.text or "" for c in children[begin:end] for t in c.iter(qn("w:instrText")))
    if separate is not None and _is_hyperlink(instruction) and _field_char(children[end]) == "end":
        w = paragraph.wrap(None, children[begin : separate + 1], [children[end]])
        _read_children(paragraph, children[separate + 1 : end], (*stack, w))
    else:
        paragraph.keep(children[begin : end + 1], stack)
    return end + 1


def _read_run(paragraph: _Paragraph, run: etree._Element, stack: tuple[int, ...]) -> None:
    """A run's text as Text items (its formatting an empty copy of it), its other content kept, each in its
    place."""
    texts: list[str] = []

    def flush() -> None:
        if texts:
            paragraph.runs.append(_shell(run))
            paragraph.items.append(Text(len(paragraph.runs) - 1, "".join(texts), stack))
            texts.clear()

    for child in run:
        if child.tag in _RUN_TEXT:
            texts.append(_RUN_TEXT[child.tag] or child.text or "")
        elif child.tag not in _DROPPED:
            flush()
            paragraph.keep([child], stack, run=run, breaks=child.tag in _BREAKS)
    flush()


def _write(paragraph: _Paragraph, written: list[Item]) -> None:
    """The paragraph's content replaced by `written` (the translated fragment's items); each kept element is
    moved, not copied (a text box's paragraphs stay the ones read, translated on their own)."""
    element = paragraph.element
    for child in list(element):
        if child.tag != qn("w:pPr"):
            element.remove(child)
    plain = _plain(paragraph)
    opened: list[tuple[int, etree._Element | None]] = []  # the wrappers written around the current item
    for item in written:
        while opened and [w for w, _ in opened] != list(item.wrappers[: len(opened)]):
            w, holder = opened.pop()
            if holder is None:  # a complex field: its end mark where it closes
                _container(opened, element).extend(paragraph.wrappers[w][2])
        for w in item.wrappers[len(opened) :]:
            shell, before, _ = paragraph.wrappers[w]
            holder = copy.deepcopy(shell) if shell is not None else None
            _container(opened, element).extend([holder] if holder is not None else before)
            opened.append((w, holder))
        target = _container(opened, element)
        if isinstance(item, Text):
            run = copy.deepcopy(paragraph.runs[item.run] if item.run is not None else plain)
            _set_text(run, item.text)
            target.append(run)
            continue
        run, elements = paragraph.atoms[item.atom]
        if run is None:
            target.extend(elements)
        else:
            alone = _shell(run)
            alone.extend(elements)
            target.append(alone)
    while opened:
        w, holder = opened.pop()
        if holder is None:
            _container(opened, element).extend(paragraph.wrappers[w][2])


def _container(opened: list[tuple[int, etree._Element | None]], element: etree._Element) -> etree._Element:
    """Where the next item goes: the innermost wrapper written as an element (a content control's content), else
    the paragraph."""
    for _, holder in reversed(opened):
        if holder is not None:
            content = holder.find(qn("w:sdtContent"))
            return content if content is not None else holder
    return element


def _plain(paragraph: _Paragraph) -> etree._Element:
    """The run whose formatting a text outside every run's span takes: the commonest (by characters)."""
    texts = [""] * len(paragraph.runs)
    for item in paragraph.items:
        if isinstance(item, Text):
            texts[item.run] += item.text
    return paragraph.runs[plain_run(texts, [_format(run) for run in paragraph.runs])]


def _set_text(run: etree._Element, text: str) -> None:
    """Write `text` into an empty run: tabs as `w:tab`, the rest as `w:t` (spaces kept)."""
    for k, piece in enumerate(text.split("\t")):
        if k:
            etree.SubElement(run, qn("w:tab"))
        if piece:
            t = etree.SubElement(run, qn("w:t"))
            t.text = piece
            t.set("{http://www.w3.org/XML/1998/namespace}space", "preserve")


def _shell(element: etree._Element) -> etree._Element:
    """An empty element like `element` with copies of its properties only (a run's `w:rPr`, a content control's
    `w:sdtPr`, and an empty `w:sdtContent`): what its content is written into."""
    shell = element.makeelement(element.tag, element.attrib)
    for child in element:
        if child.tag == qn("w:sdtContent"):
            shell.append(child.makeelement(child.tag, child.attrib))
        elif child.tag.endswith("Pr"):
            shell.append(copy.deepcopy(child))
    return shell


def _field_char(element: etree._Element) -> str | None:
    """ "begin", "separate" or "end" for a run holding a field's mark, else None."""
    if element.tag != qn("w:r"):
        return None
    mark = element.find(qn("w:fldChar"))
    return None if mark is None else mark.get(qn("w:fldCharType"))


def _is_hyperlink(instruction: str) -> bool:
    return instruction.split()[:1] == ["HYPERLINK"]


def _format(run: etree._Element) -> bytes:
    """A run's formatting, as its `w:rPr` element's XML (b"" for none)."""
    rpr = run.find(qn("w:rPr"))
    return b"" if rpr is None else etree.tostring(rpr)
