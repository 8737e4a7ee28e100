"""Crash campaign (issue 12, section 1): kill -9 `tnmt train` at many moments and prove nothing is lost.

What is checked, after every kill: every checkpoint directory on disk (`checkpoints/step_*`) loads and
translates two sentences, the `last` and `best` links (when present) point at existing checkpoints, and
every line of metrics.jsonl but a torn last one parses. Then training resumes (`--resume`, or from
scratch when no checkpoint was written yet), and is killed again: a chain of `--kills-per-chain` kills,
after which the run finishes undisturbed. Its final checkpoint must be bit-identical (torch.equal on
every tensor of model.safetensors and optimizer.safetensors) to an uninterrupted run's, with the same
`best` checkpoint and the same metrics.jsonl steps and training losses; no leftover of a killed writer
(hidden `.*.tmp*`/`.*.old-*`) may remain. A kill that changed the trajectory would show there: weights
that diverge once never become bit-identical again.

The victim: a tiny model (d_model 32, 1+1 layers) on a generated English -> Italian number-words corpus
(300 pairs), the recipe's dropout (0.1), seed 1, one thread, validation every 4 updates (greedy decode
of 30 sentences, at most 10 tokens longer than the source), `keep_checkpoints = 2` (so old checkpoints
get pruned), `--max-steps` updates.

How the kills are aimed (benchmark-only hooks, no test hook in tnmt itself): each `tnmt train` is a
fork of this script after it imported tnmt and torch (no interpreter start-up to wait through; the
parent never runs a torch op, so forking is safe), and the child wraps a few functions of `tnmt.train.loop`
and `tnmt.train.update` before calling `tnmt.cli.main`. The wrappers write the phase the run has entered into
a shared page (a small file): `train` (an update), `validate` (evaluation), `save` (building and renaming
the checkpoint directory), `link` (swapping the `last`/`best` links), `prune` (deleting an old
checkpoint). They also widen the narrow windows: 5 ms before and after each file write of a checkpoint
and 3 ms before a link swap or a deletion. For every kill the parent picks a phase at random, waits until
the child enters it, sleeps a random fraction of that phase's typical length and sends SIGKILL; the phase
reported is the one the child was in when it died (the last it entered). A child that finishes first
ends its chain early.

`--torchrun`: the same campaign, checks and comparison with every run (the uninterrupted reference too)
launched as `torchrun --standalone --nproc-per-node 2` (gloo on the loopback, a free port per launch).
torchrun spawns its workers, so they cannot inherit hooks by fork: it runs this script as
`crash_campaign.py --worker train ...`, which installs the same wrappers, writing to the slot of its rank
in the page file (named by $TNMT_CRASH_PAGE, with its pid), then calls `tnmt.cli.main`. The phases are
rank 0's (only rank 0 writes). Each kill also picks a target at random: `rank0`'s worker,
`rank1`'s worker (killed while rank 0 is in the chosen phase, e.g. mid-save), or the whole `launch`
("the machine died": SIGKILL to torchrun's process group and to both workers, which torchrun starts in
sessions of their own). After a worker's death the survivor fails at its next collective (PeerLost, exit
1) and torchrun sends it SIGTERM (while it trains, tnmt's handler only raises its stop flag, which the
failed collective makes moot; after training, the default action ends it); the parent waits for the whole
launch to end (a launch still running 120 s after a kill is reported as hung and killed)
before checking the directory. Undisturbed runs (the reference, each chain's last) are plain
`torchrun ... -m tnmt train`. This mode trains with `--model.dropout=0`: on resume, ranks other than 0
reseed their dropout masks from (seed, rank, step) (see `start_run` in tnmt/train/start.py), so with
dropout a multi-process resume is equivalent to the uninterrupted run but not bit-identical; without
it, it must be.

    python -m benchmarks.robustness.crash_campaign [--kills 50] [--kills-per-chain 5] [--max-steps 24] [--seed 0]
        [--torchrun]

Writes benchmarks/results/crash_campaign.json (`--torchrun`: crash_campaign_torchrun.json; or `--results`).
"""

import argparse
import json
import mmap
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from num2words import num2words

import tnmt
import tnmt.checkpoint
import tnmt.train.loop
import tnmt.train.update
from benchmarks.common.host import describe
from tnmt.cli import main as tnmt_main

PHASES = {"train": 0.03, "validate": 0.08, "save": 0.05, "link": 0.004, "prune": 0.004}  # phase: kill within (s)
WRITE_PAUSE, LINK_PAUSE = 0.005, 0.003
SLOT = 32  # bytes of the phase page per process: the phase (16 bytes), then its pid (8)
PAGE_ENV = "TNMT_CRASH_PAGE"  # the phase page's file, for torchrun's workers
TARGETS = ("rank0", "rank1", "launch")  # torchrun mode: what each kill hits
LAUNCH_TIMEOUT = 120  # s: a launch still running this long after a kill has hung


def make_corpus(directory: Path) -> None:
    rng = random.Random(0)
    numbers = [rng.randrange(1, 10_000) for _ in range(330)]
    for split, values in (("train", numbers[:300]), ("valid", numbers[300:])):
        (directory / f"{split}.en").write_text("".join(num2words(n) + "\n" for n in values))
        (directory / f"{split}.it").write_text("".join(num2words(n, lang="it") + "\n" for n in values))


def train_args(corpus: Path, out: Path, max_steps: int, *, resume: bool, dropout: bool = True) -> list[str]:
    recipe = out.parent / "empty.toml"
    recipe.write_text("")
    files = [
        f"--data.{name}_{side}={corpus / f'{name}.{lang}'}"
        for name in ("train", "valid")
        for side, lang in (("src", "en"), ("tgt", "it"))
    ]
    model = ["--model.d_model=32", "--model.d_ff=64", "--model.n_heads=2", "--model.max_len=64"]
    layers = ["--model.n_encoder_layers=1", "--model.n_decoder_layers=1"]
    train = ["--train.max_tokens=400", "--train.warmup_steps=10", "--train.threads=1", "--train.seed=1"]
    schedule = [f"--train.max_steps={max_steps}", "--train.eval_every=4", "--train.log_every=2"]
    extra = [
        "--train.keep_checkpoints=2",
        "--decode.beam_size=1",
        "--decode.max_len_b=10",
        f"--train.out_dir={out}",
        "--no-progress",
    ]
    data = ["--data.corpus=files", "--data.vocab_size=300", *files]
    extra += [] if dropout else ["--model.dropout=0"]
    return ["train", str(recipe), *data, *model, *layers, *train, *schedule, *extra, *(["--resume"] if resume else [])]


def map_page(path: Path, *, create: bool = False) -> mmap.mmap:
    """The phase page: a small shared file, so forked children and torchrun's workers alike write to it."""
    if create:
        path.write_bytes(bytes(mmap.PAGESIZE))
        os.environ[PAGE_ENV] = str(path)  # inherited by every launch
    with open(path, "r+b") as file:
        return mmap.mmap(file.fileno(), mmap.PAGESIZE)


def phase_of(page: mmap.mmap, slot: int = 0) -> str:
    """The phase the process of `slot` (one process: 0; torchrun: its rank) entered last."""
    return page[slot * SLOT : slot * SLOT + 16].rstrip(b" \0").decode()


def install_hooks(page: mmap.mmap, slot: int = 0) -> None:
    """In the victim: report phases through its slot of `page` and widen the narrow windows (see the docstring)."""
    page[slot * SLOT + 16 : (slot + 1) * SLOT] = os.getpid().to_bytes(SLOT - 16, "little")

    def mark(name: str) -> None:
        page[slot * SLOT : slot * SLOT + 16] = name.encode().ljust(16)

    def entering(name: str, fn, *, pause: float = 0.0, then: str | None = None):
        def wrapper(*args, **kwargs):
            mark(name)
            time.sleep(pause)
            try:
                return fn(*args, **kwargs)
            finally:
                if then:
                    mark(then)

        return wrapper

    def slow_write(fn):
        def wrapper(*args, **kwargs):
            time.sleep(WRITE_PAUSE)
            fn(*args, **kwargs)
            time.sleep(WRITE_PAUSE)

        return wrapper

    loop, update = tnmt.train.loop, tnmt.train.update
    update._update = entering("train", update._update)
    loop.validate = entering("validate", loop.validate, then="train")
    loop.save_checkpoint = entering("save", loop.save_checkpoint)
    loop.update_link = entering("link", loop.update_link, pause=LINK_PAUSE)
    loop.remove_checkpoint = entering("prune", loop.remove_checkpoint, pause=LINK_PAUSE)
    tnmt.checkpoint.atomic_write_bytes = slow_write(tnmt.checkpoint.atomic_write_bytes)


def fork(job, log: Path) -> int:
    """Run `job()` (returning an exit status) in a forked child with stdout/stderr to `log`; return its pid."""
    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        status = job()
    except BaseException as error:  # noqa: BLE001 - the child must never return into the parent's code
        print(f"child failed: {error!r}", file=sys.stderr)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def wait(pid: int) -> int:
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


class Forked:
    """One `tnmt train` forked from this process, its phase in slot 0 of the page."""

    def __init__(self, pid: int, page: mmap.mmap) -> None:
        self.pid, self.page, self.status, self.hung = pid, page, None, False

    def ended(self) -> bool:
        finished, status = os.waitpid(self.pid, os.WNOHANG)
        if finished:
            self.status = os.waitstatus_to_exitcode(status)
        return bool(finished)

    def wait(self) -> int:
        if self.status is None:
            self.status = wait(self.pid)
        return self.status

    def kill(self) -> str | None:
        """SIGKILL; the phase it died in, None if it had ended first."""
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            return None
        return phase_of(self.page) if self.wait() == -signal.SIGKILL else None


class Launch:
    """`torchrun` of two workers (slots 0 and 1 of the page), in a session of its own; `target` is what a
    kill hits: one rank's worker, or the whole launch ("the machine died": torchrun and both workers, which
    torchrun starts in sessions of their own)."""

    def __init__(self, popen: subprocess.Popen, page: mmap.mmap, target: str) -> None:
        self.popen, self.page, self.target, self.hung = popen, page, target, False

    def ended(self) -> bool:
        return self.popen.poll() is not None

    def wait(self) -> int:
        """The launch's exit status, once it and its workers are gone (SIGKILLed if it hangs: `hung`)."""
        try:
            self.popen.wait(timeout=LAUNCH_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.hung = True
            self._kill_all()
            self.popen.wait()
        deadline = time.monotonic() + LAUNCH_TIMEOUT
        while not all(map(_gone, self._workers())) and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.popen.returncode

    def kill(self) -> str | None:
        """SIGKILL the target; the phase rank 0 was in, None if the launch had completed first."""
        phase = phase_of(self.page, 0)
        if self.ended():
            return None
        if self.target == "launch":
            self._kill_all()
        else:
            _sigkill(self._workers()[TARGETS.index(self.target)])
        return phase if self.wait() != 0 else None

    def _workers(self) -> list[int]:
        return [int.from_bytes(self.page[r * SLOT + 16 : (r + 1) * SLOT], "little") for r in range(2)]

    def _kill_all(self) -> None:
        _sigkill(-self.popen.pid)  # torchrun's process group
        for pid in self._workers():
            _sigkill(pid)


def _sigkill(pid: int) -> None:
    """SIGKILL `pid` (a process group when negative); nothing when there is none."""
    try:
        if pid:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _gone(pid: int) -> bool:
    """Whether a process that is not our child has ended (a zombie waiting for its new parent has)."""
    try:
        return not pid or Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def run_training(
    page: mmap.mmap, argv: list[str], log: Path, *, hooks: bool, target: str | None = None
) -> Forked | Launch:
    """Start `tnmt train argv`: forked from here (`target` None), or under torchrun with two workers."""
    page[:] = bytes(len(page))
    page[:16] = b"startup".ljust(16)
    if target is None:

        def job() -> int:
            if hooks:
                install_hooks(page)
            return tnmt_main(argv)

        return Forked(fork(job, log), page)
    # --standalone: a rendezvous on a free port of localhost, so parallel launches never race for a port
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    command += ["-m", __spec__.name, "--worker", *argv] if hooks else ["-m", "tnmt", *argv]
    source = str(Path(tnmt.__file__).resolve().parents[1])  # the workers import the tnmt we imported
    repo = str(Path(__file__).resolve().parents[2])  # and find this module (`-m benchmarks.robustness...`)
    paths = [source, repo, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}
    with open(log, "a") as output:
        popen = subprocess.Popen(command, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    return Launch(popen, page, target)


def worker(argv: list[str]) -> int:
    """A torchrun worker: the hooks in this rank's slot of the page file, then `tnmt argv`."""
    install_hooks(map_page(Path(os.environ[PAGE_ENV])), int(os.environ["RANK"]))
    return tnmt_main(argv)


def check_outputs(out: Path, report: Path, log: Path) -> dict:
    """In a child: load and translate every checkpoint on disk, check the links and metrics.jsonl."""

    def job() -> int:
        from tnmt.checkpoint import load_checkpoint
        from tnmt.config import DecodeConfig
        from tnmt.translate.translator import Translator

        problems, loaded = [], 0
        for path in sorted((out / "checkpoints").glob("step_*")) if (out / "checkpoints").exists() else []:
            try:
                checkpoint = load_checkpoint(path)
                greedy = DecodeConfig(beam_size=1, max_len=8)
                translations = Translator(checkpoint.model, checkpoint.tokenizer, greedy).translate(
                    ["one", "ninety two"]
                )
                assert len(translations) == 2 and "step" in checkpoint.trainer_state
                loaded += 1
            except Exception as error:  # noqa: BLE001 - every failure is a finding to report
                problems.append(f"{path.name}: {error!r}")
        for name in ("last", "best"):
            link = out / name
            if link.is_symlink() and not link.resolve().is_dir():
                problems.append(f"{name} -> {os.readlink(link)}: dangling")
        torn = 0
        metrics = out / "metrics.jsonl"
        lines = metrics.read_text().splitlines() if metrics.exists() else []
        for i, line in enumerate(lines):
            try:
                json.loads(line)
            except json.JSONDecodeError:
                if i == len(lines) - 1:
                    torn += 1
                else:
                    problems.append(f"metrics.jsonl line {i + 1} is not JSON")
        report.write_text(json.dumps({"loaded": loaded, "problems": problems, "torn_metrics": torn}))
        return 0

    wait(fork(job, log))
    return json.loads(report.read_text()) if report.exists() else {"loaded": 0, "problems": ["checker died"]}


def compare(reference: Path, out: Path, report: Path, log: Path) -> list[str]:
    """In a child: the differences between two finished runs (none = bit-identical)."""

    def job() -> int:
        import torch
        from safetensors.torch import load_file

        differences = []
        a, b = (reference / "last").resolve(), (out / "last").resolve()
        if a.name != b.name:
            differences.append(f"last: {a.name} != {b.name}")
        for file in ("model.safetensors", "optimizer.safetensors"):
            ta, tb = load_file(a / file), load_file(b / file)
            if ta.keys() != tb.keys():
                differences.append(f"{file}: different tensors")
            differences += [f"{file}: {k} differs" for k in ta if k in tb and not torch.equal(ta[k], tb[k])]
        if (reference / "best").resolve().name != (out / "best").resolve().name:
            differences.append(f"best: {(reference / 'best').resolve().name} != {(out / 'best').resolve().name}")
        logs = [
            [
                (r["step"], r.get("train_loss"))
                for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())
            ]
            for run in (reference, out)
        ]
        if logs[0] != logs[1]:
            differences.append("metrics.jsonl: different steps or training losses")
        hidden = [p.name for d in (out, out / "checkpoints") for p in d.iterdir() if p.name.startswith(".")]
        differences += [f"leftover {name}" for name in hidden]
        report.write_text(json.dumps(differences))
        return 0

    wait(fork(job, log))
    return json.loads(report.read_text()) if report.exists() else ["comparer died"]


def kill_in_phase(victim: Forked | Launch, phase: str, rng: random.Random, *, timeout: float = 60) -> str | None:
    """SIGKILL the victim once (its rank 0) is in `phase` (plus a random part of the phase); None if it ended
    first."""
    deadline = time.monotonic() + timeout
    while phase_of(victim.page) != phase:
        if victim.ended():
            return None
        if time.monotonic() > deadline:
            return victim.kill()
        time.sleep(0.0005)
    time.sleep(rng.uniform(0, PHASES[phase]))
    return victim.kill()


def campaign(kills: int, per_chain: int, max_steps: int, seed: int, work: Path, *, torchrun: bool = False) -> dict:
    rng = random.Random(seed)
    corpus = work / "corpus"
    corpus.mkdir(parents=True)
    make_corpus(corpus)
    page = map_page(work / "phases", create=True)  # shared with the victims: the phase each process is in
    log = work / "children.log"
    started = time.monotonic()

    def start(out: Path, *, hooks: bool = True, target: str | None = None) -> Forked | Launch:
        resume = (out / "last").exists()
        argv = train_args(corpus, out, max_steps, resume=resume, dropout=not torchrun)
        return run_training(page, argv, log, hooks=hooks, target=target or ("launch" if torchrun else None))

    reference = work / "reference"
    status = start(reference).wait()
    assert status == 0, f"the uninterrupted run failed ({status}); see {log}"

    phases, targets, chains, failures = Counter(), Counter(), [], []
    checked = torn = restarts = 0
    while sum(phases.values()) < kills:
        out = work / f"chain_{len(chains):03d}"
        chain_kills = 0
        while chain_kills < per_chain and sum(phases.values()) < kills:
            restarts += out.exists() and not (out / "last").exists()
            target = rng.choice(TARGETS) if torchrun else None
            victim = start(out, target=target)
            died_in = kill_in_phase(victim, rng.choice(list(PHASES)), rng)
            if victim.hung:
                failures.append(f"{out.name} kill {chain_kills + 1} ({target}): the launch hung")
            if died_in is None:  # it finished first: this chain is complete
                break
            phases[died_in] += 1
            targets[target] += 1
            chain_kills += 1
            result = check_outputs(out, work / "check.json", log)
            checked, torn = checked + result["loaded"], torn + result.get("torn_metrics", 0)
            failures += [f"{out.name} after kill {chain_kills} ({died_in}): {p}" for p in result["problems"]]
        status = start(out, hooks=False).wait()
        differences = compare(reference, out, work / "compare.json", log) if status == 0 else [f"exit {status}"]
        failures += [f"{out.name} final: {d}" for d in differences]
        chains.append({"chain": out.name, "kills": chain_kills, "bit_identical": not differences})
    return {
        "kills": sum(phases.values()),
        "kills_by_phase": dict(sorted(phases.items())),
        **({"kills_by_target": dict(sorted(targets.items()))} if torchrun else {}),
        "checkpoints_checked": checked,
        "torn_metrics_lines_seen": torn,
        "fresh_restarts": restarts,
        "chains": len(chains),
        "chains_bit_identical": sum(chain["bit_identical"] for chain in chains),
        "failures": failures,
        "seconds": round(time.monotonic() - started, 1),
        "settings": {
            "launcher": "torchrun, 2 processes (gloo, 127.0.0.1)" if torchrun else "one process (fork)",
            "max_steps": max_steps,
            "kills_per_chain": per_chain,
            "seed": seed,
            "recipe": f"d_model 32, 1+1 layers, dropout {0 if torchrun else 0.1}, train.seed 1, threads 1,"
            " eval_every 4, keep 2",
            "kill_within_s": PHASES,
        },
    }


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:  # under torchrun, one of the launch's processes
        sys.exit(worker(sys.argv[2:]))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=50)
    parser.add_argument("--kills-per-chain", type=int, default=5)
    parser.add_argument("--max-steps", type=int, default=24)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--torchrun", action="store_true", help="train under torchrun with 2 processes")
    parser.add_argument("--results", type=Path, help="default: results/crash_campaign[_torchrun].json")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it (default: a temporary one)")
    args = parser.parse_args()
    name = "crash_campaign_torchrun.json" if args.torchrun else "crash_campaign.json"
    results = args.results or Path(__file__).resolve().parents[1] / "results" / name
    work = args.keep or Path(tempfile.mkdtemp(prefix="tnmt-crash-"))
    try:
        result = campaign(args.kills, args.kills_per_chain, args.max_steps, args.seed, work, torchrun=args.torchrun)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    results.parent.mkdir(parents=True, exist_ok=True)
    result = {"machine": describe(), **result}
    results.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "settings"}, indent=2))
    sys.exit(1 if result["failures"] else 0)


if __name__ == "__main__":
    main()
