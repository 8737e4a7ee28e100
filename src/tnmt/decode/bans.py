"""What a hypothesis may write next given what it wrote: no avoided phrase, no loop, and its forced prefix.

Both searches apply these to the next-token log-probabilities of their rows before choosing, so a phrase
in `Constraints.avoided` (or a word a term replaces: `Constraints.replaced`) is never completed, and a forced
prefix is written whatever the model prefers (its tokens keep their real log-probabilities, so scores stay
comparable).

Loops: a model that cannot read its source (emoji, html sent as text) tends to repeat a subword until the
length limit ("...achtachtacht..."). An n-gram (n <= 4) repeated `LOOP_REPEATS` times back to back is a loop
(`has_loop`, which the evidence also reports: translate/evidence.py); with `DecodeConfig.block_loops` the search
never writes the token that would complete such a third repeat, unless the sentence's source loops itself
(`Constraints.allow_loops`).
"""

from collections.abc import Sequence

import torch
from torch import Tensor

from tnmt.decode.constraints import Constraints

NEG_INF = float("-inf")
FEW_ROWS = 8  # up to this many rows, the loop check runs on lists
LONGEST_AVOIDED = 64  # tokens of history read for avoided phrases (longer phrases are refused upstream)
LOOP_REPEATS = 3  # the same n-gram (n <= LOOP_MAX_N) this many times back to back is a loop
LOOP_MAX_N = 4


class Bans:
    """The bans of a batch's sentences; `apply_` takes the rows of the sentences still searched."""

    def __init__(self, constraints: Sequence[Constraints], *, block_loops: bool, device: torch.device) -> None:
        self.constraints = list(constraints)
        self.block_loops = block_loops
        self.loops_allowed = torch.tensor([c.allow_loops for c in self.constraints], dtype=torch.bool, device=device)
        self.any_allowed = bool(self.loops_allowed.any())
        self.banned = [c.banned for c in self.constraints]  # per sentence: avoided phrases and replaced words
        self._lookup = [_by_start(banned) for banned in self.banned]
        self.steered = any(banned or c.prefix for banned, c in zip(self.banned, self.constraints, strict=True))

    @property
    def active(self) -> bool:
        """Is there anything to ban at all? (Else a search skips `apply_`.)"""
        return self.block_loops or self.steered

    def apply_(self, log_probs: Tensor, tokens: Tensor, sentences: Tensor) -> Tensor:
        """Set what rows may not write next to -inf in `log_probs` (N, V), in place.

        tokens: (N, t) what each row wrote so far; sentences: (N,) each row's sentence in the batch.
        """
        forced = self._forced(log_probs, tokens.size(1), sentences.tolist()) if self.steered else None
        if self.block_loops:
            self._loops(log_probs, tokens, sentences)
        if self.steered:
            self._avoid(log_probs, tokens, sentences.tolist())
        if forced is not None:  # the prefix wins over every ban: it is what the user wrote
            rows, ids, kept = forced
            log_probs[rows] = NEG_INF
            log_probs[rows, ids] = kept
        return log_probs

    def _forced(self, log_probs: Tensor, t: int, sentences: list[int]) -> tuple[Tensor, Tensor, Tensor] | None:
        """The rows at a forced prefix token: (rows, their forced ids, those ids' log-probabilities), or None."""
        pairs = [(row, p[t]) for row, s in enumerate(sentences) if t < len(p := self.constraints[s].prefix)]
        if not pairs:
            return None
        rows, ids = torch.tensor(pairs, device=log_probs.device).unbind(1)
        return rows, ids, log_probs[rows, ids]  # (F,) each: the forced tokens keep their own log-probabilities

    def _loops(self, log_probs: Tensor, tokens: Tensor, sentences: Tensor) -> None:
        """Ban the token that would repeat an n-gram `LOOP_REPEATS` times back to back: the last R * n - 1 tokens
        repeat with period n and the next would continue them. One scatter for every n, without a host sync:
        this runs at every step of every search."""
        t = tokens.size(1)
        if tokens.size(0) <= FEW_ROWS:  # a few rows: in Python, ~10 us against ~70 us of small tensor ops
            self._loops_listed(log_probs, tokens, sentences)
            return
        periodic, next_ids = [], []
        for n in range(1, LOOP_MAX_N + 1):
            span = LOOP_REPEATS * n - 1
            if t < span:
                break
            tail = tokens[:, t - span :]  # (N, R * n - 1)
            periodic.append((tail[:, :-n] == tail[:, n:]).all(dim=1))  # (N,)
            next_ids.append(tail[:, -n])  # (N,) the token that would continue the period
        if not periodic:
            return
        looping = torch.stack(periodic, dim=1)  # (N, n)
        if self.any_allowed:
            looping &= ~self.loops_allowed[sentences][:, None]
        ids = torch.stack(next_ids, dim=1)  # (N, n): two n may name one id, so a minimum, not an overwrite
        bans = torch.full(ids.shape, float("inf"), device=log_probs.device).masked_fill_(looping, NEG_INF)
        log_probs.scatter_reduce_(1, ids, bans.to(log_probs.dtype), reduce="amin")

    def _loops_listed(self, log_probs: Tensor, tokens: Tensor, sentences: Tensor) -> None:
        """`_loops` for a few rows, on lists."""
        longest = LOOP_REPEATS * LOOP_MAX_N - 1
        allowed = self.loops_allowed[sentences].tolist() if self.any_allowed else None
        for row, seq in enumerate(tokens[:, -longest:].tolist()):
            if allowed is not None and allowed[row]:
                continue
            for n in range(1, LOOP_MAX_N + 1):
                span = LOOP_REPEATS * n - 1
                if len(seq) < span:
                    break
                tail = seq[-span:]
                if tail[:-n] == tail[n:]:
                    log_probs[row, tail[-n]] = NEG_INF

    def _avoid(self, log_probs: Tensor, tokens: Tensor, sentences: list[int]) -> None:
        """Ban the last token of every banned phrase (`Constraints.banned`) whose other tokens end the row's output:
        the (row, id) pairs gathered in lists, each row looking its last tokens up once per phrase length, and set
        in one indexing (a word a glossary term replaces comes in tens of spellings and inflections, on every row
        of every step)."""
        t = tokens.size(1)
        history: list[list[int]] | None = None
        rows: list[int] = []
        ids: list[int] = []
        for row, s in enumerate(sentences):
            single, by_start = self._lookup[s]
            if single:
                rows += [row] * len(single)
                ids += single
            for n, last_of in by_start.items():  # phrases of n + 1 tokens, by their first n
                if n <= t:
                    history = history if history is not None else tokens[:, -LONGEST_AVOIDED:].tolist()
                    banned = last_of.get(tuple(history[row][len(history[row]) - n :]))
                    if banned:
                        rows += [row] * len(banned)
                        ids += banned
        if rows:
            device = log_probs.device
            log_probs[torch.tensor(rows, device=device), torch.tensor(ids, device=device)] = NEG_INF


def _by_start(phrases: Sequence[tuple[int, ...]]) -> tuple[list[int], dict[int, dict[tuple[int, ...], list[int]]]]:
    """Banned phrases as `Bans._avoid` looks them up: the ids banned outright (phrases of one token), and the
    last token of each longer phrase by its length less one and its tokens before the last."""
    single: list[int] = []
    by_start: dict[int, dict[tuple[int, ...], list[int]]] = {}
    for phrase in phrases:
        if len(phrase) == 1:
            single.append(phrase[0])
        else:
            by_start.setdefault(len(phrase) - 1, {}).setdefault(tuple(phrase[:-1]), []).append(phrase[-1])
    return single, by_start


def has_loop(words: Sequence[str | int]) -> bool:
    """Whether some n-gram (n <= LOOP_MAX_N) of words or ids occurs LOOP_REPEATS times back to back."""
    for n in range(1, LOOP_MAX_N + 1):
        for i in range(len(words) - n * LOOP_REPEATS + 1):
            gram = words[i : i + n]
            if all(words[i + r * n : i + (r + 1) * n] == gram for r in range(1, LOOP_REPEATS)):
                return True
    return False
