"""Preparing a corpus: the training text encoded once into the id arrays `prepared.py` reads (`tnmt prepare`).

`prepare` reuses a directory whose manifest matches what it would build: the source files (size,
mtime, SHA-256 of the first MB), the data config, the length limit and the tokenizer (its
fingerprint; or, with no tokenizer given, one that prepare trained itself). Anything else is rebuilt
in a hidden directory renamed into place at the end (`io.atomic_directory`), so a crash never leaves a
half corpus that looks valid, and only a prepared corpus is ever replaced: a user's directory or file
at that path is refused before any work. Pairs with an empty or over-long side are dropped here, as
`filter_pairs` says.

Subword regularisation (Kudo, 2018) trains on a different segmentation of each sentence every epoch,
so the model sees many ways a word splits: a regulariser for small corpora. Sampling on the fly would
put sentencepiece in the training loop; here N samples are drawn once, each chunk's from its own seed
(so any number of workers writes the same files), and an epoch reads one of them. Samples are drawn for
the pairs the best segmentation kept; a sampled side longer than the limit keeps the best one.

Guided alignment (`alignments=True`) adds the pairs' word alignments (alignment.py), computed once the ids
are written; inline term annotations (`data.term_annotations`, annotate.py) are then built from them. A corpus
prepared without alignments is not current for a run that asks for them and is rebuilt; one with them serves a
run that does not.
"""

import fcntl
import hashlib
import itertools
import json
import logging
import multiprocessing
import os
import random
import time
import zlib
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from tnmt.config import DataConfig
from tnmt.data.alignment import align_prepared, require_eflomal
from tnmt.data.annotate import annotate_prepared
from tnmt.data.corpus import ParallelCorpus, chunked, filter_pairs
from tnmt.data.dataset import corpus_files, train_tokenizer, training_pairs
from tnmt.data.prepared import A_PREPARED_CORPUS, MANIFEST, SIDES, TOKENIZER_DIR, PreparedPairs, file_stem, is_prepared
from tnmt.data.tokenizer import Tokenizer
from tnmt.errors import UserError, reading_file
from tnmt.io import atomic_directory, atomic_write_text, check_output_directory, read_json

FORMAT_VERSION = 1
CHUNK_PAIRS = 10_000  # pairs per task of an encoding worker
SAMPLE_SEED = 0  # of the tokenizer's sample: fixed, so the same corpus always gives the same tokenizer
NOT_CONTENT = ("prepare_workers", "prepared_dir", "valid_src", "valid_tgt", "max_valid_pairs")  # no effect on the ids
SEVERAL_LANGUAGES = ("languages", "directions", "direction_temperature")  # data/multiway.py's: not a one-pair corpus's

T = TypeVar("T")
log = logging.getLogger("tnmt")


def prepare(
    data: DataConfig,
    directory: str | Path,
    *,
    max_len: int,
    tokenizer: Tokenizer | None = None,
    alignments: bool = False,
) -> PreparedPairs:
    """The training corpus of `data` encoded in `directory`: reused if current, else (re)built.

    Args:
        data: Where the text is and how to read it; its tokenizer keys train a tokenizer when none is given.
        directory: The prepared directory (created, or replaced when stale; anything but a prepared corpus
            there is refused).
        max_len: Longest side kept, in subword tokens.
        tokenizer: Encode with this one (a checkpoint's, when resuming or fine-tuning); None trains one
            on a random sample of `data.tokenizer_sample` pairs.
        alignments: Also align the pairs' words, for guided alignment (`PreparedPairs.links`).

    Raises:
        UserError: The text is unreadable or misaligned, no pair survives the length filter, `directory`
            holds something other than a prepared corpus, or alignments are asked for without eflomal.
    """
    directory = Path(directory)
    key = _key(data, max_len)
    with exclusive(directory):
        if _is_current(directory, key, tokenizer, alignments=alignments):
            prepared = PreparedPairs(directory)
            log.info(f"{directory}: prepared corpus is up to date ({len(prepared)} pairs)")
            return prepared
        return _build(data, directory, key, max_len=max_len, tokenizer=tokenizer, alignments=alignments)


@contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """One prepare at a time per parent directory: the ranks of a distributed run (or runs sharing a
    `data.prepared_dir`) wait for the first, then find its corpus current instead of racing to rebuild.
    The lock is on the parent directory itself, so no lock file is left behind."""
    check_output_directory(directory.parent)  # a user's file there (`--train.out_dir=notes.txt`) is one line
    directory.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when closed, also if the process dies
        yield
    finally:
        os.close(fd)


def _build(
    data: DataConfig,
    directory: Path,
    key: dict[str, Any],
    *,
    max_len: int,
    tokenizer: Tokenizer | None,
    alignments: bool,
) -> PreparedPairs:
    """Train the tokenizer if none is given, encode, and rename the result into place.

    Training a tokenizer reads the corpus twice, streaming both times: once to sample its text, once to
    encode every pair with it. Encoding needs the finished tokenizer, and keeping the text between the
    passes would cost the memory this module exists to save.
    """
    started = time.monotonic()
    if alignments:
        require_eflomal()  # before any work
    with atomic_directory(directory, is_own=is_prepared, what=A_PREPARED_CORPUS) as tmp:
        if tokenizer is None:
            sample = reservoir_sample(training_pairs(data), data.tokenizer_sample, seed=SAMPLE_SEED)
            tokenizer = train_tokenizer(data, ParallelCorpus(src=[s for s, _ in sample], tgt=[t for _, t in sample]))
            trained, sampled = True, len(sample)
            del sample
        else:
            trained, sampled = False, 0
        tokenizer.save(tmp / TOKENIZER_DIR)
        largest = max(tokenizer.source_vocab_size, tokenizer.vocab_size)
        dtype = np.dtype(np.uint16 if largest <= 2**16 else np.uint32)
        workers = data.prepare_workers or len(os.sched_getaffinity(0))
        counts = _encode_corpus(
            training_pairs(data), tmp, tokenizer, data, max_len=max_len, dtype=dtype, workers=workers
        )
        if not counts["pairs"]:
            raise UserError(f"{key['sources'][0]['path']}: no sentence pair has both sides of 1 to {max_len} tokens")
        if alignments:
            segmentations = 1 + data.subword_samples
            counts["alignments"] = align_prepared(
                tmp, tokenizer, segmentations=segmentations, dtype=dtype, max_len=max_len
            )
        if data.term_annotations:
            if not alignments:
                raise UserError("data.term_annotations are built from word alignments: prepare with alignments")
            positions = np.dtype(counts["alignments"]["dtype"])
            counts["term_annotations"] = annotate_prepared(
                tmp, tokenizer, share=data.term_annotations, dtype=dtype, positions=positions, max_len=max_len
            )
        tokenizer_entry = {"fingerprint": tokenizer.fingerprint(), "trained": trained, "sample_pairs": sampled}
        manifest = {**key, "tokenizer": tokenizer_entry, "dtype": dtype.name, **counts}
        atomic_write_text(tmp / MANIFEST, manifest_json(manifest))
    prepared = PreparedPairs(directory)
    sampled = ""
    if data.subword_samples:
        ratio = sum(counts["sample_tokens"]) / data.subword_samples / (counts["src_tokens"] + counts["tgt_tokens"])
        sampled = f" and {data.subword_samples} sampled segmentations of them ({ratio:.2f}x the tokens)"
    kept = f"all {counts['read']} pairs"
    if counts["pairs"] < counts["read"]:
        kept = (
            f"{counts['pairs']} of {counts['read']} pairs (the others have an empty side or one over {max_len} tokens)"
        )
    log.info(f"prepared {kept}{sampled} in {directory} in {time.monotonic() - started:.0f} s")
    return prepared


def reservoir_sample(items: Iterable[T], k: int, *, seed: int) -> list[T]:
    """A uniform random sample of `k` items (all of them if there are no more; k=0: all), in one pass.

    Algorithm R (Vitter, 1985): memory holds only the sample, whatever the length of `items`. While
    fewer than `k` items were seen the sample is all of them in order, so a corpus smaller than `k`
    trains the same tokenizer as reading it whole.
    """
    rng = random.Random(seed)
    sample: list[T] = []
    for n, item in enumerate(items):
        if not k or n < k:
            sample.append(item)
        elif (j := rng.randrange(n + 1)) < k:
            sample[j] = item
    return sample


def _key(data: DataConfig, max_len: int) -> dict[str, Any]:
    """What the prepared ids depend on, besides the tokenizer (checked separately by `_is_current`)."""
    left_out = NOT_CONTENT + SEVERAL_LANGUAGES  # (so a corpus prepared before they existed is still current)
    config = {name: value for name, value in asdict(data).items() if name not in left_out}
    sources = [describe_source(path) for path in corpus_files(data, "train")]
    return {"format_version": FORMAT_VERSION, "sources": sources, "data": config, "max_len": max_len}


def describe_source(path: Path) -> dict[str, Any]:
    """Size, modification time and a hash of the first MB: cheap, and changed by any real edit."""
    with reading_file(path):
        stat = path.stat()
        with path.open("rb") as f:
            head = hashlib.sha256(f.read(2**20)).hexdigest()
    return {"path": str(path.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256_first_mb": head}


def _is_current(directory: Path, key: dict[str, Any], tokenizer: Tokenizer | None, *, alignments: bool) -> bool:
    """Whether `directory` holds what `prepare` would build now: same key, word alignments if asked for, and
    the given tokenizer or (none given) one prepare trained itself."""
    if not (directory / MANIFEST).is_file():
        return False
    try:
        manifest = read_json(directory / MANIFEST)
        if any(manifest.get(name) != value for name, value in key.items()):
            return False
        if alignments and "alignments" not in manifest:
            return False
        fingerprint = manifest["tokenizer"]["fingerprint"]
        if tokenizer is not None:
            return tokenizer.fingerprint() == fingerprint
        return (
            manifest["tokenizer"]["trained"] and Tokenizer.load(directory / TOKENIZER_DIR).fingerprint() == fingerprint
        )
    except (UserError, KeyError, TypeError):  # a damaged manifest or tokenizer: build again
        return False


def _encode_corpus(
    pairs: Iterator[tuple[str, str]],
    directory: Path,
    tokenizer: Tokenizer,
    data: DataConfig,
    *,
    max_len: int,
    dtype: np.dtype,
    workers: int,
) -> dict[str, Any]:
    """Encode and filter `pairs` into the id and offset files of `directory` (one set per segmentation);
    returns the counts."""
    segmentations = range(1 + data.subword_samples)
    lengths: dict[str, list[np.ndarray]] = {file_stem(side, k): [] for k in segmentations for side in SIDES}
    read = 0
    with ExitStack() as stack:
        files = {stem: stack.enter_context(open(directory / f"{stem}.ids", "wb")) for stem in lengths}
        chunks = enumerate(chunked(pairs, CHUNK_PAIRS))
        for n_read, encoded in _encoded(chunks, directory, tokenizer, data, max_len, dtype, workers):
            for k, sides in enumerate(encoded):
                for side, (ids, side_lengths) in zip(SIDES, sides, strict=True):
                    ids.tofile(files[file_stem(side, k)])
                    lengths[file_stem(side, k)].append(side_lengths)
            read += n_read
    counts: dict[str, Any] = {"read": read}
    tokens = {}
    for stem, parts in lengths.items():
        stem_lengths = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        offsets = np.zeros(len(stem_lengths) + 1, dtype=np.int64)
        np.cumsum(stem_lengths, out=offsets[1:])
        np.save(directory / f"{stem}.offsets.npy", offsets)
        counts["pairs"], tokens[stem] = len(stem_lengths), int(offsets[-1])
    counts.update({f"{side}_tokens": tokens[side] for side in SIDES})
    if data.subword_samples:  # both sides' tokens of each sample: sampled segmentations are longer
        counts["sample_tokens"] = [sum(tokens[file_stem(side, k)] for side in SIDES) for k in segmentations[1:]]
    return counts


Segmentation = tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]  # (ids, lengths) per side
Encoded = tuple[int, list[Segmentation]]  # pairs read; the kept pairs' segmentations, the best first


def _encoded(
    chunks: Iterator[tuple[int, list[tuple[str, str]]]],
    directory: Path,
    tokenizer: Tokenizer,
    data: DataConfig,
    max_len: int,
    dtype: np.dtype,
    workers: int,
) -> Iterator[Encoded]:
    """Encoded chunks in order: in this process for a single chunk or worker, else in a pool of workers.

    Workers are spawned, not forked: the parent may have imported torch, whose thread pools do not survive
    a fork; and they import only sentencepiece and numpy. At most two chunks per worker are in flight, so
    memory does not grow with the corpus.
    """
    first = list(itertools.islice(chunks, 2))
    chunks = itertools.chain(first, chunks)
    if workers == 1 or len(first) < 2:
        for index, chunk in chunks:
            yield _encode_chunk(index, chunk, tokenizer, data, max_len, dtype)
        return
    args = (str(directory / TOKENIZER_DIR), data, max_len, dtype.name)
    # An executor, not a multiprocessing.Pool: a worker that dies (out of memory, killed) fails the
    # prepare with BrokenProcessPool instead of leaving it waiting forever for the lost chunk.
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        pending: deque[Future] = deque()
        for index, chunk in chunks:
            pending.append(pool.submit(_encode_in_worker, index, chunk, *args))
            if len(pending) >= 2 * workers:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()


def _encode_in_worker(
    index: int, chunk: list[tuple[str, str]], tokenizer_dir: str, data: DataConfig, max_len: int, dtype: str
) -> Encoded:
    return _encode_chunk(index, chunk, _load_tokenizer(tokenizer_dir), data, max_len, np.dtype(dtype))


@cache
def _load_tokenizer(directory: str) -> Tokenizer:
    """Each worker loads the tokenizer once, on its first chunk."""
    return Tokenizer.load(directory)


def _encode_chunk(
    index: int, chunk: list[tuple[str, str]], tokenizer: Tokenizer, data: DataConfig, max_len: int, dtype: np.dtype
) -> Encoded:
    """(pairs read, per segmentation of the kept pairs ((flat source ids, lengths), (flat target ids, lengths)))
    of chunk number `index`: the best segmentation, then `data.subword_samples` sampled ones."""
    src = tokenizer.encode_source_batch([s for s, _ in chunk])
    tgt = tokenizer.encode_target_batch([t for _, t in chunk])
    keep = filter_pairs(src, tgt, max_len=max_len)
    best = [src[i] for i in keep], [tgt[i] for i in keep]
    if not data.subword_samples:
        return len(chunk), [(_flatten(best[0], dtype), _flatten(best[1], dtype))]
    texts = [chunk[i][0] for i in keep], [chunk[i][1] for i in keep]
    sampled = []  # per side: [sample k][pair i]
    for side, side_texts, side_best in zip(("source", "target"), texts, best, strict=True):
        seed = zlib.crc32(f"{index}/{side}".encode())  # the chunk's own: the same ids from any worker
        options = {"alpha": data.subword_alpha, "nbest": data.subword_nbest, "seed": seed}
        drawn = tokenizer.sample_segmentations(side_texts, side=side, samples=data.subword_samples, **options)
        # a sampled side over the limit keeps the best segmentation, so every sample has the same pairs
        sampled.append([[a if len(a) <= max_len else b for a, b in zip(k, side_best, strict=True)] for k in drawn])
    segmentations = [best, *zip(*sampled, strict=True)]
    return len(chunk), [(_flatten(s, dtype), _flatten(t, dtype)) for s, t in segmentations]


def _flatten(rows: list[list[int]], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    ids = np.fromiter(itertools.chain.from_iterable(rows), dtype=dtype, count=int(lengths.sum()))
    return ids, lengths


def manifest_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
