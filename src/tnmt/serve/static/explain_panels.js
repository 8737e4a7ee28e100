// The panels under the beam tree for the selected hypothesis of the step shown: its next-subword distribution
// with what became of each option, where it looked in the source (one layer and head, or their average), and
// the hypotheses finished so far. `view` is the step view's state: {trace, tree, step, hyp}.

import { fateWords, termsMet } from "./explain_tree.js";
import { colour } from "./heatmap.js";
import { currentModel } from "./settings.js";
import { $, clamp, decimal, make, range } from "./util.js";

const el = {
  explainHypothesis: $("explain-hypothesis"), topk: $("topk"), explainLayer: $("explain-layer"),
  explainHead: $("explain-head"), attentionRow: $("attention-row"), finishedList: $("finished-list"),
};

/** The panels of `view`'s step and hypothesis, or empty ones when there is no trace. */
export function drawPanels(view) {
  if (!view.trace) {
    for (const list of [el.topk, el.attentionRow, el.finishedList]) list.replaceChildren();
    el.explainHypothesis.textContent = "";
    return;
  }
  const current = view.trace.steps[view.step];
  drawTopK(current, view.hyp);
  drawAttentionRow(view);
  drawFinished(current);
}

/** The hypothesis and its next-subword distribution, with what became of each option. */
function drawTopK(step, hyp) {
  const hypothesis = step.hypotheses[hyp];
  const terms = hypothesis.constraints?.length ? `; ${termsMet(hypothesis.constraints)}` : "";
  el.explainHypothesis.textContent = `Hypothesis ${hyp + 1} of ${step.hypotheses.length}: ${prefix(hypothesis)}; `
    + `log-probability ${decimal(hypothesis.log_prob)}, score ${decimal(hypothesis.score)}${terms}.`;
  const own = step.candidates.filter((c) => c.parent === hyp);
  el.topk.replaceChildren(...(hypothesis.top || []).map((option) => topRow(option, own.find((c) => c.token === option.token))));
}

function prefix(hypothesis) {
  return hypothesis.pieces.length ? `“${hypothesis.pieces.join(" ")}”` : "only the start token <s> so far";
}

function topRow(option, candidate) {
  const row = document.createElement("li");
  const piece = make("span", "piece", option.piece);
  piece.lang = currentModel().target;
  const track = make("span", "bar-track");
  const bar = make("span", "bar");
  bar.style.width = `${clamp(option.prob, 0, 1) * 100}%`;
  track.append(bar);
  track.setAttribute("aria-hidden", "true"); // the percentage says it
  const fate = candidate ? fateWords(candidate) : "not a candidate";
  row.append(piece, track, make("span", "prob", `${(option.prob * 100).toFixed(1)} %`),
    make("span", `fate ${candidate ? candidate.fate : "unseen"}`, fate));
  return row;
}

export function fillExplainLayerHead(trace) {
  const cross = trace && trace.steps[0].cross_attention;
  const selects = [el.explainLayer, el.explainHead];
  if (!Array.isArray(cross) || cross.length === 0) {
    for (const select of selects) {
      select.replaceChildren();
      select.disabled = true;
    }
    return;
  }
  const layers = cross.length;
  const heads = cross[0].length;
  // Keep the reader's choice across traces where it still exists; start from the last layer's average.
  const layer = el.explainLayer.value === "all" || Number(el.explainLayer.value) < layers ? el.explainLayer.value : "";
  const head = el.explainHead.value !== "" && Number(el.explainHead.value) < heads ? el.explainHead.value : "all";
  el.explainLayer.replaceChildren(new Option(`average of all ${layers}`, "all"),
    ...range(0, layers - 1).map((l) => new Option(`layer ${l + 1} of ${layers}`, String(l))));
  el.explainHead.replaceChildren(new Option(`average of all ${heads}`, "all"),
    ...range(0, heads - 1).map((h) => new Option(`head ${h + 1}`, String(h))));
  el.explainLayer.value = layer === "" ? String(layers - 1) : layer;
  el.explainHead.value = head;
  for (const select of selects) select.disabled = false;
}

/** The selected hypothesis's cross-attention row (S weights) for the chosen layer and head, or their average. */
function attentionRow(cross, hyp) {
  const pick = (list, value) => (value === "all" ? list : [list[Number(value)]]);
  const rows = pick(cross, el.explainLayer.value)
    .flatMap((heads) => pick(heads, el.explainHead.value).map((head) => head[hyp]));
  return rows[0].map((_, s) => rows.reduce((sum, row) => sum + row[s], 0) / rows.length);
}

export function drawAttentionRow({ trace, step, hyp }) {
  const cross = trace && trace.steps[step].cross_attention;
  if (!Array.isArray(cross) || cross.length === 0) {
    el.attentionRow.replaceChildren();
    return;
  }
  const weights = attentionRow(cross, hyp);
  const max = Math.max(1e-9, ...weights);
  el.attentionRow.replaceChildren(...weights.map((weight, s) => chip(trace.source_pieces[s] ?? `#${s}`, weight, max)));
}

/** A source subword whose background is its weight (viridis, as the heat map), with the weight in digits. */
function chip(piece, weight, max) {
  const { css, light } = colour(weight / max);
  const item = make("li", "chip");
  item.style.background = css;
  item.style.color = light ? "#000" : "#fff";
  item.title = `${piece}: weight ${weight.toFixed(3)}`;
  const text = make("span", "piece", piece);
  text.lang = currentModel().source;
  item.append(text, make("span", "weight", weight.toFixed(2)));
  return item;
}

function drawFinished(step) {
  el.finishedList.replaceChildren(...(step.finished || []).map((done) => {
    const item = document.createElement("li");
    const text = make("span", "hypothesis", done.text || "(empty)");
    text.lang = currentModel().target;
    item.append(text, make("span", "score", `score ${decimal(done.score)}`));
    return item;
  }));
}
