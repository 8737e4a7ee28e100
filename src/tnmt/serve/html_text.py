"""The text of an HTML fragment, and the fragment with that text replaced (LibreTranslate's `format: "html"`).

The fragment is cut at its tags; every text node with letters in it is translated on its own and
put back between the same tags, with its leading and trailing whitespace. Tags, attributes, comments
and the contents of <script> and <style> pass through unchanged. Entities are decoded before
translation and the translation is escaped again, so `&amp;` stays valid HTML.
"""

import html
import re

_PARTS = re.compile(r"(<!--.*?-->|<[^>]*>)", flags=re.S)  # comments and tags; the rest is text
_RAW_START = re.compile(r"<(script|style)\b", flags=re.I)  # elements whose content is not text to translate
_RAW_END = re.compile(r"</(script|style)\s*>", flags=re.I)


def text_nodes(fragment: str) -> list[str]:
    """The fragment's text nodes to translate, entities decoded and whitespace stripped, in order."""
    parts, nodes = _split(fragment)
    return [html.unescape(parts[i].strip()) for i in nodes]


def replace_text_nodes(fragment: str, translations: list[str]) -> str:
    """`fragment` with its `text_nodes` replaced by `translations` (escaped), markup and spacing kept."""
    parts, nodes = _split(fragment)
    for i, translation in zip(nodes, translations, strict=True):
        text = parts[i]
        lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
        parts[i] = lead + html.escape(translation, quote=False) + trail
    return "".join(parts)


def _split(fragment: str) -> tuple[list[str], list[int]]:
    """Text and tags alternating (even indices are text), and the indices of the text nodes to translate."""
    parts = _PARTS.split(fragment)
    nodes, raw = [], False
    for i, part in enumerate(parts):
        if i % 2:  # a tag: does it open or close a raw-text element?
            raw = bool(_RAW_START.match(part)) or (raw and not _RAW_END.match(part))
        elif not raw and part.strip():
            nodes.append(i)
    return parts, nodes
