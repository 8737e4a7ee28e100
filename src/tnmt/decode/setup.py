"""What greedy and beam search prepare before their first step, written once for both: the batch encoded, each
sentence's length limit, the token rules, its constraints and their bans, the first decoder inputs, the bound
decoder and the KV cache. A new start-up step (a start token, a plan) goes here, so neither search can forget it.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from torch import Tensor

from tnmt.blocks.kv_cache import KVCache
from tnmt.config import DecodeConfig
from tnmt.decode.bans import Bans
from tnmt.decode.constraints import NO_CONSTRAINTS, Constraints
from tnmt.decode.rules import TokenRules, output_limits, start_tokens
from tnmt.decode.trace import SearchRecorder
from tnmt.model import BoundDecoder, EncodedSource, Transformer


@dataclass(frozen=True)
class SearchSetup:
    """One batch's search before its first step (`set_up`)."""

    source: EncodedSource
    limits: Tensor  # (B,) most tokens each sentence may generate (`rules.output_limits`)
    rules: TokenRules
    constraints: list[Constraints]  # (B) each sentence's, `NO_CONSTRAINTS` where none were given
    bans: Bans
    inputs: Tensor  # (B,) each sentence's first decoder input: BOS or its target-language tag
    decoder: BoundDecoder
    cache: KVCache  # over the sources, one row per sentence, with room for the longest output


def set_up(
    model: Transformer,
    src: Tensor | EncodedSource,
    decode: DecodeConfig,
    *,
    recorder: SearchRecorder | None,
    decoder: BoundDecoder | None,
    constraints: Sequence[Constraints] | None,
    starts: Tensor | None,
) -> SearchSetup:
    """Everything a search over right-padded source ids (B, S), or the batch encoded already, needs before its
    first step; the arguments are the searches' own (decode/greedy.py's `greedy_hypotheses`).

    Raises:
        ValueError: a recorder for more than one sentence, or not one `Constraints` (or start token) per sentence.
    """
    c = model.config
    source = src if isinstance(src, EncodedSource) else model.encode_for_decoding(src)
    device, batch = source.lengths.device, source.batch_size
    if recorder is not None and batch != 1:
        raise ValueError(f"a recorder follows one sentence, got a batch of {batch}")
    constraints = list(constraints) if constraints is not None else [NO_CONSTRAINTS] * batch
    if len(constraints) != batch:
        raise ValueError(f"need one Constraints per sentence: {len(constraints)} for {batch} sentences")
    limits = output_limits(source.lengths, model_max_len=c.max_len, decode=decode)  # (B,)
    return SearchSetup(
        source=source,
        limits=limits,
        rules=TokenRules.of(c, min_len=decode.min_len, device=device),
        constraints=constraints,
        bans=Bans(constraints, block_loops=decode.block_loops, device=device),
        inputs=start_tokens(starts, batch, c.bos_id, device),
        decoder=decoder or model.incremental_decoder(),
        cache=source.cache(int(limits.max())),
    )
