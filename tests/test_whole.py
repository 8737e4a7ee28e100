"""translate/whole.py: a text's translation from its segments', everything indexed over the whole text; and through
the Translator on a random tiny model over number words (en -> it): a paragraph is its sentences one by one."""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tnmt.config import DecodeConfig
from tnmt.translate.evidence import Evidence
from tnmt.translate.glossary import GlossaryEntry
from tnmt.translate.segment import Layout, split_text
from tnmt.translate.steering import ConstraintReport, Steering
from tnmt.translate.translation import Translation
from tnmt.translate.whole import Split, joined, segment_steering

SETTINGS = DecodeConfig(beam_size=3, max_len=12)


def segment(text: str, alignment, probs, confidence: float, *, tokens: int, **fields) -> Translation:
    evidence = Evidence(alignment, probs, confidence, fields.pop("warnings", []))
    return Translation(text, list(range(tokens)), -1.0, -2.0, evidence=evidence, **fields)


def test_evidence_constraints_and_sentences_are_indexed_over_the_whole_text():
    text = "A dog runs.  Two cats sleep.\n- Hello"
    layout = split_text(text, "en")
    assert layout.segments == ["A dog runs.", "Two cats sleep.", "Hello"]
    report = ConstraintReport("Katzen", True, (1,), "glossary", "Katzen")
    results = [
        segment("Ein Hund läuft.", [(0, 0), (1, 1), (2, 2)], [0.9, 0.8, 0.7], 0.5, tokens=3),
        segment(
            "Zwei Katzen schlafen.", [(0, 0), (1, 1), (2, 2)], [0.6, 0.5, 0.4], 0.8, tokens=4, constraints=(report,)
        ),
        segment("Hallo", [(0, 0)], [0.3], 0.9, tokens=1, warnings=["copy"]),
    ]
    found = joined(layout, results)
    assert found.text == "Ein Hund läuft.  Zwei Katzen schlafen.\n- Hallo"
    # the "-" is word 6 of both, copied: aligned to itself, probability 1
    assert found.evidence.alignment == [(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7)]
    assert found.evidence.word_probs == [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 1.0, 0.3]
    assert found.evidence.warnings == ["copy"]
    weights = [(4, 0.5), (5, 0.8), (2, 0.9)]  # tokens + EOS
    expected = math.exp(sum(n * math.log(c) for n, c in weights) / 11)
    assert found.evidence.confidence == pytest.approx(expected)
    assert found.constraints == (ConstraintReport("Katzen", True, (4,), "glossary", "Katzen"),)
    assert found.text.split()[4] == "Katzen"
    spans = [(s.source, s.target) for s in found.sentences]
    assert [(text[a:b], found.text[c:d]) for (a, b), (c, d) in spans] == [
        ("A dog runs.", "Ein Hund läuft."),
        ("Two cats sleep.", "Zwei Katzen schlafen."),
        ("Hello", "Hallo"),
    ]
    assert [s.confidence for s in found.sentences] == [0.5, 0.8, 0.9]


def test_alternatives_join_each_segments_kth_or_its_last():
    layout = Layout("a. b.", ((0, 2), (3, 5)), (0, 1))
    first = Translation("x.", [1], -1.0, -1.0, alternatives=(Translation("y.", [2], -2.0, -2.0),))
    second = Translation("z.", [3], -0.5, -0.5)
    found = joined(layout, [first, second])
    assert found.text == "x. z." and found.score == -1.5
    assert [(a.text, a.score) for a in found.alternatives] == [("y. z.", -2.5)]


def test_a_sentence_cut_in_parts_is_one_sentence_with_its_cuts_and_a_warning():
    layout = Layout("one two, three four", ((0, 8), (9, 19)), (0, 0))
    results = [
        segment("uno due,", [(0, 0), (1, 1)], [1.0, 1.0], 1.0, tokens=2),
        segment("tre quattro", [], [], 1.0, tokens=2),
    ]
    found = joined(layout, results)
    [sentence] = found.sentences
    assert sentence.cuts == (9,) and sentence.source == (0, 19) and sentence.target == (0, len(found.text))
    assert found.evidence.warnings == ["sentence_split"]


def test_steering_of_later_segments_drops_the_prefix_and_the_phrases_to_include():
    steering = Steering((GlossaryEntry("a", ("b",)),), ("X",), (("c",),), ("d",), "e")
    assert segment_steering(steering, 0) == steering
    later = segment_steering(steering, 2)
    assert (later.glossary, later.do_not_translate, later.avoid) == (steering.glossary, ("X",), ("d",))
    assert (later.include, later.prefix) == ((), "")
    assert segment_steering(None, 1) is None


def test_locate_names_a_sentence_a_text_does_not_have():
    layouts = [Layout("a. b.", ((0, 2), (3, 5)), (0, 1)), Layout("c d", ((0, 1), (2, 3)), (0, 0))]
    split = Split(layouts, [])
    assert split.locate(0, 1) == 1 and split.locate(1, 0) == 2
    with pytest.raises(IndexError, match="sentence 1: the text has 1 sentence"):
        split.locate(1, 1)


PARAGRAPH = "two hundred. three thousand and five.\n\n  - seven\nnine hundred"


def test_a_paragraph_is_its_sentences_translated_one_by_one(tiny_translator):
    [found] = tiny_translator.translations([PARAGRAPH], SETTINGS, evidence=True)
    alone = tiny_translator.translate(["two hundred.", "three thousand and five.", "seven", "nine hundred"], SETTINGS)
    assert found.text == f"{alone[0]} {alone[1]}\n\n  - {alone[2]}\n{alone[3]}"
    source_words, target_words = len(PARAGRAPH.split()), len(found.text.split())
    assert all(0 <= i < source_words and 0 <= j < target_words for i, j in found.evidence.alignment)
    assert len(found.evidence.word_probs) == target_words and len(found.sentences) == 4


def test_every_steering_feature_follows_the_whole_text(tiny_translator):
    text = "two hundred. three thousand. four nine"
    steering = Steering(
        glossary=(GlossaryEntry("nine", ("nove",)),),
        do_not_translate=("four",),
        include=(("mille",),),
        prefix="cento",
    )
    [found] = tiny_translator.translations([text], SETTINGS, steering=[steering], evidence=True)
    words = found.text.split()
    assert found.text.startswith("cento")
    nove = next(c for c in found.constraints if c.target == "nove")
    assert nove.met and [words[j] for j in nove.words][0].startswith("nove")
    assert nove.words[0] >= len(found.text[: found.sentences[2].target[0]].split())  # in the third sentence
    mille = [c for c in found.constraints if c.target == "mille"]
    assert len(mille) == 1 and mille[0].met  # asked of the text once
    assert "four" in words
    avoided = tiny_translator.translations(["two. three. five"], SETTINGS, steering=[Steering(avoid=("cento",))])
    assert "cento" not in avoided[0].text.split()


WORDS = st.sampled_from(["one", "two", "hundred", "and", "seven", "thousand", ".", "!", "-", "1.", "🐶", "  ", "\n"])


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(tokens=st.lists(WORDS, max_size=25))
def test_property_evidence_indexes_the_whole_text_and_its_translation(tiny_translator, tokens):
    text = " ".join(tokens)
    [found] = tiny_translator.translations([text], SETTINGS, evidence=True)
    n_source, n_target = len(text.split()), len(found.text.split())
    assert found.text.count("\n") == text.count("\n")
    assert len(found.evidence.word_probs) == n_target
    assert all(0 <= i < n_source and 0 <= j < n_target for i, j in found.evidence.alignment)
    for sentence in found.sentences:
        (a, b), (c, d) = sentence.source, sentence.target
        assert text[a:b].strip() == text[a:b] and 0 <= c <= d <= len(found.text)
