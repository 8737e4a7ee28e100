"""The training progress bar follows the budget that ends the run: updates, or seconds of a time budget."""

from tnmt.config import TrainConfig
from tnmt.train.progress import MetricsLog, Progress, Window


def test_a_step_budget_counts_updates():
    progress = Progress(TrainConfig(max_steps=50), step=10, elapsed=3.0, enabled=True)
    assert (progress.bar.total, progress.bar.n) == (50, 10)
    progress.advance(step=11, elapsed=4.0)
    assert progress.bar.n == 11


def test_a_time_budget_counts_seconds_and_stops_at_the_budget():
    progress = Progress(TrainConfig(max_steps=0, max_minutes=2.0), step=10, elapsed=30.0, enabled=True)
    assert (progress.bar.total, progress.bar.n) == (120.0, 30.0)
    progress.advance(step=11, elapsed=45.5)
    assert progress.bar.n == 45.5
    progress.advance(step=12, elapsed=121.3)
    assert progress.bar.n == 120.0


def test_an_epoch_budget_has_no_total():
    assert Progress(TrainConfig(max_steps=0, max_epochs=3), step=0, elapsed=0.0, enabled=True).bar.total is None


def test_window_sums_and_metrics_log_drops_lines_past_a_resumed_step(tmp_path):
    window = Window()
    window.add(2.0, 1.0, 10)
    window.add(4.0, 3.0, 30)
    assert (window.loss, window.nll, window.tokens) == (6.0, 4.0, 40)
    log = MetricsLog(tmp_path / "metrics.jsonl", after_step=0)
    for step in (2, 4, 6):
        log.write(step=step, train_loss=1.0)
    MetricsLog(tmp_path / "metrics.jsonl", after_step=4)
    assert (tmp_path / "metrics.jsonl").read_text().count("\n") == 2


def test_resuming_drops_later_lines_and_a_line_torn_by_a_crash(tmp_path):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"step": 2, "train_loss": 3.1}\n{"step": 4, "val_loss": 2.9}\n{"step": 6, "train_loss": 2.')
    log = MetricsLog(path, after_step=2)
    log.write(step=4, train_loss=2.5)
    assert path.read_text() == '{"step": 2, "train_loss": 3.1}\n{"step": 4, "train_loss": 2.5}\n'


def test_a_bar_written_to_a_file_redraws_once_a_minute(monkeypatch):
    monkeypatch.setattr("sys.stderr.isatty", lambda: False)
    assert Progress(TrainConfig(max_steps=50), step=0, elapsed=0.0, enabled=True).bar.mininterval == 60.0
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    assert Progress(TrainConfig(max_steps=50), step=0, elapsed=0.0, enabled=True).bar.mininterval == 0.1
