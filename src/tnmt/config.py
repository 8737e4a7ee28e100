"""Configuration as frozen dataclasses, validated on construction.

`ModelConfig` describes the architecture; its presets are the paper's Table 3 rows as data. Every
invalid value raises a ValueError that names the field, so a typo in a TOML file or a CLI override
fails before any tensor is allocated.
"""

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

POSITIONAL = ("sinusoidal", "learned")
POSITIONAL_LAYOUTS = ("interleaved", "concat")
ACTIVATIONS = ("relu", "gelu", "swish")


@dataclass(frozen=True)
class ModelConfig:
    """The Transformer's hyper-parameters (defaults: the paper's base model, Table 3)."""

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1  # P_drop: sub-layer outputs and embedding sums (section 5.4)
    attention_dropout: float = 0.0  # on attention weights; not in the paper
    activation_dropout: float = 0.0  # inside the FFN; not in the paper
    max_len: int = 256  # longest sequence the positional encoding covers
    pad_id: int = 0
    bos_id: int = 1  # the decoder-start token
    eos_id: int = 2
    positional: str = "sinusoidal"  # or "learned" (Table 3, row E)
    positional_layout: str = "interleaved"  # paper: sin/cos interleaved; "concat" = [sin | cos] (Marian)
    norm_first: bool = False  # False = post-norm as in the paper; True = pre-norm + final LayerNorms
    activation: str = "relu"  # "gelu" and "swish" exist for MarianMT interop
    share_embeddings: bool = False  # one matrix for source and target embeddings (needs equal vocabs)
    tie_output: bool = False  # the pre-softmax projection reuses the target embedding (section 3.4)
    scale_embeddings: bool = True  # multiply embeddings by sqrt(d_model) (section 3.4)
    layer_norm_eps: float = 1e-5
    final_logits_bias: bool = False  # a bias on the output logits (MarianMT has one)

    def __post_init__(self) -> None:
        for name in ("src_vocab_size", "tgt_vocab_size", "d_model", "n_heads", "d_ff", "max_len"):
            _check(
                self,
                name,
                isinstance(getattr(self, name), int) and getattr(self, name) > 0,
                "a positive integer",
            )
        for name in ("n_encoder_layers", "n_decoder_layers"):
            _check(
                self,
                name,
                isinstance(getattr(self, name), int) and getattr(self, name) >= 0,
                "an integer >= 0",
            )
        _check(self, "d_model", self.d_model % self.n_heads == 0, f"divisible by n_heads={self.n_heads}")
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            value = getattr(self, name)
            _check(self, name, isinstance(value, int | float) and 0.0 <= value < 1.0, "in [0, 1)")
        for name in ("pad_id", "bos_id", "eos_id"):
            value = getattr(self, name)
            ok = isinstance(value, int) and 0 <= value < min(self.src_vocab_size, self.tgt_vocab_size)
            _check(self, name, ok, "a token id inside both vocabularies")
        _check(self, "positional", self.positional in POSITIONAL, f"one of {POSITIONAL}")
        _check(
            self,
            "positional_layout",
            self.positional_layout in POSITIONAL_LAYOUTS,
            f"one of {POSITIONAL_LAYOUTS}",
        )
        _check(self, "activation", self.activation in ACTIVATIONS, f"one of {ACTIVATIONS}")
        _check(self, "layer_norm_eps", self.layer_norm_eps > 0, "positive")
        if self.positional == "sinusoidal":
            _check(self, "d_model", self.d_model % 2 == 0, "even for sinusoidal positions")
        if self.share_embeddings:
            _check(
                self,
                "share_embeddings",
                self.src_vocab_size == self.tgt_vocab_size,
                "used only with src_vocab_size == tgt_vocab_size",
            )

    @classmethod
    def base(cls, *, src_vocab_size: int, tgt_vocab_size: int, **overrides: Any) -> "ModelConfig":
        """Transformer (base) of Table 3: 6+6 layers, d_model 512, 8 heads, d_ff 2048, P_drop 0.1."""
        shared = src_vocab_size == tgt_vocab_size
        defaults = dict(share_embeddings=shared, tie_output=True)
        return cls(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **{**defaults, **overrides})

    @classmethod
    def big(cls, *, src_vocab_size: int, tgt_vocab_size: int, **overrides: Any) -> "ModelConfig":
        """Transformer (big) of Table 3: d_model 1024, 16 heads, d_ff 4096, P_drop 0.3."""
        big = dict(d_model=1024, n_heads=16, d_ff=4096, dropout=0.3)
        return cls.base(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **{**big, **overrides})

    @classmethod
    def small(cls, *, src_vocab_size: int, tgt_vocab_size: int, **overrides: Any) -> "ModelConfig":
        """Sized for a 2-core CPU and a 30k-sentence corpus: 3+3 layers, d_model 256, 4 heads, d_ff 1024."""
        small = dict(d_model=256, n_heads=4, n_encoder_layers=3, n_decoder_layers=3, d_ff=1024, dropout=0.1)
        return cls.base(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **{**small, **overrides})

    def replace(self, **changes: Any) -> "ModelConfig":
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ModelConfig":
        """Build from a plain dict (config.json, TOML); unknown keys are an error listing the valid ones."""
        valid = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - valid)
        if unknown:
            raise ValueError(f"unknown ModelConfig field(s) {unknown}; valid fields: {sorted(valid)}")
        return cls(**data)


@dataclass(frozen=True)
class DataConfig:
    """Where the parallel text comes from and how it becomes subword ids."""

    corpus: str = "multi30k"  # "multi30k" (found or downloaded) or "files" (the paths below)
    src_lang: str = "en"
    tgt_lang: str = "de"
    train_src: str = ""  # plain or .gz text, one sentence per line ("files" corpus)
    train_tgt: str = ""
    valid_src: str = ""
    valid_tgt: str = ""
    vocab_size: int = 8000  # joint sentencepiece vocabulary
    tokenizer_model: str = "unigram"  # sentencepiece model type: "unigram" or "bpe"
    max_tokens_per_sentence: int = 100  # longer training pairs are dropped (after subword encoding)
    normalize_whitespace: bool = True  # collapse runs of spaces and strip line ends
    max_train_pairs: int = 0  # 0 = all; a positive number keeps the first N (quick runs, tests)
    max_valid_pairs: int = 0

    def __post_init__(self) -> None:
        _check(self, "corpus", self.corpus in ("multi30k", "files"), "'multi30k' or 'files'")
        _check(self, "vocab_size", self.vocab_size >= 16, ">= 16")
        _check(self, "tokenizer_model", self.tokenizer_model in ("unigram", "bpe"), "'unigram' or 'bpe'")
        _check(self, "max_tokens_per_sentence", self.max_tokens_per_sentence > 0, "positive")
        if self.corpus == "files":
            for name in ("train_src", "train_tgt", "valid_src", "valid_tgt"):
                _check(self, name, bool(getattr(self, name)), "set when corpus = 'files'")


@dataclass(frozen=True)
class TrainConfig:
    """The training loop's settings (section 5 of the paper where it has one)."""

    out_dir: str = "outputs/run"
    init_from: str = ""  # a checkpoint to start from (fine-tuning): its model and tokenizer are reused
    seed: int = 1
    max_steps: int = 100_000  # optimizer updates (the paper's base model: 100k); 0 = no limit
    max_epochs: int = 0
    max_minutes: float = 0.0  # wall-clock budget; 0 = none
    max_tokens: int = 4096  # tokens per batch (padded, source or target, whichever is longer)
    accum_steps: int = 1  # gradient accumulation: batches per optimizer update
    lr_factor: float = 2.0  # lrate = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5) (Eq. 3)
    warmup_steps: int = 4000
    adam_betas: tuple[float, float] = (0.9, 0.98)
    adam_eps: float = 1e-9
    label_smoothing: float = 0.1  # epsilon_ls (section 5.4)
    clip_norm: float = 1.0  # 0 = no clipping
    bf16: bool = False  # bfloat16 autocast on the CPU
    eval_every: int = 0  # validate every N updates; 0 = at the end of every epoch
    eval_beam_size: int = 1  # validation BLEU decoding (1 = greedy)
    best_metric: str = "bleu"  # validation metric that picks `best` and drives early stopping: "bleu" | "chrf"
    patience: int = 0  # stop after N validations without a better best_metric; 0 = never
    keep_checkpoints: int = 5  # step checkpoints kept on disk (for averaging); best/last are kept too
    log_every: int = 50  # updates between metric log lines
    threads: int = 0  # torch threads; 0 = PyTorch's default

    def __post_init__(self) -> None:
        for name in ("max_steps", "max_epochs", "eval_every", "patience", "threads"):
            _check(self, name, getattr(self, name) >= 0, ">= 0")
        for name in ("max_tokens", "accum_steps", "warmup_steps", "keep_checkpoints", "log_every"):
            _check(self, name, getattr(self, name) > 0, "positive")
        _check(self, "label_smoothing", 0.0 <= self.label_smoothing < 1.0, "in [0, 1)")
        _check(self, "lr_factor", self.lr_factor > 0, "positive")
        _check(self, "eval_beam_size", self.eval_beam_size >= 1, ">= 1")
        _check(self, "best_metric", self.best_metric in ("bleu", "chrf"), '"bleu" or "chrf"')
        _check(self, "max_minutes", self.max_minutes >= 0, ">= 0")
        _check(
            self,
            "adam_betas",
            len(self.adam_betas) == 2 and all(0 <= b < 1 for b in self.adam_betas),
            "two numbers in [0, 1)",
        )
        _check(
            self,
            "max_steps",
            self.max_steps or self.max_epochs or self.max_minutes,
            "set, or max_epochs or max_minutes set, so that training ends",
        )


@dataclass(frozen=True)
class DecodeConfig:
    """Inference settings used for validation BLEU and by default when translating."""

    beam_size: int = 4  # the paper: 4 (section 6.1)
    length_penalty: float = 0.6  # alpha of the GNMT penalty ((5 + len) / 6)^alpha
    max_len_a: float = 1.0  # the output may be a * source length + b tokens long (the paper: + 50)
    max_len_b: int = 50

    def __post_init__(self) -> None:
        _check(self, "beam_size", self.beam_size >= 1, ">= 1")
        _check(self, "max_len_b", self.max_len_b >= 0, ">= 0")


def _check(config: object, field_name: str, ok: bool, requirement: str) -> None:
    if not ok:
        value = getattr(config, field_name)
        raise ValueError(f"{type(config).__name__}.{field_name} = {value!r}: must be {requirement}")
