"""Greedy search: at every step take the single most probable next token.

Batched on the KV cache: one decoder step per token for all open sentences. A sentence that emits
EOS or reaches its length limit leaves the batch (its cache rows are dropped), so late steps only pay
for the sentences still being written, and the loop stops when none is left.
"""

import torch
from torch import Tensor

from tnmt.config import DecodeConfig
from tnmt.decode.step import (
    Hypothesis,
    TokenRules,
    gnmt_length_penalty,
    next_token_logits,
    output_limits,
    start_decoding,
    top_k,
)
from tnmt.decode.trace import SearchRecorder
from tnmt.model import Transformer


@torch.inference_mode()
def greedy_search(model: Transformer, src_ids: Tensor, decode: DecodeConfig | None = None) -> list[list[int]]:
    """The greedy translation of every sentence of a batch as ids, without BOS and EOS; see `greedy_hypotheses`."""
    return [hypothesis.tokens for hypothesis in greedy_hypotheses(model, src_ids, decode)]


@torch.inference_mode()
def greedy_hypotheses(
    model: Transformer,
    src_ids: Tensor,
    decode: DecodeConfig | None = None,
    *,
    recorder: SearchRecorder | None = None,
    fast: bool = True,
) -> list[Hypothesis]:
    """The greedy translation of every sentence of a batch, with its log-probability and score.

    Args:
        model: The Transformer (in eval mode; dropout would make the search random).
        src_ids: Right-padded source ids (B, S), each sentence ending with EOS.
        decode: Length limits (`step.output_limits`) and `min_len` (EOS is forbidden until that many
            tokens were generated); `length_penalty` scores the result as beam search would; the beam size
            is ignored. None = `DecodeConfig()`.
        recorder: Told what every step did (decode/trace.py); for a batch of one sentence.
        fast: Decode with the fast step (decode/fast_step.py) unless a recorder needs the modules' attention.

    Returns:
        Per sentence the output ids (without BOS and EOS), the sum of their log-probabilities (EOS's
        included when it was generated) and that sum over `gnmt_length_penalty`. A sentence that hits its
        length limit ends without EOS.
    """
    decode = decode or DecodeConfig()
    c = model.config
    device = src_ids.device
    batch = src_ids.size(0)
    if recorder is not None and batch != 1:
        raise ValueError(f"a recorder follows one sentence, got a batch of {batch}")
    limits = output_limits((src_ids != c.pad_id).sum(dim=1), model_max_len=c.max_len, decode=decode)  # (B,)
    rules = TokenRules.of(model, min_len=decode.min_len, device=device)
    longest = int(limits.max())
    cache = start_decoding(model, src_ids, fast_capacity=longest if fast and recorder is None else 0)
    rows = torch.arange(batch, device=device)  # (N,) sentence of each open cache row
    tokens = torch.full((batch,), c.bos_id, dtype=torch.long, device=device)  # (N,)
    history = []  # (rows, tokens, log-probs) of every step; read once at the end, so a step costs no copy
    for step in range(longest):
        logits = next_token_logits(model, tokens, cache, recorder)  # (N, V)
        normaliser = logits.logsumexp(dim=1)  # (N,) log of the softmax's denominator, over every token
        best, picked = top_k(rules.apply_(logits, step), 1)  # (N, 1) the argmax and its logit
        tokens = picked[:, 0]
        if recorder is not None:
            recorder.greedy_step(logits - normaliser[:, None], int(tokens[0]), at_limit=bool(limits[0] == step + 1))
        history.append((rows, tokens, best[:, 0] - normaliser))
        ended = (tokens == c.eos_id) | (limits == step + 1)  # (N,)
        if not bool(ended.any()):
            continue
        keep = (~ended).nonzero().view(-1)  # (N',)
        if keep.numel() == 0:
            break
        rows, tokens, limits = rows[keep], tokens[keep], limits[keep]
        cache.reorder(keep)
    return _hypotheses(history, batch, eos_id=c.eos_id, alpha=decode.length_penalty)


def _hypotheses(
    history: list[tuple[Tensor, Tensor, Tensor]], batch: int, *, eos_id: int, alpha: float
) -> list[Hypothesis]:
    """Each sentence's tokens and log-probability gathered from the steps' (rows, tokens, log-probs)."""
    outputs: list[list[int]] = [[] for _ in range(batch)]
    log_probs = [0.0] * batch
    for step_rows, step_tokens, step_log_probs in history:
        for row, token, log_prob in zip(step_rows.tolist(), step_tokens.tolist(), step_log_probs.tolist(), strict=True):
            outputs[row].append(token)
            log_probs[row] += log_prob
    hypotheses = []
    for ids, log_prob in zip(outputs, log_probs, strict=True):
        length = len(ids)  # the words and EOS if it was generated
        words = ids[:-1] if ids and ids[-1] == eos_id else ids
        hypotheses.append(Hypothesis(words, log_prob / gnmt_length_penalty(length, alpha), log_prob))
    return hypotheses
