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
