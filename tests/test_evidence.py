"""translate/evidence.py: words of pieces, alignment from attention, confidence, warnings, and the batched pass."""

import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from tnmt.aligning_head import alignment_layer_index, alignment_rows
from tnmt.config import DecodeConfig
from tnmt.decode.bans import has_loop
from tnmt.errors import UserError
from tnmt.translate.evidence import (
    Evidence,
    Sentence,
    _alignment,
    _evidence,
    gather_evidence,
    length_ratio,
    length_ratio_bounds,
    piece_words,
    word_alignment,
)


@pytest.mark.parametrize(
    ("pieces", "text", "words"),
    [
        (["▁Two", "▁dog", "s", "▁run", "."], "Two dogs run.", [0, 1, 1, 2, 2]),
        (["▁", "H", "allo"], "Hallo", [0, 0, 0]),  # a lone "▁" starts the word after it
        (["▁a", "▁", "<0xE4>", "<0xBD>", "<0xA0>", "▁b"], "a 你 b", [0, 1, 1, 1, 1, 2]),  # bytes spell one character
        (["▁x", "<unk>", "▁y"], "x ⁇ y", [0, 1, 2]),  # decoded unknowns show as " ⁇ "
        (["▁a\tb", "▁c"], "a\tb c", [0, 2]),  # a tab is whitespace to str.split, not to sentencepiece
        ([], "", []),
        (["▁a"], "", [0]),
    ],
)
def test_piece_words_maps_pieces_onto_whitespace_words(pieces, text, words):
    assert piece_words(pieces, text) == words


def test_alignment_reads_words_both_ways_and_joins_them():
    # target subwords 0,1 form word 0, subword 2 is word 1; source subwords 0,1 are word 0, 2 is word 1:
    # target word 0 reads source word 0 most (0.55), target word 1 too (0.6); source word 1 is read most by
    # target word 0 (0.35): grow-diag-final-and keeps the agreement (0, 1) and grows to both neighbours
    attention = torch.tensor([[0.1, 0.2, 0.6, 0.1], [0.5, 0.3, 0.1, 0.1], [0.2, 0.4, 0.3, 0.1]])  # (3, 3 + EOS)
    assert _alignment(attention, [0, 0, 1], [0, 0, 1]) == [(0, 0), (0, 1), (1, 0)]
    attention[2] = torch.tensor([0.1, 0.2, 0.3, 0.4])  # the last target word's subword rests on EOS
    assert _alignment(attention, [0, 0, 1], [0, 0, 1]) == [(0, 0), (1, 0)]  # (1, 0): source to target only


def test_a_compound_keeps_both_source_words_and_a_barely_read_word_stays_unaligned():
    # "the fire fighter" -> "Der Feuerwehrmann": the compound's row reads "fire" most, "fighter" second
    attention = torch.tensor([[0.9, 0.02, 0.03, 0.05], [0.04, 0.5, 0.4, 0.06]])  # (2 target, 3 source + EOS)
    assert _alignment(attention, [0, 1, 2], [0, 1]) == [(0, 0), (1, 1), (2, 1)]
    attention[:, 0] = torch.tensor([0.05, 0.04])  # "the" is read by no row as much as REVERSE_MIN: no link
    attention[0, 3] = 0.9  # and "Der" rests on EOS
    assert _alignment(attention, [0, 1, 2], [0, 1]) == [(1, 1), (2, 1)]


def test_the_aligning_layer_and_head_count_from_1_and_0_reads_the_mean():
    """Layer 1 is the first (index 0), -1 the last, clamped to the depth; head 1 is the first, 0 the heads' mean."""
    assert [alignment_layer_index(layer, 4) for layer in (1, 3, 4, 9, -1, -2, -4, -9)] == [0, 2, 3, 3, 3, 2, 0, 0]
    layer = torch.zeros(1, 2, 3, 4)  # (B, H, T, S)
    layer[:, 1] = 4.0
    assert torch.equal(alignment_rows(layer, 2), torch.full((1, 3, 4), 4.0))
    assert torch.equal(alignment_rows(layer, 1), torch.zeros(1, 3, 4))
    assert torch.equal(alignment_rows(layer, 0), torch.full((1, 3, 4), 2.0))
    with pytest.raises(UserError, match="alignment_head = 3: the model has 2 heads"):
        alignment_rows(layer, 3)


def _sentence(source: str, output: str, **changes) -> Sentence:
    """A sentence whose pieces are its words (one piece per word)."""
    n_src, n_out = len(source.split()), len(output.split())
    sentence = Sentence(
        source_text=source,
        source_ids=list(range(10, 10 + n_src)),
        source_pieces=["▁" + w for w in source.split()],
        output_text=output,
        output_ids=list(range(20, 20 + n_out)),
        output_pieces=["▁" + w for w in output.split()],
        ended=True,
        token_log_probs=[],
    )
    sentence = replace(sentence, **changes)
    if "token_log_probs" in changes:
        return sentence
    return replace(sentence, token_log_probs=[0.0] * (len(sentence.output_ids) + sentence.ended))


def _diagonal(n_out: int, n_src: int) -> torch.Tensor:
    """Attention rows (n_out + 1 decoder inputs, n_src + 1 with EOS): the input that writes output t looks at
    source t, and the last input (which writes EOS) at the source's EOS."""
    rows = torch.zeros(n_out + 1, n_src + 1)
    for t in range(n_out):
        rows[t, min(t, n_src - 1)] = 1.0
    rows[n_out, -1] = 1.0
    return rows


def test_alignment_reads_the_step_that_writes_a_word_or_with_the_shift_the_one_that_reads_it():
    s = _sentence("a b c", "x y z")
    log_probs = torch.log(torch.tensor([0.5, 0.25, 1.0, 0.5]))  # x, y, z, EOS
    rows = _diagonal(3, 3)
    s = replace(s, token_log_probs=log_probs.tolist())
    unshifted = _evidence(s, rows, DecodeConfig(alignment_shift=False))
    assert unshifted.alignment == [(0, 0), (1, 1), (2, 2)]
    shifted = _evidence(s, rows, DecodeConfig(alignment_shift=True))
    assert shifted.alignment == [(1, 0), (2, 1)]  # the last row looks only at the source EOS: z aligns nothing
    assert unshifted.word_probs == pytest.approx([0.5, 0.25, 1.0])
    assert unshifted.confidence == pytest.approx(math.exp(math.log(0.5 * 0.25 * 0.5) / 4))


def test_word_probabilities_multiply_their_subwords_and_confidence_skips_a_missing_eos():
    s = replace(_sentence("a", "xy z"), output_ids=[20, 21, 22], output_pieces=["▁x", "y", "▁z"], ended=False)
    s = replace(s, token_log_probs=[math.log(p) for p in (0.5, 0.5, 0.8)])  # no EOS: the search never wrote it
    evidence = _evidence(s, torch.ones(4, 2) / 2, DecodeConfig())
    assert evidence.word_probs == pytest.approx([0.25, 0.8])
    assert evidence.confidence == pytest.approx((0.5 * 0.5 * 0.8) ** (1 / 3))


@pytest.mark.parametrize(
    ("words", "loop"),
    [
        ("ein mann mann mann", True),
        ("ein mann in einem mann in einem mann in einem", True),
        ("sehr sehr gut", False),
        ("a b a b", False),
        ("a b c d a b c d a b c d", True),
        ("", False),
    ],
)
def test_loops_are_three_back_to_back_copies(words, loop):
    assert has_loop(words.split()) is loop


def _warnings(source: str, output: str, settings: DecodeConfig | None = None, rows=None, **changes) -> list[str]:
    s = _sentence(source, output, **changes)
    n_out, n_src = len(s.output_ids), len(s.source_ids)
    rows = _diagonal(n_out, n_src) if rows is None else rows
    return _evidence(s, rows, settings or DecodeConfig()).warnings


def test_a_clean_translation_has_no_warnings():
    assert _warnings("two dogs play", "zwei Hunde spielen") == []


def test_warnings_name_each_problem():
    assert _warnings("a dog in the park", "ein Hund Hund Hund im Park") == ["repetition"]
    assert _warnings("the man sleeps now", "the man sleeps jetzt") == ["copy"]
    pieces = ["▁Alla", "mm", "mm", "mm", "a"]  # one word whose pieces loop
    assert _warnings("a child", "Allammmmmma", output_ids=[30, 31, 31, 31, 32], output_pieces=pieces) == ["repetition"]
    assert _warnings("the man sleeps", "Der Mann schläft", rows=torch.ones(4, 4) / 4) == []
    narrow = DecodeConfig(length_ratio_min=0.9, length_ratio_max=1.1)
    assert _warnings("a b c", "x y z", narrow) == []
    assert _warnings("a b c d e", "x", narrow, rows=torch.ones(2, 6) / 6) == ["length_ratio"]
    assert _warnings("a b c", "x y z", source_pieces=["▁a", "▁b", "▁c", "▁d"]) == ["truncated"]
    # an empty translation of a sentence: no word to loop or copy, but too short for its source
    assert _warnings("two dogs play", "", DecodeConfig(length_ratio_min=0.5), rows=torch.ones(1, 4) / 4) == [
        "length_ratio"
    ]


def test_uncovered_source_needs_a_word_with_letters_left_unread():
    rows = torch.zeros(3, 4)
    rows[:, 0] = 1.0  # every step reads "Hunde"; "42" and "!" are not words to miss, "laufen" is
    assert _warnings("Hunde 42 !", "x y", rows=rows) == []
    assert _warnings("Hunde laufen !", "x y", rows=rows) == ["uncovered_source"]


def test_length_ratio_counts_eos():
    assert length_ratio(3, 7) == 2.0


def test_translations_carry_evidence_consistent_with_the_search(tiny_translator):
    texts = ["one hundred", "", "seven thousand and two", "forty-four"]
    settings = replace(tiny_translator.decode, beam_size=1)  # greedy: its log_prob is the tokens' sum
    results = tiny_translator.translations(texts, settings, evidence=True)
    assert results[1].evidence == Evidence([], [], 1.0, [])
    for text, result in zip(texts, results, strict=True):
        evidence = result.evidence
        assert len(evidence.word_probs) == len(result.text.split())
        assert all(0.0 <= p <= 1.0 for p in [*evidence.word_probs, evidence.confidence])
        source_words, target_words = len(text.split()), len(result.text.split())
        assert all(0 <= i < source_words and 0 <= j < target_words for i, j in evidence.alignment)
        if result.tokens:  # the teacher-forced pass gives the probabilities the search multiplied
            n = len(result.tokens) + (len(result.tokens) < 5)  # the stored max_len is 5: 5 tokens wrote no EOS
            assert math.log(evidence.confidence) * n == pytest.approx(result.log_prob, abs=1e-4)


@pytest.mark.parametrize("beam_size", [1, 3])
def test_evidence_equals_a_teacher_forced_pass_over_the_translation(tiny_translator, beam_size):
    """The evidence reads the search's own token probabilities and one pass through the aligning layer on the
    search's encoded source; a full forward pass over the translation from scratch (what the evidence read
    before) gives the same words' probabilities, alignment and warnings."""
    model, tokenizer = tiny_translator.model, tiny_translator.tokenizer
    settings = replace(tiny_translator.decode, beam_size=beam_size)
    texts = ["one thousand and two", "seven hundred", "forty-four thousand"]
    for text, result in zip(texts, tiny_translator.translations(texts, settings, evidence=True), strict=True):
        src_ids, pieces = tokenizer.encode_source_pieces(text)
        out_ids = result.tokens
        ended = len(out_ids) < 5  # the stored max_len is 5: 5 tokens wrote no EOS
        src = torch.tensor([[*src_ids, tokenizer.eos_id]])
        tgt = torch.tensor([[tokenizer.bos_id, *out_ids]])
        layer = alignment_layer_index(settings.alignment_layer, model.config.n_decoder_layers)
        with torch.no_grad():
            logits, cross = model(src, tgt, cross_attention_of=layer)
        written = torch.tensor([*out_ids, tokenizer.eos_id][: len(out_ids) + ended])
        token_log_probs = logits[0].log_softmax(dim=-1)[torch.arange(len(written)), written].tolist()
        sentence = Sentence(
            text, src_ids, pieces, result.text, out_ids, tokenizer.target_pieces(out_ids), ended, token_log_probs
        )
        [expected] = gather_evidence([sentence], cross, settings)
        assert result.evidence.alignment == expected.alignment
        assert result.evidence.warnings == expected.warnings
        assert result.evidence.word_probs == pytest.approx(expected.word_probs, rel=1e-4)
        assert result.evidence.confidence == pytest.approx(expected.confidence, rel=1e-4)


def test_evidence_is_batch_invariant(tiny_translator):
    texts = ["one hundred", "seven thousand and two", "forty-four", "nine"]
    together = tiny_translator.translations(texts, evidence=True)
    for text, result in zip(texts, together, strict=True):
        alone = tiny_translator.translations([text], evidence=True)[0].evidence
        assert alone.alignment == result.evidence.alignment
        assert alone.warnings == result.evidence.warnings
        assert alone.word_probs == pytest.approx(result.evidence.word_probs, abs=1e-5)


def test_evidence_costs_nothing_when_not_asked_for(tiny_translator):
    assert tiny_translator.translations(["one hundred"])[0].evidence is None


def test_word_alignment_reads_one_sentences_rows_with_or_without_the_shift():
    rows = _diagonal(2, 3)  # (3 decoder inputs, 3 source subwords + EOS): input t looks at source t
    assert word_alignment(rows, [0, 1, 1], [0, 1], shift=False) == [(0, 0), (1, 1)]
    assert word_alignment(rows, [0, 1, 1], [0, 1], shift=True) == [(1, 0)]
    assert word_alignment(rows, [], [0, 1], shift=True) == []


def test_length_ratio_bounds_are_the_training_pairs_quantiles():
    source = np.full(1000, 9)
    target = np.arange(1000) % 20  # ratios (t + 1) / 10 from 0.1 to 2.0, 50 pairs each
    low, high = length_ratio_bounds(source, target)
    assert (low, high) == (0.1, 2.0)


def test_coverage_reads_the_heads_mean_when_one_head_aligns():
    s = _sentence("Hunde laufen", "x y")
    peaked = torch.zeros(3, 3)
    peaked[:, 0] = 1.0  # the aligning head reads only "Hunde"
    spread = torch.full((3, 3), 1 / 3)  # all heads together read both words
    settings = DecodeConfig(alignment_head=1)
    assert _evidence(s, peaked, settings).warnings == ["uncovered_source"]
    assert _evidence(s, peaked, settings, coverage=spread).warnings == []
