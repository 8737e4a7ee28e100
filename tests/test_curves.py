"""The training curves draw from whatever a metrics log holds, a log cut mid-write or an empty one included."""

import json

from tnmt.train.curves import plot_curves


def test_plot_curves_tolerates_missing_keys_and_broken_lines(tmp_path):
    records = [
        {"step": 100, "train_loss": 5.0},
        {"step": 200, "train_loss": 4.0, "lr": 1e-3},
        {"step": 200, "val_loss": 4.5},  # no BLEU yet
        {"step": 400, "train_loss": 3.0},
        {"step": 400, "val_loss": 3.5, "val_bleu": 12.5},
        {"note": "no step"},
    ]
    log = tmp_path / "metrics.jsonl"
    log.write_text("\n".join(map(json.dumps, records)) + '\n{"step": 500, "train_l')  # cut mid-write
    out = plot_curves(log, tmp_path / "plots" / "curves.png")
    assert out.read_bytes()[:4] == b"\x89PNG"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert plot_curves(empty, tmp_path / "empty.png").exists()
