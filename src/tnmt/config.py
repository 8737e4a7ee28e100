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
        return cls.base(
            src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size, **{**small, **overrides}
        )

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


def _check(config: object, field_name: str, ok: bool, requirement: str) -> None:
    if not ok:
        value = getattr(config, field_name)
        raise ValueError(f"{type(config).__name__}.{field_name} = {value!r}: must be {requirement}")
