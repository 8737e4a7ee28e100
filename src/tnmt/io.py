"""Reading JSON and writing files atomically.

A training run killed mid-save (Ctrl-C, OOM killer, a full disk) must never leave a half-written
checkpoint or tokenizer behind the name of a good one. So every file tnmt writes goes to a temporary
file in the same directory, is flushed to disk, then renamed over the target: `os.replace` is atomic
on POSIX and Windows when both names are on one file system, so readers see the old file or the new
one, never a mix. A write that fails (a full disk, a read-only file system) raises an `OSError` that
names the file, so the one-line error says where.

A directory (a checkpoint, a prepared corpus, an export) is built the same way, as a whole
(`atomic_directory`), and replaces only what its writer recognises as its own kind of output: a user's
directory or file at that path is refused, never deleted. Whatever a writer leaves unfinished has a
hidden name of one form (`hidden_sibling`), which `remove_leftovers` clears.
"""

import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Literal

from tnmt.errors import UserError, reading_file


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file (a config, a tokenizer description); every failure is one line naming the file.

    Raises:
        UserError: the file is missing, a directory, not UTF-8 or not JSON (with the line of the error).
    """
    try:
        with reading_file(path, directory="not a JSON file"):
            text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{path}: invalid UTF-8") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"{path}:{err.lineno}: invalid JSON ({err.msg})") from None


@contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to write that appears at `path` only when the `with` block ends without an exception.

    The data goes to a temporary file in the same directory, is flushed to disk, then renamed over `path`;
    on an exception the temporary file is removed and `path` keeps its old content (or stays absent). The
    temporary file is created with the usual permissions (0o666 minus the umask), unlike
    `tempfile.mkstemp`'s 0o600, so an atomically written file is as readable as a plainly written one.

    Args:
        path: Destination file; its directory must exist.
    """
    path = Path(path)
    tmp = hidden_sibling(path, "tmp")
    with _naming(path):
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        try:
            with os.fdopen(fd, "wb") as f:
                yield f
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_directory(path.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write `data` to `path` so that `path` holds either its old content or all of `data` (see `atomic_open`)."""
    with atomic_open(path) as f:
        f.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, encoding: str = "utf-8") -> None:
    """Write `text` atomically; see `atomic_write_bytes`. No newline translation happens."""
    atomic_write_bytes(path, text.encode(encoding))


@contextmanager
def atomic_directory(path: str | os.PathLike[str], *, is_own: Callable[[Path], bool], what: str) -> Iterator[Path]:
    """A hidden directory to fill, which appears at `path` complete when the `with` block ends without an exception.

    The directory is built as a hidden sibling of `path` (same file system, so the final rename is atomic);
    at the end every file and directory in it is flushed to disk (the rename must not publish data still
    in the page cache), then it is renamed into place and the parent directory is flushed (so the rename
    itself survives a power loss). A rename cannot replace a non-empty directory, so an earlier one is
    moved aside first: a kill in between leaves `path` missing (the old one hidden), never mixed. On any
    exception, Ctrl-C included, the hidden directory is removed and `path` keeps what it had.

    Args:
        path: Where the directory appears; its parent is created if needed.
        is_own: Whether an existing non-empty directory at `path` is the caller's own kind of output (an
            earlier checkpoint, corpus or export), which the new one may replace.
        what: That kind of output in words, for the refusal: "a checkpoint".

    Raises:
        UserError: Something else is at `path` (see `check_destination`), before the block runs.
    """
    path = Path(path)
    check_destination(path, is_own=is_own, what=what)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = hidden_sibling(path, "tmp")
    tmp.mkdir()
    try:
        yield tmp
        _fsync_tree(tmp)
        if os.path.lexists(path):
            old = hidden_sibling(path, "old")
            os.replace(path, old)
            os.replace(tmp, path)
            _delete(old)
        else:
            os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    _fsync_directory(path.parent)


def check_destination(path: str | os.PathLike[str], *, is_own: Callable[[Path], bool], what: str) -> None:
    """Refuse a destination that holds what is not the caller's: `path` may be absent, an empty directory or
    what `is_own` recognises.

    Every command that writes a directory calls this first: through `atomic_directory`, or before the work
    that precedes writing, so a mistyped `--out` costs the user nothing: no file of theirs is deleted, and
    no time is spent before saying so. A command that writes its files into a directory, beside what is
    there, calls `check_output_directory`.

    Args:
        path: The directory a command is about to write.
        is_own: Whether a non-empty directory is the caller's own kind of output.
        what: That kind of output in words, for the message: "a checkpoint".

    Raises:
        UserError: One line naming `path` and what is there.
    """
    path = Path(path)
    if not os.path.lexists(path):
        return
    if not path.is_dir():
        there = "a file" if path.is_file() else "neither a file nor a directory"
    elif not (entries := len(os.listdir(path))) or is_own(path):
        return
    else:
        there = f"a directory with {entries} entr{'y' if entries == 1 else 'ies'}"
    raise UserError(f"{path}: exists and is not {what} ({there}); choose another path")


def check_output_directory(path: str | os.PathLike[str]) -> None:
    """Refuse a file where a command writes its files into a directory, beside what is already there (`tnmt
    train`'s out_dir, `tnmt attention --out`): any directory will do, and the user's files in it stay.

    Raises:
        UserError: One line naming `path` and what is there, before anything is written.
    """
    check_destination(path, is_own=Path.is_dir, what="a directory")


def hidden_sibling(path: Path, kind: Literal["tmp", "old"]) -> Path:
    """`.NAME.tmp-XXXXXXXX` (being written) or `.NAME.old-XXXXXXXX` (being deleted) beside `path`: the one
    form of name for what a writer has not finished, hidden (a leading dot), unique, and what
    `remove_leftovers` matches."""
    return path.parent / f".{path.name}.{kind}-{secrets.token_hex(4)}"


def remove_leftovers(directory: Path) -> None:
    """Delete what writers killed mid-way left in `directory` (`hidden_sibling` names): files, directories
    and links being written (`.NAME.tmp-*`), replaced or deleted (`.NAME.old-*`).
    Only for a directory no other process is writing to (a training run's own output)."""
    for pattern in (".*.tmp-*", ".*.old-*"):
        for leftover in directory.glob(pattern):
            _delete(leftover)


def append_line(path: str | os.PathLike[str], line: str) -> None:
    """Append one line (a log record) with a single write: a crash can tear only the last line of the file."""
    with _naming(Path(path)), Path(path).open("a", encoding="utf-8") as f:
        f.write(line + "\n")


@contextmanager
def _naming(path: Path) -> Iterator[None]:
    """Give a plain `OSError` without a file name (a failed write or fsync says only "No space left") `path`.
    Subclasses pass unchanged: they are someone else's errors (a download's connection error, say)."""
    try:
        yield
    except OSError as e:
        if type(e) is OSError and e.filename is None:
            raise OSError(e.errno, e.strerror or str(e), str(path)) from None
        raise


def _delete(path: Path) -> None:
    """Remove a file, link or directory tree, as far as possible: what remains is hidden and cleared later."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _fsync_tree(directory: Path) -> None:
    """Flush every file and directory under `directory` (links are not followed), the deepest first."""
    for root, _, names in os.walk(directory, topdown=False):
        for name in names:
            if not (path := Path(root, name)).is_symlink():
                _fsync(path)
        _fsync_directory(Path(root))


def _fsync_directory(directory: Path) -> None:
    """Persist the rename itself: on POSIX the new directory entry is durable only after this."""
    if os.name == "posix":
        _fsync(directory)


def _fsync(path: Path) -> None:
    """Flush a file (or, on POSIX, a directory) to disk; a failure names it."""
    with _naming(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
