"""A word and its inflections: the model's own word for a glossary term's source may come back inflected.

A glossary term replaces the model's word ("Mädchen"); the search must not write it in another case either
("Mädchens"), nor may the checks miss it there. `spells_inflected` is the rule (a few letters more or less at
the end of a stem long enough), and `Inflections` finds the target vocabulary's pieces that spell a word so.
"""

from collections.abc import Sequence

from tnmt.data.tokenizer import starts_word

INFLECTION = 2  # letters a word may add to one of the model's own words and still be that word ("Mädchens")
STEM_LETTERS = 4  # the shorter of two spellings `spells_inflected` takes for one word has at least this many letters


def spells_inflected(word: str, own: Sequence[str]) -> bool:
    """Is `word` one of `own` inflected: the one with up to `INFLECTION` letters more or less at its end ("Männer",
    "Männern"), the shorter at least `STEM_LETTERS` long (case ignored)?"""
    folded = word.casefold()
    for w in own:
        short, long = sorted((folded, w.casefold()), key=len)
        if (
            long.startswith(short)
            and len(long) - len(short) <= INFLECTION
            and (short == long or len(short) >= STEM_LETTERS)
        ):
            return True
    return False


class Inflections:
    """The word-starting pieces of a target vocabulary by their first `STEM_LETTERS` letters (casefolded), so that
    `of` finds a word's inflected pieces among a few, not the whole vocabulary, for every word a term replaces."""

    def __init__(self, pieces: Sequence[str]) -> None:
        """`pieces`: every piece of the target vocabulary, by id."""
        self.by_stem: dict[str, list[tuple[str, int]]] = {}
        for i, piece in enumerate(pieces):
            if starts_word(piece) and len(word := piece[1:]) >= STEM_LETTERS:
                self.by_stem.setdefault(word[:STEM_LETTERS].casefold(), []).append((word, i))

    def of(self, word: str) -> list[tuple[int, ...]]:
        """The ids of the word-starting pieces that spell `word` inflected (`spells_inflected`), in either case:
        the piece that starts "Männer" bans it where "Männern" was the model's word."""
        near = self.by_stem.get(word[:STEM_LETTERS].casefold(), [])
        return [(i,) for piece, i in near if spells_inflected(piece, (word,))]
