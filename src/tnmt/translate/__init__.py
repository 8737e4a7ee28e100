"""Text in, text out: the `Translator` around the searches of `tnmt.decode`.

Read in order: `translator.py` (a text prepared once, one door to the search, batching, the `Translation` it
returns), `steering.py` (glossary terms, phrases to include or avoid, kept spans: a text planned for the search
and finished in the user's words) with `glossary.py`, `terms.py` and `kept.py`, `evidence.py` (word alignment,
confidence and warnings of a translation), `replacements.py` (another word for one word, the rest following),
`stream.py` (files line by line), `frozen.py` and `quantize.py` (a loaded model's weights laid out for decoding).
"""

from tnmt.translate.translator import TokenAttention, Translation, Translator

__all__ = ["TokenAttention", "Translation", "Translator"]
