"""Reading JSON and writing files atomically.

A training run killed mid-save (Ctrl-C, OOM killer, a full disk) must never leave a half-written
checkpoint or tokenizer behind the name of a good one. So every file tnmt writes goes to a temporary
file in the same directory, is flushed to disk, then renamed over the target: `os.replace` is atomic
on POSIX and Windows when both names are on one file system, so readers see the old file or the new
one, never a mix. A write that fails (a full disk, a read-only file system) raises an `OSError` that
names the file, so the one-line error says where.
"""

import json
import os
import secrets
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from tnmt.errors import UserError


def read_json(path: str | os.PathLike[str]) -> Any:
    """Parse a JSON file (a config, a tokenizer description); every failure is one line naming the file.

    Raises:
        UserError: the file is missing, a directory, not UTF-8 or not JSON (with the line of the error).
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, not a JSON file") from None
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
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
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


def replace_directory(tmp: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Put the complete directory `tmp` at `path`, replacing any previous one.

    Built elsewhere and renamed into place, a directory (a checkpoint, a prepared corpus) is either
    absent or whole at `path`: a rename cannot replace a non-empty directory, so an existing one is moved
    aside first, and a kill in between leaves `path` missing (the old one hidden), never mixed.
    """
    tmp, path = Path(tmp), Path(path)
    if path.exists():
        old = path.parent / f".{path.name}.old-{secrets.token_hex(4)}"
        os.replace(path, old)
        os.replace(tmp, path)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, path)
    _fsync_directory(path.parent)


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


def _fsync_directory(directory: Path) -> None:
    """Persist the rename itself: on POSIX the new directory entry is durable only after this."""
    if os.name != "posix":
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
