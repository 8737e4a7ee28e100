"""A tokenizer's directory (data/tokenizer_files.py): written and read back exactly, each wrong field named."""

import json
from pathlib import Path

import pytest

from tnmt.data.tokenizer import Tokenizer
from tnmt.data.tokenizer_files import SpecialIds, read_files, write_files
from tnmt.errors import UserError

LINES = [f"{a} {b} and {c}" for a in ("one", "two", "three") for b in ("dog", "cat", "bird") for c in ("red", "blue")]


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> Path:
    directory = tmp_path_factory.mktemp("tok")
    Tokenizer.train(LINES * 5, vocab_size=280, languages=("en", "de")).save(directory)
    return directory


def test_read_gives_back_what_was_written(written: Path, tmp_path: Path) -> None:
    files = read_files(written)
    assert files.target is files.source  # one joint model, read as one
    assert files.ids == SpecialIds(0, 1, 2, 3) and files.languages == ["en", "de"] and files.vocab is None
    vocab = [files.source.id_to_piece(i) for i in range(files.source.get_piece_size())]
    write_files(tmp_path, files.source, files.target, vocab, files.ids, ("en", "de"))
    assert read_files(tmp_path).vocab == vocab
    write_files(tmp_path, files.source, files.target, None, files.ids, ())
    assert not (tmp_path / "vocab.json").exists()  # a vocabulary of before does not outlive its tokenizer
    assert json.loads((tmp_path / "tokenizer.json").read_text())["has_vocab"] is False


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("eos_id", "2", "tokenizer.json: 'eos_id' must be an integer, found '2'"),
        ("languages", "en", "tokenizer.json: 'languages' must be a list of language codes, found 'en'"),
        ("has_vocab", True, "vocab.json: no such file"),
    ],
)
def test_a_wrong_field_is_named(written: Path, tmp_path: Path, field: str, value: object, message: str) -> None:
    for name in ("source.spm", "target.spm"):
        (tmp_path / name).write_bytes((written / name).read_bytes())
    config = json.loads((written / "tokenizer.json").read_text())
    (tmp_path / "tokenizer.json").write_text(json.dumps({**config, field: value}))
    with pytest.raises(UserError, match=message):
        read_files(tmp_path)
