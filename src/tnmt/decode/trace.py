"""Watching the decoder think: what greedy and beam search did at every step, recorded as they did it.

The lesson's last picture is inference: the encoder runs once, the decoder starts from BOS, predicts a
distribution over the vocabulary, feeds its choice back and stops at EOS. A `SearchRecorder` handed to
`greedy_hypotheses` or `beam_search_nbest` (through `search`) is told, at each step, which hypotheses were
open, what each would say next, which candidates the search kept, finished or pruned and why, and where
each hypothesis looked in the source (its cross-attention row). It is the search itself that reports: the
same code translates with or without a recorder, so a trace's translation is the translation, and without
one the searches pay a `None` check per step. The trace's JSON and text are drawn by views/trace.py.

A recorder follows one sentence (a batch of one). Fates and reasons of a candidate:
- "kept": it is one of the hypotheses of the next step (`child` is its index there);
- "finished", "eos": it ends with EOS and joins the finished list;
- "finished", "length limit": the sentence reached its length limit, so its open hypotheses end here;
- "pruned", "beam full": not among the K best (for greedy search, K = 1);
- "pruned", "search done": kept by the step, but the finished hypotheses can no longer be beaten
  (decode/beam.py's stopping rule), so the search ends without it.
"""

import math
from dataclasses import dataclass, field, replace

import torch
from torch import Tensor

from tnmt.decode.hypothesis import Hypothesis, gnmt_length_penalty


@dataclass(frozen=True)
class NextToken:
    """One of the likeliest next tokens of an open hypothesis."""

    token: int
    prob: float


@dataclass(frozen=True)
class OpenHypothesis:
    """A hypothesis the search extends at a step: its ids (no BOS), summed log-probability, the score it
    would have if it ended now (log_prob / lp(length)), and its `top_k` likeliest next tokens."""

    tokens: list[int]
    log_prob: float
    score: float
    top: list[NextToken]
    constraints: tuple[bool, ...] = ()  # per positive constraint of the sentence: met yet?


@dataclass(frozen=True)
class Candidate:
    """An extension of open hypothesis `parent` by `token` (probability `prob` given the parent), with the
    extension's summed log-probability and length-penalised score, and what the search did with it."""

    parent: int
    token: int
    prob: float
    log_prob: float
    score: float
    fate: str  # "kept" | "finished" | "pruned"
    reason: str  # "" | "eos" | "length limit" | "beam full" | "search done"
    child: int | None = None  # kept: its index among the next step's hypotheses


@dataclass
class TraceStep:
    """One decoder step: the open hypotheses, the candidates considered (best first), every hypothesis
    finished so far (best first) and the open hypotheses' cross-attention rows (L, N, H, S)."""

    hypotheses: list[OpenHypothesis]
    candidates: list[Candidate] = field(default_factory=list)
    finished: list[Hypothesis] = field(default_factory=list)
    cross_attention: Tensor | None = None


class SearchRecorder:
    """What a search reports while it runs on one sentence; see the module docstring."""

    def __init__(self, *, top_k: int, length_penalty: float, eos_id: int) -> None:
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        self.top_k, self.alpha, self.eos_id = top_k, length_penalty, eos_id
        self.steps: list[TraceStep] = []
        self._attention: Tensor | None = None  # (L, N, H, S) of the step being decoded
        self._live: list[int] = []  # the search's row of each open hypothesis of the current step
        self._prefix: list[int] = []  # greedy search's one hypothesis
        self._prefix_log_prob = 0.0

    def attention(self, weights: list[tuple[Tensor, Tensor]]) -> None:
        """The attention weights of the step being decoded (`BoundDecoder.step`'s, one new position per row): its
        cross-attention rows are kept, (L, N, H, S), one row per search row."""
        if weights:
            self._attention = torch.stack([cross[:, :, 0] for _, cross in weights]).float().cpu()

    def open(
        self,
        tokens: list[list[int]],
        log_probs: list[float],
        next_log_probs: Tensor,
        *,
        met: list[tuple[tuple[int, int] | None, ...]] | None = None,
    ) -> None:
        """A step starts: the search's rows (ids, summed log-probs; -inf = no live path) and their next-token
        log-probabilities (N, V), banned tokens at -inf; `met`: each row's constraint spans (None: unmet), when
        the sentence has constraints."""
        self._live = [row for row, log_prob in enumerate(log_probs) if log_prob > -math.inf]
        k = min(self.top_k, next_log_probs.size(1))
        values, ids = next_log_probs[self._live].float().topk(k, dim=1)  # (N', k)
        hypotheses = [
            OpenHypothesis(
                tokens[row],
                log_probs[row],
                log_probs[row] / gnmt_length_penalty(len(tokens[row]), self.alpha),
                [NextToken(t, math.exp(v)) for t, v in zip(ids[i].tolist(), values[i].tolist(), strict=True)],
                () if met is None else tuple(span is not None for span in met[row]),
            )
            for i, row in enumerate(self._live)
        ]
        attention = None if self._attention is None else self._attention[:, self._live]
        self.steps.append(TraceStep(hypotheses, cross_attention=attention))

    def greedy_step(self, log_probs: Tensor, token: int, *, at_limit: bool) -> None:
        """Greedy search chose `token` from next-token log-probs (1, V); `at_limit`: the last step allowed."""
        self.open([self._prefix], [self._prefix_log_prob], log_probs)
        step = self.steps[-1]
        others = [t.token for t in step.hypotheses[0].top if t.token != token][: self.top_k - 1]
        for rank, candidate in enumerate([token, *others]):
            log_prob = self._prefix_log_prob + float(log_probs[0, candidate])
            if rank:
                fate, reason = "pruned", "beam full"
            elif candidate == self.eos_id:
                fate, reason = "finished", "eos"
            else:
                fate, reason = ("finished", "length limit") if at_limit else ("kept", "")
            child = 0 if fate == "kept" else None
            step.candidates.append(self._candidate(0, candidate, log_prob, fate, reason, child))
        ended = step.candidates[0].fate == "finished"
        self._prefix_log_prob = step.candidates[0].log_prob
        self._prefix = self._prefix + ([] if token == self.eos_id else [token])
        if ended:
            ended_with_eos = token == self.eos_id
            step.finished = [Hypothesis(self._prefix, step.candidates[0].score, self._prefix_log_prob, ended_with_eos)]

    def beam_step(self, scores: Tensor, beams: Tensor, tokens: Tensor, ended: Tensor, pick: Tensor) -> None:
        """A beam-search step's 2K candidates (best first): their summed log-probs, parent beams and tokens
        (2K,), which finished with EOS (K,) and which became the new beams (K,), in order."""
        step = self.steps[-1]
        finite = [j for j in pick.tolist() if scores[j] > -math.inf]
        children = {j: child for child, j in enumerate(finite)}
        ended_at = set(ended.nonzero().view(-1).tolist())
        for j, (log_prob, beam, token) in enumerate(zip(scores.tolist(), beams.tolist(), tokens.tolist(), strict=True)):
            if log_prob == -math.inf:
                continue
            if j in ended_at:
                fate, reason = "finished", "eos"
            elif j in children:
                fate, reason = "kept", ""
            else:
                fate, reason = "pruned", "beam full"
            parent = self._live.index(beam)
            step.candidates.append(self._candidate(parent, token, log_prob, fate, reason, children.get(j)))

    def beam_end(self, finished: list[Hypothesis], *, at_limit: bool, done: bool) -> None:
        """After a beam step: the finished list; at the length limit the new beams finished there, and when
        the sentence is done otherwise they were dropped."""
        step = self.steps[-1]
        if at_limit or done:
            fate, reason = ("finished", "length limit") if at_limit else ("pruned", "search done")
            step.candidates = [
                replace(c, fate=fate, reason=reason, child=None) if c.fate == "kept" else c for c in step.candidates
            ]
        step.finished = list(finished)

    def _candidate(self, parent: int, token: int, log_prob: float, fate: str, reason: str, child: int | None):
        """A candidate; its score counts EOS in the length when it ends with EOS, as a finished hypothesis's does."""
        hypothesis = self.steps[-1].hypotheses[parent]
        length = len(hypothesis.tokens) + 1
        prob = math.exp(log_prob - hypothesis.log_prob)
        score = log_prob / gnmt_length_penalty(length, self.alpha)
        return Candidate(parent, token, prob, log_prob, score, fate, reason, child)


@dataclass(frozen=True)
class Trace:
    """A translation and the search that found it, step by step, with the encoder's self-attention."""

    translation: str
    source_pieces: list[str]  # EOS included
    encoder_attention: Tensor  # (L, H, S, S)
    steps: list[TraceStep]
    swapped_in: bool = False  # the translation kept is not the search's best but a hypothesis scored beside it
    # (a glossary's plain translation with its terms swapped in: translate/term_search.py)
