"""Bans: loops, avoided phrases and forced prefixes, on bare log-probabilities and in both searches on a random
model (whose outputs loop a lot: a hard case)."""

import pytest
import torch
from test_beam import SOURCES
from test_beam import model as model  # noqa: F401 (the fixture)

from tnmt.config import DecodeConfig
from tnmt.decode import search
from tnmt.decode.bans import Bans
from tnmt.decode.constraints import Constraints

NEG = float("-inf")


def banned(bans: Bans, written: list[list[int]], sentences: list[int], vocab: int = 8) -> list[set[int]]:
    log_probs = torch.zeros(len(written), vocab)
    bans.apply_(log_probs, torch.tensor(written, dtype=torch.long).view(len(written), -1), torch.tensor(sentences))
    return [set((row == NEG).nonzero().view(-1).tolist()) for row in log_probs]


def test_a_third_repeat_of_an_ngram_back_to_back_is_banned_unless_the_source_loops():
    bans = Bans([Constraints(), Constraints(allow_loops=True)], block_loops=True, device=torch.device("cpu"))
    assert banned(bans, [[4, 5, 5]], [0]) == [{5}]  # "5 5" -> no third 5
    assert banned(bans, [[4, 5, 6, 4, 5, 6, 4, 5]], [0]) == [{6}]  # "4 5 6" twice and "4 5" -> no 6
    assert banned(bans, [[4, 5, 4, 5, 4]], [0]) == [{5}]
    assert banned(bans, [[4, 5, 6, 7]], [0]) == [set()]
    assert banned(bans, [[4, 5, 5], [4, 5, 5]], [0, 1]) == [{5}, set()]  # sentence 1's source loops
    assert not Bans([Constraints()], block_loops=False, device=torch.device("cpu")).active


def test_avoided_phrases_lose_their_last_token_and_a_prefix_wins_over_every_ban():
    c = Constraints(avoided=((3,), (4, 5, 6)), prefix=(3, 3))
    bans = Bans([c, Constraints(avoided=((4, 5, 6),))], block_loops=False, device=torch.device("cpu"))
    assert banned(bans, [[1, 4, 5], [1, 4, 5]], [1, 1]) == [{6}, {6}]
    assert banned(bans, [[9, 5], [4, 9]], [1, 1], vocab=10) == [set(), set()]
    log_probs = torch.log_softmax(torch.randn(1, 8), dim=1)
    expected = log_probs[0, 3].item()
    bans.apply_(log_probs, torch.empty(1, 0, dtype=torch.long), torch.tensor([0]))  # step 0 of sentence 0: forced 3
    assert log_probs[0, 3].item() == expected and (log_probs[0, torch.arange(8) != 3] == NEG).all()


@pytest.mark.parametrize("beam_size", [1, 4])
def test_searches_never_write_an_avoided_phrase_nor_a_loop_and_start_with_the_prefix(model, beam_size):  # noqa: F811
    settings = DecodeConfig(beam_size=beam_size, max_len=20)
    plain = search(model, SOURCES, settings, n_best=1)
    # avoid each sentence's own most frequent bigram and token, and force a two-token prefix
    constraints = []
    for hyps in plain:
        tokens = hyps[0].tokens
        bigrams = list(zip(tokens, tokens[1:], strict=False))
        avoid = (max(set(bigrams), key=bigrams.count),) if bigrams else ()
        common = (max(set(tokens), key=tokens.count),) if tokens else (5,)
        constraints.append(Constraints(avoided=(*avoid, common), prefix=(7, 9)))
    found = search(model, SOURCES, settings, n_best=1, constraints=constraints)
    for hyps, c in zip(found, constraints, strict=True):
        tokens = hyps[0].tokens
        assert tokens[:2] == [7, 9]
        body = tokens[2:]
        for phrase in c.avoided:
            n = len(phrase)
            assert all(tuple(body[i : i + n]) != phrase for i in range(len(body) - n + 1))
        for n in range(1, 5):  # no n-gram three times in a row
            assert all(
                tokens[i : i + n] != tokens[i + n : i + 2 * n] or tokens[i : i + n] != tokens[i + 2 * n : i + 3 * n]
                for i in range(len(tokens) - 3 * n + 1)
            )
    off = search(model, SOURCES, DecodeConfig(beam_size=beam_size, max_len=20, block_loops=False), n_best=1)
    assert any(_loops(h[0].tokens) for h in off)  # the random model does loop without the ban


def _loops(tokens: list[int]) -> bool:
    return any(
        tokens[i : i + n] == tokens[i + n : i + 2 * n] == tokens[i + 2 * n : i + 3 * n]
        for n in range(1, 5)
        for i in range(len(tokens) - 3 * n + 1)
    )


def test_the_loop_check_on_lists_and_on_tensors_agree():
    torch.manual_seed(0)
    tokens = torch.randint(3, 6, (40, 12))  # 3 tokens only: loops of every period are common
    bans = Bans([Constraints(), Constraints(allow_loops=True)], block_loops=True, device=torch.device("cpu"))
    sentences = torch.arange(40) % 2
    tensors, lists = torch.zeros(40, 8), torch.zeros(40, 8)
    bans._loops(tensors, tokens, sentences)  # 40 rows: the tensor path
    for row in range(40):  # one row at a time: the list path
        bans._loops(lists[row : row + 1], tokens[row : row + 1], sentences[row : row + 1])
    assert torch.equal(tensors, lists) and (tensors == NEG).any()
