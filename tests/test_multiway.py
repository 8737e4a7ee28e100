"""data/multiway.py: a multi-way corpus prepared as the union of its directions, with one tokenizer and its tags."""

import pytest

from tnmt.config import DataConfig
from tnmt.data import multiway
from tnmt.data.batching import collate
from tnmt.data.multiway import direction_data, prepare_multiway, read_multiway_split
from tnmt.data.prepare import prepare
from tnmt.data.tokenizer import Tokenizer
from tnmt.errors import UserError
from tnmt.recipe import load_recipe

LANGS = ("en", "de", "it")


@pytest.fixture(scope="module")
def data(numbers_multiway) -> DataConfig:
    return DataConfig(
        corpus="files",
        languages=LANGS,
        train_src=str(numbers_multiway / "train.{lang}"),
        valid_src=str(numbers_multiway / "valid.{lang}"),
        vocab_size=400,
        prepare_workers=1,
    )


@pytest.fixture(scope="module")
def prepared(data, tmp_path_factory):
    return prepare_multiway(data, tmp_path_factory.mktemp("multi") / "prepared", max_len=40)


def test_the_corpus_of_every_direction_is_the_union_of_its_directions_prepared_alone(prepared, data, tmp_path):
    tokenizer = prepared.tokenizer()
    assert len(data.trained_directions) == 6 and prepared.directions == data.trained_directions
    whole = prepared.pairs(range(len(prepared)))
    expected, targets = [], []
    for direction in data.trained_directions:
        alone = prepare(
            direction_data(data, direction), tmp_path / "-".join(direction), max_len=40, tokenizer=tokenizer
        )
        expected += alone.pairs(range(len(alone)))
        targets += [tokenizer.language_id(direction[1])] * len(alone)
    assert whole == expected and len(whole) == 6 * 300
    assert prepared.starts(range(len(prepared))) == targets
    picked = [1799, 3, 900, 301]  # any order, across directions
    assert prepared.pairs(picked) == [whole[i] for i in picked]
    assert prepared.starts(picked) == [targets[i] for i in picked]


def test_each_pair_starts_its_decoder_from_its_target_languages_tag(prepared):
    tokenizer = prepared.tokenizer()
    batch = collate(prepared.pairs([0, 300]), **tokenizer.special_ids, starts=prepared.starts([0, 300]))
    assert batch.tgt_in[:, 0].tolist() == [tokenizer.language_id("de"), tokenizer.language_id("it")]  # en-de, en-it
    assert batch.tgt_out[0, : len(prepared.pairs([0])[0][1])].tolist() == prepared.pairs([0])[0][1]
    plain = collate(prepared.pairs([0]), **tokenizer.special_ids)
    assert plain.tgt_in[0, 0] == tokenizer.bos_id


def test_a_current_corpus_is_reused_and_a_tokenizer_without_the_tags_is_refused(
    prepared, data, numbers_multiway, monkeypatch
):
    monkeypatch.setattr(multiway, "_train_tokenizer", lambda data: pytest.fail("trained again"))
    again = prepare_multiway(data, prepared.directory, max_len=40)
    assert again.tokenizer().fingerprint() == prepared.tokenizer().fingerprint()
    assert again.pairs([5, 1000]) == prepared.pairs([5, 1000])
    one_pair = Tokenizer.train((numbers_multiway / "train.de").read_text().splitlines(), vocab_size=300)
    with pytest.raises(UserError, match="the tokenizer has no target-language tag for 'de'"):
        prepare_multiway(data, prepared.directory, max_len=40, tokenizer=one_pair)


def test_the_tags_round_trip_and_no_text_encodes_to_one(prepared, tmp_path):
    tokenizer = prepared.tokenizer()
    ids = [tokenizer.language_id(language) for language in LANGS]
    assert tokenizer.languages == LANGS and tokenizer.language_ids == tuple(ids) == (4, 5, 6)
    assert tokenizer.target_pieces(ids) == ["<2en>", "<2de>", "<2it>"]
    assert not set(ids) & set(tokenizer.encode_source("<2de> <2it> zwei"))  # control symbols: never from text
    assert tokenizer.decode_target([ids[1], *tokenizer.encode_target("zwei")]) == "zwei"
    tokenizer.save(tmp_path / "tok")
    loaded = Tokenizer.load(tmp_path / "tok")
    assert loaded.languages == LANGS and loaded.fingerprint() == tokenizer.fingerprint()
    with pytest.raises(ValueError, match="no target-language tag for 'fr': this tokenizer has en, de, it"):
        tokenizer.language_id("fr")


def test_validation_reads_every_direction_with_its_target(data):
    corpus, targets = read_multiway_split(data, "val", limit=4)
    assert len(corpus) == len(targets) == 6 * 4
    assert targets[:4] == ["de"] * 4 and corpus.src[:4] == corpus.src[4:8]  # en-de, then en-it


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["--data.languages=['en']"], "languages = .*two or more distinct language codes"),
        (["--data.languages=['en', 'de']", "--data.directions=['en-fr']"], "directions = .*pairs of languages"),
        (["--data.languages=['en', 'de']", "--data.directions=['en-de', 'en-de']"], "listed once each"),
        (["--data.languages=['en', 'de']", "--data.joint_vocabulary=false"], "true for several languages"),
        (["--data.languages=['en', 'de']", "--data.direction_temperature=0"], "direction_temperature = 0"),
        (["--data.languages=['en', 'de']", "--data.first_direction_from=0.5"], "unless `directions` lists two or more"),
        (
            ["--data.languages=['en', 'de']", "--data.directions=['en-de', 'de-en']", "--data.first_direction_from=1"],
            r"first_direction_from = 1.0: must be in \[0, 1\)",
        ),
        (
            ["--data.languages=['en', 'de']", "--data.corpus=files", "--data.train_src=a.txt", "--data.valid_src=b"],
            "train_src = 'a.txt': must be a pattern with {lang}",
        ),
        (["--data.languages=['en', 'de']", "--train.distill_at_step=10"], "distill_at_step is for one language pair"),
        (["--train.diversify=true"], "diversify needs a bidirectional run: .*first_direction_from > 0"),
        (
            [
                "--data.languages=['en', 'de', 'fr']",
                "--data.directions=['en-de', 'fr-de']",
                "--data.first_direction_from=0.3",
                "--train.diversify=true",
            ],
            "diversify translates de->en too: .*directions must list de-en",
        ),
    ],
)
def test_a_bad_multilingual_recipe_is_one_line(overrides, message):
    with pytest.raises(UserError, match=message):
        load_recipe(None, overrides)


def test_the_shipped_multilingual_recipes_train_twelve_and_ten_directions(repo_root):
    every = load_recipe(str(repo_root / "configs" / "multi30k_multi.toml"))
    held_out = load_recipe(str(repo_root / "configs" / "multi30k_multi_zero_shot.toml"))
    assert len(every.data.trained_directions) == 12
    assert set(every.data.trained_directions) - set(held_out.data.trained_directions) == {("en", "cs"), ("cs", "en")}


def test_the_bidirectional_recipe_trains_both_directions_then_en_de(repo_root):
    recipe = load_recipe(str(repo_root / "configs" / "multi30k_en_de_bidirectional.toml"))
    shipped = load_recipe(str(repo_root / "configs" / "multi30k_en_de.toml"))
    assert recipe.data.trained_directions == [("en", "de"), ("de", "en")] and recipe.data.first_direction_from == 0.33
    assert (recipe.model, recipe.train.max_minutes) == (shipped.model, 45)  # the shipped model, the same budget


def test_an_epoch_draws_unequal_directions_by_the_temperature(prepared, data, tmp_path):
    from dataclasses import replace

    from tnmt.data.multiway import MultiwayPairs
    from tnmt.directions import epoch_counts

    tokenizer = prepared.tokenizer()
    small = prepare(
        replace(direction_data(data, ("en", "de")), max_train_pairs=60), tmp_path / "en-de", max_len=40,
        tokenizer=tokenizer,
    )  # fmt: skip
    large = prepared.parts[("en", "it")]
    corpus = MultiwayPairs(prepared.directory, {("en", "de"): small, ("en", "it"): large}, tokenizer, temperature=5.0)
    assert len(corpus) == 360 and len(corpus.for_epoch(0)) == 360
    counts = epoch_counts([60, 300], 5.0)
    assert counts[0] > 60 > 0 and sum(counts) == 360  # the small direction is seen more often than once
    epoch = corpus.for_epoch(3)
    starts = epoch.starts(range(len(epoch)))
    assert starts.count(tokenizer.language_id("de")) == counts[0]
    assert starts.count(tokenizer.language_id("it")) == counts[1]
    german = {tuple(map(tuple, pair)) for pair in small.pairs(range(60))}
    drawn = [tuple(map(tuple, pair)) for pair, start in zip(epoch.pairs(range(len(epoch))), starts, strict=True)
             if start == tokenizer.language_id("de")]  # fmt: skip
    assert set(drawn) == german  # every pair of the small direction, some twice
    assert len(epoch.lengths()) == 360 and epoch.pairs([5]) == corpus.for_epoch(3).pairs([5])  # the epoch's own draw


def test_the_diversified_recipe_is_the_bidirectional_one_translating_both_ways_at_half_the_budget(repo_root):
    recipe = load_recipe(str(repo_root / "configs" / "multi30k_en_de_diversified.toml"))
    bidirectional = load_recipe(str(repo_root / "configs" / "multi30k_en_de_bidirectional.toml"))
    assert recipe.train.diversify and recipe.data.first_direction_from == 0.5
    assert recipe.data.trained_directions == bidirectional.data.trained_directions == [("en", "de"), ("de", "en")]
    assert (recipe.model, recipe.train.max_minutes) == (bidirectional.model, 45)
