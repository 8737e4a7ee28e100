"""Which served language a text is in: LibreTranslate's `/detect` and `source: "auto"`, over lingua.

What a caller can count on:
- Only the languages given (the server's source languages) are reported, every one, best first, each with
  lingua's confidence that the text is in it, from 0 to 100. A LibreTranslate client routes on the first
  entry and looks its name up in `/languages`, so a language the server cannot translate from is no answer.
- The confidences are lingua's over the given languages *and* a fixed set of common others (`COMMON`), so
  they need not add up to 100: a Spanish text on an en+de server gets low confidences for both, and a
  one-language server still says how sure it is (lingua needs two languages to compare, and over the served
  ones alone a single language would always be 100%). LibreTranslate does the same: its langdetect compares
  55 languages and reports the installed ones. A text in a language outside both passes for its nearest
  relative: Czech on a Slovak-only server is "sk", 93%.
- When lingua's rules rule out every given language (0 for all), the order comes from lingua over the given
  languages alone, the confidences stay 0. Its rules give "ó" to Spanish, Portuguese, Polish and Slovak but
  not Czech, so with `COMMON` a Czech "pózuje" or "balónků" is Spanish (3 of Multi30k's 1000 Czech captions):
  reported as Czech first, at 0. A text without letters (empty, digits, punctuation) gets 0 for every
  language, in code order.
- Lingua's high-accuracy mode, made for short texts: on the first three words of Multi30k captions it is
  right 98% of the time, its low-accuracy mode 92% (benchmarks/detect.py).

Lingua loads a language's models on its first detection: about a second, and about 30 MB per Latin-script
language (279 MB RSS for en, de, fr, cs and the Latin-script common ones); a server that never detects pays
nothing. Then 0.1-1 ms per text, twice lingua's time over the served languages alone.
"""

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tnmt.errors import UserError

if TYPE_CHECKING:
    from lingua import LanguageDetector

# Common languages to compare the served ones with (lingua's ISO 639-1 codes). Those in other scripts than
# Latin cost next to nothing: lingua tells them by their alphabet before it loads any model.
COMMON = ("ar", "de", "en", "es", "fr", "it", "ja", "nl", "pl", "pt", "ru", "zh")


def supported() -> frozenset[str]:
    """The ISO 639-1 codes lingua can detect (75 languages)."""
    from lingua import Language  # here: `import tnmt` stays light

    return frozenset(language.iso_code_639_1.name.lower() for language in Language.all())


class Detector:
    """Ranks `languages` (ISO 639-1 codes such as "en", "de") for a text; built once, used from any thread.

    Raises:
        UserError: no language, or a code lingua does not know (listing the ones it does).
    """

    def __init__(self, languages: Sequence[str]) -> None:
        from lingua import IsoCode639_1, LanguageDetectorBuilder

        known = supported()
        if not languages:
            raise UserError("language detection needs at least one language")
        if unknown := sorted(set(languages) - known):
            raise UserError(f"language detection does not know {unknown}; ISO 639-1 codes it knows: {sorted(known)}")
        self.languages = tuple(sorted(set(languages)))

        def build(codes: set[str]) -> "LanguageDetector":  # a language's models are shared by its detectors
            iso_codes = [IsoCode639_1.from_str(code) for code in sorted(codes)]
            return LanguageDetectorBuilder.from_iso_codes_639_1(*iso_codes).build()

        self._lingua = build({*self.languages, *COMMON})
        self._alone = build(set(self.languages)) if len(self.languages) > 1 else None  # lingua needs two

    def detect(self, text: str) -> list[tuple[str, float]]:
        """(code, confidence from 0 to 100) for every language of the detector, best first (ties: by code)."""
        confidence = _confidences(self._lingua, text)
        order = confidence
        if self._alone is not None and not any(confidence[code] for code in self.languages):
            order = _confidences(self._alone, text)  # every one ruled out: which of them is it likeliest?
        ranked = sorted(self.languages, key=lambda code: (-confidence[code], -order[code], code))
        return [(code, round(100 * confidence[code], 1)) for code in ranked]


def _confidences(lingua: "LanguageDetector", text: str) -> dict[str, float]:
    """Lingua's confidence (0-1) per ISO 639-1 code of the languages it was built from."""
    values = lingua.compute_language_confidence_values(text)
    return {value.language.iso_code_639_1.name.lower(): value.value for value in values}
