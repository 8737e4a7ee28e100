"""Greedy search: at every step take the single most probable next token.

Batched on the KV cache: one decoder step per token for all open sentences. A sentence that emits
EOS or reaches its length limit leaves the batch (its cache rows are dropped), so late steps only pay
for the sentences still being written, and the loop stops when none is left.
"""

import torch
from torch import Tensor

from tnmt.config import DecodeConfig
from tnmt.decode.step import (
    TokenRules,
    next_token_logits,
    output_limits,
    start_decoding,
    top_k,
)
from tnmt.model import Transformer


@torch.inference_mode()
def greedy_search(model: Transformer, src_ids: Tensor, decode: DecodeConfig | None = None) -> list[list[int]]:
    """The greedy translation of every sentence of a batch.

    Args:
        model: The Transformer (in eval mode; dropout would make the search random).
        src_ids: Right-padded source ids (B, S), each sentence ending with EOS.
        decode: Length limits (`step.output_limits`) and `min_len` (EOS is forbidden until that many
            tokens were generated); the beam size is ignored. None = `DecodeConfig()`.

    Returns:
        Per sentence the output ids, without BOS and EOS. A sentence that hits its length limit ends
        without EOS.
    """
    decode = decode or DecodeConfig()
    c = model.config
    device = src_ids.device
    batch = src_ids.size(0)
    limits = output_limits((src_ids != c.pad_id).sum(dim=1), model_max_len=c.max_len, decode=decode)  # (B,)
    rules = TokenRules.of(model, min_len=decode.min_len, device=device)
    cache = start_decoding(model, src_ids)
    rows = torch.arange(batch, device=device)  # (N,) sentence of each open cache row
    tokens = torch.full((batch,), c.bos_id, dtype=torch.long, device=device)  # (N,)
    history = []  # (rows, tokens) of every step; read once at the end, so a step costs no copy
    for step in range(int(limits.max())):
        scores = rules.apply_(next_token_logits(model, tokens, cache), step)  # (N, V)
        tokens = top_k(scores, 1)[1][:, 0]  # (N,) argmax
        history.append((rows, tokens))
        ended = (tokens == c.eos_id) | (limits == step + 1)  # (N,)
        if not bool(ended.any()):
            continue
        keep = (~ended).nonzero().view(-1)  # (N',)
        if keep.numel() == 0:
            break
        rows, tokens, limits = rows[keep], tokens[keep], limits[keep]
        cache.reorder(keep)
    outputs: list[list[int]] = [[] for _ in range(batch)]
    for step_rows, step_tokens in history:
        for row, token in zip(step_rows.tolist(), step_tokens.tolist(), strict=True):
            outputs[row].append(token)
    return [ids[:-1] if ids and ids[-1] == c.eos_id else ids for ids in outputs]
