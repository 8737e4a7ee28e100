"""End to end through the `tnmt` command on a few hundred Multi30k lines: train, kill, resume,
translate, evaluate, average; and the one-line errors with exit status 2."""

import argparse
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tnmt.checkpoint import load_checkpoint
from tnmt.cli import _listen, build_parser, main
from tnmt.quickstart import next_steps


def tnmt(
    *args: str, stdin: str | None = None, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tnmt", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "OMP_NUM_THREADS": "1", **(env or {})},
    )


@pytest.fixture(scope="module")
def small_corpus(multi30k_dir, tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("m30k")
    for split, n in (("train", 400), ("val", 40)):
        for lang in ("en", "de"):
            with gzip.open(multi30k_dir / f"{split}.{lang}.gz", "rt", encoding="utf-8") as f:
                lines = [next(f) for _ in range(n)]
            (directory / f"{split}.{lang}").write_text("".join(lines), encoding="utf-8")
    recipe = f"""
[data]
corpus = "files"
train_src = "{directory / "train.en"}"
train_tgt = "{directory / "train.de"}"
valid_src = "{directory / "val.en"}"
valid_tgt = "{directory / "val.de"}"
vocab_size = 500

[model]
d_model = 32
d_ff = 64
n_heads = 2
n_encoder_layers = 1
n_decoder_layers = 1

[train]
max_tokens = 500
warmup_steps = 20
eval_every = 5
log_every = 5
threads = 1
"""
    (directory / "recipe.toml").write_text(recipe)
    return directory


def test_train_kill_resume_translate_evaluate_average(small_corpus, tmp_path):
    out = tmp_path / "run"
    recipe = str(small_corpus / "recipe.toml")
    cmd = [
        sys.executable,
        "-m",
        "tnmt",
        "train",
        recipe,
        "--train.max_steps=100000",
        f"--train.out_dir={out}",
        "--no-progress",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    while not (out / "last").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(0.5)  # likely mid-way through the next steps, maybe mid-save
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    saved = load_checkpoint(out / "last").trainer_state["step"]
    assert saved >= 5

    target = saved + 5
    result = tnmt("train", recipe, "--resume", f"--train.max_steps={target}", f"--train.out_dir={out}", "--no-progress")
    assert result.returncode == 0, result.stderr
    assert load_checkpoint(out / "last").trainer_state["step"] == target

    result = tnmt(
        "translate",
        "--checkpoint",
        str(out / "best"),
        "--beam-size",
        "2",
        stdin="A man is sleeping.\n\nTwo dogs run on the grass.\n",
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""  # alignment kept, empty line stays empty
    result = tnmt("translate", "--checkpoint", str(out / "best"), "--quantize", "int8", stdin="A man is sleeping.\n\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 2 and result.stdout.endswith("\n\n")

    result = tnmt(
        "evaluate",
        "--checkpoint",
        str(out / "best"),
        "--src",
        str(small_corpus / "val.en"),
        "--ref",
        str(small_corpus / "val.de"),
        "--beam-size",
        "1",
    )
    assert result.returncode == 0, result.stderr
    assert "BLEU = " in result.stdout and "nrefs:1|case:mixed" in result.stdout and "chrF = " in result.stdout

    steps = sorted((out / "checkpoints").iterdir())
    result = tnmt("average", *map(str, steps[-2:]), "--out", str(tmp_path / "avg"))
    assert result.returncode == 0, result.stderr
    assert load_checkpoint(tmp_path / "avg").model.config == load_checkpoint(out / "last").model.config


def one_line_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_bad_inputs_give_one_line_errors(small_corpus, tmp_path):
    recipe = str(small_corpus / "recipe.toml")
    one_line_error(tnmt("train", recipe, "--train.max_stesp=3"), "unknown key 'max_stesp'", "max_steps")
    one_line_error(tnmt("train", recipe, "--model.d_model=33", "--train.out_dir=" + str(tmp_path)), "d_model = 33")
    bad = tmp_path / "bad.en"
    bad.write_bytes(b"fine\n\xff\xfe broken\n")
    one_line_error(
        tnmt("train", recipe, f"--data.train_src={bad}", f"--train.out_dir={tmp_path / 'x'}"),
        f"{bad}:2: invalid UTF-8",
    )
    one_line_error(tnmt("train", recipe, f"--train.out_dir={tmp_path / 'y'}", "--resume"), "nothing to resume")
    one_line_error(tnmt("translate", "--checkpoint", str(tmp_path / "nope")), "no such checkpoint directory")


def test_evaluate_line_count_mismatch(small_corpus, tmp_path):
    out = tmp_path / "run"
    result = tnmt(
        "train",
        str(small_corpus / "recipe.toml"),
        "--train.max_steps=2",
        f"--train.out_dir={out}",
        "--no-progress",
    )
    assert result.returncode == 0, result.stderr
    one_line_error(
        tnmt(
            "evaluate",
            "--checkpoint",
            str(out / "last"),
            "--src",
            str(small_corpus / "val.en"),
            "--ref",
            str(small_corpus / "train.de"),
        ),
        "40 lines",
        "400",
    )


def test_data_multi30k_copies_a_local_mirror(complete_multi30k_dir, tmp_path):
    result = tnmt(
        "data", "multi30k", "--out", str(tmp_path / "m"), "--from", str(complete_multi30k_dir), "--langs", "en", "de"
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "m" / "train.de.gz").read_bytes() == (complete_multi30k_dir / "train.de.gz").read_bytes()


def test_offline_quickstart_runs_the_whole_pipeline(tmp_path):
    result = tnmt("quickstart", "--offline", "--steps", "30", "--out", str(tmp_path / "q"))
    assert result.returncode == 0, result.stderr
    assert "running the offline number-words task" in result.stdout
    assert "training on numbers for up to 30 updates;" in result.stdout
    # the metrics that mean something for one-word outputs come first, BLEU last and explained
    exact, chrf, bleu = (result.stdout.index(text) for text in ("exact matches: ", "chrF = ", "(BLEU = "))
    assert exact < chrf < bleu and "means little here" in result.stdout
    assert list((tmp_path / "q" / "attention").glob("*.png"))
    assert (tmp_path / "q" / "run" / "curves.png").exists()
    # each example beside its reference, right or wrong; the first wrong one replayed through the models kept
    out = result.stdout
    assert "\n  three hundred and twelve\n  -> " in out and "     reference: trecentododici\n" in out
    heading = "where the run was heading on 'three hundred and twelve' (reference: 'trecentododici')"
    assert heading in result.stdout and "\n  update     25: " in result.stdout and " a token)\n" in result.stdout
    run = tmp_path / "q" / "run"  # the demo ends with the commands that use its run
    expected = next_steps(run, "three hundred and twelve", "trecentododici")
    assert result.stdout.endswith(expected + "\n") and (run / "best").is_dir()


def test_help_and_argument_errors_do_not_import_torch():
    for argv in (["--help"], ["translate"], ["train", "--help"], ["translate", "--checkpoint", "x", "--bogus"]):
        code = f"import sys, tnmt.cli\ntry:\n    tnmt.cli.main({argv!r})\nexcept SystemExit:\n    pass\n"
        code += "print('torch' in sys.modules)"
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert result.stdout.strip().endswith("False"), (argv, result.stdout, result.stderr)


def test_translate_uses_the_checkpoints_decode_settings_unless_a_flag_overrides(tiny_checkpoint):
    text = "one hundred and twelve\nforty-two\n"
    stored = tnmt("translate", "--checkpoint", str(tiny_checkpoint), stdin=text)
    assert stored.returncode == 0, stored.stderr
    assert max(len(line.split()) for line in stored.stdout.split("\n")) <= 5  # the stored max_len of 5 pieces
    longer = tnmt("translate", "--checkpoint", str(tiny_checkpoint), "--max-len", "12", "--beam-size", "1", stdin=text)
    assert longer.returncode == 0 and longer.stdout != stored.stdout, longer.stderr


def test_translate_appends_the_evidence_columns_asked_for(tiny_checkpoint, tiny_translator):
    text = "one hundred and twelve\n\nforty-two\n"
    flags = ["--alignment", "--scores", "--warnings"]
    result = tnmt("translate", "--checkpoint", str(tiny_checkpoint), *flags, stdin=text)
    assert result.returncode == 0, result.stderr
    expected = tiny_translator.translations(text.splitlines(), evidence=True)
    lines = result.stdout.split("\n")[:-1]
    assert len(lines) == 3
    for line, translation in zip(lines, expected, strict=True):
        columns = line.split("\t")
        evidence = translation.evidence
        assert columns[0] == translation.text
        assert columns[1] == " ".join(f"{i}-{j}" for i, j in evidence.alignment)
        assert float(columns[2]) == pytest.approx(evidence.confidence, abs=1e-4)
        assert [float(p) for p in columns[3].split()] == pytest.approx(evidence.word_probs, abs=1e-4)
        assert columns[4] == ",".join(evidence.warnings)
    only = tnmt("translate", "--checkpoint", str(tiny_checkpoint), "--alignment", stdin=text)
    assert [line.count("\t") for line in only.stdout.split("\n")[:-1]] == [1, 1, 1]


def test_translate_follows_a_glossary_and_keeps_listed_terms(tiny_checkpoint, tiny_translator, tmp_path):
    from tnmt.translate.glossary import GlossaryEntry
    from tnmt.translate.steering import Steering

    glossary, keep = tmp_path / "terms.tsv", tmp_path / "keep.txt"
    glossary.write_text("# en\tit\ntwo\tsei | due\n", encoding="utf-8")
    keep.write_text("Jonas\n", encoding="utf-8")
    text = "two\nJonas three\n"
    result = tnmt(
        "translate",
        "--checkpoint",
        str(tiny_checkpoint),
        "--glossary",
        str(glossary),
        "--do-not-translate",
        str(keep),
        stdin=text,
    )
    assert result.returncode == 0, result.stderr
    steering = Steering(glossary=(GlossaryEntry("two", ("sei", "due")),), do_not_translate=("Jonas",))
    expected = tiny_translator.translations(text.splitlines(), steering=[steering] * 2)
    assert result.stdout.splitlines() == [e.text for e in expected]
    assert "Jonas" in result.stdout.splitlines()[1].split()
    glossary.write_text("two\tsei\nthree due\n", encoding="utf-8")
    bad = tnmt("translate", "--checkpoint", str(tiny_checkpoint), "--glossary", str(glossary), stdin=text)
    assert bad.returncode != 0 and bad.stdout == ""
    assert bad.stderr.strip() == f"tnmt translate: error: {glossary}:2: expected 'source<TAB>target', got 'three due'"


def test_overlong_input_warns_in_one_plain_line(tiny_checkpoint):
    text = "one two three " * 20 + "\nforty-two\n"
    split = tnmt("translate", "--checkpoint", str(tiny_checkpoint), stdin=text)  # translated in parts: no cut
    assert split.returncode == 0 and split.stdout.count("\n") == 2 and split.stderr == "", split.stderr
    result = tnmt("translate", "--checkpoint", str(tiny_checkpoint), "--no-segment", stdin=text)
    assert result.returncode == 0 and result.stdout.count("\n") == 2, result.stderr
    assert result.stderr.splitlines() == [
        "tnmt translate: WARNING: line 1: 60 source tokens exceed the model's max_len (16 positions, EOS included);"
        " translating the first 15"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--beam-size", "0"], "DecodeConfig.beam_size = 0: must be >= 1"),
        (["--batch-size", "0"], "DecodeConfig.batch_size = 0: must be >= 1"),
        (["--max-len", "-3"], "DecodeConfig.max_len = -3: must be >= 0"),
        (["--length-penalty", "nan"], "DecodeConfig.length_penalty = nan: must be a finite number"),
    ],
)
def test_bad_decoding_flags_are_one_line_errors(tiny_checkpoint, args, message):
    result = tnmt("translate", "--checkpoint", str(tiny_checkpoint), *args, stdin="forty-two\n")
    assert result.returncode == 2 and result.stderr == f"tnmt translate: error: {message}\n"


def test_attention_takes_the_decoding_flags(tiny_checkpoint, tmp_path):
    result = tnmt(
        "attention", "--checkpoint", str(tiny_checkpoint), "--beam-size", "1", "forty-two", "--out", str(tmp_path)
    )
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.glob("*.png"))


def test_explain_prints_the_steps_or_the_endpoints_json(tiny_checkpoint):
    sentence = "two hundred and five"
    options = ["--checkpoint", str(tiny_checkpoint), "--beam-size", "2", "--top-k", "3"]
    table = tnmt("explain", *options, sentence)
    assert table.returncode == 0, table.stderr
    as_json = tnmt("explain", *options, "--json", sentence)
    assert as_json.returncode == 0, as_json.stderr
    answer = json.loads(as_json.stdout)
    translated = tnmt("translate", "--checkpoint", str(tiny_checkpoint), "--beam-size", "2", stdin=sentence + "\n")
    assert answer["translation"] == translated.stdout.rstrip("\n")
    assert (answer["model"], answer["beam_size"], answer["top_k"]) == ("en-it", 2, 3)
    lines = table.stdout.rstrip("\n").split("\n")  # not splitlines: a translation may hold a form feed
    assert lines[0] == "source: " + " ".join(answer["source_pieces"])
    assert [line for line in lines if line.startswith("step ")] == [
        f"step {i}: {len(s['hypotheses'])} open hypothes{'is' if len(s['hypotheses']) == 1 else 'es'}"
        for i, s in enumerate(answer["steps"])
    ]
    assert lines[-1] == f"translation: {answer['translation']}"


@pytest.mark.parametrize(
    ("args", "message"),
    [(["--top-k", "0", "one"], "--top-k must be >= 1, got 0"), ([" "], "the sentence is empty: nothing to explain")],
)
def test_explain_errors_are_one_line(tiny_checkpoint, args, message):
    result = tnmt("explain", "--checkpoint", str(tiny_checkpoint), *args)
    assert result.returncode == 2 and result.stderr == f"tnmt explain: error: {message}\n"


def test_inspect_prints_every_stage_or_the_endpoints_json(tiny_checkpoint):
    sentence = "two hundred and five"
    options = ["--checkpoint", str(tiny_checkpoint), "--beam-size", "2", "--top-k", "3"]
    summary = tnmt("inspect", *options, sentence)
    assert summary.returncode == 0, summary.stderr
    as_json = tnmt("inspect", *options, "--json", sentence)
    assert as_json.returncode == 0, as_json.stderr
    answer = json.loads(as_json.stdout)
    translated = tnmt("translate", "--checkpoint", str(tiny_checkpoint), "--beam-size", "2", stdin=sentence + "\n")
    assert answer["translation"] == {"text": translated.stdout.rstrip("\n"), "given": False}
    assert (answer["model"], answer["top_k"]) == ("en-it", 3)
    lines = summary.stdout.split("\n")
    assert lines[1] == f"translation: {answer['translation']['text']} (the model's own, teacher-forced)"
    pieces = " ".join(f"{p}({i})" for p, i in zip(answer["source"]["pieces"], answer["source"]["ids"], strict=True))
    assert f"   source:  {pieces}" in lines
    given = json.loads(tnmt("inspect", *options, "--json", "--translation", "duecento", sentence).stdout)
    assert given["translation"] == {"text": "duecento", "given": True}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--top-k", "0", "one"], "top_k = 0: must be from 1 to 20"),
        ([" "], "the sentence is empty: nothing to look inside"),
    ],
)
def test_inspect_errors_are_one_line(tiny_checkpoint, args, message):
    result = tnmt("inspect", "--checkpoint", str(tiny_checkpoint), *args)
    assert result.returncode == 2 and result.stderr == f"tnmt inspect: error: {message}\n"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a GPU")
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--device", "cuda"], "device = 'cuda' but PyTorch sees no CUDA device (torch.cuda.is_available() is False)"),
        (
            ["--engine", "ctranslate2", "--device", "auto"],
            "--device is for --engine tnmt; the CTranslate2 engine runs on the CPU",
        ),
    ],
)
def test_device_errors_are_one_line(tiny_checkpoint, args, message):
    result = tnmt("translate", "--checkpoint", str(tiny_checkpoint), *args, stdin="forty-two\n")
    assert result.returncode == 2 and result.stderr == f"tnmt translate: error: {message}\n"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without a GPU")
def test_serve_on_a_missing_gpu_is_the_one_line_error_of_translate(tiny_checkpoint):
    result = tnmt("serve", "--checkpoint", str(tiny_checkpoint), "--device", "cuda", timeout=60)
    message = "device = 'cuda' but PyTorch sees no CUDA device (torch.cuda.is_available() is False)"
    assert result.returncode == 2 and result.stderr == f"tnmt serve: error: {message}\n"


def test_translate_on_an_explicit_device(tiny_checkpoint):
    result = tnmt("translate", "--checkpoint", str(tiny_checkpoint), "--device", "auto", stdin="forty-two\n")
    assert result.returncode == 0 and result.stdout.count("\n") == 1, result.stderr


@pytest.mark.parametrize("command", ["translate", "evaluate"])
def test_threads_are_the_torch_threads_that_decode(command, tiny_checkpoint, tmp_path, capsys):
    """--threads N decodes on N torch threads, 0 leaves PyTorch's setting, and a count out of range is one line."""
    src, ref, out = tmp_path / "src.en", tmp_path / "ref.it", tmp_path / "out.it"
    src.write_text("forty-two\n")
    ref.write_text("quarantadue\n")
    files = {"translate": ["-i", str(src), "-o", str(out)], "evaluate": ["--src", str(src), "--ref", str(ref)]}
    argv = [command, "--checkpoint", str(tiny_checkpoint), *files[command], "--threads"]
    before = torch.get_num_threads()
    try:
        assert main([*argv, "3"]) == 0 and torch.get_num_threads() == 3  # neither conftest's 1 nor the cores
        torch.set_num_threads(2)
        assert main([*argv, "0"]) == 0 and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    capsys.readouterr()
    assert main([*argv, "-1"]) == 2
    message = "--threads must be from 0 to 1024 (0: the engine's default), got -1"
    assert capsys.readouterr().err == f"tnmt {command}: error: {message}\n"


def test_output_to_a_device_is_written_in_place(tiny_checkpoint, tmp_path):
    """`-o /dev/stdout` writes to the stream; an atomic rename over it would replace the device's entry."""
    result = tnmt("translate", "--checkpoint", str(tiny_checkpoint), "-o", "/dev/stdout", stdin="one\ntwo\n")
    assert result.returncode == 0 and result.stdout.count("\n") == 2, result.stderr
    assert Path("/dev/stdout").is_symlink() or not Path("/dev/stdout").is_file()


# Every subcommand, by what it does to the directories it writes (nothing of the user's is ever replaced):
REPLACES_ITS_OWN = "builds a directory and replaces only its own kind of output there"
WRITES_INTO = "writes files into a directory, beside what is there"
NO_DIRECTORY = "writes no directory (at most a file, atomically: -o, --hyp-out)"
WRITERS = {
    "average": REPLACES_ITS_OWN,
    "prepare": REPLACES_ITS_OWN,
    "export": REPLACES_ITS_OWN,
    "import": REPLACES_ITS_OWN,
    "train": WRITES_INTO,
    "attention": WRITES_INTO,
    "quickstart": WRITES_INTO,
    "data": WRITES_INTO,
    "translate": NO_DIRECTORY,
    "evaluate": NO_DIRECTORY,
    "serve": NO_DIRECTORY,
    "explain": NO_DIRECTORY,
    "inspect": NO_DIRECTORY,
    "replay": NO_DIRECTORY,
    "shortlist": NO_DIRECTORY,
}


def test_every_subcommand_says_what_it_writes():
    """A new subcommand fails here until it is classified above, and, if it writes a directory, tested below."""
    (subcommands,) = [a.choices for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert sorted(subcommands) == sorted(WRITERS)


@pytest.fixture
def writer_argv(tiny_checkpoint, tiny_training, tmp_path, monkeypatch) -> Callable[[str, Path], list[str]]:
    """`writer_argv(command, out)`: the arguments that make `command` write at `out`, on tiny inputs."""
    recipe = tmp_path / "recipe.toml"
    recipe.write_text("[train]\nmax_steps = 1\neval_every = 1\n")
    loaded = load_checkpoint(tiny_checkpoint)  # what `import marian` converts, so that no MarianMT model is needed
    monkeypatch.setattr("tnmt.interop.marian.load_marian", lambda _: (loaded.model, loaded.tokenizer))
    (tmp_path / "opus-mt").mkdir()  # an empty stand-in, so the languages are given
    languages = ["--source", "en", "--target", "it"]
    run = tmp_path / "run"

    def argv(command: str, out: Path) -> list[str]:
        return {
            "average": ["average", str(tiny_checkpoint), "--out", str(out)],
            "prepare": ["prepare", str(recipe), *tiny_training, f"--data.prepared_dir={out}", f"--train.out_dir={run}"],
            "export": ["export", "ctranslate2", str(tiny_checkpoint), "--out", str(out)],
            "import": ["import", "marian", str(tmp_path / "opus-mt"), "--out", str(out), *languages],
            "train": ["train", str(recipe), *tiny_training, f"--train.out_dir={out}", "--no-progress"],
            "attention": ["attention", "--checkpoint", str(tiny_checkpoint), "forty-two", "--out", str(out)],
            "quickstart": ["quickstart", "--offline", "--steps", "1", "--out", str(out)],
            "data": ["data", "multi30k", "--out", str(out), "--from", str(tmp_path / "m30k"), "--langs", "en", "de"],
        }[command]

    return argv


def user_files(tmp_path: Path, kind: str) -> Path:
    """A user's non-empty directory or file at `tmp_path / "mine"`."""
    out = tmp_path / "mine"
    if kind == "directory":
        out.mkdir()
        (out / "notes.txt").write_text("the user's")
    else:
        out.write_text("the user's")
    return out


def snapshot(directory: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(directory)): None if p.is_dir() else p.read_bytes() for p in directory.rglob("*")}


REFUSALS = [  # a command that writes into a directory keeps the user's directory (see the next test), not a file
    (command, kind)
    for command, writes in WRITERS.items()
    for kind in {REPLACES_ITS_OWN: ["directory", "file"], WRITES_INTO: ["file"], NO_DIRECTORY: []}[writes]
]


@pytest.mark.parametrize(("command", "kind"), REFUSALS)
def test_a_users_directory_or_file_is_never_replaced(command, kind, writer_argv, tmp_path, capsys):
    """Exit 2, one line naming the path and what is there, nothing touched."""
    if command == "export":
        pytest.importorskip("ctranslate2")
    out = user_files(tmp_path, kind)
    before = snapshot(tmp_path)
    assert main(writer_argv(command, out)) == 2
    err, there = capsys.readouterr().err, "a directory with 1 entry" if kind == "directory" else "a file"
    assert err.startswith(f"tnmt {command}: error: {out}: exists and is not "), err
    assert err.endswith(f" ({there}); choose another path\n") and err.count("\n") == 1, err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("command", [c for c, w in WRITERS.items() if w == WRITES_INTO and c != "quickstart"])
def test_a_command_that_writes_into_a_directory_keeps_the_users_files(command, writer_argv, tmp_path, request):
    """quickstart writes into its directory with train and attention (and is run whole by test_offline_quickstart)."""
    if command == "data":  # copies the real files: their checksums are checked
        (tmp_path / "m30k").symlink_to(request.getfixturevalue("complete_multi30k_dir"))
    out = user_files(tmp_path, "directory")
    assert main(writer_argv(command, out)) == 0
    assert (out / "notes.txt").read_text() == "the user's" and len(list(out.iterdir())) > 1


@pytest.mark.parametrize("command", [c for c, writes in WRITERS.items() if writes == REPLACES_ITS_OWN])
def test_a_command_replaces_its_own_output(command, writer_argv, tmp_path):
    if command == "export":
        pytest.importorskip("ctranslate2")
    out = tmp_path / "out"
    assert main(writer_argv(command, out)) == 0
    first = snapshot(out)
    assert main(writer_argv(command, out)) == 0  # over its own output: done again (or found current: prepare)
    assert snapshot(out).keys() == first.keys()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # nothing left half-way


def test_translate_a_multilingual_checkpoint_names_its_pair(multi_checkpoint):
    from tnmt.translate.translator import Translator

    done = tnmt("translate", "--checkpoint", str(multi_checkpoint), "--source", "de", "--target", "en", stdin="zwei\n")
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout == Translator.from_checkpoint(multi_checkpoint).for_pair("de", "en").translate(["zwei"])[0] + "\n"
    )
    zero_shot = tnmt(
        "translate", "--checkpoint", str(multi_checkpoint), "--source", "de", "--target", "it", "--zero-shot",
        stdin="zwei\n",
    )  # fmt: skip
    assert zero_shot.returncode == 0, zero_shot.stderr
    for flags, message in [
        ((), "this model translates several directions (en-de, de-en, en-it, it-en): choose one (--source, --target)"),
        (("--target", "de"), "name the language pair with both --source and --target"),
        (("--zero-shot",), "--zero-shot needs the pair: --source and --target"),
        (("--source", "de", "--target", "it"), "de-it was not trained (trained: en-de, de-en, en-it, it-en); ask"),
        (("--source", "en", "--target", "fr"), "en-fr: this model knows en, de, it, not 'fr'"),
    ]:
        refused = tnmt("translate", "--checkpoint", str(multi_checkpoint), *flags, stdin="zwei\n")
        assert refused.returncode == 2 and message in refused.stderr and len(refused.stderr.splitlines()) == 1


def test_evaluate_all_directions_scores_each_trained_direction_on_multi30k(complete_multi30k_dir, tmp_path):
    from tnmt.checkpoint import save_checkpoint
    from tnmt.config import DecodeConfig, ModelConfig
    from tnmt.data.tokenizer import Tokenizer
    from tnmt.model import Transformer

    lines = []
    for lang in ("en", "de", "fr"):
        with gzip.open(complete_multi30k_dir / f"val.{lang}.gz", "rt", encoding="utf-8") as f:
            lines += f.read().splitlines()
    tokenizer = Tokenizer.train(lines, vocab_size=500, languages=("en", "de", "fr"))
    config = ModelConfig(
        src_vocab_size=500, tgt_vocab_size=500, d_model=16, n_heads=2, n_encoder_layers=1, n_decoder_layers=1,
        d_ff=32, max_len=64, language_ids=tokenizer.language_ids,
    )  # fmt: skip
    checkpoint = tmp_path / "ckpt"
    directions = [("en", "de"), ("de", "fr")]
    save_checkpoint(checkpoint, Transformer(config), tokenizer, decode=DecodeConfig(max_len=3), directions=directions)
    done = tnmt(
        "evaluate", "--checkpoint", str(checkpoint), "--all-directions", "--split", "val", "--table",
        str(tmp_path / "table.json"), env={"TNMT_DATA_DIR": str(complete_multi30k_dir)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    table = json.loads((tmp_path / "table.json").read_text())
    assert table["split"] == "val" and [row["direction"] for row in table["directions"]] == ["en-de", "de-fr"]
    assert all(row["sentences"] == 1014 and 0 <= row["bleu"] <= 100 for row in table["directions"])
    assert done.stdout.splitlines()[0].split() == ["direction", "BLEU", "chrF", "sentences"]
    assert [line.split()[0] for line in done.stdout.splitlines()[1:]] == ["en-de", "de-fr", "mean"]
    refused = tnmt("evaluate", "--checkpoint", str(checkpoint), "--all-directions", "--src", "a.txt")
    assert refused.returncode == 2 and "--all-directions scores every direction on Multi30k" in refused.stderr
    missing = tnmt("evaluate", "--checkpoint", str(checkpoint))
    assert missing.returncode == 2 and "evaluate needs --src (or --all-directions" in missing.stderr


def test_the_servers_connections_turn_nagles_algorithm_off():
    """asyncio turns Nagle's algorithm off only on a connection whose socket says it is TCP; `tnmt serve`'s socket
    says so and has TCP_NODELAY itself, or an answer written in two parts waits for the client's delayed ACK
    (40 ms a request on a keep-alive connection)."""
    listening = _listen("127.0.0.1", 0)
    with listening, socket.create_connection(listening.getsockname()):
        accepted, _ = listening.accept()
        with accepted:
            assert listening.proto == accepted.proto == socket.IPPROTO_TCP
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
