"""benchmarks/quality/evidence.py's forced pass: a reference the model wrote itself gets, teacher-forced, the
evidence its search gave it. The real run: `python -m benchmarks.quality.evidence --checkpoint CKPT`."""

from dataclasses import replace

import pytest

from benchmarks.quality import evidence as bench

SOURCES = ["one", "twenty two", "three hundred and five", "nine thousand nine hundred", "forty"]


@pytest.fixture(params=["one pair", "multilingual"])
def translator(request, tiny_translator, multi_checkpoint):
    from tnmt.translate.translator import Translator

    if request.param == "one pair":
        return tiny_translator
    return Translator.from_checkpoint(multi_checkpoint).for_pair("en", "de")


def test_an_output_forced_through_the_model_gets_the_evidence_its_search_gave_it(translator):
    """Word alignment and word probabilities; the random model never ends, so its search's confidence has no EOS
    term where the forced pass (which takes every output as finished) has one."""
    settings = replace(translator.decode, beam_size=1, max_len=10)
    searched = translator.translations(SOURCES, settings, evidence=True)
    # the evidence reads the alignment settings, which `settings` keeps from the checkpoint's
    forced = bench.forced_evidence(translator, SOURCES, [t.tokens for t in searched])
    for search, reference in zip(searched, forced, strict=True):
        assert reference.text == search.text
        assert reference.evidence.alignment == search.evidence.alignment
        assert reference.evidence.word_probs == pytest.approx(search.evidence.word_probs, rel=1e-3, abs=0)
