"""What a training run reports while it runs: metrics.jsonl, the per-window averages, the progress bar."""

import json
import math
import sys
import time
from pathlib import Path

from torch import Tensor
from tqdm import tqdm

from tnmt.config import TrainConfig
from tnmt.io import append_line, atomic_write_text


class Window:
    """Sums over the updates since the last log line, so a logged loss is the whole window's, not one batch's."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Start a new window: the next log line covers the updates from now on."""
        self.start, self.loss, self.nll, self.tokens = time.monotonic(), 0.0, 0.0, 0
        self.align, self.aligned = 0.0, 0  # guided alignment's loss and the target tokens it covers

    def add(
        self,
        loss: Tensor | float,
        nll: Tensor | float,
        tokens: int,
        align: Tensor | float = 0.0,
        aligned: Tensor | int = 0,
    ) -> None:
        """Add one update's sums: tensors stay on their device (summed there, unread) until the log line reads them."""
        self.loss, self.nll, self.tokens = self.loss + loss, self.nll + nll, self.tokens + tokens
        self.align, self.aligned = self.align + align, self.aligned + aligned


class Progress:
    """A progress bar over the budget that bounds the run: updates, or the seconds of a time budget, so a
    time-boxed run shows elapsed / budget and an ETA. Into a file (`nohup tnmt train ... 2> log`) a redraw
    is a new line, so there it redraws once a minute instead of ten times a second."""

    def __init__(self, cfg: TrainConfig, *, step: int, elapsed: float, enabled: bool) -> None:
        self.by_time = not cfg.max_steps and bool(cfg.max_minutes)
        total = 60 * cfg.max_minutes if self.by_time else cfg.max_steps or None
        unit_format = "{n:.0f}/{total:.0f} s" if self.by_time else "{n_fmt}/{total_fmt} updates"
        self.bar = tqdm(
            total=total,
            initial=elapsed if self.by_time else step,
            disable=not enabled,
            mininterval=0.1 if sys.stderr.isatty() else 60.0,
            dynamic_ncols=True,
            unit="s" if self.by_time else "step",
            bar_format=None if total is None else "{l_bar}{bar}| " + unit_format + " [{elapsed}<{remaining}{postfix}]",
        )

    def advance(self, *, step: int, elapsed: float) -> None:
        """Move to `step` updates done, `elapsed` training seconds."""
        position = elapsed if self.by_time else step
        if self.bar.total is not None:
            position = min(position, self.bar.total)  # the last update may end a little past a time budget
        self.bar.update(position - self.bar.n)


class MetricsLog:
    """metrics.jsonl, one JSON object per line; on resume, lines past the checkpoint's step are dropped,
    and so is a line torn by a crash mid-write (the only line a crash can tear is the last).

    Disabled (`enabled=False`, every rank but 0 of a torchrun job), it neither reads nor writes.
    """

    def __init__(self, path: Path, *, after_step: int, enabled: bool = True) -> None:
        self.path, self.enabled = path, enabled
        if enabled and path.exists():
            kept = [line for line in path.read_text().splitlines() if _step(line) <= after_step]
            atomic_write_text(path, "".join(line + "\n" for line in kept))

    def write(self, **record: float) -> None:
        if self.enabled:
            append_line(self.path, json.dumps(record))


def _step(line: str) -> float:
    """The step of a metrics.jsonl line; infinity (dropped on resume) for a torn or empty one."""
    try:
        return json.loads(line)["step"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return math.inf
