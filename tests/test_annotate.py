"""Inline term annotations (data/annotate.py): built at prepare time from the corpus's alignments, the source ids
and links rewritten consistently; read at inference the same way (translate/steering.py), and attributed to the
word they follow (translate/evidence.py's `piece_words`)."""

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from test_prepare import CLEAR, config

from tnmt.config import DataConfig
from tnmt.data.alignment import split_words
from tnmt.data.annotate import annotate_pair, insertion_point
from tnmt.data.prepare import prepare
from tnmt.data.tokenizer import TERM_MARKERS, Tokenizer
from tnmt.translate.evidence import piece_words
from tnmt.translate.glossary import glossary_entry
from tnmt.translate.prepared import Planner
from tnmt.translate.prepared import prepare as prepare_texts
from tnmt.translate.steering import Steering

START, END = 90, 91  # marker ids of the hand-made pairs below


def test_a_pair_is_annotated_after_its_words_last_lettered_piece_and_its_links_follow():
    pieces = ["<pad>", "▁a", "▁big", "▁car", ".", "▁ein", "▁grosses", "▁auto", "▁car", "s"] + ["x"] * 90
    src, tgt = [1, 2, 3, 4], [5, 6, 7, 4]  # "a big car." -> "ein grosses auto."
    links = np.array([[0, 0], [1, 1], [2, 2], [3, 2], [2, 3], [3, 3]])  # car. <-> auto.
    rng = random.Random(0)
    rng.randint = lambda a, b: 1  # one word
    rng.sample = lambda items, n: [item for item in items if item[0] == 2][:n]  # "car."
    out, moved, n = annotate_pair(src, tgt, links, pieces, (START, END), rng)
    assert n == 1 and out == [1, 2, 3, START, 7, END, 4]  # "car <term> auto </term> .": the period stays out
    assert moved.tolist() == [[0, 0], [1, 1], [2, 2], [6, 2], [2, 3], [6, 3]]
    assert [pieces[src[s]] for s, _ in links] == [pieces[out[s]] for s, _ in moved]  # the same pieces linked


def test_insertion_point_skips_glued_punctuation():
    assert insertion_point(["▁car", "s", ".", '"']) == 2
    assert insertion_point(["▁(", "car", ")"]) == 2
    assert insertion_point(["▁..."]) == 1  # no letter: after the word


def test_prepare_annotates_a_share_of_the_pairs_and_nothing_else_changes(tmp_path: Path):
    for side, lang in ((0, "en"), (1, "it")):
        (tmp_path / f"train.{lang}").write_text("".join(pair[side] + "\n" for pair in CLEAR) * 30)
        (tmp_path / f"valid.{lang}").write_text(next(iter(CLEAR))[side] + "\n")
    plain = prepare(config(tmp_path, vocab_size=280), tmp_path / "plain", max_len=60, alignments=True)
    tokenizer = plain.tokenizer()
    assert tokenizer.term_markers is None
    data = config(tmp_path, vocab_size=280, term_annotations=0.5)
    annotated = prepare(data, tmp_path / "annotated", max_len=60, alignments=True)
    start, end = annotated.tokenizer().term_markers
    entry = annotated.manifest["term_annotations"]
    assert 0.35 * len(annotated) < entry["pairs"] < 0.65 * len(annotated) and entry["words"] >= entry["pairs"]
    tokens = annotated.tokenizer()
    pieces = tokens.source_vocabulary()
    seen = 0
    for i in range(len(annotated)):
        (src, tgt), links = annotated.pairs([i])[0], annotated.links([i])[0]
        assert (links[:, 0] < len(src)).all() and not {src[s] for s, _ in links} & {start, end}
        if start not in src:
            continue
        seen += 1
        plain_src = _without_terms(src, start, end)
        assert tokens.decode_target(plain_src) == tokenizer.decode_target(plain.pairs([i])[0][0])
        tgt_words = " ".join(tokens.decode_target(tgt).split())
        for term in _terms(src, start, end):  # each term is target words of the pair, the linked ones
            assert tokens.decode_target(term).strip() in tgt_words
        # the words linked are the plain corpus's: each source piece keeps its target pieces
        src_words = split_words(plain_src, pieces)[1]
        assert len(src_words) == len(plain_src)
    assert seen == entry["pairs"]
    with pytest.raises(ValueError, match="term_annotations"):
        DataConfig(term_annotations=1.5)
    with pytest.raises(ValueError, match="joint vocabulary"):
        DataConfig(term_annotations=0.3, joint_vocabulary=False)


def _without_terms(src: list[int], start: int, end: int) -> list[int]:
    return [i for i, marked in zip(src, _marked(src, start, end), strict=True) if not marked]


def _marked(src: list[int], start: int, end: int) -> list[bool]:
    """True on the markers and what they enclose."""
    found, inside = [], False
    for i in src:
        inside = inside or i == start
        found.append(inside)
        inside = inside and i != end
    return found


def _terms(src: list[int], start: int, end: int) -> list[list[int]]:
    terms, current = [], None
    for i in src:
        if i == start:
            current = []
        elif i == end:
            terms.append(current)
            current = None
        elif current is not None:
            current.append(i)
    return terms


@pytest.fixture(scope="module")
def marked_tokenizer(numbers_corpus) -> Tokenizer:
    lines = (numbers_corpus / "train.en").read_text().splitlines() + (
        numbers_corpus / "train.it"
    ).read_text().splitlines()
    return Tokenizer.train(lines, vocab_size=300, term_markers=True)


def test_a_glossary_reaches_a_model_trained_with_annotations_through_its_source(marked_tokenizer):
    """Its first form, between the markers, after the term's source word; the constraint's source tokens cover both,
    and the evidence reads the inserted pieces as part of that word."""
    tokenizer = marked_tokenizer
    start, end = tokenizer.term_markers
    assert [tokenizer.target_piece_id(marker) for marker in TERM_MARKERS] == [start, end]
    planner = Planner(tokenizer, target_vocab_size=tokenizer.vocab_size, device=torch.device("cpu"))
    glossary = (glossary_entry("two", "tre | trenta", where="g"), glossary_entry("five", "sei", where="g"))
    text = "two hundred and five."
    (one,) = prepare_texts(
        [text],
        [Steering(glossary=glossary)],
        planner=planner,
        tokenizer=tokenizer,
        start=1,
        model_max_len=64,
        max_tokens=63,
        lines=[1],
    )
    plain_ids, plain_pieces = tokenizer.encode_source_pieces(text)
    ids, pieces = one.source.ids, one.source.pieces
    assert _without_terms(ids, start, end) == plain_ids
    assert [tokenizer.decode_target(term) for term in _terms(ids, start, end)] == ["tre", "sei"]
    two, five = one.plan.constraints.sources
    assert ids[two[1] - 1] == end and ids[two[0]] == plain_ids[0]
    assert pieces[five[1] - 1] == "<0x2E>" and ids[five[1] - 2] == end  # "five <term> sei </term> .", as trained
    words = piece_words(pieces, one.read)
    assert [words[k] for k in range(*two)] == [0] * (two[1] - two[0])
    outside = [w for w, i in zip(words, _marked(ids, start, end), strict=True) if not i]
    assert outside == piece_words(plain_pieces, text)  # the other pieces keep their words
    assert tokenizer.decode_target([start, *tokenizer.encode_target("tre"), end]) == "tre"  # markers are not text
