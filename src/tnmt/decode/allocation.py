"""One step of beam search with lexical constraints: dynamic beam allocation over a batch, in tensors.

`beam_step` is decode/beam.py's `_step` for a batch where some sentence has required phrases
(decode/constraints.py says why the allocation exists). Its candidates per sentence are the 2K best extensions,
each beam's best token, and each token that starts or continues a form a beam has not met (M in all, padded).
Only the candidates whose token can advance a constraint (or whose parent is inside a form) need a new
`Progress`, computed in Python; every other candidate inherits its parent's, so the banks, the allocation
(every bank's best, then the rest by score: `_allocation`) and the choice of the K beams are tensor operations
over (sentences, M), as Hu et al. (2019) vectorised Post & Vilar's. With all banks equal the order is plain
beam search's.
"""

import math

import torch
from torch import Tensor

from tnmt.decode.beam_state import BeamState
from tnmt.decode.constraints import Progress
from tnmt.decode.hypothesis import Hypothesis
from tnmt.decode.top_k import top_k
from tnmt.decode.trace import SearchRecorder

NEG_INF = float("-inf")
SURE_END = 0.5  # EOS this probable: the model holds the sentence finished (see `_restrict`)
LOG_SURE_END = math.log(SURE_END)


def beam_step(
    state: BeamState, log_probs: Tensor, *, eos_id: int, alpha: float, recorder: SearchRecorder | None
) -> Tensor:
    """Extend the beams by next-token log-probs (Ba * K, V, overwritten) under the constraints; file the finished
    hypotheses; return the new beams' parents (Ba * K,) as cache rows. EOS waits until a beam's constraints are
    met, or can no longer be met before its length limit: such a beam (and candidate) competes in bank 0."""
    ba, k = state.log_probs.shape
    vocab, device, tables = log_probs.size(-1), log_probs.device, state.tables
    limits = [state.limits[row // k] for row in range(ba * k)]
    _restrict(state, log_probs, limits, eos_id=eos_id, alpha=alpha)
    scores = log_probs.view(ba, k, vocab).add_(state.log_probs[:, :, None])  # (Ba, K, V), in place
    flat = scores.view(ba, k * vocab)
    if state.relevant is None:  # (Ba, V) the first tokens of each sentence's forms
        state.relevant = torch.zeros(ba, vocab, dtype=torch.bool, device=device)
        for i, table in enumerate(tables):
            state.relevant[i, list(table.first_tokens)] = True
    index = _candidates(state, scores, limits)  # (Ba, M) indices into K * V
    values = flat.gather(1, index).masked_fill_(_repeats(index), NEG_INF)  # (Ba, M) -inf: a repeat or a dead path
    beams, tokens = index // vocab, index % vocab  # (Ba, M)
    rows = beams + state.first_rows  # (Ba, M) each candidate's parent row
    inherited, advanced, banks = _progress(state, tokens, values, rows, limits, eos_id=eos_id)
    order = _allocation(values, banks)  # (Ba, M) candidates in the order the beam takes them
    ordered_tokens, ordered_values = tokens.gather(1, order), values.gather(1, order)
    ended = (ordered_tokens[:, :k] == eos_id) & (ordered_values[:, :k] > NEG_INF)  # (Ba, K) EOS among the first K
    if bool(ended.any()):
        _file_ended(state, ended, order, rows, values, alpha=alpha)
    pick = (ordered_tokens == eos_id).to(torch.uint8).argsort(dim=1, stable=True)[:, :k]  # (Ba, K) best non-EOS
    kept_values = ordered_values.gather(1, pick)
    best_first = kept_values.argsort(dim=1, descending=True, stable=True)  # `_finalize` reads beam 0 as the best
    pick = pick.gather(1, best_first)
    chosen = order.gather(1, pick)  # (Ba, K) candidate indices
    if recorder is not None:
        recorder.beam_step(ordered_values[0], beams.gather(1, order)[0], ordered_tokens[0], ended[0], pick[0])
    new_values = values.gather(1, chosen)  # (Ba, K)
    parents = rows.gather(1, chosen).view(-1)  # (Ba * K,)
    own = (new_values.view(-1) - state.log_probs.view(-1)[parents]).nan_to_num(nan=NEG_INF)  # -inf - -inf: dead
    state.progress = [
        advanced.get((i, m), inherited[row]) if value > NEG_INF else Progress.start(tables[i])
        for i, (ms, rs, vs) in enumerate(
            zip(chosen.tolist(), parents.view(ba, k).tolist(), new_values.tolist(), strict=True)
        )
        for m, row, value in zip(ms, rs, vs, strict=True)
    ]
    state.log_probs = new_values
    state.tokens = torch.cat([state.tokens.index_select(0, parents), tokens.gather(1, chosen).view(-1, 1)], dim=1)
    state.token_log_probs = torch.cat([state.token_log_probs.index_select(0, parents), own[:, None]], dim=1)
    return parents


def _progress(
    state: BeamState, tokens: Tensor, values: Tensor, rows: Tensor, limits: list[int], *, eos_id: int
) -> tuple[list[Progress], dict[tuple[int, int], Progress], Tensor]:
    """Each candidate's progress on its sentence's constraints and its bank (Ba, M). A candidate whose token starts
    no form and continues none of its parent's inherits the parent's progress (`inherited`, per parent row), the
    forms under way broken off; only the others need `advance` (`advanced`, by (sentence, candidate)). A beam
    that can no longer meet its constraints before its length limit competes in bank 0."""
    k, t, device = state.log_probs.size(1), state.tokens.size(1), tokens.device
    progress, tables = state.progress, state.tables
    inherited = [p.broken(tables[row // k]) if p.partial else p for row, p in enumerate(progress)]
    room = torch.tensor([limit - t - 1 for limit in limits], device=device)  # tokens left after this one
    row_bank = torch.tensor([p.bank for p in inherited], device=device)
    row_needed = torch.tensor([p.needed for p in inherited], device=device)
    banks = torch.where(row_needed <= room, row_bank, 0)[rows]  # (Ba, M) hopeless beams compete in bank 0
    active = state.relevant.gather(1, tokens)  # (Ba, M) starts a form
    if width := max(len(p.partial) for p in progress):  # or continues one: (Ba * K, P) each parent's next tokens
        nexts = [
            [tables[row // k].constraints.required[c][f][n] for c, f, n in p.partial] for row, p in enumerate(progress)
        ]
        nexts_t = torch.tensor([n + [-1] * (width - len(n)) for n in nexts], device=device)
        active |= (tokens[:, :, None] == nexts_t[rows]).any(dim=2)
    active &= (tokens != eos_id) & (values > NEG_INF)
    advanced: dict[tuple[int, int], Progress] = {}
    if bool(active.any()):
        at = active.nonzero().tolist()
        parent_rows = rows[active].tolist()
        memo: dict[tuple[int, Progress, int], Progress] = {}  # beams of a sentence often share their progress
        for (i, m), row, token in zip(at, parent_rows, tokens[active].tolist(), strict=True):
            key = (i, progress[row], token)
            if (after := memo.get(key)) is None:
                after = memo[key] = progress[row].advance(tables[i], token, t)
            advanced[i, m] = after
            banks[i, m] = after.bank if after.needed <= limits[row] - t - 1 else 0
    return inherited, advanced, banks


def _file_ended(state: BeamState, ended: Tensor, order: Tensor, rows: Tensor, values: Tensor, *, alpha: float) -> None:
    """File the hypotheses that end with EOS among each sentence's first K candidates (`ended`, (Ba, K) in
    allocation `order`), with the constraint spans their parents met."""
    for i, r in ended.nonzero().tolist():
        m = int(order[i, r])
        row = int(rows[i, m])
        log_prob = float(values[i, m])
        own = log_prob - float(state.log_probs.view(-1)[row])
        hypothesis = Hypothesis.scored(
            state.tokens[row].tolist(),
            log_prob,
            ended=True,
            alpha=alpha,
            token_log_probs=(*state.token_log_probs[row].tolist(), own),
            constraints=state.progress[row].spans,
        )
        state.add(i, hypothesis)


def _restrict(state: BeamState, log_probs: Tensor, limits: list[int], *, eos_id: int, alpha: float) -> None:
    """EOS waits for a beam's constraints while they can still be met, unless the model is sure the sentence is
    over (EOS at `SURE_END` or more) and it is not inside a form: writing on after that only appends a second
    sentence to hold the terms
    ("Ein Mann geht im Park. Ein Hund läuft im Garten."), which the length penalty then prefers, so such a beam
    ends there, its constraints reported unmet (and ranked after every hypothesis that met them). A form just met
    ends its word (a token that continues the word is banned: "Haus" is not met by "Hauses")."""
    t = state.tokens.size(1)
    k = state.log_probs.size(1)
    waiting, ending_words = [], []
    for row, p in enumerate(state.progress):
        if not p.may_end(limits[row] - t):  # its constraints unmet, and still room to meet them
            waiting.append(row)
        if p.spans and state.tables[row // k].constraints.continuations is not None and p.just_met(t):
            ending_words.append(row)
    if waiting:
        ending = log_probs[waiting, eos_id].tolist()
        alive = state.log_probs.view(-1)[waiting].tolist()
        for row, eos, so_far in zip(waiting, ending, alive, strict=True):
            if eos >= LOG_SURE_END and so_far > NEG_INF and not state.progress[row].partial:  # not inside a form
                hypothesis = Hypothesis.scored(
                    state.tokens[row].tolist(),
                    so_far + eos,
                    ended=True,
                    alpha=alpha,
                    token_log_probs=(*state.token_log_probs[row].tolist(), eos),
                    constraints=state.progress[row].spans,
                )
                state.add(row // k, hypothesis, counts=False)
                log_probs[row] = NEG_INF  # ended: not extended
        log_probs[waiting, eos_id] = NEG_INF
    for row in ending_words:
        log_probs[row].masked_fill_(state.tables[row // k].constraints.continuations, NEG_INF)


def _candidates(state: BeamState, scores: Tensor, limits: list[int]) -> Tensor:
    """(Ba, M) candidate indices into each sentence's K * V extensions: the 2K best, each beam's best token, and
    each token that advances a live beam's unmet constraints; a repeated one is kept once (the others' index
    points at the sentence's best candidate again and is masked by `_deduplicated`)."""
    ba, k, vocab = scores.shape
    t = state.tokens.size(1)
    _, top = top_k(scores.view(ba, k * vocab), min(2 * k, k * vocab))  # (Ba, 2K)
    best = top_k(scores.view(ba * k, vocab), 1)[1].view(ba, k) + torch.arange(k, device=scores.device) * vocab
    alive = (state.log_probs > NEG_INF).view(-1).tolist()
    focus = state.focus or [None] * (ba * k)
    wanted: list[list[int]] = [[] for _ in range(ba)]
    for row, p in enumerate(state.progress):
        if alive[row] and not p.may_end(limits[row] - t):  # what it still wants, it still has room for
            i, j = divmod(row, k)
            wanted[i] += [j * vocab + token for token in p.wants(state.tables[i], focus[row])]
    width = max(len(w) for w in wanted)
    extra = torch.tensor([w + [-1] * (width - len(w)) for w in wanted], dtype=torch.long, device=scores.device)
    extra = torch.where(extra >= 0, extra, top[:, :1])  # padding repeats the best candidate: a duplicate
    return torch.cat([top, best, extra.view(ba, width)], dim=1)


def _allocation(values: Tensor, banks: Tensor) -> Tensor:
    """The candidates (Ba, M) in the order the beam takes them: the best of every bank, the most advanced bank
    first, then all the others by score; repeats and dead candidates last.

    Post & Vilar go round-robin (every bank's best, then every bank's second, ...). That keeps as many beams in
    the banks of progress as in bank 0 and pushed the model's own best hypotheses out of the beam even where they
    met the constraints anyway (64 of 207 such Multi30k outputs changed, chrF -1.5 on those sentences): one
    beam per bank keeps every stage of progress alive, and the rest of the beam goes by score, as without
    constraints.
    """
    m = values.size(1)
    by_score = values.argsort(dim=1, descending=True, stable=True)
    score_rank = torch.empty_like(by_score).scatter_(
        1, by_score, torch.arange(m, device=values.device).expand_as(by_score)
    )
    by_bank = banks.gather(1, by_score).argsort(dim=1, descending=True, stable=True)
    order = by_score.gather(1, by_bank)  # (Ba, M) bank by bank, each best first
    bank = banks.gather(1, order)
    first = torch.ones_like(bank, dtype=torch.bool)
    first[:, 1:] = bank[:, 1:] != bank[:, :-1]  # the best of its bank
    top_bank = int(banks.max()) + 1
    key = torch.where(first, top_bank - bank, top_bank + 1 + score_rank.gather(1, order))
    key = key.masked_fill(values.gather(1, order) == NEG_INF, top_bank + 2 + m)
    return order.gather(1, key.argsort(dim=1, stable=True))


def _repeats(index: Tensor) -> Tensor:
    """(Ba, M) True on every candidate that repeats an earlier one of its sentence (the same beam and token)."""
    ordered, perm = index.sort(dim=1, stable=True)  # a repeat sorts after its first occurrence
    repeated = torch.zeros_like(index, dtype=torch.bool)
    repeated[:, 1:] = ordered[:, 1:] == ordered[:, :-1]
    return torch.zeros_like(repeated).scatter_(1, perm, repeated)
