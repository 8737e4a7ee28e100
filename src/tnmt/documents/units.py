"""What a document format hands to a translator: units of text, and a `Pending` document that writes itself
once they are translated.

A unit is one piece of a document that is translated as a whole (a paragraph, a subtitle cue, a catalogue
message), with the strings in it that must come back as written (placeholders such as `%s`, `{name}` or
`%(count)d`: they become do-not-translate terms, translate/kept.py). A paragraph with formatting is an
inline-markup fragment instead (its formatted stretches are elements, documents/markup.py): its
sentences are the units, and their word alignments carry the elements to the translated words. A `Pending`
document lists every unit of the document with its steering, so that whoever translates (the CLI's translator,
the server's shared batches) translates them all as one batch of sentences, and then writes the document.
"""

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tnmt.config import DecodeConfig
from tnmt.documents.markup import Markup, parse
from tnmt.translate.steering import Steering
from tnmt.translate.translation import Translation
from tnmt.translate.translator import Translator

# printf (%s, %d, %(name)s, %1$s), brace ({name}, {0}, {{x}}) and shell-like ($name, ${name}) placeholders
CHUNK = 256  # units translated in one call by `Pending.translations` (its progress steps)
PLACEHOLDER = re.compile(r"%(?:\(\w+\)|\d+\$)?[-+ #0]*+\d*+(?:\.\d+)?[sdifuxXeEgGcr%]|\{\{?[\w.:!-]*\}?\}|\$\{?\w+\}?")


@dataclass(frozen=True)
class Unit:
    """A piece of a document to translate: its text, and the strings in it to keep as written."""

    text: str
    keep: tuple[str, ...] = ()


def unit(text: str) -> Unit:
    """`text` as a unit, its placeholders kept as written."""
    return Unit(text, tuple(dict.fromkeys(m.group() for m in PLACEHOLDER.finditer(text))))


@dataclass
class Pending:
    """A document read and waiting for its units' translations: `units` in order, and `write`, which takes one
    translation per unit and returns the translated document's bytes; `left`: each piece of the document with
    words that is not translated, with why ("word/document.xml paragraph 12: ..."), for the report."""

    units: list[Unit]
    write: Callable[[list[Translation]], bytes]
    left: Sequence[str] = ()

    def steering(self, steering: Steering | None) -> list[Steering | None]:
        """Each unit's steering: `steering` (a glossary, terms to keep) with the unit's own strings to keep."""
        base = steering or Steering()
        return [
            replace(base, do_not_translate=tuple(dict.fromkeys((*base.do_not_translate, *u.keep))))
            if u.keep
            else steering
            for u in self.units
        ]

    def translations(
        self,
        translator: Translator,
        settings: DecodeConfig | None = None,
        *,
        steering: Steering | None = None,
        progress: Callable[[int], object] | None = None,
    ) -> list[Translation]:
        """Each unit's translation by `translator` (with its evidence), `CHUNK` units at a time: each chunk's
        sentences are batched together (a chunk is many batches' worth), and `progress(units done)` follows."""
        steerings, texts, found = self.steering(steering), [u.text for u in self.units], []
        for at in range(0, len(texts), CHUNK):
            found += translator.translations(
                texts[at : at + CHUNK], settings, steering=steerings[at : at + CHUNK], evidence=True
            )
            if progress is not None:
                progress(len(found))
        return found

    def translate(
        self, translator: Translator, settings: DecodeConfig | None = None, *, steering: Steering | None = None
    ) -> bytes:
        """The document translated by `translator`."""
        return self.write(self.translations(translator, settings, steering=steering))


def unmarked(units: list[Unit], write: Callable[[list[str]], bytes]) -> Pending:
    """A document of units without markup, written from their translations' texts."""
    return Pending(units, lambda found: write([t.text for t in found]))


def marked(fragments: Sequence[str], write: Callable[[list[str]], bytes], *, left: Sequence[str] = ()) -> Pending:
    """A document of inline-markup fragments, written from each fragment translated: its sentences are the units,
    and each one's word alignment places its elements (tag transfer); `left` as `Pending`'s."""
    documents: list[Markup] = [parse(fragment) for fragment in fragments]
    units = [unit(text) for document in documents for text in document.texts]

    def rendered(found: list[Translation]) -> bytes:
        out, at = [], 0
        for document in documents:
            n = len(document.texts)
            out.append(document.render([(t.text, t.evidence.alignment) for t in found[at : at + n]]))
            at += n
        return write(out)

    return Pending(units, rendered, left)
