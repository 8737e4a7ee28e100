"""What greedy and beam search share: encoding once, output length limits, one constrained decoder step.

Both searches encode the source once, keep one KV-cache row per open hypothesis and feed the decoder
only the newest token of each row per step (`Transformer.init_cache` computes the cross-attention
keys/values once). The paper decodes up to "input length + 50" tokens (section 6.1); we also clamp to
what the model can represent and let the caller set an absolute cap. The rules on what enters and
leaves a search (`fit_source`, `output_limits`, `banned_ids`) serve the CTranslate2 engine too, so both
engines truncate, limit and ban alike.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from torch import Tensor

from tnmt.blocks.kv_cache import KVCache
from tnmt.blocks.masks import padding_mask
from tnmt.config import DecodeConfig, ModelConfig
from tnmt.decode.fast_step import FastDecoder, StaticCache
from tnmt.model import Transformer

if TYPE_CHECKING:
    from tnmt.decode.trace import SearchRecorder

log = logging.getLogger("tnmt")


@dataclass(frozen=True)
class Hypothesis:
    """A finished output of a search: ids without BOS and EOS, its length-penalised score and log-probability."""

    tokens: list[int]
    score: float  # log_prob / lp(len); the ranking key
    log_prob: float  # sum of the token log-probs, EOS included when it was generated


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """GNMT's lp(|Y|) = ((5 + |Y|) / 6) ** alpha (Wu et al., 2016), |Y| counting the words and EOS if generated;
    alpha = 0 ranks by plain log-probability."""
    return ((5 + length) / 6) ** alpha


def fit_source(ids: Sequence[int], *, model_max_len: int, line: int) -> list[int]:
    """The source ids (no EOS) cut to the model's `max_len - 1` positions, so EOS fits in the last one.

    One over-long line must not stop a whole file: it is truncated with a one-line warning naming it by its
    1-based `line` number.
    """
    keep = model_max_len - 1
    if len(ids) > keep:
        log.warning(
            f"line {line}: {len(ids)} source tokens exceed the model's max_len ({model_max_len} positions,"
            f" EOS included); translating the first {keep}"
        )
    return list(ids[:keep])


def output_limits(src_lengths: Tensor, *, model_max_len: int, decode: DecodeConfig) -> Tensor:
    """The most tokens (EOS not counted) each sentence may generate: source lengths (B,) -> (B,).

    The limit is min(max_len, floor(a * source length + b), model_max_len - 1), at least 1, where the
    source length counts its tokens and EOS. `model_max_len - 1` keeps the output plus its EOS within
    the positions the model was trained on, so the positional encoding never overflows.
    """
    cap = model_max_len - 1 if not decode.max_len else min(decode.max_len, model_max_len - 1)
    # capped before the cast to int64, so that a huge a or b gives the cap rather than an overflow
    limits = (decode.max_len_a * src_lengths + min(decode.max_len_b, cap)).clamp(max=cap).floor().long()
    return limits.clamp(min=1)


def banned_ids(config: ModelConfig) -> list[int]:
    """Ids a search never generates: pad and BOS are not words. (MarianMT starts decoding from pad, so
    there pad and BOS are one id.) An id shared with EOS stays allowed."""
    return sorted({config.pad_id, config.bos_id} - {config.eos_id})


def start_decoding(model: Transformer, src_ids: Tensor, *, fast_capacity: int = 0) -> "KVCache | StaticCache":
    """Encode a right-padded (B, S) source batch and return a KV cache holding its cross-attention K/V.

    `fast_capacity` > 0 asks for the fast step (decode/fast_step.py) with room for that many target
    positions (the search's length limit); a model it does not cover gets the module path's cache.
    """
    if fast_capacity and FastDecoder.supports(model):
        return FastDecoder(model).start(src_ids, capacity=fast_capacity)
    pad_id = model.config.pad_id
    src_mask = padding_mask(src_ids, pad_id)  # (B, 1, 1, S)
    memory = model.encode(src_ids, src_mask)  # (B, S, D)
    # Without padding the mask allows everything; None lets attention skip applying it at every step.
    return model.init_cache(memory, src_mask if bool((src_ids == pad_id).any()) else None)


def next_token_logits(
    model: Transformer, tokens: Tensor, cache: "KVCache | StaticCache", recorder: "SearchRecorder | None" = None
) -> Tensor:
    """Feed each row's newest token (N,) and return its next-token logits (N, V); the cache grows by one.

    With a `recorder` (a traced search, decode/trace.py) the step's cross-attention goes to it as well;
    without one the step costs what it always did. A `StaticCache` steps itself (the fast step).
    """
    if isinstance(cache, StaticCache):
        return cache.step(tokens)
    if recorder is None:
        return model.decode(tokens[:, None], None, cache=cache)[:, -1]  # (N, 1, V) -> (N, V)
    logits, cross = model.decode_with_attention(tokens[:, None], cache)
    recorder.attention(torch.stack([layer[:, :, -1] for layer in cross]))  # L x (N, H, 1, S) -> (L, N, H, S)
    return logits[:, -1]


@dataclass(frozen=True)
class TokenRules:
    """Tokens a search must not generate: never `banned_ids`, no EOS before `min_len`."""

    banned: Tensor  # (n,) ids that are never generated
    banned_early: Tensor  # (n + 1,) the same and EOS, while fewer than min_len tokens were generated
    min_len: int

    @classmethod
    def of(cls, model: Transformer, *, min_len: int, device: torch.device) -> "TokenRules":
        early = torch.tensor([*banned_ids(model.config), model.config.eos_id], dtype=torch.long, device=device)
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
