"""Text in, text out: the tokenizer, batching and search around a trained Transformer.

`Translator.translations` keeps the caller's order and line alignment while batching for speed: it
sorts sentences by length so a batch pads little, decodes batch by batch and puts results back
where their inputs were. An empty (or all-whitespace) line gives an empty translation without running
the model. A sentence longer than the model's `max_len` positions is truncated, with a one-line warning, to
its first `max_len - 1` tokens plus EOS, so one bad line cannot stop a whole file.

A text is prepared once (`prepare`: its steering planned, what the model reads tokenised) and every feature
reads the model through two doors: `_search`, the one caller of the searches, and `teacher_forced`, one decoder
pass over given outputs (the evidence, the attention maps, word replacements, a look inside). Both start each
sentence from its own start token and run the bound decoder that translates (a frozen model's weight copies).

Every result is a `Translation`: the text with its ids and scores, the alternatives when an n-best list
was asked for, and the attention behind it when that was asked for. The same type travels through the
server's batcher to the HTTP answer, and the CTranslate2 engine returns it too. Decoding follows a
`DecodeConfig`: the checkpoint's (what validation measured) unless a call passes its own.

A multilingual model (tnmt/directions.py) translates once a pair is chosen: `for_pair` gives a translator
for one of its directions, which shares this one's model. Each `Source` carries the token its decoder starts
from (BOS, or the target language's tag), so one batch may mix directions (the server's batcher does).
"""

import copy
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple, Protocol

import torch

from tnmt.aligning_head import alignment_layer_index
from tnmt.blocks.record import Recorder
from tnmt.checkpoint import load_checkpoint
from tnmt.config import DecodeConfig
from tnmt.decode.hypothesis import Hypothesis
from tnmt.decode.rules import fit_source
from tnmt.decode.search import search
from tnmt.decode.trace import SearchRecorder, Trace
from tnmt.directions import Direction, all_directions, check_direction, direction_name
from tnmt.errors import UserError
from tnmt.model import BoundDecoder, EncodedSource, Transformer
from tnmt.translate.evidence import Evidence, Sentence, TokenAttention, gather_evidence, token_attention
from tnmt.translate.frozen import OutputProjection, transposed_linear
from tnmt.translate.quantize import quantize_int8
from tnmt.translate.steering import ConstraintReport, Plan, Planner, Steering, finish

QUANTIZE = ("none", "int8")


class TextTokenizer(Protocol):
    """What the Translator needs of `tnmt.data.tokenizer.Tokenizer`."""

    pad_id: int
    bos_id: int
    eos_id: int
    unk_id: int
    languages: tuple[str, ...]

    def language_id(self, language: str) -> int: ...
    def encode_target(self, text: str) -> list[int]: ...
    def encode_source_pieces(self, text: str) -> tuple[list[int], list[str]]: ...
    def decode_target(self, ids: Sequence[int]) -> str: ...
    def target_pieces(self, ids: Sequence[int]) -> list[str]: ...


@dataclass(frozen=True)
class Source:
    """What the model reads of a text, tokenised once: the ids decoded, and the pieces of the whole text, which
    label its attention and map its subwords onto words for the evidence."""

    ids: list[int]  # without EOS, cut to the model's max_len - 1 positions
    pieces: list[str] | None  # every piece of the text (more than `ids` when it was cut); None: ids given alone,
    # by a caller that asks for neither attention nor evidence (validation during training)
    start: int  # the decoder's first input: BOS, or the target language's tag (a multilingual model)


@dataclass(frozen=True)
class Prepared:
    """One text as a translator searches it (`Translator.prepare`): its steering planned and what the model reads
    of it tokenised, once, whatever features then read it."""

    text: str  # as the caller gave it
    plan: Plan | None  # what the model reads and the search obeys; None: ids given alone (`prepare_ids`)
    source: Source | None  # the ids of what the model reads; None: nothing is decoded (empty, or all kept)

    @property
    def read(self) -> str:
        """The text the model reads: the caller's less its kept spans."""
        return self.text if self.plan is None else self.plan.text

    def with_prefix(self, prefix: tuple[int, ...]) -> "Prepared":
        """This text with its output forced to start with `prefix` (target ids), its other steering kept."""
        plan = replace(self.plan, constraints=replace(self.plan.constraints, prefix=prefix))
        return replace(self, plan=plan)


class ForcedPass(NamedTuple):
    """One decoder pass over given outputs (`Translator.teacher_forced`)."""

    encoded: EncodedSource
    fed: torch.Tensor  # (B, T) each sentence's start token, its output, padding
    logits: torch.Tensor | None  # (B, T, V); None when the pass stopped at a middle layer
    weights: list[tuple[torch.Tensor, torch.Tensor]] | None  # per layer: self (B, H, T, T), cross (B, H, T, S)


@dataclass(frozen=True)
class Translation:
    """One source's translation: text, ids (no BOS/EOS), length-penalised score and log-probability.

    `alternatives` holds the next best translations (best first) when an n-best list was asked for,
    `attention` the weights that explain this translation and `evidence` its word alignment, confidence and
    warnings (translate/evidence.py), each when asked for; `constraints` how it met each positive constraint of
    its `Steering` (translate/steering.py); `token_log_probs` each token's log-probability as the search chose it.
    """

    text: str
    tokens: list[int]
    score: float
    log_prob: float
    alternatives: tuple["Translation", ...] = ()
    attention: TokenAttention | None = field(default=None, compare=False)
    evidence: Evidence | None = field(default=None, compare=False)
    constraints: tuple[ConstraintReport, ...] = ()
    token_log_probs: tuple[float, ...] = field(default=(), compare=False)

    @property
    def nbest(self) -> list["Translation"]:
        """This translation and its alternatives, best first."""
        return [self, *self.alternatives]


EMPTY = Translation(text="", tokens=[], score=0.0, log_prob=0.0, evidence=Evidence([], [], 1.0, []))


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
        if quantize not in QUANTIZE:
            raise ValueError(f"quantize must be one of {QUANTIZE}, got {quantize!r}")
        self.decode = decode or DecodeConfig()
        self.device = next(model.parameters()).device
        if quantize == "int8" and self.device.type != "cpu":
            raise ValueError(f"quantize='int8' runs on the CPU only, not on {self.device}")
        self.quantize = quantize
        self.model = quantize_int8(model) if quantize == "int8" else model.eval()
        self.tokenizer = tokenizer
        self.directions = tuple(directions)
        self.target: str | None = None  # the language written: chosen by `for_pair`
        # what every decoder starts from: BOS, or for a multilingual model the tag `for_pair` chooses
        self.start_id: int | None = None if tokenizer.languages else tokenizer.bos_id
        self.steering: Steering | None = None  # every text's steering when a call gives none (--glossary)
        self.planner = Planner(tokenizer, target_vocab_size=self.model.config.tgt_vocab_size, device=self.device)
        self._frozen = frozen or quantize == "int8"
        self._projection = None
        if self._frozen and OutputProjection.usable(self.model):
            self._projection = OutputProjection(self.model)
        # bound once when the weights are frozen (on copies laid out for the products), else per search
        self.decoder = self.bind() if self._frozen else None

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
        chosen.target, chosen.start_id = target, self.tokenizer.language_id(target)
        return chosen

    def bind(self, record: Recorder | None = None) -> BoundDecoder:
        """The model's decoder as this translator runs it (`Transformer.incremental_decoder`): on the frozen
        weights' copies when it owns them; with `record`, its layers report what flows through them."""
        if not self._frozen:
            return self.model.incremental_decoder(record=record)
        return self.model.incremental_decoder(project=self._projection, linear=transposed_linear, record=record)

    def translate(
        self, texts: Sequence[str], settings: DecodeConfig | None = None, *, first_line: int = 1
    ) -> list[str]:
        """The best translation of each text, in input order; an empty or all-whitespace text gives ""."""
        return [translation.text for translation in self.translations(texts, settings, first_line=first_line)]

    def prepare(
        self,
        texts: Sequence[str],
        steering: Sequence[Steering | None] | None = None,
        settings: DecodeConfig | None = None,
        *,
        first_line: int = 1,
    ) -> list[Prepared]:
        """Each text as the search will read it: its steering planned (default: this translator's `steering`),
        what the model reads tokenised (spans it cannot read, URLs, emoji, kept as written: translate/steering.py).

        Raises:
            UserError: a steering entry that cannot be met, not one steering per text, or a multilingual model
                with no pair chosen (`for_pair`).
        """
        start, model_cap = self._start_id(), self.model.config.max_len - 1
        cap = min((settings or self.decode).max_len or model_cap, model_cap)  # the most output tokens
        plans = self.planner.plans(texts, steering or [self.steering] * len(texts), max_tokens=cap)
        prepared = []
        for i, (text, plan) in enumerate(zip(texts, plans, strict=True)):
            source = None
            if plan.text.strip():
                ids, pieces = self.tokenizer.encode_source_pieces(plan.text)
                max_len = self.model.config.max_len
                source = Source(fit_source(ids, model_max_len=max_len, line=first_line + i), pieces, start)
            prepared.append(Prepared(text, plan, source))
        return prepared

    def prepare_ids(
        self, texts: Sequence[str], ids: Sequence[list[int]], starts: Sequence[int] | None = None
    ) -> list[Prepared]:
        """Texts given with their source ids (fitted to the model, no EOS), read as they are: nothing planned,
        kept or reported (validation during training, which tokenised them already). `starts`: each text's first
        decoder input (default: this translator's)."""
        starts = starts or [self._start_id()] * len(texts)
        return [
            Prepared(text, None, Source(row, None, start) if text.strip() else None)
            for text, row, start in zip(texts, ids, starts, strict=True)
        ]

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
        """The translation of each text, in input order; `EMPTY` for an empty or all-whitespace text.

        Args:
            texts: The sentences.
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
            prepared: The texts as `prepare` (or `prepare_ids`) gave them, when the caller has them already (a
                server prepares when a request arrives, so that a bad entry is refused before it is queued):
                nothing is planned or tokenised again, and `steering` is not read. A prepared text whose source
                is None is not decoded.

        Raises:
            UserError: a steering entry that cannot be met (translate/steering.py names it).
        """
        settings = settings or self.decode
        if prepared is None:
            prepared = self.prepare(texts, steering, settings, first_line=first_line)
        results: list[Translation] = [EMPTY] * len(prepared)
        for chunk in self.batches(prepared, settings.batch_size):
            batch = [prepared[i] for i in chunk]
            steered = any(p.plan is not None and p.plan.steers for p in batch)
            kept = any(p.plan is not None and p.plan.kept for p in batch)
            encoded, found = self._search(batch, settings, n_best=n_best, steered=steered, encoder_attention=attention)
            extras = self._explain(batch, encoded, found, settings, attention=attention, evidence=evidence or kept)
            for p, i, hypotheses, (maps, proof) in zip(batch, chunk, found, extras, strict=True):
                results[i] = replace(self._translation(hypotheses), attention=maps, evidence=proof)
                if steered:  # in the user's terms, the evidence as asked (the kept spans' placing read it)
                    results[i] = self._finished(results[i], hypotheses, p.plan, evidence)
        for i, p in enumerate(prepared):  # texts the model reads nothing of: only their kept spans ("🐶🐶 🚲")
            if p.source is None and p.plan is not None and p.plan.kept:
                results[i] = self._finished(EMPTY, [], p.plan, evidence)
        return results

    def attention(self, text: str, settings: DecodeConfig | None = None) -> TokenAttention:
        """Translate `text` (settings as for `translations`), then return the attention weights the model used.

        Raises:
            ValueError: `text` is empty.
        """
        if not text.strip():
            raise ValueError("cannot show attention for an empty text")
        return self.translations([text], settings, attention=True)[0].attention

    def trace(
        self,
        text: str,
        settings: DecodeConfig | None = None,
        *,
        top_k: int = 5,
        steering: Steering | None = None,
        prepared: Prepared | None = None,
    ) -> Trace:
        """Translate `text` as `translations` does and return the search step by step (decode/trace.py): every
        step's open hypotheses with their `top_k` likeliest next tokens, the candidates kept, finished and
        pruned, the finished list and the cross-attention rows; and the encoder's self-attention. With
        `steering` (or a `prepared` text) the search is the steered one, each open hypothesis telling which
        constraints it met; the trace's translation is the model's own words (the kept spans not put back).

        Raises:
            ValueError: `text` is empty.
            UserError: nothing of the text is translated (it is all kept as written).
        """
        if not text.strip():
            raise ValueError("cannot trace the translation of an empty text")
        settings = settings or self.decode
        prepared = prepared or self.prepare([text], [steering], settings)[0]
        if prepared.source is None:
            raise UserError("nothing of this text is translated: it is all kept as written")
        recorder = SearchRecorder(top_k=top_k, length_penalty=settings.length_penalty, eos_id=self.tokenizer.eos_id)
        steered = prepared.plan is not None and prepared.plan.steers
        encoded, found = self._search([prepared], settings, recorder=recorder, steered=steered)
        encoder = torch.stack([layer[0] for layer in encoded.encoder_attention]).float().cpu()  # (L, H, S, S)
        text_out = self.tokenizer.decode_target(found[0][0].tokens)
        return Trace(text_out, self._labels(prepared.source, [])[0], encoder, recorder.steps)

    def batches(self, prepared: Sequence[Prepared], batch_size: int) -> list[list[int]]:
        """The indices of `prepared` in the batches `translations` decodes, in its order: by source length, longest
        first, `batch_size` per batch (texts without a source in none).

        Translating some of these batches with the others' sources set to None decodes exactly those batches
        again (the sort is stable and every batch but the last is full): several processes can share the
        work, and each sentence is computed as one process would compute it (train/distributed.py).
        """
        lengths = {i: len(p.source.ids) for i, p in enumerate(prepared) if p.source is not None}
        order = sorted(lengths, key=lambda i: -lengths[i])
        return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]

    def teacher_forced(
        self,
        sources: Sequence[Source],
        outputs: Sequence[Sequence[int]],
        *,
        encoded: EncodedSource | None = None,
        layers: int | None = None,
        weights: bool = True,
        record: Recorder | None = None,
    ) -> ForcedPass:
        """One pass of the decoder that translates over each output after its source's start token (right-padded
        to T), on a fresh KV cache over `encoded` (the search's, so the encoder does not run again; default: the
        sources encoded now, with the encoder's self-attention): the same body as a search's step, all T
        positions at once. `layers` stops after that many decoder layers (the aligning one: no logits then);
        `weights` returns every layer's attention; `record` has the blocks report what flows through them."""
        pad = self.model.config.pad_id
        width = max(len(ids) for ids in outputs) + 1
        rows = [[s.start, *ids] + [pad] * (width - 1 - len(ids)) for s, ids in zip(sources, outputs, strict=True)]
        with torch.inference_mode():
            if encoded is None:
                src = self._source_batch(sources)
                encoded = self.model.encode_for_decoding(src, need_weights=True, record=record)
            fed = torch.tensor(rows, device=self.device)  # (B, T)
            decoder = self.decoder if record is None and self.decoder is not None else self.bind(record)
            features, found = decoder.features(fed, encoded.cache(width), need_weights=weights, layers=layers)
            logits = None if layers is not None else decoder.project(features).view(*fed.shape, -1)
        return ForcedPass(encoded, fed, logits, found if weights else None)

    def _search(
        self,
        batch: Sequence[Prepared],
        settings: DecodeConfig,
        *,
        n_best: int = 1,
        steered: bool = False,
        recorder: SearchRecorder | None = None,
        encoder_attention: bool = False,
    ) -> tuple[EncodedSource, list[list[Hypothesis]]]:
        """The one door to the searches: encode the batch's sources (with the encoder's self-attention for a
        `recorder` or `encoder_attention`), search from each one's start token, with its plan's constraints when
        `steered`."""
        sources = [p.source for p in batch]
        constraints = [p.plan.constraints for p in batch] if steered else None
        with torch.inference_mode():
            src = self._source_batch(sources)
            encoded = self.model.encode_for_decoding(src, need_weights=encoder_attention or recorder is not None)
            found = search(
                self.model,
                encoded,
                settings,
                n_best=n_best,
                decoder=self.decoder,
                constraints=constraints,
                starts=torch.tensor([s.start for s in sources], device=self.device),
                recorder=recorder,
            )
        return encoded, found

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
        """The attention maps and the evidence of one batch's best translations, from one teacher-forced pass over
        them on the search's encoded sources: through every layer when the maps are wanted, else only through
        the aligning layer (translate/evidence.py)."""
        if not (attention or evidence):
            return [(None, None)] * len(batch)
        best = [hypotheses[0] for hypotheses in found]
        aligning = alignment_layer_index(settings.alignment_layer, self.model.config.n_decoder_layers)
        sources = [p.source for p in batch]
        layers = None if attention else aligning + 1
        weights = self.teacher_forced(sources, [h.tokens for h in best], encoded=encoded, layers=layers).weights
        sentences = [self._sentence(p, h) for p, h in zip(batch, best, strict=True)]
        proofs = gather_evidence(sentences, weights[aligning][1], settings) if evidence else [None] * len(batch)
        if not attention:
            return [(None, proof) for proof in proofs]
        maps = [
            token_attention(b, s, self._labels(p.source, h.tokens), encoded.encoder_attention or [], weights)
            for b, (p, s, h) in enumerate(zip(batch, sentences, best, strict=True))
        ]
        return list(zip(maps, proofs, strict=True))

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

    def _finished(self, result: Translation, found: list[Hypothesis], plan: Plan, evidence: bool) -> Translation:
        """A steered translation (`found`: its hypotheses, best first) in the user's terms (translate/steering.py's
        `finish`); its alternatives too, their kept spans placed without an alignment of their own (at the ends)."""
        spans = found[0].constraints if found else ()
        text, reports, proof = finish(plan, result.text, result.tokens, spans, result.evidence, self.tokenizer)
        others = tuple(
            self._finished(replace(a, evidence=None), [h], plan, False)
            for a, h in zip(result.alternatives, found[1:], strict=True)
        )
        return replace(
            result, text=text, constraints=reports, evidence=proof if evidence else None, alternatives=others
        )

    def _source_batch(self, sources: Sequence[Source]) -> torch.Tensor:
        """Right-padded source ids (B, S) on the model's device, each sentence ending with EOS."""
        width = max(len(source.ids) for source in sources) + 1
        pad_id, eos_id = self.model.config.pad_id, self.tokenizer.eos_id
        rows = [[*source.ids, eos_id] + [pad_id] * (width - 1 - len(source.ids)) for source in sources]
        return torch.tensor(rows, device=self.device)

    def _start_id(self) -> int:
        """The token every decoder of this translator starts from.

        Raises:
            UserError: a multilingual model, with no pair chosen (`for_pair`).
        """
        if self.start_id is None:
            served = ", ".join(direction_name(d) for d in self.directions) or ", ".join(self.tokenizer.languages)
            raise UserError(f"this model translates several directions ({served}): choose one (--source, --target)")
        return self.start_id
