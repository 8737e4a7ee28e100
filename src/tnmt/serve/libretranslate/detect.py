"""Which language a text is in: LibreTranslate's `/detect` and `source: "auto"`, over lingua.

What a caller can count on:
- The answer is what the text is, served or not: lingua compares the served source languages with a fixed
  set of common others (`COMMON`) and every one of them is ranked, best first. A German text on an English-only
  server is "de" at 100, not "en" with a low number a client would have to know to distrust; `/translate` with
  `source: "auto"` refuses it (`CONFIDENT`) instead of translating German as if it were English. LibreTranslate
  reports its installed languages only.
- A text in a language outside both passes for its nearest relative in them (Slovak for Czech). `COMMON` holds
  the languages of tnmt's recipes (Multi30k: en, de, fr, cs) and the web's most used; each Latin-script one costs
  about 30 MB once detected. Lingua's 75 languages would cost 900 MB and 8 s on the first detection, against
  280 MB and 2 s (benchmarks/quality/detect.py): more than the model a small server serves.
- The confidences (0-100, adding up to 100 but for rounding) are calibrated (`calibrated`): on Multi30k's test
  captions, whole and cut to 1-6 words, their expected calibration error is 2.6 points (lingua's own: 17.6),
  and the answers at 99 or more are right 99.9% of the time. Lingua's own values average the log-likelihood per
  character, so a clear sentence is as unsure as a word: "A dog runs on the beach." is English at 36% for lingua,
  at 96% here; "Hello" is Italian at 71%, "A deer" Dutch at 97%.
- When lingua's rules rule out every served language (0 for all), the served ones are ordered among themselves
  by lingua over them alone. Its rules give "ó" to Spanish, Portuguese, Polish and Slovak but not Czech, so
  "pózuje" or "balónků" make 3 of Multi30k's 1000 Czech test captions Spanish. A text without letters (empty,
  digits, punctuation) gets 0 for every language: the served ones first, in code order.
- Lingua's high-accuracy mode, made for short texts.

Lingua loads a language's models on its first detection (a server that never detects pays nothing); then
0.05-0.3 ms per text, 2-3 times lingua's over the served languages alone.
"""

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tnmt.errors import UserError

if TYPE_CHECKING:
    from lingua import LanguageDetector

# Languages every text is compared with besides the served ones (lingua's ISO 639-1 codes). Those in other
# scripts than Latin cost next to nothing: lingua tells them by their alphabet before it loads any model.
COMMON = ("ar", "cs", "de", "en", "es", "fr", "it", "ja", "nl", "pl", "pt", "ru", "zh")
# Calibration: lingua's values raised to the power SHARPNESS * letters ** LENGTH_EXPONENT, renormalised. Fitted by
# log-loss on Multi30k's val captions in en, de, fr, cs, whole and cut to 1-3 words
# (benchmarks/quality/detect.py, `fit`).
SHARPNESS = 1.5
LENGTH_EXPONENT = 0.5
# The confidence from which `source: "auto"` takes a text to be in its best language even when no model translates
# from it (a 400); below, the text goes to the likeliest language that has one. On an English-only server and
# Multi30k's English val captions, whole and cut to 1-6 words, 99 refuses 3 of 7098 (95: 11, 99.9: none) and
# refuses the German, French and Czech ones 99.9% of the time whole, 45% as one word (benchmarks/quality/detect.py).
CONFIDENT = 99.0


def supported() -> frozenset[str]:
    """The ISO 639-1 codes lingua can detect (75 languages)."""
    from lingua import Language  # here: `import tnmt` stays light

    return frozenset(language.iso_code_639_1.name.lower() for language in Language.all())


class Detector:
    """Ranks the languages of a text: `languages` (the served ones, ISO 639-1 codes such as "en") and `COMMON`.
    Built once, used from any thread.

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
        self.compared = tuple(sorted({*self.languages, *COMMON}))

        def build(codes: Sequence[str]) -> "LanguageDetector":  # a language's models are shared by its detectors
            iso_codes = [IsoCode639_1.from_str(code) for code in codes]
            return LanguageDetectorBuilder.from_iso_codes_639_1(*iso_codes).build()

        self._lingua = build(self.compared)
        self._alone = build(self.languages) if len(self.languages) > 1 else None  # lingua needs two

    def detect(self, text: str) -> list[tuple[str, float]]:
        """(code, calibrated confidence from 0 to 100) for every compared language, best first; ties: the served
        languages first (among them, as lingua over them alone orders them when every one is ruled out), then by
        code."""
        confidence = calibrated(_confidences(self._lingua, text), sum(c.isalpha() for c in text))
        order = {code: 0.0 for code in self.languages}
        if self._alone is not None and not any(confidence[code] for code in self.languages):
            order = _confidences(self._alone, text)  # every one ruled out: which of them is it likeliest?
        served = set(self.languages)
        ranked = sorted(
            self.compared, key=lambda code: (-confidence[code], code not in served, -order.get(code, 0), code)
        )
        return [(code, round(100 * confidence[code], 1)) for code in ranked]


def _confidences(lingua: "LanguageDetector", text: str) -> dict[str, float]:
    """Lingua's confidence (0-1) per ISO 639-1 code of the languages it was built from."""
    values = lingua.compute_language_confidence_values(text)
    return {value.language.iso_code_639_1.name.lower(): value.value for value in values}


def calibrated(
    values: dict[str, float], letters: int, *, sharpness: float = SHARPNESS, exponent: float = LENGTH_EXPONENT
) -> dict[str, float]:
    """Lingua's values (0-1 per language) for a text of `letters` letters, made probabilities that mean what they say.

    Lingua sums each language's log-probabilities of the text's n-grams, divides by the number of its characters
    and takes the softmax over languages: a per-character average, so its confidence does not grow with the text.
    Multiplying back by the length would give the naive-Bayes posterior, far too sure (the n-gram orders count
    the same letters several times); `sharpness * letters ** exponent` is fitted instead (SHARPNESS,
    LENGTH_EXPONENT: the square root won over exponents 0, 0.25, 0.75 and 1). All 0 stays all 0.
    """
    power = sharpness * max(letters, 1) ** exponent
    logits = {code: power * math.log(value) for code, value in values.items() if value > 0}
    if not logits:
        return dict.fromkeys(values, 0.0)
    top = max(logits.values())
    weights = {code: math.exp(logit - top) for code, logit in logits.items()}
    total = sum(weights.values())
    return {code: weights.get(code, 0.0) / total for code in values}
