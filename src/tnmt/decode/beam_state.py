"""What beam search carries from step to step: each sentence's open beams, their progress on its constraints,
and its finished hypotheses (decode/beam.py runs the steps; decode/allocation.py the constrained one)."""

from dataclasses import dataclass, field

from torch import Tensor

from tnmt.decode.constraints import Progress, ProgressTable
from tnmt.decode.hypothesis import Hypothesis


@dataclass
class BeamState:
    """The K open beams of each sentence still searched, best first, and each sentence's finished list."""

    sentences: list[int]  # (Ba) index of each searched sentence in the input batch
    limits: list[int]  # (Ba) most tokens each sentence may generate
    log_probs: Tensor  # (Ba, K) summed log-probs of the open beams, -inf for a beam with no live path
    tokens: Tensor  # (Ba * K, t) ids of the open beams, BOS excluded
    token_log_probs: Tensor  # (Ba * K, t) the log-probability of each of those ids
    worst_kept: Tensor  # (Ba,) score of the quota-th best finished hypothesis, -inf while there are fewer
    finished: list[list[Hypothesis]]  # per input sentence, best first
    first_rows: Tensor  # (Ba, 1) cache row of each sentence's first beam: 0, K, 2K, ...
    row_sentences: Tensor  # (Ba * K,) each beam's sentence in the input batch
    tables: list[ProgressTable]  # (Ba) each searched sentence's constraints, with this search's memo of them
    progress: list[Progress] | None  # (Ba * K) each beam's progress on its constraints; None: no sentence has any
    focus: list[int] | None = None  # (Ba * K) the source token each beam's aligning attention peaks on, when needed
    relevant: Tensor | None = None  # (Ba, V) True on the tokens of each sentence's forms (decode/allocation.py)
    quotas: list[int] | None = None  # (Ba) finished hypotheses before the stopping rule applies; None: K each
    counted: list[list[float]] = field(default_factory=list)  # (Ba) scores of the finished that count, best first

    def add(self, i: int, hypothesis: Hypothesis, *, counts: bool = True) -> None:
        """File a finished hypothesis of searched sentence i and update its quota-th best score. Hypotheses that
        met more constraints rank first, then by score. One that does not `count` (it ended before meeting its
        constraints: decode/allocation.py) is kept as an answer but does not stop the search."""
        hyps = self.finished[self.sentences[i]]
        hyps.append(hypothesis)
        hyps.sort(key=lambda h: (-h.met, -h.score))
        if not counts:
            return
        scores = self.counted[i]
        scores.append(hypothesis.score)
        scores.sort(reverse=True)
        quota = self.log_probs.size(1) if self.quotas is None else self.quotas[i]
        if len(scores) >= quota:
            self.worst_kept[i] = scores[quota - 1]

    def keep(self, keep: Tensor) -> None:
        """Keep only sentences `keep` (indices into the Ba searched sentences)."""
        ba, k = self.log_probs.shape
        self.tokens = self.tokens.view(ba, k, -1)[keep].flatten(0, 1)  # (Ba', K, t) -> (Ba' * K, t)
        self.token_log_probs = self.token_log_probs.view(ba, k, -1)[keep].flatten(0, 1)
        self.log_probs, self.worst_kept = self.log_probs[keep], self.worst_kept[keep]
        self.first_rows = self.first_rows[: keep.numel()]
        indices = keep.tolist()
        self.sentences = [self.sentences[i] for i in indices]
        self.limits = [self.limits[i] for i in indices]
        self.tables = [self.tables[i] for i in indices]
        self.row_sentences = self.row_sentences.view(ba, k)[keep].view(-1)
        if self.progress is not None:
            self.progress = [self.progress[i * k + j] for i in indices for j in range(k)]
        if self.relevant is not None:
            self.relevant = self.relevant[keep]
        if self.quotas is not None:
            self.quotas = [self.quotas[i] for i in indices]
        self.counted = [self.counted[i] for i in indices]

    def spans(self, row: int) -> tuple[tuple[int, int] | None, ...]:
        """Where the beam in `row` met each of its sentence's constraints (None: not met)."""
        return () if self.progress is None else self.progress[row].spans
