"""What a glossary term replaces (translate/replaced.py): the model's own words for a term's source, learned from a
plain pass on a scripted door (its outputs and aligning attention written by hand), banned in the steered search,
and the checks of the result; then the same on a real (tiny) model, end to end."""

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch

from tnmt.config import DecodeConfig
from tnmt.decode.hypothesis import Hypothesis
from tnmt.translate.door import ForcedPass
from tnmt.translate.evidence import Evidence
from tnmt.translate.glossary import glossary_entry
from tnmt.translate.replaced import Inflections, PlainPass, plain_passes, replacing, term_checks
from tnmt.translate.steering import Steering

SENTENCE = "two hundred and five"  # source words: two 0, hundred 1, and 2, five 3
PLAIN = "due cento e cinque"


class ScriptedDoor:
    """A `ModelDoor` whose search answers `outputs` (texts, per sentence, best first) and whose teacher-forced pass
    has each output word look at the source word `looks[word]` (the aligning layer's head, one-hot per token); its
    logits (a pass without weights) are flat, but for the text `liked`, whose every token the model is sure of."""

    def __init__(
        self, tokenizer, outputs: list[list[str]], looks: dict[str, int], liked: str = "", rounds: list | None = None
    ) -> None:
        """`rounds`: the answers of the searches after the first, in order (default: `outputs` again)."""
        self.tokenizer, self.outputs, self.looks, self.liked = tokenizer, outputs, looks, liked
        self.rounds = list(rounds or [])
        self.device = torch.device("cpu")
        self.eos_id = tokenizer.eos_id
        self.searched: list = []

    def encode(self, sources, *, need_weights=False):
        return SimpleNamespace(select=lambda index: ("rows", index.tolist()))

    def search(self, sources, settings, *, n_best=1, constraints=None, encoder_attention=False, **_):
        answers = self.rounds.pop(0) if self.searched and self.rounds else self.outputs
        self.searched.append(constraints)
        met = [(0, 1)] * len(constraints[0].required) if constraints and constraints[0].required else []
        found = [
            [Hypothesis(self.tokenizer.encode_target(text), -1.0, -1.0, constraints=tuple(met)) for text in texts]
            for texts in answers
        ]
        encoded = SimpleNamespace(select=lambda index: ("rows", index.tolist()))
        return encoded, found

    def teacher_forced(self, sources, outputs, *, encoded=None, layers=None, weights=True, record=None):
        width = max(len(ids) for ids in outputs) + 1
        if not weights:
            logits = torch.zeros(len(outputs), width, 300)
            for k, ids in enumerate(outputs):
                if self.tokenizer.decode_target(ids) == self.liked:
                    logits[k, torch.arange(len(ids) + 1), torch.tensor([*ids, self.eos_id])] = 20.0
            return ForcedPass(encoded, None, logits, None)
        s = max(len(source.ids) for source in sources) + 1
        cross = torch.zeros(len(outputs), 1, width, s)
        for b, (source, ids) in enumerate(zip(sources, outputs, strict=True)):
            words = self.tokenizer.decode_target(ids).split()
            pieces = self.tokenizer.target_pieces(ids)
            word = -1
            for t, piece in enumerate(pieces):
                word += piece.startswith("▁")
                looked = self.looks[words[word]]
                positions = [k for k, w in enumerate(_source_words(source)) if w == looked]
                cross[b, 0, t, positions[0]] = 1.0  # the step that writes token t (alignment_shift off)
        return ForcedPass(encoded, None, None, [(None, cross)] * (layers or 1))


def _source_words(source) -> list[int]:
    word, found = -1, []
    for piece in source.pieces[: len(source.ids)]:
        word += piece.startswith("▁")
        found.append(word)
    return found


SETTINGS = DecodeConfig(beam_size=2, alignment_layer=1, alignment_head=1, alignment_shift=False)


def prepared(translator, text: str, steering: Steering):
    return translator.prepare([text], [steering], SETTINGS)


def test_the_plain_pass_finds_the_models_word_for_each_term(tiny_translator):
    glossary = (glossary_entry("two", "tre", where="g"), glossary_entry("five", "sei", where="g"))
    batch = prepared(tiny_translator, SENTENCE, Steering(glossary=glossary))
    looks = {"due": 0, "cento": 1, "e": 2, "cinque": 3, "mille": 3}
    door = ScriptedDoor(tiny_translator.tokenizer, [[PLAIN, "due cento e mille"]], looks)
    (plain,) = plain_passes(door, batch, SETTINGS, tiny_translator.tokenizer, aligning=0)
    assert plain.own == (("due",), ("cinque",))  # the best output's words
    assert plain.swaps == ("tre cento e sei",)
    assert door.searched[0][0].required == ()  # the plain pass searches without the terms
    steered = replacing(batch[0], plain, tiny_translator.tokenizer, Inflections(tiny_translator.planner.target_pieces))
    words = [
        {tiny_translator.tokenizer.decode_target(ids).strip() for ids in c} for c in steered.plan.constraints.replaced
    ]
    assert {"due", "Due"} <= words[0] and {"cinque", "Cinque"} <= words[1]
    forms = {ids for forms in steered.plan.constraints.required for ids in forms}
    assert not forms & {ids for c in steered.plan.constraints.replaced for ids in c}


def test_a_word_the_model_writes_for_another_source_word_too_is_not_banned(tiny_translator):
    batch = prepared(tiny_translator, "two and twenty", Steering(glossary=(glossary_entry("two", "tre", where="g"),)))
    alone = ScriptedDoor(tiny_translator.tokenizer, [["due e venti"]], {"due": 0, "e": 1, "venti": 2})
    (plain,) = plain_passes(alone, batch, SETTINGS, tiny_translator.tokenizer, aligning=0)
    assert plain.own == (("due",),)
    shared = ScriptedDoor(tiny_translator.tokenizer, [["due e due"]], {"due": 2, "e": 1})
    shared.teacher_forced = _first_due_on(0, shared.teacher_forced)
    (plain,) = plain_passes(shared, batch, SETTINGS, tiny_translator.tokenizer, aligning=0)
    assert plain.own == ((),)  # "due" also translates "twenty": a ban would take it there


def _first_due_on(word: int, forced):
    """The scripted pass with the first output token looking at source word `word` instead."""

    def changed(sources, outputs, **kwargs):
        result = forced(sources, outputs, **kwargs)
        cross = result.weights[0][1]
        cross[:, :, 0] = 0.0
        cross[:, :, 0, word] = 1.0
        return result

    return changed


def test_no_term_no_plain_pass(tiny_translator):
    batch = prepared(tiny_translator, SENTENCE, Steering(glossary=(glossary_entry("seven", "sette", where="g"),)))
    door = ScriptedDoor(tiny_translator.tokenizer, [[PLAIN]], {})
    assert plain_passes(door, batch, SETTINGS, tiny_translator.tokenizer, aligning=0) == [None]
    assert door.searched == []
    assert replacing(batch[0], None, tiny_translator.tokenizer, None) is batch[0]
    plain_text = [t.text for t in tiny_translator.translations([SENTENCE])]
    absent = Steering(glossary=(glossary_entry("seven", "sette", where="g"),))
    assert [t.text for t in tiny_translator.translations([SENTENCE], steering=[absent])] == plain_text


def test_a_term_inside_a_kept_span_changes_nothing(tiny_translator):
    steering = Steering(glossary=(glossary_entry("two", "tre", where="g"),), do_not_translate=("two hundred",))
    (one,) = prepared(tiny_translator, SENTENCE, steering)
    assert one.plan.constraints.required == () and not one.plan.glossed
    kept_only = tiny_translator.translations([SENTENCE], steering=[Steering(do_not_translate=("two hundred",))])
    assert tiny_translator.translations([SENTENCE], steering=[steering]) == kept_only


def test_the_checks_say_doubled_and_lost(tiny_translator):
    glossary = (glossary_entry("two", "tre", where="g"),)
    (one,) = prepared(tiny_translator, SENTENCE, Steering(glossary=glossary))
    rendered = {0: frozenset({"mille"}), 1: frozenset({"cento"}), 3: frozenset({"cinque"})}
    plain = PlainPass(own=(("mille",),), rendered=rendered)
    clean = Evidence([(0, 0), (1, 1), (2, 2), (3, 3)], [1.0] * 4, 1.0, [])
    assert term_checks(one, plain, "tre cento e cinque", clean, [(0,)]) == [(False, ())]
    assert term_checks(one, plain, "tre mille cento e cinque", clean, [(0,)]) == [(True, ())]
    assert term_checks(one, plain, "Tre Millen cento", clean, [(0,)]) == [(True, ())]  # the word inflected
    assert term_checks(one, plain, "Tre Mil cento", clean, [(0,)]) == [(False, ())]  # too short to be its stem
    dropped = Evidence([(0, 0), (1, 1)], [1.0] * 2, 1.0, [])
    assert term_checks(one, plain, "tre cento", dropped, [(0,)]) == [(False, ("five",))]
    assert term_checks(one, plain, "tre cento e cinque", dropped, [(0,)]) == [(False, ())]  # its word is there
    assert term_checks(one, plain, "tre cento", None, [(0,)]) == [(False, ())]  # no alignment: nothing known


def test_the_forms_report_says_which_was_written(tiny_translator):
    settings = replace(tiny_translator.decode, beam_size=3, max_len=8)
    steering = Steering(glossary=(glossary_entry("two", "tre | sei", where="g"),))
    (result,) = tiny_translator.translations(["two hundred"], settings, steering=[steering])
    (report,) = result.constraints
    assert report.met and report.form in ("tre", "sei")
    assert [result.text.split()[j].strip(".,") for j in report.words] == [report.form]


@pytest.mark.parametrize("text", ["", "   "])
def test_blank_texts_stay_as_they_were(tiny_translator, text):
    steering = Steering(glossary=(glossary_entry("two", "tre", where="g"),))
    assert tiny_translator.translations([text], steering=[steering])[0].text == text


def test_of_two_words_that_read_a_terms_source_the_model_chooses_the_one_the_term_replaces(tiny_translator):
    """ "Ein Kind" both read "Child": the term takes the place the model scores best with it ("Ein Sprössling", not
    "Sprössling Kind"), and only that word is the model's own."""
    batch = prepared(tiny_translator, "two and twenty", Steering(glossary=(glossary_entry("two", "tre", where="g"),)))
    looks = {"cento": 0, "due": 0, "e": 1, "venti": 2}
    for liked, own in (("cento tre e venti", ("due",)), ("tre due e venti", ("cento",))):
        door = ScriptedDoor(tiny_translator.tokenizer, [["cento due e venti"]], looks, liked=liked)
        (plain,) = plain_passes(door, batch, SETTINGS, tiny_translator.tokenizer, aligning=0)
        assert (plain.own, plain.swaps) == ((own,), (liked,))
