"""What a translation returns: `Translation`, the type that travels from the search to the HTTP answer."""

from dataclasses import dataclass, field

from tnmt.translate.evidence import Evidence, TokenAttention
from tnmt.translate.steering import ConstraintReport


@dataclass(frozen=True)
class SentenceSpan:
    """One sentence of a translated text (translate/whole.py): its characters [start, end) in the text and in the
    translation, its confidence (the geometric mean of its tokens' probabilities), and the text offsets where it was
    cut into parts because it was longer than the model reads well (translate/segment.py; empty: whole); the
    attention behind it when asked for (a sentence cut into parts has none: each part had its own)."""

    source: tuple[int, int]
    target: tuple[int, int]
    confidence: float
    cuts: tuple[int, ...] = ()
    attention: TokenAttention | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Translation:
    """One source's translation: text, ids (no BOS/EOS), length-penalised score and log-probability.

    `alternatives` holds the next best translations (best first) when an n-best list was asked for,
    `attention` the weights that explain this translation and `evidence` its word alignment, confidence and
    warnings (translate/evidence.py), each when asked for; `constraints` how it met each positive constraint of
    its `Steering` (translate/steering.py); `token_log_probs` each token's log-probability as the search chose it;
    `sentences` where each sentence of a segmented text went (translate/whole.py; empty for one segment as given).
    The server's batcher hands it to the HTTP answer, and the CTranslate2 engine returns it too.
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
    sentences: tuple[SentenceSpan, ...] = field(default=(), compare=False)

    @property
    def nbest(self) -> list["Translation"]:
        """This translation and its alternatives, best first."""
        return [self, *self.alternatives]


EMPTY = Translation(text="", tokens=[], score=0.0, log_prob=0.0, evidence=Evidence([], [], 1.0, []))
