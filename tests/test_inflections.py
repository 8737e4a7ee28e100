"""A word and its inflections (translate/inflections.py): the rule, and the vocabulary's pieces that spell a word
inflected."""

from tnmt.translate.inflections import Inflections, spells_inflected


def test_inflections_are_the_pieces_one_ending_away():
    pieces = ["<pad>", "▁Männer", "▁Männern", "▁Mann", "▁männer", "▁Männerchor", "Männer", "▁Mä"]
    inflections = Inflections(pieces)
    assert inflections.of("Männern") == [(1,), (2,), (4,)]  # not a compound, a shorter stem or a word's inside
    assert inflections.of("Kinder") == []


def test_an_inflection_is_a_few_letters_at_the_end_of_a_long_enough_stem():
    assert spells_inflected("Männern", ["Männer"]) and spells_inflected("mädchens", ["Mädchen"])
    assert not spells_inflected("Männerchor", ["Männer"])  # more than two letters: another word
    assert spells_inflected("Mannes", ["Mann"])  # a stem of four letters takes two more
    assert not spells_inflected("Tee", ["Te"])  # a short stem: many words start so
    assert spells_inflected("Te", ["Te"])  # the same word, whatever its length
