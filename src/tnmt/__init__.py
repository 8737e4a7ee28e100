"""tnmt: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) for machine translation."""

from tnmt.config import DataConfig, DecodeConfig, ModelConfig, TrainConfig
from tnmt.decode import Translator, beam_search, greedy_search
from tnmt.model import Transformer
from tnmt.train.checkpoint import load_checkpoint, save_checkpoint

__all__ = [
    "DataConfig",
    "DecodeConfig",
    "ModelConfig",
    "TrainConfig",
    "Transformer",
    "Translator",
    "beam_search",
    "greedy_search",
    "load_checkpoint",
    "save_checkpoint",
]
__version__ = "0.1.0"
