"""benchmarks/quality/documents.py without a model: each format's document is built with its bold words where they
were put, and its reader finds them; the judge counts held, contained and emptied bold words."""

import pytest

from benchmarks.quality import documents as bench

PARTS = [("A ", "red", " car."), ("", "Two", " dogs & a cat <run>."), ("The man is ", "old", ".")]


@pytest.mark.parametrize("fmt", sorted(bench.FORMATS))
def test_each_format_reads_back_the_bold_words_it_was_built_with(fmt):
    build, bold = bench.FORMATS[fmt]
    assert bold(build(PARTS)) == [["red"], ["Two"], ["old"]]


def test_captions_are_cut_around_their_word_with_its_punctuation_outside():
    sources = ["A man in a red shirt.", "Dogs run fast!"]
    assert bench.parts(sources, [(0, 4, "rot"), (1, 2, "")]) == [
        ("A man in a ", "red", " shirt."),
        ("Dogs run ", "fast", "!"),
    ]


def test_the_judge_counts_bold_words_held_contained_and_emptied():
    report = bench.judge([["rote"], ["das", "Auto"], []], ["rote", "Auto", "alt"])
    assert report == {"held_share": 0.3333, "contains_share": 0.6667, "emptied_share": 0.3333}
