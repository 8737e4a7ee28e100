"""benchmarks/quality/markup.py with a scripted translator: the markup it inserts, the node-by-node baseline, and the
checks and scores it reports. The real run: `python -m benchmarks.quality.markup --checkpoint CKPT`."""

import random
from dataclasses import dataclass

import pytest

from benchmarks.quality import markup as bench


@dataclass
class _Evidence:
    alignment: list[tuple[int, int]]


@dataclass
class _Translation:
    text: str
    evidence: _Evidence | None


class ReversingTranslator:
    """Translates by writing the words upper-cased in reverse order, aligned accordingly."""

    def translations(self, texts, evidence=False):
        results = []
        for text in texts:
            words = text.split()
            alignment = [(i, len(words) - 1 - i) for i in range(len(words))]
            results.append(_Translation(" ".join(reversed(words)).upper(), _Evidence(alignment) if evidence else None))
        return results


@pytest.mark.parametrize("seed", range(20))
def test_mark_up_puts_one_or_two_elements_over_short_spans_of_the_escaped_words(seed):
    words = ["A", "man", "&", "a", "<dog>", "run", "on", "the", "beach", "."]
    fragment = bench.mark_up(words, random.Random(seed))
    found = bench.Elements(fragment)
    assert found.balanced and not found.repeated
    assert found.text == " ".join(words)
    assert 1 <= len(found.parents) <= 2
    assert all(1 <= len(text.split()) <= 3 for text in found.words.values())


def test_node_by_node_translates_each_text_node_alone():
    fragment = 'A <b id="t0">red &amp; blue</b> car'
    assert bench.node_by_node(fragment, str.upper) == 'A <b id="t0">RED &amp; BLUE</b> CAR'


def test_judge_tells_a_misnested_or_lost_element():
    source = '<b id="t0">a <i id="t1">b</i></b> c'
    parser = bench.strict_parser()
    assert bench.judge(source, '<b id="t0">x <i id="t1">y</i></b> z', parser)["well_formed"]
    assert not bench.judge(source, '<b id="t0">x <i id="t1">y</b></i> z', parser)["well_formed"]
    moved_out = bench.judge(source, '<b id="t0">x</b> <i id="t1">y</i> z', parser)
    assert moved_out["well_formed"] and not moved_out["kept"]
    lost = bench.judge(source, '<b id="t0">x y</b> z', parser)
    assert lost["well_formed"] and not lost["kept"]
    assert bench.judge(source, '<b id="t0"><i id="t1"></i></b>x y z', parser)["empty"] == 2


def test_run_scores_the_carried_markup_as_the_plain_translation():
    sources = ["a red car drives fast", "two dogs play on the grass", "a man & a woman"]
    translator = ReversingTranslator()
    references = [t.text for t in translator.translations(sources)]
    report = bench.run(translator, sources, references, seed=1)
    assert report["plain"]["bleu_13a"] == 100.0
    assert report["markup"]["bleu_13a"] == 100.0 and report["markup"]["bleu_13a_minus_plain"] == 0.0
    assert report["markup"]["well_formed_share"] == 1.0
    assert report["markup"]["every_element_once_nested_as_given_share"] == 1.0
    assert report["markup"]["texts_as_plain_share"] == 1.0
    assert report["node_by_node"]["bleu_13a"] < 100.0  # reversed piece by piece, not as a sentence
    assert report["node_by_node"]["segments_translated"] > len(sources)


class WordByWordTranslator:
    """Translates word by word with a few dictionary words (the others kept), aligned one to one, or with every
    link `shift` words to the right (an alignment that is one word off)."""

    WORDS = {"red": "rote", "dog": "Hund", "two": "zwei", "dogs": "Hunde", "man": "Mann"}

    def __init__(self, shift: int = 0) -> None:
        self.shift = shift

    def translations(self, texts, evidence=False):
        results = []
        for text in texts:
            words = [self.WORDS.get(w.lower(), w) for w in text.split()]
            alignment = [(i, min(i + self.shift, len(words) - 1)) for i in range(len(words))]
            results.append(_Translation(" ".join(words), _Evidence(alignment) if evidence else None))
        return results


def test_the_dictionary_test_finds_whether_each_tag_holds_its_word():
    sources = ["a red car drives fast.", "two dogs play on the grass", "a man and a dog", "nothing here"] * 6
    for shift in (0, 1):
        translator = WordByWordTranslator(shift)
        plain = [t.text for t in translator.translations(sources)]
        report = bench.dictionary_test(translator, sources, plain, seed=3)
        assert report["cases"] == 18  # the sentences with a dictionary word translated once
        assert sum(report["cases_by_shape"].values()) == 18 and len(report["cases_by_shape"]) == len(bench.SHAPES)
        assert report["well_formed_every_element_once_share"] == 1.0
        # one word off: only a word at the sentence's end (its link clamped onto itself) is still held
        assert report["held_share"] == 1.0 if shift == 0 else report["held_share"] < 0.5
    assert report["misses"][0]["output"] != report["misses"][0]["fragment"]


def test_wrap_keeps_the_words_punctuation_outside_the_tag():
    fragment = bench._wrap(["a", "red", "car."], 2, "nested", random.Random(0))
    assert fragment == 'a red <i id="o"><b id="w">car</b></i>.'
