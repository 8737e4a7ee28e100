"""A training run's directory (`--train.out_dir`), laid out in one place: what the loop writes and what replay,
the server and the curves read.

    OUT/
      checkpoints/step_0000800/   the last `keep_checkpoints` (and the best), each a whole checkpoint
      snapshots/step_0000025/     the model alone at log-spaced updates, for `tnmt replay`
      last -> checkpoints/...     the newest checkpoint; best -> the best by validation BLEU
      averaged/                   the average of the last `average_last`
      metrics.jsonl               one record per logged update or validation
      curves.png                  drawn from metrics.jsonl when training ends
"""

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tnmt.checkpoint import CONFIG_FILE, is_checkpoint, read_model_json
from tnmt.directions import direction_name
from tnmt.errors import UserError

_STEP = re.compile(r"step_(\d+)")


@dataclass(frozen=True)
class KeptModel:
    """A model the run kept: its update, where it is, and what kept it ("snapshot" or "checkpoint")."""

    step: int
    path: Path
    kind: str


@dataclass(frozen=True)
class RunDir:
    """Where each thing of the run at `path` lives, and the readers of what the loop wrote there."""

    path: Path

    @property
    def checkpoints(self) -> Path:
        return self.path / "checkpoints"

    @property
    def snapshots(self) -> Path:
        return self.path / "snapshots"

    @property
    def last(self) -> Path:
        return self.path / "last"

    @property
    def best(self) -> Path:
        return self.path / "best"

    @property
    def averaged(self) -> Path:
        return self.path / "averaged"

    @property
    def metrics(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def curves(self) -> Path:
        return self.path / "curves.png"

    def checkpoint(self, step: int) -> Path:
        """The checkpoint of update `step`."""
        return self.checkpoints / f"step_{step:07d}"

    def snapshot(self, step: int) -> Path:
        """The snapshot of update `step`."""
        return self.snapshots / f"step_{step:07d}"

    def step_checkpoints(self) -> list[Path]:
        """The checkpoints kept, oldest first."""
        return sorted(self.checkpoints.glob("step_*"))

    def kept_models(self) -> list[KeptModel]:
        """The models the run kept, by update (a step both snapshotted and checkpointed counts once).

        Raises:
            UserError: the directory does not hold kept models.
        """
        if not self.path.is_dir():
            raise UserError(f"{self.path}: no such directory (give a training run's --train.out_dir)")
        found: dict[int, KeptModel] = {}
        for kind, folder in (("snapshot", self.snapshots), ("checkpoint", self.checkpoints)):
            for path in sorted(folder.glob("step_*")):
                match = _STEP.fullmatch(path.name)
                if match and is_checkpoint(path):
                    found[int(match[1])] = KeptModel(int(match[1]), path, kind)
        if not found:
            raise UserError(f"{self.path}: not a training run (no checkpoints/step_* or snapshots/step_* in it)")
        return [found[step] for step in sorted(found)]

    def records(self) -> list[dict[str, Any]]:
        """The records of metrics.jsonl in order (none without the file; a line cut mid-write skipped)."""
        if not self.metrics.is_file():
            return []
        records = []
        for line in self.metrics.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("step"), int):
                records.append(record)
        return records

    def check_serves(self, checkpoint: Path) -> None:
        """Refuse this run as the training run of `checkpoint` unless its last kept model translates the
        checkpoint's pairs (`tnmt serve --run`).

        Raises:
            UserError: naming the run and what its models translate.
        """
        kept = read_model_json(self.kept_models()[-1].path / CONFIG_FILE)[2]
        if not set(read_model_json(checkpoint / CONFIG_FILE)[2]) <= set(kept):
            names = ", ".join(direction_name(d) for d in kept) or "no named pair"
            raise UserError(f"--run {self.path}: its models translate {names}, not the checkpoint's pairs")


def run_of(path: str | os.PathLike[str]) -> Path | None:
    """The training run `path` is or belongs to: the directory itself when it holds kept models, or the run of a
    checkpoint in it (RUN/best, RUN/checkpoints/step_*); None when there is none."""
    path = Path(path)
    for candidate in (path, path.parent, path.resolve().parent.parent):
        if any(candidate.glob("checkpoints/step_*")) or any(candidate.glob("snapshots/step_*")):
            return candidate
    return None
