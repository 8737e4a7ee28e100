from pathlib import Path

import numpy as np
import pytest

from tnmt.config import DataConfig
from tnmt.data import dataset
from tnmt.data.corpus import ParallelCorpus
from tnmt.data.dataset import ConcatPairs, EncodedPairs, corpus_files, encode, read_split, train_tokenizer
from tnmt.errors import UserError

EN = ["a  small cat sits on the mat ", "the dog runs", "", "a man is riding a very long red bicycle down the hill"]
DE = ["eine kleine katze sitzt auf der matte", "der hund läuft", "leer", "ein mann fährt ein rad"]


def files_config(tmp_path: Path, **overrides) -> DataConfig:
    """A "files" recipe over tiny corpora written here: train = EN/DE, valid = their first two lines."""
    paths = {}
    for split, n in (("train", 4), ("valid", 2)):
        for side, lines in (("src", EN), ("tgt", DE)):
            path = tmp_path / f"{split}.{side}"
            path.write_text("\n".join(lines[:n]) + "\n", encoding="utf-8")
            paths[f"{split}_{side}"] = str(path)
    return DataConfig(corpus="files", **paths, **overrides)


class WordTokenizer:
    """A stand-in tokenizer: one id per word (its length), so sentence lengths are known by hand."""

    def encode_source_batch(self, texts: list[str]) -> list[list[int]]:
        return [[len(word) for word in text.split()] for text in texts]

    encode_target_batch = encode_source_batch


def test_encoded_pairs_lengths_count_the_longer_side_plus_bos_or_eos():
    pairs = EncodedPairs(src=[[5, 6, 7], [8]], tgt=[[9], [10, 11]])
    assert len(pairs) == 2
    assert pairs.lengths() == [4, 3]
    assert pairs.pairs([1, 0]) == [([8], [10, 11]), ([5, 6, 7], [9])]


def test_encode_keeps_every_pair_without_max_len_and_filters_with_it():
    corpus = ParallelCorpus(src=EN, tgt=DE)
    everything = encode(corpus, WordTokenizer())
    assert len(everything) == 4 and everything.src[2] == [] and everything.tgt[0] == [4, 6, 5, 5, 3, 3, 5]
    kept = encode(corpus, WordTokenizer(), max_len=7)  # drops the empty source and the 12-word one
    assert kept.src == [everything.src[0], everything.src[1]]
    assert kept.tgt == [everything.tgt[0], everything.tgt[1]]
    assert len(encode(corpus, WordTokenizer(), max_len=6)) == 1  # the 7-word German line goes too


def test_files_corpus_names_train_and_valid_and_has_no_other_split(tmp_path: Path):
    config = files_config(tmp_path)
    assert corpus_files(config, "train") == (tmp_path / "train.src", tmp_path / "train.tgt")
    assert corpus_files(config, "val") == (tmp_path / "valid.src", tmp_path / "valid.tgt")
    with pytest.raises(UserError, match="only train and val splits, not 'test_2016_flickr'"):
        corpus_files(config, "test_2016_flickr")


@pytest.mark.parametrize("normalize", [True, False])
def test_read_split_reads_the_files_and_normalises_whitespace_if_asked(tmp_path: Path, normalize: bool):
    corpus = read_split(files_config(tmp_path, normalize_whitespace=normalize), "train")
    assert corpus.tgt == DE
    assert corpus.src[0] == ("a small cat sits on the mat" if normalize else EN[0])
    assert corpus.src[1:] == EN[1:]
    valid = read_split(files_config(tmp_path), "val")
    assert len(valid) == 2 and valid.tgt == DE[:2]


def test_read_split_limit_keeps_the_first_pairs(tmp_path: Path):
    corpus = read_split(files_config(tmp_path), "train", limit=3)
    assert corpus.tgt == DE[:3] and len(corpus.src) == 3


def test_read_split_refuses_misaligned_files(tmp_path: Path):
    config = files_config(tmp_path)
    Path(config.train_tgt).write_text("only one line\n", encoding="utf-8")
    with pytest.raises(UserError, match="has 4 lines but .* has 1"):
        read_split(config, "train")


def test_joint_tokenizer_encodes_both_sides_and_filters_on_subword_counts(tmp_path: Path):
    config = files_config(tmp_path, vocab_size=300)  # 4 specials + 256 bytes + the characters + a few pieces
    corpus = read_split(config, "train")
    tokenizer = train_tokenizer(config, corpus)
    assert tokenizer.vocab_size == 300
    everything = encode(corpus, tokenizer)
    assert tokenizer.decode_target(everything.tgt[1]) == "der hund läuft"  # German pieces are in the vocabulary
    assert tokenizer.decode_target(everything.src[1]) == "the dog runs"
    longest = max(len(ids) for ids in everything.src + everything.tgt)
    max_len = longest - 1
    kept = encode(corpus, tokenizer, max_len=max_len)
    expected = [
        i for i in range(4) if 1 <= len(everything.src[i]) <= max_len and 1 <= len(everything.tgt[i]) <= max_len
    ]
    assert kept.src == [everything.src[i] for i in expected] and kept.tgt == [everything.tgt[i] for i in expected]
    assert expected == [0, 1]  # the empty line and the longest pair are gone


def test_separate_vocabularies_learn_one_model_per_side(tmp_path: Path):
    config = files_config(tmp_path, vocab_size=285, joint_vocabulary=False)  # the most these 4 lines allow
    corpus = read_split(config, "train")
    tokenizer = train_tokenizer(config, corpus)
    assert tokenizer.vocab_size == tokenizer.source_vocab_size == 285
    source = tokenizer.encode_source("der hund läuft")  # German spelt with the English model's pieces ...
    target = tokenizer.encode_target("der hund läuft")  # ... and with the German model's own, fewer
    assert len(target) < len(source)
    encoded = encode(corpus, tokenizer)
    assert [tokenizer.decode_target(ids) for ids in encoded.tgt] == corpus.tgt
    joint = train_tokenizer(files_config(tmp_path, vocab_size=285), corpus)
    assert joint.encode_source("der hund läuft") == joint.encode_target("der hund läuft")


def test_multi30k_corpus_names_the_raw_files(multi30k_dir: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("TNMT_DATA_DIR", str(multi30k_dir))  # the local copy: no download
    src, tgt = corpus_files(DataConfig(), "test_2016_flickr")
    assert (src, tgt) == (multi30k_dir / "test_2016_flickr.en.gz", multi30k_dir / "test_2016_flickr.de.gz")
    assert len(read_split(DataConfig(), "val", limit=5)) == 5


def test_multi30k_offline_is_a_user_error_that_says_what_to_do(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(dataset, "find_multi30k", lambda **_: None)
    with pytest.raises(UserError, match="TNMT_DATA_DIR"):
        corpus_files(DataConfig(), "train")


def test_concatenated_pairs_index_the_first_then_the_second():
    class Epochs(EncodedPairs):  # records which epoch it was asked for
        def for_epoch(self, epoch: int) -> EncodedPairs:
            return EncodedPairs(src=[[epoch]], tgt=[[epoch, epoch]])

    both = ConcatPairs(EncodedPairs(src=[[1], [2, 2]], tgt=[[3], [4]]), Epochs(src=[[5, 5, 5]], tgt=[[6]]))
    assert len(both) == 3
    assert both.lengths().tolist() == [2, 3, 4]
    assert both.pairs([2, 0, 1]) == [([5, 5, 5], [6]), ([1], [3]), ([2, 2], [4])]
    later = both.for_epoch(7)
    assert later.pairs([0, 2]) == [([1], [3]), ([7], [7, 7])]


def test_concatenated_pairs_give_the_first_parts_links_and_none_for_the_seconds():
    class Aligned(EncodedPairs):
        def links(self, indices):
            return [np.array([[i, i]]) for i in indices]

    both = ConcatPairs(Aligned(src=[[1], [2]], tgt=[[3], [4]]), EncodedPairs(src=[[5]], tgt=[[6]]))
    assert [links.tolist() for links in both.links([2, 1, 0])] == [[], [[1, 1]], [[0, 0]]]
    assert both.links([2])[0].shape == (0, 2)


def test_concatenated_pairs_start_from_bos_or_from_the_first_parts_tags_then_the_second_start():
    first = EncodedPairs(src=[[1], [2]], tgt=[[3], [4]], start_ids=[9, 8])
    second = EncodedPairs(src=[[5]], tgt=[[6]])
    assert ConcatPairs(first, second).starts([2, 0]) is None  # one-pair corpora: BOS
    tagged = ConcatPairs(first, second, second_start=7)
    assert tagged.starts([2, 1, 0, 2]) == [7, 8, 9, 7]
    assert tagged.for_epoch(3).starts([2]) == [7]


def test_side_lengths_count_each_sides_tokens():
    src, tgt = EncodedPairs([[1, 2], [3]], [[4], [5, 6, 7]]).side_lengths()
    assert src.tolist() == [2, 1] and tgt.tolist() == [1, 3]
