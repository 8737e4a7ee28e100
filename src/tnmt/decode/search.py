"""The one place that chooses the search: greedy for one beam, beam search otherwise.

Beam search with one beam gives greedy search's output (decode/beam.py), so the choice is about speed:
greedy search skips the beams' bookkeeping. Both return `Hypothesis` objects, so what follows a search
(the `Translator`, the server) never asks which one ran.
"""

from collections.abc import Sequence

from torch import Tensor

from tnmt.config import DecodeConfig
from tnmt.decode.beam import beam_search_nbest
from tnmt.decode.constraints import Constraints
from tnmt.decode.greedy import greedy_hypotheses
from tnmt.decode.hypothesis import Hypothesis
from tnmt.decode.trace import SearchRecorder
from tnmt.errors import UserError
from tnmt.model import BoundDecoder, EncodedSource, Transformer


def search(
    model: Transformer,
    src: Tensor | EncodedSource,
    settings: DecodeConfig,
    *,
    n_best: int = 1,
    recorder: SearchRecorder | None = None,
    decoder: BoundDecoder | None = None,
    constraints: Sequence[Constraints] | None = None,
    starts: Tensor | None = None,
) -> list[list[Hypothesis]]:
    """The `n_best` best hypotheses of every sentence of a right-padded (B, S) batch (or the batch encoded
    already), best first; a `recorder` (decode/trace.py, a batch of one) is told what every step did, and
    `decoder` is the model bound for decoding (`Transformer.incremental_decoder`; None binds it here).
    `constraints`: each sentence's (decode/constraints.py), None for none. Required phrases need the beams'
    allocation, so with any of them a beam of one runs beam search (which places each constraint as early as
    it can start: see decode/constraints.py); avoided phrases and prefixes run in either search. `starts` (B,):
    each sentence's first decoder input, a multilingual model's target-language tag (None: BOS for all).

    Raises:
        ValueError: n_best outside [1, settings.beam_size].
        UserError: a beam wider than the target vocabulary (its first step has fewer candidates than beams,
            and memory grows with the width: a typo such as 10**9 would take the machine's).
    """
    if (beams := settings.beam_size) > (vocabulary := model.config.tgt_vocab_size):
        raise UserError(f"DecodeConfig.beam_size = {beams}: must be <= the target vocabulary ({vocabulary})")
    requiring = constraints is not None and any(c.required for c in constraints)
    if settings.beam_size == 1 and not requiring:
        if n_best != 1:
            raise ValueError(f"need 1 <= n_best <= beam_size, got n_best {n_best} and beam_size 1")
        found = greedy_hypotheses(
            model, src, settings, recorder=recorder, decoder=decoder, constraints=constraints, starts=starts
        )
        return [[hypothesis] for hypothesis in found]
    return beam_search_nbest(
        model, src, settings, n_best=n_best, recorder=recorder, decoder=decoder, constraints=constraints, starts=starts
    )
