"""Decoding, ids in and ids out: greedy and beam search on the KV cache.

`greedy_search` and `beam_search` return the best output ids per sentence; `greedy_hypotheses` and
`beam_search_nbest` return `Hypothesis` objects with their scores, and `search` picks between them. Read
bottom-up: `hypothesis.py` (the result type and its score), `rules.py` (what enters and leaves a search),
`top_k.py`, `constraints.py` (what a sentence's search must and must not write, as ids), `bans.py` (what a
hypothesis may not write next, the loop rule included), `allocation.py` (the constrained beam step), the searches
(setup.py, what both prepare; greedy.py; beam.py with beam_state.py; search.py; all on
`Transformer.incremental_decoder`), and `trace.py` (what a search reports step by step). Text in, text out is
`tnmt.translate`.

`tnmt.decode.Translator`, `Translation` and `TokenAttention` still import from here for one release: their home is
`tnmt.translate`.
"""

from tnmt.decode.beam import beam_search, beam_search_nbest
from tnmt.decode.greedy import greedy_hypotheses, greedy_search
from tnmt.decode.hypothesis import Hypothesis, gnmt_length_penalty
from tnmt.decode.search import search
from tnmt.exports import lazy_exports

_MOVED = {name: "tnmt.translate.translator" for name in ("TokenAttention", "Translation", "Translator")}

__all__ = [
    "Hypothesis",
    "beam_search",
    "beam_search_nbest",
    "gnmt_length_penalty",
    "greedy_hypotheses",
    "greedy_search",
    "search",
]

__getattr__, __dir__ = lazy_exports(__name__, _MOVED)
