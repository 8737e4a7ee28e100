import itertools
import random

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tnmt.data.batching import TokenBatchSampler, collate


def lists(batches: list[np.ndarray]) -> list[list[int]]:
    assert all(isinstance(batch, np.ndarray) and batch.dtype == np.int64 for batch in batches)
    return [batch.tolist() for batch in batches]


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
        batches = lists(sampler.batches(epoch))
        check_epoch(batches, lengths, 4096)
        assert len(batches) == len(sampler)


def test_batches_group_similar_lengths(lengths: list[int]) -> None:
    """Each batch is a run of the length-sorted order: the length ranges of two batches never overlap."""
    batches = lists(TokenBatchSampler(lengths, max_tokens=4096, seed=1).batches(0))
    spans = sorted((min(lengths[i] for i in b), max(lengths[i] for i in b)) for b in batches)
    assert all(hi <= next_lo for (_, hi), (next_lo, _) in itertools.pairwise(spans))
    padded = sum(len(b) * max(lengths[i] for i in b) for b in batches)
    assert padded < 1.02 * sum(lengths)


def test_deterministic_per_seed_and_epoch_and_different_across_epochs(lengths: list[int]) -> None:
    sampler = TokenBatchSampler(lengths, max_tokens=4096, seed=1)
    again = TokenBatchSampler(lengths, max_tokens=4096, seed=1)
    assert lists(sampler.batches(3)) == lists(again.batches(3)) == lists(sampler.batches(3))
    assert lists(sampler.batches(3)) != lists(sampler.batches(4))
    assert sorted(map(sorted, lists(sampler.batches(3)))) != sorted(map(sorted, lists(sampler.batches(4)))), (
        "same groups"
    )
    assert lists(sampler.batches(3)) != lists(TokenBatchSampler(lengths, max_tokens=4096, seed=2).batches(3))


def test_resume_needs_only_epoch_and_batch_index(lengths: list[int]) -> None:
    sampler = TokenBatchSampler(lengths, max_tokens=4096, seed=7)
    seen = lists(sampler.batches(2))[:10]
    resumed = lists(TokenBatchSampler(lengths, max_tokens=4096, seed=7).batches(2))[10:]
    assert seen + resumed == lists(sampler.batches(2))


def test_without_shuffle_batches_are_sorted_and_fixed(lengths: list[int]) -> None:
    sampler = TokenBatchSampler(lengths, max_tokens=4096, seed=1, shuffle=False)
    batches = lists(sampler.batches(0))
    assert batches == lists(sampler.batches(5))
    order = [i for batch in batches for i in batch]
    assert order == sorted(range(len(lengths)), key=lengths.__getitem__)


def test_overlong_example_gets_a_batch_of_its_own() -> None:
    sampler = TokenBatchSampler([3, 50, 3, 3, 20], max_tokens=10, seed=0)
    for epoch in range(5):
        batches = lists(sampler.batches(epoch))
        assert [1] in batches and [4] in batches
        assert sorted(map(sorted, batches)) == [[0, 2, 3], [1], [4]]


def test_batches_are_cut_only_where_the_next_example_would_break_the_budget(lengths: list[int]) -> None:
    """Greedy cutting of the sorted order: a batch never stops while the next example still fits."""
    batches = lists(TokenBatchSampler(lengths, max_tokens=4096, seed=1, shuffle=False).batches(0))
    for batch, following in itertools.pairwise(batches):
        longest = max(lengths[i] for i in batch + following[:1])
        assert (len(batch) + 1) * longest > 4096


def greedy(order: list[int], lengths: list[int], max_tokens: int) -> list[list[int]]:
    """The reference cutting rule, one example at a time: close the batch when the next one would break the budget."""
    batches: list[list[int]] = []
    for i in order:
        if batches and (len(batches[-1]) + 1) * max(lengths[j] for j in [*batches[-1], i]) <= max_tokens:
            batches[-1].append(i)
        else:
            batches.append([i])
    return batches


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(1, 40), max_size=200), max_tokens=st.integers(1, 120))
def test_binary_search_cuts_equal_the_greedy_rule(lengths: list[int], max_tokens: int) -> None:
    batches = lists(TokenBatchSampler(lengths, max_tokens=max_tokens, seed=0, shuffle=False).batches(0))
    assert batches == greedy(sorted(range(len(lengths)), key=lengths.__getitem__), lengths, max_tokens)


def test_numpy_lengths_give_the_same_batches_as_a_list(lengths: list[int]) -> None:
    as_array = TokenBatchSampler(np.array(lengths, dtype=np.int32), max_tokens=4096, seed=3)
    as_list = TokenBatchSampler(lengths, max_tokens=4096, seed=3)
    assert len(as_array) == len(as_list)
    assert lists(as_array.batches(1)) == lists(as_list.batches(1))


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        TokenBatchSampler([3], max_tokens=0, seed=0)
    with pytest.raises(ValueError, match="at least 1"):
        TokenBatchSampler([3, 0], max_tokens=10, seed=0)
    assert lists(TokenBatchSampler([], max_tokens=10, seed=0).batches(0)) == []


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
    batches = lists(sampler.batches(epoch))
    check_epoch(batches, lengths, max_tokens)
    assert len(batches) == len(sampler)
    assert batches == lists(sampler.batches(epoch))


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


def test_collate_builds_no_alignment_without_links() -> None:
    assert collate([([5, 6], [8])], pad_id=0, bos_id=1, eos_id=2).alignment is None


def test_the_alignment_spreads_each_target_rows_links_evenly_and_sends_unlinked_tokens_to_the_source_eos() -> None:
    pairs = [([5, 6, 7], [8, 9]), ([10], [11, 12, 13])]
    links = [
        np.array([[0, 0], [2, 0], [1, 1]]),  # target 0 <- sources 0 and 2; target 1 <- source 1
        np.array([[0, 2]]),  # only target 2 is aligned (to source 0); targets 0 and 1 have no link
    ]
    batch = collate(pairs, pad_id=0, bos_id=1, eos_id=2, links=links)
    assert batch.alignment.shape == (2, 4, 4)  # (B, T, S): tgt_out and src, EOS and padding included
    half = 0.5
    assert batch.alignment[0].tolist() == [
        [half, 0, half, 0],  # row t = tgt_out position t: the step that predicts target token t
        [0, 1, 0, 0],
        [0, 0, 0, 1],  # EOS: toward the source's EOS (position 3)
        [0, 0, 0, 0],  # padding
    ]
    # pair 1: its source EOS is position 1 (the rest of S is padding); targets 0, 1 and EOS have no link
    assert batch.alignment[1].tolist() == [[0, 1, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]]
    assert batch.alignment.dtype == torch.float32


def test_an_alignment_without_any_link_is_all_zero() -> None:
    empty = np.zeros((0, 2), dtype=np.int64)
    batch = collate([([5], [8])], pad_id=0, bos_id=1, eos_id=2, links=[empty])
    assert batch.alignment.shape == (1, 2, 2) and not batch.alignment.any()
