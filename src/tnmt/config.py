"""Configuration as frozen dataclasses, validated on construction: the one place every default is written.

`Architecture` is the Transformer's shape (a recipe's [model] table) and `ModelConfig` adds what the
tokenizer decides (vocabulary sizes, special ids); `PRESETS` holds the paper's Table 3 rows as data.
`DataConfig`, `TrainConfig` and `DecodeConfig` are a recipe's other tables. Every invalid value raises a
ValueError naming the field, so a typo in a TOML file or a CLI override fails before any tensor exists;
`parse` builds any of them from plain TOML/JSON values with strict types.
"""

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal, TypeVar, get_args, get_origin

from tnmt.errors import UserError

T = TypeVar("T")

# Training settings inside the architecture: a run started from a checkpoint may change them (train/start.py).
DROPOUT_RATES = ("dropout", "attention_dropout", "activation_dropout")
# torch.set_num_threads takes a C int, and a pool far beyond the cores only thrashes.
MAX_THREADS = 1024
# Longer waits are typos; past threading.TIMEOUT_MAX (~292 years) a wait overflows in the thread that waits.
DAY_S = 86_400.0
SENTENCEPIECE_INT = 2**31 - 1
LANGUAGE_CODE = "a language code such as 'en'"  # what `is_language_code` accepts, in its refusals


@dataclass(frozen=True)
class Architecture:
    """The Transformer's shape and options. Defaults: the paper's base model (Table 3, section 3).

    The paper also shares the source and target embeddings (one joint BPE vocabulary); that needs equal
    vocabularies, so `share_embeddings` is off unless asked for (the presets ask for it).
    """

    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1  # P_drop: sub-layer outputs and embedding sums (section 5.4)
    attention_dropout: float = 0.0  # on attention weights; not in the paper
    activation_dropout: float = 0.0  # inside the FFN; not in the paper
    max_len: int = 256  # longest sequence the positional encoding covers
    positional: Literal["sinusoidal", "learned"] = "sinusoidal"  # "learned": Table 3, row E
    positional_layout: Literal["interleaved", "concat"] = "interleaved"  # paper: interleaved; concat: [sin | cos]
    norm_first: bool = False  # False = post-norm as in the paper; True = pre-norm + final LayerNorms
    activation: Literal["relu", "gelu", "swish"] = "relu"  # gelu and swish exist for MarianMT interop
    share_embeddings: bool = False  # one matrix for source and target embeddings (needs equal vocabularies)
    tie_output: bool = True  # the pre-softmax projection reuses the target embedding (section 3.4)
    scale_embeddings: bool = True  # multiply embeddings by sqrt(d_model) (section 3.4)
    layer_norm_eps: float = 1e-5
    final_logits_bias: bool = False  # a bias on the output logits (MarianMT has one)

    def __post_init__(self) -> None:
        _check_literals(self)
        _check_finite(self)
        for name in ("d_model", "n_heads", "d_ff", "max_len"):
            _check(self, name, _is_int(getattr(self, name)) and getattr(self, name) > 0, "a positive integer")
        for name in ("n_encoder_layers", "n_decoder_layers"):
            _check(self, name, _is_int(getattr(self, name)) and getattr(self, name) >= 0, "an integer >= 0")
        _check(self, "d_model", self.d_model % self.n_heads == 0, f"divisible by n_heads={self.n_heads}")
        for name in DROPOUT_RATES:
            value = getattr(self, name)
            _check(self, name, isinstance(value, int | float) and 0.0 <= value < 1.0, "in [0, 1)")
        _check(self, "layer_norm_eps", self.layer_norm_eps > 0, "positive")
        if self.positional == "sinusoidal":
            _check(self, "d_model", self.d_model % 2 == 0, "even for sinusoidal positions")


@dataclass(frozen=True, kw_only=True)
class ModelConfig(Architecture):
    """An `Architecture` plus what its tokenizer decides: vocabulary sizes and special ids.

    A bare `ModelConfig(src_vocab_size=..., tgt_vocab_size=...)` is the paper's base model with a tied
    output projection; `from_preset` (or `base` / `big` / `small`) also shares the embeddings when the
    vocabularies are equal.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    pad_id: int = 0
    bos_id: int = 1  # the decoder-start token
    eos_id: int = 2
    # A multilingual model's target-language tags (tnmt/directions.py): the decoder starts from the tag of the
    # language it is to write, in place of bos_id; like bos_id, never an output. () for a one-pair model.
    language_ids: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("src_vocab_size", "tgt_vocab_size"):
            _check(self, name, _is_int(getattr(self, name)) and getattr(self, name) > 0, "a positive integer")
        for name in ("pad_id", "bos_id", "eos_id"):
            value = getattr(self, name)
            ok = _is_int(value) and 0 <= value < min(self.src_vocab_size, self.tgt_vocab_size)
            _check(self, name, ok, "a token id inside both vocabularies")
        in_target = all(_is_int(i) and 0 <= i < self.tgt_vocab_size for i in self.language_ids)
        _check(self, "language_ids", in_target, "token ids inside the target vocabulary")
        if self.share_embeddings:
            ok = self.src_vocab_size == self.tgt_vocab_size
            _check(self, "share_embeddings", ok, "used only with src_vocab_size == tgt_vocab_size")

    @classmethod
    def from_preset(cls, name: str, *, src_vocab_size: int, tgt_vocab_size: int, **overrides: Any) -> "ModelConfig":
        """A row of `PRESETS` with `overrides`; embeddings are shared only if the vocabulary sizes are equal."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; presets: {sorted(PRESETS)}")
        architecture = replace(PRESETS[name], **overrides)
        if src_vocab_size != tgt_vocab_size and "share_embeddings" not in overrides:
            architecture = replace(architecture, share_embeddings=False)
        return cls(**asdict(architecture), src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size)

    @classmethod
    def base(cls, *, src_vocab_size: int, tgt_vocab_size: int, **overrides: Any) -> "ModelConfig":
        """Transformer (base) of Table 3."""
        return cls.from_preset("base", src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **overrides)

    @classmethod
    def big(cls, *, src_vocab_size: int, tgt_vocab_size: int, **overrides: Any) -> "ModelConfig":
        """Transformer (big) of Table 3."""
        return cls.from_preset("big", src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **overrides)

    @classmethod
    def small(cls, *, src_vocab_size: int, tgt_vocab_size: int, **overrides: Any) -> "ModelConfig":
        """Sized for a 2-core CPU and a 30k-sentence corpus (not in the paper)."""
        return cls.from_preset("small", src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **overrides)

    def replace(self, **changes: Any) -> "ModelConfig":
        return replace(self, **changes)


@dataclass(frozen=True)
class DataConfig:
    """Where the parallel text comes from and how it becomes subword ids."""

    corpus: Literal["multi30k", "files"] = "multi30k"  # found or downloaded, or the paths below
    src_lang: str = "en"
    tgt_lang: str = "de"
    train_src: str = ""  # plain or .gz text, one sentence per line ("files" corpus)
    train_tgt: str = ""
    valid_src: str = ""
    valid_tgt: str = ""
    vocab_size: int = 8000  # sentencepiece pieces: of the joint vocabulary, or of each language's
    # One model learnt on both languages (the paper's shared vocabulary; the embeddings can be shared), or
    # false: one per language, numbered independently, which needs [model] share_embeddings = false.
    joint_vocabulary: bool = True
    tokenizer_model: Literal["unigram", "bpe"] = "unigram"  # sentencepiece model type
    max_tokens_per_sentence: int = 100  # longer training pairs are dropped (after subword encoding)
    # Subword regularisation (Kudo, 2018): epoch e trains on the (e mod N)-th of N sampled segmentations of the
    # training corpus, prepared once (data/prepare.py); validation and decoding keep the best one. 0 = off.
    subword_samples: int = 0
    subword_alpha: float = 0.1  # a segmentation is drawn with probability ~ P^alpha: smaller strays further
    subword_nbest: int = 64  # drawn among the n most likely segmentations (Kudo's best setting: 64, alpha 0.1)
    normalize_whitespace: bool = True  # collapse runs of spaces and strip line ends
    max_train_pairs: int = 0  # 0 = all; a positive number keeps the first N (quick runs, tests)
    max_valid_pairs: int = 0
    tokenizer_sample: int = 100_000  # random training pairs whose both sides train the tokenizer; 0 = all
    prepare_workers: int = 0  # processes encoding the training corpus; 0 = one per CPU core
    prepared_dir: str = ""  # where the encoded training corpus goes; "" = <train.out_dir>/prepared
    # One model for several languages (tnmt/directions.py): a multi-way corpus of every language listed (Multi30k's,
    # or "files" named by a pattern with {lang}: train_src = "train.{lang}.gz", train_tgt unset), and the
    # directions trained, such as "en-de" ([] = every ordered pair). src_lang and tgt_lang are not used then.
    languages: tuple[str, ...] = ()
    directions: tuple[str, ...] = ()
    # Direction d is sampled in proportion to pairs_d^(1/T) per epoch (Arivazhagan et al., 2019): 1 = as the
    # corpus has them, larger evens out unequal directions (Multi30k's are equal: every T gives the same).
    direction_temperature: float = 1.0
    # Bidirectional training (Ding et al., 2021): with several directions listed, from this share of the training
    # budget (its minutes, else its updates, else its epochs) on, only the first direction is trained: the others
    # pre-trained the model on the same pairs the other way round. The switch comes at the first epoch start past
    # the share, and validation (which picks `best`) reads the first direction only. 0 = off.
    first_direction_from: float = 0.0
    # Terms the model learns to place (data/annotate.py): this share of the training pairs gets 1-2 of its source
    # words followed, between two marker tokens, by the target words the corpus's alignment links them to, so a
    # model given a glossary term that way at inference (translate/steering.py) writes and inflects it. 0 = off.
    term_annotations: float = 0.0

    @property
    def multilingual(self) -> bool:
        return bool(self.languages)

    @property
    def trained_directions(self) -> list[tuple[str, str]]:
        """The (source, target) pairs trained: the listed directions (every pair when none is), or the one pair."""
        from tnmt.directions import directions_of  # here: numpy, which `tnmt --help` need not import

        return directions_of(self.languages, self.directions) if self.multilingual else [(self.src_lang, self.tgt_lang)]

    def __post_init__(self) -> None:
        _check_literals(self)
        _check_finite(self)
        for name in ("src_lang", "tgt_lang"):  # they name the corpus files and the served language pair
            _check(self, name, is_language_code(getattr(self, name)), LANGUAGE_CODE)
        _check(self, "direction_temperature", self.direction_temperature > 0, "positive")
        _check(self, "first_direction_from", 0 <= self.first_direction_from < 1, "in [0, 1)")
        if self.first_direction_from:
            _check(self, "first_direction_from", len(self.directions) >= 2, "0 unless `directions` lists two or more")
        _check(self, "term_annotations", 0 <= self.term_annotations <= 1, "in [0, 1]")
        if self.term_annotations:  # target words in the source: one vocabulary, and one segmentation to annotate
            _check(self, "term_annotations", self.joint_vocabulary, "0 without a joint vocabulary")
            _check(self, "term_annotations", not self.subword_samples, "0 with subword samples")
            _check(self, "term_annotations", not self.languages, "0 for a multilingual corpus")
        if self.languages or self.directions:
            self._check_multilingual()
        _check(self, "vocab_size", self.vocab_size >= 16, ">= 16")
        _check(self, "max_tokens_per_sentence", self.max_tokens_per_sentence > 0, "positive")
        _check(self, "subword_alpha", self.subword_alpha > 0, "positive")
        _check(self, "subword_nbest", self.subword_nbest >= 2, ">= 2")
        for name in ("vocab_size", "subword_nbest"):  # sentencepiece takes them as C ints
            _check(self, name, getattr(self, name) <= SENTENCEPIECE_INT, f"<= {SENTENCEPIECE_INT}")
        # each sample is one more copy of the encoded corpus, all prepared before training starts
        _check(self, "subword_samples", self.subword_samples <= 1000, "<= 1000")
        if self.subword_samples:
            _check(self, "tokenizer_model", self.tokenizer_model == "unigram", "unigram for subword samples")
        for name in ("max_train_pairs", "max_valid_pairs", "tokenizer_sample", "prepare_workers", "subword_samples"):
            _check(self, name, getattr(self, name) >= 0, ">= 0")
        if self.corpus == "files" and not self.languages:
            for name in ("train_src", "train_tgt", "valid_src", "valid_tgt"):
                _check(self, name, bool(getattr(self, name)), "set when corpus = 'files'")

    def _check_multilingual(self) -> None:
        from tnmt.directions import parse_direction  # here: directions.py reads no config

        languages = self.languages
        ok = len(languages) >= 2 and len(set(languages)) == len(languages)
        _check(self, "languages", ok and all(map(is_language_code, languages)), "two or more distinct language codes")
        for text in self.directions:
            try:
                source, target = parse_direction(text)
            except ValueError as err:
                raise ValueError(f"DataConfig.directions: {err}") from None
            _check(self, "directions", {source, target} <= set(languages), f"pairs of languages = {list(languages)}")
        _check(self, "directions", len(set(self.directions)) == len(self.directions), "listed once each")
        _check(self, "joint_vocabulary", self.joint_vocabulary, "true for several languages (one vocabulary)")
        if self.corpus == "files":
            for name in ("train_src", "valid_src"):
                _check(self, name, "{lang}" in getattr(self, name), "a pattern with {lang} for several languages")
            for name in ("train_tgt", "valid_tgt"):
                _check(self, name, not getattr(self, name), "unset for several languages (train_src names them)")


@dataclass(frozen=True)
class TrainConfig:
    """The training loop's settings. Defaults: the paper's (section 5) where it has one."""

    out_dir: str = "outputs/run"
    init_from: str = ""  # a checkpoint to start from (fine-tuning): its model and tokenizer, the recipe's dropout rates
    seed: int = 1
    max_steps: int = 100_000  # optimizer updates (the paper's base model: 100k); 0 = no limit
    max_epochs: int = 0
    max_minutes: float = 0.0  # wall-clock budget, validation included; 0 = none
    max_tokens: int = 4096  # tokens per batch (padded, source or target, whichever is longer)
    accum_steps: int = 1  # gradient accumulation: batches per optimizer update
    lr_factor: float = 1.0  # lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (Eq. 3: 1)
    warmup_steps: int = 4000
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    label_smoothing: float = 0.1  # epsilon_ls (section 5.4)
    rdrop_alpha: float = 0.0  # R-Drop: each batch passes twice, + alpha x the passes' symmetric KL (loss.py); 0 = off
    # Guided alignment (Garg et al., 2019): head 1 of the decoder layer [decode] alignment_layer learns eflomal's word
    # alignments of the training corpus (aligned when it is prepared); the weight of that cross-entropy. 0 = off.
    guided_alignment: float = 0.0
    clip_norm: float = 0.0  # gradient-norm clipping (not in the paper); 0 = none
    weight_decay: float = 0.0  # decoupled (AdamW) decay of matrices and embeddings (not in the paper); 0 = none
    ema_decay: float = 0.0  # validate, save and translate an EMA of the weights (train/ema.py); 0 = off, e.g. 0.999
    # Self-distillation (train/distill.py): at the first epoch start from this update on, the model translates the
    # training sources and training goes on over the original pairs plus (source, translation) pairs. 0 = off.
    distill_at_step: int = 0
    # Data diversification (Nguyen et al., 2020) in a bidirectional run (data.first_direction_from): when the run
    # narrows to its first direction, the model, trained both ways, translates that direction's training sources
    # forward and its targets backward, and the first direction trains on the union of the original pairs and both
    # translated sets, duplicates dropped (train/distill.py). One model is both the forward and the backward one.
    diversify: bool = False
    device: Literal["auto", "cpu", "cuda"] = "auto"  # auto: CUDA when PyTorch sees a GPU (see device.py)
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "fp32"  # autocast; auto: bf16 where faster (device.py)
    activation_checkpointing: bool = False  # recompute each layer's activations in backward: less memory, ~30% slower
    # torch.compile the layers of training forward passes (train/compiled.py): fused kernels; auto: on CUDA only
    compile: Literal["off", "auto", "on"] = "off"
    collective_timeout_s: float = 1800.0  # torchrun: a rank waiting longer on the others fails (covers validation)
    eval_every: int = 0  # validate every N updates; 0 = at the end of every epoch
    eval_beam_size: int = 0  # beam size of validation decoding; 0 = [decode] beam_size (1 is ~4x cheaper)
    best_metric: Literal["bleu", "chrf"] = "bleu"  # validation metric that picks `best`, drives early stopping
    patience: int = 0  # stop after N validations without a better best_metric; 0 = never
    keep_checkpoints: int = 5  # step checkpoints kept on disk (for averaging); best/last are kept too
    # The model's weights alone (no optimizer) at updates N, 2N, 4N, ... in OUT/snapshots, for `tnmt replay` (how
    # the model learned): log2(max_steps / N) + 1 of them, 10 MB each for the Multi30k recipe. 0 = none.
    snapshots_from: int = 25
    average_last: int = 0  # at the end, average the last N step checkpoints into OUT/averaged (section 6.1); 0 = no
    log_every: int = 50  # updates between metric log lines
    threads: int = 0  # torch threads; 0 = PyTorch's default

    def __post_init__(self) -> None:
        _check_literals(self)
        _check_finite(self)
        counts = ("max_steps", "max_epochs", "eval_every", "eval_beam_size", "patience", "threads", "average_last")
        for name in (*counts, "distill_at_step", "snapshots_from"):
            _check(self, name, getattr(self, name) >= 0, ">= 0")
        for name in ("max_tokens", "accum_steps", "warmup_steps", "keep_checkpoints", "log_every"):
            _check(self, name, getattr(self, name) > 0, "positive")
        _check(self, "label_smoothing", 0.0 <= self.label_smoothing < 1.0, "in [0, 1)")
        _check(self, "rdrop_alpha", self.rdrop_alpha >= 0, ">= 0")
        _check(self, "guided_alignment", self.guided_alignment >= 0, ">= 0")
        _check(self, "lr_factor", self.lr_factor > 0, "positive")
        _check(self, "clip_norm", self.clip_norm >= 0, ">= 0")
        _check(self, "weight_decay", self.weight_decay >= 0, ">= 0")
        _check(self, "ema_decay", 0.0 <= self.ema_decay < 1.0, "in [0, 1)")
        _check(self, "max_minutes", self.max_minutes >= 0, ">= 0")
        _check(self, "collective_timeout_s", self.collective_timeout_s > 0, "positive")
        _check(self, "collective_timeout_s", self.collective_timeout_s <= DAY_S, f"<= {DAY_S:.0f} (a day)")
        _check(self, "out_dir", bool(self.out_dir.strip()), "a directory")
        _check(
            self, "average_last", self.average_last <= self.keep_checkpoints, "<= keep_checkpoints (kept to average)"
        )
        betas_ok = len(self.adam_betas) == 2 and all(0 <= b < 1 for b in self.adam_betas)
        _check(self, "adam_betas", betas_ok, "two numbers in [0, 1)")
        _check(self, "adam_eps", self.adam_eps >= 0, ">= 0")
        _check(self, "threads", self.threads <= MAX_THREADS, f"<= {MAX_THREADS}")
        ends = self.max_steps or self.max_epochs or self.max_minutes
        _check(self, "max_steps", ends, "set, or max_epochs or max_minutes set, so that training ends")


def _help(text: str) -> dict[str, str]:
    return {"help": text}


@dataclass(frozen=True)
class DecodeConfig:
    """How translations are searched for: used by validation, stored in every checkpoint, and the default of
    `Translator`, `CTranslate2Translator` and `tnmt translate` (whose flags are these fields)."""

    beam_size: int = field(default=4, metadata=_help("beams per sentence; 1 = greedy (the paper: 4, section 6.1)"))
    length_penalty: float = field(default=0.6, metadata=_help("alpha of the GNMT penalty ((5 + |Y|) / 6)^alpha"))
    max_len: int = field(default=0, metadata=_help("absolute cap on output tokens; 0 = none"))
    max_len_a: float = field(default=1.0, metadata=_help("output cap = a * source length + b (the paper: + 50)"))
    max_len_b: int = field(default=50, metadata=_help("see max_len_a"))
    min_len: int = field(default=0, metadata=_help("output tokens before EOS is allowed"))
    block_loops: bool = field(
        default=True, metadata=_help("never repeat an n-gram (n <= 4) a third time in a row, unless the source does")
    )
    batch_size: int = field(default=64, metadata=_help("sentences decoded together"))
    shortlist: bool = field(
        default=False,
        metadata=_help("project onto the pieces the sources can lead to (the checkpoint's vocabulary shortlist)"),
    )
    segment: bool = field(
        default=True,
        metadata=_help("split each text into sentences and lines, translate them, join them back; false = as given"),
    )
    # Word alignment from cross-attention (translate/evidence.py); the defaults were chosen on validation.
    # Layers count from 1 at the input side and heads from 1, as everywhere tnmt shows them; a negative layer
    # counts from the top, so the default fits any depth.
    alignment_layer: int = field(
        default=-2, metadata=_help("decoder layer whose cross-attention aligns words: 1 = the first, -1 = the last")
    )
    alignment_head: int = field(
        default=0, metadata=_help("head of that layer that aligns words (1 = the first); 0 = their mean")
    )
    alignment_shift: bool = field(
        default=False, metadata=_help("align a target word by the step that reads it, not the one that writes it")
    )

    # Bounds of (output tokens + 1) / (source tokens + 1) past which a translation is flagged "length_ratio";
    # `tnmt train` learns them from the prepared corpus when the recipe leaves them 0.
    length_ratio_min: float = field(default=0.0, metadata=_help("flag outputs shorter than this ratio; 0 = none"))
    length_ratio_max: float = field(default=0.0, metadata=_help("flag outputs longer than this ratio; 0 = none"))

    def __post_init__(self) -> None:
        for name in ("length_ratio_min", "length_ratio_max"):
            value = getattr(self, name)
            _check(self, name, math.isfinite(value) and value >= 0, "a finite number >= 0")
        for name in ("block_loops", "shortlist", "segment"):
            _check(self, name, isinstance(getattr(self, name), bool), "true or false")
        layer_ok = _is_int(self.alignment_layer) and self.alignment_layer != 0
        _check(self, "alignment_layer", layer_ok, "a layer number (1 = the first, -1 = the last), not 0")
        head_ok = _is_int(self.alignment_head) and self.alignment_head >= 0
        _check(self, "alignment_head", head_ok, "a head number (1 = the first) or 0 (the heads' mean)")
        for name in ("beam_size", "batch_size"):
            _check(self, name, _is_int(getattr(self, name)) and getattr(self, name) >= 1, ">= 1")
        for name in ("max_len", "max_len_b", "min_len"):
            _check(self, name, _is_int(getattr(self, name)) and getattr(self, name) >= 0, ">= 0")
        _check(self, "length_penalty", math.isfinite(self.length_penalty), "a finite number")
        # ((5 + |Y|) / 6) ** alpha overflows a float (or underflows to 0) far past any alpha anyone uses
        _check(self, "length_penalty", abs(self.length_penalty) <= 10, "from -10 to 10 (the paper: 0.6)")
        _check(self, "max_len_a", math.isfinite(self.max_len_a) and self.max_len_a >= 0, "a finite number >= 0")


@dataclass(frozen=True)
class ServeConfig:
    """`tnmt serve`: where it listens, how it batches, and the limits that protect it (all on by default)."""

    host: str = field(default="127.0.0.1", metadata=_help("address to bind; 0.0.0.0 exposes the server to the network"))
    port: int = field(default=8000, metadata=_help("TCP port"))
    max_chars: int = field(default=10_000, metadata=_help("characters per text: about four pages (over: 413)"))
    max_texts: int = field(default=64, metadata=_help("texts per request (over: 413)"))
    max_body_bytes: int = field(default=1_000_000, metadata=_help("request body size (over: 413)"))
    max_file_bytes: int = field(
        default=10_000_000, metadata=_help("a document's request body (/v1/translate_file, /translate_file; over: 413)")
    )
    file_ttl_s: float = field(
        default=600.0, metadata=_help("seconds a translated file waits for its download (/translate_file)")
    )
    max_beam_size: int = field(default=8, metadata=_help("largest beam a request may ask for (over: 422)"))
    max_n_best: int = field(default=8, metadata=_help("most alternatives a request may ask for (over: 422)"))
    max_trace_chars: int = field(
        default=200, metadata=_help("characters of the sentence /v1/explain and /v1/inspect record (over: 413)")
    )
    segment: bool = field(
        default=True,
        metadata=_help("split texts into sentences and lines (false: as given; a request's `segment` chooses)"),
    )
    max_trace_beam: int = field(default=4, metadata=_help("largest beam /v1/explain traces (over: 422)"))
    max_top_k: int = field(default=10, metadata=_help("most next tokens per hypothesis in a trace (over: 422)"))
    max_glossary: int = field(
        default=256, metadata=_help("glossary, do-not-translate, constraint and avoid entries per request (over: 413)")
    )
    max_queue: int = field(default=1024, metadata=_help("sentences waiting per model (full: 503 + Retry-After)"))
    max_batch_tokens: int = field(default=4096, metadata=_help("source tokens decoded together at most"))
    max_run_tokens: int = field(
        default=128,
        metadata=_help(
            "source tokens of a long text (a document) decoded per turn: a shorter turn lets other requests in sooner"
        ),
    )
    max_wait_ms: float = field(default=5.0, metadata=_help("how long a batch waits for more sentences"))
    zero_shot: bool = field(
        default=False, metadata=_help("also serve the pairs a multilingual model was not trained on (zero-shot)")
    )
    timeout_s: float = field(default=30.0, metadata=_help("a request's deadline (past it: 504)"))
    timeout_per_segment_s: float = field(
        default=0.1, metadata=_help("a document's deadline grows by this per segment (sentence) it holds")
    )
    ready_timeout_s: float = field(default=10.0, metadata=_help("deadline of the /ready probe translation"))
    body_timeout_s: float = field(
        default=10.0, metadata=_help("time a client has to send its request body (past: 408)")
    )
    threads: int = field(
        default=0,
        metadata=_help(
            "CPU threads that decode; 0 = PyTorch's default: OMP_NUM_THREADS if set, else one per physical core"
        ),
    )
    mmap_threshold_mb: int = field(
        default=16,
        metadata=_help("glibc's mmap threshold, fixed so RSS stays flat (tnmt/serve/allocator.py); 0 = glibc's own"),
    )
    batching: bool = field(
        default=True, metadata=_help("batch sentences across requests (false: one request = one batch)")
    )

    def __post_init__(self) -> None:
        _check(self, "host", bool(self.host.strip()), "an address or host name (0.0.0.0: every interface)")
        _check(self, "port", _is_int(self.port) and 0 <= self.port <= 65535, "from 0 to 65535 (0: a free port)")
        _check(self, "threads", _is_int(self.threads) and 0 <= self.threads <= MAX_THREADS, f"from 0 to {MAX_THREADS}")
        limits = ("max_chars", "max_texts", "max_body_bytes", "max_file_bytes", "max_beam_size", "max_n_best")
        for name in (*limits, "max_queue", "max_trace_chars", "max_trace_beam", "max_top_k", "max_glossary"):
            _check(self, name, _is_int(getattr(self, name)) and getattr(self, name) >= 1, ">= 1")
        for name in ("max_batch_tokens", "max_run_tokens"):
            _check(self, name, _is_int(getattr(self, name)) and getattr(self, name) >= 1, ">= 1")
        threshold = self.mmap_threshold_mb
        _check(self, "mmap_threshold_mb", _is_int(threshold) and 0 <= threshold <= 32, "from 0 to 32 (glibc's most)")
        _check(self, "max_wait_ms", 0 <= self.max_wait_ms <= DAY_S * 1000, f"from 0 to {DAY_S * 1000:.0f} (a day)")
        for name in ("timeout_s", "ready_timeout_s", "body_timeout_s", "file_ttl_s"):  # 0: every request 504 (408)
            _check(self, name, 0 < getattr(self, name) <= DAY_S, f"over 0 and at most {DAY_S:.0f} (a day)")
        _check(self, "timeout_per_segment_s", 0 <= self.timeout_per_segment_s <= 60, "from 0 to 60")


def parse(cls: type[T], values: Mapping[str, Any], *, where: str) -> T:
    """Build the config dataclass `cls` from plain TOML/JSON values with strict types (pydantic's JSON mode:
    no "3" for 3, no 1 for true, lists for tuples), so a wrong value never becomes a silently different one.

    Raises:
        UserError: an unknown key (listing the valid ones), a wrong type or an invalid value, naming `where`.
    """
    types = {f.name: f.type for f in fields(cls)}
    if unknown := sorted(set(values) - set(types)):
        listed = repr(unknown[0]) if len(unknown) == 1 else unknown
        raise UserError(f"{where}: unknown key {listed}; valid keys: {sorted(types)}")
    if (plain := _plain(cls, values, types)) is not None:
        return plain
    from pydantic import TypeAdapter, ValidationError  # here: `tnmt --help` must not pay for pydantic

    try:
        return TypeAdapter(cls).validate_json(json.dumps(dict(values), default=str), strict=True)
    except ValidationError as e:
        error = e.errors(include_url=False)[0]
        if error["loc"] and error["loc"][0] in types and error["loc"][0] not in values:
            raise UserError(f"{where}: {error['loc'][0]} is missing") from None
        if error["loc"] and error["loc"][0] in types:
            key = error["loc"][0]
            raise UserError(f"{where} {key} = {values[key]!r}: expected {_type_name(types[key])}") from None
        raise UserError(f"{where}: {error['msg'].removeprefix('Value error, ')}") from None


def _plain(cls: type[T], values: Mapping[str, Any], types: dict[str, Any]) -> T | None:
    """`cls(**values)` when every value is a JSON scalar of exactly its field's type (what tnmt writes into
    config.json), else None: pydantic then checks them and words the error. Why: importing pydantic costs
    0.25-0.3 s, a tenth of translating a test set from the command line (benchmarks/speed/translate_wall.py)."""
    converted = {}
    for key, value in values.items():
        annotation = types[key]
        if annotation is float and type(value) in (int, float):
            converted[key] = float(value)  # JSON has one number type; pydantic's strict JSON mode allows this too
        elif annotation == tuple[int, ...] and type(value) is list and all(type(v) is int for v in value):
            converted[key] = tuple(value)  # ModelConfig.language_ids, in every config.json
        elif _exactly(value, annotation):
            converted[key] = value
        else:
            return None
    try:
        return cls(**converted)
    except (TypeError, ValueError):  # a missing key or a value out of range: pydantic says which, as always
        return None


def _exactly(value: Any, annotation: Any) -> bool:
    """Whether `value` is an int, bool or str of exactly that type (True is no int), or one of a Literal's strings."""
    if get_origin(annotation) is Literal:
        return type(value) is str and value in get_args(annotation)
    return annotation in (int, bool, str) and type(value) is annotation


def _type_name(annotation: Any) -> str:
    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(repr(a) for a in get_args(annotation))
    return getattr(annotation, "__name__", str(annotation))


def is_language_code(value: Any) -> bool:
    """Whether `value` can name a language: a recipe's, a checkpoint's or an import's. Any non-blank string
    ("en", "pt_BR", "xx" of one's own): tnmt keeps no list of codes, so a model can serve any language."""
    return isinstance(value, str) and bool(value.strip())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_literals(config: object) -> None:
    for f in fields(config):
        if get_origin(f.type) is Literal:
            _check(config, f.name, getattr(config, f.name) in get_args(f.type), _type_name(f.type))


def _check_finite(config: object) -> None:
    """NaN and infinity are refused in every float setting: none means "no limit" (0 does), and an infinite
    learning rate, weight decay or timeout turns into NaN weights or an overflow far from where it was set."""
    for f in fields(config):
        if f.type is float:
            _check(config, f.name, math.isfinite(getattr(config, f.name)), "a finite number")


def _check(config: object, field_name: str, ok: bool, requirement: str) -> None:
    if not ok:
        value = getattr(config, field_name)
        raise ValueError(f"{type(config).__name__}.{field_name} = {value!r}: must be {requirement}")


PRESETS: dict[str, Architecture] = {
    # Table 3: base 6+6 layers, d_model 512, 8 heads, d_ff 2048, P_drop 0.1; big d_model 1024, 16 heads, 0.3.
    "base": Architecture(share_embeddings=True),
    "big": Architecture(d_model=1024, n_heads=16, d_ff=4096, dropout=0.3, share_embeddings=True),
    # small (not in the paper): sized for a 2-core CPU and a 30k-sentence corpus.
    "small": Architecture(
        d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024, share_embeddings=True
    ),
}
