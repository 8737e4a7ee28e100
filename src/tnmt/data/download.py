"""Downloading data files against published checksums, resumably: the one download path of every data set.

A training run must see exactly the bytes its recipe was written for, and a 900 MB download that stops
at 90% must not start again from zero. So a file is downloaded to `NAME.part` beside its destination,
continued with an HTTP Range request when that file already exists (a server that ignores the Range
header sends the whole file, which then replaces the part), checked against its size and checksum, and
renamed to `NAME` only then: a file under its final name is always complete and verified. A part that
fails its checksum is deleted, so the next run starts clean.
"""

import hashlib
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from tnmt.errors import UserError

TIMEOUT = (10, 60)  # seconds: to connect, and between two received bytes
CHUNK = 1 << 20

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checksum:
    """What a file's bytes must hash to, and its size when that is published too."""

    algorithm: Literal["sha256", "md5"]
    digest: str
    size: int | None = None  # bytes

    def problem(self, path: Path) -> str | None:
        """Why the file at `path` is not this one ("no such file", a wrong size or digest), or None if it is."""
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return "no such file"
        if self.size is not None and size != self.size:
            return f"{size} bytes, expected {self.size}"
        digest = file_digest(path, self.algorithm)
        if digest != self.digest:
            return f"{self.algorithm} mismatch (expected {self.digest}, got {digest})"
        return None


def file_digest(path: Path, algorithm: str) -> str:
    """The hex digest of a file, read in chunks (the WMT archives are larger than one would load at once)."""
    hasher = hashlib.new(algorithm)
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            hasher.update(chunk)
    return hasher.hexdigest()


def is_url(source: str | Path, *, name: str) -> bool:
    """Whether a data set's `source` (`--from`) is a base URL to download from, rather than a local directory.

    Args:
        source: A directory, or a URL ("scheme://...").
        name: The data set's name, for the message ("Multi30k").

    Raises:
        UserError: A URL whose scheme is not http(s) (ftp://, file://): `download` speaks HTTP only.
    """
    if not (isinstance(source, str) and "://" in source):
        return False
    if not source.startswith(("http://", "https://")):
        raise UserError(f"cannot download {name} from {source}: only http(s) URLs are supported")
    return True


def download(url: str, dest: Path, checksum: Checksum, *, name: str, hint: str) -> Path:
    """Download `url` to `dest`, resuming `dest.part` if an earlier run left one, and verify it.

    Args:
        url: An http(s) URL.
        dest: Final path; its directory is created if needed.
        checksum: What the downloaded bytes must be.
        name: The data set's name, for messages ("Multi30k").
        hint: What the user can do instead, appended to a network error ("pass --from DIR").

    Returns:
        `dest`.

    Raises:
        UserError: One line naming the URL: an HTTP error, no connection, a stalled server (the part
            is kept for the next try), or a checksum mismatch (the part is deleted).
    """
    import requests  # here: it takes a tenth of a second to import and most commands never download

    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    done = part.stat().st_size if part.exists() else 0
    try:
        headers = {"Range": f"bytes={done}-"} if done else {}
        with requests.get(url, stream=True, timeout=TIMEOUT, headers=headers) as response:
            if response.status_code != 416:  # 416: nothing past `done`, the part is whole: check it below
                response.raise_for_status()
                resumed = response.status_code == 206
                if done:
                    logger.info(f"{dest.name}: resuming at byte {done}" if resumed else f"{dest.name}: starting over")
                with open(part, "ab" if resumed else "wb") as f:
                    for chunk in response.iter_content(CHUNK):
                        f.write(chunk)
    except requests.RequestException as err:
        raise UserError(f"cannot download {name} from {url}: {reason(err)}; {hint}") from None
    if problem := checksum.problem(part):
        part.unlink()
        raise UserError(f"{url}: {problem}: not the {name} file, or corrupted on the way")
    os.replace(part, dest)
    return dest


def reason(err: Exception) -> str:
    """A short reason for a failed request: requests' own messages nest three exceptions deep."""
    import requests

    if isinstance(err, requests.HTTPError) and err.response is not None:
        return f"HTTP {err.response.status_code} {err.response.reason}"
    if isinstance(err, requests.ConnectTimeout):
        return f"no connection within {TIMEOUT[0]} s"
    if isinstance(err, requests.ReadTimeout) or "Read timed out" in str(err):
        return f"the server sent nothing for {TIMEOUT[1]} s"
    text = " ".join(str(err).split())
    os_error = re.search(r"\[Errno -?\d+\] [^)\"']+", text)  # e.g. "[Errno 111] Connection refused"
    return os_error.group(0) if os_error else text
