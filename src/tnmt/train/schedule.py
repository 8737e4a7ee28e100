"""The learning-rate schedule of section 5.3 (Eq. 3).

    lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)

Linear warm-up for `warmup_steps` updates, then decay with the inverse square root of the step.
The paper uses factor 1 and warmup 4000; `factor` is the knob later implementations (tensor2tensor,
The Annotated Transformer) expose. The rate is a pure function of the step, so resuming a run needs
no scheduler state: the loop sets it before every update.
"""


def inverse_sqrt_lr(step: int, *, d_model: int, warmup_steps: int, factor: float = 1.0) -> float:
    """Learning rate for update number `step` (1-based); the peak is reached at step == warmup_steps."""
    if step < 1:
        raise ValueError(f"step must be >= 1, got {step}")
    return factor * d_model**-0.5 * min(step**-0.5, step * warmup_steps**-1.5)
