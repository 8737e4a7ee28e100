"""Batching by token budget (section 5.1 of the paper).

"Sentence pairs were batched together by approximate sequence length. Each training batch contained
a set of sentence pairs containing approximately 25000 source tokens and 25000 target tokens." A
fixed number of *sentences* per batch would waste most of each batch on padding and make the memory
use swing with sentence length; grouping similar lengths under a token budget avoids both.

The batches of an epoch are a pure function of (lengths, max_tokens, seed, epoch), so resuming a run
needs only the epoch and the index of the next batch; the sampler holds no iteration state.

With guided alignment a batch also carries its pairs' word alignments as one distribution over the source
per target token (`alignment_matrix`); without it, nothing is built.
"""

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor


@dataclass(frozen=True)
class Batch:
    """Padded id tensors for one training step (teacher forcing)."""

    src: Tensor  # (B, S) source ids + EOS, right-padded
    tgt_in: Tensor  # (B, T) BOS + target ids: what the decoder reads
    tgt_out: Tensor  # (B, T) target ids + EOS: what it must predict, position by position
    n_tgt_tokens: int  # non-pad positions of tgt_out, to normalise the loss per token
    alignment: Tensor | None = None  # (B, T, S) guided alignment's target, by tgt_out position (`alignment_matrix`)


class TokenBatchSampler:
    """Groups example indices into batches of similar length under a padded-token budget.

    Per epoch: sort by length (ties broken randomly, so batches differ between epochs), cut the
    sorted order into batches with `len(batch) * longest <= max_tokens`, then shuffle the batches.
    An example longer than `max_tokens` gets a batch of its own rather than an error, because
    evaluation must translate every sentence; drop such pairs from training data with
    `corpus.filter_pairs`. Everything runs on numpy arrays: an epoch of 4.5M pairs takes about a second.

    Args:
        lengths: (N,) cost of each example, `max(len(src), len(tgt))` counting the added BOS/EOS.
        max_tokens: Budget of padded tokens per batch (the paper's 25000 corresponds to this).
        seed: With the epoch, fixes the batches.
        shuffle: False gives the same length-sorted batches every epoch, for evaluation.
    """

    def __init__(
        self, lengths: Sequence[int] | np.ndarray, *, max_tokens: int, seed: int, shuffle: bool = True
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        self._lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)  # (N,)
        if len(self._lengths) and self._lengths.min() < 1:
            raise ValueError("every example needs a length of at least 1 (its EOS)")
        self._max_tokens = max_tokens
        self._seed = seed
        self._shuffle = shuffle
        # The batch count depends only on the sorted lengths, not on how ties are broken.
        self._num_batches = len(self._cuts(np.sort(self._lengths))) + bool(len(self._lengths))

    def __len__(self) -> int:
        """Number of batches, the same for every epoch."""
        return self._num_batches

    def batches(self, epoch: int) -> list[np.ndarray]:
        """The batches of `epoch`, arrays of indices: every index exactly once, in the order training uses them."""
        if not len(self._lengths):
            return []
        if not self._shuffle:
            order = np.argsort(self._lengths, kind="stable")
            return np.split(order, self._cuts(self._lengths[order]))
        # A string hashed with SHA-256 seeds the generator: stable across runs, platforms and numpy versions.
        digest = hashlib.sha256(f"tnmt-batches/{self._seed}/{epoch}".encode()).digest()
        rng = np.random.Generator(np.random.PCG64(int.from_bytes(digest[:16], "little")))
        order = rng.permutation(len(self._lengths))
        order = order[np.argsort(self._lengths[order], kind="stable")]  # equal lengths keep their random order
        batches = np.split(order, self._cuts(self._lengths[order]))
        return [batches[i] for i in rng.permutation(len(batches))]

    def _cuts(self, sorted_lengths: np.ndarray) -> list[int]:
        """Where to cut ascending lengths greedily so that each batch's padded size stays within the budget.

        In ascending order a batch's longest example is its last, so the batch starting at `start` ends
        before the first `end` with `(end - start + 1) * lengths[end] > max_tokens`; that product grows
        with `end`, so a binary search finds it: a few steps per batch, not one per example.
        """
        cuts, start, n = [], 0, len(sorted_lengths)
        while start < n:
            # A batch holds at least one example, and at most max_tokens // lengths[start] (its shortest).
            lo, hi = start + 1, min(n, start + max(1, self._max_tokens // int(sorted_lengths[start])))
            while lo < hi:
                mid = (lo + hi) // 2
                if (mid - start + 1) * int(sorted_lengths[mid]) > self._max_tokens:
                    hi = mid
                else:
                    lo = mid + 1
            if lo < n:
                cuts.append(lo)
            start = lo
        return cuts


def collate(
    pairs: Sequence[tuple[list[int], list[int]]],
    *,
    pad_id: int,
    bos_id: int,
    eos_id: int,
    links: Sequence[np.ndarray] | None = None,
    pad_multiple: int = 1,
    starts: Sequence[int] | None = None,
) -> Batch:
    """Pad (source ids, target ids) pairs into a `Batch`, with each pair's `links` (`alignment_matrix`) if given.

    The source gets EOS and no BOS (the encoder needs no start symbol, as in fairseq and MarianMT).
    The target is shifted: the decoder reads BOS + y and predicts y + EOS, so position t learns
    p(y_t | y_<t, x). `pad_multiple`: S and T are padded up to a multiple of it (a compiled training step's
    kernels see sizes divisible by it, train/compiled.py); padding changes no loss, masks hide it.
    `starts`: each pair's first decoder input in place of BOS (a multilingual model's target-language tag,
    tnmt/directions.py).
    """
    if not pairs:
        raise ValueError("cannot collate an empty batch")
    src = _pad([s + [eos_id] for s, _ in pairs], pad_id, pad_multiple)  # (B, S)
    starts = [bos_id] * len(pairs) if starts is None else starts
    tgt_in = _pad([[start, *t] for start, (_, t) in zip(starts, pairs, strict=True)], pad_id, pad_multiple)  # (B, T)
    tgt_out = _pad([t + [eos_id] for _, t in pairs], pad_id, pad_multiple)  # (B, T)
    alignment = None
    if links is not None:
        lengths = [(len(s), len(t)) for s, t in pairs]
        alignment = alignment_matrix(links, lengths, tgt_len=tgt_out.size(1), src_len=src.size(1))
    n_tgt_tokens = int((tgt_out != pad_id).sum())
    return Batch(src=src, tgt_in=tgt_in, tgt_out=tgt_out, n_tgt_tokens=n_tgt_tokens, alignment=alignment)


def alignment_matrix(
    links: Sequence[np.ndarray], lengths: Sequence[tuple[int, int]], *, tgt_len: int, src_len: int
) -> Tensor:
    """(B, T, S): row t of pair b spreads 1 evenly over the source positions target token t is linked to.

    `links[b]` (L, 2) holds pair b's (source position, target position) links, positions of its ids without
    BOS/EOS (`PreparedPairs.links`); `lengths[b]` its (source, target) lengths without EOS. Row t belongs to
    the position that *predicts* target token t (tgt_out's), so the attention trained is the one that writes
    the word, not the one that reads it. A target token the aligner left unaligned (a function word with no
    counterpart, and EOS) is trained toward the source's EOS: attention rests there when it has nowhere better
    to go, and the alignment read from the head (translate/evidence.py) leaves a token pointing at EOS unaligned,
    so the head learns to say "no link" instead of guessing a neighbour. A pair without any link (a subword
    sample whose words differ from the aligned ones) and padding stay zero: the loss ignores them.
    """
    # numpy, not torch: these small ops cost microseconds, where torch's thread pool took milliseconds on a busy host
    matrix = np.zeros((len(links), tgt_len, src_len), dtype=np.float32)  # (B, T, S)
    rows = np.repeat(np.arange(len(links)), [len(pair) for pair in links])
    if len(rows):
        src, tgt = np.concatenate(links).T
        matrix[rows, tgt, src] = 1.0
    for b, ((src_length, tgt_length), pair) in enumerate(zip(lengths, links, strict=True)):
        if len(pair):
            unlinked = ~matrix[b, : tgt_length + 1].any(axis=1)  # (tgt_length + 1,): the tokens and EOS
            matrix[b, : tgt_length + 1][unlinked, src_length] = 1.0
    matrix /= np.maximum(matrix.sum(axis=2, keepdims=True), 1.0)
    return torch.from_numpy(matrix)


def _pad(rows: list[list[int]], pad_id: int, multiple: int = 1) -> Tensor:
    width = -(-max(len(row) for row in rows) // multiple) * multiple
    return torch.tensor([row + [pad_id] * (width - len(row)) for row in rows], dtype=torch.long)
