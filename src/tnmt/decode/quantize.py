"""int8 dynamic quantisation of a trained model for CPU inference (torch.ao).

Decoding a small batch is bound by reading the weights from memory, not by arithmetic: every step
reads every decoder matrix and the (V, D) output projection once. Storing the Linear weights as int8
(one scale per output row) reads a quarter of the bytes, and activations are quantised on the fly per
batch, so no calibration data is needed. Cost: a small loss of precision, measured on Multi30k in
benchmarks/BENCHMARKS.md before this was offered.

Cross-attention reads slices of its stacked [W_Q; W_K; W_V] matrix, which a quantised Linear does not
expose, so the copy first splits it into W_Q and [W_K; W_V] Linear layers (`split_cross_projections`)
and those are quantised too. Embeddings, LayerNorms and attention itself stay float32.
"""

import copy
import warnings

import torch
from torch import nn

from tnmt.model import Transformer


def quantize_int8(model: Transformer) -> Transformer:
    """A copy of `model` whose Linear layers compute in int8 (cross-attention's split into Q and K/V first)."""
    quantized = copy.deepcopy(model).eval()  # deepcopy keeps tied weights tied
    for layer in quantized.decoder_layers:
        layer.cross_attn.split_cross_projections()
    config = torch.ao.quantization.per_channel_dynamic_qconfig
    spec = {name: config for name, module in quantized.named_modules() if isinstance(module, nn.Linear)}
    with warnings.catch_warnings():  # torch.ao announces its move to torchao; the API still works
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(quantized, spec, dtype=torch.qint8, inplace=True)
