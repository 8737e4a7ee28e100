import math

import pytest
import torch
import torch.nn.functional as F

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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gradient_matches_cross_entropy_with_label_smoothing(dtype):
    torch.manual_seed(0)
    logits = torch.randn(3, 4, 7).to(dtype).requires_grad_()
    target = torch.randint(1, 7, (3, 4))
    target[0, 2:] = 0  # padding
    loss, nll = label_smoothed_loss(logits, target, epsilon=0.1, pad_id=0)
    (2.0 * loss).backward()
    reference = logits.detach().float().requires_grad_()
    flat = reference.flatten(0, 1), target.flatten()
    expected = F.cross_entropy(*flat, ignore_index=0, label_smoothing=0.1, reduction="sum")
    (2.0 * expected).backward()
    torch.testing.assert_close(loss, expected)
    torch.testing.assert_close(nll, F.cross_entropy(*flat, ignore_index=0, reduction="sum"))
    assert logits.grad.dtype == dtype and not nll.requires_grad
    torch.testing.assert_close(
        logits.grad.float(), reference.grad, atol=1e-2 if dtype == torch.bfloat16 else 1e-6, rtol=0
    )
    assert (logits.grad[0, 2:] == 0).all()


def test_a_second_backward_through_the_reused_buffer_raises():
    logits = torch.randn(1, 2, 5, requires_grad=True)
    loss, _ = label_smoothed_loss(logits, torch.tensor([[3, 4]]), epsilon=0.1, pad_id=0)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="inplace"):
        loss.backward()
