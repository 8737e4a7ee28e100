"""Training into a place that fills up or turns read-only: one line naming the path, exit status 1, every
earlier checkpoint intact, and `--resume` ends exactly where an undisturbed run ends once space is back.

Two ways to get there. A real small file system where the machine allows it: a tmpfs mounted in a
private mount namespace (`unshare -m` as root, else `unshare -rm` with unprivileged user namespaces),
which runs out of space for the third checkpoint, then is remounted read-only mid-run; skipped
elsewhere. And everywhere: ENOSPC injected at the `os.fsync` of the files of one checkpoint (the call
through which a full disk reports a failed write on many file systems), in process.
"""

import errno
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

import tnmt.io
import tnmt.train.loop
from tnmt.checkpoint import load_checkpoint
from tnmt.cli import main
from tnmt.recipe import load_recipe
from tnmt.train.loop import train

SETTINGS = ["--train.eval_every=4", "--train.log_every=2", "--train.keep_checkpoints=10", "--no-progress"]


def same_weights(a: Path, b: Path) -> None:
    wa, wb = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def straight_run(tiny_training, out: Path, steps: int) -> Path:
    settings = [s for s in SETTINGS if s != "--no-progress"]
    recipe = load_recipe(None, [*tiny_training, *settings, f"--train.out_dir={out}", f"--train.max_steps={steps}"])
    return (train(recipe, progress=False) / "last").resolve()


def assert_intact(out: Path) -> int:
    """Every checkpoint on disk loads; returns the step `last` points at."""
    for path in (out / "checkpoints").glob("step_*"):
        load_checkpoint(path)
    return load_checkpoint(out / "last").trainer_state["step"]


def errors(stderr: str) -> list[str]:
    """The lines of `stderr` but the notes (`tnmt train: INFO: prepared ...`)."""
    return [line for line in stderr.strip().splitlines() if ": INFO: " not in line]


def test_enospc_while_saving_stops_with_one_line_and_resumes(tiny_training, tmp_path, monkeypatch, capsys):
    recipe = tmp_path / "empty.toml"
    recipe.write_text("")
    out = tmp_path / "run"
    argv = ["train", str(recipe), *tiny_training, *SETTINGS, f"--train.out_dir={out}", "--train.max_steps=12"]
    real_save, real_fsync = tnmt.train.loop.save_checkpoint, os.fsync

    def no_space(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def save(path, *args, **kwargs):
        monkeypatch.setattr(tnmt.io.os, "fsync", no_space if path.name == "step_0000008" else real_fsync)
        return real_save(path, *args, **kwargs)

    monkeypatch.setattr(tnmt.train.loop, "save_checkpoint", save)
    assert main(argv) == 1
    lines = errors(capsys.readouterr().err)
    assert len(lines) == 1 and lines[0].startswith(f"tnmt train: error: {out / 'checkpoints'}/.step_0000008.tmp-")
    assert lines[0].endswith(": No space left on device")
    assert assert_intact(out) == 4
    assert [p.name for p in (out / "checkpoints").iterdir()] == ["step_0000004"]  # the partial one is gone

    monkeypatch.setattr(tnmt.train.loop, "save_checkpoint", real_save)
    monkeypatch.setattr(tnmt.io.os, "fsync", real_fsync)
    assert main([*argv, "--resume"]) == 0
    same_weights(straight_run(tiny_training, tmp_path / "straight", 12), (out / "last").resolve())


def namespace_command(directory: Path) -> list[str] | None:
    """How to get a private mount namespace in which mounting a tmpfs on `directory` works, if at all."""
    if not shutil.which("unshare") or not shutil.which("mount"):
        return None
    for command in (["unshare", "-m"], ["unshare", "-rm"]):
        probe = subprocess.run(
            [*command, "mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(directory)],
            capture_output=True,
            timeout=30,
        )
        if probe.returncode == 0:
            return command
    return None


SCRIPT = """
set -u
tnmt() { "$PYTHON" -m tnmt train "$RECIPE" $OVERRIDES "$@"; }
mount -t tmpfs -o size=1000k tmpfs "$MNT"
tnmt --train.out_dir="$MNT/full" --train.max_steps=12 2> "$OUT/full.err"; echo $? > "$OUT/full.status"
cp -a "$MNT/full" "$OUT/full"
mount -o remount,size=64m "$MNT"
tnmt --train.out_dir="$MNT/full" --train.max_steps=12 --resume 2> "$OUT/full_resumed.err"
cp -a "$MNT/full" "$OUT/full_resumed"

tnmt --train.out_dir="$MNT/ro" --train.max_steps=100000 2> "$OUT/ro.err" & pid=$!
while [ ! -e "$MNT/ro/last" ]; do sleep 0.01; done
until mount -o remount,ro "$MNT" 2>/dev/null; do sleep 0.01; done
wait $pid; echo $? > "$OUT/ro.status"
cp -a "$MNT/ro" "$OUT/ro"
mount -o remount,rw "$MNT"
step=$("$PYTHON" -c "import json; print(json.load(open('$MNT/ro/last/trainer_state.json'))['step'] + 2)")
tnmt --train.out_dir="$MNT/ro" --train.max_steps=$step --resume 2> "$OUT/ro_resumed.err"
cp -a "$MNT/ro" "$OUT/ro_resumed"
"""


def test_a_real_full_then_read_only_filesystem(tiny_training, tmp_path):
    (tmp_path / "mnt").mkdir()
    command = namespace_command(tmp_path / "mnt")
    if command is None:
        pytest.skip("no private mount namespace here (unshare -m / -rm): see the ENOSPC injection test")
    (tmp_path / "empty.toml").write_text("")
    env = {
        **os.environ,
        "PYTHON": sys.executable,
        "RECIPE": str(tmp_path / "empty.toml"),
        "OVERRIDES": " ".join([*tiny_training, *SETTINGS]),
        "MNT": str(tmp_path / "mnt"),
        "OUT": str(tmp_path),
        "OMP_NUM_THREADS": "1",
    }
    subprocess.run([*command, "sh", "-c", SCRIPT], env=env, check=True, timeout=600)

    full = errors((tmp_path / "full.err").read_text())
    assert (tmp_path / "full.status").read_text().strip() == "1"
    assert len(full) == 1 and full[0].startswith(f"tnmt train: error: {tmp_path / 'mnt' / 'full'}"), full
    assert full[0].endswith("No space left on device")
    assert assert_intact(tmp_path / "full") == 8
    same_weights(straight_run(tiny_training, tmp_path / "straight", 12), (tmp_path / "full_resumed" / "last").resolve())

    read_only = errors((tmp_path / "ro.err").read_text())
    assert (tmp_path / "ro.status").read_text().strip() == "1"
    assert len(read_only) == 1 and read_only[0].startswith(f"tnmt train: error: {tmp_path / 'mnt' / 'ro'}")
    assert read_only[0].endswith("Read-only file system")
    step = assert_intact(tmp_path / "ro") + 2
    straight = straight_run(tiny_training, tmp_path / "straight_ro", step)
    same_weights(straight, (tmp_path / "ro_resumed" / "last").resolve())
