"""Text in, text out: the tokenizer, batching and search around a trained Transformer.

`translations` keeps the caller's order and line alignment while batching for speed: each text is cut into
lines and sentences (translate/segment.py: `split`), the sentences of all texts sorted by length share batches
that pad little, and each text is joined back from its sentences' translations (translate/whole.py). A blank text
comes back as it was without running the model; a sentence longer than the model's `max_len` is translated in
parts; only one unbroken word that long (or any, with `DecodeConfig.segment` off) is cut to its first
`max_len - 1` tokens plus EOS, with a one-line warning, so one bad line cannot stop a whole file.

A text is prepared once (translate/prepared.py: its steering planned, what the model reads tokenised), and every
feature reads the model through one door (translate/door.py): its search, and one teacher-forced pass over given
outputs (the evidence, the attention maps, word replacements, a look inside), each sentence from its own start
token (BOS, or a multilingual model's target-language tag: `for_pair`), so one batch may mix directions.
Decoding follows a `DecodeConfig`: the checkpoint's (what validation measured) unless a call passes its own.
"""

import copy
import os
from collections.abc import Sequence
from dataclasses import replace
from functools import partial
from typing import Any, Protocol

import torch

from tnmt.aligning_head import alignment_layer_index
from tnmt.checkpoint import load_checkpoint
from tnmt.config import DecodeConfig
from tnmt.decode.hypothesis import Hypothesis
from tnmt.decode.trace import SearchRecorder, Trace
from tnmt.directions import Direction, all_directions, check_direction, direction_name
from tnmt.errors import UserError
from tnmt.model import EncodedSource, Transformer
from tnmt.translate.door import QUANTIZE, ModelDoor
from tnmt.translate.evidence import Evidence, Sentence, TokenAttention, explain
from tnmt.translate.prepared import Prepared, Source, given_ids, length_batches, prepare
from tnmt.translate.replaced import Inflections, PlainPass, term_checks
from tnmt.translate.segment import Layout, split_text
from tnmt.translate.steering import Plan, Planner, Steering, TermChecks, finish
from tnmt.translate.term_search import search_replacing
from tnmt.translate.translation import EMPTY, Translation
from tnmt.translate.whole import Split, segment_steering


class TextTokenizer(Protocol):
    """What the Translator needs of `tnmt.data.tokenizer.Tokenizer`."""

    pad_id: int
    bos_id: int
    eos_id: int
    unk_id: int
    languages: tuple[str, ...]
    term_markers: tuple[int, int] | None

    def language_id(self, language: str) -> int: ...
    def encode_target(self, text: str) -> list[int]: ...
    def encode_source_pieces(self, text: str) -> tuple[list[int], list[str]]: ...
    def decode_target(self, ids: Sequence[int]) -> str: ...
    def target_pieces(self, ids: Sequence[int]) -> list[str]: ...


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
    ) -> None:
        """`decode` (default `DecodeConfig()`) is every call's default settings; `quantize="int8"` quantises the
        model now (`tnmt.translate.quantize`): a property of the loaded model, not of a call. `frozen=True`
        promises that the model's weights do not change while this translator uses it (it loaded its own): the
        translator then binds it for decoding once (`Transformer.incremental_decoder`), on copies of its weights
        laid out for the step's products (translate/frozen.py). A quantised model is a copy of the translator's
        own, so it is frozen too. `directions`: the (source, target) pairs the model was trained on (a
        checkpoint's), () when not known; a multilingual model translates through `for_pair`."""
        self.decode = decode or DecodeConfig()
        self.door = ModelDoor(model, eos_id=tokenizer.eos_id, quantize=quantize, frozen=frozen)
        self.model, self.device, self.quantize = self.door.model, self.door.device, quantize
        self.tokenizer = tokenizer
        self.directions = tuple(directions)
        self.source: str | None = None  # the language read and the one written: chosen by `for_pair`
        self.target: str | None = None
        # what every decoder starts from: BOS, or for a multilingual model the tag `for_pair` chooses
        self.start_id: int | None = None if tokenizer.languages else tokenizer.bos_id
        self.steering: Steering | None = None  # every text's steering when a call gives none (--glossary)
        self.planner = Planner(tokenizer, target_vocab_size=self.model.config.tgt_vocab_size, device=self.device)
        self._inflections: Inflections | None = None  # the target vocabulary by stem, for the words terms replace

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
        return cls(model, tokenizer, checkpoint.decode, quantize=quantize, frozen=True, directions=directions)

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
        if not self.multilingual:
            if self.directions and (source, target) != self.directions[0]:
                raise UserError(f"{source}-{target}: this model translates {direction_name(self.directions[0])} only")
            return self
        trained = self.directions or all_directions(self.tokenizer.languages)
        try:
            check_direction(source, target, languages=self.tokenizer.languages, trained=trained, zero_shot=zero_shot)
        except ValueError as err:
            raise UserError(str(err)) from None
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
        """Each text as the search will read it (translate/prepared.py), as one sentence, its steering default this
        translator's; `lines`: each text's line number in warnings (default: counted from `first_line`).

        Raises:
            UserError: a steering entry that cannot be met, not one steering per text, or a multilingual model
                with no pair chosen (`for_pair`).
        """
        start, model_cap = self._start_id(), self.model.config.max_len - 1
        return prepare(
            texts,
            steering or [self.steering] * len(texts),
            planner=self.planner,
            tokenizer=self.tokenizer,
            start=start,
            model_max_len=self.model.config.max_len,
            max_tokens=min((settings or self.decode).max_len or model_cap, model_cap),
            lines=lines or range(first_line, first_line + len(texts)),
        )

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
        """The texts cut into segments (translate/segment.py: lines, sentences, parts of a long sentence) when
        `settings.segment`, each segment prepared with its share of its text's steering (`segment_steering`); else
        each text prepared whole (`prepare`). `Split.joined` puts the segments' translations back together.

        Raises:
            UserError: as `prepare`.
        """
        settings = settings or self.decode
        steering = steering or [self.steering] * len(texts)
        if len(steering) != len(texts):
            raise UserError(f"{len(steering)} steering entries for {len(texts)} texts: give one per text")
        if not settings.segment:
            return Split(None, self.prepare(texts, steering, settings, first_line=first_line))
        layouts = [self.layout(text, one) for text, one in zip(texts, steering, strict=True)]
        segments = [segment for layout in layouts for segment in layout.segments]
        steered = [
            segment_steering(one, i)
            for layout, one in zip(layouts, steering, strict=True)
            for i in range(len(layout.spans))
        ]
        lines = [first_line + n for n, layout in enumerate(layouts) for _ in layout.spans]
        return Split(layouts, self.prepare(segments, steered, settings, lines=lines))

    def layout(self, text: str, steering: Steering | None = None) -> Layout:
        """`text` cut into lines, sentences and parts of sentences too long for this model (translate/segment.py),
        each part's fit measured on what the model reads of it under `steering`."""
        return split_text(text, self.source_language, fits=lambda segment: self._fits(segment, steering))

    @property
    def source_language(self) -> str:
        """The language this translator reads (its pair's source), which chooses the sentence splitter's rules;
        "en" when the model does not name it."""
        return self.source or (self.directions[0][0] if self.directions else "en")

    def _fits(self, segment: str, steering: Steering | None) -> bool:
        """Whether the model can read `segment` whole: the tokens of what it reads (the text less the spans kept as
        written under `steering`: URLs, e-mail addresses, emoji, markup, characters it cannot read, do-not-translate
        terms; translate/steering.py's `Planner.read`) fit the model's positions, EOS included."""
        if self._short(segment):  # what it reads is shorter still: no need to find its kept spans
            return True
        read = self.planner.read(segment, steering)
        if self._short(read):
            return True
        ids, _ = self.tokenizer.encode_source_pieces(read)
        return len(ids) <= self.model.config.max_len - 1

    def _short(self, text: str) -> bool:
        """Whether `text` fits the model's positions whatever its pieces: a piece is at least one byte or a word's
        start mark, so a text this short needs no tokenising to know."""
        return len(text.encode("utf-8", "surrogatepass")) + len(text) < self.model.config.max_len

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
        """The translation of each text, in input order; a blank text as it was (`EMPTY` when it is "").

        Args:
            texts: The texts: each is cut into lines and sentences and joined back (translate/segment.py,
                translate/whole.py), unless `settings.segment` is false (each text is then one sentence).
            settings: How to search (default: this translator's `decode`). A beam of 1 runs greedy search,
                which gives the same result as beam search with one beam.
            n_best: With n_best > 1, each translation carries its next n_best - 1 alternatives (at most
                the beam size in all).
            evidence: Also return each best translation's word alignment, confidence and warnings
                (translate/evidence.py): the search's own token probabilities, and the attention of one
                teacher-forced pass over the outputs through the aligning layer, on the search's encoded sources.
            attention: Also return the attention weights behind each (non-empty) translation: the same
                teacher-forced pass through every layer, which then serves the evidence too.
            first_line: The line number of `texts[0]` in warnings (a file translated chunk by chunk names
                its own lines).
            steering: Each text's glossary, terms to keep, phrases to include or avoid and prefix
                (translate/steering.py), None for a text without (default: this translator's `steering`); each
                translation then reports its constraints.
            prepared: The texts as `prepare` (or `prepare_ids`, or `split`) gave them, when the caller has them
                already (a server prepares when a request arrives, so that a bad entry is refused before it is
                queued): each is translated as one sentence, nothing is planned, split or tokenised again, and
                `steering` is not read (`texts` must be theirs: ValueError otherwise). A prepared text whose
                source is None is not decoded.

        Raises:
            UserError: a steering entry that cannot be met (translate/steering.py names it).
        """
        settings = settings or self.decode
        options = {"n_best": n_best, "attention": attention, "evidence": evidence}
        if prepared is None:
            split = self.split(texts, steering, settings, first_line=first_line)
            return split.joined(self._sentences(split.prepared, settings, **options))
        if [p.text for p in prepared] != list(texts):
            raise ValueError("prepared= holds other texts than texts: give the texts the prepared ones were made of")
        return self._sentences(prepared, settings, **options)

    def _sentences(
        self, prepared: Sequence[Prepared], settings: DecodeConfig, *, n_best: int, attention: bool, evidence: bool
    ) -> list[Translation]:
        """The translation of each prepared text, as one sentence, in their order (`translations` says how)."""
        results: list[Translation] = [EMPTY] * len(prepared)
        for chunk in self.batches(prepared, settings.batch_size):
            batch = [prepared[i] for i in chunk]
            steered = any(p.steers for p in batch)
            encoded, found, batch, plain = self._search(batch, settings, n_best=n_best, encoder_attention=attention)
            aligned = any(p.plan is not None and p.plan.kept for p in batch) or any(plain)  # the finish reads it
            extras = self._explain(batch, encoded, found, settings, attention=attention, evidence=evidence or aligned)
            for p, one, i, hypotheses, (maps, proof) in zip(batch, plain, chunk, found, extras, strict=True):
                results[i] = replace(self._translation(hypotheses), attention=maps, evidence=proof)
                if steered:  # in the user's terms, the evidence as asked (the kept spans' placing read it)
                    checks = partial(term_checks, p, one) if one is not None else None
                    results[i] = self._finished(results[i], hypotheses, p.plan, evidence, checks)
        for i, p in enumerate(prepared):  # texts the model reads nothing of: only their kept spans ("🐶🐶 🚲")
            if p.source is None and p.plan is not None and p.plan.kept:
                results[i] = self._finished(EMPTY, [], p.plan, evidence)
        return results

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
        `translations` does, and return the search step by step (decode/trace.py): every
        step's open hypotheses with their `top_k` likeliest next tokens, the candidates kept, finished and
        pruned, the finished list and the cross-attention rows; and the encoder's self-attention. With
        `steering` (or a `prepared` text) the search is the steered one, each open hypothesis telling which
        constraints it met, its glossary terms replacing the model's words as `translations` has them (the passes
        that learn those words run first, unrecorded); the trace's translation is the model's own words (the kept
        spans not put back).

        Raises:
            ValueError: `text` is empty.
            UserError: nothing of the text is translated (it is all kept as written).
        """
        if not text.strip():
            raise ValueError("cannot trace the translation of an empty text")
        settings = settings or self.decode
        prepared = prepared or self.prepare([text], [steering], settings)[0]
        source = prepared.searched()
        if prepared.plan is not None and prepared.plan.glossed:  # the search that translates: its terms replacing
            prepared = self._search([prepared], settings)[2][0]
        recorder = SearchRecorder(top_k=top_k, length_penalty=settings.length_penalty, eos_id=self.tokenizer.eos_id)
        constraints = [prepared.plan.constraints] if prepared.steers else None
        encoded, found = self.door.search([source], settings, constraints=constraints, recorder=recorder)
        encoder = torch.stack([layer[0] for layer in encoded.encoder_attention]).float().cpu()  # (L, H, S, S)
        text_out = self.tokenizer.decode_target(found[0][0].tokens)
        return Trace(text_out, self._labels(prepared.source, [])[0], encoder, recorder.steps)

    def batches(self, prepared: Sequence[Prepared], batch_size: int) -> list[list[int]]:
        """The indices of `prepared` in the batches `translations` decodes, in its order (`length_batches`).

        Translating some of these batches with the others' sources set to None decodes exactly those batches
        again: several processes can share the work, and each sentence is computed as one process would compute
        it (train/distributed.py).
        """
        return length_batches(prepared, batch_size)

    def _search(
        self, batch: Sequence[Prepared], settings: DecodeConfig, **options: Any
    ) -> tuple[EncodedSource, list[list[Hypothesis]], list[Prepared], list[PlainPass | None]]:
        """The door's search of a batch, its glossary terms replacing the model's words (`search_replacing`, which
        `options` go to, as do what it returns)."""
        if self._inflections is None and any(p.plan is not None and p.plan.glossed for p in batch):
            self._inflections = Inflections(self.planner.target_pieces)  # once: the vocabulary's, by stem
        aligning = alignment_layer_index(settings.alignment_layer, self.model.config.n_decoder_layers)
        return search_replacing(
            self.door, batch, settings, self.tokenizer, self._inflections, aligning=aligning, **options
        )

    def _explain(
        self,
        batch: Sequence[Prepared],
        encoded: EncodedSource,
        found: list[list[Hypothesis]],
        settings: DecodeConfig,
        *,
        attention: bool,
        evidence: bool,
    ) -> list[tuple[TokenAttention | None, Evidence | None]]:
        """The attention maps and the evidence of one batch's best translations (translate/evidence.py), from one
        teacher-forced pass over them on the search's encoded sources: through every layer when the maps are
        wanted, else only through the aligning layer."""
        if not (attention or evidence):
            return [(None, None)] * len(batch)
        best = [hypotheses[0] for hypotheses in found]
        aligning = alignment_layer_index(settings.alignment_layer, self.model.config.n_decoder_layers)
        layers = None if attention else aligning + 1
        sources, outputs = [p.source for p in batch], [h.tokens for h in best]
        forced = self.door.teacher_forced(sources, outputs, encoded=encoded, layers=layers)
        labels = [self._labels(p.source, h.tokens) for p, h in zip(batch, best, strict=True)]
        sentences = [self._sentence(p, h) for p, h in zip(batch, best, strict=True)]
        maps = (encoded.encoder_attention or [], labels) if attention else None
        return explain(sentences, forced.weights, settings, aligning=aligning, evidence=evidence, maps=maps)

    def _sentence(self, prepared: Prepared, best: Hypothesis) -> Sentence:
        """A translated sentence as the evidence reads it: what the model read and wrote, with their pieces."""
        source = prepared.source
        return Sentence(
            source_text=prepared.read,
            source_ids=source.ids,
            source_pieces=source.pieces,
            output_text=self.tokenizer.decode_target(best.tokens),
            output_ids=best.tokens,
            output_pieces=self.tokenizer.target_pieces(best.tokens),
            ended=best.ended,
            token_log_probs=best.token_log_probs,
        )

    def _labels(self, source: Source, output: Sequence[int]) -> tuple[list[str], list[str]]:
        """The pieces that label attention: over the source, its ids `prepare` kept and EOS; over the decoder's
        input, the start token and `output`."""
        eos = self.tokenizer.target_pieces([self.tokenizer.eos_id])
        return source.pieces[: len(source.ids)] + eos, self.tokenizer.target_pieces([source.start, *output])

    def _translation(self, hypotheses: list[Hypothesis]) -> Translation:
        """A search's hypotheses, best first, as one `Translation` carrying the others as alternatives."""
        best, *others = (
            Translation(
                self.tokenizer.decode_target(h.tokens),
                h.tokens,
                h.score,
                h.log_prob,
                token_log_probs=tuple(h.token_log_probs),
            )
            for h in hypotheses
        )
        return replace(best, alternatives=tuple(others))

    def _finished(
        self, result: Translation, found: list[Hypothesis], plan: Plan, evidence: bool, checks: TermChecks | None = None
    ) -> Translation:
        """A steered translation (`found`: its hypotheses, best first) in the user's terms (translate/steering.py's
        `finish`, its glossary terms checked by `checks`); its alternatives too, their kept spans placed without an
        alignment of their own (at the ends)."""
        spans = found[0].constraints if found else ()
        text, reports, proof = finish(plan, result.text, result.tokens, spans, result.evidence, self.tokenizer, checks)
        others = tuple(
            self._finished(replace(a, evidence=None), [h], plan, False)
            for a, h in zip(result.alternatives, found[1:], strict=True)
        )
        return replace(
            result, text=text, constraints=reports, evidence=proof if evidence else None, alternatives=others
        )

    def _start_id(self) -> int:
        """The token every decoder of this translator starts from.

        Raises:
            UserError: a multilingual model, with no pair chosen (`for_pair`).
        """
        if self.start_id is None:
            served = ", ".join(direction_name(d) for d in self.directions) or ", ".join(self.tokenizer.languages)
            raise UserError(f"this model translates several directions ({served}): choose one (--source, --target)")
        return self.start_id
