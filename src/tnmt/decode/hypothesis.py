"""What a search returns: a `Hypothesis`, and the length penalty that ranks hypotheses of different lengths.

Both searches (greedy.py, beam.py) and the CTranslate2 engine return hypotheses, so whatever follows a search
(the `Translator`, the evidence, the server) never asks which one ran.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Hypothesis:
    """A finished output of a search.

    `tokens` are its ids without BOS and EOS; `log_prob` sums their log-probabilities, EOS's included when it
    was generated; `score` is log_prob / lp(length), the ranking key (`scored`). `ended` tells whether the search wrote
    EOS (False: it stopped at the length limit). `token_log_probs` holds each token's log-probability, EOS's
    last when it ended, as the search computed them (empty from an engine that does not report them).
    `constraints` tells, per required phrase of its sentence (decode/constraints.py), the token positions
    [start, end) of the form that met it, None for one not met.
    """

    tokens: list[int]
    score: float
    log_prob: float
    ended: bool = True
    token_log_probs: tuple[float, ...] = ()
    constraints: tuple[tuple[int, int] | None, ...] = ()

    @classmethod
    def scored(
        cls,
        tokens: list[int],
        log_prob: float,
        *,
        ended: bool,
        alpha: float,
        token_log_probs: tuple[float, ...] = (),
        constraints: tuple[tuple[int, int] | None, ...] = (),
    ) -> "Hypothesis":
        """A finished hypothesis with its score, log_prob / lp(|Y|), |Y| counting its tokens and EOS when it ended:
        the one rule by which every search ranks what it finishes."""
        score = log_prob / gnmt_length_penalty(len(tokens) + int(ended), alpha)
        return cls(tokens, score, log_prob, ended, token_log_probs, constraints)

    @property
    def met(self) -> int:
        """How many of its sentence's required phrases it meets."""
        return sum(span is not None for span in self.constraints)


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """GNMT's lp(|Y|) = ((5 + |Y|) / 6) ** alpha (Wu et al., 2016), |Y| counting the words and EOS if generated;
    alpha = 0 ranks by plain log-probability."""
    return ((5 + length) / 6) ** alpha
