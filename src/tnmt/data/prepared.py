"""Prepared corpora: a training corpus encoded once into id arrays on disk, read by offset.

Held as Python lists, a WMT-sized corpus (4.5M pairs) costs gigabytes; encoded into flat arrays it
costs 2 bytes per token on disk, and training reads only the sentences of its next batch (`SentenceFile`),
so its memory stays flat as the corpus grows. A prepared directory holds:

    manifest.json                 what it was built from, its dtype and counts; written last
    tokenizer/                    the tokenizer the ids belong to
    src.ids, tgt.ids              every sentence's ids back to back (uint16 if the vocabulary fits, else uint32)
    src.offsets.npy, tgt.offsets.npy   int64, one more than the pairs: sentence i is ids[off[i]:off[i + 1]]
    src.sample<k>.ids, ...        with `data.subword_samples` = N > 0: the k-th sampled segmentation (1..N) of
                                  the same pairs, one set of four files each (`PreparedPairs.for_epoch`)
    links.ids, links.offsets.npy  prepared for guided alignment (`alignment.py`): each pair's subword links as
                                  (source position, target position) values back to back; links.sample<k>.* too

This module reads one; `prepare.py` builds it (`tnmt prepare`).
"""

import os
import struct
import weakref
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from tnmt.data.tokenizer import Tokenizer
from tnmt.io import read_json

MANIFEST, TOKENIZER_DIR = "manifest.json", "tokenizer"
SIDES = ("src", "tgt")
LINKS = "links"  # the word alignments' files, "alignments" in the manifest
A_PREPARED_CORPUS = "a prepared corpus"  # what `prepare` replaces, in its refusal of anything else


class PreparedPairs:
    """A prepared corpus on disk: the training-data interface of `EncodedPairs` without its RAM."""

    def __init__(self, directory: str | Path, *, segmentation: int = 0) -> None:
        """`segmentation`: 0 the best one, k = 1..data.subword_samples the k-th sample."""
        self.directory = Path(directory)
        self.manifest = read_json(self.directory / MANIFEST)
        dtype = np.dtype(self.manifest["dtype"])
        self._sides = [SentenceFile(self.directory / file_stem(side, segmentation), dtype) for side in SIDES]
        self._links = None
        if alignments := self.manifest.get("alignments"):
            self._links = SentenceFile(self.directory / file_stem(LINKS, segmentation), np.dtype(alignments["dtype"]))

    @property
    def aligned(self) -> bool:
        """Whether the pairs' word alignments were prepared (`links`)."""
        return self._links is not None

    def for_epoch(self, epoch: int) -> "PreparedPairs":
        """The pairs epoch `epoch` trains on: the best segmentation, or with N subword samples the
        (epoch mod N)-th sample: a pure function of the epoch, so a resumed run reads what it would have."""
        samples = self.manifest["data"].get("subword_samples", 0)
        return PreparedPairs(self.directory, segmentation=1 + epoch % samples) if samples else self

    def __len__(self) -> int:
        return len(self._sides[0])

    def tokenizer(self) -> Tokenizer:
        """The tokenizer whose ids these are."""
        return Tokenizer.load(self.directory / TOKENIZER_DIR)

    def lengths(self) -> np.ndarray:
        """(N,) per-pair cost for token-budget batching: the longer side, plus its BOS/EOS."""
        src, tgt = (side.lengths() for side in self._sides)
        return np.maximum(src, tgt) + 1

    def side_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        """(N,) source and (N,) target tokens per pair, without BOS/EOS."""
        src, tgt = (side.lengths() for side in self._sides)
        return src, tgt

    def pairs(self, indices: Iterable[int]) -> list[tuple[list[int], list[int]]]:
        src, tgt = self._sides
        return [(src.sentence(i), tgt.sentence(i)) for i in indices]

    def starts(self, indices: Iterable[int]) -> None:
        """BOS for every pair: one language pair (data/multiway.py reads several)."""
        return None

    def links(self, indices: Iterable[int]) -> list[np.ndarray]:
        """Per pair its word alignment as subword links (L, 2): (source position, target position), 0-based over
        the ids `pairs` gives (no BOS/EOS).

        Raises:
            ValueError: The corpus was prepared without alignments (`prepare(..., alignments=True)` adds them).
        """
        if self._links is None:
            raise ValueError(f"{self.directory}: prepared without word alignments")
        return [np.array(self._links.sentence(i), dtype=np.int64).reshape(-1, 2) for i in indices]


class SentenceFile:
    """One side of a prepared corpus (`stem.ids` and `stem.offsets.npy`), read sentence by sentence.

    Reads go through `os.pread`, not a memory map: a batch reads a few dozen sentences scattered over the
    corpus, and each page fault on a map also maps the cached pages around it (16 of them, even with
    MADV_RANDOM), which the process's resident size counts. At 4.5M pairs a map grew it by ~500 MB in 50
    updates for pages nobody read; with reads, only the bytes asked for enter the process.
    """

    def __init__(self, stem: Path, dtype: np.dtype) -> None:
        self._offsets_path, self._dtype = Path(f"{stem}.offsets.npy"), dtype
        offsets = np.load(self._offsets_path, mmap_mode="r")  # numpy reads the header; no page of data is touched
        if offsets.dtype != np.dtype("<i8"):
            raise ValueError(f"{self._offsets_path}: offsets are {offsets.dtype}, expected little-endian int64")
        self._offsets_start, self._count = offsets.offset, len(offsets) - 1  # where the offsets start in the file
        del offsets  # unmapped: sentences are read with pread
        self._fds = [os.open(path, os.O_RDONLY) for path in (f"{stem}.ids", self._offsets_path)]
        weakref.finalize(self, _close_all, self._fds)

    def __len__(self) -> int:
        return self._count

    def lengths(self) -> np.ndarray:
        """(N,) tokens per sentence (read through a map that is dropped on return, and its pages with it)."""
        return np.diff(np.load(self._offsets_path, mmap_mode="r"))

    def sentence(self, i: int) -> list[int]:
        """The ids of sentence `i`."""
        ids_fd, offsets_fd = self._fds
        start, end = struct.unpack("<qq", os.pread(offsets_fd, 16, self._offsets_start + 8 * i))
        size = self._dtype.itemsize  # memoryview and struct, not numpy: 3.3 against 4.5 us a sentence
        return memoryview(os.pread(ids_fd, (end - start) * size, start * size)).cast(self._dtype.char).tolist()


def file_stem(side: str, segmentation: int) -> str:
    """Files of one side of one segmentation: "src" (the best), "src.sample3" (the third sample)."""
    return side if segmentation == 0 else f"{side}.sample{segmentation}"


def is_prepared(directory: Path) -> bool:
    """Whether `directory` is a prepared corpus (its manifest, written last, says so), which `prepare` may
    replace; a user's directory is not."""
    return (directory / MANIFEST).is_file()


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        os.close(fd)
