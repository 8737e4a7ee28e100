"""What a document format hands to the translator: units of text, and their translation as one batch.

A unit is one piece of a document that is translated as a whole (a paragraph, a subtitle cue, a catalogue
message), with the strings in it that must come back as written (placeholders such as `%s`, `{name}` or
`%(count)d`: they become do-not-translate terms, translate/kept.py). The units of a document go to the
translator together, so their sentences share decoder batches.
"""

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from tnmt.config import DecodeConfig
from tnmt.serve.libretranslate.markup import parse
from tnmt.translate.steering import Steering
from tnmt.translate.translator import Translation, Translator

# printf (%s, %d, %(name)s, %1$s), brace ({name}, {0}, {{x}}) and shell-like ($name, ${name}) placeholders
PLACEHOLDER = re.compile(r"%(?:\(\w+\)|\d+\$)?[-+ #0]*\d*(?:\.\d+)?[sdifuxXeEgGcr%]|\{\{?[\w.:!-]*\}?\}|\$\{?\w+\}?")


@dataclass(frozen=True)
class Unit:
    """A piece of a document to translate: its text, and the strings in it to keep as written."""

    text: str
    keep: tuple[str, ...] = ()


def unit(text: str) -> Unit:
    """`text` as a unit, its placeholders kept as written."""
    return Unit(text, tuple(dict.fromkeys(m.group() for m in PLACEHOLDER.finditer(text))))


def translate_units(
    translator: Translator,
    units: Sequence[Unit],
    settings: DecodeConfig | None = None,
    *,
    steering: Steering | None = None,
    evidence: bool = False,
) -> list[Translation]:
    """Each unit's translation, all in one call (their sentences batched together), `steering` (a glossary, terms
    to keep) applied to every unit with the unit's own strings to keep added."""
    base = steering or Steering()
    steerings = [
        replace(base, do_not_translate=tuple(dict.fromkeys((*base.do_not_translate, *u.keep)))) if u.keep else steering
        for u in units
    ]
    return translator.translations([u.text for u in units], settings, steering=steerings, evidence=evidence)


def translate_markup(
    translator: Translator,
    fragments: Sequence[str],
    settings: DecodeConfig | None = None,
    *,
    steering: Steering | None = None,
) -> list[str]:
    """Each inline-markup fragment (a paragraph whose formatted stretches are `<span>`s: serve/libretranslate's
    markup.py) translated, its elements placed around the words aligned to theirs, all fragments' sentences in
    one batch."""
    documents = [parse(fragment) for fragment in fragments]
    texts = [text for document in documents for text in document.texts]
    found = translate_units(translator, [unit(text) for text in texts], settings, steering=steering, evidence=True)
    out, at = [], 0
    for document in documents:
        n = len(document.texts)
        out.append(document.render([(t.text, t.evidence.alignment) for t in found[at : at + n]]))
        at += n
    return out
