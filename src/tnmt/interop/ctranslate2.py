"""Export a tnmt checkpoint to CTranslate2, and translate text with the exported model.

CTranslate2 runs encoder-decoder Transformers with optimised CPU kernels and optional int8 weights.
Its `TransformerSpec` declares the weights of the same model tnmt builds, so export sets each one
from the tnmt module of the same role (`ENCODER_LAYER`, `DECODER_LAYER`). The position vectors are
written out as an explicit table, so the paper's interleaved sinusoids, MarianMT's [sin | cos] and
learned positions all export exactly; post-norm or pre-norm (with its final LayerNorms), the
activation, a final logits bias and shared or separate embeddings map onto spec options.

An exported directory holds CTranslate2's model.bin, config.json and vocabulary files (pieces by id),
plus tnmt's tokenizer files and `tnmt_model.json` (the ModelConfig, the checkpoint's DecodeConfig and
languages, as `checkpoint.write_model_json` writes them), built in a hidden directory and renamed into
place (`io.atomic_directory`). `CTranslate2Translator` therefore tokenises exactly like tnmt and follows
the rules of `tnmt.decode.rules`: the same source truncation, per-sentence length limits and banned ids.
Greedy search then gives tnmt's ids, and so does beam search with length_penalty 0
(tests/test_ctranslate2.py): like tnmt, CTranslate2 keeps the 2K best candidates, finishes the EOS ones
among the best K, and stops a sentence once its best candidate ends. With alpha > 0 it differs:
CTranslate2 ranks by log P / |Y|^alpha (EOS not counted) where tnmt uses the GNMT penalty
((5 + |Y|) / 6)^alpha, and it stops after K finished hypotheses.
"""

import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from tnmt.checkpoint import load_checkpoint, read_model_json, write_model_json
from tnmt.config import DecodeConfig
from tnmt.data.tokenizer import Tokenizer
from tnmt.decode.hypothesis import Hypothesis
from tnmt.decode.rules import banned_ids, fit_source, output_limits
from tnmt.errors import UserError
from tnmt.interop import require
from tnmt.io import atomic_directory, check_destination
from tnmt.model import Transformer
from tnmt.translate.prepared import Planner
from tnmt.translate.reading import Reader
from tnmt.translate.steering import Steering
from tnmt.translate.translation import EMPTY, Translation

MODEL_FILE = "tnmt_model.json"  # the ModelConfig and DecodeConfig, beside CTranslate2's own config.json
AN_EXPORT = "a CTranslate2 export of tnmt"  # what `export_ctranslate2` replaces, in its refusal of anything else

# CTranslate2 spec attribute in every layer  <- tnmt module; "q"/"kv" = those rows of the stacked in_proj
ENCODER_LAYER = (
    ("self_attention.linear.0", "self_attn.in_proj", None),  # fused [W_Q; W_K; W_V]
    ("self_attention.linear.1", "self_attn.out_proj", None),
    ("self_attention.layer_norm", "attn_block.norm", None),
    ("ffn.linear_0", "ffn.linear1", None),
    ("ffn.linear_1", "ffn.linear2", None),
    ("ffn.layer_norm", "ffn_block.norm", None),
)
DECODER_LAYER = (
    ("self_attention.linear.0", "self_attn.in_proj", None),
    ("self_attention.linear.1", "self_attn.out_proj", None),
    ("self_attention.layer_norm", "self_block.norm", None),
    ("attention.linear.0", "cross_attn.in_proj", "q"),  # queries from the decoder states
    ("attention.linear.1", "cross_attn.in_proj", "kv"),  # keys and values from the encoder memory
    ("attention.linear.2", "cross_attn.out_proj", None),
    ("attention.layer_norm", "cross_block.norm", None),
    ("ffn.linear_0", "ffn.linear1", None),
    ("ffn.linear_1", "ffn.linear2", None),
    ("ffn.layer_norm", "ffn_block.norm", None),
)


def export_ctranslate2(
    checkpoint: str | os.PathLike[str], out: str | os.PathLike[str], *, quantization: str | None = None
) -> Path:
    """Write a CTranslate2 model of a tnmt checkpoint, with vocabularies and tokenizer, to `out`.

    Args:
        checkpoint: A tnmt checkpoint directory.
        out: Directory to write; an earlier export there is replaced, anything else refused.
        quantization: CTranslate2 weight type ("int8", "int16", "float16" ...); None keeps float32.

    Raises:
        UserError: ctranslate2 is not installed, the checkpoint is unreadable or multilingual, or `out` holds
            something other than an export (refused before the checkpoint is read).
    """
    ct2 = require("ctranslate2", purpose="exporting to CTranslate2")
    check_destination(out, is_own=is_export, what=AN_EXPORT)
    loaded = load_checkpoint(checkpoint)
    if loaded.tokenizer.languages:  # its decoder starts from a tag per sentence: not what the engine here runs
        raise UserError(
            f"{checkpoint}: a multilingual checkpoint ({len(loaded.directions)} directions) is not exported: "
            "the CTranslate2 engine of tnmt translates one language pair"
        )
    spec = _spec(loaded.model, ct2.specs)
    source, target = _vocabularies(loaded.tokenizer)
    spec.register_source_vocabulary(source)
    spec.register_target_vocabulary(target)
    c, tok = loaded.model.config, loaded.tokenizer
    spec.config.unk_token, spec.config.eos_token = target[tok.unk_id], target[tok.eos_id]
    spec.config.bos_token = spec.config.decoder_start_token = target[tok.bos_id]
    spec.config.add_source_eos = True  # tnmt's sources end with EOS; raw CTranslate2 users get it too
    spec.config.layer_norm_epsilon = c.layer_norm_eps
    try:
        spec.validate()
        spec.optimize(quantization=quantization)
    except ValueError as err:
        raise UserError(f"cannot export {checkpoint}: {err}") from None
    with atomic_directory(out, is_own=is_export, what=AN_EXPORT) as tmp:
        spec.save(str(tmp))
        tok.save(tmp)
        write_model_json(tmp / MODEL_FILE, c, loaded.decode, loaded.directions)
    return Path(out)


def is_export(path: Path) -> bool:
    """Whether `path` holds what `export_ctranslate2` writes: CTranslate2's model.bin and tnmt's description."""
    return (path / "model.bin").is_file() and (path / MODEL_FILE).is_file()


def _spec(model: Transformer, specs: Any) -> Any:
    """The `TransformerSpec` of a tnmt model, every weight set."""
    c = model.config
    activation = {"relu": "RELU", "gelu": "GELU", "swish": "SWISH"}[c.activation]
    spec = specs.TransformerSpec.from_config(
        (c.n_encoder_layers, c.n_decoder_layers),
        c.n_heads,
        pre_norm=c.norm_first,  # pre-norm also adds the final LayerNorms tnmt has then
        activation=getattr(specs.Activation, activation),
    )
    positions = model.positions.table if model.positions.learned is None else model.positions.learned.weight
    for side in (spec.encoder, spec.decoder):
        side.scale_embeddings = math.sqrt(c.d_model) if c.scale_embeddings else 1.0
        side.position_encodings.encodings = _array(positions)  # (max_len, D), position 0 first
    spec.encoder.embeddings[0].weight = _array(model.src_embed.weight)
    spec.decoder.embeddings.weight = _array(model.tgt_embed.weight)
    if c.norm_first:
        _set(spec.encoder.layer_norm, model.encoder_norm)
        _set(spec.decoder.layer_norm, model.decoder_norm)
    for layer_specs, layers, table in (
        (spec.encoder.layer, model.encoder_layers, ENCODER_LAYER),
        (spec.decoder.layer, model.decoder_layers, DECODER_LAYER),
    ):
        for layer_spec, layer in zip(layer_specs, layers, strict=True):
            for spec_path, module_path, rows in table:
                _set(_attribute(layer_spec, spec_path), layer.get_submodule(module_path), rows)
    spec.decoder.projection.weight = _array(model.output.weight)
    if model.logits_bias is not None:
        spec.decoder.projection.bias = _array(model.logits_bias)
    return spec


def _set(spec: Any, module: nn.Module, rows: str | None = None) -> None:
    """Copy a Linear (optionally its Q or K/V rows) or a LayerNorm into a LinearSpec / LayerNormSpec."""
    if isinstance(module, nn.LayerNorm):
        spec.gamma, spec.beta = _array(module.weight), _array(module.bias)
        return
    d = module.in_features
    part = {None: slice(None), "q": slice(0, d), "kv": slice(d, None)}[rows]
    spec.weight = _array(module.weight[part])
    spec.bias = _array(module.bias[part])


def _attribute(spec: Any, path: str) -> Any:
    for name in path.split("."):
        spec = spec[int(name)] if name.isdigit() else getattr(spec, name)
    return spec


def _array(tensor: Tensor) -> Any:
    return tensor.detach().float().cpu().contiguous().numpy()


def _vocabularies(tokenizer: Tokenizer) -> tuple[list[str], list[str]]:
    """Source and target pieces by id, as CTranslate2 maps pieces to embedding rows."""
    return tokenizer.source_vocabulary(), tokenizer.target_pieces(range(tokenizer.vocab_size))


class CTranslate2Translator:
    """Text in, text out with an exported model: tnmt's tokenizer around `ctranslate2.Translator`.

    It answers as `tnmt.translate.translator.Translator` does (`translate`, `translations`, `decode`), so a file,
    a benchmark or a server can use either engine.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        decode: DecodeConfig | None = None,
        *,
        compute_type: str = "default",
        threads: int = 0,
    ) -> None:
        """Load a directory written by `export_ctranslate2`; `decode` (default: the one stored there) is every
        call's default settings. `threads` is CTranslate2's `intra_threads`, the OpenMP threads that run a batch
        (0: OMP_NUM_THREADS if set, else min(4, CPUs)); batches run one at a time (`inter_threads` 1), so that,
        as with tnmt's engine and `torch.set_num_threads`, the process decodes on `threads` threads.

        Raises:
            UserError: ctranslate2 is not installed, or `path` is not an export.
        """
        ct2 = require("ctranslate2", purpose="translating with CTranslate2")
        path = Path(path)
        if not is_export(path):
            raise UserError(f"{path}: not a CTranslate2 export; write one with `tnmt export ctranslate2`")
        self.config, stored, directions = read_model_json(path / MODEL_FILE)
        self.source_language = directions[0][0] if directions else "en"  # the sentence splitter's rules
        self.decode = decode or stored
        self.tokenizer = Tokenizer.load(path)
        self.translator = ct2.Translator(
            str(path), device="cpu", compute_type=compute_type, inter_threads=1, intra_threads=threads
        )
        self.source_pieces, self.target_pieces = _vocabularies(self.tokenizer)
        planner = Planner(self.tokenizer, target_vocab_size=self.config.tgt_vocab_size, device=torch.device("cpu"))
        self.reader = Reader(self.tokenizer, planner, max_len=self.config.max_len)
        self._target_ids = {piece: i for i, piece in enumerate(self.target_pieces)}
        self._suppressed = [[self.target_pieces[i]] for i in banned_ids(self.config)]

    def translate(
        self, texts: Sequence[str], settings: DecodeConfig | None = None, *, first_line: int = 1
    ) -> list[str]:
        """The translation of each text, in input order; empty texts give empty lines (as `Translator.translate`)."""
        return [translation.text for translation in self.translations(texts, settings, first_line=first_line)]

    def translations(
        self, texts: Sequence[str], settings: DecodeConfig | None = None, *, first_line: int = 1
    ) -> list[Translation]:
        """The `Translation` of each text, in input order; a blank text as it was. Each text is read as
        `Translator.split` reads it (translate/reading.py: cut into lines and sentences, unless `settings.segment`
        is false, each segment tokenised once) and joined back. `first_line` numbers the texts in warnings."""
        settings = settings or self.decode
        as_written = [Steering(keep_unreadable=False)] * len(texts)  # the export reads all of a text: none kept aside
        bos, language = self.tokenizer.bos_id, self.source_language
        split = self.reader.split(texts, as_written, settings, start=bos, language=language, first_line=first_line)
        read = [i for i, p in enumerate(split.prepared) if p.source is not None]
        results = [EMPTY] * len(split.prepared)
        found = self.search([split.prepared[i].source.ids for i in read], settings)
        for i, hypothesis in zip(read, found, strict=True):
            text = self.tokenizer.decode_target(hypothesis.tokens)
            results[i] = Translation(text, hypothesis.tokens, hypothesis.score, hypothesis.log_prob)
        return split.joined(results)

    def translate_ids(
        self, sources: Sequence[Sequence[int]], settings: DecodeConfig | None = None, *, lines: Sequence[int] = ()
    ) -> list[list[int]]:
        """Output ids (no BOS/EOS) for source ids without EOS; see `search`."""
        return [hypothesis.tokens for hypothesis in self.search(sources, settings, lines=lines)]

    def search(
        self, sources: Sequence[Sequence[int]], settings: DecodeConfig | None = None, *, lines: Sequence[int] = ()
    ) -> list[Hypothesis]:
        """The best hypothesis for each source (ids without EOS); `lines` numbers them in warnings (default 1, 2, ...).

        CTranslate2 scores a hypothesis by log P / |Y|^alpha with |Y| its words (EOS not counted), so the
        log-probability is that score times |Y|^alpha. Its steps are normalised over the tokens that may be
        generated (the banned ones are masked before the softmax; tnmt masks after it), so where a model gives
        pad or BOS some probability these log-probabilities are a little higher than tnmt's.
        """
        settings = settings or self.decode
        if not sources:
            return []
        max_len = self.config.max_len
        pieces = [
            [self.source_pieces[i] for i in fit_source(ids, model_max_len=max_len, line=line)]
            for line, ids in zip(lines or range(1, len(sources) + 1), sources, strict=True)
        ]
        lengths = torch.tensor([len(p) + 1 for p in pieces])  # EOS counted, as tnmt counts it
        limits = output_limits(lengths, model_max_len=max_len, decode=settings).tolist()
        by_limit: dict[int, list[int]] = {}  # CTranslate2 has one length limit per call
        for i, limit in enumerate(limits):
            by_limit.setdefault(limit, []).append(i)
        outputs: list[Hypothesis] = [Hypothesis([], 0.0, 0.0)] * len(sources)
        unk = self.tokenizer.unk_id
        for limit, indices in by_limit.items():
            results = self.translator.translate_batch(
                [pieces[i] for i in indices],
                max_batch_size=settings.batch_size,
                beam_size=settings.beam_size,
                length_penalty=settings.length_penalty,
                max_decoding_length=limit,
                min_decoding_length=settings.min_len,
                max_input_length=0,  # truncated above
                suppress_sequences=self._suppressed or None,
                return_scores=True,
            )
            for i, result in zip(indices, results, strict=True):
                ids = [self._target_ids.get(piece, unk) for piece in result.hypotheses[0]]
                score = float(result.scores[0])
                outputs[i] = Hypothesis(ids, score, score * max(len(ids), 1) ** settings.length_penalty)
        return outputs
