"""Lexical constraints: the progress of one hypothesis, the beams' allocation, and the constrained beam search on a
scripted decoder whose every step is computed by hand below."""

import math

import pytest
import torch
from test_beam import DEFAULT, EOS, SCRIPT, A, B, C, ScriptedModel

from tnmt.config import DecodeConfig
from tnmt.decode import beam_search_nbest, search
from tnmt.decode.allocation import _allocation
from tnmt.decode.constraints import Constraints, Progress, ProgressTable

ONLY_C = Constraints(required=(((C,),),))


def run(constraints: list[Constraints], *, beam_size: int = 2, max_len: int = 0, n_best: int = 2, sentences=(0,)):
    model = ScriptedModel({0: SCRIPT, 1: SCRIPT}, DEFAULT)
    src = torch.tensor([[s, EOS] for s in sentences])
    settings = DecodeConfig(beam_size=beam_size, length_penalty=0.0, max_len=max_len, block_loops=False)
    return beam_search_nbest(model, src, settings, n_best=n_best, constraints=constraints)


def test_progress_follows_forms_and_alternatives():
    c = ProgressTable(Constraints(required=(((A, B), (C,)), ((B, B),))))  # "a b" or "c"; and "b b"
    p = Progress.start(c)
    assert p.wants(c) == {A, C, B} and p.needed == 1 + 2 and p.bank == 0
    p = p.advance(c, A, 0)
    assert p.partial == ((0, 0, 1),) and p.bank == 1 and p.needed == 1 + 2
    p = p.advance(c, B, 1)  # meets the first ("a b" at 0..2) and starts "b b"
    assert p.spans == ((0, 2), None) and p.met == 1 and p.partial == ((1, 0, 1),)
    assert p.bank == 1 * c.width + 1 and p.wants(c) == {B}
    assert p.advance(c, A, 2).partial == ()  # a broken form starts over
    done = p.advance(c, B, 2)
    assert done.all_met and done.spans == ((0, 2), (1, 3)) and done.may_end(5)
    assert not p.may_end(1) and p.may_end(0)  # one token left can still meet it; none cannot


def test_allocation_keeps_each_banks_best_then_goes_by_score():
    scores = torch.tensor([[-1.0, -2.0, -3.0, -4.0, -0.5, float("-inf")]])
    banks = torch.tensor([[0, 2, 2, 1, 0, 2]])
    assert _allocation(scores, banks).tolist() == [[1, 3, 4, 0, 2, 5]]  # bank 2's, 1's, 0's best; by score; dead
    assert _allocation(scores, torch.zeros_like(banks)).tolist() == [[4, 0, 1, 2, 3, 5]]  # one bank: by score


def test_a_constraint_the_plain_beam_never_writes_is_placed_by_allocation():
    # plain beam 2: step 0 keeps a (.5), b (.4); c (.1) never enters. With "c" required, by hand (alpha 0):
    # step 0: the best of each bank first: c (met), a -> beams c, a.
    # step 1: a's EOS (.3, not sure) waits for "c"; candidates aa .175 ab .1 | ac .075 c EOS .06 ...
    #         -> order ac (bank "met"), aa (bank 0), then by score: ab, c EOS -> beams ac, aa.
    # step 2: a c EOS .045 (best of "met") finishes; aa's EOS waits; aaa .0525 (best of bank 0) and, by score,
    #         aab .035 are the beams. At max_len 3 they finish there, unmet: met ones rank first.
    found = run([ONLY_C], max_len=3)[0]
    assert [(h.tokens, h.ended, h.constraints) for h in found] == [
        ([A, C], True, ((1, 2),)),
        ([A, A, A], False, (None,)),
    ]
    assert [h.log_prob for h in found] == pytest.approx([math.log(0.045), math.log(0.0525)], abs=1e-5)
    plain = run([Constraints()], max_len=3)[0]
    assert all(C not in h.tokens for h in plain)


def test_at_the_length_limit_the_unmet_are_reported_and_rank_last():
    found = run([ONLY_C], max_len=2)[0]
    assert [(h.tokens, h.ended, h.constraints) for h in found] == [([A, C], False, ((1, 2),)), ([A, A], False, (None,))]


def test_eos_is_allowed_when_the_limit_leaves_no_room_for_the_constraint():
    too_long = Constraints(required=(((C, C, C),),))
    found = run([too_long], max_len=2, n_best=1)[0]
    plain = run([Constraints()], max_len=2, n_best=1)[0]
    assert found[0].tokens == plain[0].tokens and found[0].constraints == (None,)


def test_each_sentence_of_a_batch_has_its_own_constraints_and_matches_its_own_search():
    per_sentence = [ONLY_C, Constraints(required=(((B, B), (C, A)),)), Constraints()]
    batch = run(per_sentence, sentences=(0, 1, 0), max_len=4)
    for i, c in enumerate(per_sentence):
        alone = run([c], sentences=((0, 1, 0)[i],), max_len=4)[0]
        assert [h.tokens for h in batch[i]] == [h.tokens for h in alone]
    assert batch[0][0].met == 1 and batch[1][0].met == 1 and batch[2][0].constraints == ()


def test_a_search_leaves_its_constraints_as_it_found_them():
    # the memo of needs, banks and wanted tokens is the search's own (a ProgressTable), not the shared value's
    constraints = Constraints(required=(((B, B), (C, A)),))
    before = dict(vars(constraints))
    run([constraints], max_len=4)
    assert vars(constraints) == before


def test_a_beam_of_one_writes_the_constraint_at_once():
    model = ScriptedModel({0: SCRIPT}, DEFAULT)
    model.config.tgt_vocab_size = 6
    settings = DecodeConfig(beam_size=1, length_penalty=0.0, block_loops=False)
    found = search(model, torch.tensor([[0, EOS]]), settings, constraints=[ONLY_C])[0][0]
    assert found.tokens == [C] and found.constraints == ((0, 1),)


def test_constraints_are_checked():
    with pytest.raises(ValueError, match="non-empty form"):
        Constraints(required=(((),),))
    with pytest.raises(ValueError, match="empty phrase"):
        Constraints(avoided=((),))
    with pytest.raises(ValueError, match="one Constraints per sentence"):
        run([ONLY_C, ONLY_C])


def test_a_constraint_tied_to_source_tokens_is_offered_where_the_attention_reads_them():
    c = ProgressTable(Constraints(required=(((A,),), ((B,),)), sources=((3, 5), None)))
    p = Progress.start(c)
    assert p.wants(c, focus=0) == {B}  # "a" waits for the source tokens 3-4; "b" belongs anywhere
    assert p.wants(c, focus=2) == p.wants(c, focus=5) == {A, B}  # on them or next to them
    assert p.wants(c) == {A, B}  # no attention known: anywhere
    with pytest.raises(ValueError, match="one per constraint"):
        Constraints(required=(((A,),),), sources=((0, 1), None))


def test_a_met_form_ends_its_word():
    joiners = torch.zeros(6, dtype=torch.bool)
    joiners[A] = True  # "a" continues a word: right after the form "c" is met, it may not follow
    script = {(): {C: 0.6, A: 0.3, B: 0.1}, (C,): {A: 0.9, EOS: 0.1}, (C, A): {EOS: 1.0}}
    model = ScriptedModel({0: script}, {EOS: 1.0})
    settings = DecodeConfig(beam_size=2, length_penalty=0.0, block_loops=False)
    ruled = Constraints(required=(((C,),),), continuations=joiners)
    src = torch.tensor([[0, EOS]])
    assert beam_search_nbest(model, src, settings, constraints=[ONLY_C])[0][0].tokens == [C, A]
    assert beam_search_nbest(model, src, settings, constraints=[ruled])[0][0].tokens == [C]


def test_the_words_a_term_replaces_are_never_written_before_or_after_it():
    """`replaced`: the model's own word for the term's source (here "a", its first choice at every step) is banned
    while the term ("c") is pending and once it is written; without it the beam writes "a" beside the term."""
    term = Constraints(required=(((C,),),))
    beside = run([term], beam_size=3, n_best=3)[0]
    assert any(A in h.tokens for h in beside)  # the term joins the model's word
    replacing = Constraints(required=(((C,),),), replaced=(((A,),),))
    found = run([replacing], beam_size=3, n_best=3)[0]
    assert found and all(A not in h.tokens and C in h.tokens for h in found)
    # the only change is the ban: each hypothesis is one the unreplaced search could write without "a"
    assert found[0].tokens == run([Constraints(required=(((C,),),), avoided=((A,),))], beam_size=3)[0][0].tokens


def test_replaced_words_are_checked():
    with pytest.raises(ValueError, match="replaced: one per constraint"):
        Constraints(required=(((C,),),), replaced=(((A,),), ((B,),)))
    with pytest.raises(ValueError, match="inside a required form"):
        Constraints(required=(((C, A),),), replaced=(((A,),),))
    with pytest.raises(ValueError, match="an empty phrase cannot be banned"):
        Constraints(required=(((C,),),), replaced=(((),),))
    assert Constraints(required=(((C,),),), avoided=((B,),), replaced=(((A,),),)).banned == ((B,), (A,))


def test_of_a_terms_forms_the_one_the_model_prefers_is_written():
    """A term with forms ("b" | "c"): the search offers every form, and the one the model gives more probability
    in the sentence wins ("b", .4 against "c"'s .1 at the first step), whichever is listed first."""
    for forms in (((C,), (B,)), ((B,), (C,))):
        found = run([Constraints(required=(forms,))], max_len=3)[0]
        assert found[0].tokens[found[0].constraints[0][0]] == B


def test_one_occurrence_meets_one_constraint():
    """A term the source holds twice is two constraints with the same form: one written "c" meets one of them."""
    twice = ProgressTable(Constraints(required=(((C,),), ((C,),))))
    p = Progress.start(twice).advance(twice, C, 0)
    assert p.spans == ((0, 1), None) and p.needed == 1
    assert p.advance(twice, C, 1).spans == ((0, 1), (1, 2))
