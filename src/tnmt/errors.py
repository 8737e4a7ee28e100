"""User-facing errors.

Bad input (a malformed corpus line, an unknown config key, a missing file) raises `UserError`. The CLI
prints its message as one line and exits with status 2; library users catch it as a `ValueError`.
"""


class UserError(ValueError):
    """An error caused by the user's input, with a message that names the file, line or field."""
