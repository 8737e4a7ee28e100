"""Batching by token budget (section 5.1 of the paper).

"Sentence pairs were batched together by approximate sequence length. Each training batch contained
a set of sentence pairs containing approximately 25000 source tokens and 25000 target tokens." A
fixed number of *sentences* per batch would waste most of each batch on padding and make the memory
use swing with sentence length; grouping similar lengths under a token budget avoids both.

The batches of an epoch are a pure function of (lengths, max_tokens, seed, epoch), so resuming a run
needs only the epoch and the index of the next batch; the sampler holds no iteration state.
"""

import random
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor


@dataclass(frozen=True)
class Batch:
    """Padded id tensors for one training step (teacher forcing)."""

    src: Tensor  # (B, S) source ids + EOS, right-padded
    tgt_in: Tensor  # (B, T) BOS + target ids: what the decoder reads
    tgt_out: Tensor  # (B, T) target ids + EOS: what it must predict, position by position
    n_tgt_tokens: int  # non-pad positions of tgt_out, to normalise the loss per token


class TokenBatchSampler:
    """Groups example indices into batches of similar length under a padded-token budget.

    Per epoch: sort by length (ties broken randomly, so batches differ between epochs), cut the
    sorted order into batches with `len(batch) * longest <= max_tokens`, then shuffle the batches.
    An example longer than `max_tokens` gets a batch of its own rather than an error, because
    evaluation must translate every sentence; drop such pairs from training data with
    `corpus.filter_pairs`.

    Args:
        lengths: Cost of each example, `max(len(src), len(tgt))` counting the added BOS/EOS.
        max_tokens: Budget of padded tokens per batch (the paper's 25000 corresponds to this).
        seed: With the epoch, fixes the batches.
        shuffle: False gives the same length-sorted batches every epoch, for evaluation.
    """

    def __init__(self, lengths: Sequence[int], *, max_tokens: int, seed: int, shuffle: bool = True) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        if lengths and min(lengths) < 1:
            raise ValueError("every example needs a length of at least 1 (its EOS)")
        self._lengths = list(lengths)
        self._max_tokens = max_tokens
        self._seed = seed
        self._shuffle = shuffle
        # The batch count depends only on the sorted lengths, not on how ties are broken.
        self._num_batches = len(self._chunk(sorted(range(len(self._lengths)), key=self._lengths.__getitem__)))

    def __len__(self) -> int:
        """Number of batches, the same for every epoch."""
        return self._num_batches

    def batches(self, epoch: int) -> list[list[int]]:
        """The batches of `epoch`: every index exactly once, in the order training should use them."""
        order = list(range(len(self._lengths)))
        if not self._shuffle:
            return self._chunk(sorted(order, key=self._lengths.__getitem__))
        # A string seed is hashed with SHA-512: stable across runs, platforms and PYTHONHASHSEED.
        rng = random.Random(f"tnmt-batches/{self._seed}/{epoch}")
        rng.shuffle(order)
        order.sort(key=self._lengths.__getitem__)  # stable: equal lengths keep their random order
        batches = self._chunk(order)
        rng.shuffle(batches)
        return batches

    def _chunk(self, order: list[int]) -> list[list[int]]:
        """Cut `order` greedily into batches whose padded size stays within the budget."""
        batches: list[list[int]] = []
        batch: list[int] = []
        longest = 0
        for i in order:
            longest_with_i = max(longest, self._lengths[i])
            if batch and (len(batch) + 1) * longest_with_i > self._max_tokens:
                batches.append(batch)
                batch, longest_with_i = [], self._lengths[i]
            batch.append(i)
            longest = longest_with_i
        if batch:
            batches.append(batch)
        return batches


def collate(pairs: Sequence[tuple[list[int], list[int]]], *, pad_id: int, bos_id: int, eos_id: int) -> Batch:
    """Pad (source ids, target ids) pairs into a `Batch`.

    The source gets EOS and no BOS (the encoder needs no start symbol, as in fairseq and MarianMT).
    The target is shifted: the decoder reads BOS + y and predicts y + EOS, so position t learns
    p(y_t | y_<t, x).
    """
    if not pairs:
        raise ValueError("cannot collate an empty batch")
    src = _pad([s + [eos_id] for s, _ in pairs], pad_id)  # (B, S)
    tgt_in = _pad([[bos_id] + t for _, t in pairs], pad_id)  # (B, T)
    tgt_out = _pad([t + [eos_id] for _, t in pairs], pad_id)  # (B, T)
    return Batch(src=src, tgt_in=tgt_in, tgt_out=tgt_out, n_tgt_tokens=int((tgt_out != pad_id).sum()))


def _pad(rows: list[list[int]], pad_id: int) -> Tensor:
    width = max(len(row) for row in rows)
    return torch.tensor([row + [pad_id] * (width - len(row)) for row in rows], dtype=torch.long)
