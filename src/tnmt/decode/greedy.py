"""Greedy search: at every step take the single most probable next token.

Batched on the KV cache: one decoder step per token for all open sentences. A sentence that emits
EOS or reaches its length limit leaves the batch (its cache rows are dropped), so late steps only pay
for the sentences still being written, and the loop stops when none is left.
"""

from collections.abc import Sequence

import torch
from torch import Tensor

from tnmt.config import DecodeConfig
from tnmt.decode.constraints import Constraints
from tnmt.decode.hypothesis import Hypothesis
from tnmt.decode.setup import set_up
from tnmt.decode.top_k import top_k
from tnmt.decode.trace import SearchRecorder
from tnmt.model import BoundDecoder, EncodedSource, Transformer


@torch.inference_mode()
def greedy_search(
    model: Transformer, src: Tensor | EncodedSource, decode: DecodeConfig | None = None
) -> list[list[int]]:
    """The greedy translation of every sentence of a batch as ids, without BOS and EOS; see `greedy_hypotheses`."""
    return [hypothesis.tokens for hypothesis in greedy_hypotheses(model, src, decode)]


@torch.inference_mode()
def greedy_hypotheses(
    model: Transformer,
    src: Tensor | EncodedSource,
    decode: DecodeConfig | None = None,
    *,
    recorder: SearchRecorder | None = None,
    decoder: BoundDecoder | None = None,
    constraints: Sequence[Constraints] | None = None,
    starts: Tensor | None = None,
) -> list[Hypothesis]:
    """The greedy translation of every sentence of a batch, with its log-probability and score.

    Args:
        model: The Transformer (in eval mode; dropout would make the search random).
        src: Right-padded source ids (B, S), each sentence ending with EOS, or the batch already encoded
            (`Transformer.encode_for_decoding`).
        decode: Length limits (`rules.output_limits`) and `min_len` (EOS is forbidden until that many
            tokens were generated); `length_penalty` scores the result as beam search would; the beam size
            is ignored. None = `DecodeConfig()`.
        recorder: Told what every step did (decode/trace.py); for a batch of one sentence.
        decoder: The model bound for decoding (`Transformer.incremental_decoder`); None binds it here.
        constraints: Each sentence's avoided phrases and forced prefix (decode/bans.py); required phrases
            need beam search (`search` sends them there). `decode.block_loops` bans loops.
        starts: (B,) each sentence's first decoder input: a multilingual model's target-language tag
            (tnmt/directions.py); None: BOS for every sentence.

    Returns:
        Per sentence a `Hypothesis`: the output ids (without BOS and EOS), the sum of their log-probabilities
        (EOS's included when it was generated) and its score (`Hypothesis.scored`). A sentence that hits
        its length limit ends without EOS.
    """
    decode = decode or DecodeConfig()
    if constraints is not None and any(c.required for c in constraints):
        raise ValueError("greedy search takes no required phrases: they need beam search's allocation")
    setup = set_up(model, src, decode, recorder=recorder, decoder=decoder, constraints=constraints, starts=starts)
    rules, bans, decoder, cache, limits = setup.rules, setup.bans, setup.decoder, setup.cache, setup.limits
    batch, device, eos_id = setup.source.batch_size, limits.device, model.config.eos_id
    rows = torch.arange(batch, device=device)  # (N,) sentence of each open cache row
    tokens = setup.inputs  # (N,)
    written = torch.empty(batch, 0, dtype=torch.long, device=device)  # (N, t) each row's output, for the bans
    history = []  # (rows, tokens, log-probs) of every step; read once at the end, so a step costs no copy
    for step in range(int(limits.max())):
        logits, weights = decoder.step(tokens[:, None], cache, need_weights=recorder is not None)
        log_probs = logits[:, 0].log_softmax(dim=1)  # (N, V), normalised over every token, banned ones included
        if recorder is not None:
            recorder.attention(weights)
        rules.apply_(log_probs, step)
        if bans.active:
            bans.apply_(log_probs, written, rows)
        best, picked = top_k(log_probs, 1)  # (N, 1) the argmax and its log-probability
        tokens = picked[:, 0]
        if bans.active:
            written = torch.cat([written, picked], dim=1)
        if recorder is not None:
            recorder.greedy_step(log_probs, int(tokens[0]), at_limit=bool(limits[0] == step + 1))
        history.append((rows, tokens, best[:, 0]))
        ended = (tokens == eos_id) | (limits == step + 1)  # (N,)
        if not bool(ended.any()):
            continue
        keep = (~ended).nonzero().view(-1)  # (N',)
        if keep.numel() == 0:
            break
        rows, tokens, limits = rows[keep], tokens[keep], limits[keep]
        if bans.active:
            written = written[keep]
        cache.reorder(keep)
    return _hypotheses(history, batch, eos_id=eos_id, alpha=decode.length_penalty)


def _hypotheses(
    history: list[tuple[Tensor, Tensor, Tensor]], batch: int, *, eos_id: int, alpha: float
) -> list[Hypothesis]:
    """Each sentence's tokens and log-probability gathered from the steps' (rows, tokens, log-probs)."""
    outputs: list[list[int]] = [[] for _ in range(batch)]
    log_probs: list[list[float]] = [[] for _ in range(batch)]
    for step_rows, step_tokens, step_log_probs in history:
        for row, token, log_prob in zip(step_rows.tolist(), step_tokens.tolist(), step_log_probs.tolist(), strict=True):
            outputs[row].append(token)
            log_probs[row].append(log_prob)
    hypotheses = []
    for ids, token_log_probs in zip(outputs, log_probs, strict=True):
        ended = bool(ids) and ids[-1] == eos_id
        words = ids[:-1] if ended else ids
        found = Hypothesis.scored(
            words, sum(token_log_probs), ended=ended, alpha=alpha, token_log_probs=tuple(token_log_probs)
        )
        hypotheses.append(found)
    return hypotheses
