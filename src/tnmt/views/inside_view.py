"""A look inside the model (views/inside.py) as a learner reads it: the JSON of `POST /v1/inspect` and `tnmt inspect
--json` (`inside_dict`), and the text tables of `tnmt inspect` (`format_inside`).
"""

import math
from collections.abc import Callable
from typing import Any

from tnmt.views.inside import Inside
from tnmt.views.json_values import as_json, rounded


def inside_dict(found: Inside, piece: Callable[[int], str], *, config: Any, top_k: int) -> dict[str, Any]:
    """Plain JSON types: what `POST /v1/inspect` and `tnmt inspect --json` print. `piece`: a target id's piece;
    `config`: the model's `ModelConfig`."""
    f = found.forward
    return {
        "text": found.text,
        "translation": {"text": found.translation, "given": found.given},
        "source": {"pieces": found.source_pieces, "ids": f.source_ids},
        "target": {
            "fed_pieces": found.fed_pieces,
            "fed_ids": f.fed_ids,
            "next_pieces": found.next_pieces,
            "next_ids": f.next_ids,
        },
        "embedding": {
            "d_model": config.d_model,
            "scale": f.scale,
            "positional": config.positional,
            "layout": config.positional_layout,
            "table": rounded(f.table, 3),
            "source": as_json(f.source),
            "target": as_json(f.target),
        },
        "masks": {"source_padding": f.source_mask.tolist(), "causal": f.target_mask.tolist()},
        "attention": {
            "encoder": rounded(f.encoder_attention),
            "decoder_self": rounded(f.decoder_attention),
            "cross": rounded(f.cross_attention),
        },
        "layers": {
            "norm_first": config.norm_first,
            "activation": config.activation,
            "encoder": [as_json(layer) for layer in f.encoder_layers],
            "decoder": [as_json(layer) for layer in f.decoder_layers],
        },
        "output": [
            {
                "fed": piece(p.fed),
                "next": piece(p.next),
                "prob": rounded(p.prob),
                "rank": p.rank,
                "top": [{"piece": piece(token), "token": token, "prob": rounded(prob)} for token, prob in p.top],
            }
            for p in f.predictions
        ],
        "top_k": top_k,
    }


def format_inside(found: Inside, piece: Callable[[int], str]) -> str:
    """A compact terminal summary, one block per stage in the lesson's order (`tnmt inspect`)."""
    f = found.forward
    src, fed, nxt = found.source_pieces, found.fed_pieces, found.next_pieces
    whose = "given" if found.given else "the model's own"
    lines = [f"source:      {found.text}", f"translation: {found.translation} ({whose}, teacher-forced)", ""]
    lines += ["1. pieces and ids"]
    lines += ["   source:  " + " ".join(f"{p}({i})" for p, i in zip(src, f.source_ids, strict=True))]
    lines += ["   decoder: " + " ".join(f"{p}({i})" for p, i in zip(fed, f.fed_ids, strict=True)) + "   (BOS first)"]
    lines += ["", f"2. embeddings x {f.scale:.2f} (sqrt d_model), positions added (size = rms per feature)"]
    for side, pieces, e in (("source", src, f.source), ("decoder", fed, f.target)):
        lines.append(f"   {side}: " + _table(pieces, e.scaled_rms, e.position_rms, e.sum_rms))
    lines += ["", "3. masks (# may attend, . hidden)"]
    hidden = int((~f.source_mask).sum())
    lines.append(f"   source padding: {len(src) - hidden} of {len(src)} keys allowed (padding appears in batches)")
    lines.append("   decoder causal: position i sees 0..i")
    for p, row in zip(fed, f.target_mask.tolist(), strict=True):
        lines.append(f"     {p[:10]:>10} " + "".join("#" if allowed else "." for allowed in row))
    stages = (
        ("4. encoder self-attention", f.encoder_attention, src, src),
        ("5. decoder masked self-attention", f.decoder_attention, fed, fed),
        ("6. cross-attention (decoder reads the source)", f.cross_attention, fed, src),
    )
    for title, weights, queries, keys in stages:
        lines += ["", f"{title}: each query's strongest key, per layer and head"]
        for layer, heads in enumerate(weights):
            for head, rows in enumerate(heads):
                pairs = (f"{queries[q]}>{keys[k]}" for q, k in enumerate(rows.argmax(dim=-1).tolist()))
                lines.append(f"   layer {layer + 1} head {head + 1}: " + " ".join(pairs))
    lines += ["", "7. add & norm: per layer and sub-layer, mean over positions of |stream| -> |update| -> |out|"]
    for stack, layers in (("encoder", f.encoder_layers), ("decoder", f.decoder_layers)):
        for i, layer in enumerate(layers):
            parts = [
                f"{s.name} {_mean(s.stream):.2f} + {_mean(s.update):.2f} -> {_mean(s.out):.2f}" for s in layer.sublayers
            ]
            lines.append(f"   {stack} layer {i + 1}: " + "; ".join(parts))
    lines += ["", "8. feed-forward: active hidden units (above 0), mean over positions"]
    for stack, layers in (("encoder", f.encoder_layers), ("decoder", f.decoder_layers)):
        for i, layer in enumerate(layers):
            active = _mean(layer.ffn.active)
            lines.append(f"   {stack} layer {i + 1}: {active:.0f} of {layer.ffn.d_ff} ({active / layer.ffn.d_ff:.0%})")
    lines += ["", "9. linear + softmax: fed (teacher forcing) -> the likeliest next pieces; p of the right one"]
    for i, p in enumerate(f.predictions):
        top = " ".join(f"{piece(token)} {prob:.2f}" for token, prob in p.top[:3])
        lines.append(f"   {fed[i]:>12} -> {top}   | {nxt[i]} p={p.prob:.2f} rank {p.rank}")
    return "\n".join(lines)


def _table(pieces: list[str], *columns: list[float]) -> str:
    """Per-position sizes as `piece token/position/sum` triples."""
    cells = (f"{p} " + "/".join(f"{c[i]:.1f}" for c in columns) for i, p in enumerate(pieces))
    return "(token/position/sum) " + "  ".join(cells)


def _mean(values: list[float] | list[int]) -> float:
    return math.fsum(values) / max(len(values), 1)
