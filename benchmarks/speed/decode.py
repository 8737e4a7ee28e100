"""Decoding speed of tnmt, the textbook loop, Hugging Face and CTranslate2, each at 1 and 2 threads.

    python -m benchmarks.speed.decode [--runs 5] [--threads 1,2] [--systems tnmt,textbook,hf,ct2] \
        [--checkpoint outputs/m30k_serve/best] [--baseline ../wt-base]

Two row sets. "random": every system runs the same architecture with random weights: d_model 256, 3+3
layers, FFN 1024, 4 heads, vocabulary 8000 (tnmt's `ModelConfig`, and a `MarianConfig` for Hugging
Face, which CTranslate2 runs after an offline conversion). Sources are the first test_2016_flickr
English sentences (Multi30k from `TNMT_DATA_DIR`, else ../shared/data/multi30k), tokenised by a
sentencepiece model (vocabulary 8000) trained here on the Multi30k en+de training text; every system
gets the same ids (CTranslate2 their pieces), in file order, padded per batch. Decoding always runs
exactly 32 steps (minimum = maximum length = 32, so EOS never ends it early); speed is generated
tokens per second. "checkpoint" (with `--checkpoint DIR`, else skipped with a note): a trained tnmt
checkpoint and its CTranslate2 export (`tnmt export ctranslate2`, float32 and int8) translate the
first test_2016_flickr sentences, sorted by length and cut into the same batches for every system,
text in and text out with the checkpoint's tokenizer, length limits (the largest of a batch for
CTranslate2, which takes one per call) and length penalty; speed is sentences per second.

A configuration's speed is the work of its searches / their wall time (encoder included; `--clock cpu`:
the process's CPU time, steadier for 1-thread before/after runs on a busy machine), median of `--runs`
runs after one warm-up. Each system runs in its own process per thread count (`--threads`,
default 1 and 2: CTranslate2 with 2 intra threads can be many times slower than with 1 on a 2-vCPU
host, so a single thread count would handicap someone); all processes take turns, run by run, so a
burst of load hits them alike. The summary compares tnmt with every peer at each one's best thread
count and per core (both at 1 thread), as the ratio of medians and the interquartile range of the
per-run ratios (runs of one round are seconds apart).

`--baseline DIR` adds `tnmt-base` and `tnmt-int8-base`: the tnmt of another checkout (DIR/src, e.g. a
git worktree of main) in their own processes, so a change is measured before/after in one run; the
summary says whether their outputs equal tnmt's.

Systems: `tnmt` (KV cache), `tnmt-int8` (`tnmt.translate.quantize.quantize_int8`: torch.ao dynamic int8
quantisation of the Linear layers), `textbook` (tnmt's model, re-running the decoder over the whole
prefix every step; greedy only, random row set only), `hf` (MarianMTModel.generate; random row set
only), `ct2` / `ct2-int8` (CTranslate2 float32 / int8). Results go to benchmarks/results/decode.json
and markdown tables on stdout.
"""

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from benchmarks.common.host import describe

CONFIGS = {  # row set -> [(name, batch size, beam size, sentences per run)]
    "random": [
        ("greedy-b1", 1, 1, 16),
        ("greedy-b16", 16, 1, 64),
        ("greedy-b64", 64, 1, 128),
        ("beam4-b16", 16, 4, 32),
    ],
    "checkpoint": [
        ("greedy-b1", 1, 1, 32),
        ("greedy-b16", 16, 1, 128),
        ("greedy-b64", 64, 1, 256),
        ("beam4-b16", 16, 4, 64),
    ],
}
UNITS = {"random": "tokens/s", "checkpoint": "sentences/s"}
STEPS = 32
SYSTEMS = ["tnmt", "tnmt-int8", "textbook", "hf", "ct2", "ct2-int8"]
RANDOM_ONLY = {"textbook", "hf"}
BASE = "-base"  # suffix of the systems run from the `--baseline` checkout
SHAPE = dict(vocab=8000, d_model=256, layers=3, ffn=1024, heads=4)
# Marian's numbering, which CTranslate2's converter expects: EOS first, pad last, decoding starts from pad.
EOS, UNK = 0, 1
PAD = BOS = SHAPE["vocab"] - 1


def data_dir() -> Path:
    """The Multi30k copy: `TNMT_DATA_DIR`, else ../shared/data/multi30k beside the repository."""
    default = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"
    return Path(os.environ.get("TNMT_DATA_DIR", default))


def read_gz(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def prepare_sources(work: Path) -> None:
    """Train the sentencepiece model and write the benchmark's source ids and pieces."""
    import sentencepiece as spm

    data = data_dir()
    texts = read_gz(data / "train.en.gz") + read_gz(data / "train.de.gz")
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts),
        model_prefix=str(work / "spm"),
        vocab_size=SHAPE["vocab"] - 1,  # pad is added last, as in Marian vocabularies
        pad_id=-1,
        bos_id=-1,
        eos_id=EOS,
        unk_id=UNK,
        num_threads=1,
        minloglevel=2,
    )
    processor = spm.SentencePieceProcessor(model_file=str(work / "spm.model"))
    sentences = read_gz(data / "test_2016_flickr.en.gz")[: max(n for *_, n in CONFIGS["random"])]
    ids = [processor.encode(s) + [EOS] for s in sentences]
    pieces = [[processor.id_to_piece(i) for i in row] for row in ids]
    (work / "sources.json").write_text(json.dumps({"ids": ids, "pieces": pieces}))


def prepare_marian(work: Path) -> None:
    """Save a random MarianMTModel with tokenizer files, and convert it for CTranslate2."""
    import ctranslate2
    import sentencepiece as spm
    import torch
    from transformers import MarianConfig, MarianMTModel, MarianTokenizer

    torch.manual_seed(0)
    config = MarianConfig(
        vocab_size=SHAPE["vocab"],
        d_model=SHAPE["d_model"],
        encoder_layers=SHAPE["layers"],
        decoder_layers=SHAPE["layers"],
        encoder_ffn_dim=SHAPE["ffn"],
        decoder_ffn_dim=SHAPE["ffn"],
        encoder_attention_heads=SHAPE["heads"],
        decoder_attention_heads=SHAPE["heads"],
        max_position_embeddings=256,
        pad_token_id=PAD,
        eos_token_id=EOS,
        decoder_start_token_id=PAD,
    )
    marian = work / "marian"
    MarianMTModel(config).eval().save_pretrained(marian)
    processor = spm.SentencePieceProcessor(model_file=str(work / "spm.model"))
    vocab = {processor.id_to_piece(i): i for i in range(processor.get_piece_size())} | {"<pad>": PAD}
    (work / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    tokenizer = MarianTokenizer(
        source_spm=str(work / "spm.model"),
        target_spm=str(work / "spm.model"),
        vocab=str(work / "vocab.json"),
        unk_token="<unk>",
        pad_token="<pad>",
        eos_token="</s>",
    )
    tokenizer.save_pretrained(marian)
    ctranslate2.converters.TransformersConverter(str(marian)).convert(str(work / "ct2"), force=True)


def tnmt_model(*, quantize: bool):
    import torch

    from tnmt import ModelConfig, Transformer

    try:
        from tnmt.translate.quantize import quantize_int8
    except ImportError:  # a --baseline checkout from before issue 63
        from tnmt.decode.quantize import quantize_int8

    torch.manual_seed(0)
    config = ModelConfig(
        src_vocab_size=SHAPE["vocab"],
        tgt_vocab_size=SHAPE["vocab"],
        d_model=SHAPE["d_model"],
        n_heads=SHAPE["heads"],
        n_encoder_layers=SHAPE["layers"],
        n_decoder_layers=SHAPE["layers"],
        d_ff=SHAPE["ffn"],
        dropout=0.0,
        pad_id=PAD,
        bos_id=BOS,
        eos_id=EOS,
        tie_output=False,
    )
    model = Transformer(config).eval()
    return quantize_int8(model) if quantize else model


def prepare_checkpoint(work: Path, checkpoint: Path) -> None:
    """Export the checkpoint for CTranslate2 (float32 and int8) and write its benchmark sentences."""
    from tnmt.interop.ctranslate2 import export_ctranslate2

    export_ctranslate2(checkpoint, work / "ct2-checkpoint")
    export_ctranslate2(checkpoint, work / "ct2-checkpoint-int8", quantization="int8")
    texts = read_gz(data_dir() / "test_2016_flickr.en.gz")[: max(n for *_, n in CONFIGS["checkpoint"])]
    (work / "texts.json").write_text(json.dumps(texts))


def random_runner(system: str, work: Path, threads: int):
    """(prepare(batch of id lists) -> input, run(input, beam) -> outputs) for one system on the random model."""
    if system.startswith("ct2"):
        import ctranslate2

        compute = "int8" if system == "ct2-int8" else "float32"
        translator = ctranslate2.Translator(
            str(work / "ct2"), device="cpu", compute_type=compute, intra_threads=threads
        )
        pieces = {
            tuple(ids): p for ids, p in zip(*json.loads((work / "sources.json").read_text()).values(), strict=True)
        }

        def run_ct2(batch, beam):
            results = translator.translate_batch(
                batch, beam_size=beam, max_decoding_length=STEPS, min_decoding_length=STEPS
            )
            return [r.hypotheses[0] for r in results]

        return (lambda rows: [pieces[tuple(r)] for r in rows]), run_ct2

    import torch

    torch.set_num_threads(threads)

    def padded(rows):
        width = max(map(len, rows))
        return torch.tensor([r + [PAD] * (width - len(r)) for r in rows])

    if system == "hf":
        from transformers import MarianMTModel

        hf = MarianMTModel.from_pretrained(work / "marian").eval()

        def run_hf(src, beam):
            with torch.inference_mode():
                out = hf.generate(
                    input_ids=src,
                    attention_mask=src != PAD,
                    num_beams=beam,
                    do_sample=False,
                    max_new_tokens=STEPS,
                    min_new_tokens=STEPS,
                )
            return out[:, 1:].tolist()  # minus the decoder-start token

        return padded, run_hf

    from tnmt.config import DecodeConfig
    from tnmt.decode import beam_search_nbest, greedy_hypotheses

    model = tnmt_model(quantize=system == "tnmt-int8")
    if system == "textbook":
        return padded, lambda src, beam: textbook_greedy(model, src)

    # what a `Translator` keeps for the frozen model it loaded: the model bound for decoding, with the copies of its
    # weights laid out for the products (translate/frozen.py; decode/frozen.py in a --baseline checkout before 63)
    try:
        from tnmt.translate.frozen import OutputProjection, transposed_linear
    except ImportError:
        from tnmt.decode.frozen import OutputProjection, transposed_linear

    projection = OutputProjection(model) if OutputProjection.usable(model) else None
    projection = {"decoder": model.incremental_decoder(project=projection, linear=transposed_linear)}

    def run_tnmt(src, beam):
        settings = DecodeConfig(beam_size=beam, max_len=STEPS, min_len=STEPS)
        if beam == 1:
            return [h.tokens for h in greedy_hypotheses(model, src, settings, **projection)]
        return [hyps[0].tokens for hyps in beam_search_nbest(model, src, settings, **projection)]

    return padded, run_tnmt


def checkpoint_runner(system: str, work: Path, threads: int, checkpoint: Path):
    """(prepare(batch of texts) -> input, run(input, beam) -> translations) for the trained checkpoint."""
    if system.startswith("ct2"):
        import torch

        from tnmt.decode.rules import banned_ids, output_limits
        from tnmt.interop.ctranslate2 import CTranslate2Translator

        export = work / ("ct2-checkpoint-int8" if system == "ct2-int8" else "ct2-checkpoint")
        ct2 = CTranslate2Translator(export, threads=threads)
        tok, settings = ct2.tokenizer, ct2.decode
        suppressed = [[ct2.target_pieces[i]] for i in banned_ids(ct2.config)] or None
        target_ids = {piece: i for i, piece in enumerate(ct2.target_pieces)}

        def run_ct2(texts, beam):
            """Text in, text out like `Translator.translate`, with one length limit per call: the batch's
            largest (CTranslate2Translator splits a batch by limit, which costs CTranslate2 speed here)."""
            pieces = [[ct2.source_pieces[i] for i in tok.encode_source(t)] for t in texts]
            lengths = torch.tensor([len(p) + 1 for p in pieces])  # EOS counted, as tnmt counts it
            limit = int(output_limits(lengths, model_max_len=ct2.config.max_len, decode=settings).max())
            results = ct2.translator.translate_batch(
                pieces,
                beam_size=beam,
                length_penalty=settings.length_penalty,
                max_decoding_length=limit,
                suppress_sequences=suppressed,
            )
            return [tok.decode_target([target_ids.get(p, tok.unk_id) for p in r.hypotheses[0]]) for r in results]

        return (lambda texts: texts), run_ct2

    from dataclasses import replace

    import torch

    from tnmt import Translator  # the package's export: its home moved in issue 63 (a --baseline may be older)

    torch.set_num_threads(threads)
    translator = Translator.from_checkpoint(checkpoint, quantize="int8" if system == "tnmt-int8" else "none")
    return (lambda texts: texts), lambda texts, beam: translator.translate(
        texts, replace(translator.decode, beam_size=beam, batch_size=len(texts))
    )


def textbook_greedy(model, src) -> list[list[int]]:
    """The loop of most tutorials: no cache, the decoder re-reads the whole prefix at every step."""
    import torch

    from tnmt.blocks.masks import padding_mask

    with torch.inference_mode():
        mask = padding_mask(src, PAD)
        memory = model.encode(src, mask)
        tgt = torch.full((src.size(0), 1), BOS)
        for _ in range(STEPS):
            logits = model.decode(tgt, memory, memory_mask=mask)[:, -1]  # (B, V)
            tgt = torch.cat([tgt, logits.argmax(-1, keepdim=True)], dim=1)  # (B, t + 1)
    return tgt[:, 1:].tolist()


def batches_of(row_set: str, work: Path, batch: int, n: int) -> list[list]:
    """The sentences of one configuration cut into batches: random ids in file order, or the
    checkpoint's texts sorted by length (longest first, as `Translator` sorts them)."""
    if row_set == "random":
        sources = json.loads((work / "sources.json").read_text())["ids"][:n]
    else:
        sources = sorted(json.loads((work / "texts.json").read_text())[:n], key=lambda t: -len(t.split()))
    return [sources[i : i + batch] for i in range(0, n, batch)]


def child(system: str, work: Path, threads: int, checkpoint: Path | None) -> None:
    """Serve timing requests: read "row set, configuration index" per line, run it once, print its seconds
    and a digest of the outputs (equal digests = identical outputs)."""
    import hashlib

    protocol, sys.stdout = sys.stdout, sys.stderr  # libraries' chatter must not corrupt the protocol
    engine = system.removesuffix(BASE)
    runners = {"random": random_runner(engine, work, threads)}
    if checkpoint is not None and engine not in RANDOM_ONLY:
        runners["checkpoint"] = checkpoint_runner(engine, work, threads, checkpoint)
    for line in sys.stdin:
        row_set, index = line.split()
        name, batch, beam, n = CONFIGS[row_set][int(index)]
        prepare, run = runners[row_set]
        batches = [prepare(b) for b in batches_of(row_set, work, batch, n)]
        start, cpu_start = time.perf_counter(), time.process_time()
        outputs = [out for b in batches for out in run(b, beam)]
        seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
        if row_set == "random" and [len(o) for o in outputs] != [STEPS] * n:
            raise RuntimeError(f"{system} {name}: expected {STEPS} tokens per sentence")
        digest = hashlib.sha1(json.dumps(outputs).encode()).hexdigest()[:12]
        reply = {"wall": seconds, "cpu": cpu_seconds, "digest": digest, "tnmt": tnmt_source()}
        print(json.dumps(reply), file=protocol, flush=True)


def tnmt_source() -> str | None:
    """The directory of the tnmt package this process imported, if any (proof of which checkout ran)."""
    module = sys.modules.get("tnmt")
    return None if module is None else str(Path(module.__file__).parent)


def measure(children: dict, row_set: str, *, runs: int, configs: list[str], clock: str) -> dict:
    """Time every configuration of one row set on every (system, threads) process, interleaving them
    run by run: other processes on the machine come and go, and a burst of load should hit all alike."""

    def ask(key: tuple[str, int], config: int) -> dict:
        process = children[key]
        process.stdin.write(f"{row_set} {config}\n")
        process.stdin.flush()
        reply = process.stdout.readline()
        if not reply:
            raise RuntimeError(f"{key[0]} at {key[1]} threads failed (see its error above)")
        return json.loads(reply)

    results = {}
    for i, (name, _, beam, n) in enumerate(CONFIGS[row_set]):
        if name not in configs:
            continue
        active = [key for key in children if not (key[0] == "textbook" and beam > 1)]
        if row_set == "checkpoint":
            active = [key for key in active if key[0].removesuffix(BASE) not in RANDOM_ONLY]
        before = os.getloadavg()[0]
        warm_up = {key: ask(key, i) for key in active}
        times = {key: [] for key in active}
        for run in range(runs):
            for key in active[run % len(active) :] + active[: run % len(active)]:
                times[key].append(ask(key, i)[clock])
        work = n * STEPS if row_set == "random" else n
        results[name] = {
            f"{s}@{t}": {
                "speed": work / statistics.median(times[(s, t)]),
                "seconds": times[(s, t)],
                "digest": warm_up[(s, t)]["digest"],
                "tnmt": warm_up[(s, t)]["tnmt"],
            }
            for s, t in active
        }
        results[name]["load_average_before_after"] = [before, os.getloadavg()[0]]
        print(f"{row_set} {name}: done (load average {before:.1f} -> {os.getloadavg()[0]:.1f})", file=sys.stderr)
    return results


def ratios(by_key: dict, mine: str, peer: str, threads: list[int]) -> dict:
    """tnmt system `mine` against `peer`: each at its best thread count, and per core (both at 1 thread).
    Each is the ratio of median speeds, with the quartiles of the per-run ratios (same round, paired)."""

    def best(system: str) -> int:
        return max(threads, key=lambda t: by_key[f"{system}@{t}"]["speed"])

    def compare(t_mine: int, t_peer: int) -> dict:
        a, b = by_key[f"{mine}@{t_mine}"], by_key[f"{peer}@{t_peer}"]
        paired = sorted(p / m for m, p in zip(a["seconds"], b["seconds"], strict=True))
        quartiles = statistics.quantiles(paired, n=4) if len(paired) > 1 else paired * 2
        return {
            "ratio": a["speed"] / b["speed"],
            "paired_q1_q3": [quartiles[0], quartiles[-1]],
            "threads": [t_mine, t_peer],
            "same_outputs": a["digest"] == b["digest"],
        }

    out = {"best": compare(best(mine), best(peer))}
    if 1 in threads:
        out["per_core"] = compare(1, 1)
    return out


def summarise(results: dict, threads: list[int]) -> dict:
    """Per configuration, every tnmt system against every other system (see `ratios`)."""
    summary = {}
    for name, by_key in results.items():
        systems = sorted({key.rsplit("@", 1)[0] for key in by_key if "@" in key}, key=order)
        summary[name] = {
            f"{mine} vs {peer}": ratios(by_key, mine, peer, threads)
            for mine in systems
            if mine in ("tnmt", "tnmt-int8")
            for peer in systems
            if peer != mine
        }
    return summary


def order(system: str) -> int:
    return SYSTEMS.index(system.removesuffix(BASE)) * 2 + system.endswith(BASE)


def tables(row_set: str, results: dict, summary: dict) -> str:
    names = list(results)
    keys = sorted(
        {k for by_key in results.values() for k in by_key if "@" in k}, key=lambda k: (order(k.rsplit("@", 1)[0]), k)
    )
    lines = [f"### {row_set}: {UNITS[row_set]}", "", "| system @ threads | " + " | ".join(names) + " |"]
    lines.append("|---" * (len(names) + 1) + "|")
    for key in keys:
        cells = [f"{results[n][key]['speed']:.0f}" if key in results[n] else "-" for n in names]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "| ratio (best threads; per core), paired IQR | " + " | ".join(names) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    pairs = list(dict.fromkeys(p for n in names for p in summary[n]))
    for pair in pairs:
        cells = []
        for n in names:
            r = summary[n].get(pair)
            if r is None:
                cells.append("-")
                continue
            text = f"{r['best']['ratio']:.2f}x [{r['best']['paired_q1_q3'][0]:.2f}-{r['best']['paired_q1_q3'][1]:.2f}]"
            if "per_core" in r:
                pc = r["per_core"]
                text += f"; {pc['ratio']:.2f}x [{pc['paired_q1_q3'][0]:.2f}-{pc['paired_q1_q3'][1]:.2f}]"
            if pair.endswith(BASE) and pair.split(" vs ")[0] == pair.split(" vs ")[1].removesuffix(BASE):
                text += " =" if r["best"]["same_outputs"] else " (outputs differ)"
            cells.append(text)
        lines.append(f"| {pair} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts, each system at each")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument(
        "--configs", default=",".join(n for n, *_ in CONFIGS["random"]), help="a comma-separated subset"
    )
    parser.add_argument("--checkpoint", type=Path, help="a trained tnmt checkpoint: the second row set")
    parser.add_argument("--baseline", type=Path, help="another tnmt checkout, run as tnmt-base / tnmt-int8-base")
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="cpu: each process's CPU time, steadier than wall time for 1-thread before/after runs on a busy machine",
    )
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "decode.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "prepare":
        prepare_marian(args.work)
        return
    if args.child:
        child(args.child, args.work, int(args.threads), args.checkpoint)
        return
    systems, threads = args.systems.split(","), [int(t) for t in args.threads.split(",")]
    if args.baseline is not None:
        systems += [s + BASE for s in systems if s in ("tnmt", "tnmt-int8")]
    row_sets = ["random"]
    if args.checkpoint is None:
        print("checkpoint row set skipped: no --checkpoint given", file=sys.stderr)
    else:
        row_sets.append("checkpoint")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        prepare_sources(work)
        if any(s in ("hf", "ct2", "ct2-int8") for s in systems):
            subprocess.run([sys.executable, "-m", __spec__.name, "--child", "prepare", "--work", str(work)], check=True)
        if args.checkpoint is not None:
            prepare_checkpoint(work, args.checkpoint)
        children = {}
        for s in systems:
            # tnmt from this checkout (whatever is installed), or from the baseline's
            checkout = args.baseline.resolve() if s.endswith(BASE) else Path(__file__).resolve().parents[2]
            env = dict(
                os.environ, PYTHONPATH=os.pathsep.join([str(checkout / "src"), os.environ.get("PYTHONPATH", "")])
            )
            for t in threads:
                command = [sys.executable, "-m", __spec__.name, "--child", s, "--work", str(work), "--threads", str(t)]
                if args.checkpoint is not None:
                    command += ["--checkpoint", str(args.checkpoint)]
                children[(s, t)] = subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
                )
        try:
            results = {
                r: measure(children, r, runs=args.runs, configs=args.configs.split(","), clock=args.clock)
                for r in row_sets
            }
        finally:
            for process in children.values():
                process.stdin.close()
                process.wait()
    summary = {r: summarise(results[r], threads) for r in row_sets}
    report = {
        "steps": STEPS,
        "threads": threads,
        "clock": args.clock,
        "shape": SHAPE,
        "checkpoint": None if args.checkpoint is None else str(args.checkpoint),
        "baseline": None if args.baseline is None else str(args.baseline),
        "configs": {
            r: [dict(zip(("name", "batch", "beam", "sentences"), c, strict=True)) for c in CONFIGS[r]] for r in row_sets
        },
        "units": {r: UNITS[r] for r in row_sets},
        "machine": describe(),
        "versions": {name: version(name) for name in ("torch", "transformers", "ctranslate2")},
        "results": results,
        "summary": summary,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("\n\n".join(tables(r, results[r], summary[r]) for r in row_sets))


if __name__ == "__main__":
    main()
