"""A translation dataset: the corpus of a recipe, read and turned into subword ids, in memory.

Ties together the pieces of this package: find the text (Multi30k or the recipe's files), train or
reuse the tokenizer, encode, and drop over-long training pairs. Training keeps only the small
validation set this way; its training corpus is prepared on disk by `prepare.prepare`, which uses
`corpus_files` and `train_tokenizer` from here.
"""

import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from tnmt.config import DataConfig
from tnmt.data.corpus import ParallelCorpus, filter_pairs, iter_parallel
from tnmt.data.multi30k import find_multi30k, multi30k_paths
from tnmt.data.tokenizer import Tokenizer
from tnmt.errors import UserError


class TrainingPairs(Protocol):
    """What the training loop reads: `EncodedPairs` (in memory), `prepared.PreparedPairs` (on disk), `ConcatPairs`."""

    def __len__(self) -> int: ...
    def lengths(self) -> list[int] | np.ndarray: ...
    def pairs(self, indices: Iterable[int]) -> list[tuple[list[int], list[int]]]: ...
    def starts(self, indices: Iterable[int]) -> list[int] | None: ...
    def for_epoch(self, epoch: int) -> "TrainingPairs": ...


@dataclass
class EncodedPairs:
    """Aligned source/target subword ids (no BOS/EOS: `collate` adds them)."""

    src: list[list[int]]
    tgt: list[list[int]]
    start_ids: list[int] | None = None  # each pair's first decoder input (`collate`'s starts); None: BOS

    def __len__(self) -> int:
        return len(self.src)

    def starts(self, indices: Iterable[int]) -> list[int] | None:
        return None if self.start_ids is None else [self.start_ids[i] for i in indices]

    def lengths(self) -> list[int]:
        """Per-pair cost for token-budget batching: the longer side, plus its BOS/EOS."""
        return [max(len(s), len(t)) + 1 for s, t in zip(self.src, self.tgt, strict=True)]

    def side_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """(N,) source and (N,) target tokens per pair, without BOS/EOS."""
        return np.array([len(s) for s in self.src]), np.array([len(t) for t in self.tgt])

    def pairs(self, indices: list[int]) -> list[tuple[list[int], list[int]]]:
        return [(self.src[i], self.tgt[i]) for i in indices]

    def for_epoch(self, epoch: int) -> "EncodedPairs":
        """Every epoch's pairs: in memory there is one segmentation (`PreparedPairs.for_epoch` may have more)."""
        return self


class ConcatPairs:
    """Two training corpora read as one: indices past the first's end are the second's (self-distillation and data
    diversification append the model's translations this way, train/distill.py). Either part may be on disk or in
    memory."""

    def __init__(self, first: TrainingPairs, second: TrainingPairs, *, second_start: int | None = None) -> None:
        """`second_start`: the decoder's first input for the second part's pairs when the first part's have tags
        (a multilingual model's first direction: its target language's tag); None: BOS for every pair."""
        self.first, self.second, self.second_start = first, second, second_start

    def __len__(self) -> int:
        return len(self.first) + len(self.second)

    def lengths(self) -> np.ndarray:
        return np.concatenate([np.asarray(self.first.lengths()), np.asarray(self.second.lengths())])

    def pairs(self, indices: Iterable[int]) -> list[tuple[list[int], list[int]]]:
        n, indices = len(self.first), list(indices)
        head = iter(self.first.pairs([i for i in indices if i < n]))
        tail = iter(self.second.pairs([i - n for i in indices if i >= n]))
        return [next(head) if i < n else next(tail) for i in indices]

    def links(self, indices: Iterable[int]) -> list[np.ndarray]:
        """The first part's word alignments (`PreparedPairs.links`); none for the second's pairs, the model's own
        translations, which nothing aligned: guided alignment's loss skips them (`alignment_matrix`)."""
        n, indices = len(self.first), list(indices)
        head = iter(self.first.links([i for i in indices if i < n]))
        return [next(head) if i < n else np.zeros((0, 2), dtype=np.int64) for i in indices]

    def starts(self, indices: Iterable[int]) -> list[int] | None:
        """None (BOS for every pair) without `second_start`; else the first part's tags, then `second_start`."""
        if self.second_start is None:
            return None
        n, indices = len(self.first), list(indices)
        head = iter(self.first.starts([i for i in indices if i < n]) or [])
        return [next(head) if i < n else self.second_start for i in indices]

    def for_epoch(self, epoch: int) -> "ConcatPairs":
        return ConcatPairs(self.first.for_epoch(epoch), self.second.for_epoch(epoch), second_start=self.second_start)


def corpus_files(config: DataConfig, split: str) -> tuple[Path, Path]:
    """Source and target files of `split` ("train", "val" or "test_2016_flickr" for Multi30k)."""
    if config.corpus == "files":
        if split not in ("train", "val"):
            raise UserError(f"data.corpus = 'files' has only train and val splits, not {split!r}")
        prefix = "train" if split == "train" else "valid"
        return Path(getattr(config, f"{prefix}_src")), Path(getattr(config, f"{prefix}_tgt"))
    root = find_multi30k(langs=(config.src_lang, config.tgt_lang))
    if root is None:
        raise UserError(
            "Multi30k is not available offline: set TNMT_DATA_DIR to a local copy "
            "or run `tnmt data multi30k --out DIR` once with network access"
        )
    return multi30k_paths(root, split, config.src_lang, config.tgt_lang)


def iter_split(config: DataConfig, split: str) -> Iterator[tuple[str, str]]:
    """The raw sentence pairs of a split, streamed, whitespace-normalised if the recipe says so.

    Raises:
        UserError: as `iter_parallel`; and, once every line is read, if no pair has text on both sides.
    """
    src, tgt = corpus_files(config, split)
    lines, with_text = 0, False
    for source, target in iter_parallel(src, tgt, normalize_whitespace=config.normalize_whitespace):
        lines += 1
        with_text = with_text or bool(source.strip() and target.strip())
        yield source, target
    if not with_text:
        raise UserError(f"{src}, {tgt}: no line pair has text on both sides ({lines} lines)")


def training_pairs(config: DataConfig) -> Iterator[tuple[str, str]]:
    """The training pairs a run uses, streamed: the first `max_train_pairs` of them if that is set."""
    return itertools.islice(iter_split(config, "train"), config.max_train_pairs or None)


def read_split(config: DataConfig, split: str, *, limit: int = 0) -> ParallelCorpus:
    """The pairs of `iter_split` in memory (the first `limit` of them if that is set)."""
    corpus = ParallelCorpus(src=[], tgt=[])
    for source, target in iter_split(config, split):
        corpus.src.append(source)
        corpus.tgt.append(target)
    if limit:
        corpus = ParallelCorpus(src=corpus.src[:limit], tgt=corpus.tgt[:limit])
    return corpus


def train_tokenizer(config: DataConfig, corpus: ParallelCorpus) -> Tokenizer:
    """A subword vocabulary learnt on the training text only: joint, or one per language."""
    settings = dict(vocab_size=config.vocab_size, model_type=config.tokenizer_model)
    if config.joint_vocabulary:
        return Tokenizer.train(corpus.src + corpus.tgt, **settings, term_markers=config.term_annotations > 0)
    return Tokenizer.train_separate(corpus.src, corpus.tgt, **settings)


def encode(corpus: ParallelCorpus, tokenizer: Tokenizer, *, max_len: int | None = None) -> EncodedPairs:
    """Subword ids of a corpus; with `max_len`, pairs with a side longer than that (or empty) are dropped."""
    src = tokenizer.encode_source_batch(corpus.src)
    tgt = tokenizer.encode_target_batch(corpus.tgt)
    if max_len is None:
        return EncodedPairs(src=src, tgt=tgt)
    keep = filter_pairs(src, tgt, max_len=max_len)
    return EncodedPairs(src=[src[i] for i in keep], tgt=[tgt[i] for i in keep])


def fit_pairs(pairs: EncodedPairs, model_max_len: int) -> tuple[EncodedPairs, int]:
    """Every pair cut to fit the model's positions, and how many were cut.

    Each side keeps its first `model_max_len - 1` tokens, so the source with its EOS and the target with
    its BOS (or EOS) fit `model_max_len` positions: the truncation decoding applies (`decode.step.fit_source`).
    For validation, which must measure every pair rather than stop on one (training pairs are filtered instead).
    """
    keep = model_max_len - 1
    cut = sum(len(s) > keep or len(t) > keep for s, t in zip(pairs.src, pairs.tgt, strict=True))
    return EncodedPairs(src=[s[:keep] for s in pairs.src], tgt=[t[:keep] for t in pairs.tgt]), cut
