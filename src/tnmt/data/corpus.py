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
import zlib
from dataclasses import dataclass
from pathlib import Path

from tnmt.errors import UserError


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


def read_lines(path: str | Path) -> list[str]:
    """Read a UTF-8 text file, gzip-compressed if its name ends in `.gz`, one sentence per line.

    Only the line terminator is removed; spaces are kept so that nothing is changed behind the
    user's back (see `read_parallel(normalize_whitespace=...)`). Empty lines are kept, because
    dropping one side's empty line would misalign the corpus; `filter_pairs` removes such pairs.

    Args:
        path: The file to read.

    Returns:
        The lines, without their terminators; a final newline does not start an extra line.

    Raises:
        UserError: The file is missing, empty, not valid gzip, or not valid UTF-8 (naming the
            1-based line of the first bad byte).
    """
    path = Path(path)
    data = _read_bytes(path)
    if not data:
        raise UserError(f"{path}: empty file")
    return decode_lines(data, name=str(path))


def decode_lines(data: bytes, *, name: str) -> list[str]:
    """Split UTF-8 bytes (a file's, or stdin's) into lines as `read_lines` does; b"" gives no line.

    Raises:
        UserError: `data` is not valid UTF-8, naming `name` and the 1-based line of the first bad byte.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise UserError(f"{name}:{line}: invalid UTF-8") from None
    if not text:
        return []
    lines = text.removeprefix("\ufeff").split("\n")
    if text.endswith("\n"):
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def read_parallel(src_path: str | Path, tgt_path: str | Path, *, normalize_whitespace: bool = False) -> ParallelCorpus:
    """Read two line-aligned files.

    Args:
        src_path: Source-language sentences.
        tgt_path: Their translations, same number of lines.
        normalize_whitespace: Collapse every run of whitespace to one space and strip both ends.
            Off by default: the subword tokenizer already collapses spaces, and tokenised references
            must not be changed silently.

    Raises:
        UserError: Either file is unreadable (see `read_lines`) or their line counts differ.
    """
    src, tgt = read_lines(src_path), read_lines(tgt_path)
    if len(src) != len(tgt):
        raise UserError(
            f"{src_path} has {len(src)} lines but {tgt_path} has {len(tgt)}; a parallel corpus needs "
            "one line per sentence pair"
        )
    if normalize_whitespace:
        src, tgt = _normalize(src), _normalize(tgt)
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
        src, tgt = _normalize(src), _normalize(tgt)
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


def _read_bytes(path: Path) -> bytes:
    """The file's content, decompressed if it is a `.gz`, with one-line errors."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rb") as f:
                return f.read()
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, expected a file") from None
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise UserError(f"{path}: not a valid gzip file ({err})") from None


def _normalize(lines: list[str]) -> list[str]:
    return [" ".join(line.split()) for line in lines]
