"""Steering by text through the Translator (translate/steering.py): what the model reads, the constraints it meets,
the spans it keeps, and the errors that name their entry. On a random tiny model over number words (en -> it):
the constraints are met by the search, not by the model's knowledge."""

import pytest

from tnmt.config import DecodeConfig
from tnmt.errors import UserError
from tnmt.translate.glossary import GlossaryEntry
from tnmt.translate.steering import Steering

SETTINGS = DecodeConfig(beam_size=3, max_len=12)


def translate(translator, text: str, steering: Steering | None, settings: DecodeConfig = SETTINGS, **options):
    return translator.translations([text], settings, steering=[steering], **options)[0]


def test_a_glossary_term_applies_where_its_source_occurs_and_is_met(tiny_translator):
    glossary = (GlossaryEntry("two hundred", ("duecento",)), GlossaryEntry("nine", ("nove",)))
    found = translate(tiny_translator, "two hundred and five", Steering(glossary=glossary))
    assert [(c.target, c.source, c.met) for c in found.constraints] == [("duecento", "glossary", True)]
    [report] = found.constraints
    assert " ".join(found.text.split()[j] for j in report.words).startswith("duecento")
    assert "duecento" in found.text
    assert translate(tiny_translator, "two thousand", Steering(glossary=glossary)).constraints == ()


def test_forms_are_alternatives_and_each_text_of_a_batch_has_its_own(tiny_translator):
    steering = [Steering(include=(("sette", "otto"),)), None, Steering(include=(("tre",), ("mille",)))]
    texts = ["four", "five", "six hundred"]
    found = tiny_translator.translations(texts, SETTINGS, steering=steering)
    assert found[0].constraints[0].met and ("sette" in found[0].text or "otto" in found[0].text)
    assert found[1].constraints == ()
    assert [c.met for c in found[2].constraints] == [True, True]
    assert "tre" in found[2].text and "mille" in found[2].text


def test_the_prefix_starts_the_output_and_avoided_words_never_appear(tiny_translator):
    plain = translate(tiny_translator, "three hundred", None)
    first = plain.text.split()[0]
    found = translate(tiny_translator, "three hundred", Steering(avoid=(first,), prefix="cento"))
    assert found.text.startswith("cento")
    for spelling in tiny_translator.tokenizer.target_segmentations(first, 8):  # every way to write it: never written
        n = len(spelling)
        assert all(found.tokens[i : i + n] != spelling for i in range(len(found.tokens) - n + 1))


def test_spans_the_model_cannot_read_pass_through_untouched(tiny_translator):
    assert translate(tiny_translator, "🐶🐶 🚲", None).text == "🐶🐶 🚲"
    found = translate(tiny_translator, "two https://example.org/a?b=1 three 🐶", None, evidence=True)
    assert "https://example.org/a?b=1" in found.text and "🐶" in found.text
    words = found.text.split()
    url = words.index("https://example.org/a?b=1")
    assert (1, url) in found.evidence.alignment and found.evidence.word_probs[url] == 1.0
    assert len(found.evidence.word_probs) == len(words)
    plain = translate(tiny_translator, "two three", None)
    assert [w for w in words if w not in ("https://example.org/a?b=1", "🐶")] == plain.text.split()


def test_do_not_translate_terms_are_written_as_given(tiny_translator):
    found = translate(tiny_translator, "four hundred", Steering(do_not_translate=("hundred",)), evidence=True)
    words = found.text.split()
    assert "hundred" in words and found.constraints == ()
    plain = translate(tiny_translator, "four", None)  # the model reads the text without the term
    assert [w for w in words if w != "hundred"] == plain.text.split()
    assert (1, words.index("hundred")) in found.evidence.alignment


def test_trace_is_the_translation_with_constraints(tiny_translator):
    steering = Steering(include=(("mille",),))
    found = translate(tiny_translator, "seven", steering)
    trace = tiny_translator.trace("seven", SETTINGS, steering=steering)
    assert trace.translation == found.text
    last = trace.steps[-1]
    assert any(h.constraints == (True,) for h in last.hypotheses) or last.finished[0].met == 1


@pytest.mark.parametrize(
    ("steering", "message"),
    [
        (Steering(include=(("",),)), r"include\[0\]: an empty target term"),
        (Steering(avoid=("  ",)), r"avoid\[0\]: an empty phrase"),
        (Steering(include=(("mille",),), avoid=("mille",)), "'mille' is required and avoided"),
        (Steering(prefix="mille", avoid=("mille",)), "the prefix contains the avoided 'mille'"),
        (Steering(include=(("uno " * 40,),)), "more than the 12 the output may have"),
        (Steering(include=tuple((w,) for w in ["uno"] * 33)), "at most 32"),
    ],
)
def test_steering_that_cannot_be_met_is_refused_naming_the_entry(tiny_translator, steering, message):
    with pytest.raises(UserError, match=message):
        translate(tiny_translator, "four", steering)


def test_an_avoided_word_is_banned_glued_to_what_precedes_it_too(tiny_translator):
    tokenizer = tiny_translator.tokenizer
    [plan] = [p.plan for p in tiny_translator.prepare(["four"], [Steering(avoid=("cento",))])]
    spelling = tuple(tokenizer.encode_target("cento"))
    glued = spelling[1:] if tokenizer.target_pieces(spelling[:1]) == ["▁"] else None
    assert spelling in plan.constraints.avoided and (glued is None or glued in plan.constraints.avoided)
