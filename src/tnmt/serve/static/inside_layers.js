// The "Inside the model" view's stages inside the layers, drawn from a /v1/inspect answer: 4-6. attention head by
// head (small multiples for the layer chosen), 7. add & norm around every sub-layer, 8. the feed-forward units.
// Layers count from 1 at the input side and heads from 1, as everywhere a person reads them.

import { barLegend, barRows, heatMap, largest, quoted, scrollBox, titled } from "./inside_draw.js";
import { $, clamp, count, make } from "./util.js";

/** The three attentions: the answer's key, the ids of their panel's elements, their queries and keys. */
const ATTENTION = {
  encoder: { id: "encoder-attention", title: "Encoder self-attention", queries: "source", keys: "source" },
  decoder_self: { id: "decoder-attention", title: "Decoder masked self-attention", queries: "fed", keys: "fed" },
  cross: { id: "cross-attention", title: "Cross-attention", queries: "fed", keys: "source" },
};
const el = {
  addNormLayer: $("add-norm-layer"), addNorm: $("add-norm-picture"), addNormNote: $("add-norm-note"),
  addNormReadout: $("add-norm-readout"), feedForward: $("feed-forward-picture"),
  feedForwardNote: $("feed-forward-note"), feedForwardReadout: $("feed-forward-readout"),
};

const pieces = (data, side) => (side === "source" ? data.source.pieces : data.target.fed_pieces);

/** Redraws a stage when its layer select changes, from `current()`, the answer shown (null when none is). */
export function wireLayers(current) {
  for (const [kind, { id }] of Object.entries(ATTENTION)) {
    $(`${id}-layer`).addEventListener("change", () => current() && drawAttention(current(), kind));
  }
  el.addNormLayer.addEventListener("change", () => current() && drawAddNorm(current()));
}

/** Stages 4 to 8 of `data`. */
export function drawLayers(data) {
  fillLayerSelects(data);
  for (const kind of Object.keys(ATTENTION)) drawAttention(data, kind);
  drawAddNorm(data);
  drawFeedForward(data);
}

/** Offers the answer's layers in every layer select, keeping each reader's choice where it still exists. */
function fillLayerSelects(data) {
  for (const [kind, { id }] of Object.entries(ATTENTION)) {
    const n = data.attention[kind].length;
    fill($(`${id}-layer`), Array.from({ length: n }, (_, l) => [`layer ${l + 1}`, String(l)]));
  }
  const stacks = ["encoder", "decoder"]
    .flatMap((stack) => data.layers[stack].map((_, l) => [`${stack} layer ${l + 1}`, `${stack}:${l}`]));
  fill(el.addNormLayer, stacks);
}

function fill(select, options) {
  const previous = select.value;
  select.replaceChildren(...options.map(([text, value]) => new Option(text, value)));
  if (options.some(([, value]) => value === previous)) select.value = previous;
  select.disabled = options.length === 0;
}

/** 4-6. One small heat map per head of the chosen layer, on one colour scale: queries as rows, keys as columns. */
function drawAttention(data, kind) {
  const { id, title, queries, keys } = ATTENTION[kind];
  const picture = $(`${id}-picture`);
  const readout = $(`${id}-readout`);
  const layers = data.attention[kind];
  if (!layers.length) {
    picture.replaceChildren(make("p", "hint", "This model has no such layer."));
    return;
  }
  const l = Number($(`${id}-layer`).value);
  const [q, k] = [pieces(data, queries), pieces(data, keys)];
  const hi = Math.max(1e-9, largest(layers[l].flat(2)));
  const size = clamp(Math.floor(200 / Math.max(q.length, k.length)), 8, 16); // a head fits a phone
  const heads = layers[l].map((weights, h) => {
    const strongest = weights.map((row) => row.indexOf(Math.max(...row)));
    const map = heatMap({
      values: weights, rowLabels: q, colLabels: k, cell: [size, size], hi, readout,
      name: `${title}, layer ${l + 1}, head ${h + 1}: ${q.length} queries by ${k.length} keys. Strongest key of each `
        + `query: ${strongest.map((c, r) => `${q[r]} → ${k[c]}`).join(", ")}`,
      read: (r, c) => `Layer ${l + 1}, head ${h + 1}: ${quoted(q[r])} (position ${r}) attends to ${quoted(k[c])} `
        + `(position ${c}) with weight ${weights[r][c].toFixed(3)}; its strongest key is ${quoted(k[strongest[r]])}.`,
    });
    return titled(`head ${h + 1}`, scrollBox(map));
  });
  const grid = make("div", "heads");
  grid.append(...heads);
  picture.replaceChildren(grid, make("p", "hint", `Rows: queries; columns: keys; each row sums to 1. Dark is 0, `
    + `brightest ${hi.toFixed(2)}, the largest weight of layer ${l + 1}'s ${count(heads.length, "head", "heads")}.`));
}

/** 7. For the chosen layer, per sub-layer and position: the stream's size, the update's, and the size after. */
function drawAddNorm(data) {
  const { norm_first: preNorm } = data.layers;
  el.addNormNote.textContent = preNorm
    ? "Pre-norm: each sub-layer reads LayerNorm(stream) and out = stream + update, so the stream can grow layer "
      + "after layer."
    : "Post-norm, as in the paper: out = LayerNorm(stream + update), so each block's output has a size near 1.";
  const [stack, l] = el.addNormLayer.value.split(":");
  const layer = data.layers[stack]?.[Number(l)];
  if (!layer) {
    el.addNorm.replaceChildren();
    return;
  }
  const labels = pieces(data, stack === "encoder" ? "source" : "fed");
  const series = (s) => [
    { name: "stream in", values: s.stream, className: "stream" },
    { name: "update (the sub-layer's output)", values: s.update, className: "update" },
    { name: "after add & norm", values: s.out, className: "out" },
  ];
  const max = largest(layer.sublayers.flatMap((s) => [...s.stream, ...s.update, ...s.out]));
  const where = `${stack[0].toUpperCase()}${stack.slice(1)} layer ${Number(l) + 1}`;
  const blocks = layer.sublayers.map((s) => titled(s.name, barRows({
    name: `${where}, ${s.name}: per position the stream's size, the update's and the size after add & norm`,
    labels, series: series(s), max, signs: [" + ", " → "], readout: el.addNormReadout,
    read: (p) => `${where}, ${s.name}, ${quoted(labels[p])} (position ${p}): the stream in ${s.stream[p].toFixed(2)}, `
      + `the update ${s.update[p].toFixed(2)}, after add & norm ${s.out[p].toFixed(2)} `
      + `(layer norm read ${s.norm_in[p].toFixed(2)}, wrote ${s.norm_out[p].toFixed(2)}).`,
  })));
  const grid = make("div", "sublayers");
  grid.append(...blocks);
  el.addNorm.replaceChildren(barLegend(series(layer.sublayers[0])), grid);
}

/** 8. Per layer and position, how many of the d_ff hidden units are active, the most active ones in words. */
function drawFeedForward(data) {
  const { activation } = data.layers;
  const stacks = [
    ["Encoder", data.layers.encoder, data.source.pieces], ["Decoder", data.layers.decoder, data.target.fed_pieces],
  ].filter(([, layers]) => layers.length);
  const dff = stacks.length ? stacks[0][1][0].ffn.d_ff : 0;
  el.feedForwardNote.textContent = `Activation ${activation}; d_ff = ${dff} hidden units per position. A unit is `
    + "active where its value is above 0; the map counts them (brighter = more).";
  el.feedForward.replaceChildren(...stacks.map(([name, layers, labels]) => {
    const values = layers.map((layer) => layer.ffn.active.map((n) => n / layer.ffn.d_ff));
    const map = heatMap({
      values, rowLabels: layers.map((_, l) => `layer ${l + 1}`), colLabels: labels, readout: el.feedForwardReadout,
      cell: [clamp(Math.floor(440 / labels.length), 12, 34), 24],
      text: (l, p) => String(layers[l].ffn.active[p]),
      name: `${name}: active feed-forward units per layer and position, of ${dff}`,
      read: (l, p) => {
        const { active, top, d_ff: units } = layers[l].ffn;
        const most = top[p].map(([unit, value]) => `unit ${unit} (${value.toFixed(2)})`).join(", ");
        return `${name} layer ${l + 1}, ${quoted(labels[p])} (position ${p}): ${active[p]} of ${units} units active `
          + `(${Math.round((100 * active[p]) / units)}%); the most active: ${most}.`;
      },
    });
    return titled(name, scrollBox(map));
  }));
}
