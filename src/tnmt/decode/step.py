"""What greedy and beam search share: encoding once, output length limits, one constrained decoder step.

Both searches encode the source once, keep one KV-cache row per open hypothesis and feed the decoder
only the newest token of each row per step (`Transformer.init_cache` computes the cross-attention
keys/values once). The paper decodes up to "input length + 50" tokens (section 6.1); we also clamp to
what the model can represent and let the caller set an absolute cap.
"""

from dataclasses import dataclass

import torch
from torch import Tensor

from tnmt.blocks.kv_cache import KVCache
from tnmt.blocks.masks import padding_mask
from tnmt.model import Transformer

DEFAULT_MAX_LEN_A = 1.0  # the paper: maximum output length = input length + 50
DEFAULT_MAX_LEN_B = 50


def output_limits(
    src_ids: Tensor,
    *,
    pad_id: int,
    model_max_len: int,
    max_len: int | None = None,
    max_len_a: float = DEFAULT_MAX_LEN_A,
    max_len_b: int = DEFAULT_MAX_LEN_B,
) -> Tensor:
    """The most tokens (EOS not counted) each sentence may generate: (B, S) -> (B,).

    The limit is min(max_len, floor(a * source length + b), model_max_len - 1), at least 1. The source
    length counts its non-pad tokens, EOS included. `model_max_len - 1` keeps the output plus its EOS
    within the positions the model was trained on, so the positional encoding never overflows.

    Raises:
        ValueError: `max_len` is given and not positive.
    """
    if max_len is not None and max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    src_lengths = (src_ids != pad_id).sum(dim=1)  # (B,)
    limits = (max_len_a * src_lengths + max_len_b).floor().long()
    cap = model_max_len - 1 if max_len is None else min(max_len, model_max_len - 1)
    return limits.clamp(min=1, max=cap)


def start_decoding(model: Transformer, src_ids: Tensor) -> KVCache:
    """Encode a right-padded (B, S) source batch and return a KV cache holding its cross-attention K/V."""
    pad_id = model.config.pad_id
    src_mask = padding_mask(src_ids, pad_id)  # (B, 1, 1, S)
    memory = model.encode(src_ids, src_mask)  # (B, S, D)
    # Without padding the mask allows everything; None lets attention skip applying it at every step.
    return model.init_cache(memory, src_mask if bool((src_ids == pad_id).any()) else None)


def next_token_logits(model: Transformer, tokens: Tensor, cache: KVCache) -> Tensor:
    """Feed each row's newest token (N,) and return its next-token logits (N, V); the cache grows by one."""
    return model.decode(tokens[:, None], None, cache=cache)[:, -1]  # (N, 1, V) -> (N, V)


@dataclass(frozen=True)
class TokenRules:
    """Tokens a search must not generate: never pad or BOS (they are not words), no EOS before `min_len`.

    (MarianMT starts decoding from pad, so there pad and BOS are one id.) An id shared with EOS stays
    allowed once `min_len` tokens were generated.
    """

    banned: Tensor  # (n,) ids that are never generated
    banned_early: Tensor  # (n + 1,) the same and EOS, while fewer than min_len tokens were generated
    min_len: int

    @classmethod
    def of(cls, model: Transformer, *, min_len: int, device: torch.device) -> "TokenRules":
        c = model.config
        banned = sorted({c.pad_id, c.bos_id} - {c.eos_id})
        early = torch.tensor([*banned, c.eos_id], dtype=torch.long, device=device)
        return cls(early[:-1], early, min_len)

    def apply_(self, scores: Tensor, generated: int) -> Tensor:
        """Set banned tokens' scores (N, V) to -inf in place, given `generated` tokens so far."""
        return scores.index_fill_(1, self.banned if generated >= self.min_len else self.banned_early, float("-inf"))


def top_k(scores: Tensor, k: int, *, block: int = 64) -> tuple[Tensor, Tensor]:
    """`scores.topk(k, dim=1)` for (N, L) scores, sorted, found through block maxima.

    Why: on CPU `topk` and `argmax` over a row are not vectorised (about 3 ns per score: 2 ms for the
    64 x 8000 logits of a batch-64 greedy step or the 16 x 32000 of a beam-4 step, a sixth of the
    step), while `amax` is (about 20x faster). The k best scores lie in the k blocks of `block` scores
    with the highest maxima, so an `amax` over all blocks leaves only k * block candidates to rank.
    Small inputs, where the extra calls cost more than they save, go straight to `topk`.
    """
    n, length = scores.shape
    main = length - length % block
    n_blocks = main // block
    if n * length < 16384 or n_blocks <= k:
        return scores.topk(k, dim=1)
    blocks = scores[:, :main].unflatten(1, (n_blocks, block))  # (N, L // block, block), a view
    best = blocks.amax(dim=2).topk(k, dim=1).indices  # (N, k) the blocks holding the k best
    rows = torch.arange(n, device=scores.device)[:, None]  # (N, 1)
    candidates = blocks[rows, best].flatten(1)  # (N, k, block) -> (N, k * block)
    offsets = torch.arange(block, device=scores.device)
    index = (best[:, :, None] * block + offsets).flatten(1)  # (N, k, block) -> (N, k * block)
    if main < length:  # the last L % block scores are candidates too
        tail = torch.arange(main, length, device=scores.device).expand(n, -1)  # (N, L - main)
        candidates = torch.cat([candidates, scores[:, main:]], dim=1)
        index = torch.cat([index, tail], dim=1)
    values, picked = candidates.topk(k, dim=1)  # (N, k)
    return values, index.gather(1, picked)
