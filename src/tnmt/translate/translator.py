"""Text in, text out: the tokenizer, batching and search around a trained Transformer.

`Translator.translations` keeps the caller's order and line alignment while batching for speed: it
sorts sentences by length so a batch pads little, decodes batch by batch and puts results back
where their inputs were. An empty (or all-whitespace) line gives an empty translation without running
the model. A sentence longer than the model's `max_len` positions is truncated, with a one-line warning, to
its first `max_len - 1` tokens plus EOS, so one bad line cannot stop a whole file.

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
from tnmt.checkpoint import load_checkpoint
from tnmt.config import DecodeConfig
from tnmt.decode.hypothesis import Hypothesis
from tnmt.decode.rules import fit_source
from tnmt.decode.search import search
from tnmt.decode.trace import SearchRecorder, Trace
from tnmt.directions import Direction, all_directions, check_direction, direction_name
from tnmt.errors import UserError
from tnmt.model import AttentionMaps, EncodedSource, Transformer
from tnmt.translate.evidence import Evidence, Sentence, gather_evidence, teacher_forced_attention
from tnmt.translate.frozen import OutputProjection, transposed_linear
from tnmt.translate.quantize import quantize_int8
from tnmt.translate.steering import ConstraintReport, Plan, Steering, finish, plan

QUANTIZE = ("none", "int8")
KNOWN_CHARS = 65536  # characters whose readability a translator remembers
WORD_ENDS = frozenset(".,;:!?)]}\"'»«“”„…/")  # what may follow a met constraint without a space


class TextTokenizer(Protocol):
    """What the Translator needs of `tnmt.data.tokenizer.Tokenizer`."""

    pad_id: int
    bos_id: int
    eos_id: int
    unk_id: int
    languages: tuple[str, ...]

    def language_id(self, language: str) -> int: ...
    def encode_source(self, text: str) -> list[int]: ...
    def encode_target(self, text: str) -> list[int]: ...
    def encode_source_pieces(self, text: str) -> tuple[list[int], list[str]]: ...
    def decode_target(self, ids: Sequence[int]) -> str: ...
    def target_pieces(self, ids: Sequence[int]) -> list[str]: ...


@dataclass(frozen=True)
class Source:
    """A text as the `Translator` decodes it, tokenised once (`Translator.encode`): the ids decoded, and the
    pieces of the whole text, which label its attention and map its subwords onto words for the evidence."""

    ids: list[int]  # without EOS, cut to the model's max_len - 1 positions
    pieces: list[str] | None  # every piece of the text (more than `ids` when it was cut); None: ids given alone,
    # by a caller that asks for neither attention nor evidence (validation during training)
    start: int  # the decoder's first input: BOS, or the target language's tag (a multilingual model)


class TokenAttention(NamedTuple):
    """The attention weights behind one translation, labelled by subword pieces.

    `source_pieces` ends with EOS; `target_pieces` is the decoder's input (BOS or the target language's tag,
    then the output): row i of a decoder map is where the token after piece i was chosen. `maps` holds every
    layer's weights for batch size 1.
    """

    source_pieces: list[str]
    target_pieces: list[str]
    maps: AttentionMaps


@dataclass(frozen=True)
class Translation:
    """One source's translation: text, ids (no BOS/EOS), length-penalised score and log-probability.

    `alternatives` holds the next best translations (best first) when an n-best list was asked for,
    `attention` the weights that explain this translation and `evidence` its word alignment, confidence and
    warnings (translate/evidence.py), each when asked for; `constraints` how it met each positive constraint of
    its `Steering` (translate/steering.py).
    """

    text: str
    tokens: list[int]
    score: float
    log_prob: float
    alternatives: tuple["Translation", ...] = ()
    attention: TokenAttention | None = field(default=None, compare=False)
    evidence: Evidence | None = field(default=None, compare=False)
    constraints: tuple[ConstraintReport, ...] = ()

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
        model now (`tnmt.translate.quantize`): a property of the loaded model, not of a call. `frozen=True` promises
        that the model's weights do not change while this translator uses it (it loaded its own): the translator
        then binds it for decoding once (`Transformer.incremental_decoder`), on copies of its weights laid out
        for the step's products (translate/frozen.py). A quantised model is a copy of the translator's own, so it is
        frozen too. `directions`: the (source, target) pairs the model was trained on (a checkpoint's), () when
        not known; a multilingual model translates through `for_pair`."""
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
        self.steering: Steering | None = (
            None  # every text's steering when a call gives none (tnmt translate --glossary)
        )
        self._known_chars: dict[str, bool] = {}
        self._joiners: torch.Tensor | None = None
        owned = frozen or quantize == "int8"
        self.decoder = None  # the model bound for decoding: per search, unless its weights are frozen
        if owned:  # once, on copies of the weights laid out for the products (translate/frozen.py)
            projection = OutputProjection(self.model) if OutputProjection.usable(self.model) else None
            self.decoder = self.model.incremental_decoder(project=projection, linear=transposed_linear)

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
        chosen = copy.copy(self)  # the model, its bound decoder and the caches are shared
        chosen.target, chosen.start_id = target, self.tokenizer.language_id(target)
        return chosen

    def translate(
        self, texts: Sequence[str], settings: DecodeConfig | None = None, *, first_line: int = 1
    ) -> list[str]:
        """The best translation of each text, in input order; an empty or all-whitespace text gives ""."""
        return [translation.text for translation in self.translations(texts, settings, first_line=first_line)]

    def translations(
        self,
        texts: Sequence[str],
        settings: DecodeConfig | None = None,
        *,
        n_best: int = 1,
        attention: bool = False,
        evidence: bool = False,
        first_line: int = 1,
        sources: Sequence[Source | None] | None = None,
        steering: Sequence[Steering | None] | None = None,
        plans: Sequence[Plan] | None = None,
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
                teacher-forced pass over the outputs through the aligning layer, on the search's encoded
                sources.
            attention: Also return the attention weights behind each (non-empty) translation: the same
                teacher-forced pass through every layer, which then serves the evidence too.
            first_line: The line number of `texts[0]` in warnings (a file translated chunk by chunk names
                its own lines).
            sources: The texts as `encode` tokenised them, when the caller has them already (a server counts
                tokens with them), so nothing is tokenised twice; ignored with `steering` (whose plans change the
                texts the model reads).
            steering: Each text's glossary, terms to keep, phrases to include or avoid and prefix
                (translate/steering.py), None for a text without (default: this translator's `steering` for every
                text); each translation then reports its constraints.
                Whatever the steering, spans the model cannot read (URLs, e-mail addresses, emoji, characters
                outside its vocabulary) are kept as written and placed by the alignment; not when the caller
                gives `sources` without `plans` (ids it encoded itself, as validation does).
            plans: The steering planned already (`plans`), with `sources` encoded from the plans' texts: a server
                plans when a request arrives, so that a bad entry is refused before it is queued.

        Raises:
            UserError: a steering entry that cannot be met (translate/steering.py names it).
        """
        settings = settings or self.decode
        if plans is None and (steering is not None or sources is None):  # (ids given alone: validation, unplanned)
            plans, sources = self.plans(texts, steering or [self.steering] * len(texts), settings), None
        if plans is not None:
            texts = [p.text for p in plans]
        if sources is None:
            sources = self.encode(texts, first_line=first_line)
        results: list[Translation] = [EMPTY] * len(texts)
        lengths = _lengths(texts, sources)
        for chunk in _length_batches(lengths, settings.batch_size):
            batch = [sources[i] for i in chunk]
            steered = None if plans is None else [plans[i] for i in chunk]
            if steered is not None and not any(p.steers for p in steered):
                steered = None  # nothing to constrain, place or report: the plain search
            constraints = None if steered is None else [p.constraints for p in steered]
            align = evidence or (steered is not None and any(p.kept for p in steered))
            with torch.inference_mode():
                encoded = self.model.encode_for_decoding(self.source_batch(batch), need_weights=attention)
                found = search(
                    self.model,
                    encoded,
                    settings,
                    n_best=n_best,
                    decoder=self.decoder,
                    constraints=constraints,
                    starts=self.start_batch(batch),
                )
                translations = [self._translation(hypotheses) for hypotheses in found]
                extras = self._explain(chunk, texts, batch, encoded, found, translations, settings, attention, align)
            for b, (i, translation, (maps, proof)) in enumerate(zip(chunk, translations, extras, strict=True)):
                results[i] = replace(translation, attention=maps, evidence=proof)
                if steered is not None:
                    results[i] = self._finish(results[i], found[b], steered[b], evidence)
        if plans is not None:  # texts the model reads nothing of: only their kept spans
            for i, (result, p) in enumerate(zip(results, plans, strict=True)):
                if lengths[i] is None and p.kept:  # e.g. "🐶🐶 🚲"
                    results[i] = self._finish(result, [], p, evidence)
        return results

    def plans(
        self, texts: Sequence[str], steering: Sequence[Steering | None], settings: DecodeConfig | None = None
    ) -> list[Plan]:
        """Each text as the model will read it and the constraints of its search (translate/steering.py).

        Raises:
            UserError: a steering entry that cannot be met, or not one steering per text.
        """
        if len(steering) != len(texts):
            raise UserError(f"one steering per text: got {len(steering)} for {len(texts)} texts")
        cap = (settings or self.decode).max_len or self.model.config.max_len - 1
        limit = min(cap, self.model.config.max_len - 1)
        joiners = self._continuations() if any(s is not None for s in steering) else None
        return [
            plan(text, s, self.tokenizer, readable=self._readable, max_tokens=limit, continuations=joiners)
            for text, s in zip(texts, steering, strict=True)
        ]

    def _continuations(self) -> torch.Tensor:
        """(V,) True on the target ids that continue a word (decode/constraints.py): pieces without sentencepiece's
        leading "▁" other than closing punctuation ("Haus" + "es", "Jonas" + "-Shirt"; not "Haus" + "."), the
        special tokens excepted. Built once."""
        if self._joiners is None:
            pieces = self.tokenizer.target_pieces(range(self.model.config.tgt_vocab_size))
            c = self.model.config
            specials = {c.pad_id, c.bos_id, c.eos_id, self.tokenizer.unk_id}
            joins = [
                i not in specials and not piece.startswith("▁") and piece[:1] not in WORD_ENDS
                for i, piece in enumerate(pieces)
            ]
            self._joiners = torch.tensor(joins, dtype=torch.bool, device=self.device)
        return self._joiners

    def _readable(self, char: str) -> bool:
        """Is `char` in the source vocabulary (encoded without an unknown piece)? Cached: a text asks per char."""
        known = self._known_chars.get(char)
        if known is None:
            if len(self._known_chars) >= KNOWN_CHARS:  # a server fed every code point keeps a bounded cache
                self._known_chars.clear()
            known = self._known_chars[char] = self.tokenizer.unk_id not in self.tokenizer.encode_source_pieces(char)[0]
        return known

    def _finish(self, result: Translation, found: list[Hypothesis], plan_: Plan, evidence: bool) -> Translation:
        """A steered translation in the user's terms (translate/steering.py's `finish`); its alternatives too, their
        kept spans placed without an alignment of their own (at the ends)."""
        spans = found[0].constraints if found else ()
        text, reports, proof = finish(plan_, result.text, result.tokens, spans, result.evidence, self.tokenizer)
        others = tuple(
            self._finish(replace(a, evidence=None), [h], plan_, False)
            for a, h in zip(result.alternatives, found[1:], strict=True)
        )
        return replace(
            result, text=text, constraints=reports, evidence=proof if evidence else None, alternatives=others
        )

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
        source: Source | None = None,
        steering: Steering | None = None,
    ) -> Trace:
        """Translate `text` as `translations` does and return the search step by step (decode/trace.py): every
        step's open hypotheses with their `top_k` likeliest next tokens, the candidates kept, finished and
        pruned, the finished list and the cross-attention rows; and the encoder's self-attention. `source`: the
        text's ids from `encode`, when the caller has them (of the plan's text, with `steering`). With `steering`
        (translate/steering.py) the search is the steered one, each open hypothesis telling which constraints it
        met; the trace's translation is the model's own words (the kept spans not put back).

        Raises:
            ValueError: `text` is empty.
        """
        if not text.strip():
            raise ValueError("cannot trace the translation of an empty text")
        settings = settings or self.decode
        [plan_] = self.plans([text], [steering], settings)
        source = self.encode([plan_.text])[0] if source is None else source
        if source is None:
            raise UserError("nothing of this text is translated: it is all kept as written")
        recorder = SearchRecorder(top_k=top_k, length_penalty=settings.length_penalty, eos_id=self.tokenizer.eos_id)
        constraints = [plan_.constraints] if plan_.steers else None
        with torch.inference_mode():  # the encoder's self-attention from the search's own encoder pass
            encoded = self.model.encode_for_decoding(self.source_batch([source]), need_weights=True)
            found = search(
                self.model,
                encoded,
                settings,
                recorder=recorder,
                decoder=self.decoder,
                constraints=constraints,
                starts=self.start_batch([source]),
            )
            best = found[0][0]
        encoder = torch.stack([layer[0] for layer in encoded.encoder_attention]).float().cpu()  # (L, H, S, S)
        text_out = self.tokenizer.decode_target(best.tokens)
        return Trace(text_out, self._source_pieces(source), encoder, recorder.steps)

    def encode(self, texts: Sequence[str], *, first_line: int = 1) -> list[Source | None]:
        """Each text tokenised once, its ids cut to the model's `max_len - 1` positions (with a warning naming the
        line); None for an empty or all-whitespace text, which is never decoded.

        Raises:
            UserError: a multilingual model, with no pair chosen (`for_pair`).
        """
        if self.start_id is None:
            served = ", ".join(direction_name(d) for d in self.directions) or ", ".join(self.tokenizer.languages)
            raise UserError(f"this model translates several directions ({served}): choose one (--source, --target)")
        max_len, sources = self.model.config.max_len, []
        for i, text in enumerate(texts):
            if not text.strip():
                sources.append(None)
                continue
            ids, pieces = self.tokenizer.encode_source_pieces(text)
            sources.append(Source(fit_source(ids, model_max_len=max_len, line=first_line + i), pieces, self.start_id))
        return sources

    def batches(self, texts: Sequence[str], sources: Sequence[Source | None], batch_size: int) -> list[list[int]]:
        """The indices of `texts` (with their `sources` from `encode`) in the batches `translations` decodes, in
        its order (empty texts in none).

        Translating some of these batches with the others' sources set to None decodes exactly those batches
        again (the sort is stable and every batch but the last is full): several processes can share the
        work, and each sentence is computed as one process would compute it (train/distributed.py).
        """
        return _length_batches(_lengths(texts, sources), batch_size)

    def _translation(self, hypotheses: list[Hypothesis]) -> Translation:
        """A search's hypotheses, best first, as one `Translation` carrying the others as alternatives."""
        decode = self.tokenizer.decode_target
        best, *others = (Translation(decode(h.tokens), h.tokens, h.score, h.log_prob) for h in hypotheses)
        return replace(best, alternatives=tuple(others))

    def source_batch(self, sources: Sequence[Source]) -> torch.Tensor:
        """Right-padded source ids (B, S) on the model's device, each sentence ending with EOS."""
        width = max(len(source.ids) for source in sources) + 1
        pad_id, eos_id = self.model.config.pad_id, self.tokenizer.eos_id
        rows = [[*source.ids, eos_id] + [pad_id] * (width - 1 - len(source.ids)) for source in sources]
        return torch.tensor(rows, device=self.device)

    def start_batch(self, sources: Sequence[Source]) -> torch.Tensor:
        """(B,) each source's first decoder input (BOS, or its target language's tag) on the model's device."""
        return torch.tensor([source.start for source in sources], device=self.device)

    def _explain(
        self,
        chunk: list[int],
        texts: Sequence[str],
        sources: list[Source],
        encoded: EncodedSource,
        found: list[list[Hypothesis]],
        translations: list[Translation],
        settings: DecodeConfig,
        attention: bool,
        evidence: bool,
    ) -> list[tuple[TokenAttention | None, Evidence | None]]:
        """The attention maps and the evidence of one batch's best translations (`chunk`: their indices in
        `texts`), from one teacher-forced pass over them on the search's `encoded` sources: through every layer
        when the maps are wanted, else only through the aligning layer (translate/evidence.py)."""
        if not (attention or evidence):
            return [(None, None)] * len(chunk)
        outputs = [hypotheses[0] for hypotheses in found]
        aligning = alignment_layer_index(settings.alignment_layer, self.model.config.n_decoder_layers)
        layers = None if attention else aligning + 1
        starts = [source.start for source in sources]
        weights = teacher_forced_attention(
            self.model, encoded, [h.tokens for h in outputs], starts=starts, layers=layers
        )
        proofs: list[Evidence | None] = [None] * len(chunk)
        if evidence:
            sentences = [
                Sentence(
                    source_text=texts[i],
                    source_ids=source.ids,
                    source_pieces=source.pieces,
                    output_text=translation.text,
                    output_ids=hypothesis.tokens,
                    output_pieces=self.tokenizer.target_pieces(hypothesis.tokens),
                    ended=hypothesis.ended,
                    token_log_probs=hypothesis.token_log_probs,
                )
                for i, source, translation, hypothesis in zip(chunk, sources, translations, outputs, strict=True)
            ]
            proofs = gather_evidence(sentences, weights[aligning][1], settings)
        if not attention:
            return [(None, proof) for proof in proofs]
        maps = [
            self._token_attention(b, source, hypothesis.tokens, encoded, weights)
            for b, (source, hypothesis) in enumerate(zip(sources, outputs, strict=True))
        ]
        return list(zip(maps, proofs, strict=True))

    def _token_attention(
        self,
        b: int,
        source: Source,
        output: list[int],
        encoded: EncodedSource,
        weights: list[tuple[torch.Tensor, torch.Tensor]],
    ) -> TokenAttention:
        """Sentence b's maps, cut from the batch's weights to its own source (with EOS) and decoder input (BOS and
        the output): what a forward pass over that sentence alone gives."""
        s, t = len(source.ids) + 1, len(output) + 1
        maps = AttentionMaps(
            encoder=[layer[b : b + 1, :, :s, :s] for layer in encoded.encoder_attention],
            decoder_self=[self_w[b : b + 1, :, :t, :t] for self_w, _ in weights],
            cross=[cross[b : b + 1, :, :t, :s] for _, cross in weights],
        )
        pieces = self.tokenizer.target_pieces([source.start, *output])
        return TokenAttention(self._source_pieces(source), pieces, maps)

    def _source_pieces(self, source: Source) -> list[str]:
        """The pieces of the source ids `encode` kept, and EOS: the labels of attention over the source."""
        return source.pieces[: len(source.ids)] + self.tokenizer.target_pieces([self.tokenizer.eos_id])


def _lengths(texts: Sequence[str], sources: Sequence[Source | None]) -> list[int | None]:
    """Each source's length, None for a text that is not decoded (empty, or blanked with a None source)."""
    return [len(s.ids) if s is not None and text.strip() else None for text, s in zip(texts, sources, strict=True)]


def _length_batches(lengths: Sequence[int | None], batch_size: int) -> list[list[int]]:
    """Indices of the sources by their lengths (None: an empty text, in no batch), longest first,
    `batch_size` per batch."""
    order = sorted((i for i, n in enumerate(lengths) if n is not None), key=lambda i: -lengths[i])
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
