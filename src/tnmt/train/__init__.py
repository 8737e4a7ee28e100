"""Training: the learning-rate schedule (Eq. 3), label smoothing (section 5.4), checkpoints, the loop."""
