"""One command on a GPU machine (issue 43): tnmt's CUDA paths run and measured, into one JSON.

    bash benchmarks/gpu/gpu_check.sh --out $OUT/gpu_check.json          # on the GPU machine: carried wheels first
    python -m benchmarks.gpu.gpu_check --out check.json [--data DIR]     # where tnmt's dependencies are installed
    python -m benchmarks.gpu.gpu_check --dry-run --out check.json        # every section on the CPU, tiny: seconds

Without a CUDA GPU (and without --dry-run) it stops at once with one line and exit status 2. The sections run
in this order; each records its status, seconds and figures, or the last line of its error, and the check
goes on, so one failure loses nothing else. The JSON is rewritten after every section: a run stopped at the
machine's time limit keeps what it measured.

  tests       pytest on the test files that hold CUDA-only tests (`skipif(not torch.cuda.is_available())`):
              counts and the failures' names. No test file takes a device option, so these are the CUDA part.
  base_shape  the paper's base model (d 512, 6+6 layers, 37k shared vocabulary) training on a synthetic
              batch of ~25k target tokens with the project's model, fused loss, Adam and autocast
              (precision "auto": bf16): target tokens/s, MFU against the bf16 matmul peak measured here
              (CUDA events), peak GPU memory, with and without activation checkpointing.
  multi30k    configs/multi30k_en_de.toml trained --train-minutes on the GPU (`tnmt train`, precision
              "auto"), then test_2016_flickr BLEU of the final checkpoint with beam 4 (`tnmt evaluate`),
              beside the CPU runs of the same recipe in benchmarks/results (per minute and per update).
  decode      `tnmt translate` of test_2016_flickr with that checkpoint, greedy and beam 4, batch 64, on
              the GPU and on the CPU (both fp32): sentences/s, and the lines where the two differ; and
              `tnmt attention` on the GPU (its pictures).
  serve       `tnmt serve --device cuda` under benchmarks/speed/serve.py's load at concurrency 64, batching on
              and off, beside the CPU figures of benchmarks/results/serve.json.

What trains, translates or serves runs as a child process through the `tnmt` command, as a user runs it
(and a crash there cannot take this process down); only base_shape needs the model's objects in this
process. Sentences/s of `tnmt translate` leave out its start-up, measured on a one-line input, as
benchmarks/speed/translate_wall.py does. Children find Multi30k through TNMT_DATA_DIR (set here from --data).
"""

import argparse
import gzip
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from tnmt.config import ModelConfig
    from tnmt.data.batching import Batch
    from tnmt.model import Transformer

REPO = Path(__file__).resolve().parents[2]
TNMT = [sys.executable, "-m", "tnmt"]
RECIPE = REPO / "configs" / "multi30k_en_de.toml"
# CPU runs of the recipe (benchmarks/quality/multi30k.py): the shipped recipe on a host without AMX (fp32), and the
# recipe before weight decay on the host with AMX (bf16); NOTEBOOK.md, "Multi30k, trained from scratch".
CPU_TRAINING = ("benchmarks/results/multi30k_en_de_wd_noamx.json", "benchmarks/results/multi30k_en_de.json")
CPU_SERVING = "benchmarks/results/serve.json"
CONCURRENCY = 64
NO_GPU = (
    "gpu_check: error: PyTorch sees no CUDA GPU (torch.cuda.is_available() is False); "
    "--dry-run checks the script on the CPU"
)
DETAIL_CHARS = 2000  # of a failure's stderr or multi-line message, kept in the JSON
# The dry run's Multi30k run: the first 400 pairs, a 1+1-layer d 32 model, 4 updates, validated every 2, and
# translations cut at 8 tokens (the checkpoint's [decode] table: evaluate, translate and serve keep it).
DRY_TRAINING = (
    "--data.max_train_pairs=400",
    "--data.max_valid_pairs=20",
    "--data.vocab_size=500",
    "--data.prepare_workers=1",
    "--model.d_model=32",
    "--model.d_ff=64",
    "--model.n_heads=2",
    "--model.n_encoder_layers=1",
    "--model.n_decoder_layers=1",
    "--train.max_tokens=500",
    "--train.warmup_steps=20",
    "--train.max_steps=4",
    "--train.eval_every=2",
    "--train.log_every=2",
    "--train.threads=1",
    "--decode.max_len=8",
)


@dataclass(frozen=True)
class Sizes:
    """How large the sections run: `REAL` on the GPU, `DRY` on a CPU in seconds."""

    test_lines: int  # test_2016_flickr lines translated; 0 = all 1000
    base: dict[str, int]  # changes to the paper's base shape
    vocab: int  # its shared vocabulary
    batch: tuple[int, int]  # sentences, positions per sentence (EOS or BOS included), on both sides
    steps: tuple[int, int]  # warm-up and timed updates of each base-shape setting
    peak_n: int  # side of the square bf16 matmul that measures the peak
    serve_seconds: float  # the measured load level sends no request past this
    serve_warmup: int  # requests before it, longest sentences first (benchmarks/speed/serve.py's warm-up); 0 = none


REAL = Sizes(
    test_lines=0,
    base={},
    vocab=37_000,
    batch=(781, 32),  # 24,992 target tokens, no padding
    steps=(3, 10),
    peak_n=8192,
    serve_seconds=10.0,
    serve_warmup=128,
)
DRY = Sizes(
    test_lines=16,
    base={"d_model": 64, "n_heads": 2, "d_ff": 128, "n_encoder_layers": 1, "n_decoder_layers": 1},
    vocab=1000,
    batch=(16, 16),
    steps=(1, 2),
    peak_n=256,
    serve_seconds=2.0,
    serve_warmup=0,  # its client would be one more process importing torch
)


@dataclass(frozen=True)
class Check:
    """What every section needs to know."""

    dry_run: bool
    data: Path  # Multi30k
    work: Path  # the runs, translations and logs
    train_minutes: float

    @property
    def device(self) -> str:
        return "cpu" if self.dry_run else "cuda"

    @property
    def sizes(self) -> Sizes:
        return DRY if self.dry_run else REAL

    @property
    def checkpoint(self) -> Path:
        """The multi30k section's final checkpoint, which decode and serve use."""
        return self.work / "multi30k" / "last"


class ChildFailed(RuntimeError):
    """A child process exited with an error: its last line of stderr, and the tail as `detail`."""

    def __init__(self, command: list[str], done: subprocess.CompletedProcess) -> None:
        lines = [line for line in done.stderr.splitlines() if line.strip()] or ["(no output on stderr)"]
        program = command[2:] if command[1] == "-m" else command[1:]  # tnmt train, pytest, a script
        what = " ".join(program[:2]) if program[0] == "tnmt" else Path(program[0]).name
        super().__init__(f"{what} exited with {done.returncode}: {lines[-1]}")
        self.detail = done.stderr[-DETAIL_CHARS:]


def child(command: list[str], *, timeout: float) -> tuple[subprocess.CompletedProcess, float]:
    """Run a child process in the repository (this process's environment); its result and wall seconds.

    Raises:
        ChildFailed: it exited with a non-zero status.
    """
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode:
        raise ChildFailed(command, done)
    return done, time.perf_counter() - start


def guarded(part: Callable[[], dict]) -> dict:
    """Run a section (or part of one): its figures with status "ok" (unless it says otherwise), or status
    "failed", the last line of the error and where it was raised, so that the check goes on."""
    start = time.monotonic()
    try:
        result = {"status": "ok", **part()}
    except Exception as error:  # any failure is a finding to record, not a reason to lose the other sections
        text = "".join(traceback.format_exception_only(error)).strip()
        frame = traceback.extract_tb(error.__traceback__)[-1]
        result = {
            "status": "failed",
            "error": text.splitlines()[-1],
            "at": f"{Path(frame.filename).name}:{frame.lineno}",
        }
        if detail := getattr(error, "detail", None) or (text if "\n" in text else None):
            result["detail"] = detail[-DETAIL_CHARS:]
    result["seconds"] = round(time.monotonic() - start, 1)
    return result


def failed_if_a_part_failed(result: dict) -> dict:
    """A section whose guarded parts failed fails too, naming the first failed part."""
    failed = [(key, part) for key, part in result.items() if isinstance(part, dict) and part.get("status") == "failed"]
    if failed:
        key, part = failed[0]
        result |= {"status": "failed", "error": f"{key}: {part['error']}"}
    return result


def read_lines(path: Path, limit: int = 0) -> list[str]:
    """The lines of a plain or gzipped text file, the first `limit` of them if `limit`."""
    with gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open(encoding="utf-8") as f:
        lines = f.read().splitlines()
    return lines[:limit] if limit else lines


def test_set(check: Check) -> tuple[Path, Path]:
    """test_2016_flickr's English sources and German references (in the dry run, their first lines only)."""
    files = tuple(check.data / f"test_2016_flickr.{lang}.gz" for lang in ("en", "de"))
    if not check.sizes.test_lines:
        return files
    cut = tuple(check.work / path.stem for path in files)
    for source, target in zip(files, cut, strict=True):
        target.write_text("".join(line + "\n" for line in read_lines(source, check.sizes.test_lines)), encoding="utf-8")
    return cut


# --- 1. tests ---


def cuda_test_files() -> list[Path]:
    """The test files with CUDA-only tests: those that skip where PyTorch sees no GPU."""
    tests = sorted((REPO / "tests").glob("test_*.py"))
    return [path for path in tests if "skipif(not torch.cuda.is_available()" in path.read_text(encoding="utf-8")]


def tests(check: Check) -> dict:
    files = cuda_test_files()
    report = check.work / "pytest.xml"
    command = [sys.executable, "-m", "pytest", *map(str, files), "-p", "no:cacheprovider", f"--junitxml={report}"]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    if not report.exists():  # pytest itself failed (collection, a plugin): no test report
        raise ChildFailed(command, done)
    outcomes = junit_outcomes(report)
    result = {"files": [str(path.relative_to(REPO)) for path in files], "exit_code": done.returncode}
    result |= {kind: sum(1 for o in outcomes.values() if o == kind) for kind in ("passed", "failed", "skipped")}
    result["failures"] = [name for name, outcome in outcomes.items() if outcome == "failed"]
    if result["failures"]:
        result |= {
            "status": "failed",
            "error": f"{len(result['failures'])} tests failed",
            "detail": done.stdout[-DETAIL_CHARS:],
        }
    return result


def junit_outcomes(path: Path) -> dict[str, str]:
    """Each test of a pytest JUnit XML report (file::name) and its outcome: passed, failed or skipped."""
    outcomes = {}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        tags = {element.tag for element in case}
        outcome = "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed"
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return outcomes


# --- 2. base_shape ---


def base_shape(check: Check) -> dict:
    result = measure_base_shape(check)
    if torch.cuda.is_available():
        torch.cuda.empty_cache()  # the model and its optimizer are gone: give their memory to the children
    return result


def measure_base_shape(check: Check) -> dict:
    from tnmt.config import ModelConfig, TrainConfig
    from tnmt.device import mixed_precision, to_device
    from tnmt.model import Transformer
    from tnmt.train.start import TrainState, make_optimizer

    sizes, device = check.sizes, torch.device(check.device)
    peak, mean_peak = matmul_peak_tflops(device, sizes.peak_n)
    config = ModelConfig.base(src_vocab_size=sizes.vocab, tgt_vocab_size=sizes.vocab, **sizes.base)
    torch.manual_seed(0)
    model = Transformer(config).to(device).train()
    precision = mixed_precision("auto", device)
    optimizer, scaler = make_optimizer(model, TrainConfig(), device, precision, TrainState(), None)
    batch = to_device(synthetic_batch(config, *sizes.batch), device)
    flops = model_flops(config, batch)
    result = {
        "shape": {
            "d_model": config.d_model,
            "d_ff": config.d_ff,
            "heads": config.n_heads,
            "layers": [config.n_encoder_layers, config.n_decoder_layers],
            "shared_vocabulary": config.tgt_vocab_size,
        },
        "parameters": sum(p.numel() for p in model.parameters()),
        "batch": {
            "sentences": batch.src.size(0),
            "src_positions": batch.src.size(1),
            "target_tokens": batch.n_tgt_tokens,
        },
        "autocast": str(precision.dtype) if precision.dtype else "none (fp32)",
        "bf16_matmul_peak_tflops": {"n": sizes.peak_n, "best": round(peak, 3), "mean": round(mean_peak, 3)},
        "model_tflop_per_update": round(flops / 1e12, 4),
    }
    step = partial(update, model, optimizer, scaler, batch, precision.dtype)
    for checkpointing in (False, True):
        model.activation_checkpointing = checkpointing
        measure = partial(timed_updates, step, device, sizes.steps, tokens=batch.n_tgt_tokens, flops=flops)
        key = "with_activation_checkpointing" if checkpointing else "without_activation_checkpointing"
        result[key] = guarded(partial(measure, peak_tflops=peak))
    return failed_if_a_part_failed(result)


def matmul_peak_tflops(device: torch.device, n: int) -> tuple[float, float]:
    """TFLOP/s of an n x n x n bf16 matrix product on `device`: the best and the mean of 10 after 3 warm-ups."""
    a, b = (torch.randn(n, n, device=device, dtype=torch.bfloat16) for _ in range(2))
    times = timings(lambda: a @ b, device, warmup=3, repeat=10)
    return 2 * n**3 / min(times) / 1e12, 2 * n**3 / statistics.mean(times) / 1e12


def timings(fn: Callable[[], object], device: torch.device, *, warmup: int, repeat: int) -> list[float]:
    """Seconds of each of `repeat` calls of `fn` after `warmup` untimed ones: CUDA events on a GPU (when the
    kernels ran, not when Python queued them), the wall clock on the CPU."""
    for _ in range(warmup):
        fn()
    if device.type != "cuda":
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        return times
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeat)]
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize(device)
    return [start.elapsed_time(end) / 1000 for start, end in events]


def synthetic_batch(config: "ModelConfig", sentences: int, positions: int) -> "Batch":
    """A `Batch` of random ids (no special ones), every sentence `positions` long on both sides: no padding."""
    from tnmt.data.batching import collate

    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, config.tgt_vocab_size, (2, sentences, positions - 1), generator=g).tolist()
    return collate(list(zip(*ids, strict=True)), pad_id=config.pad_id, bos_id=config.bos_id, eos_id=config.eos_id)


def update(
    model: "Transformer",
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    batch: "Batch",
    dtype: torch.dtype | None,
) -> None:
    """One optimizer update as train/loop.py makes it (autocast forward, the fused label-smoothed loss, the
    scaled backward pass, fused Adam), without its bookkeeping, clipping and schedule."""
    from tnmt.train.loss import model_loss

    with torch.autocast(batch.src.device.type, dtype=dtype, enabled=dtype is not None):
        features = model(batch.src, batch.tgt_in, features_only=True)  # (B, T, D)
    loss, _ = model_loss(model, features, batch.tgt_out, epsilon=0.1, dtype=dtype)
    scaler.scale(loss / batch.n_tgt_tokens).backward()
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)


def timed_updates(
    step: Callable[[], None],
    device: torch.device,
    steps: tuple[int, int],
    *,
    tokens: int,
    flops: float,
    peak_tflops: float,
) -> dict:
    """Target tokens/s, MFU and peak GPU memory (warm-up included) over the timed updates."""
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    seconds = statistics.median(timings(step, device, warmup=steps[0], repeat=steps[1]))
    memory = torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None
    return {
        "update_ms": round(1000 * seconds, 1),
        "target_tokens_per_s": round(tokens / seconds),
        "model_tflops": round(flops / seconds / 1e12, 3),
        "mfu": round(flops / seconds / 1e12 / peak_tflops, 4),
        "peak_memory_gib": None if memory is None else round(memory, 2),
    }


def model_flops(config: "ModelConfig", batch: "Batch") -> float:
    """Forward + backward FLOPs of one update, counted as benchmarks/speed/train_speed.py counts them: 2 m n k per
    matrix product on the real tokens, attention with full (not causally halved) matrices, x3 for backward.
    Activation checkpointing's recomputed forward pass is not counted: MFU, not hardware utilisation."""
    d, f, v = config.d_model, config.d_ff, config.tgt_vocab_size
    sources = (batch.src != config.pad_id).sum(1).tolist()
    targets = (batch.tgt_out != config.pad_id).sum(1).tolist()
    forward = 0
    for s, t in zip(sources, targets, strict=True):
        encoder = s * (2 * 4 * d * d + 2 * 2 * d * f) + 2 * 2 * s * s * d  # projections, FFN; QK^T, AV
        decoder = t * (2 * 4 * d * d + 2 * 2 * d * f) + 2 * 2 * t * t * d  # self-attention, FFN
        decoder += t * 2 * 2 * d * d + s * 2 * 2 * d * d + 2 * 2 * t * s * d  # cross: Q, W_O; K/V of memory
        forward += config.n_encoder_layers * encoder + config.n_decoder_layers * decoder + t * 2 * d * v
    return 3.0 * forward


# --- 3. multi30k ---


def multi30k(check: Check) -> dict:
    out = check.checkpoint.parent
    budget = DRY_TRAINING if check.dry_run else (f"--train.max_minutes={check.train_minutes}", "--train.max_steps=0")
    command = [*TNMT, "train", str(RECIPE), f"--train.out_dir={out}", f"--train.device={check.device}", *budget]
    done, seconds = child([*command, "--no-progress"], timeout=60 * check.train_minutes + 600)
    log = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    result = {"command": " ".join(command[2:]), "wall_s": round(seconds, 1)}
    result["precision"] = next((line for line in done.stderr.splitlines() if "precision = " in line), None)
    result |= training_figures(log)
    result["test_2016_flickr_beam4"] = test_bleu(check)
    result["cpu_runs"] = [cpu_training(REPO / path, result) for path in CPU_TRAINING]
    return result


def training_figures(log: list[dict]) -> dict:
    """Updates, speed and the validation curve of a run's metrics.jsonl."""
    speeds = [record["tokens_per_s"] for record in log if "tokens_per_s" in record]
    curve = [
        {"step": r["step"], "minutes": round(r["elapsed"] / 60, 2), "bleu": round(r["val_bleu"], 2)}
        for r in log
        if "val_bleu" in r
    ]
    elapsed = max(record.get("elapsed", 0.0) for record in log)
    return {
        "updates": log[-1]["step"],
        "elapsed_s": round(elapsed, 1),
        "updates_per_minute": round(60 * log[-1]["step"] / elapsed, 1),
        "median_target_tokens_per_s": round(statistics.median(speeds)) if speeds else None,
        "val_bleu_final": curve[-1]["bleu"] if curve else None,
        "val_curve": curve,
    }


def test_bleu(check: Check) -> dict:
    """sacreBLEU, chrF and tokenised lower-cased BLEU of the final checkpoint on test_2016_flickr, beam 4."""
    source, references = test_set(check)
    hypotheses = check.work / "test_beam4.de"
    command = [*TNMT, "evaluate", "--checkpoint", str(check.checkpoint), "--device", check.device]
    command += ["--beam-size", "4", "--batch-size", "64", "--src", str(source), "--ref", str(references)]
    done, seconds = child([*command, "--hyp-out", str(hypotheses)], timeout=600)
    scores = dict(re.findall(r"^(BLEU|chrF) = ([\d.]+)", done.stdout, flags=re.MULTILINE))
    result = {"checkpoint": check.checkpoint.resolve().name, "sacrebleu": float(scores["BLEU"])}
    result |= {"chrf": float(scores["chrF"]), "wall_s": round(seconds, 1)}
    return result | tok_lc_bleu(read_lines(hypotheses), check)


def tok_lc_bleu(hypotheses: list[str], check: Check) -> dict:
    """The BLEU Multi30k papers report (lower-cased, Moses-tokenised; benchmarks/quality/multi30k.py), if
    sacremoses is here."""
    try:
        from benchmarks.quality.multi30k import lc_norm_tok
    except ImportError as error:
        return {"tok_lc_bleu": None, "tok_lc_bleu_missing": str(error)}
    import sacrebleu

    references = read_lines(check.data / "tok" / "test_2016_flickr.lc.norm.tok.de.gz", check.sizes.test_lines)
    bleu = sacrebleu.corpus_bleu(lc_norm_tok(hypotheses, "de"), [references], tokenize="none", force=True)
    return {"tok_lc_bleu": round(bleu.score, 2)}


def cpu_training(path: Path, gpu: dict) -> dict:
    """A CPU run of the recipe (its first phase, 45 minutes), per minute, with its validation BLEU at the GPU
    run's minutes and at its number of updates."""
    run = json.loads(path.read_text())
    phase = min(run["phases"], key=lambda p: p["minutes"])
    curve = phase["val_curve"]
    by_minutes = [point for point in curve if point["minutes"] <= gpu["elapsed_s"] / 60]
    test, per_minute = phase["best_beam4"], 60 * phase["steps"] / phase["elapsed_s"]
    return {
        "file": str(path.relative_to(REPO)),
        "host": {key: run["machine"].get(key) for key in ("cpu", "threads", "matmul_peak_gflops")},
        "minutes": phase["minutes"],
        "updates": phase["steps"],
        "updates_per_minute": round(per_minute, 1),
        "median_target_tokens_per_s": phase["median_target_tokens_per_s"],
        "val_at_gpu_minutes": by_minutes[-1] if by_minutes else None,
        "val_at_gpu_updates": min(curve, key=lambda point: abs(point["step"] - gpu["updates"])),
        "test_beam4": {
            "checkpoint": test["checkpoint"],
            "sacrebleu": test["sacrebleu"],
            "tok_lc_bleu": test["tok_lc_bleu"],
        },
        "gpu_speedup_updates_per_minute": round(gpu["updates_per_minute"] / per_minute, 2),
    }


# --- 4. decode ---


def decode(check: Check) -> dict:
    source, _ = test_set(check)
    n = len(read_lines(source))
    one_line = check.work / "one_line.en"
    one_line.write_text(read_lines(source, 1)[0] + "\n", encoding="utf-8")
    devices = {"gpu": check.device, "cpu": "cpu"}
    startup = {
        where: translate(check, one_line, check.work / "one_line.de", device, 1) for where, device in devices.items()
    }
    result: dict = {"sentences": n, "batch_size": 64, "startup_s": {where: round(s, 2) for where, s in startup.items()}}
    for search, beam in (("greedy", 1), ("beam4", 4)):
        outputs = {where: check.work / f"{search}_{where}.de" for where in devices}
        figures = {}
        for where, device in devices.items():
            seconds = translate(check, source, outputs[where], device, beam)
            decoding = max(seconds - startup[where], 1e-3)  # the start-up of a one-line run left out
            figures[where] = {"wall_s": round(seconds, 2), "decode_s": round(decoding, 2)}
            figures[where]["sentences_per_s"] = round(n / decoding, 1)
        result[search] = figures | differences(read_lines(outputs["gpu"]), read_lines(outputs["cpu"]))
    result["attention"] = guarded(partial(attention, check, read_lines(source, 1)[0]))
    return failed_if_a_part_failed(result)


def translate(check: Check, source: Path, output: Path, device: str, beam: int) -> float:
    """Wall seconds of `tnmt translate` (batch 64) with the multi30k checkpoint, from launch to exit."""
    if not check.checkpoint.exists():
        raise RuntimeError(f"no checkpoint at {check.checkpoint}: the multi30k section did not make one")
    command = [*TNMT, "translate", "--checkpoint", str(check.checkpoint), "--device", device]
    command += ["--beam-size", str(beam), "--batch-size", "64", "-i", str(source), "-o", str(output)]
    return child(command, timeout=600)[1]


def attention(check: Check, sentence: str) -> dict:
    """`tnmt attention --device ...` on one sentence: the pictures it drew."""
    out = check.work / "attention"
    command = [*TNMT, "attention", "--checkpoint", str(check.checkpoint), "--device", check.device, sentence]
    seconds = child([*command, "--out", str(out)], timeout=300)[1]
    return {"pictures": len(list(out.glob("*.png"))), "wall_s": round(seconds, 1)}


def differences(gpu: list[str], cpu: list[str]) -> dict:
    """How many lines of the GPU's output differ from the CPU's, and the first few."""
    if len(gpu) != len(cpu):
        return {"differing_lines": None, "line_counts": {"gpu": len(gpu), "cpu": len(cpu)}}
    differing = [i for i, (a, b) in enumerate(zip(gpu, cpu, strict=True)) if a != b]
    examples = [{"line": i + 1, "gpu": gpu[i], "cpu": cpu[i]} for i in differing[:3]]
    return {"differing_lines": len(differing), "examples": examples}


# --- 5. serve ---


def serve(check: Check) -> dict:
    from benchmarks.speed import (
        serve as load,
    )  # benchmarks/speed/serve.py: starts and stops the server, sends the load, reads its figures

    if not check.checkpoint.exists():
        raise RuntimeError(f"no checkpoint at {check.checkpoint}: the multi30k section did not make one")
    settings = argparse.Namespace(requests=10**9, level_seconds=check.sizes.serve_seconds, beam_size=None, pairs=None)
    result: dict = {"concurrency": CONCURRENCY, "level_seconds": settings.level_seconds, "server_threads": 1}
    for mode in load.MODES:
        result[mode] = guarded(partial(serve_mode, load, mode, settings, check))
    return failed_if_a_part_failed(result | {"cpu_run": cpu_serving(REPO / CPU_SERVING)})


def serve_mode(load: ModuleType, mode: str, settings: argparse.Namespace, check: Check) -> dict:
    """One server (`tnmt serve --device ...`, batching on or off): a warm-up, then one level at CONCURRENCY."""
    log = check.work / f"serve-{mode}.log"
    flags = [*load.MODES[mode], "--device", check.device]
    server, port = load.start_server(check.checkpoint, flags, threads=1, log=log, timeout=300)
    try:
        if check.sizes.serve_warmup:
            load.run_client(port, CONCURRENCY, check.sizes.serve_warmup, settings, longest_first=True)
        figures = load.level(server, port, CONCURRENCY, settings)
    except BaseException:
        server.kill()
        raise
    return figures | {"exit_code_after_sigterm": load.stop_server(server)}


def cpu_serving(path: Path) -> dict:
    """benchmarks/speed/serve.py's CPU run: each mode and thread count at concurrency 64."""
    run = json.loads(path.read_text())
    levels = {name: r["levels"].get(str(CONCURRENCY)) for name, r in run["runs"].items()}
    figures = {
        name: {key: lv[key] for key in ("sentences_per_s", "p50_s", "p99_s")} for name, lv in levels.items() if lv
    }
    return {
        "file": str(path.relative_to(REPO)),
        "host": run["machine"]["cpu"],
        "cores": run["machine"]["cores"],
    } | figures


# --- the check ---

SECTIONS: dict[str, Callable[[Check], dict]] = {
    "tests": tests,
    "base_shape": base_shape,
    "multi30k": multi30k,
    "decode": decode,
    "serve": serve,
}


def machine() -> dict:
    """The host, and the GPU as PyTorch and the driver see it."""
    from benchmarks.common.host import describe

    info = describe() | {"torch_cuda": torch.version.cuda}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info |= {"gpu": props.name, "gpu_memory_gib": round(props.total_memory / 2**30, 1)}
        info |= {"compute_capability": f"{props.major}.{props.minor}", "multiprocessors": props.multi_processor_count}
        query = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
        try:
            info["driver"] = subprocess.run(query, capture_output=True, text=True, timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            info["driver"] = None
    return info


def commit() -> str | None:
    """The code checked: the STAGED_COMMIT note benchmarks/gpu/gpu_stage.sh leaves in its copy, else git's HEAD."""
    if (note := REPO / "STAGED_COMMIT").exists():
        return note.read_text().strip()
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=False)
    except OSError:  # no git on the machine
        return None
    return done.stdout.strip() or None


def run_check(check: Check, names: list[str], out: Path) -> dict:
    """The sections `names` in turn, the JSON rewritten after each; one line per section on stderr."""
    report: dict = {"command": " ".join(sys.argv), "dry_run": check.dry_run, "commit": commit()}
    report |= {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "machine": machine(), "sections": {}}
    start = time.monotonic()
    for i, name in enumerate(names, 1):
        result = report["sections"][name] = guarded(partial(SECTIONS[name], check))
        report["seconds"] = round(time.monotonic() - start, 1)
        out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        failure = f": {result['error']}" if result["status"] != "ok" else ""
        print(
            f"gpu_check: [{i}/{len(names)}] {name}: {result['status']} in {result['seconds']} s{failure}",
            file=sys.stderr,
        )
    return report


def parse_args() -> argparse.Namespace:
    default_data = Path(os.environ.get("TNMT_DATA_DIR") or REPO.parent / "shared" / "data" / "multi30k")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="the JSON to write")
    parser.add_argument("--data", type=Path, default=default_data, help=f"Multi30k (default: {default_data})")
    parser.add_argument("--dry-run", action="store_true", help="every section on the CPU at tiny sizes")
    parser.add_argument("--train-minutes", type=float, default=4.0, help="the Multi30k training budget")
    parser.add_argument("--work", type=Path, help="keep the runs, outputs and logs here (default: a temporary folder)")
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help="comma-separated, run in this order (default: all); decode and serve need multi30k's checkpoint in --work",
    )
    args = parser.parse_args()
    args.sections = args.sections.split(",")
    if unknown := [name for name in args.sections if name not in SECTIONS]:
        parser.error(f"unknown sections {unknown}; sections: {', '.join(SECTIONS)}")
    return args


def main() -> int:
    args = parse_args()
    if not args.dry_run and not torch.cuda.is_available():
        print(NO_GPU, file=sys.stderr)
        return 2
    os.environ["TNMT_DATA_DIR"] = str(args.data.resolve())  # the children's Multi30k
    if args.dry_run:  # a shared 2-core machine: tiny work needs no second thread
        os.environ["OMP_NUM_THREADS"] = "1"
        torch.set_num_threads(1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpu_check-") as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        check = Check(
            dry_run=args.dry_run, data=args.data.resolve(), work=work.resolve(), train_minutes=args.train_minutes
        )
        report = run_check(check, args.sections, args.out)
    failed = [name for name, section in report["sections"].items() if section["status"] != "ok"]
    outcome = f"failed: {', '.join(failed)}" if failed else "all sections ok"
    print(f"gpu_check: wrote {args.out} in {report['seconds']} s; {outcome}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
