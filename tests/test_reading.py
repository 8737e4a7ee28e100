"""What the model reads of a text (translate/reading.py): each segment read once, for its fit, its steering plan
and the search's source; segmentation off reads each text whole."""

from collections import Counter
from dataclasses import replace

import pytest

from tnmt.errors import UserError
from tnmt.translate.glossary import glossary_entry
from tnmt.translate.prepared import Tokenised
from tnmt.translate.steering import Steering

LONG = "two hundred and five thousand two hundred and seven hundred and five thousand and two. two hundred"


@pytest.fixture
def readings(tiny_translator, monkeypatch) -> Counter:
    """How often each text is tokenised as a source."""
    seen: Counter = Counter()
    tokenizer = type(tiny_translator.tokenizer)
    real = tokenizer.encode_source_pieces

    def counted(self, text):
        seen[text] += 1
        return real(self, text)

    monkeypatch.setattr(tokenizer, "encode_source_pieces", counted)
    return seen


@pytest.mark.parametrize("glossed", [False, True])
def test_each_segment_is_tokenised_once_for_its_fit_its_plan_and_its_source(tiny_translator, readings, glossed):
    steering = Steering(glossary=(glossary_entry("two", "tre", where="g"),)) if glossed else None
    split = tiny_translator.split([LONG], [steering], replace(tiny_translator.decode, max_len=0))
    segments = [p.read for p in split.prepared]
    assert len(segments) > 2  # the long sentence is cut into parts: each part's fit was measured
    assert " ".join(segments).split() == LONG.split()
    assert all(readings[segment] == 1 for segment in segments), readings
    assert all(p.plan.glossed == glossed for p in split.prepared if "two" in p.read.split())


def test_with_segmentation_off_a_text_is_one_segment(tiny_translator):
    settings = replace(tiny_translator.decode, segment=False)
    split = tiny_translator.split([LONG, ""], None, settings)
    assert split.layouts is None and [p.text for p in split.prepared] == [LONG, ""]
    assert split.prepared[1].source is None and len(split.prepared[0].source.ids) == 15  # cut to max_len - 1


def test_one_steering_per_text(tiny_translator):
    with pytest.raises(UserError, match="1 steering entries for 2 texts"):
        tiny_translator.split(["one", "two"], [None])


def test_a_reading_is_kept_only_for_a_text_that_fits(tiny_translator, readings):
    tokenise = Tokenised(tiny_translator.tokenizer)
    assert not tokenise.fits(LONG, 15) and tokenise.fits("two hundred", 15)
    assert list(tokenise._read) == ["two hundred"]  # the text that is cut is read again in parts, never whole
    tokenise("two hundred")
    assert readings["two hundred"] == 1
