import pytest

from tnmt.train.schedule import inverse_sqrt_lr


def test_values_follow_equation_3():
    d, warmup = 512, 4000
    assert inverse_sqrt_lr(1, d_model=d, warmup_steps=warmup) == pytest.approx(512**-0.5 * 4000**-1.5)
    assert inverse_sqrt_lr(4000, d_model=d, warmup_steps=warmup) == pytest.approx(512**-0.5 * 4000**-0.5)
    assert inverse_sqrt_lr(16000, d_model=d, warmup_steps=warmup) == pytest.approx(512**-0.5 / 126.49111, rel=1e-6)
    assert inverse_sqrt_lr(100, d_model=d, warmup_steps=warmup, factor=2.0) == pytest.approx(
        2 * 512**-0.5 * 100 * 4000**-1.5
    )


def test_linear_warmup_then_decay_peaks_at_warmup():
    lrs = [inverse_sqrt_lr(s, d_model=256, warmup_steps=100) for s in range(1, 400)]
    peak = max(range(len(lrs)), key=lrs.__getitem__) + 1
    assert peak == 100
    assert all(a < b for a, b in zip(lrs[:99], lrs[1:100], strict=True))
    assert all(a > b for a, b in zip(lrs[99:-1], lrs[100:], strict=True))


def test_step_zero_is_rejected():
    with pytest.raises(ValueError, match="step"):
        inverse_sqrt_lr(0, d_model=8, warmup_steps=1)
