import pytest
import torch

from tnmt import ModelConfig, Transformer
from tnmt.config import DecodeConfig
from tnmt.decode import beam_search_nbest, gnmt_length_penalty, greedy_hypotheses, greedy_search
from tnmt.model import BoundDecoder

SOURCES = torch.tensor(
    [[5, 6, 7, 8, 2, 0], [9, 10, 11, 12, 13, 2], [14, 2, 0, 0, 0, 0], [2, 0, 0, 0, 0, 0], [15, 3, 16, 2, 0, 0]]
)


def tiny_model(*, logits_bias: dict[int, float] | None = None) -> Transformer:
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
        final_logits_bias=logits_bias is not None,
        tie_output=False,
    )
    model = Transformer(config).eval()
    with torch.no_grad():
        model.output.weight.mul_(3.0)  # peakier distributions: outputs end at various lengths
        for token, bias in (logits_bias or {}).items():
            model.logits_bias[token] = bias
    return model


@pytest.fixture(scope="module")
def model() -> Transformer:
    return tiny_model()


def reference_greedy(model: Transformer, src: torch.Tensor, *, limit: int, min_len: int = 0) -> list[int]:
    """The textbook loop: rerun the whole decoder on the whole prefix, no cache, one sentence (1, S)."""
    c = model.config
    out = [c.bos_id]
    with torch.no_grad():
        for step in range(limit):
            logits = model(src, torch.tensor([out]))[0, -1]  # (V,)
            logits[[c.pad_id, c.bos_id]] = float("-inf")
            if step < min_len:
                logits[c.eos_id] = float("-inf")
            token = int(logits.argmax())
            if token == c.eos_id:
                break
            out.append(token)
    return out[1:]


def unpadded(i: int) -> torch.Tensor:
    return SOURCES[i : i + 1, : int((SOURCES[i] != 0).sum())]


@pytest.mark.parametrize("min_len", [0, 3])
def test_cached_batched_search_equals_the_uncached_loop(model, min_len):
    found = greedy_search(model, SOURCES, DecodeConfig(max_len=12, min_len=min_len, block_loops=False))
    expected = [reference_greedy(model, unpadded(i), limit=12, min_len=min_len) for i in range(len(SOURCES))]
    assert found == expected
    assert len({len(ids) for ids in found}) > 2  # EOS at several steps, and some hit the limit
    assert all(len(ids) >= min_len for ids in found)


def test_a_batch_equals_its_sentences_one_at_a_time(model):
    batch = greedy_search(model, SOURCES)
    assert batch == [greedy_search(model, unpadded(i))[0] for i in range(len(SOURCES))]


def test_finished_sentences_leave_the_batch(model, monkeypatch):
    sizes = []
    step = BoundDecoder.step

    def recording_step(self, tgt_ids, cache, **kwargs):
        sizes.append(tgt_ids.size(0))
        return step(self, tgt_ids, cache, **kwargs)

    monkeypatch.setattr(BoundDecoder, "step", recording_step)
    out = [h.tokens for h in greedy_hypotheses(model, SOURCES, DecodeConfig(max_len=12))]
    assert sizes[0] == len(SOURCES) and sizes == sorted(sizes, reverse=True) and sizes[-1] < sizes[0]
    assert len(sizes) == max(len(ids) + (len(ids) < 12) for ids in out)  # no step after the last finished


def test_length_limits(model):
    lengths = (SOURCES != 0).sum(1).tolist()
    out = greedy_search(model, SOURCES, DecodeConfig(max_len_a=0.5, max_len_b=1))  # at most floor(len / 2) + 1
    assert all(len(ids) <= n // 2 + 1 for ids, n in zip(out, lengths, strict=True))
    assert max(len(ids) for ids in greedy_search(model, SOURCES, DecodeConfig(max_len=3))) == 3
    # A cap beyond the model's positions is clamped: the output and its EOS fit max_len positions.
    out = greedy_search(model, SOURCES, DecodeConfig(max_len=1000, min_len=1000))
    assert [len(ids) for ids in out] == [model.config.max_len - 1] * len(SOURCES)


def test_never_generates_pad_or_bos():
    model = tiny_model(logits_bias={0: 50.0, 1: 50.0})  # pad and BOS would win every step
    out = greedy_search(model, SOURCES, DecodeConfig(max_len=8))
    assert all(0 not in ids and 1 not in ids for ids in out)
    assert out == [reference_greedy(model, unpadded(i), limit=8) for i in range(len(SOURCES))]


def test_an_empty_source_is_just_eos(model):
    [out] = greedy_search(model, torch.tensor([[model.config.eos_id]]))
    assert out == reference_greedy(
        model, torch.tensor([[model.config.eos_id]]), limit=min(1 + 50, model.config.max_len - 1)
    )


@pytest.mark.parametrize("length_penalty", [0.0, 0.6])
def test_greedy_hypotheses_score_their_output_as_beam_search_with_one_beam_does(model, length_penalty):
    """The log-probability is the textbook sum of log-softmax values of the chosen tokens (EOS's included when
    it was generated), and the score is the same length-penalised value beam search gives a hypothesis."""
    settings = DecodeConfig(beam_size=1, length_penalty=length_penalty, max_len=6)
    greedy = greedy_hypotheses(model, SOURCES, settings)
    beam = beam_search_nbest(model, SOURCES, settings)
    assert [h.tokens for h in greedy] == greedy_search(model, SOURCES, settings) == [b[0].tokens for b in beam]
    for i, hypothesis in enumerate(greedy):
        tokens = [model.config.bos_id, *hypothesis.tokens]
        ended = len(hypothesis.tokens) < 6  # shorter than the cap: it generated EOS
        with torch.no_grad():
            log_probs = model(unpadded(i), torch.tensor([tokens]))[0].log_softmax(-1)  # (T, V)
        chosen = [*hypothesis.tokens, model.config.eos_id] if ended else hypothesis.tokens
        expected = sum(float(log_probs[t, token]) for t, token in enumerate(chosen))
        assert hypothesis.log_prob == pytest.approx(expected, abs=1e-4)
        assert hypothesis.log_prob == pytest.approx(beam[i][0].log_prob, abs=1e-4)
        assert hypothesis.score == pytest.approx(beam[i][0].score, abs=1e-4)
        assert hypothesis.score == pytest.approx(expected / gnmt_length_penalty(len(chosen), length_penalty), abs=1e-4)
