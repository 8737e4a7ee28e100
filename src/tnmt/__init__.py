"""tnmt: the Transformer of "Attention Is All You Need" (Vaswani et al., 2017) for machine translation."""

from tnmt.config import ModelConfig
from tnmt.model import Transformer

__all__ = ["ModelConfig", "Transformer"]
__version__ = "0.1.0"
