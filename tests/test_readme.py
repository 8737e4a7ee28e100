"""Every `tnmt` command in the README's ```bash blocks runs, on tiny fixtures: a README command that breaks fails CI.

Each command runs as written, through a shell (so `< input.en > output.de` and `step_*` work), in a fresh
directory that holds a tiny stand-in at every path the README uses (STAND_INS), with the arguments of APPEND
added at the end to make it take seconds and stay offline. A README command whose subcommand is not in APPEND
fails, so nobody can add an untested one. Commands that need an earlier command's output (resume, translate,
average ...) get it from `trained_run`, so each runs on its own. The few commands in NOT_RUN are skipped with
the reason and the test that covers them instead.
"""

import gzip
import io
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
SETUP_COMMANDS = ("make demo", "make test")  # run by CI itself, not here

# README path (relative to where its commands run) -> the stand-in in `tiny_files`, copied there before each command.
STAND_INS = {
    "configs": "recipes",  # the real recipes; APPEND shrinks them with overrides
    "outputs/m30k": "run",  # `trained_run`: 2 steps, checkpoints at steps 1 and 2
    "input.en": "input.en",  # 3 lines, the middle one empty
    "corpus/train.en": "corpus/train.en",  # "your own parallel files": the numbers corpus, its Italian as .de
    "corpus/train.de": "corpus/train.de",
    "corpus/valid.en": "corpus/valid.en",
    "corpus/valid.de": "corpus/valid.de",
    "terms.tsv": "terms.tsv",  # a glossary of the tiny model's words
    "keep.txt": "keep.txt",  # a do-not-translate list
    "data/multi30k/test_2016_flickr.en.gz": "test.en.gz",  # 5 number-words sentences
    "data/multi30k/test_2016_flickr.de.gz": "test.it.gz",  # their Italian references: `evaluate` does not mind
    "outputs/wmt14_base/averaged": "run/best",  # a checkpoint as `train.average_last` writes one
    "outputs/multi": "multirun",  # `trained_multilingual_run`: the multilingual recipe, 2 steps
    "input.fr": "input.fr",
    "data/wmt14/newstest2014.en": "test.en",  # plain text, as `tnmt data wmt14` writes test sets
    "data/wmt14/newstest2014.de": "test.it",
    "report.docx": "report.docx",  # a Word document of the tiny model's words, one of them bold
}

TINY_TRAINING = "{tiny_training}"  # stands for conftest's `tiny_training` overrides: a model that trains in seconds
QUICK_RUN = [TINY_TRAINING, "--train.eval_every=1", "--train.log_every=1", "--no-progress"]
# With QUICK_RUN, a multilingual recipe's languages from conftest's `numbers_multiway` (the same numbers in words of
# en, de, fr and cs) instead of Multi30k's: appended to a README command that trains one.
MULTILINGUAL = [
    "--data.train_src={numbers_multiway}/train.{{lang}}",
    "--data.valid_src={numbers_multiway}/valid.{{lang}}",
    "--data.train_tgt=",
    "--data.valid_tgt=",
    "--data.vocab_size=500",  # four languages' letters
]

# Arguments appended to each README command, by subcommand. `{multi30k}` is the local Multi30k copy: the files
# are checked against their sha256 sums, so no fake copy will do, and that one command skips without it.
APPEND = {
    "data": ["--from={multi30k}"],
    "prepare": [TINY_TRAINING],
    "train": [*QUICK_RUN, "--train.max_steps=4"],  # `trained_run` stopped at 2: --resume trains 2 more
    "translate": [],
    "evaluate": [],
    "average": [],
    "attention": [],
    "explain": [],
    "inspect": [],
    "replay": [],
    "serve": ["--port={port}"],  # runs until SIGTERM: see `run_server`
}


# README commands not run here, each with the reason and where it is tested instead.
MARIAN_PATH = "tests/test_marian.py::test_from_opus_mt_to_a_served_page runs this path on a MarianMT model it builds"
NOT_RUN = {
    "tnmt data wmt14 --out data/wmt14": "downloads 1.7 GB; tests/test_wmt14.py runs it on tiny archives over loopback",
    "tnmt import marian opus-mt-en-de --out outputs/opus-mt-en-de": MARIAN_PATH,
    "tnmt translate --checkpoint outputs/opus-mt-en-de < input.en": MARIAN_PATH,
    "tnmt serve --checkpoint outputs/opus-mt-en-de": MARIAN_PATH,
    "tnmt export ctranslate2 outputs/opus-mt-en-de --out outputs/opus-mt-en-de-ct2": MARIAN_PATH,
    "tnmt translate --engine ctranslate2 --checkpoint outputs/opus-mt-en-de-ct2 < input.en": MARIAN_PATH,
    "tnmt evaluate --checkpoint outputs/multi/best --all-directions": "translates Multi30k's test set in every"
    " direction; tests/test_cli.py::test_evaluate_all_directions_scores_each_trained_direction_on_multi30k runs it",
}


def bash_blocks() -> list[list[str]]:
    """The non-blank lines of each ```bash block of README.md and the docs pages it links, `# comments` stripped."""
    text = "\n".join(page.read_text(encoding="utf-8") for page in (README, *sorted((ROOT / "docs").glob("*.md"))))
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [
        [line for line in (re.sub(r"\s+#.*", "", raw).strip() for raw in block.splitlines()) if line]
        for block in blocks
    ]


COMMANDS = [line for block in bash_blocks() for line in block if line.startswith("tnmt ") and line not in NOT_RUN]


def test_the_setup_block_exists():
    assert any(set(SETUP_COMMANDS) <= set(block) for block in bash_blocks()), f"no ```bash block with {SETUP_COMMANDS}"


def test_bash_blocks_hold_only_tnmt_and_setup_commands():
    known = COMMANDS + list(SETUP_COMMANDS) + list(NOT_RUN)
    unknown = [line for block in bash_blocks() for line in block if line not in known]
    assert not unknown, f"README lines this test cannot run: {unknown}"


def test_every_table_entry_is_used():
    stale = set(APPEND) - {shlex.split(command)[1] for command in COMMANDS}
    stale |= {path for path in STAND_INS if not any(path in command for command in COMMANDS)}
    stale |= set(NOT_RUN) - {line for block in bash_blocks() for line in block}
    assert not stale, f"entries of APPEND / STAND_INS / NOT_RUN that no README command uses: {sorted(stale)}"


@pytest.fixture(scope="session")
def trained_run(repo_root, tiny_training, tmp_path_factory) -> Path:
    """A run directory (best, last, checkpoints/step_*) of the README's recipe: 2 tiny steps through the CLI."""
    out = tmp_path_factory.mktemp("readme_run") / "run"
    recipe = repo_root / "configs" / "multi30k_en_de.toml"
    command = [
        sys.executable,
        "-m",
        "tnmt",
        "train",
        str(recipe),
        *expand(QUICK_RUN, tiny_training=tiny_training),
        "--train.max_steps=2",
        f"--train.out_dir={out}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, env=environment(out.parent))
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def trained_multilingual_run(repo_root, tiny_training, numbers_multiway, tmp_path_factory) -> Path:
    """A run directory of the README's multilingual recipe on `numbers_multiway`: 2 tiny steps through the CLI."""
    out = tmp_path_factory.mktemp("readme_multi") / "run"
    overrides = expand([*QUICK_RUN, *MULTILINGUAL], tiny_training=tiny_training, numbers_multiway=str(numbers_multiway))
    recipe = repo_root / "configs" / "multi30k_multi.toml"
    command = [sys.executable, "-m", "tnmt", "train", str(recipe), *overrides, "--train.max_steps=2"]
    result = subprocess.run(
        [*command, f"--train.out_dir={out}"], capture_output=True, text=True, timeout=300, env=environment(out.parent)
    )
    assert result.returncode == 0, result.stderr
    return out


@pytest.fixture(scope="session")
def tiny_files(repo_root, numbers_corpus, numbers_multiway, trained_run, trained_multilingual_run, tmp_path_factory):
    """The stand-ins named by STAND_INS."""
    directory = tmp_path_factory.mktemp("readme_files")
    (directory / "recipes").symlink_to(repo_root / "configs")
    (directory / "run").symlink_to(trained_run)
    (directory / "multirun").symlink_to(trained_multilingual_run)
    (directory / "input.en").write_text("one hundred and twelve\n\nfour thousand and five\n", encoding="utf-8")
    (directory / "input.fr").write_text("cent douze\n\nquatre mille cinq\n", encoding="utf-8")
    (directory / "corpus").mkdir()
    for split in ("train", "valid"):
        for lang, stand_in in (("en", "en"), ("it", "de")):
            shutil.copy(numbers_corpus / f"{split}.{lang}", directory / "corpus" / f"{split}.{stand_in}")
    (directory / "terms.tsv").write_text("# en -> it\nhundred\tcento | cent\n", encoding="utf-8")
    (directory / "keep.txt").write_text("twelve\n", encoding="utf-8")
    (directory / "report.docx").write_bytes(word_document())
    for lang in ("en", "it"):
        lines = (numbers_corpus / f"valid.{lang}").read_text(encoding="utf-8").splitlines(keepends=True)[:5]
        (directory / f"test.{lang}.gz").write_bytes(gzip.compress("".join(lines).encode(), mtime=0))
        (directory / f"test.{lang}").write_text("".join(lines), encoding="utf-8")
    return directory


def word_document() -> bytes:
    """A Word document of two paragraphs of the tiny model's words, "hundred" bold."""
    import docx

    document = docx.Document()
    paragraph = document.add_paragraph("one ")
    paragraph.add_run("hundred").bold = True
    paragraph.add_run(" and twelve")
    document.add_paragraph("four thousand and five")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def environment(cwd: Path) -> dict[str, str]:
    """The test's environment for a command run in `cwd`: same code (PYTHONPATH=src made absolute), no cache."""
    python_path = os.pathsep.join(os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)
    return {**os.environ, "PYTHONPATH": python_path, "OMP_NUM_THREADS": "1", "TNMT_CACHE_DIR": str(cwd / ".cache")}


def test_the_html_example_is_the_models_own_answer():
    """README's html example is what benchmarks/quality/markup.py recorded the shipped en->de recipe's model answering,
    and today's tag transfer still turns that translation and alignment into it."""
    from tnmt.documents.markup import parse

    example = json.loads((ROOT / "benchmarks" / "results" / "markup.json").read_text())["readme_example"]
    readme = (ROOT / "docs" / "translating.md").read_text(encoding="utf-8")
    assert f"`{example['fragment']}`" in readme and f"`{example['output']}`" in readme
    sentences = [(text, [tuple(pair) for pair in alignment]) for text, alignment in example["sentences"]]
    assert parse(example["fragment"]).render(sentences) == example["output"]


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command(command, tiny_files, tiny_training, numbers_multiway, request, tmp_path):
    words = shlex.split(command)
    assert words[1] in APPEND, f"README command {command!r}: add its subcommand to APPEND (and STAND_INS if needed)"
    values = {"tiny_training": tiny_training, "port": str(free_port()), "numbers_multiway": str(numbers_multiway)}
    if any("{multi30k}" in arg for arg in APPEND[words[1]]):
        values["multi30k"] = str(request.getfixturevalue("complete_multi30k_dir"))  # skips with a reason when absent
    multilingual = MULTILINGUAL if words[1] in ("train", "prepare") and "multi30k_multi" in command else []
    appended = expand(APPEND[words[1]] + multilingual, **values)
    own = {word.partition("=")[0] for word in words if word.startswith("--data.")}  # the README's corpus wins
    appended = [arg for arg in appended if arg.partition("=")[0] not in own]
    for readme_path, stand_in in STAND_INS.items():
        source, target = (tiny_files / stand_in).resolve(), tmp_path / readme_path
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, symlinks=True)  # a copy: train --resume and average write into it
        else:
            shutil.copy(source, target)

    shell = f"{shlex.quote(sys.executable)} -m {command} {shlex.join(appended)}"  # `tnmt` = this Python's tnmt
    if words[1] == "serve":
        return run_server(shell, tmp_path, int(values["port"]))
    result = subprocess.run(
        shell, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=environment(tmp_path)
    )
    assert result.returncode == 0, f"{shell}\nexited with status {result.returncode} in {tmp_path}:\n{result.stderr}"
    check_output(words, tmp_path, result.stdout)


def run_server(shell: str, cwd: Path, port: int) -> None:
    """Start the server command, wait until it is ready and translates, then stop it with SIGTERM: exit 0."""
    with serving(shell, cwd, port):
        model = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()["models"][0]
        pair = {"source": model["source"], "target": model["target"]}  # a multilingual model serves several
        reply = httpx.post(f"http://127.0.0.1:{port}/v1/translate", json={"text": "forty-two", **pair}, timeout=30)
        assert reply.status_code == 200 and reply.json()["translations"][0]["text"] is not None, reply.text


@contextmanager
def serving(shell: str, cwd: Path, port: int) -> Iterator[None]:
    """The server command running and ready within the block; stopped with SIGTERM after it, exiting 0."""
    server = subprocess.Popen(
        shlex.split(shell), cwd=cwd, env=environment(cwd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None and time.monotonic() < deadline, f"{shell} did not start:\n{server.stderr}"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/ready", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        yield
    finally:
        server.send_signal(signal.SIGTERM)
        _, stderr = server.communicate(timeout=60)
    assert server.returncode == 0, stderr


# Each `curl` example of the README (a ```sh block) and the answer shown after it (the ```json block that follows).
CURL_EXAMPLES = re.findall(r"```sh\n(curl [^\n]*)\n```\s*```json\n(.*?)\n```", README.read_text(encoding="utf-8"))


def test_the_readme_shows_both_apis_by_curl():
    paths = [re.search(r"8000(/\S*)", command)[1] for command, _ in CURL_EXAMPLES]
    assert paths == ["/v1/translate", "/translate", "/translate_file"]


@pytest.mark.parametrize(("command", "shown"), CURL_EXAMPLES, ids=["v1-translate", "libretranslate", "file"])
def test_a_curl_example_answers_in_the_shape_shown(command, shown, trained_run, tmp_path):
    """The README's curl command, run as written against `tnmt serve` on the tiny model (its port, and its target
    language for the README's "de"; its report.docx), answers JSON of the shape shown: the same keys, the same
    kinds of values."""
    (tmp_path / "report.docx").write_bytes(word_document())
    port = free_port()
    shell = f"{shlex.quote(sys.executable)} -m tnmt serve --checkpoint {trained_run / 'best'} --port {port}"
    with serving(shell, tmp_path, port):
        target = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()["models"][0]["target"]
        run = command.replace("127.0.0.1:8000", f"127.0.0.1:{port}").replace('"target": "de"', f'"target": "{target}"')
        run = run.replace("target=de", f"target={target}")
        result = subprocess.run(run, shell=True, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert same_shape(json.loads(result.stdout), json.loads(shown)), result.stdout


def same_shape(answer: object, shown: object) -> bool:
    """Whether `answer` has `shown`'s keys at every level and values of the same kinds (any number for a number;
    a list's items like the shown list's first item, when both have items)."""
    if isinstance(shown, dict):
        return (
            isinstance(answer, dict)
            and answer.keys() == shown.keys()
            and all(same_shape(answer[key], shown[key]) for key in shown)
        )
    if isinstance(shown, list):
        return isinstance(answer, list) and (not shown or all(same_shape(item, shown[0]) for item in answer))
    if isinstance(shown, bool) or not isinstance(shown, int | float):
        return type(answer) is type(shown)
    return isinstance(answer, int | float) and not isinstance(answer, bool)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_output(words: list[str], cwd: Path, stdout: str) -> None:
    """Cheap sanity checks of what the README command `words` wrote in `cwd` and on stdout."""
    match words[1]:
        case "data":
            assert (cwd / after(words, "--out") / "train.en.gz").is_file()
        case "prepare":
            out_dir = next(word.partition("=")[2] for word in words if word.startswith("--train.out_dir="))
            assert (cwd / out_dir / "prepared" / "manifest.json").is_file(), stdout
        case "train":
            out_dir = next(word.partition("=")[2] for word in words if word.startswith("--train.out_dir="))
            assert (cwd / out_dir / "last").resolve().name == "step_0000004", stdout  # APPEND's max_steps
        case "translate" if "--file" in words:  # a document, and its report
            import docx

            out = docx.Document(str(cwd / after(words, "--out")))
            assert len(out.paragraphs) == 2 and all(p.text.strip() for p in out.paragraphs), stdout
            report = json.loads((cwd / after(words, "--report")).read_text(encoding="utf-8"))
            assert report["summary"]["segments"] == 2, report
        case "translate":
            output = (cwd / after(words, ">")).read_text(encoding="utf-8") if ">" in words else stdout
            source = (cwd / after(words, "<")).read_text(encoding="utf-8")
            translations = [line.split("\t")[0] for line in output.splitlines()]  # before --alignment's columns
            assert [not line for line in translations] == [not line for line in source.splitlines()], output
            if "--do-not-translate" in words:  # keep.txt's "twelve" comes back as written
                assert "twelve" in translations[0].split(), output
        case "evaluate":
            assert "BLEU = " in stdout and "chrF = " in stdout, stdout
        case "average":
            assert after(words, "--out") in stdout and (cwd / after(words, "--out") / "config.json").is_file(), stdout
        case "attention":
            assert list((cwd / "outputs" / "attention").glob("*.png")), stdout  # the default --out
        case "replay":
            assert stdout.startswith(f"run: {after(words, '--run')}: ") and "\nstep 2 (checkpoint)" in stdout, stdout
        case "explain":
            assert stdout.startswith("source: ") and "\nstep 0: 1 open hypothesis\n" in stdout, stdout


def expand(arguments: list[str], **values: str | list[str]) -> list[str]:
    """`arguments` with each `{name}` filled in; a list value replaces its whole argument."""
    expanded = []
    for arg in arguments:
        whole = values.get(arg.strip("{}")) if arg.startswith("{") and arg.endswith("}") else None
        expanded += whole if isinstance(whole, list) else [arg.format(**values)]
    return expanded


def after(words: list[str], flag: str) -> str:
    return words[words.index(flag) + 1]
