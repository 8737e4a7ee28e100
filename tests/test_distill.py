"""Self-distillation's and data diversification's corpus: the training pairs and the model's translations, prepared
with its tokenizer. (The loop's use of it, resume included, is tested in test_loop.py.)"""

from dataclasses import replace
from pathlib import Path

import pytest

from tnmt.checkpoint import load_checkpoint
from tnmt.data.corpus import filter_pairs
from tnmt.recipe import load_recipe
from tnmt.train.distill import added_pairs, distilled_files, prepare_distilled, write_translations
from tnmt.train.distributed import World
from tnmt.translate.translator import Translator


@pytest.fixture
def recipe(tiny_training, tmp_path):
    return load_recipe(None, [*tiny_training, f"--train.out_dir={tmp_path}", "--data.max_train_pairs=20"])


def test_no_file_is_written_when_no_translation_has_text(tiny_checkpoint, tiny_training, tmp_path, caplog):
    # random weights: they loop on whitespace and control characters, when loops are allowed
    recipe = load_recipe(
        None, [*tiny_training, f"--train.out_dir={tmp_path}", "--data.max_train_pairs=20", "--decode.block_loops=false"]
    )
    teacher = load_checkpoint(tiny_checkpoint)
    sources = Path(recipe.data.train_src).read_text().splitlines()[:20]
    translations = Translator(teacher.model, teacher.tokenizer, recipe.decode).translate(sources)
    assert not any(t.strip() for t in translations)
    assert write_translations(teacher.model, teacher.tokenizer, recipe, world=World()) == 0
    assert not (tmp_path / "distilled").exists()
    assert "no translation has text" in caplog.text


def test_the_files_sit_in_the_run_named_by_the_languages(recipe, tmp_path):
    assert distilled_files(recipe) == (tmp_path / "distilled" / "train.en", tmp_path / "distilled" / "train.de")


def test_a_bidirectional_runs_files_are_named_by_its_first_direction(tiny_training, numbers_multiway, tmp_path):
    recipe = load_recipe(
        None, [*tiny_training, *bidirectional(numbers_multiway, "de-en", "en-de"), f"--train.out_dir={tmp_path}"]
    )
    assert distilled_files(recipe) == (tmp_path / "distilled" / "train.de", tmp_path / "distilled" / "train.en")


def bidirectional(corpus: Path, *directions: str) -> list[str]:
    return [
        "--data.languages=['en', 'de']",
        f"--data.directions={list(directions)}",
        "--data.first_direction_from=0.5",
        f"--data.train_src={corpus}/train.{{lang}}",
        f"--data.valid_src={corpus}/valid.{{lang}}",
        "--data.train_tgt=''",
        "--data.valid_tgt=''",
        "--train.diversify=true",
    ]


def test_diversification_adds_forward_then_backward_pairs_new_to_the_corpus_once_each():
    originals = [("a", "A"), ("b", "B"), ("c", "C"), ("a", "A")]
    forward = ["A", "B2", " ", "A"]  # translations equal to their references, a new one, an empty one
    backward = ["a9", "b3", "c", "a9"]  # new ones, the corpus's pair again, a new pair twice (a repeated target)
    assert added_pairs(originals, forward, backward) == [("b", "B2"), ("a9", "A"), ("b3", "B")]
    assert added_pairs([], [], []) == []


def test_the_pairs_are_prepared_with_the_runs_tokenizer_and_length_limit(tiny_checkpoint, recipe):
    tokenizer = load_checkpoint(tiny_checkpoint).tokenizer
    sources = ["one", "twenty two", "", "three thousand and four hundred and forty four" * 3, "five"]
    translations = ["uno", "ventidue", "vuoto", "tremila", ""]
    for path, lines in zip(distilled_files(recipe), (sources, translations), strict=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{line}\n" for line in lines))

    sampling = replace(recipe, data=replace(recipe.data, subword_samples=2))  # the original pairs' option only
    prepared = prepare_distilled(sampling, tokenizer, model_max_len=16)
    assert prepared.for_epoch(1) is prepared
    assert prepared.tokenizer().fingerprint() == tokenizer.fingerprint()
    src, tgt = tokenizer.encode_source_batch(sources), tokenizer.encode_target_batch(translations)
    kept = filter_pairs(src, tgt, max_len=15)  # room for BOS/EOS in 16 positions
    assert kept == [0, 1]  # no empty side, no side over the limit
    assert prepared.pairs(range(len(prepared))) == [(src[i], tgt[i]) for i in kept]


def test_a_bidirectional_runs_pairs_are_prepared_as_its_first_direction(
    multi_checkpoint, tiny_training, numbers_multiway, tmp_path
):
    recipe = load_recipe(
        None,
        [
            *tiny_training,
            *bidirectional(numbers_multiway, "en-de", "de-en"),
            f"--train.out_dir={tmp_path}",
            "--data.max_train_pairs=1",  # limits the corpus translated, not the translations prepared
        ],
    )
    tokenizer = load_checkpoint(multi_checkpoint).tokenizer
    pairs = [("seven", "sieben"), ("twelve", "zwölf")]
    for path, lines in zip(distilled_files(recipe), zip(*pairs, strict=True), strict=True):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{line}\n" for line in lines))
    prepared = prepare_distilled(recipe, tokenizer, model_max_len=32)
    source, target = zip(*pairs, strict=True)
    expected = list(zip(tokenizer.encode_source_batch(source), tokenizer.encode_target_batch(target), strict=True))
    assert prepared.pairs(range(len(prepared))) == expected
