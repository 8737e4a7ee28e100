"""Decoding: greedy and beam search on the KV cache, and the text-in, text-out `Translator`.

`greedy_search` and `beam_search` return the best output ids per sentence; `beam_search_nbest`
returns the n best `Hypothesis` objects with their scores. `step.py` holds what the searches share.
"""

from tnmt.decode.beam import Hypothesis, beam_search, beam_search_nbest, gnmt_length_penalty
from tnmt.decode.greedy import greedy_search
from tnmt.decode.translator import TranslationResult, Translator

__all__ = [
    "Hypothesis",
    "TranslationResult",
    "Translator",
    "beam_search",
    "beam_search_nbest",
    "gnmt_length_penalty",
    "greedy_search",
]
