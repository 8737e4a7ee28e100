"""Public names of a package imported on first use (PEP 562).

`tnmt` and `tnmt.data` re-export names from their modules, but `import tnmt.cli` (so `tnmt --help`) and the
corpus-encoding worker processes must not pay for importing torch: a name's module is imported only when
the name is first read.
"""

import sys
from collections.abc import Callable
from importlib import import_module
from typing import Any


def lazy_exports(package: str, homes: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose public names live in the modules `homes` gives."""

    def __getattr__(name: str) -> Any:
        if name not in homes:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(homes[name]), name)

    def __dir__() -> list[str]:
        return [*vars(sys.modules[package]), *homes]

    return __getattr__, __dir__
