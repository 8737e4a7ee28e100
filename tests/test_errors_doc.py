"""docs/errors.md, executed: every row of its tables is one test, so the catalogue and the behaviour cannot drift.

A row gives an id, the bad input in words, the command (run as written, in a fresh directory that
`INPUTS[id]` fills) or the HTTP request, the exact message, and the exit or HTTP status. `tnmt` rows run
`tnmt.cli.main` in-process (stdin from `< FILE`), and check the whole of stderr; a translate that exits 0
must also print one line per input line. HTTP rows run against the real app (`tnmt.serve.app`) through
httpx and check the status and the `{"error": ...}` body. `{ckpt}` in a command is the `tiny_checkpoint`.
"""

import gzip
import io
import json
import random
import re
import shlex
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import bad_documents as docs
import pytest

from benchmarks.quality.documents import epub_book

DOC = Path(__file__).resolve().parent.parent / "docs" / "errors.md"
NOTHING = "(nothing)"


def rows() -> list[dict[str, str]]:
    """The table rows of docs/errors.md: id, input, command, message, status, kind."""
    found = []
    for line in DOC.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line)[1:-1]]
        id_, input_, command, message, status, kind = cells
        found.append(
            {
                "id": id_.strip("`"),
                "input": input_,
                "command": command.strip("`"),
                "message": NOTHING if message == NOTHING else message.strip("`"),
                "status": status,
                "kind": kind,
            }
        )
    return found


ROWS = {row["id"]: row for row in rows()}

# --- inputs: what each row's directory holds before its command runs ---

GOOD_EN = "".join(f"{w}\n" for w in ["one", "two", "three", "four", "five"] * 4)
GOOD_IT = "".join(f"{w}\n" for w in ["uno", "due", "tre", "quattro", "cinque"] * 4)
RECIPE = """[data]
corpus = "files"
train_src = "{src}"
train_tgt = "train.it"
valid_src = "valid.en"
valid_tgt = "valid.it"
vocab_size = 40

[model]
d_model = 16
d_ff = 32
n_heads = 2
n_encoder_layers = 1
n_decoder_layers = 1

[train]
max_steps = 1
threads = 1
"""


def corpus(d: Path, *, src: str = "train.en", **files: bytes | str | None) -> None:
    """A tiny valid corpus and `files.toml` training on it, with `files` written over it (None: removed)."""
    (d / "files.toml").write_text(RECIPE.format(src=src))
    defaults = {"train.en": GOOD_EN, "train.it": GOOD_IT, "valid.en": "one\n", "valid.it": "uno\n"}
    for name, content in {**defaults, **files}.items():
        write(d, name, content)


def write(d: Path, name: str, content: bytes | str | None) -> None:
    if content is not None:
        (d / name).write_bytes(content if isinstance(content, bytes) else content.encode())


def checkpoint(edit: Callable[[Path], None]) -> Callable[[Path, Path], None]:
    """A copy of the tiny checkpoint at `ckpt`, changed by `edit(ckpt)`."""

    def build(d: Path, ckpt: Path) -> None:
        shutil.copytree(ckpt, d / "ckpt")
        edit(d / "ckpt")
        write(d, "in.txt", "one\n")

    return build


def edit_config(change: Callable[[dict], object]) -> Callable[[Path], None]:
    def edit(ckpt: Path) -> None:
        config = json.loads((ckpt / "config.json").read_text())
        change(config)
        (ckpt / "config.json").write_text(json.dumps(config))

    return edit


def nan_weight(ckpt: Path) -> None:
    from safetensors.torch import load, save

    weights = load((ckpt / "model.safetensors").read_bytes())
    weights["decoder_layers.0.ffn.linear1.bias"][3] = float("nan")
    (ckpt / "model.safetensors").write_bytes(save(weights))


def gz(text: str, *, keep: float = 1.0) -> bytes:
    data = gzip.compress(text.encode(), mtime=0)
    return data[: int(len(data) * keep)]


def marian_naming_no_languages(d: Path, _: Path) -> None:
    """What `tnmt import marian` reads the languages from (before the weights), naming none."""
    (d / "opus-mt").mkdir()
    write(d, "opus-mt/config.json", json.dumps({"model_type": "marian"}))
    write(d, "opus-mt/tokenizer_config.json", json.dumps({"source_lang": None, "target_lang": None}))


def kept_run(d: Path, ckpt: Path) -> None:
    """A training run in d/run that kept one model, the checkpoint, as its snapshot of update 1; no metrics."""
    (d / "run" / "snapshots").mkdir(parents=True)
    (d / "run" / "snapshots" / "step_0000001").symlink_to(ckpt, target_is_directory=True)


BINARY = random.Random(0).randbytes(4096)
LINES = "".join(f"one two three {i}\n" for i in range(200))

INPUTS: dict[str, Callable[[Path, Path], None]] = {
    # corpus files
    "corpus-missing": lambda d, _: corpus(d, **{"train.en": None}),
    "corpus-empty": lambda d, _: corpus(d, **{"train.en": b""}),
    "corpus-directory": lambda d, _: (corpus(d, **{"train.en": None}), (d / "train.en").mkdir()),
    "corpus-invalid-utf8": lambda d, _: corpus(d, **{"train.en": b"one\ntw\xffo\nthree\n"}),
    "corpus-binary": lambda d, _: corpus(d, **{"train.en": BINARY}),
    "corpus-truncated-gzip": lambda d, _: corpus(d, src="train.en.gz", **{"train.en.gz": gz(GOOD_EN, keep=0.5)}),
    "corpus-not-gzip": lambda d, _: corpus(d, src="train.en.gz", **{"train.en.gz": GOOD_EN}),
    "corpus-line-counts": lambda d, _: corpus(d, **{"train.it": GOOD_IT[: GOOD_IT.rindex("c")]}),
    "corpus-blank-lines-only": lambda d, _: corpus(d, **{"train.en": "\n" * 20, "train.it": " \n" * 20}),
    "corpus-valid-missing": lambda d, _: corpus(d, **{"valid.it": None}),
    "corpus-crlf": lambda d, _: (write(d, "src.txt", "one\r\ntwo\r\n"), write(d, "ref.txt", "uno\r\ndue\r\n")),
    "evaluate-truncated-gzip": lambda d, _: (write(d, "src.en.gz", gz(LINES, keep=0.5)), write(d, "ref.it", LINES)),
    "evaluate-line-counts": lambda d, _: (write(d, "src.en", "one\ntwo\nthree\n"), write(d, "ref.it", "uno\ndue\n")),
    "glossary-no-tab": lambda d, _: (write(d, "terms.tsv", "two\tdue\nthree tre\n"), write(d, "in.txt", "one\n")),
    "glossary-conflicting-terms": lambda d, _: (
        write(d, "terms.tsv", "two\tdue\nTwo\tdue | tre\n"),
        write(d, "in.txt", "one\n"),
    ),
    "do-not-translate-missing": lambda d, _: write(d, "in.txt", "one\n"),
    "translate-truncated-gzip": lambda d, _: write(d, "in.txt.gz", gz(LINES, keep=0.5)),
    # recipes
    "recipe-missing": lambda d, _: None,
    "recipe-empty": lambda d, _: write(d, "r.toml", ""),
    "recipe-directory": lambda d, _: (d / "r.toml").mkdir(),
    "recipe-broken-toml": lambda d, _: write(d, "r.toml", "[train\nmax_steps = 1\n"),
    "recipe-binary": lambda d, _: write(d, "r.toml", BINARY),
    "recipe-unknown-section": lambda d, _: write(d, "r.toml", "[trian]\nmax_steps = 1\n"),
    "recipe-unknown-key": lambda d, _: write(d, "r.toml", "[train]\nmax_step = 1\n"),
    "recipe-wrong-type": lambda d, _: write(d, "r.toml", '[train]\nmax_steps = "ten"\n'),
    "recipe-invalid-value": lambda d, _: write(d, "r.toml", "[model]\ndropout = 1.5\n"),
    "recipe-table-as-value": lambda d, _: write(d, "r.toml", "train = 3\n"),
    "recipe-unknown-preset": lambda d, _: write(d, "r.toml", '[model]\npreset = "huge"\n'),
    "recipe-reserved-key": lambda d, _: write(d, "r.toml", "[model]\nsrc_vocab_size = 100\n"),
    "recipe-bad-literal": lambda d, _: write(d, "r.toml", '[model]\npositional = "fourier"\n'),
    "override-no-value": lambda d, _: write(d, "r.toml", ""),
    "override-no-section": lambda d, _: write(d, "r.toml", ""),
    "override-wrong-type": lambda d, _: write(d, "r.toml", ""),
    "recipe-old-bf16": lambda d, _: write(d, "r.toml", "[train]\nbf16 = true\n"),
    "recipe-extends-cycle": lambda d, _: write(d, "r.toml", 'extends = "r.toml"\n'),
    "train-fp16-on-cpu": lambda d, _: write(d, "r.toml", ""),
    **dict.fromkeys(
        [
            "recipe-not-finite",
            "recipe-adam-eps-negative",
            "recipe-threads-huge",
            "recipe-timeout-huge",
            "recipe-out-dir-empty",
            "recipe-language-empty",
            "recipe-vocab-size-huge",
            "recipe-subword-nbest-huge",
            "recipe-subword-samples-huge",
            "recipe-guided-alignment-negative",
            "recipe-guided-alignment-no-decoder",
            "recipe-one-language",
            "recipe-direction-unknown",
            "recipe-direction-same",
            "recipe-languages-files-pattern",
        ],
        lambda d, _: write(d, "r.toml", ""),
    ),
    "prepare-guided-alignment-no-eflomal": lambda d, _: corpus(d),  # and no eflomal: MISSING_MODULES
    "prepare-guided-alignment-no-eflomal-six-directions": lambda d, _: corpus(  # and no eflomal: MISSING_MODULES
        d, **{"train.de": GOOD_IT.replace("uno", "eins"), "valid.de": "eins\n"}
    ),
    # checkpoints
    "ckpt-missing": lambda d, _: write(d, "in.txt", "one\n"),
    "ckpt-file": lambda d, _: (write(d, "ckpt", "not a directory"), write(d, "in.txt", "one\n")),
    "ckpt-config-missing": checkpoint(lambda c: (c / "config.json").unlink()),
    "ckpt-config-invalid-json": checkpoint(lambda c: (c / "config.json").write_text('{"model": {\n')),
    "ckpt-config-not-object": checkpoint(lambda c: (c / "config.json").write_text("[]\n")),
    "ckpt-config-unknown-field": checkpoint(edit_config(lambda c: c["model"].update(d_modle=16))),
    "ckpt-config-invalid-value": checkpoint(edit_config(lambda c: c["model"].update(n_heads=3))),
    "ckpt-config-missing-field": checkpoint(edit_config(lambda c: c["model"].pop("src_vocab_size"))),
    "ckpt-config-shapes": checkpoint(edit_config(lambda c: c["model"].update(d_model=32, d_ff=64))),
    "ckpt-config-layers": checkpoint(edit_config(lambda c: c["model"].update(n_decoder_layers=2))),
    "ckpt-weights-missing": checkpoint(lambda c: (c / "model.safetensors").unlink()),
    "ckpt-weights-empty": checkpoint(lambda c: (c / "model.safetensors").write_bytes(b"")),
    "ckpt-weights-truncated": checkpoint(
        lambda c: (c / "model.safetensors").write_bytes((c / "model.safetensors").read_bytes()[:-100])
    ),
    "ckpt-weights-pickle": checkpoint(
        lambda c: (c / "model.safetensors").write_bytes(b"\x80\x04\x95\x0b\x00\x00\x00\x00\x00\x00\x00}\x94.")
    ),
    "ckpt-weights-nan": checkpoint(nan_weight),
    "ckpt-tokenizer-not-utf8": checkpoint(
        lambda c: (c / "source.spm").write_bytes((c / "source.spm").read_bytes().replace(b"<0x00>", b"\xff0x00>", 1))
    ),
    "ckpt-tokenizer-missing": checkpoint(lambda c: (c / "source.spm").unlink()),
    "ckpt-tokenizer-json-missing": checkpoint(lambda c: (c / "tokenizer.json").unlink()),
    "ckpt-tokenizer-corrupt": checkpoint(lambda c: (c / "target.spm").write_bytes(BINARY)),
    # imported models
    **dict.fromkeys(["import-no-languages", "import-no-target", "import-language-blank"], marian_naming_no_languages),
    # CLI values
    **dict.fromkeys(
        [
            "beam-zero",
            "beam-negative",
            "max-len-negative",
            "batch-zero",
            "length-penalty-nan",
            "length-penalty-inf",
            "length-penalty-word",
            "quantize-unknown",
            "unknown-flag",
            "checkpoint-flag-missing",
            "beam-over-vocabulary",
            "length-penalty-huge",
            "max-len-b-huge",
            "evidence-ctranslate2",
            "alignment-head-negative",
            "alignment-head-over",
            "alignment-layer-zero",
            "length-ratio-negative",
            "pair-not-the-models",
            "pair-half",
            "zero-shot-without-pair",
            "evaluate-without-src",
            "all-directions-with-src",
        ],
        lambda d, _: write(d, "in.txt", "one\n"),
    ),
    **dict.fromkeys(
        [
            "input-empty-path",
            "out-empty-path",
            "data-from-empty-path",
            "attention-empty-sentence",
            "inspect-empty-sentence",
            "inspect-top-k-huge",
            "quickstart-minutes-nan",
            "quickstart-steps-negative",
            "serve-port-too-large",
            "serve-host-empty",
            "serve-host-unknown",
            "serve-host-not-a-name",
            "serve-threads-huge",
            "translate-threads-negative",
            "translate-threads-huge",
            "serve-wait-huge",
            "serve-timeout-zero",
        ],
        lambda d, _: None,
    ),
    # I/O
    "output-missing-directory": lambda d, _: write(d, "in.txt", "one\n"),
    "output-is-directory": lambda d, _: (write(d, "in.txt", "one\n"), (d / "out").mkdir()),
    "hyp-out-missing-directory": lambda d, _: (write(d, "src.en", "one\n"), write(d, "ref.it", "uno\n")),
    "stdin-invalid-utf8": lambda d, _: write(d, "in.txt", b"one\ntwo\nthr\xe9e\n"),
    "input-invalid-utf8": lambda d, _: write(d, "in.txt", b"one\ntwo\nthr\xe9e\n"),
    "input-missing": lambda d, _: None,
    "input-binary": lambda d, _: write(d, "in.bin", BINARY),
    "stdin-nul": lambda d, _: write(d, "in.txt", "one\x00two\n\x00\nthree\n"),
    "stdin-long-line": lambda d, _: write(d, "in.txt", "one\n" + "two " * 12_500 + "\nthree\n"),
    "stdin-long-word": lambda d, _: write(d, "in.txt", "one\n" + "x" * 50_000 + "\nthree\n"),
    "stdin-empty": lambda d, _: write(d, "in.txt", ""),
    "stdin-no-final-newline": lambda d, _: write(d, "in.txt", "one\ntwo"),
    "stdin-separators": lambda d, _: write(d, "in.txt", "one\x0ctwo\x1cthree\u2028four\x85five\vsix\nseven\n"),
    "stdin-crlf": lambda d, _: write(d, "in.txt", "one\r\ntwo\r\n"),
    "stdin-blank-lines": lambda d, _: write(d, "in.txt", "one\n\n \t \ntwo\n"),
    # replays
    "replay-run-missing": lambda d, _: None,
    "replay-not-a-run": lambda d, _: (d / "empty").mkdir(),
    "replay-several-sentences": lambda d, ckpt: kept_run(d, ckpt),
    "replay-empty-reference": lambda d, ckpt: kept_run(d, ckpt),
    "replay-one-language": lambda d, ckpt: kept_run(d, ckpt),
    "replay-no-metrics": lambda d, ckpt: kept_run(d, ckpt),
    # documents
    "file-unknown-format": lambda d, _: write(d, "report.rtf", b"{\\rtf1 one}"),
    "file-format-unknown": lambda d, _: write(d, "report.txt", "one\n"),
    "file-missing": lambda d, _: None,
    "file-empty-docx": lambda d, _: write(d, "d.docx", b""),
    "file-truncated-docx": lambda d, _: write(d, "d.docx", docs.word("two")[:5000]),
    "file-claims-another-format": lambda d, _: write(d, "d.docx", docs.presentation()),
    "file-zip-bomb": lambda d, _: write(d, "d.docx", docs.zipped(("word/document.xml", b"\0" * 2_000_000))),
    "file-too-many-entries": lambda d, _: write(d, "d.docx", docs.zipped(*[(f"{k}.xml", b"") for k in range(10_001)])),
    "file-path-traversal": lambda d, _: write(d, "d.docx", docs.outside()),
    "file-malformed-xml-docx": lambda d, _: write(d, "d.docx", docs.malformed(docs.word("two"), "word/document.xml")),
    "file-malformed-xml-pptx": lambda d, _: write(
        d, "p.pptx", docs.malformed(docs.presentation(), "ppt/presentation.xml")
    ),
    "file-entity-expansion": lambda d, _: write(d, "d.docx", docs.entities_in_word()),
    "file-xliff-entities": lambda d, _: write(d, "app.xlf", docs.BILLION_LAUGHS + b"<xliff/>"),
    "file-xliff-not-xml": lambda d, _: write(d, "app.xlf", "<xliff"),
    "file-po-broken": lambda d, _: write(d, "app.po", 'msgid "one"\nmsgstr ""\nnot gettext\n'),
    "file-srt-latin1": lambda d, _: write(
        d, "talk.srt", "1\n00:00:01,000 --> 00:00:02,000\ncaf\xe9\n".encode("latin-1")
    ),
    "file-srt-not-subtitles": lambda d, _: write(d, "talk.srt", "one two\nthree\n"),
    "file-vtt-empty": lambda d, _: write(d, "talk.vtt", ""),
    "file-epub-no-container": lambda d, _: write(d, "book.epub", docs.zipped(("mimetype", b"application/epub+zip"))),
    "file-epub-page-latin1": lambda d, _: write(
        d, "book.epub", docs.edited(epub_book(["<p>one</p>"]), OEBPS_p0_xhtml="<p>caf\xe9</p>".encode("latin-1"))
    ),
    "file-epub-package-broken": lambda d, _: write(d, "book.epub", docs.malformed(epub_book([]), "OEBPS/content.opf")),
    "file-pdf-not-pdf": lambda d, _: write(d, "report.pdf", "one two\n"),
    "file-pdf-encrypted": lambda d, _: write(d, "report.pdf", docs.encrypted_pdf()),
    "file-pdf-no-pymupdf": lambda d, _: write(d, "report.pdf", b"%PDF-1.7"),
    "file-out-is-directory": lambda d, _: (write(d, "in.txt", "one\n"), (d / "out").mkdir()),
    "file-report-without-file": lambda d, _: write(d, "in.txt", "one\n"),
    "file-empty-txt": lambda d, _: write(d, "in.txt", ""),
    "file-macros": lambda d, _: write(d, "d.docx", docs.with_macros()),
}


# Rows about an optional package that is not installed: the module is hidden (`import` raises ImportError).
MISSING_MODULES = {
    "prepare-guided-alignment-no-eflomal": "eflomal",
    "prepare-guided-alignment-no-eflomal-six-directions": "eflomal",
    "file-pdf-no-pymupdf": "pymupdf",
}


def run_cli(row: dict[str, str], directory: Path, ckpt: Path, capsys, monkeypatch) -> tuple[int, str, str, bytes]:
    """Run a `tnmt ...` row in `directory`: (exit status, stdout, stderr, stdin bytes)."""
    from tnmt.cli import main

    words = shlex.split(row["command"].replace("{ckpt}", str(ckpt)))
    assert words[0] == "tnmt", row["command"]
    stdin = b""
    if "<" in words:
        stdin = (directory / words[words.index("<") + 1]).read_bytes()
        words = words[: words.index("<")]
    monkeypatch.chdir(directory)
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8"))
    capsys.readouterr()
    try:
        status = main(words[1:])
    except SystemExit as e:  # argparse
        status = e.code
    out, err = capsys.readouterr()
    return status, out, err, stdin


def matches(expected: str, actual: str) -> bool:
    """Whether `actual` is the documented message; a "…" in the doc stands for any text (a long key list)."""
    return re.fullmatch(".*?".join(map(re.escape, expected.split("…"))), actual, flags=re.DOTALL) is not None


@pytest.mark.parametrize("row_id", [id_ for id_, row in ROWS.items() if row["command"].startswith("tnmt ")])
def test_cli_row(row_id, tiny_checkpoint, tmp_path, capsys, monkeypatch):
    row = ROWS[row_id]
    INPUTS[row_id](tmp_path, tiny_checkpoint)
    if row_id in MISSING_MODULES:
        monkeypatch.setitem(sys.modules, MISSING_MODULES[row_id], None)
    before = sorted(tmp_path.rglob("*"))
    status, out, err, stdin = run_cli(row, tmp_path, tiny_checkpoint, capsys, monkeypatch)
    if row_id.startswith("file-") and status:  # a refused document leaves nothing behind
        assert sorted(tmp_path.rglob("*")) == before
    expected = "" if row["message"] == NOTHING else row["message"] + "\n"
    assert status == int(row["status"]) and matches(expected, err), (err, status)
    assert row["kind"] == ("error" if status else "behaviour")
    if row["command"].startswith("tnmt translate") and status == 0:  # one output line per input line, always
        lines_in = stdin.count(b"\n") + (not stdin.endswith(b"\n") if stdin else 0)
        assert out.count("\n") == lines_in and (not out or out.endswith("\n"))


# --- HTTP ---


@pytest.fixture(scope="module")
def serve_config():
    from tnmt.config import ServeConfig

    return ServeConfig(
        max_texts=4, max_chars=100, max_body_bytes=2000, max_file_bytes=50_000, max_queue=2, timeout_s=1.0
    )


@pytest.fixture
def client(tiny_checkpoint, serve_config):
    """The real app on the tiny checkpoint, its batcher not started: a request that passes validation waits."""
    from fastapi.testclient import TestClient

    from tnmt.serve.app import create_app
    from tnmt.serve.models import load_models

    models = load_models([tiny_checkpoint], serve_config)
    return TestClient(create_app(models, serve_config)), models


def queue_full(client, models) -> object:
    translator = models[0].translator
    models[0].batcher.submit(translator.prepare(["one", "two"]), translator.decode)
    return client.post("/v1/translate", json={"text": "three"})


def serving(models, *pairs: str) -> object:
    """A client of the app serving the tiny model as each of `pairs` ("de-fr"): for errors found before translating."""
    from dataclasses import replace

    from fastapi.testclient import TestClient

    from tnmt.config import ServeConfig
    from tnmt.serve.app import create_app

    served = [replace(models[0], source=pair.split("-")[0], target=pair.split("-")[1]) for pair in pairs]
    return TestClient(create_app(served, ServeConfig(max_chars=100)))


def upload(client, name: str, data: bytes, path: str = "/v1/translate_file", **form: str) -> object:
    """A document sent as a browser's form sends it (multipart: `file` and the other fields)."""
    return client.post(path, files={"file": (name, data)}, data={"source": "en", "target": "it", **form})


SPECIAL_REQUESTS: dict[str, Callable] = {
    "http-file-unknown-format": lambda c, _: upload(c, "report.rtf", b"{\\rtf1 one}"),
    "http-file-format-unknown": lambda c, _: upload(c, "report.txt", b"one", format="rtf"),
    "http-file-not-a-document": lambda c, _: upload(c, "d.docx", b"\x89PNG\r\n\x1a\n" + bytes(100)),
    "http-file-zip-bomb": lambda c, _: upload(c, "d.docx", docs.zipped(("word/document.xml", b"\0" * 2_000_000))),
    "http-file-malformed-xml": lambda c, _: upload(c, "d.docx", docs.malformed(docs.word("two"), "word/document.xml")),
    "http-file-entity-expansion": lambda c, _: upload(c, "d.docx", docs.entities_in_word()),
    "http-file-path-traversal": lambda c, _: upload(
        c, "d.docx", docs.edited(docs.word("two"), **{"../../evil.xml": b"x"})
    ),
    "http-file-too-large": lambda c, _: upload(c, "in.txt", b"one " * 15_000),
    "http-replay-too-long": lambda c, _: c.post("/v1/replay", json={"text": "one " * 60}),
    "http-file-glossary-not-json": lambda c, _: upload(c, "in.txt", b"one", glossary="one=uno"),
    "http-file-glossary-shape": lambda c, _: upload(c, "in.txt", b"one", glossary='[{"source": "one"}]'),
    "http-file-progress-token": lambda c, _: upload(c, "in.txt", b"one", progress="short"),
    "http-file-epub-no-package": lambda c, _: upload(
        c, "b.epub", docs.edited(epub_book([]), **{"META-INF_container_xml": b"<container/>"})
    ),
    "http-file-pdf-not-pdf": lambda c, _: upload(c, "report.pdf", b"one two\n"),
    "http-file-missing": lambda c, _: c.post("/v1/translate_file", data={"source": "en", "target": "it"}),
    "libre-file-not-a-document": lambda c, _: upload(c, "d.docx", b"\x89PNG" + bytes(100), "/translate_file"),
    "libre-file-malformed-xml": lambda c, _: upload(
        c, "p.pptx", docs.malformed(docs.presentation(), "ppt/presentation.xml"), "/translate_file"
    ),
    "libre-file-unknown-format": lambda c, _: upload(c, "report.rtf", b"{\\rtf1 one}", "/translate_file"),
    "http-body-too-large": lambda c, _: c.post("/v1/translate", json={"text": "x" * 3000}),
    "http-chunked-body": lambda c, _: c.post("/v1/translate", content=iter([b'{"text": ', b'"one"}'])),
    "http-too-many-texts": lambda c, _: c.post("/v1/translate", json={"text": ["one"] * 5}),
    "http-text-too-long": lambda c, _: c.post("/v1/translate", json={"text": "one " * 30}),
    "http-inspect-translation-too-long": lambda c, _: c.post(
        "/v1/inspect", json={"text": "one", "translation": "uno " * 60}
    ),
    "http-queue-full": queue_full,
    "http-glossary-too-large": lambda c, _: c.post("/v1/translate", json={"text": "one", "avoid": ["uno"] * 300}),
    "libre-form-missing-q": lambda c, _: c.post("/translate", data={"source": "en", "target": "it"}),
    "libre-auto-no-model-from-detected": lambda _, models: serving(models, "en-it", "de-fr").post(
        "/translate", json={"q": "Zwei Hunde spielen im Schnee.", "source": "auto", "target": "it"}
    ),
    "libre-detect-text-too-long": lambda c, _: c.post("/detect", json={"q": "one " * 30}),
    "libre-detect-unknown-language": lambda _, models: serving(models, "xx-it").post("/detect", json={"q": "one"}),
}


@pytest.mark.parametrize("row_id", [id_ for id_, row in ROWS.items() if not row["command"].startswith("tnmt ")])
def test_http_row(row_id, client):
    row = ROWS[row_id]
    app_client, models = client
    if row_id in SPECIAL_REQUESTS:
        response = SPECIAL_REQUESTS[row_id](app_client, models)
    else:
        method, path, *body = row["command"].split(" ", 2)
        headers = {"content-type": "application/json"}
        response = app_client.request(method, path, content=body[0] if body else None, headers=headers)
    assert response.status_code == int(row["status"]) and set(response.json()) == {"error"}
    assert matches(row["message"], response.json()["error"]), response.json()
    assert row["kind"] == "error"


def test_every_row_has_an_input_and_every_input_a_row():
    cli = {id_ for id_, row in ROWS.items() if row["command"].startswith("tnmt ")}
    assert cli == set(INPUTS)
    assert set(SPECIAL_REQUESTS) <= set(ROWS)
    assert len(ROWS) >= 45
