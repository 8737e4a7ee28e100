"""Text in, text out: the `Translator` around the searches of `tnmt.decode`.

Read in order: `prepared.py` (a text prepared once: its steering planned, what the model reads tokenised),
`door.py` (the one door to the model: its search and its teacher-forced pass, on a frozen model's weights laid out
by `frozen.py`, or quantised by `quantize.py`), `translation.py` (what a translation returns), `translator.py`
(batching, pairs of a multilingual model, translations and traces), then what steers and explains a translation:
`steering.py` with `glossary.py`, `terms.py` and `kept.py`, `evidence.py` (word alignment, confidence, warnings),
`replacements.py` (another word for one word, the rest following), and `stream.py` (files line by line).
"""

from tnmt.translate.evidence import TokenAttention
from tnmt.translate.translation import Translation
from tnmt.translate.translator import Translator

__all__ = ["TokenAttention", "Translation", "Translator"]
