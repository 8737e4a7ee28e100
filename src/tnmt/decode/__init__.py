"""Decoding: greedy and beam search on the KV cache, and the text-in, text-out `Translator`.

`greedy_search` and `beam_search` return the best output ids per sentence; `greedy_hypotheses` and
`beam_search_nbest` return `Hypothesis` objects with their scores, and `search` picks between them. A
`Translator` returns `Translation` objects. Read bottom-up: `hypothesis.py` (the result type), `rules.py`
(what enters and leaves a search), `top_k.py`, the searches (greedy.py, beam.py, search.py, all on
`Transformer.incremental_decoder`), `frozen.py` (the weight copies of a frozen model), then the `Translator`
and its consumers: evidence, trace, stream.
"""

from tnmt.decode.beam import beam_search, beam_search_nbest
from tnmt.decode.greedy import greedy_hypotheses, greedy_search
from tnmt.decode.hypothesis import Hypothesis, gnmt_length_penalty
from tnmt.decode.search import search
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
