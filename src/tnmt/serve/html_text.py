"""Translate the text of an HTML fragment and keep its markup (LibreTranslate's `format: "html"`).

The fragment is cut at its tags; every text node with letters in it is translated on its own and
put back between the same tags, with its leading and trailing whitespace. Tags, attributes, comments
and the contents of <script> and <style> pass through unchanged. Entities are decoded before
translation and the translation is escaped again, so `&amp;` stays valid HTML.
"""

import html
import re
from collections.abc import Callable

_PARTS = re.compile(r"(<!--.*?-->|<[^>]*>)", flags=re.S)  # comments and tags; the rest is text
_RAW = re.compile(r"<(script|style)\b", flags=re.I)  # elements whose content is not text to translate


def translate_html(fragment: str, translate: Callable[[list[str]], list[str]]) -> str:
    """`fragment` with each text node replaced by its translation; `translate` gets all nodes at once."""
    parts = _PARTS.split(fragment)  # text, tag, text, tag, ... (even indices are text)
    nodes, raw = [], False
    for i, part in enumerate(parts):
        if i % 2:  # a tag: does it open or close a raw-text element?
            raw = bool(_RAW.match(part)) or (raw and not re.match(r"</(script|style)\s*>", part, flags=re.I))
        elif not raw and part.strip():
            nodes.append(i)
    translations = translate([html.unescape(parts[i].strip()) for i in nodes]) if nodes else []
    for i, translation in zip(nodes, translations, strict=True):
        text = parts[i]
        lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
        parts[i] = lead + html.escape(translation, quote=False) + trail
    return "".join(parts)
