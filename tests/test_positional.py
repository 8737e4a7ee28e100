import math

import pytest
import torch

from tnmt.blocks.positional import PositionalEncoding, sinusoidal_table


def test_interleaved_table_equals_the_papers_formula():
    table = sinusoidal_table(50, 16)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_concat_layout_puts_all_sines_before_all_cosines():
    inter, concat = sinusoidal_table(20, 8), sinusoidal_table(20, 8, layout="concat")
    assert torch.equal(concat[:, :4], inter[:, 0::2])
    assert torch.equal(concat[:, 4:], inter[:, 1::2])


@pytest.mark.parametrize("k", [1, 3, 10])
def test_a_fixed_offset_is_a_linear_map_for_every_position(k):
    """PE(pos + k) = M_k PE(pos) with M_k block-diagonal rotations independent of pos (section 3.5)."""
    d = 16
    table = sinusoidal_table(100, d).double()
    m = torch.zeros(d, d, dtype=torch.float64)
    for i in range(d // 2):
        w = 1 / 10000 ** (2 * i / d)
        c, s = math.cos(k * w), math.sin(k * w)
        m[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    predicted = table[: 100 - k] @ m
    torch.testing.assert_close(predicted, table[k:], atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["sinusoidal", "learned"])
def test_too_long_sequence_names_the_limit(kind):
    pe = PositionalEncoding(8, 4, kind=kind)
    pe(torch.zeros(1, 8, 4))
    with pytest.raises(ValueError, match="max_len=8"):
        pe(torch.zeros(1, 9, 4))
    with pytest.raises(ValueError, match="max_len=8"):
        pe(torch.zeros(1, 1, 4), start=8)


def test_offset_positions_equal_the_slice_of_a_full_pass():
    pe = PositionalEncoding(10, 4)
    x = torch.randn(1, 6, 4)
    torch.testing.assert_close(pe(x[:, 4:], start=4), pe(x)[:, 4:])
