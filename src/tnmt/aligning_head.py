"""The aligning head: the decoder layer (and head) whose cross-attention tnmt reads as a word alignment.

Three parts of tnmt read one layer's cross-attention as "which source word is this target word translating":
guided-alignment training teaches that layer to (train/loss.py, train/start.py), constrained search offers a
glossary term where it looks at the term's source words (decode/beam.py), and the evidence of a translation
aligns words with it (translate/evidence.py). They name the layer and head the same way, here.
"""

from torch import Tensor

from tnmt.errors import UserError


def alignment_layer_index(alignment_layer: int, n_decoder_layers: int) -> int:
    """The index (0-based) of the decoder layer `DecodeConfig.alignment_layer` names: layer 1 is the first, -1 the
    last, clamped to the decoder's depth. Guided alignment trains this layer (train/loss.py)."""
    if alignment_layer > 0:
        return min(alignment_layer, n_decoder_layers) - 1
    return max(n_decoder_layers + alignment_layer, 0)


def alignment_rows(layer: Tensor, head: int) -> Tensor:
    """The aligning attention of one layer's cross-attention (B, H, T, S): head number `head` (1 = the first), or
    the heads' mean for 0."""
    if head > layer.size(1):
        raise UserError(f"DecodeConfig.alignment_head = {head}: the model has {layer.size(1)} heads")
    return layer.mean(dim=1) if head == 0 else layer[:, head - 1]
