"""The CLI campaign (issue 44): every option of every `tnmt` subcommand, given what a new user might type.

    python -m benchmarks.robustness.cli_campaign [--per-option N] [--results PATH]

Cases are generated from the parsers themselves (`tnmt.cli.build_parser()`), so an option is tried the day it
is added: a typed option gets negative, zero, huge, NaN/inf, wrong-type and empty values; a path option a
missing path, one under a missing directory, an empty directory, a file, a read-only place, a user's
non-empty directory and ""; a free-text option "", blanks and 10,000 characters; a choice an unknown word.
Recipes too: every key of every table (the dataclasses of tnmt/config.py) with boundary values (0, 1,
-1, the largest TOML integer, NaN, inf, wrong types), and `extends` chains (missing, a directory, cycles).

Each CLI case runs `tnmt.cli.main` in-process, in a fresh directory, on a tiny checkpoint and corpus; a
recipe case runs `tnmt.recipe.load_recipe`. What may come back: one line on stderr and exit status 2; exit
status 1 with one line naming the path or address (the environment failed); or a behaviour on the
`ACCEPTED` list below, which says why it is right. Anything else is a finding: a traceback, more than
one line, another status, a value taken without a word that is not on the list.

Nothing long runs: training (`tnmt.train.loop.train`, and the offline quickstart's data) stops with
`JobStarted` where it would begin, counted as taken; `tnmt serve` starts its app in-process, asks
/ready and stops, instead of listening until SIGTERM; `tnmt data` reads an empty local copy, never the
network. The process may allocate at most 8 GiB (`--max-gib`), so a value that allocates without bound
is a finding, not a lost machine. tests/test_cli_campaign.py runs a bounded, deterministic sample.

Writes benchmarks/results/cli_campaign.json: cases generated and run, passed, and every finding.
"""

import argparse
import contextlib
import io
import json
import os
import random
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Literal, get_origin
from unittest import mock

from benchmarks.common.host import describe
from tnmt.cli import _path, _path_text, build_parser
from tnmt.cli import main as tnmt_main
from tnmt.config import DecodeConfig, ServeConfig
from tnmt.errors import UserError
from tnmt.recipe import SECTIONS, load_recipe

RESULTS = Path(__file__).resolve().parents[1] / "results" / "cli_campaign.json"

INT_VALUES = {"negative": "-1", "zero": "0", "huge": str(10**30), "fraction": "1.5", "word": "many", "empty": ""}
FLOAT_VALUES = {
    **{"negative": "-1", "zero": "0", "huge": "1e30", "overflow": "1e400"},
    **{"nan": "nan", "inf": "inf", "-inf": "-inf", "word": "many", "empty": ""},
}
TEXT_VALUES = {"empty": "", "blank": "   ", "long": "word " * 2000, "not a name": "no such host!"}
CHOICE_VALUES = {"unknown choice": "bogus", "empty": ""}
PATH_VALUES = {
    "missing": "{dir}/missing",
    "missing parent": "{dir}/nowhere/missing",
    "empty directory": "{dir}/empty",
    "file": "{dir}/notes.txt",
    "read-only place": "{readonly}/x",
    "user's directory": "{dir}/mine",
    "empty": "",
}
STDIN = b"one\ntwo\n"

# Recipe values, as TOML. "one" for a float is 1.0, the top of a rate's range.
RECIPE_VALUES = {
    int: {"zero": "0", "one": "1", "negative": "-1", "huge": str(2**63 - 1), "wrong type": '"3"'},
    float: {"zero": "0.0", "one": "1.0", "negative": "-1.0", "huge": "1e300", "nan": "nan", "inf": "inf"},
    str: {"empty": '""', "blank": '" "'},
    bool: {"wrong type": "1"},
    tuple: {"empty": "[]", "one": "[1.0, 1.0]", "nan": "[nan, 0.5]"},
    Literal: {"unknown choice": '"bogus"', "empty": '""'},
}
EXTENDS = {  # recipe files (name: content) whose r.toml extends others
    "missing": {"r.toml": 'extends = "nope.toml"\n'},
    "directory": {"r.toml": 'extends = "sub"\n', "sub/x.toml": ""},
    "not a string": {"r.toml": "extends = 3\n"},
    "empty string": {"r.toml": 'extends = ""\n'},
    "itself": {"r.toml": 'extends = "r.toml"\n'},
    "cycle of three": {
        "r.toml": 'extends = "a.toml"\n',
        "a.toml": 'extends = "b.toml"\n',
        "b.toml": 'extends = "r.toml"\n',
    },
    "chain of 30": {
        "r.toml": 'extends = "c1.toml"\n',
        **{f"c{i}.toml": f'extends = "c{i + 1}.toml"\n' for i in range(1, 30)},
        "c30.toml": "[train]\nmax_steps = 1\n",
    },
    "from a subdirectory": {"r.toml": 'extends = "sub/child.toml"\n', "sub/child.toml": 'extends = "../base.toml"\n'},
    "broken base": {"r.toml": 'extends = "base.toml"\n', "base.toml": "[train\n"},
    "base with a bad key": {"r.toml": 'extends = "base.toml"\n', "base.toml": "[train]\nmax_step = 1\n"},
}

DECODE_FIELDS = {f.name for f in fields(DecodeConfig)}
DECODING_COMMANDS = ("translate", "evaluate", "attention", "explain", "inspect")  # cli._decode_options' commands
SERVE_FIELDS = {f.name for f in fields(ServeConfig)}
IN_RANGE = ("zero", "one")  # a recipe key's boundaries: refused, or inside the range its comment documents

# What is taken without an error, and why that is right: (field, kind of value) -> reason. A field is a
# recipe key (`decode.max_len`), which is also the flag of the same name (`--max-len`) of translate,
# evaluate, attention and explain; `serve.X` is a flag of tnmt serve; `COMMAND.dest` any other option.
CAPPED = "capped by the model's max_len"
ANY_SIZE = "a limit on what a request may ask for: larger only allows more, it allocates nothing"
WRITES_INTO = "writes into a directory beside what is there (tests/test_cli.py WRITERS)"
NEW_OUTPUT = "a new path: the output is created there (with its parents)"
EMPTY_DIRECTORY = "an empty directory holds nothing of the user's: the output takes its place"
READ_WHEN_USED = "a path, read when the run starts: a missing one is a one-line error then"
NO_LIMIT = "no limit in practice: another budget, or the data, ends it first"
AGGRESSIVE = "a finite setting that trains badly, not a malformed one (metrics.jsonl shows it)"
ACCEPTED: dict[tuple[str, str], str] = {
    # decoding: flags and [decode] keys
    ("decode.max_len", "zero"): "0 = no absolute cap (the model's max_len still caps every output)",
    **{(f"decode.{name}", "huge"): CAPPED for name in ("max_len", "max_len_a", "max_len_b")},
    ("decode.max_len_a", "zero"): "an output cap that ignores the source length",
    ("decode.max_len_b", "zero"): "no slack beyond a * source length",
    ("decode.min_len", "zero"): "EOS allowed at once",
    ("decode.min_len", "huge"): "EOS is never allowed: every output runs to its cap",
    ("decode.batch_size", "huge"): "at most the sentences there are",
    ("decode.beam_size", "huge"): "checked against the model's target vocabulary when decoding (one line)",
    ("decode.length_penalty", "zero"): "alpha 0: plain log-probabilities",
    ("decode.alignment_head", "zero"): "0 = the mean of the layer's heads",
    ("decode.alignment_layer", "negative"): "counted from the top: -1 = the last layer, clamped to the depth",
    ("decode.alignment_head", "huge"): "checked against the model's heads when an alignment is read (one line)",
    ("decode.alignment_layer", "huge"): "clamped to the decoder's depth: the last layer",
    **{(f"decode.length_ratio_{side}", "zero"): "0 = no bound on that side" for side in ("min", "max")},
    ("decode.length_ratio_min", "huge"): "a lower bound no output meets: every translation is flagged, none refused",
    ("decode.length_ratio_max", "huge"): "an upper bound every output meets: no translation is flagged for length",
    ("decode.length_penalty", "negative"): "alpha < 0 favours short outputs: a choice, not an error",
    # tnmt serve
    **{(f"serve.{name}", "huge"): ANY_SIZE for name in ("max_chars", "max_texts", "max_body_bytes", "max_queue")},
    **{(f"serve.{name}", "huge"): ANY_SIZE for name in ("max_beam_size", "max_n_best", "max_trace_chars")},
    **{(f"serve.{name}", "huge"): ANY_SIZE for name in ("max_trace_beam", "max_top_k", "max_glossary")},
    ("serve.max_batch_tokens", "huge"): "a request is never split; a batch holds at most what is queued",
    ("serve.port", "zero"): "0 = a free port, which the log line names",
    ("serve.threads", "zero"): "0 = PyTorch's default (OMP_NUM_THREADS, else one per physical core)",
    ("serve.mmap_threshold_mb", "zero"): "0 = glibc's own threshold",
    ("serve.max_wait_ms", "zero"): "a batch does not wait for company",
    ("serve.timeout_per_segment_s", "zero"): "a document's deadline is timeout_s whatever its size",
    # paths
    **{
        (f"{command}.out", kind): NEW_OUTPUT
        for command in ("attention", "average", "export", "quickstart")
        for kind in ("missing", "missing parent")
    },
    **{(f"{command}.out", "empty directory"): EMPTY_DIRECTORY for command in ("average", "export")},
    **{
        (f"{command}.out", kind): WRITES_INTO
        for command in ("attention", "quickstart")
        for kind in ("empty directory", "user's directory")
    },
    ("translate.output", "missing"): NEW_OUTPUT,
    ("translate.output", "file"): "-o replaces a file, as a shell redirection does (atomically)",
    ("evaluate.hyp_out", "missing"): NEW_OUTPUT,
    ("evaluate.hyp_out", "file"): "--hyp-out replaces a file, as a shell redirection does (atomically)",
    ("translate.input", "file"): "a text file: translated line by line",
    ("translate.file", "file"): "a text file (.txt): translated whole, in its own format, to stdout",
    ("translate.do_not_translate", "file"): "a text file: one term to keep per line",
    # other values
    **{
        (f"{command}.sentence", "not a name"): "any text is a sentence"
        for command in ("attention", "explain", "inspect", "replay")
    },
    ("replay.reference", "not a name"): "any text is a reference to score",
    **{
        (f"{command}.sentence", "long"): "translated from its first max_len - 1 tokens, with a warning"
        for command in ("attention", "explain", "inspect")
    },
    **{
        ("inspect.translation", kind): "no words: the decoder is fed BOS alone and predicts what comes first"
        for kind in ("empty", "blank")
    },
    ("inspect.translation", "not a name"): "any text is a translation to feed",
    ("inspect.translation", "long"): "fed from its first max_len - 1 tokens, with a warning (BOS takes one)",
    ("explain.top_k", "huge"): "at most the vocabulary's tokens are shown",
    **{
        (f"{command}.threads", "zero"): "0 = the engine's default (OMP_NUM_THREADS, else its own)"
        for command in DECODING_COMMANDS
    },
    ("quickstart.steps", "zero"): "0 = the task's own budget",
    ("quickstart.steps", "huge"): "a cap: the task's own budget ends it first",
    ("quickstart.minutes", "huge"): "a budget (used on Multi30k): the offline task ends on its steps",
    # recipes: [data] (run through tnmt prepare)
    **{(f"data.{name}", "blank"): READ_WHEN_USED for name in ("train_src", "train_tgt", "valid_src", "valid_tgt")},
    ("data.prepared_dir", "empty"): "documented: <train.out_dir>/prepared",
    ("data.languages", "empty"): "[] = one language pair, src_lang -> tgt_lang (the default)",
    ("data.directions", "empty"): "[] = every ordered pair of `languages`; unused without languages",
    ("data.direction_temperature", "huge"): "finite: every direction an equal share (pairs^(1/T) -> 1)",
    ("data.prepared_dir", "blank"): "a directory named ' ': odd, and the user's choice",
    ("data.max_tokens_per_sentence", "huge"): "the model's max_len still limits a kept side (Recipe.longest_side)",
    **{
        (f"data.{name}", "huge"): "a cap over the corpus: all of it"
        for name in ("max_train_pairs", "max_valid_pairs", "tokenizer_sample")
    },
    ("data.prepare_workers", "huge"): "at most one process per chunk of 10,000 pairs is started",
    ("data.subword_alpha", "huge"): "finite: sampling all but picks the best segmentation",
    # recipes: [model]: a shape is built as asked (one too large for the machine fails when allocated)
    **{
        (f"model.{name}", "huge"): "a shape the user asked for"
        for name in ("n_encoder_layers", "n_decoder_layers", "d_ff", "max_len")
    },
    ("model.layer_norm_eps", "huge"): AGGRESSIVE,
    # recipes: [train]
    ("train.init_from", "empty"): "documented: no checkpoint to start from",
    ("train.init_from", "blank"): READ_WHEN_USED,
    **{("train.seed", kind): "any integer seeds (batches hash it with SHA-256)" for kind in ("negative", "huge")},
    **{(f"train.{name}", "huge"): NO_LIMIT for name in ("max_steps", "max_epochs", "max_minutes", "distill_at_step")},
    **{(f"train.{name}", "huge"): NO_LIMIT for name in ("eval_every", "patience", "keep_checkpoints", "log_every")},
    ("train.max_tokens", "huge"): "a batch holds at most the corpus",
    ("train.accum_steps", "huge"): "an update every N batches: none before a short run ends",
    ("train.eval_beam_size", "huge"): "checked against the model's target vocabulary at the first validation",
    ("train.snapshots_from", "huge"): "the first snapshot after the run ends: none taken, as with 0",
    **{(f"train.{name}", "huge"): AGGRESSIVE for name in ("lr_factor", "warmup_steps", "adam_eps", "rdrop_alpha")},
    ("train.guided_alignment", "huge"): AGGRESSIVE,
    **{(f"train.{name}", "huge"): AGGRESSIVE for name in ("clip_norm", "weight_decay")},
    ("extends", "chain of 30"): "a chain of any length (cycles are refused)",
}


class JobStarted(Exception):
    """Raised where a long job (training, the quickstart's data) would begin: every check was passed."""


@dataclass(frozen=True)
class Case:
    """One command line (or recipe) with one value of one option replaced by something a user might type."""

    command: str  # a subcommand ("prepare" for a [data] key), or "recipe"
    field: str  # what is tried: `decode.beam_size`, `serve.port`, `translate.output`, `train.seed`, `extends` ...
    kind: str  # what the value is: "negative", "nan", "missing", "user's directory" ...
    value: str  # as typed ({dir}: the case's own directory)
    argv: tuple[str, ...]  # the command line (a recipe case: its overrides), with {ckpt}-style placeholders

    @property
    def id(self) -> str:
        return f"{self.command}:{self.field}:{self.kind}"


@dataclass(frozen=True)
class Outcome:
    status: int | str  # the exit status; "job" if it got as far as a long job; "traceback"
    stderr: str
    value: str = ""  # the value as run (placeholders filled): an exit-1 line must name it


@dataclass(frozen=True)
class Fixtures:
    """The valid inputs every case starts from: a checkpoint, a recipe that trains one step, a corpus."""

    checkpoint: Path
    recipe: Path
    src: Path
    ref: Path
    empty: Path  # an empty directory: `tnmt data --from`, `tnmt import`'s source
    readonly: Path  # a place nobody may write (root ignores permissions: then /sys)
    run: Path  # a training run that kept the checkpoint (`tnmt replay --run`)

    def fill(self, token: str, directory: Path) -> str:
        names = {"ckpt": self.checkpoint, "recipe": self.recipe, "src": self.src, "ref": self.ref, "run": self.run}
        return token.format(**names, empty=self.empty, readonly=self.readonly, dir=directory)


# A valid command line of each subcommand: option dest -> its tokens. A case replaces one of them.
BASE: dict[str, dict[str, list[str]]] = {
    "train": {"config": ["{recipe}"], "no_progress": ["--no-progress"]},
    "prepare": {"config": ["{recipe}"]},
    "data": {"dataset": ["multi30k"], "out": ["--out", "data"], "source": ["--from", "{empty}"]},
    "quickstart": {"offline": ["--offline"], "steps": ["--steps", "1"], "out": ["--out", "qs"]},
    "average": {"checkpoints": ["{ckpt}"], "out": ["--out", "averaged"]},
    "shortlist": {"checkpoint": ["{ckpt}"], "prepared": ["--prepared", "{empty}"]},
    "translate": {"checkpoint": ["--checkpoint", "{ckpt}"]},
    "evaluate": {"checkpoint": ["--checkpoint", "{ckpt}"], "src": ["--src", "{src}"], "ref": ["--ref", "{ref}"]},
    "attention": {"checkpoint": ["--checkpoint", "{ckpt}"], "sentence": ["one"]},
    "explain": {"checkpoint": ["--checkpoint", "{ckpt}"], "sentence": ["one"]},
    "inspect": {"checkpoint": ["--checkpoint", "{ckpt}"], "sentence": ["one"]},
    "replay": {"run_dir": ["--run", "{run}"], "sentence": ["one"]},
    "serve": {
        "checkpoint": ["--checkpoint", "{ckpt}"],
        "port": ["--port", "0"],
        "ready_timeout_s": ["--ready-timeout-s", "5"],
    },
    "import": {
        "format": ["marian"],
        "directory": ["{empty}"],
        "out": ["--out", "imported"],
        "source": ["--source", "en"],
        "target": ["--target", "de"],
    },
    "export": {"format": ["ctranslate2"], "checkpoint": ["{ckpt}"], "out": ["--out", "exported"]},
}


def cli_cases() -> list[Case]:
    """Every subcommand x every option taking a value x every kind of value for its type."""
    (subparsers,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    cases = []
    for command, parser in subparsers.choices.items():
        for action in parser._actions:
            if action.nargs == 0:  # --help and on/off flags take no value
                continue
            for kind, value in _values(action).items():
                argv = _with_value(BASE[command], action, value)
                cases.append(Case(command, _field(command, action.dest), kind, value, (command, *argv)))
    return cases


def _values(action: argparse.Action) -> dict[str, str]:
    if action.choices is not None:
        return CHOICE_VALUES
    if action.type in (_path, _path_text):
        return PATH_VALUES
    return {int: INT_VALUES, float: FLOAT_VALUES}.get(action.type, TEXT_VALUES)


def _with_value(base: dict[str, list[str]], action: argparse.Action, value: str) -> list[str]:
    tokens = dict(base)
    tokens[action.dest] = [action.option_strings[-1], value] if action.option_strings else [value]
    return [token for option in tokens.values() for token in option]


def _field(command: str, dest: str) -> str:
    if command == "serve" and dest in SERVE_FIELDS:
        return f"serve.{dest}"
    if command != "serve" and dest in DECODE_FIELDS:
        return f"decode.{dest}"
    return f"{command}.{dest}"


def recipe_cases() -> list[Case]:
    """Every key of every recipe table with boundary values, and `extends` chains. [data] keys run `tnmt prepare`
    (a tokenizer and the tiny corpus encoded: the values are used, in a second); the others are loaded."""
    cases = []
    for section, cls in SECTIONS.items():
        for f in fields(cls):
            values = RECIPE_VALUES[get_origin(f.type) or f.type]
            for kind, value in values.items():
                override = f"--{section}.{f.name}={value}"
                if section == "data":
                    cases.append(Case("prepare", f"data.{f.name}", kind, value, ("prepare", "{recipe}", override)))
                else:
                    cases.append(Case("recipe", f"{section}.{f.name}", kind, value, (override,)))
    cases += [Case("recipe", "extends", kind, json.dumps(files), ()) for kind, files in EXTENDS.items()]
    return cases


def all_cases() -> list[Case]:
    return cli_cases() + recipe_cases()


def sample(cases: list[Case], per_field: int, *, seed: int = 0) -> list[Case]:
    """`per_field` cases of every option and recipe key, drawn with a fixed seed: the same sample every run."""
    rng = random.Random(seed)
    groups: dict[tuple[str, str], list[Case]] = {}
    for case in cases:
        groups.setdefault((case.command, case.field), []).append(case)
    return [case for group in groups.values() for case in rng.sample(group, min(per_field, len(group)))]


def run_case(case: Case, fixtures: Fixtures, directory: Path) -> Outcome:
    """Run `case` in `directory` (created, with the files the path values name)."""
    _scratch(directory)
    if case.command == "recipe":
        return _load_recipe(case, fixtures, directory)
    argv = [fixtures.fill(token, directory) for token in case.argv]
    with _in_process(directory) as stderr, _long_jobs_stopped():
        try:
            status: int | str = tnmt_main(argv)
        except SystemExit as e:  # argparse
            status = e.code
        except JobStarted:
            status = "job"
        except Exception:  # noqa: BLE001 (a traceback is what the campaign looks for)
            status = "traceback"
            sys.stderr.write(traceback.format_exc())
    return Outcome(status, stderr.getvalue(), fixtures.fill(case.value, directory))


def _scratch(directory: Path) -> None:
    (directory / "empty").mkdir(parents=True)
    (directory / "notes.txt").write_text("the user's notes\n")
    (directory / "mine").mkdir()
    (directory / "mine" / "notes.txt").write_text("the user's notes\n")


def _load_recipe(case: Case, fixtures: Fixtures, directory: Path) -> Outcome:
    """A recipe case: the fixture recipe with the override, or the `extends` files' r.toml; load it."""
    recipe = fixtures.recipe
    if case.field == "extends":
        for name, content in json.loads(case.value).items():
            (directory / name).parent.mkdir(parents=True, exist_ok=True)
            (directory / name).write_text(content)
        recipe = directory / "r.toml"
    try:
        load_recipe(str(recipe), list(case.argv))
    except UserError as e:
        return Outcome(2, f"tnmt recipe: error: {e}\n")
    except Exception:  # noqa: BLE001
        return Outcome("traceback", traceback.format_exc())
    return Outcome(0, "")


@contextlib.contextmanager
def _in_process(directory: Path) -> Iterator[io.StringIO]:
    """stdin holding two lines, stdout and stderr captured, `directory` the working directory; all restored."""
    saved = sys.stdin, sys.stdout, sys.stderr, os.getcwd(), signal.getsignal(signal.SIGTERM)
    stderr = io.StringIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(STDIN), encoding="utf-8")
    sys.stdout, sys.stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8"), stderr
    os.chdir(directory)
    try:
        yield stderr
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved[:3]
        os.chdir(saved[3])
        signal.signal(signal.SIGTERM, saved[4])  # tnmt serve installs its own


@contextlib.contextmanager
def _long_jobs_stopped() -> Iterator[None]:
    with (
        mock.patch("tnmt.train.loop.train", side_effect=JobStarted),
        mock.patch("tnmt.quickstart.numbers_task", _quickstart_data),
        mock.patch("uvicorn.Server.run", _serve_briefly),
    ):
        yield


def _quickstart_data(directory: Path, **_: Any) -> None:
    """Where the offline quickstart's long part begins (20,000 lines of data, then training). Its directory is
    made first, so that a place nobody may write fails as it would."""
    directory.mkdir(parents=True, exist_ok=True)
    raise JobStarted


def _serve_briefly(server: Any, sockets: list | None = None) -> None:
    """`tnmt serve` in brief: the app starts (its batchers with the flags' settings), answers /ready, stops."""
    from fastapi.testclient import TestClient

    for sock in sockets or []:
        sock.close()
    with TestClient(server.config.app) as client:
        ready = client.get("/ready")
    if ready.status_code != 200:
        raise RuntimeError(f"/ready answered {ready.status_code}: {ready.text}")


def judge(case: Case, outcome: Outcome) -> str | None:
    """What is wrong with `outcome`, or None: one error line with status 2 (1 naming the path or address),
    or a behaviour `ACCEPTED` lists."""
    lines = outcome.stderr.splitlines()
    prefix = f"tnmt {case.command}: "
    if outcome.status in (1, 2):
        if len(lines) != 1 or not lines[0].startswith(prefix + "error: "):
            return f"exit {outcome.status} with {len(lines)} lines on stderr"
        if outcome.status == 1 and not _names(lines[0], outcome.value):
            return "exit 1 without naming the path or address"
        return None
    if outcome.status in (0, "job"):
        if stray := [line for line in lines if not line.startswith(prefix)]:
            return f"stderr line without {prefix!r}: {stray[0][:120]}"
        in_range = case.command in ("recipe", "prepare") and case.kind in IN_RANGE
        if not in_range and (case.field, case.kind) not in ACCEPTED:
            return "taken without an error, and not on the ACCEPTED list"
        return None
    return f"{outcome.status}: {lines[-1][:200] if lines else '(no stderr)'}"


def _names(line: str, value: str) -> bool:
    """Whether an error line names `value`, or the directory it is in (what failed may be its parent)."""
    return bool(value) and (value in line or str(Path(value).parent) in line)


def make_fixtures(directory: Path, checkpoint: Path | None = None) -> Fixtures:
    """A tiny corpus and recipe in `directory`; `checkpoint`, or one trained from them for one step."""
    from num2words import num2words

    directory.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "it"):
        (directory / f"train.{lang}").write_text("".join(num2words(n, lang=lang) + "\n" for n in range(1, 301)))
    recipe = directory / "recipe.toml"
    corpus = {
        f"{s}_{side}": str(directory / f"train.{lang}")
        for s in ("train", "valid")
        for side, lang in (("src", "en"), ("tgt", "it"))
    }
    data = "\n".join(f'{key} = "{value}"' for key, value in corpus.items())
    recipe.write_text(
        f'[data]\ncorpus = "files"\nsrc_lang = "en"\ntgt_lang = "it"\nvocab_size = 300\n{data}\n'
        "[model]\nd_model = 16\nd_ff = 32\nn_heads = 2\nn_encoder_layers = 1\nn_decoder_layers = 1\nmax_len = 16\n"
        '[train]\nout_dir = "run"\nmax_steps = 1\nthreads = 1\n'
    )
    if checkpoint is None:
        run = directory / "fixture_run"
        with _in_process(directory) as stderr:
            status = tnmt_main(["train", str(recipe), f"--train.out_dir={run}", "--no-progress"])
        assert status == 0, f"the fixture checkpoint did not train: {stderr.getvalue()}"
        checkpoint = run / "last"
    (directory / "empty").mkdir(exist_ok=True)
    src, ref = directory / "src.en", directory / "ref.it"
    src.write_text("one\ntwo\n")
    ref.write_text("uno\ndue\n")
    run = directory / "replay_run"
    (run / "snapshots").mkdir(parents=True, exist_ok=True)
    if not (run / "snapshots" / "step_0000001").exists():
        (run / "snapshots" / "step_0000001").symlink_to(Path(checkpoint).resolve(), target_is_directory=True)
    return Fixtures(checkpoint, recipe, src, ref, directory / "empty", _read_only_place(directory), run)


def _read_only_place(directory: Path) -> Path:
    if os.geteuid() == 0:  # root writes through permissions; /sys refuses everyone
        return Path("/sys/tnmt-campaign")
    place = directory / "read-only"
    place.mkdir(exist_ok=True)
    place.chmod(0o555)
    return place


def campaign(cases: list[Case], fixtures: Fixtures, directory: Path) -> tuple[list[dict[str, Any]], Counter]:
    """Run every case in a directory of its own: the findings (one dict per failing case) and how many cases
    ended in each status."""
    findings, statuses = [], Counter()
    for n, case in enumerate(cases):
        outcome = run_case(case, fixtures, directory / f"case{n:04d}")
        statuses[str(outcome.status)] += 1
        if (finding := judge(case, outcome)) is not None:
            argv = [fixtures.fill(token, Path("DIR")) for token in case.argv]
            findings.append({"case": case.id, "argv": argv, "finding": finding, **asdict(outcome)})
            findings[-1]["stderr"] = outcome.stderr[-2000:]
    return findings, statuses


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--per-option", type=int, default=0, help="cases per option or key (0: every case)")
    parser.add_argument("--max-gib", type=float, default=8.0, help="address space the process may use")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args()
    limit = int(args.max_gib * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        fixtures = make_fixtures(Path(tmp) / "fixtures")
        cases = all_cases()
        chosen = sample(cases, args.per_option) if args.per_option else cases
        findings, statuses = campaign(chosen, fixtures, Path(tmp))
    seconds = time.monotonic() - started
    options = f" --per-option {args.per_option}" if args.per_option else ""
    result = {
        "command": f"python -m benchmarks.robustness.cli_campaign{options}",
        "machine": describe(),
        "generated": len(cases),
        "cli_cases": len(cli_cases()),
        "recipe_cases": len(recipe_cases()),
        "run": len(chosen),
        "passed": len(chosen) - len(findings),
        "exit_statuses": dict(sorted(statuses.items())),  # "job": got as far as training (all checks passed)
        "accepted_behaviours": len(ACCEPTED),
        "seconds": round(seconds, 1),
        "findings": findings,
    }
    args.results.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"{len(cases)} cases generated, {len(chosen)} run in {seconds:.0f} s, {len(findings)} findings")
    for finding in findings:
        print(f"  {finding['case']}: {finding['finding']}")


if __name__ == "__main__":
    main()
