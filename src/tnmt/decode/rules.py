"""The rules on what enters and leaves a search: the source cut to the model, the output's length limits and the
tokens never generated.

The paper decodes up to "input length + 50" tokens (section 6.1); we also clamp to what the model can
represent and let the caller set an absolute cap. These rules serve the CTranslate2 engine too, so both
engines truncate, limit and ban alike.
"""

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from tnmt.config import DecodeConfig, ModelConfig

log = logging.getLogger("tnmt")


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
    """Ids a search never generates: pad, BOS and a multilingual model's target-language tags are not words.
    (MarianMT starts decoding from pad, so there pad and BOS are one id.) An id shared with EOS stays allowed."""
    return sorted({config.pad_id, config.bos_id, *config.language_ids} - {config.eos_id})


def start_tokens(starts: Tensor | None, batch: int, bos_id: int, device: torch.device) -> Tensor:
    """(B,) the first decoder input of each sentence: its own (a multilingual model's target-language tag,
    tnmt/directions.py), or BOS for every sentence."""
    if starts is None:
        return torch.full((batch,), bos_id, dtype=torch.long, device=device)
    if starts.shape != (batch,):
        raise ValueError(f"need one start token per sentence: {tuple(starts.shape)} for {batch} sentences")
    return starts.to(device=device, dtype=torch.long)


@dataclass(frozen=True)
class TokenRules:
    """Tokens a search must not generate: never `banned_ids`, no EOS before `min_len`."""

    banned: Tensor  # (n,) ids that are never generated
    banned_early: Tensor  # (n + 1,) the same and EOS, while fewer than min_len tokens were generated
    min_len: int

    @classmethod
    def of(cls, config: ModelConfig, *, min_len: int, device: torch.device) -> "TokenRules":
        early = torch.tensor([*banned_ids(config), config.eos_id], dtype=torch.long, device=device)
        return cls(early[:-1], early, min_len)

    def apply_(self, scores: Tensor, generated: int) -> Tensor:
        """Set banned tokens' scores (N, V) to -inf in place, given `generated` tokens so far."""
        return scores.index_fill_(1, self.banned if generated >= self.min_len else self.banned_early, float("-inf"))
