"""translate/replacements.py: other words for one word, each re-translation a prefix-forced translation."""

import pytest

from tnmt.config import DecodeConfig
from tnmt.errors import UserError
from tnmt.translate.door import ModelDoor
from tnmt.translate.replacements import MAX_K, word_replacements
from tnmt.translate.steering import Steering
from tnmt.translate.translator import Translator


@pytest.fixture(scope="module")
def en_de(multi_checkpoint) -> Translator:
    return Translator.from_checkpoint(multi_checkpoint).for_pair("en", "de")


def test_a_multilingual_model_re_translates_from_the_target_tag_as_a_prefix_forced_translation(en_de, monkeypatch):
    """Every search starts from the target language's tag, and each replacement's translation is what a translation
    asked for with that word as its prefix gives (as `/v1/translate` with `prefix` does)."""
    starts, search = [], ModelDoor.search
    monkeypatch.setattr(
        ModelDoor,
        "search",
        lambda self, sources, *a, **k: starts.extend(s.start for s in sources) or search(self, sources, *a, **k),
    )
    text = "two thousand and five"
    found = word_replacements(en_de, text, 0, k=4)
    assert found.replacements and set(starts) == {en_de.tokenizer.language_id("de")}
    compared = 0
    for replacement in found.replacements:
        ids = en_de.tokenizer.encode_target(replacement.word)
        if len(ids) != 1:  # a word the tokenizer spells in one piece: the prefix is exactly that token
            continue
        forced = en_de.translations([text], steering=[Steering(prefix=replacement.word)])[0]
        assert forced.text == replacement.translation
        compared += 1
    assert compared, "no replacement was a single piece: the comparison did not run"


def test_replacements_differ_from_the_word_keep_the_words_before_and_come_likeliest_first(tiny_translator):
    settings = DecodeConfig(beam_size=2, max_len=12)
    found = word_replacements(tiny_translator, "three hundred and two", 1, k=3, settings=settings)
    assert 0 < len(found.replacements) <= 3
    words = found.translation.text.split()
    probabilities = [r.probability for r in found.replacements]
    assert probabilities == sorted(probabilities, reverse=True) and all(0 <= p <= 1 for p in probabilities)
    for r in found.replacements:
        assert r.translation.split()[0] == words[0]  # the words before are forced
        assert r.word != found.word and r.translation.split()[1] == r.word


@pytest.mark.parametrize(
    ("text", "position", "k", "message"),
    [
        ("  ", 0, 3, "empty"),
        ("three", 0, 0, "k = 0"),
        ("three", 0, MAX_K + 1, "k = 21"),
        ("three", 99, 3, "position 99"),
    ],
)
def test_bad_requests_are_refused_in_one_line(tiny_translator, text, position, k, message):
    with pytest.raises(UserError, match=message):
        word_replacements(tiny_translator, text, position, k=k)
