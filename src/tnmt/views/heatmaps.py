"""Attention heat maps, as in the paper's Figures 3-5: one picture per attention kind and layer, a map per head,
for `tnmt attention` and `tnmt quickstart` (drawn without pyplot: see tnmt.views).
"""

import math
import os
from collections.abc import Iterator
from pathlib import Path

from matplotlib.figure import Figure
from torch import Tensor

from tnmt.io import check_output_directory
from tnmt.model import AttentionMaps


def attention_figures(
    maps: AttentionMaps, src_pieces: list[str], tgt_pieces: list[str]
) -> Iterator[tuple[str, Figure]]:
    """One figure per attention kind and layer, one heat map per head, for the batch's first sentence.

    Args:
        maps: From `Transformer.attention_maps`.
        src_pieces: Labels of the source positions (keys and queries of the encoder).
        tgt_pieces: Labels of the decoder positions, i.e. its input tokens starting with BOS.

    Yields:
        A file stem ("encoder_layer1", "decoder_self_layer1", "cross_layer1", ...: layers count from 1 at the
        input side, as everywhere tnmt names them) and its figure.

    Raises:
        ValueError: The labels do not match the maps' lengths.
    """
    kinds = [
        ("encoder", maps.encoder, src_pieces, src_pieces),
        ("decoder_self", maps.decoder_self, tgt_pieces, tgt_pieces),
        ("cross", maps.cross, tgt_pieces, src_pieces),
    ]
    for kind, layers, rows, cols in kinds:
        for layer, weights in enumerate(layers):
            if weights.shape[-2:] != (len(rows), len(cols)):
                raise ValueError(
                    f"{kind} attention is {tuple(weights.shape[-2:])} but there are {len(rows)} x {len(cols)} labels"
                )
            title = f"{kind.replace('_', ' ')} attention, layer {layer + 1}"
            yield f"{kind}_layer{layer + 1}", _heads_figure(weights[0], rows, cols, title=title)


def plot_attention(
    maps: AttentionMaps, src_pieces: list[str], tgt_pieces: list[str], out_dir: str | os.PathLike[str]
) -> list[Path]:
    """Write the PNG heat maps of `attention_figures` into `out_dir` (beside what is there; a file there is a
    UserError); returns their paths."""
    out_dir = Path(out_dir)
    check_output_directory(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for stem, figure in attention_figures(maps, src_pieces, tgt_pieces):
        path = out_dir / f"{stem}.png"
        figure.savefig(path, dpi=100)
        paths.append(path)
    return paths


def _heads_figure(weights: Tensor, rows: list[str], cols: list[str], *, title: str) -> Figure:
    """A grid of heat maps, one per head, of weights (H, Tq, Tk) with labelled axes."""
    n_heads = weights.size(0)
    ncols = min(n_heads, 4)
    nrows = math.ceil(n_heads / ncols)
    cell = 0.25  # inches per token, so labels stay readable for long sentences
    width = ncols * max(3.0, cell * len(cols) + 1.0)
    height = nrows * max(3.0, cell * len(rows) + 1.0)
    figure = Figure(figsize=(width, height), layout="constrained")
    figure.suptitle(title)
    axes_grid = figure.subplots(nrows, ncols, squeeze=False)
    for head, axes in enumerate(axes_grid.flat):
        if head >= n_heads:
            axes.axis("off")
            continue
        # One colour scale (0..1) for every head and layer, so pictures compare at a glance.
        image = axes.imshow(weights[head].float().cpu().numpy(), cmap="viridis", vmin=0.0, vmax=1.0)
        axes.set_title(f"head {head + 1}", fontsize=9)
        axes.set_xticks(range(len(cols)), cols, rotation=90, fontsize=7)
        axes.set_yticks(range(len(rows)), rows, fontsize=7)
    figure.colorbar(image, ax=axes_grid, shrink=0.8)
    return figure
