"""A vocabulary shortlist: the output projection over the target pieces a batch's sources can lead to.

Why: the pre-softmax projection is the largest product of a decoder step. At one row it reads all its (V, D)
weights for one row of logits, 4 MB for Multi30k's 8,000 pieces at d_model 128: ~210 us of a ~830 us step (AMX
Xeon, one thread, `benchmarks/speed/decode.py`). A sentence's translation uses a few hundred of the V pieces, and
which ones is predictable from its source: Marian's and Bergamot's lexical shortlists, CTranslate2's vocabulary
map. The search projects onto those alone.

What the list holds (`Shortlist.learn`, from the training pairs' ids): for each source piece, the `TRANSLATIONS`
target pieces most associated with it, by the Dice coefficient of the pairs they occur in,
2 c(s, t) / (c(s) + c(t)) (each piece counted once per pair, so a frequent word does not associate with everything
by sheer count), and the `FREQUENT` most common target pieces (function words, punctuation: what any sentence may
need). A batch's candidates (`candidates`) are the union over its source pieces, the frequent ones and the ids its
caller names (EOS, a constraint's forms, a forced prefix: what steering must be able to write).

The search still sees the whole vocabulary: its projection (`translate.frozen.ShortlistProjection`) writes -inf
outside the candidates, so the length rules, bans, constraints and the recorder work on vocabulary ids unchanged,
and the softmax normalises over the candidates, as Marian's does. A batch whose candidates are more than a quarter
of the vocabulary (`USEFUL_SHARE`) is projected in full: writing the -inf around them then costs more than the
smaller product saves (beam 4 at batch 64: 0.86x with half the vocabulary, AMX Xeon). Off unless asked for
(`DecodeConfig.shortlist`): a search that may not write every piece can translate otherwise, and does for one
sentence in five at batch 1 (benchmarks/quality/shortlist.py).

Stored beside the weights of a checkpoint as `shortlist.safetensors` (two integer tensors); `tnmt shortlist` adds
one to a checkpoint trained before shortlists existed.
"""

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_tensors
from safetensors.torch import save as save_tensors
from torch import Tensor

from tnmt.data.dataset import TrainingPairs
from tnmt.errors import UserError
from tnmt.io import atomic_write_bytes

SHORTLIST_FILE = "shortlist.safetensors"
TRANSLATIONS = 32  # target pieces kept per source piece
FREQUENT = 256  # the most common target pieces, in every batch's candidates
LEARN_PAIRS = 500_000  # pairs counted at most (evenly spaced over the corpus): counts settle long before
USEFUL_SHARE = 0.25  # candidates past this share of the vocabulary: the batch is projected in full


class Shortlist:
    """Per source piece its likely target pieces, and the frequent target pieces; see the module docstring."""

    def __init__(self, translations: Tensor, frequent: Tensor, *, target_vocab_size: int) -> None:
        """`translations` (V_src, k) int64 target ids per source piece, -1 padding; `frequent` (F,) int64."""
        if translations.dim() != 2 or frequent.dim() != 1:
            raise ValueError("translations must be (source vocabulary, k) and frequent (F,)")
        ids = torch.cat([translations.reshape(-1), frequent]).long()
        if ids.numel() and (int(ids.max()) >= target_vocab_size or int(ids.min()) < -1 or bool((frequent < 0).any())):
            raise ValueError(f"shortlist ids must be target ids below {target_vocab_size} (-1: padding)")
        self.translations = translations.long()
        self.frequent = frequent.long()
        self.target_vocab_size = target_vocab_size

    @classmethod
    def learn(
        cls,
        pairs: Iterable[tuple[Sequence[int], Sequence[int]]],
        *,
        source_vocab_size: int,
        target_vocab_size: int,
        translations: int = TRANSLATIONS,
        frequent: int = FREQUENT,
    ) -> "Shortlist":
        """Count the pairs' pieces (source ids, target ids; without BOS/EOS) and keep, per source piece, the
        `translations` target pieces of highest Dice coefficient, and the `frequent` most common target pieces."""
        keys, src_counts, tgt_counts = [], np.zeros(source_vocab_size, np.int64), np.zeros(target_vocab_size, np.int64)
        for src, tgt in pairs:
            s, t = np.unique(np.asarray(src, np.int64)), np.unique(np.asarray(tgt, np.int64))
            src_counts[s] += 1
            tgt_counts[t] += 1
            keys.append((s[:, None] * target_vocab_size + t[None, :]).ravel())  # every (s, t) of this pair once
        both, together = np.unique(np.concatenate(keys) if keys else np.zeros(0, np.int64), return_counts=True)
        s, t = both // target_vocab_size, both % target_vocab_size
        dice = 2.0 * together / (src_counts[s] + tgt_counts[t])
        order = np.lexsort((t, -dice, s))  # by source piece, the best first (ties: the lower id)
        s, t = s[order], t[order]
        starts = np.searchsorted(s, np.arange(source_vocab_size))  # each source piece's first row
        rank = np.arange(len(s)) - starts[s]
        kept = rank < translations
        table = np.full((source_vocab_size, translations), -1, np.int64)
        table[s[kept], rank[kept]] = t[kept]
        common = np.argsort(-tgt_counts, kind="stable")[: min(frequent, int((tgt_counts > 0).sum()))]
        return cls(torch.from_numpy(table), torch.from_numpy(np.sort(common)), target_vocab_size=target_vocab_size)

    @classmethod
    def learn_from(cls, data: TrainingPairs, *, source_vocab_size: int, target_vocab_size: int) -> "Shortlist":
        """`learn` on a training corpus: every pair, or `LEARN_PAIRS` evenly spaced over a larger one."""
        n = len(data)
        indices = np.linspace(0, n - 1, LEARN_PAIRS).astype(np.int64) if n > LEARN_PAIRS else range(n)
        pairs = (pair for start in range(0, len(indices), 4096) for pair in data.pairs(indices[start : start + 4096]))
        return cls.learn(pairs, source_vocab_size=source_vocab_size, target_vocab_size=target_vocab_size)

    def candidates(self, source_ids: Tensor, also: Iterable[int] = ()) -> Tensor | None:
        """The sorted target ids (K,) a batch of sources (B, S) (padding included: its row adds its own
        translations, a few pieces) may be translated into, with `also`; None when they are most of the
        vocabulary (`USEFUL_SHARE`)."""
        device = source_ids.device
        rows = self.translations.to(device)[source_ids.reshape(-1).unique()].reshape(-1)
        named = torch.tensor(list(also), dtype=torch.long, device=device)
        ids = torch.cat([rows[rows >= 0], self.frequent.to(device), named]).unique()  # sorted
        return None if ids.numel() > USEFUL_SHARE * self.target_vocab_size else ids

    def save(self, directory: Path) -> None:
        """Write `shortlist.safetensors` into `directory` (atomically)."""
        tensors = {"translations": self.translations.int().contiguous(), "frequent": self.frequent.int().contiguous()}
        atomic_write_bytes(directory / SHORTLIST_FILE, save_tensors(tensors))

    @classmethod
    def load(cls, directory: Path, *, source_vocab_size: int, target_vocab_size: int) -> "Shortlist | None":
        """The shortlist of the checkpoint in `directory`, None when it has none.

        Raises:
            UserError: the file is no safetensors file of a shortlist for these vocabularies.
        """
        path = directory / SHORTLIST_FILE
        if not path.is_file():
            return None
        try:
            tensors = load_tensors(path.read_bytes())
            shortlist = cls(tensors["translations"], tensors["frequent"], target_vocab_size=target_vocab_size)
        except (SafetensorError, KeyError, ValueError) as e:
            raise UserError(f"{path}: not a shortlist of this model ({e})") from None
        if shortlist.translations.size(0) != source_vocab_size:
            raise UserError(f"{path}: rows for {shortlist.translations.size(0)} source pieces, not {source_vocab_size}")
        return shortlist
