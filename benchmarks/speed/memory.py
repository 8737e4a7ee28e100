"""Peak memory of one training step for the small/base/big presets, with and without activation checkpointing.

Each case (preset x token budget x checkpointing) runs in a fresh Python process, so no case inherits
another's allocator state. The process builds the model (the paper's shared vocabulary, 37k by default),
fused Adam and one batch of `tokens / 32` sentence pairs of 32 source and 32 target tokens, then runs
one full step (forward, label-smoothed loss, backward, Adam) so that gradients and Adam moments exist.
It then frees the gradients, resets the kernel's peak-RSS counter (VmHWM, via /proc/self/clear_refs)
and runs a second step: `step_mib` = peak RSS during that step - RSS before it, i.e. what a step needs
beyond weights and optimizer state (activations, logits, gradients). glibc is told to return every
allocation over 64 KiB to the kernel on free (MALLOC_MMAP_THRESHOLD_), so memory cached from the first
step does not hide the second step's needs. CPU only (peak RSS); on a GPU use torch.cuda.max_memory_allocated.

    python -m benchmarks.speed.memory [--presets small,base,big] [--tokens 1024,2048,4096] [--vocab 37000]
    python -m benchmarks.speed.memory --presets small --tokens 256 --vocab 1000 --out /tmp/memory.json   # smoke
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks.common.host import describe

LENGTH = 32  # source and target tokens per sentence
RESULTS = Path(__file__).resolve().parents[1] / "results" / "memory.json"


def child(preset: str, tokens: int, vocab: int, checkpointing: bool, precision: str) -> dict:
    """One case, in this (fresh) process: returns the RSS figures in MiB and the second step's seconds."""
    import torch

    from tnmt import ModelConfig, Transformer
    from tnmt.train.loss import model_loss

    torch.manual_seed(0)
    model = Transformer(ModelConfig.from_preset(preset, src_vocab_size=vocab, tgt_vocab_size=vocab)).train()
    model.activation_checkpointing = checkpointing
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-9, fused=True)
    sentences = max(1, tokens // LENGTH)
    src = torch.randint(3, vocab, (sentences, LENGTH))  # (B, S)
    tgt = torch.randint(3, vocab, (sentences, LENGTH + 1))  # BOS/EOS-shifted below: (B, T + 1)

    def step() -> None:
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            features = model(src, tgt[:, :-1], features_only=True)  # (B, T, D)
        dtype = torch.bfloat16 if precision == "bf16" else None
        loss, _ = model_loss(model, features, tgt[:, 1:], epsilon=0.1, dtype=dtype)
        (loss / tgt[:, 1:].numel()).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # allocates Adam's moments; gradients are freed again by zero_grad
    before = rss_mib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    start = time.perf_counter()
    step()
    seconds = time.perf_counter() - start
    peak = rss_mib("VmHWM")
    return {
        "parameters": sum(p.numel() for p in model.parameters()),
        "sentences": sentences,
        "rss_before_step_mib": before,
        "peak_rss_mib": peak,
        "step_mib": peak - before,
        "step_s": seconds,
    }


def rss_mib(field: str) -> float:
    """A memory figure of this process from /proc/self/status, in MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def run_case(preset: str, tokens: int, checkpointing: bool, args: argparse.Namespace) -> dict:
    case = [preset, str(tokens), str(args.vocab), str(int(checkpointing)), args.precision]
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536", "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(
        [sys.executable, "-m", __spec__.name, "--child", *case],
        env=env,
        capture_output=True,
        text=True,
        timeout=args.timeout,
    )
    row = {"preset": preset, "tokens": tokens, "activation_checkpointing": checkpointing}
    if done.returncode != 0:  # e.g. killed for want of memory: say so and go on with the other cases
        return {**row, "error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return {**row, **json.loads(done.stdout)}


def main() -> None:
    args = parse_args()
    if args.child:
        preset, tokens, vocab, checkpointing, precision = args.child
        print(json.dumps(child(preset, int(tokens), int(vocab), checkpointing == "1", precision)))
        return
    rows = []
    for preset in args.presets.split(","):
        for tokens in (int(t) for t in args.tokens.split(",")):
            for checkpointing in (False, True):
                rows.append(run_case(preset, tokens, checkpointing, args))
                print(json.dumps(rows[-1]), file=sys.stderr)
    report = {
        "vocab": args.vocab,
        "sentence_length": LENGTH,
        "precision": args.precision,
        "threads": args.threads,
        "machine": describe(),
        "results": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print_table(rows)


def print_table(rows: list[dict]) -> None:
    print("| preset | tokens | checkpointing | step MiB | peak RSS MiB | step s |")
    print("|---|---:|---|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            print(f"| {r['preset']} | {r['tokens']} | {r['activation_checkpointing']} | {r['error']} | | |")
        else:
            cells = (r["preset"], r["tokens"], r["activation_checkpointing"], r["step_mib"], r["peak_rss_mib"])
            print("| {} | {} | {} | {:.0f} | {:.0f} | ".format(*cells) + f"{r['step_s']:.2f} |")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--presets", default="small,base,big")
    parser.add_argument("--tokens", default="1024,2048,4096", help="comma-separated token budgets per batch")
    parser.add_argument("--vocab", type=int, default=37000, help="shared vocabulary (the paper: ~37k)")
    parser.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per case")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    return parser.parse_args()


if __name__ == "__main__":
    main()
