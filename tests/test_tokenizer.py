import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tnmt.data.corpus import read_lines
from tnmt.data.tokenizer import Tokenizer
from tnmt.errors import UserError


@pytest.fixture(scope="module")
def tokenizer(multi30k_dir: Path) -> Tokenizer:
    """A small joint en+de model (1.2 s to train); byte fallback makes any model lossless."""
    en = read_lines(multi30k_dir / "train.en.gz")[:3000]
    de = read_lines(multi30k_dir / "train.de.gz")[:3000]
    return Tokenizer.train(en + de, vocab_size=1000)


def sentencepiece_normalization(text: str) -> str:
    """The documented normalisation: "▁" is a space; spaces are stripped at the ends and collapsed."""
    return " ".join(word for word in text.replace("\u2581", " ").split(" ") if word)


def test_special_ids_and_size(tokenizer: Tokenizer) -> None:
    assert (tokenizer.pad_id, tokenizer.bos_id, tokenizer.eos_id, tokenizer.unk_id) == (0, 1, 2, 3)
    assert tokenizer.special_ids == {"pad_id": 0, "bos_id": 1, "eos_id": 2}
    assert tokenizer.vocab_size == 1000
    assert tokenizer.target_pieces([0, 1, 2, 3, 4]) == ["<pad>", "<s>", "</s>", "<unk>", "<0x00>"]


@pytest.mark.parametrize("lang", ["en", "de"])
def test_whole_validation_set_round_trips_exactly(tokenizer: Tokenizer, multi30k_dir: Path, lang: str) -> None:
    lines = read_lines(multi30k_dir / f"val.{lang}.gz")
    assert len(lines) == 1014
    # No val line has leading, trailing or repeated spaces, so none needs normalising (val.de has a
    # no-break space, which is kept as it is).
    assert sum(sentencepiece_normalization(line) != line for line in lines) == 0
    ids = tokenizer.encode_source_batch(lines)
    assert tokenizer.decode_target_batch(ids) == lines
    assert tokenizer.unk_id not in {i for sentence in ids for i in sentence}


def test_french_validation_set_round_trips_up_to_space_normalisation(
    tokenizer: Tokenizer, complete_multi30k_dir: Path
) -> None:
    lines = read_lines(complete_multi30k_dir / "val.fr.gz")  # a language the model never saw: byte fallback
    decoded = tokenizer.decode_target_batch(tokenizer.encode_source_batch(lines))
    assert decoded == [sentencepiece_normalization(line) for line in lines]
    # 13 lines have a trailing or doubled space, e.g. "... un chien , " -> "... un chien ,"
    assert sum(d != line for d, line in zip(decoded, lines, strict=True)) == 13


@settings(max_examples=300, deadline=None)
@given(st.text(st.one_of(st.sampled_from(" \t\n\u00a0\u2581"), st.characters(codec="utf-8"))))
def test_any_text_round_trips_up_to_space_normalisation(tokenizer: Tokenizer, text: str) -> None:
    assert tokenizer.decode_target(tokenizer.encode_target(text)) == sentencepiece_normalization(text)


def test_encode_adds_no_specials_and_decode_skips_them(tokenizer: Tokenizer) -> None:
    ids = tokenizer.encode_source("Ein Hund läuft.")
    assert ids and not {0, 1, 2} & set(ids)
    assert tokenizer.encode_target("Ein Hund läuft.") == ids
    assert tokenizer.encode_source_batch(["Ein Hund läuft.", ""]) == [ids, []]
    assert tokenizer.encode_target_batch(["Ein Hund läuft."]) == [ids]
    padded = [tokenizer.bos_id, *ids, tokenizer.eos_id, tokenizer.pad_id, tokenizer.pad_id]
    assert tokenizer.decode_target(padded) == "Ein Hund läuft."


def test_pieces_label_the_ids(tokenizer: Tokenizer) -> None:
    text = "A dog runs."
    pieces = tokenizer.source_pieces(text)
    assert "".join(pieces).replace("\u2581", " ").strip() == text
    assert tokenizer.target_pieces(tokenizer.encode_target(text)) == pieces


def test_training_is_deterministic(multi30k_dir: Path) -> None:
    texts = read_lines(multi30k_dir / "val.en.gz") + read_lines(multi30k_dir / "val.de.gz")
    first, second = (Tokenizer.train(texts, vocab_size=1000) for _ in range(2))
    assert first.target_pieces(range(1000)) == second.target_pieces(range(1000))
    assert first.encode_source_batch(texts) == second.encode_source_batch(texts)


def test_training_errors_are_user_errors() -> None:
    with pytest.raises(UserError, match=r"vocab_size=5000\): Vocabulary size too high \(5000\)"):
        Tokenizer.train(["a tiny corpus", "with few pieces"], vocab_size=5000)


def test_save_and_load(tokenizer: Tokenizer, tmp_path: Path) -> None:
    tokenizer.save(tmp_path / "tok")
    files = sorted(p.name for p in (tmp_path / "tok").iterdir())
    assert files == ["source.spm", "target.spm", "tokenizer.json"]
    config = json.loads((tmp_path / "tok" / "tokenizer.json").read_text())
    ids = {"pad_id": 0, "bos_id": 1, "eos_id": 2, "unk_id": 3}
    assert config == {"format_version": 1, **ids, "has_vocab": False}
    loaded = Tokenizer.load(tmp_path / "tok")
    text = "Zwei Männer stehen am Herd."
    assert loaded.encode_source(text) == tokenizer.encode_source(text)
    assert loaded.decode_target(tokenizer.encode_target(text)) == text
    assert loaded.vocab_size == tokenizer.vocab_size


def test_load_errors_name_the_file(tokenizer: Tokenizer, tmp_path: Path) -> None:
    directory = tmp_path / "tok"
    with pytest.raises(UserError, match=f"^{re.escape(str(directory / 'tokenizer.json'))}: no such file$"):
        Tokenizer.load(directory)
    tokenizer.save(directory)
    (directory / "source.spm").write_bytes(b"not a model")
    source_spm = re.escape(str(directory / "source.spm"))
    with pytest.raises(UserError, match=f"^{source_spm}: not a sentencepiece model"):
        Tokenizer.load(directory)
    (directory / "source.spm").write_bytes(b"")
    with pytest.raises(UserError, match="source.spm: not a sentencepiece model"):
        Tokenizer.load(directory)
    tokenizer.save(directory)
    (directory / "target.spm").unlink()
    with pytest.raises(UserError, match="target.spm: no such file"):
        Tokenizer.from_files(
            directory / "source.spm", directory / "target.spm", vocab=None, pad_id=0, bos_id=1, eos_id=2, unk_id=3
        )
    (directory / "tokenizer.json").write_text('{"format_version": 1,\n "pad_id": }')
    with pytest.raises(UserError, match=f"^{re.escape(str(directory / 'tokenizer.json'))}:2: invalid JSON"):
        Tokenizer.load(directory)
    (directory / "tokenizer.json").write_text('{"format_version": 99}')
    with pytest.raises(UserError, match="tokenizer.json: format_version is 99, this tnmt reads 1"):
        Tokenizer.load(directory)


def test_explicit_vocabulary_renumbers_ids(tokenizer: Tokenizer, tmp_path: Path) -> None:
    """MarianMT-style: separate model files, ids from a vocabulary list, unknown pieces -> unk."""
    tokenizer.save(tmp_path / "spm")
    pieces = tokenizer.target_pieces(range(tokenizer.vocab_size))
    text = "A man in a red shirt."
    dropped = tokenizer.source_pieces(text)[1]  # a piece the explicit vocabulary lacks
    vocab = [p for p in reversed(pieces) if p != dropped] + ["<extra>"]
    marian = Tokenizer.from_files(
        tmp_path / "spm" / "source.spm",
        tmp_path / "spm" / "target.spm",
        vocab=vocab,
        pad_id=vocab.index("<pad>"),
        bos_id=vocab.index("<s>"),
        eos_id=vocab.index("</s>"),
        unk_id=vocab.index("<unk>"),
    )
    assert marian.vocab_size == len(pieces)
    assert marian.source_vocabulary() == vocab  # source ids follow the explicit vocabulary too
    expected = [vocab.index(p) if p in vocab else marian.unk_id for p in tokenizer.source_pieces(text)]
    assert marian.encode_source(text) == expected
    assert marian.unk_id in expected
    other = "Two dogs play."
    assert marian.target_pieces(marian.encode_target(other)) == tokenizer.source_pieces(other)
    assert marian.decode_target([marian.bos_id, *marian.encode_target(other), marian.eos_id]) == other

    marian.save(tmp_path / "marian")
    assert json.loads((tmp_path / "marian" / "vocab.json").read_text()) == vocab
    assert Tokenizer.load(tmp_path / "marian").encode_source(text) == expected
    tokenizer.save(tmp_path / "marian")  # overwriting without a vocabulary removes the stale one
    assert not (tmp_path / "marian" / "vocab.json").exists()
    assert Tokenizer.load(tmp_path / "marian").encode_source(text) == tokenizer.encode_source(text)


def test_special_ids_must_be_in_the_vocabulary(tokenizer: Tokenizer, tmp_path: Path) -> None:
    tokenizer.save(tmp_path)
    with pytest.raises(ValueError, match="pad_id=7 is outside the vocabulary of 3 pieces"):
        Tokenizer.from_files(
            tmp_path / "source.spm",
            tmp_path / "target.spm",
            vocab=["a", "b", "c"],
            pad_id=7,
            bos_id=1,
            eos_id=2,
            unk_id=0,
        )


def test_separate_models_number_their_pieces_independently(numbers_corpus: Path, tmp_path: Path) -> None:
    english = (numbers_corpus / "train.en").read_text().splitlines()
    italian = (numbers_corpus / "train.it").read_text().splitlines()
    separate = Tokenizer.train_separate(english, italian, vocab_size=300)
    assert separate.source_vocab_size == separate.vocab_size == 300
    assert separate.target_pieces(separate.encode_target("tremila")) == ["▁tremila"]  # a whole Italian word
    assert separate.decode_target(separate.encode_target("duemilacinquecento")) == "duemilacinquecento"
    assert separate.fingerprint() != Tokenizer.train(english + italian, vocab_size=300).fingerprint()
    # sizes may differ: a 290-piece English model with the 300-piece Italian one
    Tokenizer.train_separate(english, italian, vocab_size=290).save(tmp_path / "small")
    separate.save(tmp_path / "large")
    ids = {"pad_id": 0, "bos_id": 1, "eos_id": 2, "unk_id": 3}
    small_source, large_target = tmp_path / "small" / "source.spm", tmp_path / "large" / "target.spm"
    mixed = Tokenizer.from_files(small_source, large_target, vocab=None, **ids)
    assert (mixed.source_vocab_size, mixed.vocab_size) == (290, 300)
    source_pieces = mixed.source_vocabulary()
    assert len(source_pieces) == 290 and source_pieces[mixed.encode_source("three")[0]] == "▁three"
    assert mixed.encode_target("tremila") == separate.encode_target("tremila")
    loaded = Tokenizer.load(tmp_path / "large")
    assert loaded.fingerprint() == separate.fingerprint()
    assert loaded.encode_source("three thousand") == separate.encode_source("three thousand")


@pytest.fixture(scope="module")
def tiny_tokenizer(tiny_checkpoint: Path) -> Tokenizer:
    """Trained on a few hundred number words, without Multi30k: most characters are spelled as bytes."""
    return Tokenizer.load(tiny_checkpoint)


@given(st.text(st.one_of(st.sampled_from(" \t\n\x00\u00a0\u2581\u2028\ufeff\ud800\udfff"), st.characters())))
def test_any_python_string_round_trips_up_to_the_documented_normalisation(tiny_tokenizer: Tokenizer, text: str) -> None:
    """Lone surrogates included: they become U+FFFD (see the module docstring)."""
    expected = sentencepiece_normalization(re.sub("[\ud800-\udfff]", "\ufffd", text))
    assert tiny_tokenizer.decode_target(tiny_tokenizer.encode_target(text)) == expected
    # one piece per source id: attention maps are labelled by these pieces (translate/translator.py)
    assert len(tiny_tokenizer.source_pieces(text)) == len(tiny_tokenizer.encode_source(text))
