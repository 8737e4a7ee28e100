"""Subword tokenizer: text <-> ids, on top of sentencepiece (Kudo and Richardson, 2018).

The paper (section 5.1) uses byte-pair encoding with a shared source-target vocabulary of about 37000
tokens; we likewise train one joint model by default (`train`), unigram (`model_type="bpe"` for the paper's
method; it also trains several times faster). `train_separate` learns one model per language instead: each
language gets all of its pieces (fewer tokens per sentence at the same output-layer size), and the two
sides number their ids independently, so the model cannot share its source and target embeddings.

Sentencepiece is chosen because its detokenisation is lossless (spaces are ordinary symbols, written "▁"),
and because MarianMT / OPUS-MT and CTranslate2 ship sentencepiece models, so importing and exporting them
needs no other tokenizer.

Normalisation, the only way decoding can differ from the input: with `Tokenizer.train`'s settings
(`normalization_rule_name="identity"`, byte fallback) every character survives, unseen ones as UTF-8
byte pieces, except that sentencepiece (`remove_extra_whitespaces`, on by default) strips leading and
trailing spaces (U+0020) and collapses runs of them into one. "▁" (U+2581) in the input is read as a
space. A lone surrogate (U+D800-U+DFFF: not Unicode, but a Python string can hold one) is read as
U+FFFD. So `decode(encode(x)) == x` for any x without leading, trailing or repeated spaces, without "▁"
and without lone surrogates; tabs, no-break spaces, control characters and other whitespace are kept as
they are.
"""

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import sentencepiece as spm

from tnmt.data.subword_model import load_model, train_model
from tnmt.data.tokenizer_files import SpecialIds, read_files, write_files
from tnmt.directions import language_tag
from tnmt.errors import UserError

SURROGATE = re.compile("[\ud800-\udfff]")  # sentencepiece takes UTF-8, which cannot hold these


WORD_START = "\u2581"  # "▁": sentencepiece's space, the first character of a word's first piece


TERM_MARKERS = ("<term>", "</term>")  # around a term's target words inline in a source (data/annotate.py)


def starts_word(piece: str) -> bool:
    """Does this piece begin a word? Sentencepiece writes the space before a word as the first character of the
    word's first piece ("▁Haus" + "es"): the one rule tnmt reads words off pieces by (alignment, evidence,
    steering, word replacements)."""
    return piece.startswith(WORD_START)


class Tokenizer:
    """Source and target sentencepiece models plus the mapping of their pieces to model ids.

    Without `vocab`, ids are each model's own sentencepiece ids: one id space if the two are the same
    (joint) model, two independent ones (source ids for the encoder, target ids for the decoder) if they
    are separate models. With `vocab`, a list whose i-th entry is the piece of id i, both sides' ids follow
    that list instead: MarianMT checkpoints number their embeddings by a `vocab.json` that differs from the
    order of their sentencepiece models. Special ids are the same on both sides.
    """

    def __init__(
        self,
        source: spm.SentencePieceProcessor,
        target: spm.SentencePieceProcessor,
        *,
        vocab: list[str] | None = None,
        pad_id: int,
        bos_id: int,
        eos_id: int,
        unk_id: int,
        languages: Sequence[str] = (),
    ) -> None:
        """`languages`: a multilingual tokenizer's, each with its tag (`directions.language_tag`) in the target
        vocabulary; () for one language pair."""
        sizes = [len(vocab)] if vocab is not None else [source.get_piece_size(), target.get_piece_size()]
        specials = {"pad_id": pad_id, "bos_id": bos_id, "eos_id": eos_id, "unk_id": unk_id}
        for name, value in specials.items():
            if not 0 <= value < min(sizes):
                raise ValueError(f"{name}={value} is outside the vocabulary of {min(sizes)} pieces")
        self._source, self._target, self._vocab = source, target, vocab
        self._piece_to_id = None if vocab is None else {piece: i for i, piece in enumerate(vocab)}
        self._pad_id, self._bos_id, self._eos_id, self._unk_id = pad_id, bos_id, eos_id, unk_id
        self.languages = tuple(languages)
        self._language_ids = {language: self.target_piece_id(language_tag(language)) for language in self.languages}
        if missing := [language for language, i in self._language_ids.items() if i is None]:
            raise ValueError(f"the vocabulary has no tag {language_tag(missing[0])} for language {missing[0]!r}")
        markers = [self.target_piece_id(marker) for marker in TERM_MARKERS]
        # (start, end) of an inline term (data/annotate.py), when the vocabulary has them: a model trained so
        self.term_markers: tuple[int, int] | None = (markers[0], markers[1]) if None not in markers else None
        self._skipped_in_decode = frozenset(
            {pad_id, bos_id, eos_id, *self._language_ids.values(), *(self.term_markers or ())}
        )

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        *,
        vocab_size: int,
        model_type: str = "unigram",
        character_coverage: float = 1.0,
        languages: Sequence[str] = (),
        term_markers: bool = False,
    ) -> "Tokenizer":
        """Train one joint model on source and target training text, in memory.

        Special ids are pad=0, bos=1, eos=2, unk=3. Training is deterministic for the same texts:
        it runs on one thread because sentencepiece's result depends on the thread count (1 thread
        takes about 5 s for Multi30k en+de train, 58k sentences, vocabulary 8000).

        Args:
            texts: Sentences of both languages, one per item.
            vocab_size: Number of pieces, including the 4 specials and the 256 byte pieces.
            model_type: "unigram" (sentencepiece's default) or "bpe" (the paper's method).
            character_coverage: Fraction of characters covered by single-character pieces; the rest
                are spelled as bytes. 1.0 suits alphabetic languages; ~0.9995 suits CJK.
            languages: A multilingual model's languages: each gets its tag (tnmt/directions.py), a control
                symbol numbered right after the specials (4, 5, ... in this order) that no text encodes to.
            term_markers: Add `TERM_MARKERS`, control symbols after the tags, which enclose a term's target words
                inline in a source (data/annotate.py).

        Raises:
            UserError: Sentencepiece refused the settings (e.g. a vocabulary too large for the text).
        """
        tags = [language_tag(language) for language in languages] + (list(TERM_MARKERS) if term_markers else [])
        processor = train_model(texts, vocab_size, model_type, character_coverage, control_symbols=tags)
        return cls(processor, processor, pad_id=0, bos_id=1, eos_id=2, unk_id=3, languages=languages)

    @classmethod
    def train_separate(
        cls,
        source_texts: Iterable[str],
        target_texts: Iterable[str],
        *,
        vocab_size: int,
        model_type: str = "unigram",
        character_coverage: float = 1.0,
    ) -> "Tokenizer":
        """Train one model on the source side's text and another on the target side's, `vocab_size` pieces
        each, with `train`'s settings. Source and target ids then mean different pieces.

        Raises:
            UserError: Sentencepiece refused the settings for either side.
        """
        source = train_model(source_texts, vocab_size, model_type, character_coverage)
        target = train_model(target_texts, vocab_size, model_type, character_coverage)
        return cls(source, target, pad_id=0, bos_id=1, eos_id=2, unk_id=3)

    @classmethod
    def from_files(
        cls,
        source_spm: str | Path,
        target_spm: str | Path,
        *,
        vocab: list[str] | None,
        pad_id: int,
        bos_id: int,
        eos_id: int,
        unk_id: int,
    ) -> "Tokenizer":
        """Wrap existing sentencepiece model files, e.g. a MarianMT checkpoint's.

        Raises:
            UserError: A file is missing or not a sentencepiece model.
        """
        source = load_model(Path(source_spm))
        target = source if Path(target_spm) == Path(source_spm) else load_model(Path(target_spm))
        return cls(source, target, vocab=vocab, pad_id=pad_id, bos_id=bos_id, eos_id=eos_id, unk_id=unk_id)

    @property
    def pad_id(self) -> int:
        return self._pad_id

    @property
    def bos_id(self) -> int:
        return self._bos_id

    @property
    def eos_id(self) -> int:
        return self._eos_id

    @property
    def unk_id(self) -> int:
        return self._unk_id

    @property
    def language_ids(self) -> tuple[int, ...]:
        """The target-language tags' ids, in `languages`' order (`ModelConfig.language_ids`)."""
        return tuple(self._language_ids[language] for language in self.languages)

    def language_id(self, language: str) -> int:
        """The id of the tag that starts the decoder writing `language`.

        Raises:
            ValueError: the tokenizer has no such language.
        """
        if language not in self._language_ids:
            known = ", ".join(self.languages) or "no language tags (a one-pair model)"
            raise ValueError(f"no target-language tag for {language!r}: this tokenizer has {known}")
        return self._language_ids[language]

    @property
    def special_ids(self) -> dict[str, int]:
        """pad/bos/eos as the keyword arguments `ModelConfig` and `collate` take them."""
        return dict(pad_id=self.pad_id, bos_id=self.bos_id, eos_id=self.eos_id)

    @property
    def vocab_size(self) -> int:
        """Target ids (the output layer's size); also the source's unless the sides have separate models."""
        return len(self._vocab) if self._vocab is not None else self._target.get_piece_size()

    @property
    def source_vocab_size(self) -> int:
        """Source ids (the encoder's embedding rows)."""
        return len(self._vocab) if self._vocab is not None else self._source.get_piece_size()

    def encode_source(self, text: str) -> list[int]:
        """Source ids, without BOS/EOS: batching adds those."""
        return self._encode(self._source, [text])[0]

    def encode_target(self, text: str) -> list[int]:
        """Target ids, without BOS/EOS."""
        return self._encode(self._target, [text])[0]

    def encode_source_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self._encode(self._source, texts)

    def encode_target_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self._encode(self._target, texts)

    def sample_segmentations(
        self,
        texts: Sequence[str],
        *,
        side: Literal["source", "target"],
        samples: int,
        alpha: float,
        nbest: int,
        seed: int,
    ) -> list[list[list[int]]]:
        """`samples` sampled segmentations of each text, as ids: result[k][i] is sample k of text i.

        Subword regularisation (Kudo, 2018): a sample is one of the text's `nbest` most likely segmentations,
        drawn with probability ~ P^alpha (P: the product of its pieces' unigram probabilities), so a smaller
        alpha strays further from the best one. The draws are numpy's, from `seed`: sentencepiece's own
        sampling mixes its seed with per-process state, and the same seed gave other samples in a worker.
        """
        model = self._source if side == "source" else self._target
        log_p = np.array([model.get_score(i) for i in range(model.get_piece_size())])  # (V,) log probabilities
        rng = np.random.default_rng(seed)
        drawn: list[list[list[int]]] = [[] for _ in range(samples)]
        texts = [SURROGATE.sub("\ufffd", text) for text in texts]
        try:
            candidates = model.nbest_encode_as_ids(texts, nbest_size=nbest)
        except RuntimeError as err:  # BPE models have no n-best segmentations
            raise UserError(f"subword sampling needs a unigram sentencepiece model: {err}") from None
        for segmentations in candidates:  # the n best of one text, most likely first
            weights = alpha * np.array([log_p[ids].sum() for ids in segmentations])
            p = np.exp(weights - weights.max())
            for k, choice in enumerate(rng.choice(len(segmentations), size=samples, p=p / p.sum())):
                drawn[k].append(self._model_ids(model, segmentations[choice]))
        return drawn

    def target_segmentations(self, text: str, n: int) -> list[list[int]]:
        """Up to `n` ways the target side can spell `text` in ids, most likely first: a search that must never
        write a phrase bans them all (translate/steering.py), not only the one `encode_target` picks. A BPE model
        has one."""
        try:
            found = self._target.nbest_encode_as_ids(SURROGATE.sub("\ufffd", text), nbest_size=n)
        except RuntimeError:  # BPE: no n-best segmentations
            return [self.encode_target(text)]
        return [self._model_ids(self._target, ids) for ids in found] or [self.encode_target(text)]

    def target_piece_id(self, piece: str) -> int | None:
        """The target id of one piece ("brauner", "▁brauner"), None when the vocabulary has no such piece."""
        if self._piece_to_id is not None:
            return self._piece_to_id.get(piece)
        found = self._target.piece_to_id(piece)
        return found if self._target.id_to_piece(found) == piece else None

    def decode_target(self, ids: Sequence[int]) -> str:
        """Text of target ids. Pad, BOS and EOS are skipped wherever they are (no truncation at EOS:
        that is the search's job); unk shows as " ⁇ " so that a gap stays visible."""
        kept = [i for i in ids if i not in self._skipped_in_decode]
        if self._vocab is None:
            return self._target.decode(kept)
        return self._target.decode_pieces([self._vocab[i] for i in kept])

    def decode_target_batch(self, batch: Sequence[Sequence[int]]) -> list[str]:
        return [self.decode_target(ids) for ids in batch]

    def source_pieces(self, text: str) -> list[str]:
        """The pieces `encode_source(text)` stands for, e.g. to label an attention plot."""
        return self._source.encode(SURROGATE.sub("\ufffd", text), out_type=str)

    def encode_source_pieces(self, text: str) -> tuple[list[int], list[str]]:
        """`encode_source(text)` and `source_pieces(text)` from one pass of sentencepiece: a translation that
        reports on its words needs both."""
        pieces = self.source_pieces(text)
        if self._piece_to_id is None:
            return self._source.piece_to_id(pieces), pieces
        unk, index = self._unk_id, self._piece_to_id
        return [index.get(piece, unk) for piece in pieces], pieces

    def source_vocabulary(self) -> list[str]:
        """Every source piece, by id: what another engine (a CTranslate2 export) needs to map the pieces it
        reads to the encoder's embedding rows, so that no code but this class opens a sentencepiece model."""
        if self._vocab is not None:
            return list(self._vocab)
        return [self._source.id_to_piece(i) for i in range(self._source.get_piece_size())]

    def target_pieces(self, ids: Sequence[int]) -> list[str]:
        """One piece per id, specials included (`<s>`, `</s>`)."""
        if self._vocab is None:
            return [self._target.id_to_piece(i) for i in ids]
        return [self._vocab[i] for i in ids]

    def fingerprint(self) -> str:
        """SHA-256 of everything that decides the ids: both models, the vocabulary and the special ids.

        A corpus encoded with one tokenizer is valid for another only if their fingerprints match.
        """
        digest = hashlib.sha256()
        for part in (self._source.serialized_model_proto(), self._target.serialized_model_proto()):
            digest.update(hashlib.sha256(part).digest())
        specials = [self._pad_id, self._bos_id, self._eos_id, self._unk_id]
        digest.update(json.dumps([self._vocab, specials], ensure_ascii=False).encode())
        if self.languages:  # (a one-pair tokenizer keeps the fingerprint it always had)
            digest.update(json.dumps(self.languages).encode())
        return digest.hexdigest()

    def save(self, directory: str | Path) -> None:
        """Write the tokenizer's directory (data/tokenizer_files.py), each file atomically: plain formats, no pickle,
        so loading runs no code."""
        specials = SpecialIds(self._pad_id, self._bos_id, self._eos_id, self._unk_id)
        write_files(Path(directory), self._source, self._target, self._vocab, specials, self.languages)

    @classmethod
    def load(cls, directory: str | Path) -> "Tokenizer":
        """Read what `save` wrote.

        Raises:
            UserError: A file is missing or malformed; the message names it.
        """
        files = read_files(Path(directory))
        try:
            return cls(files.source, files.target, vocab=files.vocab, **files.ids._asdict(), languages=files.languages)
        except ValueError as err:
            raise UserError(f"{directory}: {err}") from None

    def _encode(self, model: spm.SentencePieceProcessor, texts: Sequence[str]) -> list[list[int]]:
        """Ids of each text. One text goes through sentencepiece's one-string call: its list call starts
        worker threads on every call, about 50 us for a one-text list against 4 us for the sentence itself,
        and far more on a loaded server (the Translator and `tnmt serve` encode sentence by sentence)."""
        texts = [SURROGATE.sub("\ufffd", text) for text in texts]
        out_type = int if self._piece_to_id is None else str
        encoded = (
            [model.encode(texts[0], out_type=out_type)] if len(texts) == 1 else model.encode(texts, out_type=out_type)
        )
        if self._piece_to_id is None:
            return encoded
        unk, index = self._unk_id, self._piece_to_id
        return [[index.get(piece, unk) for piece in sentence] for sentence in encoded]

    def _model_ids(self, model: spm.SentencePieceProcessor, ids: list[int]) -> list[int]:
        """The model's ids of `model`'s sentencepiece ids (the same without an explicit vocabulary)."""
        if self._piece_to_id is None:
            return ids
        return [self._piece_to_id.get(model.id_to_piece(i), self._unk_id) for i in ids]
