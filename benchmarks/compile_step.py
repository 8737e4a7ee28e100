"""Would a compiled decoder step pay here? torch.compile (inductor) against the eager fast step, per batch size.

    python benchmarks/compile_step.py --checkpoint CKPT [--batches 1,16,64] [--runs 5] [--threads 1]

The fast step (decode/fast_step.py) slices its cache to the positions written so far. A compiled step needs
fixed shapes, else every position is a new graph, so the variant compiled here attends over the whole
preallocated capacity under a mask and takes the position as a tensor; it is timed eager too, so the
compiler's own gain reads apart from what the fixed shapes cost. Compiled twice: inductor's Python wrapper
and its C++ wrapper (`torch._inductor.config.cpp_wrapper`). Each row: ms per step (greedy, the step's own
argmax fed back, 32 steps, median of `--runs`), the largest logit difference to the eager fast step, the
compile time, and what importing inductor adds to a start-up. The checkpoint's decoder must be the Multi30k
recipe's: post-norm, ReLU, sinusoidal, output tied to the embedding, no logits bias.
Results: benchmarks/results/compile_step.json.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from host import describe
from tnmt.decode.fast_step import FastDecoder

from tnmt.checkpoint import load_checkpoint

STEPS = 32
SOURCE = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 2]  # 12 source tokens


def static_step(decoder: FastDecoder, capacity: int):
    """The fast step's arithmetic with fixed shapes: (tokens (N,), position (), kv, cross) -> logits (N, V)."""
    d, heads = decoder.d, decoder.heads
    dh = d // heads

    def step(tokens, position, kv, cross):  # kv (L, 2, N, H, capacity, Dh), cross (L, 2, N, H, S, Dh)
        n = tokens.size(0)
        x = decoder.positions.index_select(0, position.view(1)) + F.embedding(tokens, decoder.embedding) * decoder.scale
        mask = (torch.arange(capacity) <= position)[None, None, None, :]  # (1, 1, 1, capacity)
        for i, layer in enumerate(decoder.layers):
            qkv = layer.self_qkv(x)
            new = qkv[:, d:].view(n, 2, heads, dh).transpose(0, 1)[:, :, :, None]  # (2, N, H, 1, Dh)
            kv[i].index_copy_(3, position.view(1), new)
            q = qkv[:, :d].view(n, heads, 1, dh)
            a = F.scaled_dot_product_attention(q, kv[i, 0], kv[i, 1], attn_mask=mask)
            x = layer.norms[0](x + layer.self_out(a.reshape(n, d)))
            q = layer.cross_q(x).view(n, 1, heads, dh).transpose(1, 2)
            a = F.scaled_dot_product_attention(q, cross[i, 0], cross[i, 1])
            x = layer.norms[1](x + layer.cross_out(a.transpose(1, 2).reshape(n, d)))
            x = layer.norms[2](x + layer.ffn_out(decoder.activation(layer.ffn_in(x))))
        return F.linear(x, decoder.embedding)

    return step


def ms_per_step(run, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) / STEPS * 1e3)
    return round(statistics.median(times), 3)


def import_cost() -> float:
    """Seconds `import torch._inductor` adds to `import torch`, in a fresh interpreter (median of 3)."""
    code = "import time, torch; t = time.perf_counter(); import torch._inductor.compile_fx; "
    code += "print(time.perf_counter() - t)"
    return round(statistics.median(float(subprocess.check_output([sys.executable, "-c", code])) for _ in range(3)), 2)


def measure(model, batch: int, runs: int) -> dict:
    """Every row at one batch size."""
    import torch._inductor.config as inductor

    c = model.config
    src = torch.tensor([SOURCE] * batch)
    decoder = FastDecoder(model)
    with torch.inference_mode():
        cross = decoder.start(src, capacity=STEPS).cross.clone()

    def fast(out: list | None = None):
        with torch.inference_mode():
            cache = decoder.start(src, capacity=STEPS)
            tokens = torch.full((batch,), c.bos_id)
            for _ in range(STEPS):
                logits = cache.step(tokens)
                tokens = logits.argmax(1)
                if out is not None:
                    out.append(logits)

    def fixed(step, out: list | None = None):
        kv = torch.zeros(c.n_decoder_layers, 2, batch, c.n_heads, STEPS, c.d_model // c.n_heads)
        with torch.inference_mode():
            tokens = torch.full((batch,), c.bos_id)
            for position in range(STEPS):
                logits = step(tokens, torch.tensor(position), kv, cross)
                tokens = logits.argmax(1)
                if out is not None:
                    out.append(logits)

    expected: list = []
    fast(expected)
    rows = {"eager fast step": {"ms_per_step": ms_per_step(fast, runs)}}
    eager = static_step(decoder, STEPS)
    rows["eager, fixed shapes"] = {"ms_per_step": ms_per_step(lambda: fixed(eager), runs)}
    for wrapper in ("python", "cpp"):
        inductor.cpp_wrapper = wrapper == "cpp"
        torch._dynamo.reset()
        compiled = torch.compile(static_step(decoder, STEPS), fullgraph=True, dynamic=False)
        start = time.perf_counter()
        got: list = []
        fixed(compiled, got)
        compile_s = time.perf_counter() - start
        rows[f"compiled, {wrapper} wrapper"] = {
            "ms_per_step": ms_per_step(lambda compiled=compiled: fixed(compiled), runs),
            "compile_s": round(compile_s, 1),
            "max_logit_difference": max(float((a - b).abs().max()) for a, b in zip(got, expected, strict=True)),
        }
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--batches", default="1,16,64")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "compile_step.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model = load_checkpoint(args.checkpoint, training=False).model.eval()
    c = model.config
    options = (c.norm_first, c.activation, c.positional, c.final_logits_bias, c.tie_output)
    if options != (False, "relu", "sinusoidal", False, True):
        raise SystemExit("compile_step.py writes out the Multi30k recipe's decoder only (post-norm, ReLU, tied)")
    report = {"host": describe(), "threads": args.threads, "checkpoint": str(args.checkpoint), "rows": {}}
    report["inductor_import_s"] = import_cost()
    for batch in map(int, args.batches.split(",")):
        rows = report["rows"][f"greedy b{batch}"] = measure(model, batch, args.runs)
        print(f"b{batch}: " + ", ".join(f"{name} {row['ms_per_step']} ms" for name, row in rows.items()), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
