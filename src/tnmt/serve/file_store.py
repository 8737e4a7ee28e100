"""Translated files waiting for their download (LibreTranslate's `/translate_file` answers a URL, not the file).

A store is a directory of its own (a fresh temporary one per server, made at the first file and removed when the
server stops). A file is
written atomically (tnmt/io.py) under a name the server makes, a random hex key and the client's file name
reduced to safe characters, so no client name becomes a path; a download names the key, which must match that
shape exactly. The store is bounded: files expire `ttl_s` seconds after they were written, and past `max_files`
or `max_bytes` the oldest go first; expired files are removed at every write and every download, so nothing a
user sent is kept past its expiry by more than the next request.
"""

import re
import secrets
import shutil
import tempfile
import threading
import time
from pathlib import Path

from tnmt.io import atomic_write_bytes

KEY = re.compile(r"[0-9a-f]{32}\.[A-Za-z0-9._-]{1,200}")


class FileStore:
    """Translated files, each downloadable by its key until it expires."""

    def __init__(self, *, ttl_s: float = 600.0, max_files: int = 256, max_bytes: int = 512 * 2**20) -> None:
        self._directory: Path | None = None
        self.ttl_s, self.max_files, self.max_bytes = ttl_s, max_files, max_bytes
        self._lock = threading.Lock()

    @property
    def directory(self) -> Path:
        """The store's directory, made on first use (a server that never stores a file makes none)."""
        if self._directory is None:
            self._directory = Path(tempfile.mkdtemp(prefix="tnmt-files-"))
        return self._directory

    def put(self, name: str, data: bytes) -> str:
        """Keep `data` as the file `name` (the client's name: only its safe characters are used); its key."""
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", Path(name).name).lstrip(".")[:200] or "file"
        key = f"{secrets.token_hex(16)}.{safe}"
        with self._lock:
            atomic_write_bytes(self.directory / key, data)
            self._sweep()
        return key

    def get(self, key: str) -> Path | None:
        """The stored file of `key`, or None when the key is malformed, unknown or expired."""
        if not KEY.fullmatch(key) or self._directory is None:
            return None
        with self._lock:
            self._sweep()
            path = self.directory / key
            return path if path.is_file() else None

    def close(self) -> None:
        """Remove the store and everything in it."""
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)

    def _sweep(self) -> None:
        """Remove expired files, then the oldest while over `max_files` or `max_bytes` (the newest is kept)."""
        now = time.time()
        files = sorted(
            (p for p in self.directory.iterdir() if p.is_file() and KEY.fullmatch(p.name)),
            key=lambda p: p.stat().st_mtime,
        )
        kept = []
        for path in files:
            if now - path.stat().st_mtime > self.ttl_s:
                path.unlink(missing_ok=True)
            else:
                kept.append(path)
        total = sum(p.stat().st_size for p in kept)
        while len(kept) > 1 and (len(kept) > self.max_files or total > self.max_bytes):
            oldest = kept.pop(0)
            total -= oldest.stat().st_size
            oldest.unlink(missing_ok=True)
