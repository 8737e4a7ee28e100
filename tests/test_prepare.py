"""Preparing a corpus: the same ids as encoding in memory, reused when nothing changed, rebuilt when
anything did, never half-written, never over a user's files; the `tnmt prepare` command; training from it."""

import ast
import json
import os
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import sentencepiece as spm
import torch
from safetensors.torch import load_file

import tnmt.data.prepare as builder
from tnmt.config import DataConfig
from tnmt.data.alignment import split_words, subword_links
from tnmt.data.dataset import EncodedPairs, encode, read_split, train_tokenizer
from tnmt.data.prepare import prepare, reservoir_sample
from tnmt.data.prepared import PreparedPairs
from tnmt.data.tokenizer import Tokenizer
from tnmt.errors import UserError
from tnmt.recipe import load_recipe
from tnmt.train import loop, start


@pytest.fixture
def corpus(numbers_corpus: Path, tmp_path: Path) -> Path:
    """A copy of the numbers corpus that a test may edit, with one over-long and one empty pair added."""
    for name in ("train.en", "train.it", "valid.en", "valid.it"):
        (tmp_path / name).write_bytes((numbers_corpus / name).read_bytes())
    with open(tmp_path / "train.en", "a") as en, open(tmp_path / "train.it", "a") as it:
        en.write("one " * 200 + "\n\n")
        it.write("uno\nvuoto\n")
    return tmp_path


def config(corpus: Path, **overrides) -> DataConfig:
    files = {
        f"{split}_{side}": str(corpus / f"{split}.{lang}")
        for split in ("train", "valid")
        for side, lang in (("src", "en"), ("tgt", "it"))
    }
    return DataConfig(**{"corpus": "files", "vocab_size": 300, "prepare_workers": 1, **files, **overrides})


def in_memory(data: DataConfig, tokenizer: Tokenizer, max_len: int) -> EncodedPairs:
    return encode(read_split(data, "train", limit=data.max_train_pairs), tokenizer, max_len=max_len)


def everything(prepared: PreparedPairs) -> list[tuple[list[int], list[int]]]:
    return prepared.pairs(range(len(prepared)))


@pytest.mark.parametrize("workers", [1, 2])
def test_prepared_ids_equal_the_in_memory_encoding(corpus: Path, tmp_path: Path, monkeypatch, workers: int):
    monkeypatch.setattr(builder, "CHUNK_PAIRS", 64)  # several chunks, so two workers really share the work
    data = config(corpus, prepare_workers=workers)
    prepared = prepare(data, tmp_path / "prepared", max_len=60)
    tokenizer = train_tokenizer(data, read_split(data, "train"))  # the sample is the whole small corpus
    assert prepared.tokenizer().fingerprint() == tokenizer.fingerprint()
    expected = in_memory(data, tokenizer, max_len=60)
    assert len(prepared) == len(expected) == 300  # the over-long and the empty pair are dropped
    assert everything(prepared) == expected.pairs(range(len(expected)))
    lengths = prepared.lengths()
    assert lengths.dtype == np.int64 and lengths.tolist() == expected.lengths()
    manifest = prepared.manifest
    assert manifest["dtype"] == "uint16" and manifest["read"] == 302 and manifest["pairs"] == 300
    assert manifest["src_tokens"] == sum(map(len, expected.src))
    assert os.path.getsize(tmp_path / "prepared" / "src.ids") == 2 * manifest["src_tokens"]


def test_the_log_says_how_many_pairs_were_kept_and_why_others_were_not(corpus: Path, tmp_path: Path, caplog):
    caplog.set_level("INFO", logger="tnmt")
    prepare(config(corpus), tmp_path / "dropped", max_len=60)
    prepare(config(corpus, max_train_pairs=100), tmp_path / "kept", max_len=60)
    said = [r.getMessage().split(" in ")[0] for r in caplog.records if r.getMessage().startswith("prepared ")]
    assert said == [
        "prepared 300 of 302 pairs (the others have an empty side or one over 60 tokens)",
        "prepared all 100 pairs",
    ]


def test_a_vocabulary_beyond_uint16_gets_uint32_ids(corpus: Path, tmp_path: Path):
    """A Marian-style tokenizer with an explicit 70000-entry vocabulary: ids above 65535 must survive."""
    data = config(corpus)
    small = train_tokenizer(data, read_split(data, "train"))
    model = spm.SentencePieceProcessor(model_proto=small._source.serialized_model_proto())
    pieces = [model.id_to_piece(i) for i in range(model.get_piece_size())]
    vocab = [f"<filler{i}>" for i in range(70_000 - len(pieces))] + pieces[::-1]  # real pieces at the top
    big = Tokenizer(model, model, vocab=vocab, pad_id=0, bos_id=1, eos_id=2, unk_id=3)
    prepared = prepare(data, tmp_path / "prepared", max_len=60, tokenizer=big)
    assert prepared.manifest["dtype"] == "uint32"
    expected = in_memory(data, big, max_len=60)
    assert everything(prepared) == expected.pairs(range(len(expected)))
    assert max(max(src) for src, _ in everything(prepared)) > 2**16


def test_an_unchanged_corpus_is_reused_without_encoding(corpus: Path, tmp_path: Path, monkeypatch):
    data = config(corpus)
    first = prepare(data, tmp_path / "prepared", max_len=60)
    monkeypatch.setattr(builder, "_encode_corpus", lambda *a, **k: pytest.fail("encoded again"))
    monkeypatch.setattr(builder, "train_tokenizer", lambda *a, **k: pytest.fail("trained again"))
    again = prepare(replace(data, prepare_workers=2), tmp_path / "prepared", max_len=60)  # workers: same ids
    assert everything(again) == everything(first)
    # The checkpoint of a run on this corpus has the same tokenizer: resuming reuses the corpus too.
    prepare(data, tmp_path / "prepared", max_len=60, tokenizer=first.tokenizer())


@pytest.mark.parametrize("change", ["source file", "data key", "length limit", "tokenizer"])
def test_any_change_rebuilds(corpus: Path, tmp_path: Path, change: str):
    data = config(corpus)
    before = prepare(data, tmp_path / "prepared", max_len=60)
    tokenizer = None
    if change == "source file":
        with open(corpus / "train.en", "a") as en, open(corpus / "train.it", "a") as it:
            en.write("two\n")
            it.write("due\n")
    elif change == "data key":
        data = replace(data, max_train_pairs=100)
    elif change == "tokenizer":
        tokenizer = train_tokenizer(replace(data, vocab_size=290), read_split(data, "train"))
    after = prepare(data, tmp_path / "prepared", max_len=5 if change == "length limit" else 60, tokenizer=tokenizer)
    assert after.manifest != before.manifest
    tokenizer = tokenizer or after.tokenizer()
    expected = in_memory(data, tokenizer, max_len=after.manifest["max_len"])
    assert everything(after) == expected.pairs(range(len(expected)))
    assert after.manifest["tokenizer"]["trained"] == (change != "tokenizer")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no leftovers


def test_concurrent_prepares_build_once(corpus: Path, tmp_path: Path, monkeypatch):
    """Ranks of a distributed run prepare at the same time: the first builds, the others reuse."""
    builds, build = [], builder._build
    monkeypatch.setattr(builder, "_build", lambda *args, **kwargs: builds.append(1) or build(*args, **kwargs))
    with ThreadPoolExecutor(3) as pool:
        results = list(pool.map(lambda _: prepare(config(corpus), tmp_path / "prepared", max_len=60), range(3)))
    assert len(builds) == 1
    assert everything(results[0]) == everything(results[1]) == everything(results[2])


def test_a_crash_mid_prepare_leaves_the_old_corpus_or_none(corpus: Path, tmp_path: Path, monkeypatch):
    data = config(corpus)
    monkeypatch.setattr(builder, "CHUNK_PAIRS", 64)
    calls = []

    def crash_on_third_chunk(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return encode_chunk(*args)

    encode_chunk = builder._encode_chunk
    monkeypatch.setattr(builder, "_encode_chunk", crash_on_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        prepare(data, tmp_path / "prepared", max_len=60)
    assert not (tmp_path / "prepared").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".prepared.tmp")]
    monkeypatch.setattr(builder, "_encode_chunk", encode_chunk)
    good = everything(prepare(data, tmp_path / "prepared", max_len=60))
    calls.clear()
    monkeypatch.setattr(builder, "_encode_chunk", crash_on_third_chunk)
    with pytest.raises(KeyboardInterrupt):
        prepare(replace(data, max_train_pairs=250), tmp_path / "prepared", max_len=60)
    assert everything(PreparedPairs(tmp_path / "prepared")) == good


@pytest.mark.parametrize("there", ["a directory with 1 entry", "a file"])
def test_a_users_directory_or_file_is_refused_before_any_work(corpus: Path, tmp_path: Path, monkeypatch, there: str):
    out = tmp_path / "prepared"
    if there == "a file":
        out.write_text("mine")
    else:
        out.mkdir()
        (out / "notes.txt").write_text("mine")
    monkeypatch.setattr(builder, "train_tokenizer", lambda *a, **k: pytest.fail("trained a tokenizer"))
    with pytest.raises(UserError) as refused:
        prepare(config(corpus), out, max_len=60)
    assert str(refused.value) == f"{out}: exists and is not a prepared corpus ({there}); choose another path"
    if there == "a file":  # as the directory to prepare in, say `--train.out_dir=notes.txt`
        with pytest.raises(UserError, match=f"^{out}: exists and is not a directory \\(a file\\)"):
            prepare(config(corpus), out / "prepared", max_len=60)
    assert (out.read_text() if there == "a file" else (out / "notes.txt").read_text()) == "mine"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # nothing was started


def test_no_module_of_the_data_package_imports_the_recipe():
    """Layers: a recipe is read above `data/` (train/start.py), which takes a `DataConfig`, never a `Recipe`."""
    modules = sorted(Path(builder.__file__).parent.rglob("*.py"))
    importers = [path.name for path in modules if any(name.startswith("tnmt.recipe") for name in imports(path))]
    assert len(modules) > 5 and importers == []


def imports(path: Path) -> set[str]:
    """Every module `path` imports, `from a import b` counted as both a and a.b (b may be a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found |= {node.module or ""} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_errors_name_the_file(corpus: Path, tmp_path: Path):
    tokenizer = train_tokenizer(config(corpus), read_split(config(corpus), "train"))
    with pytest.raises(UserError, match="no sentence pair has both sides of 1 to 1 tokens"):
        prepare(config(corpus, max_train_pairs=1), tmp_path / "prepared", max_len=1, tokenizer=tokenizer)
    (corpus / "train.it").write_text("uno\n")
    with pytest.raises(UserError, match=f"has 302 lines but {corpus / 'train.it'} has 1"):
        prepare(config(corpus), tmp_path / "prepared", max_len=60)
    assert not list(tmp_path.glob("*prepared*"))


def test_reservoir_sample_is_bounded_seeded_and_uniform():
    items = range(20)
    assert reservoir_sample(items, 0, seed=1) == list(items)
    assert reservoir_sample(items, 50, seed=1) == list(items)  # fewer than k: all of them, in order
    sample = reservoir_sample(iter(items), 5, seed=1)
    assert len(sample) == len(set(sample)) == 5 and set(sample) <= set(items)
    assert sample == reservoir_sample(iter(items), 5, seed=1) != reservoir_sample(iter(items), 5, seed=2)
    counts = Counter(i for seed in range(2000) for i in reservoir_sample(items, 5, seed=seed))
    assert all(abs(counts[i] / 2000 - 0.25) < 0.05 for i in items), counts


def test_training_from_the_prepared_corpus_equals_training_in_memory(tiny_training, tmp_path, monkeypatch):
    def run(out: Path) -> dict[str, torch.Tensor]:
        recipe = load_recipe(None, [*tiny_training, f"--train.out_dir={out}", "--train.max_steps=6"])
        return load_file((loop.train(recipe, progress=False) / "last" / "model.safetensors").resolve())

    prepared = run(tmp_path / "prepared")
    sampler_inputs = []

    class InMemory(EncodedPairs):
        def tokenizer(self) -> Tokenizer:
            return Tokenizer.load(tmp_path / "prepared" / "prepared" / "tokenizer")

        def lengths(self) -> list[int]:
            sampler_inputs.append(super().lengths())
            return sampler_inputs[-1]

    def in_memory_data(recipe, *, tokenizer, model_max_len):
        tokenizer = InMemory([], []).tokenizer()
        max_len = recipe.longest_side(model_max_len)
        data = in_memory(recipe.data, tokenizer, max_len)
        return InMemory(src=data.src, tgt=data.tgt)

    monkeypatch.setattr(start, "prepare_recipe", in_memory_data)
    memory = run(tmp_path / "memory")
    assert sampler_inputs[0] == PreparedPairs(tmp_path / "prepared" / "prepared").lengths().tolist()
    assert memory.keys() == prepared.keys()
    assert all(torch.equal(memory[name], prepared[name]) for name in memory)


def tnmt(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tnmt", *args], capture_output=True, text=True, timeout=300, env={**os.environ}
    )


def test_tnmt_prepare_end_to_end(tiny_training, numbers_corpus, tmp_path):
    recipe = tmp_path / "recipe.toml"
    recipe.write_text("[train]\nmax_steps = 2\n")
    args = ["prepare", str(recipe), *tiny_training, f"--data.prepared_dir={tmp_path / 'shared'}"]
    first = tnmt(*args)
    assert first.returncode == 0, first.stderr
    assert first.stdout == f"300 training pairs prepared in {tmp_path / 'shared'}\n"
    manifest = json.loads((tmp_path / "shared" / "manifest.json").read_text())
    assert manifest["sources"][0]["path"] == str((numbers_corpus / "train.en").resolve())
    again = tnmt(*args)
    assert again.returncode == 0 and "prepared corpus is up to date (300 pairs)" in again.stderr, again.stderr
    # tnmt train finds it up to date too, and trains from it.
    trained = tnmt("train", str(recipe), *args[2:], f"--train.out_dir={tmp_path / 'run'}", "--no-progress")
    assert trained.returncode == 0 and "prepared corpus is up to date" in trained.stderr, trained.stderr
    assert not (tmp_path / "run" / "prepared").exists()


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("--data.train_src={tmp}/missing.en", "{tmp}/missing.en: no such file"),
        ("--data.train_tgt={tmp}/short.it", "has 300 lines but {tmp}/short.it has 1; a parallel corpus needs"),
        ("--data.tokenizer_sample=-1", "tokenizer_sample"),
        ("--data.prepare_wokers=2", "unknown key 'prepare_wokers'"),
    ],
)
def test_tnmt_prepare_bad_input_is_one_line(tiny_training, tmp_path, override, message):
    (tmp_path / "short.it").write_text("uno\n")
    recipe = tmp_path / "recipe.toml"
    recipe.write_text("[train]\nmax_steps = 2\n")
    result = tnmt("prepare", str(recipe), *tiny_training, override.format(tmp=tmp_path), f"--train.out_dir={tmp_path}")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("tnmt prepare: error: "), result.stderr
    assert message.format(tmp=tmp_path) in result.stderr


@pytest.mark.parametrize("workers", [1, 2])
def test_subword_samples_are_other_segmentations_of_the_same_pairs(corpus: Path, tmp_path: Path, monkeypatch, workers):
    monkeypatch.setattr(builder, "CHUNK_PAIRS", 64)  # several chunks: each has its own seed
    data = config(corpus, subword_samples=3, subword_alpha=0.1, subword_nbest=64, prepare_workers=workers)
    prepared = prepare(data, tmp_path / "prepared", max_len=60)
    tokenizer = prepared.tokenizer()
    best = everything(prepared)
    samples = [everything(prepared.for_epoch(epoch)) for epoch in range(4)]
    assert samples[3] == samples[0] != samples[1] != samples[2]  # epoch e reads sample 1 + e mod 3
    for sample in samples[:3]:
        assert len(sample) == len(best)
        for (src, tgt), (best_src, best_tgt) in zip(sample, best, strict=True):
            assert tokenizer.decode_target(tgt) == tokenizer.decode_target(best_tgt)  # the same text, cut anew
            assert tokenizer.decode_target(src) == tokenizer.decode_target(best_src)  # (one shared model)
            assert 0 < len(src) <= 60 and 0 < len(tgt) <= 60
        assert sum(s != b for s, b in zip(sample, best, strict=True)) > len(best) // 10
    tokens, manifest = sum(len(s) + len(t) for s, t in samples[0]), prepared.manifest
    assert manifest["sample_tokens"][0] == tokens > manifest["src_tokens"] + manifest["tgt_tokens"]  # more pieces
    if workers == 2:  # the files are a function of the corpus and the seeds, not of the workers
        single = prepare(replace(data, prepare_workers=1), tmp_path / "single", max_len=60)
        assert [everything(single.for_epoch(epoch)) for epoch in range(3)] == samples[:3]


def test_a_sampled_side_over_the_limit_keeps_the_best_segmentation(corpus: Path):
    data = config(corpus, subword_samples=2, subword_alpha=0.1)
    text = read_split(data, "train")
    tokenizer = train_tokenizer(data, text)
    chunk = list(zip(text.src, text.tgt, strict=True))[:100]
    src, tgt = tokenizer.encode_source_batch(text.src[:100]), tokenizer.encode_target_batch(text.tgt[:100])
    max_len = sorted(map(len, tgt))[50]  # about half the pairs are kept, many of them right at the limit
    kept = builder.filter_pairs(src, tgt, max_len=max_len)
    _, segmentations = builder._encode_chunk(7, chunk, tokenizer, data, max_len, np.dtype(np.uint16))
    targets, best_lengths = [text.tgt[i] for i in kept], [len(tgt[i]) for i in kept]
    seed = builder.zlib.crc32(b"7/target")
    drawn = tokenizer.sample_segmentations(targets, side="target", samples=2, alpha=0.1, nbest=64, seed=seed)
    for k in (1, 2):
        lengths = segmentations[k][1][1].tolist()  # sample k, target side, lengths
        over = [i for i, ids in enumerate(drawn[k - 1]) if len(ids) > max_len]
        assert over, "no sampled side went over the limit: the test needs a smaller limit"
        assert max(lengths) <= max_len and [lengths[i] for i in over] == [best_lengths[i] for i in over]


def test_samples_follow_the_seed_and_alpha(corpus: Path):
    data = config(corpus)
    tokenizer = train_tokenizer(data, read_split(data, "train"))
    texts = read_split(data, "train").tgt[:50]
    best = tokenizer.encode_target_batch(texts)

    def draw(seed: int, alpha: float) -> list[list[int]]:
        return tokenizer.sample_segmentations(texts, side="target", samples=1, alpha=alpha, nbest=64, seed=seed)[0]

    assert draw(1, 0.1) == draw(1, 0.1) != draw(2, 0.1)
    assert draw(1, 50.0) == best  # a sharp distribution: the best segmentation
    assert sum(map(len, draw(1, 0.1))) > sum(map(len, best))  # flat: longer, rarer segmentations


def test_without_samples_no_segmentation_is_sampled(corpus: Path, tmp_path: Path, monkeypatch):
    """n-best segmentations cost ~0.5 ms a sentence, and BPE models have none: only asked for when wanted."""
    monkeypatch.setattr(Tokenizer, "sample_segmentations", lambda *a, **k: pytest.fail("sampled"))
    prepared = prepare(config(corpus, tokenizer_model="bpe"), tmp_path / "prepared", max_len=60)
    assert prepared.for_epoch(3) is prepared and len(prepared) == 300


def test_sampling_a_bpe_tokenizer_is_a_clear_error(corpus: Path):
    data = config(corpus, tokenizer_model="bpe")
    tokenizer = train_tokenizer(data, read_split(data, "train"))
    with pytest.raises(UserError, match="subword sampling needs a unigram sentencepiece model"):
        tokenizer.sample_segmentations(["one two"], side="source", samples=1, alpha=0.1, nbest=4, seed=0)


# --- word alignments (guided alignment) ---


def word_links(prepared: PreparedPairs) -> list[set[tuple[int, int]]]:
    """Each pair's links lifted back to words: (source word, target word) of every subword link."""
    tokenizer = prepared.tokenizer()
    pieces = tokenizer.source_vocabulary(), tokenizer.target_pieces(range(tokenizer.vocab_size))
    lifted = []
    for (src, tgt), links in zip(everything(prepared), prepared.links(range(len(prepared))), strict=True):
        src_words, tgt_words = split_words(src, pieces[0])[1], split_words(tgt, pieces[1])[1]
        assert links.shape[1] == 2 and (links[:, 0] < len(src)).all() and (links[:, 1] < len(tgt)).all()
        words = {(int(src_words[s]), int(tgt_words[t])) for s, t in links}
        expanded = subword_links(words, src_words, tgt_words)  # every subword of both linked words is linked
        assert sorted(map(tuple, links.tolist())) == sorted(map(tuple, expanded.tolist()))
        lifted.append(words)
    return lifted


# Every German word has one English translation, at varying positions: eflomal links them all correctly.
CLEAR = {
    ("the house", "das haus"): {(0, 0), (1, 1)},
    ("the car", "das auto"): {(0, 0), (1, 1)},
    ("a house", "ein haus"): {(0, 0), (1, 1)},
    ("a big car", "ein grosses auto"): {(0, 0), (1, 1), (2, 2)},
    ("house", "haus"): {(0, 0)},
    ("car", "auto"): {(0, 0)},
    ("big house", "grosses haus"): {(0, 0), (1, 1)},
}


def test_alignments_are_prepared_as_the_subword_links_of_eflomals_word_links(tmp_path: Path):
    for side, lang in ((0, "en"), (1, "it")):
        (tmp_path / f"train.{lang}").write_text("".join(pair[side] + "\n" for pair in CLEAR) * 30)
        (tmp_path / f"valid.{lang}").write_text(next(iter(CLEAR))[side] + "\n")
    # 280 pieces: most words are several ("▁", "d", "a", "s"), so a word link really becomes many subword links
    prepared = prepare(config(tmp_path, vocab_size=280), tmp_path / "prepared", max_len=60, alignments=True)
    entry = prepared.manifest["alignments"]
    assert entry["aligner"].startswith("eflomal ") and entry["symmetrisation"] == "grow-diag-final-and"
    assert word_links(prepared) == list(CLEAR.values()) * 30
    all_links = prepared.links(range(len(prepared)))
    assert entry["subword_links"] == [sum(map(len, all_links))] and entry["subword_links"][0] > 2 * entry["word_links"]
    assert entry["word_links"] == 30 * sum(map(len, CLEAR.values()))
    assert {path.name for path in (tmp_path / "prepared").glob("links*")} == {"links.ids", "links.offsets.npy"}


def test_a_corpus_without_alignments_is_rebuilt_when_they_are_asked_for_and_one_with_them_serves_all(
    corpus: Path, tmp_path: Path, monkeypatch
):
    data = config(corpus)
    without = prepare(data, tmp_path / "prepared", max_len=60)
    assert "alignments" not in without.manifest and not list((tmp_path / "prepared").glob("links*"))
    with pytest.raises(ValueError, match="prepared without word alignments"):
        without.links([0])
    with_links = prepare(data, tmp_path / "prepared", max_len=60, alignments=True)
    assert "alignments" in with_links.manifest and everything(with_links) == everything(without)
    monkeypatch.setattr(builder, "_build", lambda *a, **k: pytest.fail("built again"))
    assert "alignments" in prepare(data, tmp_path / "prepared", max_len=60).manifest  # reused as it is
    prepare(data, tmp_path / "prepared", max_len=60, alignments=True)


def test_each_subword_sample_gets_the_same_word_links_expanded_over_its_own_pieces(corpus: Path, tmp_path: Path):
    data = config(corpus, subword_samples=2, subword_alpha=0.1)
    prepared = prepare(data, tmp_path / "prepared", max_len=60, alignments=True)
    best = word_links(prepared)
    for epoch in range(2):
        sample = prepared.for_epoch(epoch)
        assert everything(sample) != everything(prepared)  # other pieces ...
        assert word_links(sample) == best  # ... the same words, linked alike
    assert prepared.manifest["alignments"]["unaligned_samples"] == 0


def test_alignments_without_eflomal_are_refused_before_any_work(corpus: Path, tmp_path: Path, monkeypatch):
    monkeypatch.setitem(sys.modules, "eflomal", None)
    with pytest.raises(UserError, match=r"pip install 'tnmt\[align\]'"):
        prepare(config(corpus), tmp_path / "prepared", max_len=60, alignments=True)
    assert not (tmp_path / "prepared").exists()
