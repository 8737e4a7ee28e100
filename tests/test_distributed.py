"""Data-parallel training under torchrun (gloo, loopback): N ranks equal one process with accumulation N.

One module-scoped set of runs on the tiny number-words task, dropout 0, 6 updates, checkpoints at 3 and 6:
  single  in this process, accumulation 2 (the reference)
  ddp     `torchrun --nproc_per_node 2`, accumulation 1, with a file-write audit on every rank
  to_one  rank-2 checkpoint at step 3 resumed here by one process with accumulation 2
  to_two  single's checkpoint at step 3 resumed by two `torchrun --nnodes 2` launches (the multi-machine path)
Each must end within atol 1e-5 of `single`. A last test kills one node's rank mid-run.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tnmt.checkpoint import load_checkpoint, update_link
from tnmt.config import DecodeConfig, TrainConfig
from tnmt.data.batching import TokenBatchSampler
from tnmt.data.prepared import PreparedPairs
from tnmt.recipe import load_recipe
from tnmt.train.distributed import PeerLost, World, backend_for, collective, env_world, translate_across
from tnmt.train.loop import train
from tnmt.translate.door import ModelDoor
from tnmt.translate.translator import Translator

REPO = Path(__file__).resolve().parent.parent
TORCHRUN = Path(sys.executable).parent / "torchrun"
LAUNCH_TIMEOUT = 120  # seconds; a healthy launch takes a few

# Installed as sitecustomize in every torchrun worker: records each file the process creates or changes
# under $TNMT_AUDIT_DIR, in $TNMT_AUDIT_DIR.../writes-rank{RANK}.json at exit.
AUDIT = """
import atexit, json, os, sys
watched, seen = os.environ["TNMT_AUDIT_DIR"], []
WRITES = ("os.mkdir", "os.rename", "os.symlink", "os.remove", "os.rmdir", "shutil.rmtree")
def hook(event, args):
    writes = event in WRITES or (
        event == "open"
        and ((isinstance(args[1], str) and any(c in args[1] for c in "wax+")) or (args[1] is None and args[2] & 0o3))
    )
    if event == "os.mkdir" and os.path.isdir(args[0]):  # mkdir(exist_ok=True) of a directory that is there
        writes = False
    if writes and (str(args[0]) == watched or str(args[0]).startswith(watched + os.sep)):
        seen.append(f"{event} {args[0]}")
sys.addaudithook(hook)
if "RANK" in os.environ:  # a worker, not torchrun itself
    atexit.register(lambda: open(f"{watched}.writes-rank{os.environ['RANK']}.json", "x").write(json.dumps(seen)))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def overrides(tiny_training, out: Path, *extra: str) -> list[str]:
    settings = ["--model.dropout=0", "--train.eval_every=3", "--train.eval_beam_size=1", "--train.log_every=1"]
    return [*tiny_training, *settings, "--train.max_steps=6", f"--train.out_dir={out}", *extra]


def env(*paths: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (*paths, REPO / "src"))}


def torchrun(launch: list[str], arguments: list[str], *, environment: dict[str, str], **popen) -> subprocess.Popen:
    """`tnmt train` with no recipe file (every key from `arguments`) under torchrun with `launch` options."""
    command = [str(TORCHRUN), *launch, "-m", "tnmt", "train", os.devnull, "--no-progress"]
    command = ["timeout", str(LAUNCH_TIMEOUT), *command]
    return subprocess.Popen([*command, *arguments], env=environment, text=True, **popen)


def on_two_nodes(arguments: list[str], *, environment: dict[str, str], **popen) -> list[subprocess.Popen]:
    """Two torchrun launches of one process each, meeting at a c10d rendezvous on 127.0.0.1 (two "machines").

    Node 1 starts once node 0 listens, so node 0 hosts the rendezvous store, as the first machine would.
    """
    port = free_port()
    launch = ["--nnodes", "2", "--nproc_per_node", "1", "--rdzv-backend", "c10d"]
    launch += ["--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"test{port}"]
    first = torchrun([*launch, "--node-rank", "0"], arguments, environment=environment, **popen)
    deadline = time.monotonic() + LAUNCH_TIMEOUT
    while first.poll() is None and time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    return [first, torchrun([*launch, "--node-rank", "1"], arguments, environment=environment, **popen)]


def finish(*processes: subprocess.Popen) -> None:
    for p in processes:
        p.wait(timeout=LAUNCH_TIMEOUT + 10)
    assert [p.returncode for p in processes] == [0] * len(processes)


def resume_from(checkpoint: Path, out: Path) -> None:
    """A run directory whose `last` is a copy of `checkpoint`, as if that run had stopped there."""
    shutil.copytree(checkpoint, out / "checkpoints" / checkpoint.name)
    update_link(out / "last", out / "checkpoints" / checkpoint.name)


def weights(out: Path, step: int) -> dict[str, torch.Tensor]:
    return load_file(out / "checkpoints" / f"step_{step:07d}" / "model.safetensors")


@pytest.fixture(scope="module")
def runs(tiny_training, tmp_path_factory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("ddp")
    single = train(load_recipe(None, overrides(tiny_training, tmp / "single", "--train.accum_steps=2")), progress=False)
    (tmp / "site").mkdir()
    (tmp / "site" / "sitecustomize.py").write_text(AUDIT)
    audited = {**env(tmp / "site"), "TNMT_AUDIT_DIR": str(tmp / "ddp")}
    ddp = torchrun(
        ["--nproc_per_node", "2", "--master-port", str(free_port())],
        overrides(tiny_training, tmp / "ddp"),
        environment=audited,
    )
    resume_from(single / "checkpoints" / "step_0000003", tmp / "to_two")
    to_two = on_two_nodes([*overrides(tiny_training, tmp / "to_two"), "--resume"], environment=env())
    finish(ddp, *to_two)
    resume_from(tmp / "ddp" / "checkpoints" / "step_0000003", tmp / "to_one")
    train(
        load_recipe(None, overrides(tiny_training, tmp / "to_one", "--train.accum_steps=2")),
        resume=True,
        progress=False,
    )
    return {"tmp": tmp, "single": single, "ddp": tmp / "ddp", "to_one": tmp / "to_one", "to_two": tmp / "to_two"}


def assert_same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-5, rtol=0, msg=name)


def test_two_ranks_equal_one_process_accumulating_two(runs):
    assert_same_weights(weights(runs["ddp"], 6), weights(runs["single"], 6))
    logged = [json.loads(line) for line in (runs["ddp"] / "metrics.jsonl").read_text().splitlines()]
    reference = [json.loads(line) for line in (runs["single"] / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in logged] == [r["step"] for r in reference]  # rank 0 alone logs: no line twice
    for ours, theirs in zip(logged, reference, strict=True):  # global (all-reduced) losses
        if "train_loss" in ours:
            assert ours["train_loss"] == pytest.approx(theirs["train_loss"], rel=1e-5)
        if "val_loss" in ours:  # validated by both ranks together: each decodes and scores half of the set
            assert ours["val_loss"] == pytest.approx(theirs["val_loss"], rel=1e-5)
            assert (ours["val_bleu"], ours["val_chrf"]) == (theirs["val_bleu"], theirs["val_chrf"])


def test_resume_with_a_different_world_size_matches_the_uninterrupted_run(runs):
    assert_same_weights(weights(runs["to_one"], 6), weights(runs["single"], 6))
    assert_same_weights(weights(runs["to_two"], 6), weights(runs["single"], 6))
    state = json.loads((runs["to_two"] / "last" / "trainer_state.json").read_text())
    assert (state["step"], state["epoch"], state["batch_index"]) == (6, 0, 12)  # a global batch index


def test_two_ranks_distil_as_one_process_accumulating_two(tiny_training, tmp_path):
    distil = ["--data.max_train_pairs=60", "--train.distill_at_step=2"]  # short epochs: distils at update 2 or 3
    single = load_recipe(None, overrides(tiny_training, tmp_path / "single", "--train.accum_steps=2", *distil))
    train(single, progress=False)
    port = ["--nproc_per_node", "2", "--master-port", str(free_port())]
    finish(torchrun(port, overrides(tiny_training, tmp_path / "ddp", *distil), environment=env()))
    assert_same_weights(weights(tmp_path / "ddp", 6), weights(tmp_path / "single", 6))
    # An odd number of batches per epoch: the last update of each has one batch, so rank 1 takes the dummy
    # batch of weight 0, and the weights above show it adds nothing.
    lengths = PreparedPairs(tmp_path / "single" / "prepared").lengths()
    assert len(TokenBatchSampler(lengths, max_tokens=single.train.max_tokens, seed=single.train.seed)) % 2 == 1
    assert json.loads((tmp_path / "ddp" / "last" / "trainer_state.json").read_text())["epoch"] >= 1
    for run in ("single", "ddp"):
        assert json.loads((tmp_path / run / "last" / "trainer_state.json").read_text())["distilled_pairs"] > 0
    translations = [(tmp_path / run / "distilled" / "train.de").read_bytes() for run in ("single", "ddp")]
    assert translations[0] == translations[1]


def test_two_ranks_with_guided_alignment_equal_one_process_accumulating_two(tiny_training, tmp_path):
    # one prepared corpus for both: eflomal draws its own seed, so another prepare could align differently
    guided = ["--train.guided_alignment=0.5", f"--data.prepared_dir={tmp_path / 'prepared'}"]
    single = load_recipe(None, overrides(tiny_training, tmp_path / "single", "--train.accum_steps=2", *guided))
    train(single, progress=False)
    port = ["--nproc_per_node", "2", "--master-port", str(free_port())]
    finish(torchrun(port, overrides(tiny_training, tmp_path / "ddp", *guided), environment=env()))
    assert_same_weights(weights(tmp_path / "ddp", 6), weights(tmp_path / "single", 6))
    logs = [
        [json.loads(line) for line in (tmp_path / run / "metrics.jsonl").read_text().splitlines()]
        for run in ("single", "ddp")
    ]
    aligned = [[r["train_align_loss"] for r in log if "train_loss" in r] for log in logs]  # all-reduced over the ranks
    assert len(aligned[0]) == 6 and aligned[1] == pytest.approx(aligned[0], rel=1e-5)


def test_only_rank_zero_writes(runs):
    tmp = runs["tmp"]
    rank0 = json.loads((tmp / "ddp.writes-rank0.json").read_text())
    rank1 = json.loads((tmp / "ddp.writes-rank1.json").read_text())
    assert rank1 == []
    assert any("recipe.json" in w for w in rank0) and any("step_0000006" in w for w in rank0)
    assert any("metrics.jsonl" in w for w in rank0) and any("curves.png" in w for w in rank0)


def test_a_time_budget_stops_every_rank_at_the_same_update(tiny_training, tmp_path):
    """max_minutes is judged on rank 0's clock, shared each update: no rank trains on while another stopped."""
    out = tmp_path / "budget"
    arguments = overrides(tiny_training, out, "--train.max_steps=0", "--train.max_minutes=0.003")
    launch = torchrun(
        ["--nproc_per_node", "2", "--master-port", str(free_port())],
        [*arguments, "--train.collective_timeout_s=30"],
        environment=env(),
    )
    finish(launch)
    state = json.loads((out / "last" / "trainer_state.json").read_text())
    assert state["step"] >= 1 and state["elapsed"] >= 0.18


def test_a_killed_rank_ends_the_job_with_a_one_line_error(tiny_training, tmp_path):
    out = tmp_path / "killed"
    arguments = overrides(tiny_training, out, "--train.max_steps=100000", "--train.eval_every=100000")
    arguments += ["--train.collective_timeout_s=10"]  # if the dead peer's sockets are not seen closed at once
    node0, node1 = on_two_nodes(arguments, environment=env(), stderr=subprocess.PIPE)
    deadline = time.monotonic() + LAUNCH_TIMEOUT
    while not ((out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text()):
        assert time.monotonic() < deadline and node0.poll() is None, "training never started"
        time.sleep(0.2)
    os.kill(workers_of(node1.pid)[0], signal.SIGKILL)
    killed = time.monotonic()
    _, errors = node0.communicate(timeout=60)  # both within 60 s of the kill, or TimeoutExpired fails the test
    node1.communicate(timeout=max(0.1, killed + 60 - time.monotonic()))
    assert node0.returncode != 0 and node1.returncode != 0
    ours = [line for line in errors.splitlines() if line.startswith("tnmt train: error:")]
    assert len(ours) == 1 and ours[0].startswith("tnmt train: error: rank 0 of 2: lost the other ranks ("), errors
    assert "tnmt/train/" not in errors, errors  # no backtrace through our code (torchrun still prints its own summary)


def workers_of(pid: int) -> list[int]:
    """The python processes started by `timeout` -> torchrun (pid is timeout's), found through /proc."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    level = [pid]
    for _ in range(2):  # timeout -> torchrun -> worker
        level = [child for parent in level for child in children.get(parent, [])]
    return level


def test_world_of_one_needs_no_process_group(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    world = env_world()
    assert world == World(rank=0, size=1, local_rank=0) and world.is_main
    assert world.sum(3, 4.5) == [3, 4.5] and world.from_main({"a": 1}) == {"a": 1} and world.gather(7) == [7]
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("WORLD_SIZE", "8")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert env_world() == World(rank=3, size=8, local_rank=1) and not env_world().is_main


class ThreadRank(World):
    """A rank of a world simulated by threads in this process: `gather` meets the other ranks at a barrier."""

    def __init__(self, rank: int, size: int, board: list, barrier: threading.Barrier) -> None:
        super().__init__(rank=rank, size=size)
        object.__setattr__(self, "board", board)
        object.__setattr__(self, "meeting", barrier)

    def gather(self, value):
        self.board[self.rank] = value
        self.meeting.wait()
        values = list(self.board)
        self.meeting.wait()  # nobody writes the board again before every rank has read it
        return values


@pytest.mark.parametrize("size", [2, 3])
def test_ranks_translating_together_decode_the_batches_of_one_process(tiny_checkpoint, monkeypatch, size):
    checkpoint = load_checkpoint(tiny_checkpoint)
    translator = Translator(checkpoint.model, checkpoint.tokenizer, DecodeConfig(beam_size=1, batch_size=2))
    texts = ["one", "", "twenty two", "three hundred", "four", "  ", "five thousand and six", "seven", "eight"] * 2
    decoded, real_batch = [], ModelDoor.source_batch

    def recording(self, sources):
        src = real_batch(self, sources)
        decoded.append(src.tolist())
        return src

    monkeypatch.setattr(ModelDoor, "source_batch", recording)
    alone = translator.translate(texts)
    batches_alone, decoded[:] = sorted(decoded), []
    board, barrier, results = [None] * size, threading.Barrier(size, timeout=60), [None] * size  # no hang if one fails

    def rank(r: int) -> None:
        results[r] = translate_across(ThreadRank(r, size, board, barrier), translator, texts)

    threads = [threading.Thread(target=rank, args=(r,), daemon=True) for r in range(size)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(decoded) == batches_alone  # each batch decoded once, by one rank, as one process decodes it
    assert results == [alone] * size and alone[1] == ""


def test_backend_follows_the_device():
    assert backend_for(torch.device("cpu")) == "gloo"
    assert backend_for(torch.device("cuda", 1)) == "nccl"


def test_a_failed_collective_becomes_one_line():
    lost = r"^rank 1 of 2: lost the other ranks \(Connection closed by peer \[x\]\)$"  # first sentence, first line
    with pytest.raises(PeerLost, match=lost), collective(World(rank=1, size=2)):
        raise RuntimeError("[/src/gloo/pair.cc:553] Connection closed by peer [x]. This is typically\nmore")
    with pytest.raises(RuntimeError, match="shape mismatch"), collective(World(rank=1, size=2)):  # not a lost rank
        raise RuntimeError("shape mismatch")


def test_collective_timeout_must_be_positive():
    with pytest.raises(ValueError, match=r"TrainConfig.collective_timeout_s = 0: must be positive"):
        TrainConfig(collective_timeout_s=0)


def test_the_documented_torchrun_commands_use_the_launch_options_tested_here():
    lines = [line.split("#")[0].split() for line in (REPO / "docs" / "scaling.md").read_text().splitlines()]
    commands = [words for words in lines if words[:1] == ["torchrun"]]
    assert len(commands) == 2
    tested = {"--nproc_per_node", "--nnodes", "--rdzv-backend", "--rdzv-endpoint", "-m"}
    for words in commands:
        assert words[words.index("-m") : words.index("-m") + 3] == ["-m", "tnmt", "train"]
        assert {w for w in words if w.startswith("-") and not w.startswith("--train.")} <= tested


def test_a_signal_to_one_rank_stops_every_rank_with_a_checkpoint(tiny_training, tmp_path):
    """SIGTERM to rank 1 alone: the stop request is shared at the next update, rank 0 saves and says where in
    one line, both exit 0."""
    out = tmp_path / "stopped"
    arguments = overrides(tiny_training, out, "--train.max_steps=100000", "--train.eval_every=100000")
    launch_options = ["--nproc_per_node", "2", "--master-port", str(free_port())]
    with open(tmp_path / "stderr", "w") as stderr:  # a file, not a pipe that nobody reads while training runs
        launch = torchrun(launch_options, arguments, environment=env(), stderr=stderr)
    deadline = time.monotonic() + LAUNCH_TIMEOUT
    while not ((out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text()):
        assert time.monotonic() < deadline and launch.poll() is None, "training never started"
        time.sleep(0.2)
    (rank1,) = [pid for pid in workers_of(launch.pid) if b"\0RANK=1\0" in Path(f"/proc/{pid}/environ").read_bytes()]
    os.kill(rank1, signal.SIGTERM)
    launch.wait(timeout=LAUNCH_TIMEOUT + 10)
    errors = (tmp_path / "stderr").read_text()
    assert launch.returncode == 0, errors[-3000:]
    step = json.loads((out / "last" / "trainer_state.json").read_text())["step"]
    assert step >= 1 and (out / "last").resolve().name == f"step_{step:07d}"
    checkpoint = out / "checkpoints" / f"step_{step:07d}"
    said = [line for line in errors.splitlines() if line.startswith("tnmt train: stopped")]  # rank 0's alone
    assert said == [
        f"tnmt train: stopped on another rank's signal after update {step}: checkpoint {checkpoint} "
        "(continue with --resume)"
    ]
