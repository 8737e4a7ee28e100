"""Training curves: the losses and validation scores `tnmt train` logs, as the PNG it writes beside its metrics
(drawn without pyplot: see tnmt.views).
"""

import json
import os
from pathlib import Path

from matplotlib.figure import Figure


def plot_curves(metrics_jsonl: str | os.PathLike[str], out: str | os.PathLike[str]) -> Path:
    """Plot training/validation loss and validation BLEU/chrF against the step from a JSON-lines log.

    Records look like {"step": 100, "train_loss": 4.2} or {"step": 500, "val_loss": 3.1,
    "val_bleu": 12.3, "val_chrf": 40.1}; missing keys and unreadable lines (a log cut mid-write) are skipped.
    """
    series: dict[str, list[tuple[float, float]]] = {
        "train_loss": [],
        "val_loss": [],
        "val_bleu": [],
        "val_chrf": [],
    }
    for line in Path(metrics_jsonl).read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            continue
        if not isinstance(record, dict) or not isinstance(record.get("step"), int | float):
            continue
        for key, points in series.items():
            if isinstance(record.get(key), int | float):
                points.append((record["step"], record[key]))
    figure = Figure(figsize=(10, 4), layout="constrained")
    loss_axes, bleu_axes = figure.subplots(1, 2)
    for key, label, marker in (("train_loss", "training loss", ""), ("val_loss", "validation loss", "o")):
        if series[key]:
            loss_axes.plot(*zip(*series[key], strict=True), marker=marker, label=label)
    for key, label in (("val_bleu", "validation BLEU"), ("val_chrf", "validation chrF")):
        if series[key]:
            bleu_axes.plot(*zip(*series[key], strict=True), marker="o", label=label)
    for axes, ylabel in ((loss_axes, "loss"), (bleu_axes, "BLEU / chrF")):
        axes.set_xlabel("step")
        axes.set_ylabel(ylabel)
        if axes.lines:
            axes.legend()
        else:
            axes.text(0.5, 0.5, "no data", ha="center", va="center", transform=axes.transAxes)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=100)
    return out
