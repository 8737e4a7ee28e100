"""Inline term annotations: training a model to place the terms a glossary gives it in its source.

A glossary term forced on the search (decode/constraints.py) lands where the search finds room for it; a model that
has learned to read terms placed after their source words writes them where they belong, inflected. Dinu et al.
(2019, "Training neural machine translation to apply terminology constraints") append each term's target words to
its source words; without source factors, two marker tokens enclose them (`tokenizer.TERM_MARKERS`):

    A young girl <term> ▁Mädchen </term> in a red dress ...    ->    Ein junges Mädchen in einem roten Kleid ...

`annotate_prepared` builds them at prepare time from the corpus's own word alignments (data/alignment.py): a `share`
of the pairs, drawn from a fixed seed, gets 1 or 2 of its source words annotated with the target words that the
alignment links them to (a source word with letters linked to one contiguous run of target words, at most
`MAX_TERM_WORDS` of them), placed after the word's last piece with a letter (`insertion_point`). The source ids and
the subword links of those pairs are rewritten in place (the links shift past each insertion; the annotation's own
tokens are linked to nothing), so guided alignment trains on the same words. A pair whose annotated source would be
longer than the length limit stays as it was. At inference a glossary reaches such a model the same way
(translate/steering.py), its first form between the markers.
"""

import random
from pathlib import Path

import numpy as np

from tnmt.data.alignment import split_words
from tnmt.data.prepared import LINKS, SIDES, SentenceFile, file_stem
from tnmt.data.tokenizer import Tokenizer

SEED = 64  # the draw of the pairs and words annotated: fixed, so a corpus always prepares the same
MAX_TERM_WORDS = 3  # target words one annotation may carry
MAX_TERMS = 2  # annotated words per pair


def annotate_prepared(
    directory: Path, tokenizer: Tokenizer, *, share: float, dtype: np.dtype, positions: np.dtype, max_len: int
) -> dict:
    """Annotate `share` of the pairs prepared (with links) in `directory`, rewriting their source ids and links in
    place; returns the manifest's "term_annotations" entry (pairs and words annotated).

    Raises:
        ValueError: the tokenizer has no term markers, or the corpus no links.
    """
    if tokenizer.term_markers is None:
        raise ValueError("term annotations need a tokenizer with term markers (Tokenizer.train(term_markers=True))")
    src_file, tgt_file = (SentenceFile(directory / file_stem(side, 0), dtype) for side in SIDES)
    links_file = SentenceFile(directory / file_stem(LINKS, 0), positions)
    pieces = tokenizer.source_vocabulary()
    rng = random.Random(SEED)
    sources, links, pairs, words = [], [], 0, 0
    for i in range(len(src_file)):
        src, pair_links = src_file.sentence(i), np.array(links_file.sentence(i), dtype=np.int64).reshape(-1, 2)
        if rng.random() < share:
            annotated = annotate_pair(src, tgt_file.sentence(i), pair_links, pieces, tokenizer.term_markers, rng)
            if annotated is not None and len(annotated[0]) <= max_len:
                src, pair_links, n_words = annotated
                pairs, words = pairs + 1, words + n_words
        sources.append(src)
        links.append(pair_links)
    _rewrite(directory / file_stem(SIDES[0], 0), sources, dtype)
    _rewrite(directory / file_stem(LINKS, 0), [pair.reshape(-1) for pair in links], positions)
    return {"share": share, "pairs": pairs, "words": words, "seed": SEED}


def annotate_pair(
    src: list[int],
    tgt: list[int],
    links: np.ndarray,
    pieces: list[str],
    markers: tuple[int, int],
    rng: random.Random,
) -> tuple[list[int], np.ndarray, int] | None:
    """One pair's source with 1-`MAX_TERMS` words annotated, its links (L, 2) shifted to match, and how many words
    were annotated; None when no source word qualifies (module docstring)."""
    src_words, tgt_words = split_words(src, pieces)[1], split_words(tgt, pieces)[1]
    linked: dict[int, set[int]] = {}  # source word -> target words
    for s, t in links.tolist():
        linked.setdefault(int(src_words[s]), set()).add(int(tgt_words[t]))
    chosen = [
        (word, sorted(targets))
        for word, targets in linked.items()
        if len(targets) <= MAX_TERM_WORDS
        and max(targets) - min(targets) + 1 == len(targets)
        and _lettered(pieces, src, src_words, word)
    ]
    if not chosen:
        return None
    chosen = sorted(rng.sample(chosen, min(len(chosen), rng.randint(1, MAX_TERMS))))
    start, end = markers
    out, shift = [], np.zeros(len(src), dtype=np.int64)  # shift: tokens inserted before each source position
    inserted, position = 0, 0
    for word, targets in chosen:
        last = insertion_point([pieces[src[k]] for k in np.nonzero(src_words == word)[0]]) - 1
        last += int(np.nonzero(src_words == word)[0][0])  # the word's last subword with a letter
        out += src[position : last + 1]
        term = [tgt[k] for k in range(len(tgt)) if tgt_words[k] in targets]
        term = term[: insertion_point([pieces[i] for i in term])]  # its glued punctuation left out
        out += [start, *term, end]
        shift[last + 1 :] += len(term) + 2
        inserted, position = inserted + 1, last + 1
    out += src[position:]
    moved = links.copy()
    moved[:, 0] += shift[links[:, 0]]
    return out, moved, inserted


def insertion_point(pieces: list[str]) -> int:
    """Where a word's annotation goes among its pieces: after its last piece with a letter or digit, so that the
    punctuation glued to it ("bushes." -> "bushes <term> ... </term> .") stays out of the term, at training and at
    inference alike (translate/steering.py); the same cut ends a term's own pieces."""
    return max((k + 1 for k, piece in enumerate(pieces) if any(map(str.isalnum, _text(piece)))), default=len(pieces))


def _text(piece: str) -> str:
    """The characters a piece spells: a byte piece ("<0x2E>") its byte, ASCII as read and a byte of a longer UTF-8
    character as a letter (most such characters are)."""
    if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
        byte = int(piece[3:5], 16)
        return "a" if byte >= 0x80 else chr(byte)
    return piece


def _lettered(pieces: list[str], src: list[int], src_words: np.ndarray, word: int) -> bool:
    """Has source word `word` a letter?"""
    return any(ch.isalpha() for k in np.nonzero(src_words == word)[0] for ch in _text(pieces[src[k]]))


def _rewrite(stem: Path, rows: list, dtype: np.dtype) -> None:
    """Write `rows` as the sentence file `stem` (`SentenceFile`'s format), replacing it."""
    with open(f"{stem}.ids", "wb") as f:
        for row in rows:
            np.asarray(row, dtype=dtype).tofile(f)
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum([len(row) for row in rows], out=offsets[1:])
    np.save(f"{stem}.offsets.npy", offsets)
