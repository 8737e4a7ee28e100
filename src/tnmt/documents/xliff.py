"""XLIFF 1.2 (.xlf, .xliff), parsed with `defusedxml` (no entity expansion, no external entities): each
trans-unit's source is translated into its target (created when missing, its `state` set to
"needs-review-translation": a translator reviews machine output before it ships). Inline codes are inline
markup: `<g>` pairs wrap the translated words aligned to theirs, `<x/>`, `<ph>`, `<bx/>`, `<ex/>` and `<it>` stay
beside the words aligned to their neighbours (tag transfer), each exactly once. Units with a target already, and
units marked translate="no", are left as they are."""

import copy
import html
import xml.etree.ElementTree as ET  # writing only: reading goes through defusedxml
from html.parser import HTMLParser

from defusedxml import ElementTree as SafeET
from defusedxml.common import DefusedXmlException

from tnmt.errors import UserError

NS = "urn:oasis:names:tc:xliff:document:1.2"
PAIRED = {"g"}  # codes with content
STANDALONE = {"x", "ph", "bx", "ex", "it", "mrk"}  # codes kept whole where they stand


def _q(tag: str) -> str:
    return f"{{{NS}}}{tag}"


def read_xliff(data: bytes, *, where: str) -> tuple[ET.ElementTree, list[ET.Element], list[str], list[list]]:
    """The document, its trans-units to translate, each source as an inline-markup fragment, and each one's codes
    (the elements the fragment's `data-code` attributes index).

    Raises:
        UserError: not XLIFF 1.2, or XML it refuses to expand (named after `where`).
    """
    try:
        tree = ET.ElementTree(SafeET.fromstring(data, forbid_dtd=True))
    except DefusedXmlException:
        raise UserError(f"{where}: declares a DTD: refused (its entities could expand)") from None
    except (ET.ParseError, ValueError) as error:
        raise UserError(f"{where}: not an XLIFF file ({type(error).__name__}: {error})") from None
    root = tree.getroot()
    if root.tag != _q("xliff"):
        raise UserError(f"{where}: not an XLIFF 1.2 file (its root is {root.tag!r})")
    units, fragments, codes = [], [], []
    for unit in root.iter(_q("trans-unit")):
        source = unit.find(_q("source"))
        target = unit.find(_q("target"))
        if source is None or unit.get("translate") == "no" or (target is not None and "".join(target.itertext())):
            continue
        found: list = []
        units.append(unit)
        fragments.append(_markup(source, found))
        codes.append(found)
    return tree, units, fragments, codes


def write_xliff(tree: ET.ElementTree, units: list[ET.Element], translated: list[str], codes: list[list]) -> bytes:
    """The document with each unit's target holding its translated fragment, codes rebuilt."""
    ET.register_namespace("", NS)
    for unit, fragment, found in zip(units, translated, codes, strict=True):
        target = unit.find(_q("target"))
        if target is None:
            target = ET.Element(_q("target"))
            source = unit.find(_q("source"))
            unit.insert(list(unit).index(source) + 1, target)
        for child in list(target):
            target.remove(child)
        target.text = None
        _Rebuild(target, found).feed(fragment)
        target.set("state", "needs-review-translation")
    return ET.tostring(tree.getroot(), encoding="utf-8", xml_declaration=True)


def _markup(element: ET.Element, codes: list) -> str:
    """An element's content as inline markup: its text escaped, each `<g>` a `<span data-code="k">` around its own
    content, each standalone code an `<img data-code="k">` (a void inline element); `codes[k]` is the element."""
    out = [html.escape(element.text or "", quote=False)]
    for child in element:
        k = len(codes)
        codes.append(child)
        name = child.tag.split("}")[-1]
        if name in PAIRED:
            out.append(f'<span data-code="{k}">{_markup(child, codes)}</span>')
        else:
            out.append(f'<img data-code="{k}">')
        out.append(html.escape(child.tail or "", quote=False))
    return "".join(out)


class _Rebuild(HTMLParser):
    """A translated fragment written into `target`: its text, and each code as a copy of the element it names."""

    def __init__(self, target: ET.Element, codes: list) -> None:
        super().__init__(convert_charrefs=True)
        self.codes, self.stack, self.last = codes, [target], None

    def _append(self, element: ET.Element) -> None:
        self.stack[-1].append(element)
        self.last = element

    def handle_starttag(self, tag: str, attrs: list) -> None:
        k = dict(attrs).get("data-code")
        if k is None or not k.isdigit() or int(k) >= len(self.codes):
            return
        original = self.codes[int(k)]
        element = ET.Element(original.tag, original.attrib)
        if tag == "img":  # a standalone code: whole, its own content included
            element = copy.deepcopy(original)
            element.tail = None
            self._append(element)
        else:
            self._append(element)
            self.stack.append(element)
            self.last = None

    def handle_endtag(self, tag: str) -> None:
        if tag == "span" and len(self.stack) > 1:
            self.last = self.stack.pop()

    def handle_data(self, data: str) -> None:
        if self.last is not None:
            self.last.tail = (self.last.tail or "") + data
        else:
            parent = self.stack[-1]
            parent.text = (parent.text or "") + data
