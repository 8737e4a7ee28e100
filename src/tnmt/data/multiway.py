"""Multi-way corpora: one text in several languages, line i of each file the same sentence (Multi30k's four).

A multilingual recipe (`DataConfig.languages`, tnmt/directions.py) trains the directions it lists, each
one a parallel corpus of two of the files. Preparing it (`prepare_multiway`) trains one sentencepiece
vocabulary over every language's training text, with each language's tag, then prepares each direction
with that tokenizer exactly as a one-pair corpus is prepared (data/prepare.py), in a directory of its own:

    manifest.json        what the whole was built from: the languages, directions and tokenizer
    tokenizer/           the joint tokenizer, shared by every direction
    en-de/, de-en/, ...  one prepared corpus per direction (prepared.py's layout, word alignments included)

So the corpus of a 12-direction recipe is by construction the union of its directions, each direction's
pairs filtered and aligned on their own (eflomal learns one language pair at a time). `MultiwayPairs`
reads them as one training corpus whose pairs also say which language their target is
(`MultiwayPairs.starts`), and draws each epoch's pairs per direction as the recipe's temperature says.
"""

import itertools
import json
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np

from tnmt.config import DataConfig
from tnmt.data.corpus import ParallelCorpus, iter_lines, normalize_line
from tnmt.data.dataset import corpus_files, read_split
from tnmt.data.prepare import NOT_CONTENT, describe_source, exclusive, manifest_json, prepare, reservoir_sample
from tnmt.data.prepared import A_PREPARED_CORPUS, MANIFEST, TOKENIZER_DIR, PreparedPairs, is_prepared
from tnmt.data.tokenizer import Tokenizer
from tnmt.directions import Direction, direction_name, epoch_indices
from tnmt.errors import UserError
from tnmt.io import atomic_directory, atomic_write_text, read_json

FORMAT_VERSION = 1
SAMPLE_SEED = 0  # of the tokenizer's sample, as prepare.py's
log = logging.getLogger("tnmt")


def direction_data(data: DataConfig, direction: Direction) -> DataConfig:
    """The one-pair data config of one direction of a multilingual recipe: its two languages' files."""
    source, target = direction
    files = {}
    if data.corpus == "files":
        files = {
            f"{split}_{side}": getattr(data, f"{split}_src").replace("{lang}", language)
            for split in ("train", "valid")
            for side, language in (("src", source), ("tgt", target))
        }
    one = {"languages": (), "directions": (), "first_direction_from": 0.0, "src_lang": source, "tgt_lang": target}
    return replace(data, **one, **files)


def language_files(data: DataConfig, split: str) -> dict[str, Path]:
    """Each language's file of `split` ("train", "val", ...): Multi30k's, or the pattern's."""
    languages = data.languages
    files = {}
    for i, language in enumerate(languages):
        other = languages[1] if i == 0 else languages[0]
        files[language] = corpus_files(direction_data(data, (language, other)), split)[0]
    return files


def prepare_multiway(
    data: DataConfig,
    directory: str | Path,
    *,
    max_len: int,
    tokenizer: Tokenizer | None = None,
    alignments: bool = False,
) -> "MultiwayPairs":
    """Every direction of `data` prepared in `directory` with one tokenizer: reused where current, else (re)built.

    Args:
        data: A multilingual data config (`languages`; `directions`, or every pair).
        directory: The prepared directory (created, or replaced when stale: a tokenizer that changed re-encodes
            every direction; anything but a prepared corpus there is refused).
        max_len: Longest side kept, in subword tokens.
        tokenizer: Encode with this one (a checkpoint's); None trains one with every language's tag on a sample of
            `data.tokenizer_sample` sentences of each language.
        alignments: Also align each direction's words (guided alignment).

    Raises:
        UserError: as `prepare`; or a given tokenizer without a tag for one of the languages.
    """
    directory = Path(directory)
    if tokenizer is not None and (missing := sorted(set(data.languages) - set(tokenizer.languages))):
        raise UserError(f"the tokenizer has no target-language tag for {missing[0]!r} (it has {tokenizer.languages})")
    key = _key(data, max_len)
    with exclusive(directory):
        if not _is_current(directory, key, tokenizer):
            started = time.monotonic()
            with atomic_directory(directory, is_own=is_prepared, what=A_PREPARED_CORPUS) as tmp:
                trained = tokenizer is None
                tokenizer = tokenizer or _train_tokenizer(data)
                tokenizer.save(tmp / TOKENIZER_DIR)
                for direction in data.trained_directions:
                    one, part = direction_data(data, direction), tmp / direction_name(direction)
                    prepare(one, part, **_args(max_len, tokenizer, alignments))
                entry = {"fingerprint": tokenizer.fingerprint(), "trained": trained}
                atomic_write_text(tmp / MANIFEST, manifest_json({**key, "tokenizer": entry}))
            seconds = time.monotonic() - started
            log.info(f"prepared {len(key['directions'])} directions in {directory} in {seconds:.0f} s")
        tokenizer = tokenizer or Tokenizer.load(directory / TOKENIZER_DIR)
    parts = {}
    for direction in data.trained_directions:  # current ones are reused; a part asked to align now is aligned
        one = direction_data(data, direction)
        parts[direction] = prepare(one, directory / direction_name(direction), **_args(max_len, tokenizer, alignments))
    return MultiwayPairs(directory, parts, tokenizer, temperature=data.direction_temperature)


def _args(max_len: int, tokenizer: Tokenizer, alignments: bool = False) -> dict[str, Any]:
    return {"max_len": max_len, "tokenizer": tokenizer, "alignments": alignments}


def _train_tokenizer(data: DataConfig) -> Tokenizer:
    """One vocabulary of every language's training text (a random sample of `tokenizer_sample` sentences per
    language, as a one-pair corpus samples pairs), with each language's tag."""
    texts: list[str] = []
    for path in language_files(data, "train").values():
        lines = _training_lines(path, data)
        texts += reservoir_sample(lines, data.tokenizer_sample, seed=SAMPLE_SEED)
    settings = {"vocab_size": data.vocab_size, "model_type": data.tokenizer_model}
    return Tokenizer.train([text for text in texts if text.strip()], **settings, languages=data.languages)


def _training_lines(path: Path, data: DataConfig) -> Iterator[str]:
    """One language's training lines as its directions read them: the first `max_train_pairs`, normalised."""
    for line in itertools.islice(iter_lines(path), data.max_train_pairs or None):
        yield normalize_line(line) if data.normalize_whitespace else line


def _key(data: DataConfig, max_len: int) -> dict[str, Any]:
    """What the tokenizer and the set of directions depend on (each direction's ids are checked by `prepare`)."""
    config = {name: value for name, value in asdict(data).items() if name not in NOT_CONTENT}
    config = json.loads(json.dumps(config))  # tuples as the manifest's lists
    sources = [describe_source(path) for path in language_files(data, "train").values()]
    directions = [direction_name(d) for d in data.trained_directions]
    return {"format_version": FORMAT_VERSION, "multiway": True, "sources": sources, "data": config,
            "directions": directions, "max_len": max_len}  # fmt: skip


def _is_current(directory: Path, key: dict[str, Any], tokenizer: Tokenizer | None) -> bool:
    """Whether the manifest matches `key` and the tokenizer (given, or trained by this prepare)."""
    try:
        manifest = read_json(directory / MANIFEST)
        if any(manifest.get(name) != value for name, value in key.items()):
            return False
        saved = Tokenizer.load(directory / TOKENIZER_DIR).fingerprint()
        if saved != manifest["tokenizer"]["fingerprint"]:
            return False
        return tokenizer.fingerprint() == saved if tokenizer is not None else manifest["tokenizer"]["trained"]
    except (UserError, KeyError, TypeError):  # missing or damaged: build again
        return False


class MultiwayPairs:
    """The prepared directions of a multilingual recipe read as one training corpus (`TrainingPairs`).

    Index i runs over the directions' pairs laid end to end, in the recipe's order; `for_epoch` gives the pairs
    an epoch trains on (`directions.epoch_indices`) in that numbering.
    """

    def __init__(
        self,
        directory: Path,
        parts: dict[Direction, PreparedPairs],
        tokenizer: Tokenizer,
        *,
        temperature: float,
        index: np.ndarray | None = None,
    ) -> None:
        self.directory, self.parts, self.temperature = directory, parts, temperature
        self._tokenizer = tokenizer
        sizes = [len(part) for part in parts.values()]
        self._starts = np.cumsum([0, *sizes])  # (D + 1,) where each direction's pairs begin
        self._targets = np.array([self._tokenizer.language_id(target) for _, target in parts], dtype=np.int64)
        self._index = index  # (N,) this view's pairs among all (None: all, in order)

    def tokenizer(self) -> Tokenizer:
        return self._tokenizer

    @property
    def directions(self) -> list[Direction]:
        return list(self.parts)

    @property
    def aligned(self) -> bool:
        return all(part.aligned for part in self.parts.values())

    def __len__(self) -> int:
        return int(self._starts[-1]) if self._index is None else len(self._index)

    def _global(self, indices: Iterable[int]) -> np.ndarray:
        indices = np.fromiter(indices, dtype=np.int64)
        return indices if self._index is None else self._index[indices]

    def _each(self, indices: Iterable[int], read: str) -> list[Any]:
        """`read` ("pairs" or "links") of every index, in order: per direction, one call for its indices."""
        where = self._global(indices)
        part_of = np.searchsorted(self._starts, where, side="right") - 1
        found: list[Any] = [None] * len(where)
        for d, part in enumerate(self.parts.values()):
            rows = np.flatnonzero(part_of == d)
            if len(rows):
                for row, item in zip(rows, getattr(part, read)((where[rows] - self._starts[d]).tolist()), strict=True):
                    found[row] = item
        return found

    def pairs(self, indices: Iterable[int]) -> list[tuple[list[int], list[int]]]:
        return self._each(indices, "pairs")

    def links(self, indices: Iterable[int]) -> list[np.ndarray]:
        return self._each(indices, "links")

    def starts(self, indices: Iterable[int]) -> list[int]:
        """The tag the decoder starts from for each pair: its target language's (tnmt/directions.py)."""
        part_of = np.searchsorted(self._starts, self._global(indices), side="right") - 1
        return self._targets[part_of].tolist()

    def _all_sides(self) -> tuple[np.ndarray, np.ndarray]:
        src, tgt = zip(*(part.side_lengths() for part in self.parts.values()), strict=True)
        return np.concatenate(src), np.concatenate(tgt)

    def side_lengths(self) -> tuple[np.ndarray, np.ndarray]:
        src, tgt = self._all_sides()
        return (src, tgt) if self._index is None else (src[self._index], tgt[self._index])

    def lengths(self) -> np.ndarray:
        src, tgt = self.side_lengths()
        return np.maximum(src, tgt) + 1

    def only(self, direction: Direction) -> "MultiwayPairs":
        """These pairs of one direction alone (bidirectional training's second stage: data.first_direction_from)."""
        return MultiwayPairs(
            self.directory, {direction: self.parts[direction]}, self._tokenizer, temperature=self.temperature
        )

    def for_epoch(self, epoch: int) -> "MultiwayPairs":
        """The pairs epoch `epoch` trains on: each direction's segmentation for that epoch (subword samples), and
        its share of pairs drawn by the temperature (`directions.epoch_indices`): a pure function of the epoch."""
        parts = {direction: part.for_epoch(epoch) for direction, part in self.parts.items()}
        sizes = [len(part) for part in parts.values()]
        index = epoch_indices(sizes, self.temperature, seed=SAMPLE_SEED, epoch=epoch)
        whole = len(index) == sum(sizes) and np.array_equal(index, np.arange(len(index)))
        view = None if whole else index
        return MultiwayPairs(self.directory, parts, self._tokenizer, temperature=self.temperature, index=view)


def read_multiway_split(data: DataConfig, split: str, *, limit: int = 0) -> tuple[ParallelCorpus, list[str]]:
    """Every direction's pairs of `split` laid end to end (the first `limit` of each when set), and each pair's
    target language: a multilingual model is validated and evaluated on all its directions."""
    corpus, targets = ParallelCorpus(src=[], tgt=[]), []
    for direction in data.trained_directions:
        part = read_split(direction_data(data, direction), split, limit=limit)
        corpus.src.extend(part.src)
        corpus.tgt.extend(part.tgt)
        targets += [direction[1]] * len(part)
    return corpus, targets
