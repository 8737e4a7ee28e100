"""Decoding: greedy and beam search on the KV cache, and the text-in, text-out `Translator`.

`greedy_search` and `beam_search` return the best output ids per sentence; `greedy_hypotheses` and
`beam_search_nbest` return `Hypothesis` objects with their scores, and `search` picks between them.
`step.py` holds what the searches share. A `Translator` returns `Translation` objects.
"""

from tnmt.decode.beam import beam_search, beam_search_nbest
from tnmt.decode.greedy import greedy_hypotheses, greedy_search
from tnmt.decode.search import search
from tnmt.decode.step import Hypothesis, gnmt_length_penalty
from tnmt.decode.translator import TokenAttention, Translation, Translator

__all__ = [
    "Hypothesis",
    "TokenAttention",
    "Translation",
    "Translator",
    "beam_search",
    "beam_search_nbest",
    "gnmt_length_penalty",
    "greedy_hypotheses",
    "greedy_search",
    "search",
]
