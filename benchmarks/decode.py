"""Decoding speed: generated tokens per second for tnmt, the textbook loop, Hugging Face and CTranslate2.

    python benchmarks/decode.py [--runs 5] [--systems tnmt,textbook,hf,ct2]

Every system runs the same architecture with random weights: d_model 256, 3+3 layers, FFN 1024, 4 heads,
vocabulary 8000 (tnmt's `ModelConfig`, and a `MarianConfig` for Hugging Face, which CTranslate2 runs
after an offline conversion). Sources are the first test_2016_flickr English sentences (Multi30k from
`TNMT_DATA_DIR`, else ../shared/data/multi30k), tokenised by a sentencepiece model (vocabulary 8000)
trained here on the Multi30k en+de training text; every system gets the same ids (CTranslate2 their
pieces), in file order, padded per batch. Decoding always runs exactly 32 steps (minimum = maximum
length = 32, so EOS never ends it early) and a configuration's speed is sentences x 32 / wall time of
its searches (encoder included, tokenisation excluded), median of `--runs` runs after one warm-up.
Each system runs in its own process with 2 threads (`--threads`); the processes take turns, run by run.

Systems: `tnmt` (KV cache), `tnmt-int8` (`tnmt.decode.quantize.quantize_int8`: torch.ao dynamic int8
quantisation of the Linear layers), `textbook` (tnmt's model, re-running the decoder over the whole prefix every
step; greedy only), `hf` (MarianMTModel.generate), `ct2` / `ct2-int8` (CTranslate2 float32 / int8).
Results go to benchmarks/results/decode.json and a markdown table on stdout.
"""

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

CONFIGS = [  # name, batch size, beam size, sentences per run
    ("greedy-b1", 1, 1, 16),
    ("greedy-b16", 16, 1, 64),
    ("greedy-b64", 64, 1, 128),
    ("beam4-b16", 16, 4, 32),
]
STEPS = 32
SYSTEMS = ["tnmt", "tnmt-int8", "textbook", "hf", "ct2", "ct2-int8"]
SHAPE = dict(vocab=8000, d_model=256, layers=3, ffn=1024, heads=4)
# Marian's numbering, which CTranslate2's converter expects: EOS first, pad last, decoding starts from pad.
EOS, UNK = 0, 1
PAD = BOS = SHAPE["vocab"] - 1


def data_dir() -> Path:
    """The Multi30k copy: `TNMT_DATA_DIR`, else ../shared/data/multi30k beside the repository."""
    default = Path(__file__).resolve().parents[2] / "shared" / "data" / "multi30k"
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
    sentences = read_gz(data / "test_2016_flickr.en.gz")[: max(n for *_, n in CONFIGS)]
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


def system_runner(system: str, work: Path, threads: int):
    """(prepare(batch of id lists) -> input, run(input, beam) -> output lengths) for one system."""
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
            return [len(r.hypotheses[0]) for r in results]

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
            return [out.size(1) - 1] * out.size(0)  # minus the decoder-start token

        return padded, run_hf

    from tnmt.config import DecodeConfig
    from tnmt.decode import beam_search, greedy_search

    model = tnmt_model(quantize=system == "tnmt-int8")
    if system == "textbook":
        return padded, lambda src, beam: textbook_greedy(model, src)

    def run_tnmt(src, beam):
        if beam == 1:
            out = greedy_search(model, src, DecodeConfig(max_len=STEPS, min_len=STEPS))
        else:
            out = beam_search(model, src, DecodeConfig(beam_size=beam, max_len=STEPS, min_len=STEPS))
        return [len(ids) for ids in out]

    return padded, run_tnmt


def textbook_greedy(model, src) -> list[int]:
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
    return [tgt.size(1) - 1] * tgt.size(0)


def child(system: str, work: Path, threads: int) -> None:
    """Serve timing requests: read a configuration index per line, run it once, print its seconds."""
    protocol, sys.stdout = sys.stdout, sys.stderr  # libraries' chatter must not corrupt the protocol
    sources = json.loads((work / "sources.json").read_text())["ids"]
    prepare, run = system_runner(system, work, threads)
    for line in sys.stdin:
        name, batch, beam, n = CONFIGS[int(line)]
        batches = [prepare(sources[i : i + batch]) for i in range(0, n, batch)]
        start = time.perf_counter()
        lengths = [length for b in batches for length in run(b, beam)]
        seconds = time.perf_counter() - start
        if lengths != [STEPS] * n:
            raise RuntimeError(f"{system} {name}: expected {STEPS} tokens per sentence, got {set(lengths)}")
        print(json.dumps({"seconds": seconds}), file=protocol, flush=True)


def measure(systems: list[str], work: Path, *, runs: int, configs: list[str], threads: int) -> tuple[dict, dict]:
    """Time every configuration on every system, interleaving the systems run by run.

    Other processes on the machine come and go; interleaving makes a burst of load hit all systems
    alike instead of whichever happened to run then.
    """
    children = {
        s: subprocess.Popen(
            [sys.executable, __file__, "--child", s, "--work", str(work), "--threads", str(threads)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for s in systems
    }

    def ask(system: str, config: int) -> float:
        child = children[system]
        child.stdin.write(f"{config}\n")
        child.stdin.flush()
        reply = child.stdout.readline()
        if not reply:
            raise RuntimeError(f"{system} failed (see its error above)")
        return json.loads(reply)["seconds"]

    results, load = {s: {} for s in systems}, {}
    try:
        for i, (name, _, beam, n) in enumerate(CONFIGS):
            if name not in configs:
                continue
            active = [s for s in systems if not (s == "textbook" and beam > 1)]
            before = os.getloadavg()[0]
            for s in active:
                ask(s, i)  # warm-up
            times = {s: [] for s in active}
            for run in range(runs):
                for s in active[run % len(active) :] + active[: run % len(active)]:
                    times[s].append(ask(s, i))
            for s in active:
                results[s][name] = {"tokens_per_s": n * STEPS / statistics.median(times[s]), "seconds": times[s]}
            load[name] = [before, os.getloadavg()[0]]
            print(f"{name}: done (load average {before:.1f} -> {load[name][1]:.1f})", file=sys.stderr)
    finally:
        for c in children.values():
            c.stdin.close()
            c.wait()
    return results, load


def table(results: dict) -> str:
    names = [name for name, *_ in CONFIGS if any(name in by_config for by_config in results.values())]
    lines = ["| system | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for system, by_config in results.items():
        cells = []
        for name in names:
            if name not in by_config:
                cells.append("-")
                continue
            speed = by_config[name]["tokens_per_s"]
            hf = results.get("hf", {}).get(name, {}).get("tokens_per_s")
            cells.append(f"{speed:.0f}" + (f" ({speed / hf:.2f}x HF)" if hf and system != "hf" else ""))
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2, help="per system (1 is steadier on a busy machine)")
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--configs", default=",".join(name for name, *_ in CONFIGS), help="a comma-separated subset")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "decode.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "prepare":
        prepare_marian(args.work)
        return
    if args.child:
        child(args.child, args.work, args.threads)
        return
    systems = args.systems.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        prepare_sources(work)
        if any(s in ("hf", "ct2", "ct2-int8") for s in systems):
            subprocess.run([sys.executable, __file__, "--child", "prepare", "--work", str(work)], check=True)
        results, load = measure(systems, work, runs=args.runs, configs=args.configs.split(","), threads=args.threads)
    report = {
        "steps": STEPS,
        "threads": args.threads,
        "shape": SHAPE,
        "configs": [dict(zip(("name", "batch", "beam", "sentences"), c, strict=True)) for c in CONFIGS],
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        "versions": {name: version(name) for name in ("torch", "transformers", "ctranslate2")},
        "load_average_before_after_config": load,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(results))


if __name__ == "__main__":
    main()
