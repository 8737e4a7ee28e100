"""The search of a glossary's sentences (translate/term_search.py): the passes in order on a scripted door (the
second search, the plain translation swapped in and when it wins), what a swap must obey, and the whole on a real
(tiny) model."""

from dataclasses import replace

import torch
from test_replaced import PLAIN, SENTENCE, SETTINGS, ScriptedDoor, prepared

from tnmt.decode.constraints import Constraints
from tnmt.translate import term_search
from tnmt.translate.door import ModelDoor
from tnmt.translate.glossary import glossary_entry
from tnmt.translate.replaced import Inflections, plain_passes
from tnmt.translate.steering import Steering
from tnmt.translate.term_search import _meets, search_replacing

LOOKS = {"due": 0, "cento": 1, "e": 2, "cinque": 3, "tre": 0, "mille": 0}


def run(translator, door, steering):
    batch = prepared(translator, SENTENCE, steering)
    inflections = Inflections(translator.planner.target_pieces)
    found = search_replacing(door, batch, SETTINGS, translator.tokenizer, inflections, aligning=0)
    return translator.tokenizer.decode_target(found.found[0][0].tokens), found.searched[0], found.plain[0]


def test_the_plain_translation_swapped_in_wins_where_the_search_dropped_its_words(tiny_translator):
    steering = Steering(glossary=(glossary_entry("two", "tre", where="g"),))
    door = ScriptedDoor(tiny_translator.tokenizer, [[PLAIN]], LOOKS, rounds=[[["tre cento"]]])
    text, searched, plain = run(tiny_translator, door, steering)
    assert plain.swaps == ("tre cento e cinque",) and text == "tre cento e cinque"  # "e cinque" was dropped
    assert len(door.searched) == 2  # plain, then steered: nothing to search again
    door = ScriptedDoor(tiny_translator.tokenizer, [[PLAIN]], LOOKS, rounds=[[["tre cento e cinque"]]])
    assert run(tiny_translator, door, steering)[0] == "tre cento e cinque"
    avoided = Steering(glossary=steering.glossary, avoid=("cinque",))
    door = ScriptedDoor(tiny_translator.tokenizer, [[PLAIN]], LOOKS, rounds=[[["tre cento"]]])
    assert run(tiny_translator, door, avoided)[0] == "tre cento"  # the swap writes an avoided word: not taken


def test_a_second_synonym_is_banned_and_searched_again(tiny_translator):
    steering = Steering(glossary=(glossary_entry("two", "tre", where="g"),))
    rounds = [[["tre mille cento e cinque"]], [["tre cento e cinque"]]]  # "mille" reads "two": a second word for it
    door = ScriptedDoor(tiny_translator.tokenizer, [[PLAIN]], LOOKS, rounds=rounds)
    text, searched, plain = run(tiny_translator, door, steering)
    assert plain.own == (("due", "mille"),) and len(door.searched) == 3
    banned = {tiny_translator.tokenizer.decode_target(ids).strip() for ids in door.searched[2][0].replaced[0]}
    assert {"due", "mille"} <= banned and text == "tre cento e cinque"


def test_a_swap_obeys_the_prefix_the_avoided_phrases_the_terms_and_loops():
    a, b, c = 5, 6, 7
    joins = torch.zeros(10, dtype=torch.bool)
    joins[c] = True  # "c" continues a word
    rules = Constraints(required=(((a,), (b,)),), avoided=((c, c),), prefix=(b,), continuations=joins)
    assert _meets(rules, [b, a, 8], block_loops=True) == ((0, 1),)  # "b" at 0 meets the term, and is the prefix
    assert _meets(rules, [a, b], block_loops=True) is None  # not the prefix
    assert _meets(rules, [b, c, c], block_loops=True) is None  # avoided
    assert _meets(replace(rules, prefix=()), [a, c, 9], block_loops=True) is None  # "a" continued: not the term
    assert _meets(replace(rules, prefix=()), [9, 9, 9, a], block_loops=True) is None  # a loop
    assert _meets(replace(rules, prefix=()), [9, 9, 9, a], block_loops=False) == ((3, 4),)


def test_the_steered_search_never_writes_the_models_word(tiny_translator):
    """On a real (random, tiny) model: each term's own words, as the plain pass finds them, appear in no
    hypothesis of the steered search; no term is reported doubled, and one met reports the form it wrote."""
    settings = replace(tiny_translator.decode, beam_size=3, max_len=12)
    texts = ["two hundred and five", "five thousand two hundred", "seven hundred"]
    entries = (glossary_entry("two", "tre", where="g"), glossary_entry("five", "sei", where="g"))
    steering = [Steering(glossary=entries)] * len(texts)
    batch = tiny_translator.prepare(texts, steering, settings)
    aligning = 0
    passes = plain_passes(tiny_translator.door, batch, settings, tiny_translator.tokenizer, aligning=aligning)
    found = tiny_translator.translations(texts, settings, n_best=3, steering=steering, evidence=True)
    for one, plain, result in zip(batch, passes, found, strict=True):
        assert (plain is None) == (not one.plan.glossed)
        own = {w.casefold() for words in (plain.own if plain else ()) for w in words}
        for hypothesis in result.nbest:
            assert not own & {w.strip(".,").casefold() for w in hypothesis.text.split()}, (own, hypothesis.text)
        for report in result.constraints:
            # (a random model may glue the term to what it writes next: the form says what was written)
            assert not report.doubled and (report.form.startswith(report.target) if report.met else not report.form)


def test_the_trace_under_a_glossary_is_the_search_that_translates(tiny_translator):
    settings = replace(tiny_translator.decode, beam_size=3, max_len=12)
    steering = Steering(glossary=(glossary_entry("two", "tre", where="g"), glossary_entry("five", "sei", where="g")))
    for text in ("two hundred and five", "five thousand two hundred"):
        (translated,) = tiny_translator.translations([text], settings, steering=[steering])
        assert tiny_translator.trace(text, settings, steering=steering).translation == translated.text


def test_the_trace_is_the_round_whose_result_is_kept(tiny_translator, monkeypatch):
    """Issue 79's defect 1: a second round that loses (it meets fewer terms) is not the search a trace shows."""
    settings = replace(tiny_translator.decode, beam_size=3, max_len=12)
    steering = Steering(glossary=(glossary_entry("two", "tre", where="g"),))
    measured = term_search._second_round

    def every_sentence(door, searched, plain, *rest):  # each glossed sentence searched again, its terms anywhere
        grown = measured(door, searched, plain, *rest)
        return {b: (grown.get(b, (one, True))[0], True) for b, one in enumerate(plain) if one is not None}

    searches = []
    real = ModelDoor.search

    def losing(self, sources, settings, *, constraints=None, **options):
        encoded, found = real(self, sources, settings, constraints=constraints, **options)
        second = bool(constraints and constraints[0].required and not constraints[0].sources)
        searches.append("second" if second else "other")
        if second:  # it meets no term: the first round's result is kept
            found = [[replace(h, constraints=(None,) * len(h.constraints)) for h in one] for one in found]
        return encoded, found

    monkeypatch.setattr(term_search, "_second_round", every_sentence)
    monkeypatch.setattr(ModelDoor, "search", losing)
    for text in ("two hundred and five", "five thousand two hundred"):
        (translated,) = tiny_translator.translations([text], settings, steering=[steering])
        searches.clear()
        trace = tiny_translator.trace(text, settings, steering=steering)
        assert searches == ["other", "other", "second"]  # plain pass, first round, second round: nothing re-run
        final = trace.steps[-1].finished[0]  # the first round's best: it meets the term
        assert trace.translation == translated.text and final.met == 1
        searched = tiny_translator.tokenizer.decode_target(final.tokens)
        assert trace.swapped_in or trace.translation == searched  # else a swap, scored beside it, is the answer


def test_a_swap_meets_a_term_given_twice_only_with_two_occurrences():
    twice = Constraints(required=(((5,),), ((5,),)))
    assert _meets(twice, [5, 8, 5], block_loops=False) == ((0, 1), (2, 3))
    assert _meets(twice, [5, 8, 9], block_loops=False) is None
