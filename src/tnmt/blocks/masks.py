"""Attention masks (section 3.1 and 3.2.3 of the paper).

One convention everywhere: a boolean tensor where True means "this query may attend to this key",
broadcastable to (B, H, Tq, Tk). It is what `torch.nn.functional.scaled_dot_product_attention`
takes as `attn_mask`, so no conversion is ever needed; the reference attention turns False into -inf.
"""

import torch
from torch import Tensor


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """Keys that are real tokens: (B, L) ids -> (B, 1, 1, L), True where `ids != pad_id`."""
    return (ids != pad_id)[:, None, None, :]


def causal_mask(n_queries: int, n_keys: int | None = None, *, device: torch.device | None = None) -> Tensor:
    """Lower-triangular mask so position i sees keys 0..i (the decoder's "no peeking", section 3.2.3).

    With a KV cache the queries are the last `n_queries` of `n_keys` positions, so the diagonal is
    shifted by `n_keys - n_queries`. Returns (1, 1, Tq, Tk).
    """
    n_keys = n_queries if n_keys is None else n_keys
    offset = n_keys - n_queries
    mask = torch.ones(n_queries, n_keys, dtype=torch.bool, device=device).tril(diagonal=offset)
    return mask[None, None]


def target_mask(tgt_ids: Tensor, pad_id: int) -> Tensor:
    """Causal mask combined with target padding: (B, T) -> (B, 1, T, T).

    Position 0 always holds the decoder-start token, which is never treated as padding: MarianMT
    starts decoding from the pad id itself, and a query must always have one key to attend to.
    """
    keys = tgt_ids != pad_id  # (B, T)
    keys[:, 0] = True
    return causal_mask(tgt_ids.size(1), device=tgt_ids.device) & keys[:, None, None, :]


def additive_mask(mask: Tensor, dtype: torch.dtype) -> Tensor:
    """A boolean mask as the additive one attention also takes: 0 where it allows, -inf where it does not.

    Attention adds it to the scores, which is what the fused kernel does with a boolean mask on every call;
    a cache converts its source mask once and reuses it at every step.
    """
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))
