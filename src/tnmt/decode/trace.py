"""Watching the decoder think: what greedy and beam search did at every step, recorded as they did it.

The lesson's last picture is inference: the encoder runs once, the decoder starts from BOS, predicts a
distribution over the vocabulary, feeds its choice back and stops at EOS. A `SearchRecorder` handed to
`greedy_hypotheses` or `beam_search_nbest` (through `search`) is told, at each step, which hypotheses were
open, what each would say next, which candidates the search kept, finished or pruned and why, and where
each hypothesis looked in the source (its cross-attention row). It is the search itself that reports: the
same code translates with or without a recorder, so a trace's translation is the translation, and without
one the searches pay a `None` check per step.

A recorder follows one sentence (a batch of one). Fates and reasons of a candidate:
- "kept": it is one of the hypotheses of the next step (`child` is its index there);
- "finished", "eos": it ends with EOS and joins the finished list;
- "finished", "length limit": the sentence reached its length limit, so its open hypotheses end here;
- "pruned", "beam full": not among the K best (for greedy search, K = 1);
- "pruned", "search done": kept by the step, but the finished hypotheses can no longer be beaten
  (decode/beam.py's stopping rule), so the search ends without it.
"""

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

import torch
from torch import Tensor

from tnmt.config import DecodeConfig
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


class Pieces(Protocol):
    """What a trace needs to be read: ids to subword pieces and to text."""

    def target_pieces(self, ids: list[int]) -> list[str]: ...
    def decode_target(self, ids: list[int]) -> str: ...


@dataclass(frozen=True)
class Trace:
    """A translation and the search that found it, step by step, with the encoder's self-attention."""

    translation: str
    source_pieces: list[str]  # EOS included
    encoder_attention: Tensor  # (L, H, S, S)
    steps: list[TraceStep]

    def as_dict(self, tokenizer: Pieces) -> dict[str, Any]:
        """Plain JSON types: ids with their pieces, tensors as nested lists (layer, head, row, source)."""
        return {
            "translation": self.translation,
            "source_pieces": self.source_pieces,
            "encoder_attention": rounded(self.encoder_attention),
            "steps": [_step_dict(i, step, tokenizer) for i, step in enumerate(self.steps)],
        }


def explanation(trace: Trace, tokenizer: Pieces, settings: DecodeConfig, top_k: int) -> dict[str, Any]:
    """A trace with the settings it was made with: the JSON of `POST /v1/explain` and `tnmt explain --json`."""
    search = {"beam_size": settings.beam_size, "top_k": top_k, "length_penalty": settings.length_penalty}
    return {**trace.as_dict(tokenizer), **search}


def _step_dict(index: int, step: TraceStep, tokenizer: Pieces) -> dict[str, Any]:
    pieces = tokenizer.target_pieces
    cross = step.cross_attention
    return {
        "step": index,
        "hypotheses": [
            {
                "pieces": pieces(h.tokens),
                "tokens": h.tokens,
                "log_prob": h.log_prob,
                "score": h.score,
                "top": [{"piece": pieces([t.token])[0], "token": t.token, "prob": t.prob} for t in h.top],
                "constraints": list(h.constraints),
            }
            for h in step.hypotheses
        ],
        "candidates": [{"piece": pieces([c.token])[0], **asdict(c)} for c in step.candidates],
        "finished": [
            {
                "pieces": pieces(h.tokens),
                "text": tokenizer.decode_target(h.tokens),
                "log_prob": h.log_prob,
                "score": h.score,
            }
            for h in step.finished
        ],
        "cross_attention": [] if cross is None else rounded(cross.permute(0, 2, 1, 3)),  # (L, H, N, S)
    }


def rounded(values: Tensor, decimals: int = 4) -> list:
    """Values as nested lists of floats rounded to `decimals`: a trace's JSON stays small, a heat map loses nothing.
    Rounded in float64, which prints 0.018 as 0.018 (a float32 0.018 prints as 0.017999999225139618)."""
    return torch.round(values.double(), decimals=decimals).tolist()


def format_trace(trace: Trace, tokenizer: Pieces) -> str:
    """A trace as compact text tables, one per step, for a terminal (`tnmt explain`)."""
    pieces = tokenizer.target_pieces
    lines = [f"source: {' '.join(trace.source_pieces)}"]
    for index, step in enumerate(trace.steps):
        n = len(step.hypotheses)
        lines += ["", f"step {index}: {n} open hypothes{'is' if n == 1 else 'es'}"]
        for i, h in enumerate(step.hypotheses):
            prefix = " ".join(["<s>", *pieces(h.tokens)])
            lines.append(f"  [{i}] {prefix}   log P {h.log_prob:.2f}, score {h.score:.2f}")
            lines.append("      next: " + " · ".join(f"{pieces([t.token])[0]} {t.prob:.3f}" for t in h.top))
        lines.append(f"  {'candidate':<24} {'p':>6} {'log P':>7} {'score':>7}  fate")
        for c in step.candidates:
            fate = f"kept -> [{c.child}]" if c.fate == "kept" else f"{c.fate} ({c.reason})"
            extension = f"[{c.parent}] + {pieces([c.token])[0]}"
            lines.append(f"  {extension:<24} {c.prob:>6.3f} {c.log_prob:>7.2f} {c.score:>7.2f}  {fate}")
        if step.finished:
            best = step.finished[0]
            lines.append(
                f"  finished: {len(step.finished)}, best {tokenizer.decode_target(best.tokens)!r} ({best.score:.2f})"
            )
    lines += ["", f"translation: {trace.translation}"]
    return "\n".join(lines)
