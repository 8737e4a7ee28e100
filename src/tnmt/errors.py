"""User-facing errors.

Bad input (a malformed corpus line, an unknown config key, a missing file) raises `UserError`. The CLI
prints its message as one line and exits with status 2; library users catch it as a `ValueError`.
"""

import os
from collections.abc import Iterator
from contextlib import contextmanager


class UserError(ValueError):
    """An error caused by the user's input, with a message that names the file, line or field."""


@contextmanager
def reading_file(
    path: str | os.PathLike[str], *, what: str = "file", directory: str = "expected a file"
) -> Iterator[None]:
    """Inside the block, a missing `path` or a directory in its place is a `UserError` naming it, not a traceback.

    The one place that words these two messages ("PATH: no such file", "PATH: is a directory, expected a
    file"); every other `OSError` (no permission, a full disk) passes through, for the CLI to report as the
    environment's failure (exit 1) rather than the user's input (exit 2).

    Args:
        path: The file the block reads, as the message should name it.
        what: What the message says after "no such " ("recipe file").
        directory: What the message says after "is a directory, " ("not a JSON file").

    Raises:
        UserError: The block raised `FileNotFoundError` or `IsADirectoryError`.
    """
    try:
        yield
    except FileNotFoundError:
        raise UserError(f"{path}: no such {what}") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a directory, {directory}") from None
