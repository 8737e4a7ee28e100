"""The search's views: a `Trace` (decode/trace.py, recorded by the searches as they translate) as the JSON of
`POST /v1/explain` and `tnmt explain --json`, and as text tables for a terminal (`tnmt explain`).

The JSON gives every id with its subword piece and every tensor as nested lists (layer, head, row, source);
its records are the trace's dataclasses as they are (views/json_values.py), so a field added to one is shown.
"""

from typing import Any, Protocol

from tnmt.config import DecodeConfig
from tnmt.decode.trace import Trace, TraceStep
from tnmt.views.json_values import as_json, rounded


class Pieces(Protocol):
    """What a trace needs to be read: ids to subword pieces and to text (a `Tokenizer`)."""

    def target_pieces(self, ids: list[int]) -> list[str]: ...
    def decode_target(self, ids: list[int]) -> str: ...


def explanation(trace: Trace, tokenizer: Pieces, settings: DecodeConfig, top_k: int) -> dict[str, Any]:
    """A trace with the settings it was made with: the JSON of `POST /v1/explain` and `tnmt explain --json`."""
    return {
        "translation": trace.translation,
        "source_pieces": trace.source_pieces,
        "encoder_attention": rounded(trace.encoder_attention),
        "steps": [_step_dict(i, step, tokenizer) for i, step in enumerate(trace.steps)],
        "swapped_in": trace.swapped_in,
        "beam_size": settings.beam_size,
        "top_k": top_k,
        "length_penalty": settings.length_penalty,
    }


def _step_dict(index: int, step: TraceStep, tokenizer: Pieces) -> dict[str, Any]:
    """One step of `explanation`; a finished hypothesis as the page lists it: its pieces, text and scores."""
    pieces = tokenizer.target_pieces
    cross = step.cross_attention
    return {
        "step": index,
        "hypotheses": [
            {
                "pieces": pieces(h.tokens),
                **as_json(h),
                "top": [{"piece": pieces([t.token])[0], **as_json(t)} for t in h.top],  # in as_json(h)'s place
            }
            for h in step.hypotheses
        ],
        "candidates": [{"piece": pieces([c.token])[0], **as_json(c)} for c in step.candidates],
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
