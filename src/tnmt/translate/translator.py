"""Text in, text out: the tokenizer, batching and search around a trained Transformer, behind two doors.

`split` reads texts as the model reads them (translate/reading.py: lines, sentences, parts of a sentence too long
for the model, each segment planned and tokenised once); `translated` translates a split's segments, sorted by
length into batches that pad little (translate/segments.py), and joins each text back (translate/whole.py);
`translations` is the two composed, in the caller's order. A blank text comes back as it was; only one unbroken
word longer than `max_len` (or any text, with `DecodeConfig.segment` off) is cut to `max_len - 1` tokens plus
EOS, with a one-line warning. Every feature reads the model through one door (translate/door.py), each sentence
from its own start token (BOS, or a multilingual model's target-language tag: `for_pair`). Decoding follows a
`DecodeConfig`: the checkpoint's (what validation measured) unless a call passes its own.
"""

import copy
import os
from collections.abc import Sequence
from dataclasses import replace

from tnmt.checkpoint import load_checkpoint
from tnmt.config import DecodeConfig
from tnmt.data.shortlist import Shortlist
from tnmt.decode.trace import Trace
from tnmt.directions import Direction, check_pair, direction_name
from tnmt.errors import UserError
from tnmt.model import Transformer
from tnmt.translate.door import QUANTIZE, ModelDoor
from tnmt.translate.evidence import TokenAttention
from tnmt.translate.prepared import Planner, Prepared, given_ids, length_batches
from tnmt.translate.reading import Reader, TextTokenizer
from tnmt.translate.segment import Layout
from tnmt.translate.segments import traced, translate_segments
from tnmt.translate.steering import Steering
from tnmt.translate.translation import Translation
from tnmt.translate.whole import Split


class Translator:
    """Translate lists of sentences with a model and its tokenizer (the model is put in eval mode)."""

    def __init__(
        self,
        model: Transformer,
        tokenizer: TextTokenizer,
        decode: DecodeConfig | None = None,
        *,
        quantize: str = "none",
        frozen: bool = False,
        directions: Sequence[Direction] = (),
        shortlist: Shortlist | None = None,
    ) -> None:
        """`decode` (default `DecodeConfig()`): every call's default settings; `quantize`, `frozen`, `shortlist`: as
        the door's (translate/door.py: int8 weights; weights that do not change, bound once; the vocabulary
        shortlist); `directions`: the (source, target) pairs the model was trained on (a checkpoint's), () when not
        known."""
        self.decode = decode or DecodeConfig()
        self.door = ModelDoor(model, eos_id=tokenizer.eos_id, quantize=quantize, frozen=frozen, shortlist=shortlist)
        self.model, self.device, self.quantize = self.door.model, self.door.device, quantize
        self.tokenizer = tokenizer
        self.directions = tuple(directions)
        self.source: str | None = None  # the language read and the one written: chosen by `for_pair`
        self.target: str | None = None
        # what every decoder starts from: BOS, or for a multilingual model the tag `for_pair` chooses
        self.start_id: int | None = None if tokenizer.languages else tokenizer.bos_id
        self.planner = Planner(tokenizer, target_vocab_size=self.model.config.tgt_vocab_size, device=self.device)
        self.reader = Reader(tokenizer, self.planner, max_len=self.model.config.max_len)

    @classmethod
    def from_checkpoint(
        cls, path: str | os.PathLike[str], *, device: str = "cpu", quantize: str = "none"
    ) -> "Translator":
        """Load a checkpoint directory (or a `best`/`last` link to one); its decoding settings become the default."""
        if quantize not in QUANTIZE:  # before the slower load
            raise ValueError(f"quantize must be one of {QUANTIZE}, got {quantize!r}")
        checkpoint = load_checkpoint(path, map_location=device, training=False)
        model = checkpoint.model.to(device).requires_grad_(False)  # ours alone, never trained
        tokenizer, directions = checkpoint.tokenizer, checkpoint.directions
        return cls(
            model,
            tokenizer,
            checkpoint.decode,
            quantize=quantize,
            frozen=True,
            directions=directions,
            shortlist=checkpoint.shortlist,
        )

    @property
    def multilingual(self) -> bool:
        """Whether the model writes several languages (its decoder starts from a target-language tag)."""
        return bool(self.tokenizer.languages)

    def for_pair(self, source: str, target: str, *, zero_shot: bool = False) -> "Translator":
        """A translator for `source` -> `target` sharing this one's model (and its settings): for a multilingual
        model, one whose decoder starts from `target`'s tag; a one-pair model gives itself for its own pair.

        Raises:
            UserError: the model does not translate that pair: a language it does not know, or (unless
                `zero_shot`) a direction it was not trained on (tnmt/directions.py), in one line.
        """
        check_pair(source, target, languages=self.tokenizer.languages, directions=self.directions, zero_shot=zero_shot)
        if not self.multilingual:
            return self
        chosen = copy.copy(self)  # the model, its bound decoder and the planner are shared
        chosen.source, chosen.target, chosen.start_id = source, target, self.tokenizer.language_id(target)
        return chosen

    def translate(
        self, texts: Sequence[str], settings: DecodeConfig | None = None, *, first_line: int = 1
    ) -> list[str]:
        """The best translation of each text, in input order; a blank text comes back as it was."""
        return [translation.text for translation in self.translations(texts, settings, first_line=first_line)]

    def prepare(
        self,
        texts: Sequence[str],
        steering: Sequence[Steering | None] | None = None,
        settings: DecodeConfig | None = None,
        *,
        first_line: int = 1,
        lines: Sequence[int] | None = None,
    ) -> list[Prepared]:
        """Each text as the search will read it (translate/prepared.py), as one segment; `lines`: each text's line
        number in warnings (default: counted from `first_line`).

        Raises:
            UserError: a steering entry that cannot be met, not one steering per text, or a multilingual model
                with no pair chosen (`for_pair`).
        """
        lines = lines or range(first_line, first_line + len(texts))
        steering = steering or [None] * len(texts)
        return self.reader.prepare(texts, steering, settings or self.decode, start=self._start_id(), lines=lines)

    def prepare_ids(
        self, texts: Sequence[str], ids: Sequence[list[int]], starts: Sequence[int] | None = None
    ) -> list[Prepared]:
        """Texts with their source ids, read as they are (`prepared.given_ids`); `starts` default this one's."""
        return given_ids(texts, ids, starts or [self._start_id()] * len(texts))

    def split(
        self,
        texts: Sequence[str],
        steering: Sequence[Steering | None] | None = None,
        settings: DecodeConfig | None = None,
        *,
        first_line: int = 1,
    ) -> Split:
        """The one door in: the texts read as the model reads them (translate/reading.py), cut into segments when
        `settings.segment`, each prepared once with its share of its text's steering; else each prepared whole.

        Raises:
            UserError: as `prepare`.
        """
        settings, steering = settings or self.decode, steering or [None] * len(texts)
        language, start = self.source_language, self._start_id()
        return self.reader.split(texts, steering, settings, start=start, language=language, first_line=first_line)

    def layout(self, text: str, steering: Steering | None = None) -> Layout:
        """`text` cut into lines, sentences and parts of sentences too long for this model (translate/segment.py),
        each part's fit measured on what the model reads of it under `steering`."""
        return self.reader.layout(text, steering, self.source_language)

    @property
    def source_language(self) -> str:
        """The language this translator reads (its pair's source), which chooses the sentence splitter's rules;
        "en" when the model does not name it."""
        return self.source or (self.directions[0][0] if self.directions else "en")

    def translations(
        self,
        texts: Sequence[str],
        settings: DecodeConfig | None = None,
        *,
        n_best: int = 1,
        attention: bool = False,
        evidence: bool = False,
        first_line: int = 1,
        steering: Sequence[Steering | None] | None = None,
        prepared: Sequence[Prepared] | None = None,
    ) -> list[Translation]:
        """The translation of each text, in input order (a blank text as it was, `EMPTY` when ""): `split` then
        `translated`. `settings`: how to search (default `decode`; a beam of 1 is greedy). `n_best` > 1: each
        carries n_best - 1 alternatives. `evidence`: word alignment, confidence and warnings (translate/evidence.py);
        `attention`: the attention weights (one teacher-forced pass serves both). `first_line`: the line of
        `texts[0]` in warnings. `steering`: each text's (translate/steering.py), None for none. `prepared`: the
        texts as `prepare` gave them, each one segment, `steering` not read (`texts` must be theirs: ValueError).

        Raises:
            UserError: a steering entry that cannot be met (translate/steering.py names it).
        """
        options = {"n_best": n_best, "attention": attention, "evidence": evidence}
        if prepared is None:
            return self.translated(self.split(texts, steering, settings, first_line=first_line), settings, **options)
        if [p.text for p in prepared] != list(texts):
            raise ValueError("prepared= holds other texts than texts: give the texts the prepared ones were made of")
        return self.translate_prepared(prepared, settings, **options)

    def translated(
        self,
        split: Split,
        settings: DecodeConfig | None = None,
        *,
        segments: Sequence[Translation] | None = None,
        n_best: int = 1,
        attention: bool = False,
        evidence: bool = False,
    ) -> list[Translation]:
        """The one door out: each text of `split` joined back from its segments' translations (translate/whole.py),
        found here as `translations` says or given as `segments` (a server's batcher's, several processes'), in
        `split.prepared`'s order.

        Raises:
            ValueError: not one translation per segment.
        """
        if segments is None:
            options = {"n_best": n_best, "attention": attention, "evidence": evidence}
            segments = self.translate_prepared(split.prepared, settings, **options)
        elif len(segments) != len(split.prepared):
            raise ValueError(f"{len(segments)} translations for the {len(split.prepared)} segments of the split")
        return split.joined(segments)

    def translate_prepared(
        self,
        prepared: Sequence[Prepared],
        settings: DecodeConfig | None = None,
        *,
        n_best: int = 1,
        attention: bool = False,
        evidence: bool = False,
        batches: Sequence[Sequence[int]] | None = None,
    ) -> list[Translation]:
        """The translation of each prepared segment, as one sentence, in their order (`translations` says how),
        decoded in `batches` (indices of `prepared`, default `length_batches`'s: sorted by length). Translating some
        of those batches decodes each sentence exactly as one process would (several processes share the work:
        train/distributed.py). A segment in no batch, or without a source, is not decoded (`EMPTY`, or its kept
        spans as written)."""
        settings = settings or self.decode
        chosen = length_batches(prepared, settings.batch_size) if batches is None else batches
        options = {"n_best": n_best, "attention": attention, "evidence": evidence}
        return translate_segments(self.door, self.tokenizer, self.planner, prepared, settings, chosen, **options)

    def attention(self, text: str, settings: DecodeConfig | None = None) -> TokenAttention:
        """Translate `text` as one sentence (settings as for `translations`, not split), then return the attention
        weights the model used: a map is one sentence's (a server's caller picks a sentence of a text).

        Raises:
            ValueError: `text` is empty.
        """
        if not text.strip():
            raise ValueError("cannot show attention for an empty text")
        one = replace(settings or self.decode, segment=False)  # one map: the text read as one sentence
        return self.translations([text], one, attention=True)[0].attention

    def trace(
        self,
        text: str,
        settings: DecodeConfig | None = None,
        *,
        top_k: int = 5,
        steering: Steering | None = None,
        prepared: Prepared | None = None,
    ) -> Trace:
        """Translate `text` as one sentence (not split: a server's caller picks a sentence of a text) as
        `translations` does, and return the search step by step (decode/trace.py; each step's `top_k` likeliest
        next tokens) and the encoder's self-attention. Steered (`steering`, or a `prepared` text), it is the search
        whose result `translations` keeps (translate/segments.py's `traced`); its translation is the model's own
        words (the kept spans not put back).

        Raises:
            ValueError: `text` is empty.
            UserError: nothing of the text is translated (it is all kept as written).
        """
        if not text.strip():
            raise ValueError("cannot trace the translation of an empty text")
        settings = settings or self.decode
        prepared = prepared or self.prepare([text], [steering], settings)[0]
        return traced(self.door, self.tokenizer, self.planner, prepared, settings, top_k=top_k)

    def _start_id(self) -> int:
        """The token every decoder of this translator starts from.

        Raises:
            UserError: a multilingual model, with no pair chosen (`for_pair`).
        """
        if self.start_id is None:
            served = ", ".join(direction_name(d) for d in self.directions) or ", ".join(self.tokenizer.languages)
            raise UserError(f"this model translates several directions ({served}): choose one (--source, --target)")
        return self.start_id
