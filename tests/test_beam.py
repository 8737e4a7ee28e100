import math
from types import SimpleNamespace

import pytest
import torch

from tnmt import ModelConfig, Transformer
from tnmt.config import DecodeConfig
from tnmt.decode import Hypothesis, beam_search, beam_search_nbest, gnmt_length_penalty, greedy_search

PAD, BOS, EOS, A, B, C = range(6)


class ScriptedCache:
    """Each row remembers its sentence and the tokens fed so far; rows follow `reorder` like a KV cache."""

    def __init__(self, sentences: list[int]) -> None:
        self.rows = [(s, ()) for s in sentences]

    def reorder(self, indices: torch.Tensor, *, same_sources: bool = False) -> None:
        if same_sources:  # the promise beam search makes: every row keeps a parent of its own sentence
            assert all(self.rows[i][0] == row[0] for i, row in zip(indices.tolist(), self.rows, strict=True))
        self.rows = [self.rows[i] for i in indices.tolist()]

    def start_beams(self, n: int) -> None:
        self.rows = [row for row in self.rows for _ in range(n)]


class ScriptedModel:
    """A fake decoder whose next-token probabilities depend only on the sentence and the output prefix.

    `scripts[sentence][prefix]` maps tokens to probabilities; unlisted prefixes use `default`. The
    sentence is the first source id. It records the batch size of every decoder call.
    """

    def __init__(self, scripts: dict, default: dict[int, float], max_len: int = 50) -> None:
        self.config = SimpleNamespace(pad_id=PAD, bos_id=BOS, eos_id=EOS, max_len=max_len, language_ids=())
        self.scripts, self.default, self.calls = scripts, default, []

    def encode_for_decoding(self, src_ids):
        sentences = [int(s) for s in src_ids[:, 0]]  # only the sentence is remembered
        lengths = (src_ids != PAD).sum(dim=1)
        return SimpleNamespace(lengths=lengths, batch_size=len(sentences), cache=lambda _: ScriptedCache(sentences))

    def incremental_decoder(self, *, project=None):
        return self  # what a search steps: `step` below

    def step(self, tokens, cache, *, need_weights=False):
        self.calls.append(tokens.size(0))
        logits = torch.full((tokens.size(0), 1, 6), float("-inf"))
        for row, token in enumerate(tokens[:, 0].tolist()):
            assert token not in (EOS, PAD), "a finished hypothesis was extended"
            sentence, fed = cache.rows[row]
            cache.rows[row] = (sentence, (*fed, token))
            probs = self.scripts[sentence].get((*fed, token)[1:], self.default)
            for t, p in probs.items():
                logits[row, 0, t] = math.log(p)
        return logits, None


SCRIPT = {  # the greedy path a, a, EOS (p = 0.07) loses to b, EOS (p = 0.36)
    (): {A: 0.5, B: 0.4, C: 0.1},
    (A,): {A: 0.35, EOS: 0.3, B: 0.2, C: 0.15},
    (B,): {EOS: 0.9, A: 0.05, B: 0.03, C: 0.02},
    (A, A): {EOS: 0.4, A: 0.3, B: 0.2, C: 0.1},
    (A, B): {EOS: 0.5, A: 0.2, B: 0.2, C: 0.1},
}
DEFAULT = {EOS: 0.6, A: 0.2, B: 0.1, C: 0.1}
SHORT = {(): {C: 0.6, EOS: 0.3, A: 0.1}}  # a second sentence: EOS at once, or c then EOS


def hyp(tokens: list[int], prob: float, length: int, alpha: float) -> Hypothesis:
    return Hypothesis(tokens, math.log(prob) / gnmt_length_penalty(length, alpha), math.log(prob))


def assert_hypotheses(found: list[Hypothesis], expected: list[Hypothesis]) -> None:
    assert [h.tokens for h in found] == [h.tokens for h in expected]
    assert [h.score for h in found] == pytest.approx([h.score for h in expected], abs=1e-6)
    assert [h.log_prob for h in found] == pytest.approx([h.log_prob for h in expected], abs=1e-6)


def search(model, sentences: list[int], *, n_best: int, **options) -> list[list[Hypothesis]]:
    src = torch.tensor([[s, EOS] for s in sentences])
    options.setdefault("block_loops", False)  # the scripts repeat tokens on purpose
    return beam_search_nbest(model, src, DecodeConfig(**options), n_best=n_best)


def test_length_penalty_is_gnmt():
    assert gnmt_length_penalty(3, 0.6) == pytest.approx((8 / 6) ** 0.6)
    assert gnmt_length_penalty(7, 0.0) == 1.0


def test_a_scored_hypothesis_counts_eos_in_its_length_only_when_it_ended():
    assert Hypothesis.scored([A, B], -1.5, ended=True, alpha=0.6).score == -1.5 / gnmt_length_penalty(3, 0.6)
    assert Hypothesis.scored([A, B], -1.5, ended=False, alpha=0.6).score == -1.5 / gnmt_length_penalty(2, 0.6)


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_beats_the_greedy_choice_and_finishes_early(alpha):
    model = ScriptedModel({3: SCRIPT}, DEFAULT)
    [found] = search(model, [3], beam_size=2, n_best=2, length_penalty=alpha, max_len=10)
    # Step 2: b+EOS (0.36) is the best candidate; a+EOS (0.15) ranks third, outside the beam, and is
    # dropped. Step 3: a,a+EOS (0.07) finishes; the best open beam a,a,a (0.0525) cannot beat it.
    assert_hypotheses(found, [hyp([B], 0.4 * 0.9, 2, alpha), hyp([A, A], 0.5 * 0.35 * 0.4, 3, alpha)])
    assert model.calls == [2, 2, 2]  # stopped after 3 steps although 10 tokens were allowed
    assert greedy_search(ScriptedModel({3: SCRIPT}, DEFAULT), torch.tensor([[3, EOS]])) == [[A, A]]


def test_min_len_forbids_early_eos():
    model = ScriptedModel({3: SCRIPT}, DEFAULT)
    [found] = search(model, [3], beam_size=2, n_best=2, min_len=2, max_len=10)
    # No EOS at step 2, so b (0.4) loses its 0.9 ending and drops out; a,a then a,a,a and a,a,b finish.
    assert_hypotheses(found, [hyp([A, A], 0.07, 3, 0.6), hyp([A, A, A], 0.0525 * 0.6, 4, 0.6)])


def test_max_length_finishes_open_beams_without_eos():
    model = ScriptedModel({3: SCRIPT}, DEFAULT)
    [found] = search(model, [3], beam_size=2, n_best=2, max_len=2)
    # b+EOS finished at step 2; the open a,a (0.175) and a,b (0.1) stop at the limit, scored without EOS.
    assert_hypotheses(found, [hyp([B], 0.36, 2, 0.6), hyp([A, A], 0.5 * 0.35, 2, 0.6)])
    [single] = search(ScriptedModel({3: SCRIPT}, DEFAULT), [3], beam_size=2, n_best=2, max_len=1)
    assert_hypotheses(single, [hyp([A], 0.5, 1, 0.6), hyp([B], 0.4, 1, 0.6)])


def test_a_batch_shrinks_as_sentences_finish_and_matches_single_runs():
    scripts = {3: SCRIPT, 4: SHORT}
    model = ScriptedModel(scripts, DEFAULT)
    both = search(model, [4, 3], beam_size=2, n_best=2, max_len=10)
    # Sentence 4: EOS (0.3) at step 1, c then EOS (0.36) at step 2, and the open beams are worse.
    assert_hypotheses(both[0], [hyp([C], 0.6 * 0.6, 2, 0.6), hyp([], 0.3, 1, 0.6)])
    assert model.calls == [4, 4, 2]  # sentence 4 left the batch after step 2
    for i, sentence in enumerate([4, 3]):
        assert_hypotheses(both[i], search(ScriptedModel(scripts, DEFAULT), [sentence], beam_size=2, n_best=2)[0])


def test_beam_search_returns_the_best_tokens_and_checks_its_arguments():
    src = torch.tensor([[3, EOS]])
    assert beam_search(ScriptedModel({3: SCRIPT}, DEFAULT), src, DecodeConfig(beam_size=2)) == [[B]]
    with pytest.raises(ValueError, match="n_best"):
        beam_search_nbest(ScriptedModel({3: SCRIPT}, DEFAULT), src, DecodeConfig(beam_size=2), n_best=3)


# --- a real (random, tiny) Transformer ---


@pytest.fixture(scope="module")
def model() -> Transformer:
    torch.manual_seed(4)
    config = ModelConfig(
        src_vocab_size=24,
        tgt_vocab_size=24,
        d_model=16,
        n_heads=2,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=32,
        dropout=0.0,
        max_len=24,
        tie_output=False,
    )
    model = Transformer(config).eval()
    with torch.no_grad():
        model.output.weight.mul_(3.0)  # peakier distributions: outputs end at various lengths
    return model


SOURCES = torch.tensor(
    [[5, 6, 7, 8, 2, 0], [9, 10, 11, 12, 13, 2], [14, 2, 0, 0, 0, 0], [2, 0, 0, 0, 0, 0], [15, 3, 16, 2, 0, 0]]
)


def log_prob(model: Transformer, src: torch.Tensor, tokens: list[int], *, with_eos: bool) -> float:
    """Teacher-forced log-probability of `tokens` (+ EOS) for one unpadded source (1, S)."""
    c = model.config
    target = tokens + [c.eos_id] if with_eos else tokens
    with torch.no_grad():
        logits = model(src, torch.tensor([[c.bos_id, *target[:-1]]]))
    return float(logits.log_softmax(-1)[0, torch.arange(len(target)), target].sum())


def unpadded(i: int) -> torch.Tensor:
    return SOURCES[i : i + 1, : int((SOURCES[i] != 0).sum())]


@pytest.mark.parametrize("alpha", [0.0, 0.6])
def test_beam_size_one_is_greedy(model, alpha):
    greedy = greedy_search(model, SOURCES, DecodeConfig(max_len=12))
    assert beam_search(model, SOURCES, DecodeConfig(beam_size=1, max_len=12, length_penalty=alpha)) == greedy
    assert len({len(out) for out in greedy}) > 2  # the case is not trivial


def test_a_batch_equals_its_sentences_one_at_a_time(model):
    batch = beam_search_nbest(model, SOURCES, DecodeConfig(beam_size=3, max_len=12), n_best=3)
    for i in range(len(SOURCES)):
        alone = beam_search_nbest(model, unpadded(i), DecodeConfig(beam_size=3, max_len=12), n_best=3)[0]
        assert [h.tokens for h in batch[i]] == [h.tokens for h in alone]
        assert [h.score for h in batch[i]] == pytest.approx([h.score for h in alone], abs=1e-4)


def test_scores_are_the_models_log_probs_and_beat_greedy(model):
    limit = 12
    nbest = beam_search_nbest(model, SOURCES, DecodeConfig(beam_size=4, max_len=limit, length_penalty=0.0), n_best=4)
    greedy = greedy_search(model, SOURCES, DecodeConfig(max_len=limit))
    for i, hyps in enumerate(nbest):
        src = unpadded(i)
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        for h in hyps:  # the cache followed the beams: scores match teacher forcing
            assert h.log_prob == pytest.approx(log_prob(model, src, h.tokens, with_eos=len(h.tokens) < limit), abs=1e-4)
            assert h.score == h.log_prob
        greedy_log_prob = log_prob(model, src, greedy[i], with_eos=len(greedy[i]) < limit)
        assert hyps[0].log_prob >= greedy_log_prob - 1e-5


def test_empty_and_overlong_requests(model):
    [hyps] = beam_search_nbest(model, torch.tensor([[2]]), DecodeConfig(beam_size=2), n_best=2)  # source = just EOS
    assert 1 <= len(hyps) <= 2 and all(len(h.tokens) <= model.config.max_len - 1 for h in hyps)
    # A cap beyond the model's positions is clamped rather than overflowing the positional encoding.
    out = beam_search(model, SOURCES, DecodeConfig(beam_size=2, max_len=1000, min_len=1000))
    assert all(len(ids) == model.config.max_len - 1 for ids in out)
