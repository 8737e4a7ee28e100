"""The heat maps draw the model's own weights, head by head, labelled with the pieces."""

import pytest
import torch

from tnmt import ModelConfig, Transformer
from tnmt.views.heatmaps import attention_figures, plot_attention


@pytest.fixture(scope="module")
def attention():
    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=20,
        tgt_vocab_size=20,
        d_model=16,
        n_heads=2,
        n_encoder_layers=1,
        n_decoder_layers=2,
        d_ff=32,
        dropout=0.0,
        max_len=16,
        tie_output=False,
    )
    model = Transformer(config).eval()
    src, tgt = torch.tensor([[5, 6, 7, 2]]), torch.tensor([[1, 8, 9]])
    _, maps = model.attention_maps(src, tgt)
    return model, src, tgt, maps, ["▁a", "▁dog", "▁runs", "</s>"], ["<s>", "▁ein", "▁Hund"]


def drawn(figure) -> list[torch.Tensor]:
    """The matrices of a figure's heat maps, one per head."""
    return [torch.as_tensor(axes.images[0].get_array().data) for axes in figure.axes if axes.images]


def test_plotted_weights_are_the_models_own(attention):
    model, src, tgt, maps, src_pieces, tgt_pieces = attention
    _, fresh = model.attention_maps(src, tgt)  # recomputed: the figures must show the model's weights
    figures = dict(attention_figures(maps, src_pieces, tgt_pieces))
    assert sorted(figures) == [
        "cross_layer1",
        "cross_layer2",
        "decoder_self_layer1",
        "decoder_self_layer2",
        "encoder_layer1",
    ]
    for stem, figure in figures.items():
        kind, layer = stem.rsplit("_layer", 1)
        expected = getattr(fresh, kind)[int(layer) - 1][0]  # (H, Tq, Tk); layer 1 is the first
        heads = drawn(figure)
        assert len(heads) == 2
        for head, matrix in enumerate(heads):
            torch.testing.assert_close(matrix, expected[head], atol=1e-6, rtol=0)
            torch.testing.assert_close(matrix.sum(-1), torch.ones(matrix.size(0)), atol=1e-5, rtol=0)
            if kind == "decoder_self":  # causal: nothing above the diagonal
                assert (matrix.triu(diagonal=1) == 0).all()
        labels = [tick.get_text() for tick in figure.axes[0].get_xticklabels()]
        assert labels == (tgt_pieces if kind == "decoder_self" else src_pieces)


def test_plot_attention_writes_one_png_per_kind_and_layer(attention, tmp_path):
    _, _, _, maps, src_pieces, tgt_pieces = attention
    paths = plot_attention(maps, src_pieces, tgt_pieces, tmp_path / "pictures")
    assert len(paths) == 5
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in paths)


def test_labels_must_match_the_maps(attention):
    _, _, _, maps, src_pieces, tgt_pieces = attention
    with pytest.raises(ValueError, match="labels"):
        list(attention_figures(maps, src_pieces[:-1], tgt_pieces))
