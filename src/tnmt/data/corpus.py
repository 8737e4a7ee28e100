"""Parallel text: reading sentence-aligned files and filtering pairs by length.

A parallel corpus is two files with one sentence per line, line i of one translating line i of the
other (or one TSV file with `source<TAB>target` lines). Alignment is by line number only, so a file
with one line too many silently shifts every later pair: reading therefore refuses files with
different line counts, and every error names the file and, where there is one, the line.

Lines are split on "\\n" only (and a "\\r" before it is dropped), never with `str.splitlines`, which
also splits on U+0085, U+2028 and other characters that do occur inside sentences and would
misalign the two sides.
"""

import gzip
import itertools
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

from tnmt.errors import UserError, reading_file

T = TypeVar("T")


@dataclass(frozen=True)
class ParallelCorpus:
    """Sentence pairs: `src[i]` translates to `tgt[i]`."""

    src: list[str]
    tgt: list[str]

    def __post_init__(self) -> None:
        if len(self.src) != len(self.tgt):
            raise ValueError(f"{len(self.src)} source but {len(self.tgt)} target sentences")

    def __len__(self) -> int:
        return len(self.src)


def iter_lines(path: str | Path) -> Iterator[str]:
    """Stream a UTF-8 text file, gzip-compressed if its name ends in `.gz`, one sentence per line.

    Only the line terminator is removed; spaces are kept so that nothing is changed behind the
    user's back (see `read_parallel(normalize_whitespace=...)`). Empty lines are kept, because
    dropping one side's empty line would misalign the corpus; `filter_pairs` removes such pairs.
    Lines are read one at a time, so a corpus of any size costs the memory of one line.

    Args:
        path: The file to read.

    Yields:
        The lines, without their terminators; a final newline does not start an extra line.

    Raises:
        UserError: The file is missing, empty, not valid gzip, or not valid UTF-8 (naming the
            1-based line of the first bad byte).
    """
    path = Path(path)
    empty = True
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with reading_file(path), opener(path, "rb") as f:
            for line in iter_stream(f, name=str(path)):
                empty = False
                yield line
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise UserError(f"{path}: not a valid gzip file ({err})") from None
    if empty:
        raise UserError(f"{path}: empty file")


def iter_stream(stream: BinaryIO, *, name: str) -> Iterator[str]:
    """The lines of a binary stream (a file, stdin), read one at a time, as `iter_lines` yields a file's:
    split on b"\\n" only (a binary stream's own iteration), a "\\r" before it dropped and a leading
    byte-order mark removed; an empty stream gives no line.

    Raises:
        UserError: a line is not valid UTF-8, naming `name` and its 1-based number.
    """
    for number, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise UserError(f"{name}:{number}: invalid UTF-8") from None
        if number == 1:
            line = line.removeprefix("\ufeff")
        yield line.removesuffix("\n").removesuffix("\r")


def read_lines(path: str | Path) -> list[str]:
    """All lines of a file, as `iter_lines` yields them (same checks and errors)."""
    return list(iter_lines(path))


def iter_parallel(
    src_path: str | Path, tgt_path: str | Path, *, normalize_whitespace: bool = False
) -> Iterator[tuple[str, str]]:
    """Stream the (source, target) pairs of two line-aligned files.

    Args:
        src_path: Source-language sentences.
        tgt_path: Their translations, same number of lines.
        normalize_whitespace: Collapse every run of whitespace to one space and strip both ends.
            Off by default: the subword tokenizer already collapses spaces, and tokenised references
            must not be changed silently.

    Raises:
        UserError: Either file is unreadable (see `iter_lines`) or their line counts differ; the
            counts are only known at the end, so the error comes after the common pairs were yielded.
    """
    sources, targets = iter_lines(src_path), iter_lines(tgt_path)
    pairs = 0
    for src in sources:
        tgt = next(targets, None)
        if tgt is None:
            _mismatch(src_path, pairs + 1 + sum(1 for _ in sources), tgt_path, pairs)
        pairs += 1
        yield (normalize_line(src), normalize_line(tgt)) if normalize_whitespace else (src, tgt)
    if rest := sum(1 for _ in targets):
        _mismatch(src_path, pairs, tgt_path, pairs + rest)


def read_parallel(src_path: str | Path, tgt_path: str | Path, *, normalize_whitespace: bool = False) -> ParallelCorpus:
    """Read two line-aligned files into memory; see `iter_parallel` for the arguments and errors."""
    src: list[str] = []
    tgt: list[str] = []
    for source, target in iter_parallel(src_path, tgt_path, normalize_whitespace=normalize_whitespace):
        src.append(source)
        tgt.append(target)
    return ParallelCorpus(src=src, tgt=tgt)


def read_tsv(path: str | Path, *, normalize_whitespace: bool = False) -> ParallelCorpus:
    """Read `source<TAB>target` lines, the format of many OPUS and Tatoeba exports.

    Raises:
        UserError: The file is unreadable, or a line does not contain exactly one tab.
    """
    src, tgt = [], []
    for number, line in enumerate(read_lines(path), start=1):
        tabs = line.count("\t")
        if tabs != 1:
            raise UserError(f"{path}:{number}: expected one tab between source and target, found {tabs}")
        source, target = line.split("\t")
        src.append(source)
        tgt.append(target)
    if normalize_whitespace:
        src, tgt = list(map(normalize_line, src)), list(map(normalize_line, tgt))
    return ParallelCorpus(src=src, tgt=tgt)


def filter_pairs(src_ids: list[list[int]], tgt_ids: list[list[int]], *, max_len: int, min_len: int = 1) -> list[int]:
    """Indices of the pairs whose both sides have between `min_len` and `max_len` tokens.

    Filtering happens on subword ids, not characters or words, because the token count is what
    costs memory and time. Counts exclude the BOS/EOS that batching adds later. The default
    `min_len=1` drops pairs with an empty side, which teach nothing and can yield an all-padding
    source row.

    Args:
        src_ids: Encoded source sentences.
        tgt_ids: Encoded target sentences, aligned with `src_ids`.
        max_len: Longest side kept, inclusive.
        min_len: Shortest side kept, inclusive.

    Returns:
        The kept indices, ascending.
    """
    if len(src_ids) != len(tgt_ids):
        raise ValueError(f"{len(src_ids)} source but {len(tgt_ids)} target sentences")
    return [
        i
        for i, (src, tgt) in enumerate(zip(src_ids, tgt_ids, strict=True))
        if min_len <= len(src) <= max_len and min_len <= len(tgt) <= max_len
    ]


def _mismatch(src_path: str | Path, n_src: int, tgt_path: str | Path, n_tgt: int) -> None:
    raise UserError(
        f"{src_path} has {n_src} lines but {tgt_path} has {n_tgt}; a parallel corpus needs one line per sentence pair"
    )


def normalize_line(line: str) -> str:
    """Every run of whitespace collapsed to one space, both ends stripped (`normalize_whitespace`)."""
    return " ".join(line.split())


def chunked(items: Iterable[T], size: int) -> Iterator[list[T]]:
    """Consecutive lists of `size` items (the last one shorter): a stream handled in bounded pieces.
    (itertools.batched from Python 3.12, which tnmt cannot assume yet.)"""
    items = iter(items)
    while chunk := list(itertools.islice(items, size)):
        yield chunk
