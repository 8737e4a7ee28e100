"""Word alignments of a prepared corpus, for guided alignment (Garg et al., 2019; Marian's guided alignment).

Training one cross-attention head toward statistical word alignments (`train.guided_alignment`, the loss in
train/loss.py) needs, per training pair, the source subwords each target subword is aligned to. `prepare`
asks `align_prepared` for them once the ids are written:

1. Words are read back from the prepared ids: a piece starting with "▁" begins a word (sentencepiece writes
   a space as "▁"), so word i is exactly the pieces from the sentence's i-th "▁" on, and step 4 cannot
   disagree with the words step 2 aligned (as splitting the raw text again could, on a tab or a no-break
   space, which sentencepiece keeps inside a word).
2. eflomal (Östling and Tiedemann, 2016: a Bayesian HMM with fertilities, fast and more accurate than
   fast_align) aligns all pairs' words, lowercased, in both directions. It is an optional extra
   (`pip install 'tnmt[align]'`), imported only here. It samples from a seed of its own, so two prepares of
   one corpus may align a few words differently.
3. grow-diag-final-and (Koehn et al., 2005; Moses' default) symmetrises the two directions: their
   intersection, grown by neighbouring links of their union, then links of words both still unaligned.
4. A word link (i, j) becomes every pair (subword of source word i, subword of target word j).

Subword samples (`data.subword_samples`) are other segmentations of the same words: the word links are
expanded once per segmentation, each into its own files.
"""

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack
from importlib.metadata import version
from pathlib import Path
from types import ModuleType

import numpy as np

from tnmt.data.prepared import LINKS, SIDES, SentenceFile, file_stem
from tnmt.data.tokenizer import WORD_START, Tokenizer, starts_word
from tnmt.errors import UserError

NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))  # grow-diag: with diagonals
Links = set[tuple[int, int]]  # (source word, target word), 0-based

log = logging.getLogger("tnmt")


def eflomal_installed() -> bool:
    """Whether eflomal can be imported."""
    try:
        require_eflomal()
    except UserError:
        return False
    return True


def require_eflomal() -> ModuleType:
    """The eflomal package, or a one-line error naming the extra that installs it.

    Raises:
        UserError: eflomal is not installed.
    """
    try:
        import eflomal
    except ImportError:
        raise UserError("train.guided_alignment needs eflomal to align words: pip install 'tnmt[align]'") from None
    return eflomal


def align_prepared(directory: Path, tokenizer: Tokenizer, *, segmentations: int, dtype: np.dtype, max_len: int) -> dict:
    """Align the words of the pairs prepared in `directory` and write their subword links there, one set of
    files per segmentation (0 the best, then the samples); returns the manifest's "alignments" entry.

    Args:
        directory: Holds the prepared id files (`prepared.py`); the link files are written beside them.
        tokenizer: The one the ids belong to: its pieces tell where words begin.
        segmentations: 1 + data.subword_samples.
        dtype: Of the id files.
        max_len: Longest side in tokens, which sets the positions' dtype.
    """
    started = time.monotonic()
    pieces = tokenizer.source_vocabulary(), tokenizer.target_pieces(range(tokenizer.vocab_size))
    files = [[SentenceFile(directory / file_stem(side, k), dtype) for side in SIDES] for k in range(segmentations)]
    texts = [[" ".join(split_words(f.sentence(i), p)[0]) for i in range(len(f))] for f, p in _sides(files[0], pieces)]
    word_links = align_words(*texts, workdir=directory)
    positions = np.dtype(np.uint16 if max_len <= 2**16 else np.uint32)
    lengths: list[list[int]] = [[] for _ in range(segmentations)]  # per segmentation, per pair: 2 x its links
    n_word_links = unaligned = 0
    with ExitStack() as stack:
        outputs = [
            stack.enter_context(open(directory / f"{file_stem(LINKS, k)}.ids", "wb")) for k in range(segmentations)
        ]
        for i, links in enumerate(word_links):
            n_word_links += len(links)
            words = [[split_words(f.sentence(i), p)[1] for f, p in _sides(sides, pieces)] for sides in files]
            for k, (src_words, tgt_words) in enumerate(words):
                same_words = k == 0 or (src_words[-1], tgt_words[-1]) == (words[0][0][-1], words[0][1][-1])
                unaligned += not same_words  # a sample with other words than the best segmentation: no links
                pair = subword_links(links if same_words else (), src_words, tgt_words)
                pair.astype(positions).tofile(outputs[k])
                lengths[k].append(pair.size)
    for k, counts in enumerate(lengths):
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        np.save(directory / f"{file_stem(LINKS, k)}.offsets.npy", offsets)
    seconds, n_links = time.monotonic() - started, [sum(counts) // 2 for counts in lengths]
    log.info(
        f"aligned {len(lengths[0])} pairs in {seconds:.0f} s: {n_word_links} word links, {n_links[0]} subword links"
    )
    return {
        "aligner": f"eflomal {version('eflomal')}",
        "symmetrisation": "grow-diag-final-and",
        "dtype": positions.name,
        "word_links": n_word_links,
        "subword_links": n_links,
        "unaligned_samples": unaligned,
        "seconds": round(seconds, 1),
    }


def split_words(ids: Sequence[int], pieces: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """A sentence's words as eflomal reads them, and the word number of each of its n subwords (n,).

    A word is its pieces joined without "▁"; whitespace inside it (a tab, a no-break space) becomes "▁" too,
    since eflomal would split there; an empty word (a lone "▁") is "▁". The first piece begins a word
    whatever it is.
    """
    words: list[list[str]] = []
    numbers = np.empty(len(ids), dtype=np.int64)
    for k, i in enumerate(ids):
        piece = pieces[i]
        if not words or starts_word(piece):
            words.append([])
        words[-1].append(piece)
        numbers[k] = len(words) - 1
    joined = ("".join(word).replace(WORD_START, " ").split() for word in words)
    return [WORD_START.join(parts) or WORD_START for parts in joined], numbers


def align_words(src: list[str], tgt: list[str], *, workdir: Path) -> Iterator[Links]:
    """The symmetrised word links of each pair of space-separated sentences, in order (eflomal's two
    directions are written into `workdir` and removed once read)."""
    eflomal = require_eflomal()
    forward, reverse = workdir / "links.forward", workdir / "links.reverse"
    eflomal.Aligner().align(src, tgt, links_filename_fwd=str(forward), links_filename_rev=str(reverse), quiet=True)
    try:
        with open(forward) as f, open(reverse) as r:
            for forward_line, reverse_line in zip(f, r, strict=True):
                yield grow_diag_final_and(_links(forward_line), _links(reverse_line))
    finally:
        forward.unlink()
        reverse.unlink()


def grow_diag_final_and(forward: Links, reverse: Links) -> Links:
    """Symmetrise two directional alignments of one pair (both as (source word, target word) links).

    Start from their intersection (precise, sparse); add a link of their union next to an existing one
    (diagonals included) while it aligns a word not yet aligned, until none is added; then add a link of
    either direction whose two words are both unaligned ("final-and": Koehn's "final" takes one).
    """
    union, links = forward | reverse, forward & reverse
    src_aligned, tgt_aligned = {i for i, _ in links}, {j for _, j in links}

    def add(i: int, j: int) -> None:
        links.add((i, j))
        src_aligned.add(i)
        tgt_aligned.add(j)

    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in NEIGHBOURS:
                new = (i + di, j + dj)
                if new in union and new not in links and (new[0] not in src_aligned or new[1] not in tgt_aligned):
                    add(*new)
                    grown = True
    for i, j in sorted(forward) + sorted(reverse):
        if i not in src_aligned and j not in tgt_aligned:
            add(i, j)
    return links


def subword_links(word_links: Iterable[tuple[int, int]], src_words: np.ndarray, tgt_words: np.ndarray) -> np.ndarray:
    """(L, 2) every (source subword, target subword) position pair whose words are linked, sorted.

    `src_words` (S,) and `tgt_words` (T,) give each subword's word number (`split_words`).
    """
    linked = np.zeros((int(src_words.max(initial=-1)) + 1, int(tgt_words.max(initial=-1)) + 1), dtype=bool)
    for i, j in word_links:
        linked[i, j] = True
    src, tgt = np.nonzero(linked[src_words[:, None], tgt_words[None, :]])  # (S, T) subword links
    return np.stack([src, tgt], axis=1)


def _sides(files: list[SentenceFile], pieces: tuple[list[str], list[str]]) -> Iterator[tuple[SentenceFile, list[str]]]:
    """(source file, source pieces), (target file, target pieces)."""
    return zip(files, pieces, strict=True)


def _links(line: str) -> Links:
    """Links in Pharaoh format, "0-0 1-2": source-target word numbers."""
    return {(int(i), int(j)) for i, _, j in (link.partition("-") for link in line.split())}
