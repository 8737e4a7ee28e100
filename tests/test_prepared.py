"""Reading a prepared corpus: sentence i is ids[off[i]:off[i + 1]], each epoch reads its segmentation, and
no corpus file is mapped into the process. The directories here are written by hand, with numpy, so the
reader is checked against the layout `prepared.py` documents rather than against the builder."""

import contextlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from tnmt.data.prepared import MANIFEST, PreparedPairs, SentenceFile, is_prepared

BEST = [([5, 6, 7], [8]), ([9], [10, 11]), ([70_000, 4], [12, 13, 14])]


def write_prepared(directory: Path, segmentations: list[list[tuple[list[int], list[int]]]], dtype: str) -> Path:
    """A prepared directory with `segmentations` (the best first, then the samples), as the docstring lays it out."""
    directory.mkdir()
    for k, pairs in enumerate(segmentations):
        for side, sentences in zip(("src", "tgt"), zip(*pairs, strict=True), strict=True):
            stem = directory / (side if k == 0 else f"{side}.sample{k}")
            np.array([i for sentence in sentences for i in sentence], dtype=dtype).tofile(f"{stem}.ids")
            np.save(f"{stem}.offsets.npy", np.cumsum([0, *map(len, sentences)], dtype=np.int64))
    manifest = {"dtype": dtype, "data": {"subword_samples": len(segmentations) - 1}}
    (directory / MANIFEST).write_text(json.dumps(manifest))
    return directory


def test_sentences_and_lengths_read_back(tmp_path: Path):
    prepared = PreparedPairs(write_prepared(tmp_path / "p", [BEST], "uint32"))
    assert len(prepared) == 3 and is_prepared(tmp_path / "p") and not is_prepared(tmp_path)
    assert prepared.pairs([2, 0]) == [BEST[2], BEST[0]]  # ids above 65535 survive in uint32
    assert prepared.lengths().tolist() == [4, 3, 4]  # the longer side, plus BOS/EOS
    assert prepared.for_epoch(5) is prepared  # no samples: every epoch reads the best segmentation


def test_each_epoch_reads_its_sample(tmp_path: Path):
    samples = [[(src[::-1], tgt) for src, tgt in BEST], [(src, tgt[::-1]) for src, tgt in BEST]]
    prepared = PreparedPairs(write_prepared(tmp_path / "p", [[(s[:1], t) for s, t in BEST], *samples], "uint32"))
    assert [prepared.for_epoch(epoch).pairs(range(3)) for epoch in range(3)] == [*samples, samples[0]]


def test_offsets_of_another_type_are_refused(tmp_path: Path):
    np.save(tmp_path / "src.offsets.npy", np.array([0, 1], dtype=np.int32))
    (tmp_path / "src.ids").write_bytes(b"\0\0")
    with pytest.raises(ValueError, match="offsets are int32, expected little-endian int64"):
        SentenceFile(tmp_path / "src", np.dtype("uint16"))


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads the process's maps from Linux's /proc")
def test_reading_maps_no_corpus_file_into_the_process(tmp_path: Path):
    """Training reads sentences with pread: a map of the id files would also bring the cached pages around
    each fault into the process's resident set (~500 MB in 50 updates at 4.5M pairs), for pages nobody read."""
    prepared = PreparedPairs(write_prepared(tmp_path / "p", [BEST * 100], "uint32"))
    lengths, pairs = prepared.lengths(), prepared.pairs(range(0, len(prepared), 7))
    assert len(lengths) == len(prepared) and len(pairs) == -(-len(prepared) // 7)
    mapped = [line for line in Path("/proc/self/maps").read_text().splitlines() if str(tmp_path) in line]
    assert mapped == []
    assert open_files(tmp_path)  # the id and offset files of both sides, read by offset
    del prepared
    assert open_files(tmp_path) == []  # closed with the corpus object


def open_files(under: Path) -> list[str]:
    """Paths below `under` that this process holds open."""
    paths = []
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(FileNotFoundError):  # the descriptor of the listing itself is gone by now
            paths.append(os.readlink(fd))
    return [path for path in paths if path.startswith(str(under))]
