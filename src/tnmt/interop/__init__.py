"""Interoperability with other toolkits: import MarianMT (OPUS-MT) checkpoints, export to CTranslate2.

`marian.py` needs no third-party package beyond tnmt's own (it reads config.json, safetensors and
sentencepiece files directly). `ctranslate2.py` needs the optional `ctranslate2` package, imported
only when used, through `require`.
"""

import importlib
from types import ModuleType

from tnmt.errors import UserError


def require(module: str, *, purpose: str) -> ModuleType:
    """Import an optional dependency, or explain how to install it.

    Raises:
        UserError: The package is not installed.
    """
    try:
        return importlib.import_module(module)
    except ImportError:
        raise UserError(f"{purpose} needs the {module!r} package: pip install 'tnmt[interop]'") from None
