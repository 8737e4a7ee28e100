"""Training throughput of tnmt against torch.nn.Transformer and Hugging Face MarianMTModel (issue 3).

One training step = forward + label-smoothed loss + backward + Adam step (no gradient clipping, fixed
learning rate), on the same batch of about 4096 target tokens, for three implementations of one
architecture (d_model 256, 3+3 layers, FFN 1024, 4 heads, ReLU, post-norm, sinusoidal positions, one
shared and tied 8000-word vocabulary, dropout 0.1), in fp32 and under
`torch.autocast("cpu", dtype=torch.bfloat16)`. Throughput is in target tokens per second: non-pad
positions of the target, the quantity the training loop logs.

Fairness: all systems get the same ids and the same optimizer: Adam with betas (0.9, 0.98) and eps 1e-9,
by default with `fused=True`, which is what the Hugging Face Trainer builds since torch 2.8 and what
tnmt's loop should build (`--adam default` gives the per-parameter loop PyTorch picks on CPU).
Each system is used the way its own documentation trains it: nn.Transformer with key-padding masks
and a causal `tgt_mask`; Marian with the source `attention_mask` and its built-in causal decoder mask
(no `decoder_attention_mask`, as `labels`-style training does); tnmt with
`model(src, tgt_in, features_only=True)` and its `model_loss`, which applies the output
projection block by block (train/loss.py). The other two get the idiomatic single
`F.cross_entropy(..., label_smoothing=0.1, ignore_index=pad)`: the same loss, without the NLL that
tnmt also computes for perplexity.

Timing on a shared machine: systems and precisions are interleaved step by step after warm-up steps,
so a burst of background load hits all of them alike. Each timed step also reads /proc/stat: a step
during which other processes used more than `--max-foreign` of the machine's CPU time counts in
`tokens_per_s_all_steps` but not in the headline median, and rounds continue (up to `--max-rounds`)
until every cell has `--iters` quiet steps. Each cell reports the median and the interquartile range
(as a percentage of the median).

The batch: source and target lengths of real Multi30k training sentences when the corpus is found
(`TNMT_DATA_DIR` or ../shared/data/multi30k), counted without a tokenizer as round(1.3 * whitespace
words) + 1 (EOS), a fair stand-in for an 8k sentencepiece vocabulary; otherwise lengths drawn from a
seeded normal fit of those statistics. "bucketed" (default) is what `TokenBatchSampler` produces:
neighbours in length order, around the median, about 10% padding. "random" ignores length, so about
half of the target positions are padding: a stress test of padding handling.

MFU = model FLOPs per step / step time / matmul peak. Model FLOPs count every matmul of the forward
pass on the real (non-pad) tokens, 2 * m * n * k each, attention scores and mixing included with full
(not causally halved) matrices, times 3 for forward + backward (input and weight gradients). The peak
is the best 2048 x 2048 matmul of a 2-second loop on the same threads, measured before and after the
timed steps in each precision.

Threads: every system runs at each of `--threads` (default 1 and 2), interleaved in the same rounds
(`torch.set_num_threads` before each step), and is compared with Marian at each one's best thread count
and per core (both at 1 thread); the matmul peak is measured at each thread count.

    python -m benchmarks.speed.train_speed [--iters 7] [--threads 1,2] [--batch bucketed|random] [--adam fused|default]
"""

import argparse
import gzip
import json
import math
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmarks.common.host import describe, matmul_peak
from tnmt import ModelConfig, Transformer
from tnmt.blocks.positional import sinusoidal_table
from tnmt.train.loss import model_loss

D, HEADS, LAYERS, FFN, VOCAB, DROPOUT = 256, 4, 3, 1024, 8000, 0.1
PAD, BOS, EOS = 0, 1, 2
EPSILON = 0.1
TARGET_TOKENS = 4096
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


# ----------------------------------------------------------------------------------------------- batch
def corpus_lengths() -> list[tuple[int, int]] | None:
    """(source, target) lengths of the Multi30k en-de training pairs, or None without the corpus."""
    default = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"
    root = Path(os.environ.get("TNMT_DATA_DIR", default))
    files = [root / "train.en.gz", root / "train.de.gz"]
    if not all(f.exists() for f in files):
        return None
    src, tgt = (words_to_tokens(gzip.decompress(f.read_bytes()).decode()) for f in files)
    return list(zip(src, tgt, strict=True))


def words_to_tokens(text: str) -> list[int]:
    """Subword length + EOS of every line, estimated as 1.3 tokens per whitespace-separated word."""
    return [round(1.3 * len(line.split())) + 1 for line in text.splitlines()]


def pick_lengths(kind: str, seed: int = 0) -> tuple[list[tuple[int, int]], str]:
    """About TARGET_TOKENS target tokens worth of (source, target) lengths, and where they came from."""
    rng = random.Random(seed)
    lengths = corpus_lengths()
    origin = "multi30k train (1.3 * words + 1)"
    if lengths is None:  # mean/std of the corpus lengths above
        lengths = [(max(2, round(rng.gauss(16.5, 5.0))), max(2, round(rng.gauss(15.5, 5.0)))) for _ in range(29000)]
        origin = "seeded normal fit of multi30k lengths"
    rng.shuffle(lengths)
    if kind == "bucketed":  # neighbours in the order TokenBatchSampler sorts by, max(src, tgt)
        lengths.sort(key=max)
        lengths = lengths[len(lengths) // 2 - 150 :]  # about half of the batch below the median
    picked, total = [], 0
    for pair in lengths:
        if total >= TARGET_TOKENS:
            break
        picked.append(pair)
        total += pair[1]
    return picked, origin


def make_batch(lengths: list[tuple[int, int]], seed: int = 0) -> tuple[Tensor, Tensor, Tensor]:
    """Random ids right-padded like `collate`: src (B, S), tgt_in (B, T) = BOS + y, tgt_out = y + EOS."""
    g = torch.Generator().manual_seed(seed)
    s_max, t_max = max(s for s, _ in lengths), max(t for _, t in lengths)
    src = torch.full((len(lengths), s_max), PAD)
    tgt = torch.full((len(lengths), t_max + 1), PAD)
    for i, (s, t) in enumerate(lengths):
        src[i, : s - 1] = torch.randint(3, VOCAB, (s - 1,), generator=g)
        src[i, s - 1] = EOS
        tgt[i, 0] = BOS
        tgt[i, 1:t] = torch.randint(3, VOCAB, (t - 1,), generator=g)
        tgt[i, t] = EOS
    tgt_in = tgt[:, :-1].masked_fill(tgt[:, :-1] == EOS, PAD)  # (B, T): drop each row's EOS
    return src, tgt_in, tgt[:, 1:]


# --------------------------------------------------------------------------------------------- systems
class TorchReference(nn.Module):
    """torch.nn.Transformer plus what it leaves out: shared scaled embeddings, sinusoids, tied output."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D, padding_idx=PAD)
        self.register_buffer("positions", sinusoidal_table(512, D), persistent=False)
        self.dropout = nn.Dropout(DROPOUT)
        self.transformer = nn.Transformer(D, HEADS, LAYERS, LAYERS, FFN, dropout=DROPOUT, batch_first=True)
        self.output = nn.Linear(D, VOCAB, bias=False)
        self.output.weight = self.embed.weight

    def _embed(self, ids: Tensor) -> Tensor:
        return self.dropout(self.embed(ids) * math.sqrt(D) + self.positions[: ids.size(1)])

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        causal = torch.ones(tgt.size(1), tgt.size(1), dtype=torch.bool).triu(1)  # True = masked, as nn wants
        hidden = self.transformer(
            self._embed(src),
            self._embed(tgt),
            tgt_mask=causal,
            src_key_padding_mask=src == PAD,
            tgt_key_padding_mask=tgt == PAD,
            memory_key_padding_mask=src == PAD,
            tgt_is_causal=True,
        )
        return self.output(hidden)


def build(system: str) -> tuple[nn.Module, Callable[[nn.Module, Tensor, Tensor], Tensor]]:
    """A freshly initialised model and `forward(model, src, tgt_in)`: logits (B, T, V), or for tnmt the
    decoder features (B, T, D) its loss takes (the output projection is fused with the loss)."""
    torch.manual_seed(0)
    if system == "tnmt":
        config = ModelConfig.small(src_vocab_size=VOCAB, tgt_vocab_size=VOCAB, dropout=DROPOUT)
        return Transformer(config), lambda m, src, tgt: m(src, tgt, features_only=True)  # loss projects them
    if system == "torch.nn":
        return TorchReference(), lambda m, src, tgt: m(src, tgt)
    if system in ("marian", "marian-eager"):
        from transformers import MarianConfig, MarianMTModel

        config = MarianConfig(
            vocab_size=VOCAB,
            d_model=D,
            encoder_layers=LAYERS,
            decoder_layers=LAYERS,
            encoder_attention_heads=HEADS,
            decoder_attention_heads=HEADS,
            encoder_ffn_dim=FFN,
            decoder_ffn_dim=FFN,
            activation_function="relu",
            dropout=DROPOUT,
            scale_embedding=True,
            max_position_embeddings=512,
            pad_token_id=PAD,
            eos_token_id=EOS,
            decoder_start_token_id=BOS,
            share_encoder_decoder_embeddings=True,
            tie_word_embeddings=True,
        )

        def forward(m: nn.Module, src: Tensor, tgt: Tensor) -> Tensor:
            out = m(input_ids=src, attention_mask=(src != PAD).long(), decoder_input_ids=tgt, use_cache=False)
            return out.logits

        # "marian" uses the library's default attention (PyTorch SDPA); "marian-eager" its plain matmul path
        attention = "eager" if system == "marian-eager" else "sdpa"
        return MarianMTModel._from_config(config, attn_implementation=attention), forward
    raise ValueError(system)


def busy_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (all processes, all cores)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")  # minus idle, iowait


def loss_fn(system: str, precision: str) -> Callable[[nn.Module, Tensor, Tensor], Tensor]:
    """`loss(model, forward's output, target)`: tnmt's own loss (with the output projection, in the
    autocast precision); for the others the idiomatic single `F.cross_entropy` (same math, no NLL)."""
    if system == "tnmt":
        dtype = torch.bfloat16 if precision == "bf16" else None
        return lambda m, features, target: model_loss(m, features, target, epsilon=EPSILON, dtype=dtype)[0]
    return lambda m, logits, target: F.cross_entropy(
        logits.flatten(0, 1).float(), target.flatten(), ignore_index=PAD, label_smoothing=EPSILON, reduction="sum"
    )


@dataclass
class Runner:
    """One system in one precision, with its own model and optimizer state."""

    name: str
    precision: str
    threads: int
    model: nn.Module
    forward: Callable[[nn.Module, Tensor, Tensor], Tensor]
    loss: Callable[[nn.Module, Tensor, Tensor], Tensor]
    optimizer: torch.optim.Optimizer
    times: list[float] = field(default_factory=list)  # one timed step per round
    quiet: list[bool] = field(default_factory=list)  # whether that step ran without foreign load

    @property
    def quiet_times(self) -> list[float]:
        return [t for t, q in zip(self.times, self.quiet, strict=True) if q]

    def step(self, src: Tensor, tgt_in: Tensor, tgt_out: Tensor, n_tokens: int) -> None:
        """One training step, as `tnmt.train.update._update` does it (minus clipping and schedule)."""
        torch.set_num_threads(self.threads)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.precision == "bf16"):
            out = self.forward(self.model, src, tgt_in)  # (B, T, V), tnmt: (B, T, D)
        (self.loss(self.model, out, tgt_out) / n_tokens).backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def timed_step(self, *batch, max_foreign: float) -> None:
        """Time one step; it counts as quiet if other processes used < max_foreign of the machine."""
        busy, own, started = busy_cpu_seconds(), time.process_time(), time.perf_counter()
        self.step(*batch)
        elapsed = time.perf_counter() - started
        foreign = (busy_cpu_seconds() - busy) - (time.process_time() - own)
        self.times.append(elapsed)
        self.quiet.append(foreign < max_foreign * elapsed * os.cpu_count())


def make_runner(system: str, precision: str, threads: int, *, adam: str) -> Runner:
    model, forward = build(system)
    kind = {"fused": dict(fused=True), "foreach": dict(foreach=True), "default": {}}[adam]
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, **kind)
    return Runner(system, precision, threads, model.train(), forward, loss_fn(system, precision), optimizer)


# ------------------------------------------------------------------------------------------ MFU helpers
def model_flops(lengths: list[tuple[int, int]]) -> float:
    """Forward + backward FLOPs of one step on the real tokens (see the module docstring)."""
    forward = 0
    for s, t in lengths:
        encoder = s * (2 * 4 * D * D + 2 * 2 * D * FFN) + 2 * 2 * s * s * D  # projections, FFN; QK^T, AV
        decoder_self = t * (2 * 4 * D * D) + 2 * 2 * t * t * D
        cross = t * (2 * 2 * D * D) + s * (2 * 2 * D * D) + 2 * 2 * t * s * D  # Q, W_O; K/V of memory
        decoder_ffn = t * 2 * 2 * D * FFN
        forward += LAYERS * (encoder + decoder_self + cross + decoder_ffn) + t * 2 * D * VOCAB
    return 3.0 * forward


# ------------------------------------------------------------------------------------------------ main
def summarise(times: list[float], n_tokens: int) -> dict[str, float]:
    rates = sorted(n_tokens / t for t in times)
    q1, _, q3 = statistics.quantiles(rates, n=4)
    median = statistics.median(rates)
    return {"tokens_per_s": median, "iqr_pct": 100 * (q3 - q1) / median, "step_s": statistics.median(times)}


def main() -> None:
    args = parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    peak = {(name, t): matmul_peak(dtype, t) for name, dtype in DTYPES.items() for t in threads}  # GFLOP/s
    lengths, origin = pick_lengths(args.batch)
    src, tgt_in, tgt_out = make_batch(lengths)
    n_tokens = int((tgt_out != PAD).sum())
    runners = [
        make_runner(system, precision, t, adam=args.adam)
        for system in args.systems.split(",")
        for precision in args.precisions.split(",")
        for t in threads
    ]
    for _ in range(args.warmup):
        for runner in runners:
            runner.step(src, tgt_in, tgt_out, n_tokens)
    rounds = 0
    while rounds < args.max_rounds and min(len(r.quiet_times) for r in runners) < args.iters:
        rounds += 1
        for runner in runners:  # interleaved: a burst of background load hits every system alike
            runner.timed_step(src, tgt_in, tgt_out, n_tokens, max_foreign=args.max_foreign)
    peak = {(name, t): max(peak[name, t], matmul_peak(dtype, t)) for name, dtype in DTYPES.items() for t in threads}

    report = {
        "batch": {
            "kind": args.batch,
            "lengths_from": origin,
            "sentences": len(lengths),
            "target_tokens": n_tokens,
            "src_shape": list(src.shape),
            "tgt_shape": list(tgt_in.shape),
            "target_padding_pct": 100 * (1 - n_tokens / tgt_out.numel()),
        },
        "model": {"d_model": D, "heads": HEADS, "layers": f"{LAYERS}+{LAYERS}", "ffn": FFN, "vocab": VOCAB},
        "optimizer": f"Adam(betas=(0.9, 0.98), eps=1e-9), implementation: {args.adam}",
        "warmup": args.warmup,
        "rounds": rounds,
        "max_foreign": args.max_foreign,
        "threads": threads,
        "torch": torch.__version__,
        "transformers": transformers_version(),
        "matmul_peak_gflops": {f"{name}@{t}": gflops for (name, t), gflops in peak.items()},
        "model_gflop_per_step": model_flops(lengths) / 1e9,
        "results": [result(r, n_tokens, model_flops(lengths), peak, runners) for r in runners],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": describe(), **report}, indent=2) + "\n")
    print_table(report)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--iters", type=int, default=7, help="quiet timed steps per system and precision")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per system and precision")
    parser.add_argument("--max-rounds", type=int, default=30, help="give up waiting for quiet steps after this")
    parser.add_argument("--max-foreign", type=float, default=0.1, help="foreign CPU share of a quiet step")
    parser.add_argument("--batch", choices=["bucketed", "random"], default="bucketed")
    parser.add_argument("--systems", default="tnmt,torch.nn,marian,marian-eager")  # Marian: both attentions
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--adam", choices=["fused", "foreach", "default"], default="fused")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts, each system at each")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "train_speed.json"
    )
    return parser.parse_args()


def stats_of(runner: Runner, n_tokens: int) -> dict[str, float]:
    """Quiet-step statistics (all steps if fewer than 3 were quiet)."""
    return summarise(runner.quiet_times if len(runner.quiet_times) >= 3 else runner.times, n_tokens)


def result(
    runner: Runner, n_tokens: int, flops: float, peak: dict[tuple[str, int], float], runners: list[Runner]
) -> dict:
    """One cell of the table: quiet-step statistics, MFU against the peak at its thread count, and the
    speed relative to Marian in the same precision, at the same thread count as the median of per-round
    ratios (the two steps of a round ran seconds apart, so a slow drift of the machine cancels out) and
    at each one's best thread count as the ratio of medians."""
    stats = stats_of(runner, n_tokens)
    marians = [r for r in runners if r.name == "marian" and r.precision == runner.precision]
    same = next((r for r in marians if r.threads == runner.threads), None)
    ratios = [] if same is None else paired_ratios(same, runner)
    mine = [r for r in runners if (r.name, r.precision) == (runner.name, runner.precision)]
    own_best = max(stats_of(r, n_tokens)["tokens_per_s"] for r in mine)
    marian_best = max((stats_of(r, n_tokens)["tokens_per_s"] for r in marians), default=None)
    return {
        "system": runner.name,
        "precision": runner.precision,
        "threads": runner.threads,
        **stats,
        "mfu": flops / stats["step_s"] / 1e9 / peak[runner.precision, runner.threads],
        "quiet_steps": len(runner.quiet_times),
        "timed_steps": len(runner.times),
        "tokens_per_s_all_steps": summarise(runner.times, n_tokens)["tokens_per_s"],
        "vs_marian_paired": statistics.median(ratios) if ratios else None,
        "best_vs_marian_best": None if marian_best is None else own_best / marian_best,
    }


def paired_ratios(reference: Runner, runner: Runner) -> list[float]:
    """reference step time / runner step time, for every round in which both steps were quiet."""
    pairs = zip(reference.times, reference.quiet, runner.times, runner.quiet, strict=True)
    return [ref / own for ref, ref_quiet, own, own_quiet in pairs if ref_quiet and own_quiet]


def transformers_version() -> str | None:
    try:
        import transformers
    except ImportError:
        return None
    return transformers.__version__


def print_table(report: dict) -> None:
    b, peak = report["batch"], report["matmul_peak_gflops"]
    print(
        f"batch ({b['kind']}): {b['sentences']} sentences, {b['target_tokens']} target tokens, src {b['src_shape']},"
        f" tgt {b['tgt_shape']}, {b['target_padding_pct']:.0f}% of target positions are padding"
    )
    peaks = ", ".join(f"{key} {gflops:.0f}" for key, gflops in peak.items())
    print(f"matmul peak (GFLOP/s, precision@threads): {peaks}; model: {report['model_gflop_per_step']:.1f} GFLOP/step;")
    print(f"{report['optimizer']}\n")
    print(
        "| system | precision | threads | target tokens/s | IQR | step (s) | MFU"
        " | vs Marian, same threads (paired) | best vs Marian's best | quiet steps |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in report["results"]:
        paired = "-" if r["vs_marian_paired"] is None else f"{r['vs_marian_paired']:.2f}x"
        best = "-" if r["best_vs_marian_best"] is None else f"{r['best_vs_marian_best']:.2f}x"
        print(
            f"| {r['system']} | {r['precision']} | {r['threads']} | {r['tokens_per_s']:.0f} | {r['iqr_pct']:.0f}% |"
            f" {r['step_s']:.2f} | {100 * r['mfu']:.0f}% | {paired} | {best} | {r['quiet_steps']}/{r['timed_steps']} |"
        )


if __name__ == "__main__":
    main()
