import math

import pytest
import torch

from tnmt.train.loss import label_smoothed_loss


def test_matches_a_hand_computation_and_ignores_padding():
    logits = torch.tensor([[[2.0, 0.0, 1.0], [0.5, 0.5, 3.0]]])  # (B=1, T=2, V=3)
    target = torch.tensor([[0, 1]])  # second position is padding (pad_id=1)
    eps = 0.1
    logp = torch.log_softmax(logits[0, 0], -1).tolist()
    # (1 - eps) on the reference token, eps spread uniformly over all V classes.
    expected = -((1 - eps) * logp[0] + eps / 3 * sum(logp))
    loss, nll = label_smoothed_loss(logits, target, epsilon=eps, pad_id=1)
    assert loss.item() == pytest.approx(expected, rel=1e-6)
    assert nll.item() == pytest.approx(-logp[0], rel=1e-6)


def test_no_smoothing_is_plain_cross_entropy():
    logits = torch.randn(2, 3, 5)
    target = torch.randint(1, 5, (2, 3))
    loss, nll = label_smoothed_loss(logits, target, epsilon=0.0, pad_id=0)
    assert loss.item() == pytest.approx(nll.item())
    manual = -torch.log_softmax(logits, -1).gather(-1, target[..., None]).sum().item()
    assert loss.item() == pytest.approx(manual, rel=1e-5)


def test_smoothing_penalises_overconfidence():
    target = torch.tensor([[0]])
    confident = torch.tensor([[[20.0, 0.0, 0.0, 0.0]]])
    calibrated = torch.tensor([[[math.log(0.9 / (0.1 / 3)), 0.0, 0.0, 0.0]]])
    smoothed = lambda x: label_smoothed_loss(x, target, epsilon=0.1, pad_id=3)[0].item()  # noqa: E731
    assert smoothed(calibrated) < smoothed(confident)
