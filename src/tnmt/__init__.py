"""tnmt: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) for machine translation.

The public names below are imported on first use (PEP 562), so `import tnmt.cli` and `tnmt --help`
do not pay for torch.
"""

from tnmt.exports import lazy_exports

_HOMES = {
    "Architecture": "tnmt.config",
    "DataConfig": "tnmt.config",
    "DecodeConfig": "tnmt.config",
    "ModelConfig": "tnmt.config",
    "TrainConfig": "tnmt.config",
    "Transformer": "tnmt.model",
    "Translation": "tnmt.translate.translator",
    "Translator": "tnmt.translate.translator",
    "beam_search": "tnmt.decode.beam",
    "greedy_search": "tnmt.decode.greedy",
    "load_checkpoint": "tnmt.checkpoint",
    "save_checkpoint": "tnmt.checkpoint",
}
__all__ = sorted(_HOMES)
__version__ = "0.1.0"

__getattr__, __dir__ = lazy_exports(__name__, _HOMES)
