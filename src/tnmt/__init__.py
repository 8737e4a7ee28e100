"""tnmt: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) for machine translation.

The public names below are imported on first use (PEP 562), so `import tnmt.cli` and `tnmt --help`
do not pay for torch.
"""

from importlib import import_module
from typing import Any

_HOMES = {
    "Architecture": "tnmt.config",
    "DataConfig": "tnmt.config",
    "DecodeConfig": "tnmt.config",
    "ModelConfig": "tnmt.config",
    "TrainConfig": "tnmt.config",
    "Transformer": "tnmt.model",
    "Translator": "tnmt.decode.translator",
    "beam_search": "tnmt.decode.beam",
    "greedy_search": "tnmt.decode.greedy",
    "load_checkpoint": "tnmt.checkpoint",
    "save_checkpoint": "tnmt.checkpoint",
}
__all__ = sorted(_HOMES)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name not in _HOMES:
        raise AttributeError(f"module 'tnmt' has no attribute {name!r}")
    return getattr(import_module(_HOMES[name]), name)


def __dir__() -> list[str]:
    return [*globals(), *__all__]
