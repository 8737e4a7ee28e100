"""The one door from text to the model: a loaded model bound for decoding, its search and its teacher-forced pass.

Everything a `Translator` asks of the model goes through a `ModelDoor`: `search` is the one caller of the searches
(tnmt.decode), `teacher_forced` the one pass over given outputs (the evidence, attention maps, word replacements,
a look inside). Both read sources as prepared (translate/prepared.py), start each sentence's decoder from its own
start token (BOS, or a multilingual model's target-language tag), and run the decoder that translates: bound to
the model once when its weights are frozen, on copies laid out for the step's products (translate/frozen.py), so
what a feature shows is the pass that translated. A search of a frozen model with a vocabulary shortlist
(data/shortlist.py, `DecodeConfig.shortlist`) projects onto the pieces its batch can lead to; the
teacher-forced pass projects onto the whole vocabulary, so the evidence weighs each output against every piece.
"""

from collections.abc import Sequence
from typing import NamedTuple

import torch

from tnmt.blocks.record import Recorder
from tnmt.config import DecodeConfig
from tnmt.data.shortlist import Shortlist
from tnmt.decode.constraints import Constraints
from tnmt.decode.hypothesis import Hypothesis
from tnmt.decode.search import search
from tnmt.decode.trace import SearchRecorder
from tnmt.model import BoundDecoder, EncodedSource, Transformer
from tnmt.translate.frozen import OutputProjection, ShortlistProjection, transposed_linear
from tnmt.translate.prepared import Source
from tnmt.translate.quantize import quantize_int8

QUANTIZE = ("none", "int8")


class ForcedPass(NamedTuple):
    """One decoder pass over given outputs (`ModelDoor.teacher_forced`)."""

    encoded: EncodedSource
    fed: torch.Tensor  # (B, T) each sentence's start token, its output, padding
    logits: torch.Tensor | None  # (B, T, V); None when the pass stopped at a middle layer
    weights: list[tuple[torch.Tensor, torch.Tensor]] | None  # per layer: self (B, H, T, T), cross (B, H, T, S)


class ModelDoor:
    """A model (put in eval mode) bound for decoding; see the module docstring."""

    def __init__(
        self,
        model: Transformer,
        *,
        eos_id: int,
        quantize: str = "none",
        frozen: bool = False,
        shortlist: Shortlist | None = None,
    ) -> None:
        """`quantize="int8"` quantises the model now (translate/quantize.py): a copy of its own, so frozen too.
        `frozen=True` promises that the model's weights do not change while the door is used (its owner loaded
        them): the decoder is then bound once, on copies of its weights laid out for the products, and a
        `shortlist` (the checkpoint's) lets a search project onto its candidates (a door that is not frozen
        ignores it: its copies would go stale)."""
        if quantize not in QUANTIZE:
            raise ValueError(f"quantize must be one of {QUANTIZE}, got {quantize!r}")
        self.device = next(model.parameters()).device
        if quantize == "int8" and self.device.type != "cpu":
            raise ValueError(f"quantize='int8' runs on the CPU only, not on {self.device}")
        self.model = quantize_int8(model) if quantize == "int8" else model.eval()
        self.eos_id = eos_id
        self.frozen = frozen or quantize == "int8"
        usable = self.frozen and OutputProjection.usable(self.model)
        self._projection = OutputProjection(self.model) if usable else None
        self.decoder = self.bind() if self.frozen else None  # else bound per search, as the weights may change
        self.shortlist = shortlist if self.frozen else None
        output = self.model.output  # (V, D): a Linear layer, or int8's, whose float weights the shortlist copies
        self._output_weight = output.weight if isinstance(output.weight, torch.Tensor) else output.weight().dequantize()

    def bind(self, record: Recorder | None = None) -> BoundDecoder:
        """The decoder as this door runs it (`Transformer.incremental_decoder`): on the frozen weights' copies
        when it owns them; with `record`, its layers report what flows through them (blocks/record.py)."""
        if not self.frozen:
            return self.model.incremental_decoder(record=record)
        return self.model.incremental_decoder(project=self._projection, linear=transposed_linear, record=record)

    def encode(self, sources: Sequence[Source], *, need_weights: bool = False) -> EncodedSource:
        """The sources encoded once for every pass over them (`search`'s and `teacher_forced`'s `encoded`), with
        the encoder's self-attention when `need_weights`."""
        with torch.inference_mode():
            return self.model.encode_for_decoding(self.source_batch(sources), need_weights=need_weights)

    def search(
        self,
        sources: Sequence[Source],
        settings: DecodeConfig,
        *,
        n_best: int = 1,
        constraints: Sequence[Constraints] | None = None,
        recorder: SearchRecorder | None = None,
        encoder_attention: bool = False,
        encoded: EncodedSource | None = None,
    ) -> tuple[EncodedSource, list[list[Hypothesis]]]:
        """Search from each source's start token (tnmt.decode.search), under each one's `constraints` if given, on
        `encoded` (the sources encoded already, row k source k: `encode`, or rows of it) or the sources encoded now
        (with the encoder's self-attention for a `recorder` or `encoder_attention`)."""
        if encoded is None:
            encoded = self.encode(sources, need_weights=encoder_attention or recorder is not None)
        with torch.inference_mode():
            found = search(
                self.model,
                encoded,
                settings,
                n_best=n_best,
                decoder=self._search_decoder(sources, settings, constraints),
                constraints=constraints,
                starts=torch.tensor([s.start for s in sources], device=self.device),
                recorder=recorder,
            )
        return encoded, found

    def _search_decoder(
        self, sources: Sequence[Source], settings: DecodeConfig, constraints: Sequence[Constraints] | None
    ) -> BoundDecoder | None:
        """The decoder a search of `sources` runs: with the shortlist's projection onto their candidates (EOS and
        every id the constraints may write among them) when it is on and narrows the vocabulary."""
        if self.shortlist is None or not settings.shortlist:
            return self.decoder
        named = {self.eos_id}
        for c in constraints or ():
            named.update(c.prefix)
            named.update(i for forms in c.required for form in forms for i in form)
        ids = torch.tensor([i for source in sources for i in source.ids], dtype=torch.long, device=self.device)
        candidates = self.shortlist.candidates(ids, named)
        if candidates is None:
            return self.decoder
        return self.decoder._replace(
            project=ShortlistProjection(self._output_weight, self.model.logits_bias, candidates)
        )

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
        """One pass of the decoder over each output after its source's start token (right-padded to T), on a
        fresh KV cache over `encoded` (a search's, so the encoder does not run again; default: the sources encoded
        now): the body of a search's step, all T positions at once. `layers` stops after that many decoder layers
        (the aligning one: no logits then); `weights` returns every layer's attention (and the encoder's, when it
        encodes); `record` has the blocks report what flows through them."""
        pad = self.model.config.pad_id
        width = max(len(ids) for ids in outputs) + 1
        rows = [[s.start, *ids] + [pad] * (width - 1 - len(ids)) for s, ids in zip(sources, outputs, strict=True)]
        with torch.inference_mode():
            if encoded is None:
                src = self.source_batch(sources)
                encoded = self.model.encode_for_decoding(src, need_weights=weights, record=record)
            fed = torch.tensor(rows, device=self.device)  # (B, T)
            decoder = self.decoder if record is None and self.decoder is not None else self.bind(record)
            features, found = decoder.features(fed, encoded.cache(width), need_weights=weights, layers=layers)
            logits = None if layers is not None else decoder.project(features).view(*fed.shape, -1)
        return ForcedPass(encoded, fed, logits, found if weights else None)

    def source_batch(self, sources: Sequence[Source]) -> torch.Tensor:
        """Right-padded source ids (B, S) on the model's device, each sentence ending with EOS."""
        width = max(len(source.ids) for source in sources) + 1
        pad_id = self.model.config.pad_id
        rows = [[*source.ids, self.eos_id] + [pad_id] * (width - 1 - len(source.ids)) for source in sources]
        return torch.tensor(rows, device=self.device)
