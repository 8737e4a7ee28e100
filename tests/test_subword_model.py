"""data/subword_model.py: sentencepiece models trained with tnmt's ids and normalisation, and files checked."""

import pytest

from tnmt.data.subword_model import load_model, train_model
from tnmt.errors import UserError

TEXTS = [f"the {word} dog runs to the {word} house" for word in ("red", "big", "small", "old", "new")] * 20


def test_a_model_numbers_the_specials_first_and_keeps_every_character(tmp_path):
    model = train_model(TEXTS, 280, "unigram", 1.0, control_symbols=("<2de>",))
    assert [model.id_to_piece(i) for i in range(5)] == ["<pad>", "<s>", "</s>", "<unk>", "<2de>"]
    assert model.decode(model.encode("the red dog: ÿ")) == "the red dog: ÿ"  # byte fallback, identity
    path = tmp_path / "m.spm"
    path.write_bytes(model.serialized_model_proto())
    assert load_model(path).encode("the old house") == model.encode("the old house")


def test_a_vocabulary_the_text_cannot_fill_is_one_line():
    with pytest.raises(UserError, match=r"^cannot train the tokenizer \(vocab_size=5000\): "):
        train_model(TEXTS, 5000, "unigram", 1.0)


@pytest.mark.parametrize("content", [b"", b"not a model"])
def test_a_file_that_is_no_model_is_refused_in_one_line(tmp_path, content):
    path = tmp_path / "m.spm"
    path.write_bytes(content)
    with pytest.raises(UserError, match="not a sentencepiece model"):
        load_model(path)
    with pytest.raises(UserError, match="no such file"):
        load_model(tmp_path / "missing.spm")
