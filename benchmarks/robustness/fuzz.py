"""A bounded fuzz run of what reads user files: the corpus reader, the recipe loader, the checkpoint loader.

    python -m benchmarks.robustness.fuzz [--seconds 30] [--targets corpus recipe config.json model.safetensors ...]

Each target gets arbitrary bytes and may only answer with a `UserError` (one line, naming the file); any
other exception is a finding. Coverage-guided with atheris (`pip install atheris`; it instruments the
tnmt modules) when it is installed, else hypothesis with a large example budget. The checkpoint targets
(one per file: config.json, model.safetensors, tokenizer.json, source.spm) replace that file of a real
tiny checkpoint, load it and translate; their seeds are the real files, which the fuzzer mutates. Each
target runs in its own process for `--seconds`. Writes benchmarks/results/fuzz.json.
"""

import argparse
import contextlib
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common.host import describe

RESULTS = Path(__file__).resolve().parents[1] / "results" / "fuzz.json"
CHECKPOINT_FILES = ["config.json", "model.safetensors", "tokenizer.json", "source.spm"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="per target")
    parser.add_argument("--targets", nargs="+", default=["corpus", "recipe", *CHECKPOINT_FILES], choices=TARGETS)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # run one target in this process
    args = parser.parse_args()
    if args.child:
        run_child(args.child, args.seconds)
        return
    results = {}
    for target in args.targets:
        child = [sys.executable, "-m", __spec__.name, "--child", target, "--seconds", str(args.seconds)]
        done = subprocess.run(child, capture_output=True, text=True, timeout=args.seconds * 3 + 120)
        results[target] = summarise(done.stdout + done.stderr, done.returncode)
        print(f"{target}: {results[target]['examples']} examples, {len(results[target]['findings'])} findings")
    engine = "atheris" if _has_atheris() else "hypothesis"
    seconds = f" --seconds {args.seconds:g}"
    command = f"python -m benchmarks.robustness.fuzz{seconds} --targets {' '.join(args.targets)}"
    report = {"command": command, "machine": describe(), "engine": engine, "targets": results}
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")


def summarise(output: str, returncode: int) -> dict:
    """Examples run and findings, from the child's report line (or libFuzzer's own lines after a crash)."""
    report = re.search(r"^FUZZ-REPORT (.*)$", output, flags=re.M)
    if report:
        return json.loads(report[1])
    runs = [int(n) for n in re.findall(r"^#(\d+)\s", output, flags=re.M)]
    error = re.findall(r"^(?:=== Uncaught Python exception: ===\n)?(\w+(?:Error|Exception)\b.*)$", output, flags=re.M)
    crashed = [f"exit status {returncode}"] if returncode else []
    return {"examples": max(runs, default=0), "findings": error[-1:] or crashed}


def run_child(target: str, seconds: float) -> None:
    work = Path(tempfile.mkdtemp(prefix=f"tnmt-fuzz-{target}-"))
    try:
        if _has_atheris():
            import atheris

            with atheris.instrument_imports(include=["tnmt"]):
                check, seeds = TARGETS[target](work)
            _fuzz_atheris(check, seeds, seconds, work)
        else:
            check, seeds = TARGETS[target](work)
            _fuzz_hypothesis(check, seeds, seconds)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _fuzz_atheris(check: Callable[[bytes], None], seeds: list[bytes], seconds: float, work: Path) -> None:
    import atheris

    corpus = work / "seeds"
    corpus.mkdir()
    for i, seed in enumerate(seeds):
        (corpus / f"seed{i}").write_bytes(seed)
    longest = max(len(seed) for seed in seeds)
    argv = [sys.argv[0], f"-max_total_time={int(seconds)}", "-rss_limit_mb=4096", f"-max_len={2 * longest}"]
    crashes = Path(tempfile.gettempdir()) / "tnmt-fuzz-crashes"  # kept: the inputs that found something
    crashes.mkdir(exist_ok=True)
    argv += ["-len_control=0", f"-artifact_prefix={crashes}/", str(corpus)]
    atheris.Setup(argv, check)
    atheris.Fuzz()  # libFuzzer prints "Done N runs" and exits; an uncaught exception is a crash report


def _fuzz_hypothesis(check: Callable[[bytes], None], seeds: list[bytes], seconds: float) -> None:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import strategies as st

    class TimeUp(Exception):
        """Raised past the deadline: hypothesis would otherwise draw its 10^9 examples, each returning at once."""

    count, findings, deadline = [0], [], time.monotonic() + seconds
    mutated = st.builds(
        lambda seed, cut, junk: seed[:cut] + junk, st.sampled_from(seeds), st.integers(0, 10**6), st.binary()
    )

    @settings(
        max_examples=10**9,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],  # no shrinking: a finding is recorded below, never raised
    )
    @given(st.one_of(st.binary(), mutated))
    def run(data: bytes) -> None:
        if time.monotonic() > deadline:
            raise TimeUp
        count[0] += 1
        try:
            check(data)
        except Exception as e:  # noqa: BLE001 - a finding is any exception that is not a UserError
            findings.append(f"{type(e).__name__}: {e}"[:300])

    with contextlib.suppress(TimeUp):
        run()
    print("FUZZ-REPORT " + json.dumps({"examples": count[0], "findings": sorted(set(findings))}))


def _has_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


# --- targets: each returns (check(bytes), seed inputs); check raises on anything but a UserError ---


def corpus_target(work: Path) -> tuple[Callable[[bytes], None], list[bytes]]:
    import gzip

    from tnmt.data.corpus import read_lines, read_tsv
    from tnmt.errors import UserError

    plain, packed = work / "corpus.txt", work / "corpus.txt.gz"

    def check(data: bytes) -> None:
        plain.write_bytes(data)
        packed.write_bytes(data)
        for read in (read_lines, read_tsv):
            for path in (plain, packed):
                try:
                    lines = read(path)
                except UserError as e:
                    assert "\n" not in str(e), str(e)
                    continue
                if read is read_lines and path is plain:  # one line per "\n", nothing else splits
                    assert len(lines) == data.count(b"\n") + (not data.endswith(b"\n")), lines

    text = "A dog runs.\tEin Hund läuft.\r\nTwo\tZwei\n\n\u2028x\tx\n".encode()
    return check, [text, gzip.compress(text), b"\xff\xfe", gzip.compress(text)[:20]]


def recipe_target(work: Path) -> tuple[Callable[[bytes], None], list[bytes]]:
    from tnmt.errors import UserError
    from tnmt.recipe import load_recipe

    path = work / "r.toml"

    def check(data: bytes) -> None:
        path.write_bytes(data)
        try:
            load_recipe(str(path))
        except UserError as e:
            assert "\n" not in str(e), str(e)

    shipped = Path(__file__).resolve().parents[2] / "src" / "tnmt" / "configs" / "multi30k_en_de.toml"
    seeds = [shipped.read_bytes(), b"[train]\nmax_steps = 10\n", b'[model]\npreset = "base"\nd_model = 8\n']
    return check, seeds


def checkpoint_target(work: Path, name: str) -> tuple[Callable[[bytes], None], list[bytes]]:
    import torch

    from tnmt.checkpoint import load_checkpoint, save_checkpoint
    from tnmt.config import ModelConfig
    from tnmt.data.tokenizer import Tokenizer
    from tnmt.errors import UserError
    from tnmt.model import Transformer
    from tnmt.translate.translator import Translator

    words = ["one", "two", "three", "four", "uno", "due", "tre", "quattro"] * 20
    tokenizer = Tokenizer.train(words, vocab_size=274)
    torch.manual_seed(0)
    size = tokenizer.vocab_size
    config = ModelConfig(
        src_vocab_size=size, tgt_vocab_size=size, d_model=8, n_heads=2, n_encoder_layers=1, n_decoder_layers=1, d_ff=16
    )
    good = save_checkpoint(work / "good", Transformer(config), tokenizer, directions=[("en", "it")])
    trial = work / "trial"

    shutil.copytree(good, trial)

    def check(data: bytes) -> None:
        (trial / name).write_bytes(data)
        try:
            checkpoint = load_checkpoint(trial)
            Translator(checkpoint.model, checkpoint.tokenizer, checkpoint.decode).translate(["one two", ""])
        except UserError as e:
            assert "\n" not in str(e), str(e)

    return check, [(good / name).read_bytes()]


TARGETS: dict[str, Callable[[Path], tuple[Callable[[bytes], None], list[bytes]]]] = {
    "corpus": corpus_target,
    "recipe": recipe_target,
    **{name: lambda work, name=name: checkpoint_target(work, name) for name in CHECKPOINT_FILES},
}

if __name__ == "__main__":
    main()
