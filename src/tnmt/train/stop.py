"""Stopping a training run on request: SIGTERM (a scheduler, `kill`, a container stop) or SIGINT (Ctrl-C).

Killing a run between checkpoints loses every update since the last one; interrupting it inside a
checkpoint write is safe (checkpoints are atomic) but wastes the same. So while training, the first
SIGTERM or SIGINT only raises a flag: the loop finishes the update it is in, saves a checkpoint through
its normal path (so `last` points at it and `--resume` continues exactly) and returns. A second signal
is the way out of a stop that takes too long: the handlers of before are back in place and the signal
is delivered again at once (SIGINT raises KeyboardInterrupt, SIGTERM ends the process).
"""

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequest:
    """Set by the first SIGTERM/SIGINT while `stop_on_signals` is active; read at update boundaries."""

    def __init__(self) -> None:
        self.signum: int | None = None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""

    def __bool__(self) -> bool:
        return self.signum is not None


class Stopped(Exception):
    """Training stopped on signal `signal_name` after update `step`, whose checkpoint is `checkpoint`."""

    def __init__(self, signal_name: str, step: int, checkpoint: Path) -> None:
        super().__init__(
            f"stopped on {signal_name} after update {step}: checkpoint {checkpoint} (continue with --resume)"
        )
        self.signal_name, self.step, self.checkpoint = signal_name, step, checkpoint

    @property
    def exit_status(self) -> int:
        """0: stopped as asked (SIGTERM, like `tnmt serve`); 130 after Ctrl-C, the shell's 128 + SIGINT."""
        return 130 if self.signal_name == "SIGINT" else 0


@contextmanager
def stop_on_signals() -> Iterator[StopRequest]:
    """Within the block, the first SIGTERM/SIGINT sets the yielded request; the old handlers return on exit.

    Signal handlers can only be installed from the main thread: elsewhere the request never fires.
    """
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    previous = {signum: signal.getsignal(signum) for signum in SIGNALS}

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    def handler(signum: int, frame: FrameType | None) -> None:
        if request:  # the second signal: as if we had never caught the first
            restore()
            signal.raise_signal(signum)
        request.signum = signum

    for signum in SIGNALS:
        signal.signal(signum, handler)
    try:
        yield request
    finally:
        restore()
