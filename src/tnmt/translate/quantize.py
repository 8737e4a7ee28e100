"""int8 dynamic quantisation of a trained model for CPU inference (torch.ao).

Decoding a small batch is bound by reading the weights from memory, not by arithmetic: every step
reads every decoder matrix and the (V, D) output projection once. Storing the Linear weights as int8
(one scale per output row) reads a quarter of the bytes, and activations are quantised on the fly per
batch, so no calibration data is needed. Cost: a small loss of precision, measured on Multi30k in
benchmarks/NOTEBOOK.md before this was offered.

Cross-attention reads slices of its stacked [W_Q; W_K; W_V] matrix, which a quantised Linear does not
expose, so the copy first splits it into W_Q and [W_K; W_V] Linear layers (`split_cross_projections`)
and those are quantised too. Embeddings, LayerNorms and attention itself stay float32. So do Linear
layers under 256 x 256 weights: there quantising the activations on every call costs more than reading
int8 weights saves (on the Multi30k model, d_model 128, int8 cross-attention made decoding at batch 16
and 64 about 10% slower while it made the d_model 256 model 6-11% faster; benchmarks/NOTEBOOK.md).
"""

import copy
import warnings

import torch
from torch import nn

from tnmt.model import Transformer

MIN_WEIGHTS = 256 * 256  # smaller Linear layers stay float32 (see the module docstring)


def quantize_int8(model: Transformer, *, min_weights: int = MIN_WEIGHTS) -> Transformer:
    """A copy of `model` whose Linear layers of at least `min_weights` weights compute in int8."""
    quantized = copy.deepcopy(model).eval()  # deepcopy keeps tied weights tied
    if model.config.d_model**2 >= min_weights:  # cross-attention's W_Q is large enough to quantise
        for layer in quantized.decoder_layers:
            layer.cross_attn.split_cross_projections()
    config = torch.ao.quantization.per_channel_dynamic_qconfig
    spec = {
        name: config
        for name, module in quantized.named_modules()
        if isinstance(module, nn.Linear)
        and module.weight.numel() >= min_weights
        and not name.endswith("cross_attn.in_proj")  # unsplit: cross-attention slices it, so it stays float
    }
    with warnings.catch_warnings():  # torch.ao announces its move to torchao; the API still works
        warnings.simplefilter("ignore")
        return torch.ao.quantization.quantize_dynamic(quantized, spec, dtype=torch.qint8, inplace=True)
