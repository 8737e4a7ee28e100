import itertools
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tnmt.data.batching import TokenBatchSampler, collate


def check_epoch(batches: list[list[int]], lengths: list[int], max_tokens: int) -> None:
    """Every index exactly once; a batch over budget only if it is a single over-long example."""
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        assert batch
        assert len(batch) * max(lengths[i] for i in batch) <= max_tokens or len(batch) == 1


@pytest.fixture(scope="module")
def lengths() -> list[int]:
    """Lengths shaped like Multi30k's: 29k sentences of 5 to 60 tokens."""
    rng = random.Random(0)
    return [min(60, max(5, int(rng.gauss(18, 7)))) for _ in range(29_000)]


def test_epoch_covers_every_index_once_within_budget(lengths: list[int]) -> None:
    sampler = TokenBatchSampler(lengths, max_tokens=4096, seed=1)
    for epoch in range(3):
        batches = sampler.batches(epoch)
        check_epoch(batches, lengths, 4096)
        assert len(batches) == len(sampler)


def test_batches_group_similar_lengths(lengths: list[int]) -> None:
    """Each batch is a run of the length-sorted order: the length ranges of two batches never overlap."""
    batches = TokenBatchSampler(lengths, max_tokens=4096, seed=1).batches(0)
    spans = sorted((min(lengths[i] for i in b), max(lengths[i] for i in b)) for b in batches)
    assert all(hi <= next_lo for (_, hi), (next_lo, _) in itertools.pairwise(spans))
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    assert padded < 1.02 * sum(lengths)


def test_deterministic_per_seed_and_epoch_and_different_across_epochs(lengths: list[int]) -> None:
    sampler = TokenBatchSampler(lengths, max_tokens=4096, seed=1)
    again = TokenBatchSampler(lengths, max_tokens=4096, seed=1)
    assert sampler.batches(3) == again.batches(3) == sampler.batches(3)
    assert sampler.batches(3) != sampler.batches(4)
    assert sorted(map(sorted, sampler.batches(3))) != sorted(map(sorted, sampler.batches(4))), "same groups"
    assert sampler.batches(3) != TokenBatchSampler(lengths, max_tokens=4096, seed=2).batches(3)


def test_resume_needs_only_epoch_and_batch_index(lengths: list[int]) -> None:
    sampler = TokenBatchSampler(lengths, max_tokens=4096, seed=7)
    seen = sampler.batches(2)[:10]
    resumed = TokenBatchSampler(lengths, max_tokens=4096, seed=7).batches(2)[10:]
    assert seen + resumed == sampler.batches(2)


def test_without_shuffle_batches_are_sorted_and_fixed(lengths: list[int]) -> None:
    sampler = TokenBatchSampler(lengths, max_tokens=4096, seed=1, shuffle=False)
    batches = sampler.batches(0)
    assert batches == sampler.batches(5)
    order = [i for batch in batches for i in batch]
    assert order == sorted(range(len(lengths)), key=lengths.__getitem__)


def test_overlong_example_gets_a_batch_of_its_own() -> None:
    sampler = TokenBatchSampler([3, 50, 3, 3, 20], max_tokens=10, seed=0)
    for epoch in range(5):
        batches = sampler.batches(epoch)
        assert [1] in batches and [4] in batches
        assert sorted(map(sorted, batches)) == [[0, 2, 3], [1], [4]]


def test_batches_are_cut_only_where_the_next_example_would_break_the_budget(lengths: list[int]) -> None:
    """Greedy cutting of the sorted order: a batch never stops while the next example still fits."""
    batches = TokenBatchSampler(lengths, max_tokens=4096, seed=1, shuffle=False).batches(0)
    for batch, following in itertools.pairwise(batches):
        longest = max(lengths[i] for i in batch + following[:1])
        assert (len(batch) + 1) * longest > 4096


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        TokenBatchSampler([3], max_tokens=0, seed=0)
    with pytest.raises(ValueError, match="at least 1"):
        TokenBatchSampler([3, 0], max_tokens=10, seed=0)
    assert TokenBatchSampler([], max_tokens=10, seed=0).batches(0) == []


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 40), max_size=200),
    max_tokens=st.integers(1, 120),
    seed=st.integers(0, 2**32),
    epoch=st.integers(0, 1000),
    shuffle=st.booleans(),
)
def test_property_every_index_once_within_budget(
    lengths: list[int], max_tokens: int, seed: int, epoch: int, shuffle: bool
) -> None:
    sampler = TokenBatchSampler(lengths, max_tokens=max_tokens, seed=seed, shuffle=shuffle)
    batches = sampler.batches(epoch)
    check_epoch(batches, lengths, max_tokens)
    assert len(batches) == len(sampler)
    assert batches == sampler.batches(epoch)


def test_collate_shifts_target_and_pads() -> None:
    pad, bos, eos = 0, 1, 2
    batch = collate([([5, 6, 7], [8]), ([9], [10, 11, 12])], pad_id=pad, bos_id=bos, eos_id=eos)
    assert batch.src.tolist() == [[5, 6, 7, eos], [9, eos, pad, pad]]
    assert batch.tgt_in.tolist() == [[bos, 8, pad, pad], [bos, 10, 11, 12]]
    assert batch.tgt_out.tolist() == [[8, eos, pad, pad], [10, 11, 12, eos]]
    assert batch.n_tgt_tokens == 6
    assert batch.src.dtype == batch.tgt_in.dtype == batch.tgt_out.dtype == torch.long


def test_collate_empty_target_and_marian_style_ids() -> None:
    """MarianMT starts decoding from the pad id: the first tgt_in column must still be it."""
    batch = collate([([4], [])], pad_id=7, bos_id=7, eos_id=0)
    assert batch.tgt_in.tolist() == [[7]] and batch.tgt_out.tolist() == [[0]]
    assert batch.n_tgt_tokens == 1
    with pytest.raises(ValueError, match="empty batch"):
        collate([], pad_id=0, bos_id=1, eos_id=2)
