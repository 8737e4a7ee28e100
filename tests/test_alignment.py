"""Word alignments for guided alignment: words read back from subwords, eflomal's links symmetrised by
grow-diag-final-and, word links expanded to every subword of the linked words."""

import sys

import numpy as np
import pytest

from tnmt.data.alignment import align_words, grow_diag_final_and, require_eflomal, split_words, subword_links
from tnmt.errors import UserError

# id -> piece, as a sentencepiece vocabulary lists them: specials, then pieces; "▁" begins a word
PIECES = ["<pad>", "<s>", "</s>", "<unk>", "▁the", "▁house", "s", "▁", "<0xE2>", "\tx", "▁big", "ger"]


def test_words_are_the_pieces_from_each_word_start_on():
    words, numbers = split_words([4, 5, 6, 10, 11, 6], PIECES)  # ▁the ▁house s ▁big ger s
    assert words == ["the", "houses", "biggers"]
    assert numbers.tolist() == [0, 1, 1, 2, 2, 2]


def test_a_word_without_a_start_piece_whitespace_inside_and_a_lone_start_stay_one_word_each():
    words, numbers = split_words([6, 5, 9, 7, 8, 7], PIECES)  # s ▁house \tx ▁ <0xE2> ▁
    assert words == ["s", "house▁x", "<0xE2>", "▁"]  # eflomal splits on whitespace: none is left inside a word
    assert numbers.tolist() == [0, 1, 1, 2, 2, 3]


def test_a_word_link_becomes_every_pair_of_the_words_subwords():
    src_words = np.array([0, 1, 1, 2])  # source word 1 is two subwords (positions 1, 2)
    tgt_words = np.array([0, 0, 1])  # target word 0 is two subwords (positions 0, 1)
    links = subword_links({(1, 0), (2, 1)}, src_words, tgt_words)
    assert links.tolist() == [[1, 0], [1, 1], [2, 0], [2, 1], [3, 2]]
    assert subword_links(set(), src_words, tgt_words).shape == (0, 2)


def test_grow_diag_adds_neighbours_of_the_intersection_that_align_a_new_word():
    forward = {(0, 0), (1, 1), (1, 2)}
    reverse = {(0, 0), (1, 1), (2, 2)}
    # (1, 2) is next to (1, 1) and aligns target 2; then (2, 2) is diagonal to (1, 1) and aligns source 2
    assert grow_diag_final_and(forward, reverse) == {(0, 0), (1, 1), (1, 2), (2, 2)}


def test_a_union_link_between_two_aligned_words_is_not_grown():
    forward, reverse = {(0, 0), (1, 1), (0, 1)}, {(0, 0), (1, 1), (1, 0)}
    assert grow_diag_final_and(forward, reverse) == {(0, 0), (1, 1)}


def test_final_and_adds_a_far_link_only_when_both_its_words_are_unaligned():
    forward = {(0, 0), (3, 3), (3, 0)}  # (3, 3): both words unaligned; (3, 0) would have been ok for "final"
    reverse = {(0, 0)}
    assert grow_diag_final_and(forward, reverse) == {(0, 0), (3, 3)}
    assert grow_diag_final_and({(0, 0), (2, 0)}, {(0, 0)}) == {(0, 0)}  # target 0 is already aligned


def test_eflomal_aligns_a_clear_corpus(tmp_path):
    """Really run: every German word of this corpus has one English translation at a varying position."""
    pairs = [
        ("the house", "das haus"),
        ("the car", "das auto"),
        ("a house", "ein haus"),
        ("a big car", "ein grosses auto"),
    ]
    pairs += [("house", "haus"), ("car", "auto"), ("big house", "grosses haus")]
    src, tgt = zip(*(pairs * 30), strict=True)
    links = list(align_words(list(src), list(tgt), workdir=tmp_path))
    assert len(links) == len(src)
    assert links[:7] == [
        {(0, 0), (1, 1)},
        {(0, 0), (1, 1)},
        {(0, 0), (1, 1)},
        {(0, 0), (1, 1), (2, 2)},
        {(0, 0)},
        {(0, 0)},
        {(0, 0), (1, 1)},
    ]
    assert list(tmp_path.iterdir()) == []  # eflomal's two directions were removed once read


def test_without_eflomal_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "eflomal", None)  # `import eflomal` now raises ImportError
    with pytest.raises(
        UserError, match=r"^train.guided_alignment needs eflomal to align words: pip install 'tnmt\[align\]'$"
    ):
        require_eflomal()
