"""The views: what a learner runs to see the model at work, and the code that draws each of them.

- `tnmt inspect --checkpoint CKPT "sentence"` (`--json` for the numbers), `POST /v1/inspect` and the page's
  "Inside the model" view: one teacher-forced forward pass, stage by stage (inside.py).
- `tnmt explain --checkpoint CKPT "sentence"` (`--json`), `POST /v1/explain` and the page's "Step through the
  search" view: the search that translates, step by step (trace.py renders the trace that decode/trace.py's
  recorder collects as the searches run).
- `tnmt attention --checkpoint CKPT "sentence" --out DIR` and `tnmt quickstart`: attention heat maps as PNGs
  (heatmaps.py); `tnmt train`: the training curves beside its metrics (curves.py).

The JSON views are made with one pair of helpers (json_values.py). The pictures are built with
`matplotlib.figure.Figure` and saved by the Agg canvas, never through pyplot: no display and no global figure
state, so they draw in a server, a training run or a test. Nothing is imported here: matplotlib loads only
with the module that draws.
"""
