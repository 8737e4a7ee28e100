import torch

from tnmt.blocks.masks import causal_mask, padding_mask, target_mask


def test_padding_mask_marks_real_tokens():
    m = padding_mask(torch.tensor([[5, 6, 0]]), pad_id=0)
    assert m.shape == (1, 1, 1, 3)
    assert m.flatten().tolist() == [True, True, False]


def test_causal_mask_is_lower_triangular_and_shifts_with_a_cache():
    assert causal_mask(3)[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    # Two new queries after three cached positions see keys 0..3 and 0..4.
    assert causal_mask(2, 5)[0, 0].tolist() == [[True, True, True, True, False], [True] * 5]


def test_target_mask_keeps_the_start_token_even_when_it_is_the_pad_id():
    m = target_mask(torch.tensor([[0, 7, 8, 0]]), pad_id=0)[0, 0]
    assert m[:, 0].all()  # Marian starts decoding from pad
    assert not m[:, 3].any()  # trailing pad is never a key
    assert m[2].tolist() == [True, True, True, False]
