import pytest
import sacrebleu

from tnmt.errors import UserError
from tnmt.evaluate import score

HYPOTHESES = ["The cat sits on the mat.", "A dog runs in a park", "Two men are playing chess ."]
REFERENCES = ["The cat sat on the mat.", "A dog is running in the park.", "Two men play chess."]


def test_bleu_and_chrf_equal_sacrebleus_own_corpus_scores():
    scores = score(HYPOTHESES, REFERENCES)
    assert scores.bleu == pytest.approx(sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score)
    assert scores.chrf == pytest.approx(sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score)
    assert 0 < scores.bleu < 100 and 0 < scores.chrf < 100


def test_a_perfect_match_scores_100():
    scores = score(REFERENCES, REFERENCES)
    assert scores.bleu == pytest.approx(100.0) and scores.chrf == pytest.approx(100.0)


def test_scores_are_cased_and_tokenised_by_sacrebleu():
    """Lower-casing the hypotheses costs points: sacreBLEU's default is case-sensitive."""
    lower = score([h.lower() for h in REFERENCES], REFERENCES)
    assert lower.bleu < 100 and lower.chrf < 100


def test_format_shows_both_scores_with_their_signatures():
    scores = score(HYPOTHESES, REFERENCES)
    for field in ("nrefs:1", "case:mixed", "tok:13a", "version:"):
        assert field in scores.bleu_signature
    for field in ("nrefs:1", "nc:6", "nw:0", "version:"):  # chrF: character 6-grams, no word n-grams
        assert field in scores.chrf_signature
    text = scores.format()
    assert f"BLEU = {scores.bleu:.2f}  ({scores.bleu_signature})" in text.splitlines()
    assert f"chrF = {scores.chrf:.2f}  ({scores.chrf_signature})" in text.splitlines()


def test_mismatched_line_counts_are_a_user_error():
    with pytest.raises(UserError, match="3 hypotheses but 2 references"):
        score(HYPOTHESES, REFERENCES[:2])
