"""Beam search with the GNMT length penalty (section 6.1: beam size 4, alpha 0.6).

Every sentence keeps K open beams (`_init`). One step (`_step`) scores each beam's extensions by every
token, takes the 2K best candidates of the sentence, moves those among the K best that end in EOS to
its finished list, and keeps the K best others as the new beams; the KV cache follows the beams'
parents with `reorder`. EOS is thus handled exactly once: a hypothesis that emits it is finished and
never extended. A finished hypothesis scores log P(Y) / lp(|Y|) with

    lp(|Y|) = ((5 + |Y|) / 6) ** alpha        (Wu et al., 2016)

where |Y| counts the tokens whose log-probs are summed: the words and EOS. Hypotheses that reach the
length limit are finished without EOS, |Y| counting their words.

A sentence is done (`_finalize`) at its length limit, or once it has K finished hypotheses and the best
open beam, scored as if it ended now (log P / lp(its length)), is no better than the worst of them.
This is Hugging Face's default criterion; like fairseq's (stop at K finished) it ignores that with
alpha > 0 a longer hypothesis could still win through the length bonus, and it makes beam size 1
exactly greedy search. With alpha = 0 it is exact: log-probs only fall as beams grow. Done sentences
leave the batch, so the search ends when the last one is done.
"""

from collections.abc import Sequence

import torch
from torch import Tensor

from tnmt.aligning_head import alignment_layer_index, alignment_rows
from tnmt.config import DecodeConfig
from tnmt.decode.allocation import beam_step as constrained_step
from tnmt.decode.beam_state import BeamState
from tnmt.decode.constraints import Constraints, Progress, ProgressTable
from tnmt.decode.hypothesis import Hypothesis, gnmt_length_penalty
from tnmt.decode.setup import SearchSetup, set_up
from tnmt.decode.top_k import top_k
from tnmt.decode.trace import SearchRecorder
from tnmt.model import BoundDecoder, EncodedSource, Transformer


@torch.inference_mode()
def beam_search_nbest(
    model: Transformer,
    src: Tensor | EncodedSource,
    decode: DecodeConfig | None = None,
    *,
    n_best: int = 1,
    recorder: SearchRecorder | None = None,
    decoder: BoundDecoder | None = None,
    constraints: Sequence[Constraints] | None = None,
    starts: Tensor | None = None,
) -> list[list[Hypothesis]]:
    """The `n_best` best hypotheses of every sentence of a batch, best first.

    Args:
        model: The Transformer (in eval mode).
        src: Right-padded source ids (B, S), each sentence ending with EOS, or the batch already encoded
            (`Transformer.encode_for_decoding`).
        decode: K = `beam_size` open beams per sentence; `length_penalty` is alpha of lp(|Y|) (0 ranks
            by log-probability); length limits as in `rules.output_limits`; EOS is forbidden until
            `min_len` tokens were generated. None = `DecodeConfig()`.
        n_best: How many hypotheses to return per sentence (1 <= n_best <= beam_size).
        recorder: Told what every step did (decode/trace.py); for a batch of one sentence.
        decoder: The model bound for decoding (`Transformer.incremental_decoder`); None binds it here.
        constraints: Each sentence's (decode/constraints.py): required phrases (met by dynamic beam allocation),
            avoided phrases and a forced prefix; None: none. `decode.block_loops` bans loops (decode/bans.py).
        starts: (B,) each sentence's first decoder input (a multilingual model's target-language tag); None: BOS.

    Raises:
        ValueError: n_best outside [1, beam_size], or not one `Constraints` per sentence.
    """
    decode = decode or DecodeConfig()
    beam_size, length_penalty = decode.beam_size, decode.length_penalty
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"need 1 <= n_best <= beam_size, got n_best {n_best} and beam_size {beam_size}")
    c, k = model.config, beam_size
    setup = set_up(model, src, decode, recorder=recorder, decoder=decoder, constraints=constraints, starts=starts)
    rules, bans, decoder, cache = setup.rules, setup.bans, setup.decoder, setup.cache
    state = _init(setup, beam_size=k, n_best=n_best)
    inputs = setup.inputs.repeat_interleave(k)  # (Ba * K,)
    aligned = any(span is not None for one in setup.constraints for span in one.sources)  # phrases wait for attention
    aligning = alignment_layer_index(decode.alignment_layer, c.n_decoder_layers) if aligned else 0
    while True:
        logits, weights = decoder.step(inputs[:, None], cache, need_weights=recorder is not None or aligned)
        log_probs = logits[:, 0].log_softmax(dim=-1)  # (Ba * K, V)
        if recorder is not None:
            recorder.attention(weights)
        if aligned:  # (Ba * K,) the source token each beam looks at, by the aligning layer's cross-attention
            state.focus = alignment_rows(weights[aligning][1], decode.alignment_head)[:, 0].argmax(dim=-1).tolist()
        rules.apply_(log_probs, state.tokens.size(1))
        if bans.active:
            bans.apply_(log_probs, state.tokens, state.row_sentences)
        if recorder is not None:
            met = None if state.progress is None else [p.spans for p in state.progress]
            recorder.open(state.tokens.tolist(), state.log_probs.view(-1).tolist(), log_probs, met=met)
        step = _step if state.progress is None else constrained_step
        parents = step(state, log_probs, eos_id=c.eos_id, alpha=length_penalty, recorder=recorder)
        done = _finalize(state, alpha=length_penalty, recorder=recorder)  # (Ba,)
        n_done = int(done.sum())
        if n_done == done.numel():
            return [hyps[:n_best] for hyps in state.finished]
        if n_done:
            keep = (~done).nonzero().view(-1)  # (Ba',)
            parents = parents.view(-1, k)[keep].view(-1)  # (Ba, K) -> (Ba' * K,)
            state.keep(keep)
        cache.reorder(parents, same_sources=not n_done)  # parents are beams of the same sentence
        inputs = state.tokens[:, -1]


def beam_search(model: Transformer, src: Tensor | EncodedSource, decode: DecodeConfig | None = None) -> list[list[int]]:
    """The best hypothesis of every sentence as ids without BOS and EOS; see `beam_search_nbest`."""
    return [hyps[0].tokens for hyps in beam_search_nbest(model, src, decode)]


def _init(setup: SearchSetup, *, beam_size: int, n_best: int) -> BeamState:
    """Start K beams per sentence, of which only the first is alive, on the set-up's cache (its rows become K each).

    A sentence with required phrases stops by the stopping rule once it has `n_best` finished hypotheses,
    not K: every finished one met its constraints (or could not), and waiting for K of them kept beams that
    cannot meet them searching to the length limit (twice the steps on Multi30k with two terms a sentence)."""
    batch, k, device = setup.source.batch_size, beam_size, setup.limits.device
    constraints = setup.constraints
    setup.cache.start_beams(k)  # (B * K) rows
    log_probs = torch.full((batch, k), float("-inf"), device=device)
    log_probs[:, 0] = 0.0  # so the first step expands one beam per sentence, not K copies of it
    state = BeamState(
        sentences=list(range(batch)),
        limits=setup.limits.tolist(),
        log_probs=log_probs,
        tokens=torch.empty(batch * k, 0, dtype=torch.long, device=device),
        token_log_probs=torch.empty(batch * k, 0, device=device),
        worst_kept=torch.full((batch,), float("-inf"), device=device),
        finished=[[] for _ in range(batch)],
        first_rows=torch.arange(0, batch * k, k, device=device)[:, None],
        row_sentences=torch.arange(batch, device=device).repeat_interleave(k),
        tables=[ProgressTable(c) for c in constraints],
        progress=None,
        counted=[[] for _ in range(batch)],
    )
    if any(c.required for c in constraints):
        state.progress = [Progress.start(table) for table in state.tables for _ in range(k)]
        state.quotas = [n_best if c.required else k for c in constraints]
    return state


def _step(state: BeamState, log_probs: Tensor, *, eos_id: int, alpha: float, recorder: SearchRecorder | None) -> Tensor:
    """One step: extend the beams by next-token log-probs (Ba * K, V, overwritten); return parents' cache rows."""
    ba, k = state.log_probs.shape
    vocab = log_probs.size(-1)
    scores = log_probs.view(ba, k, vocab).add_(state.log_probs[:, :, None])  # (Ba, K, V), in place
    top, index = top_k(scores.view(ba, k * vocab), min(2 * k, k * vocab))  # (Ba, 2K), best first
    rows = index // vocab + state.first_rows  # (Ba, 2K) cache row of each candidate's parent
    tokens = index % vocab  # (Ba, 2K)
    is_eos = tokens == eos_id
    # (Ba, 2K) each candidate's own token log-probability: its sum less its parent beam's
    own = top - state.log_probs.gather(1, index // vocab)
    ended = is_eos[:, :k] & (top[:, :k] > float("-inf"))  # EOS among the K best: a finished hypothesis
    if bool(ended.any()):
        for i, j in ended.nonzero().tolist():
            row = int(rows[i, j])
            token_log_probs = (*state.token_log_probs[row].tolist(), float(own[i, j]))
            hypothesis = Hypothesis.scored(
                state.tokens[row].tolist(), float(top[i, j]), ended=True, alpha=alpha, token_log_probs=token_log_probs
            )
            state.add(i, hypothesis)
    pick = is_eos.to(torch.uint8).argsort(dim=1, stable=True)[:, :k]  # (Ba, K): best non-EOS candidates
    if recorder is not None:
        recorder.beam_step(top[0], index[0] // vocab, tokens[0], ended[0], pick[0])
    state.log_probs = top.gather(1, pick)
    parents = rows.gather(1, pick).view(-1)  # (Ba * K,)
    new = tokens.gather(1, pick).view(-1, 1)  # (Ba * K, 1)
    state.tokens = torch.cat([state.tokens.index_select(0, parents), new], dim=1)  # (Ba * K, t + 1)
    chosen = own.gather(1, pick).view(-1, 1)  # (Ba * K, 1)
    state.token_log_probs = torch.cat([state.token_log_probs.index_select(0, parents), chosen], dim=1)
    return parents


def _finalize(state: BeamState, *, alpha: float, recorder: SearchRecorder | None) -> Tensor:
    """Finish open beams at the length limit and tell which sentences are done: (Ba,) bool."""
    k = state.log_probs.size(1)
    length = state.tokens.size(1)
    at_limit = [i for i, limit in enumerate(state.limits) if limit == length]
    for i in at_limit:
        for j, log_prob in enumerate(state.log_probs[i].tolist()):
            if log_prob > float("-inf"):
                row = i * k + j
                hypothesis = Hypothesis.scored(
                    state.tokens[row].tolist(),
                    log_prob,
                    ended=False,
                    alpha=alpha,
                    token_log_probs=tuple(state.token_log_probs[row].tolist()),
                    constraints=state.spans(row),
                )
                state.add(i, hypothesis)
    best_open = state.log_probs[:, 0] / gnmt_length_penalty(length, alpha)  # (Ba,) if it ended now
    done = best_open <= state.worst_kept
    if at_limit:
        done[at_limit] = True
    if recorder is not None:
        recorder.beam_end(state.finished[state.sentences[0]], at_limit=bool(at_limit), done=bool(done[0]))
    return done
