// The cross-attention heat map of a one-line translation: a canvas of target by source subwords for one layer
// and one head (or their mean), read cell by cell with the pointer or the arrow keys; and the viridis colours
// and canvas helpers that the step view's attention row and the "Inside the model" view share.

import { $, clamp, range } from "./util.js";

const el = {
  source: $("source"), heatmap: $("heatmap"), layer: $("layer"), head: $("head"), readout: $("heatmap-readout"),
  legendMin: $("legend-min"), legendMax: $("legend-max"),
};
const state = {
  attention: null, // {source_pieces, target_pieces, cross: [layer][head][target][source]}
  cell: null, // {r, c}: the cell under the pointer or keyboard focus
  geometry: null, // where the cells are on the canvas
};

export function wireHeatmap() {
  el.layer.addEventListener("change", drawHeatmap);
  el.head.addEventListener("change", drawHeatmap);
  el.heatmap.addEventListener("mousemove", onHeatmapPointer);
  el.heatmap.addEventListener("keydown", onHeatmapKey);
  el.heatmap.addEventListener("focus", () => {
    if (!state.cell && state.attention) setCell(0, 0);
  });
  let resizeTimer = 0;
  window.addEventListener("resize", () => {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(drawHeatmap, 150);
  });
}

/** Draws `attention` (the answer's, or null for none) from its last layer's heads, or the layer and head chosen. */
export function showAttention(attention) {
  state.attention = attention;
  state.cell = null;
  fillLayerHead();
  drawHeatmap();
}

function fillLayerHead() {
  const cross = state.attention && state.attention.cross;
  if (!cross || cross.length === 0) {
    for (const select of [el.layer, el.head]) {
      select.replaceChildren();
      select.disabled = true;
    }
    return;
  }
  const layers = cross.length;
  const heads = cross[0].length;
  const layer = el.layer.value === "" ? layers - 1 : Math.min(Number(el.layer.value), layers - 1);
  const head = el.head.value === "" || el.head.value === "mean" || Number(el.head.value) >= heads ? "mean" : el.head.value;
  el.layer.replaceChildren(...range(0, layers - 1).map((l) => new Option(`layer ${l + 1} of ${layers}`, String(l))));
  el.head.replaceChildren(
    new Option(`mean of ${heads} heads`, "mean"),
    ...range(0, heads - 1).map((h) => new Option(`head ${h + 1}`, String(h))),
  );
  el.layer.value = String(layer);
  el.head.value = head;
  el.layer.disabled = el.head.disabled = false;
}

/** The (target x source) weights of the chosen layer: one head, or the mean of the heads. */
function chosenWeights() {
  const heads = state.attention.cross[Number(el.layer.value)];
  if (el.head.value !== "mean") return heads[Number(el.head.value)];
  return heads[0].map((row, r) => row.map((_, c) => heads.reduce((sum, h) => sum + h[r][c], 0) / heads.length));
}

// Viridis: perceptually uniform, readable in grey and by most colour-blind readers. Same stops in style.css.
const VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"]
  .map((hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)));

export function colour(t) {
  const x = clamp(t, 0, 1) * (VIRIDIS.length - 1);
  const i = Math.min(Math.floor(x), VIRIDIS.length - 2);
  const f = x - i;
  const rgb = VIRIDIS[i].map((a, k) => Math.round(a + (VIRIDIS[i + 1][k] - a) * f));
  return { css: `rgb(${rgb.join(",")})`, light: t > 0.55 };
}

function drawHeatmap() {
  const canvas = el.heatmap;
  const ctx = canvas.getContext("2d");
  const att = state.attention;
  if (!att) {
    state.geometry = null;
    resizeCanvas(canvas, ctx, 300, 40);
    ctx.fillStyle = getComputedStyle(canvas).color;
    ctx.font = "14px system-ui, sans-serif";
    ctx.fillText(el.source.value.includes("\n") ? "Drawn for one line at a time." : "No sentence yet.", 4, 24);
    canvas.setAttribute("aria-label", "Cross-attention heat map: nothing to show yet");
    el.readout.textContent = "";
    return;
  }
  const weights = chosenWeights(); // (T, S)
  const rows = weights.map((_, r) => att.target_pieces[r] ?? `#${r}`);
  const cols = weights[0].map((_, c) => att.source_pieces[c] ?? `#${c}`);
  const font = "13px system-ui, sans-serif";
  ctx.font = font;
  const labelWidth = (labels) => Math.min(150, Math.max(...labels.map((s) => ctx.measureText(s).width)));
  const left = Math.ceil(labelWidth(rows)) + 12;
  const colLabel = labelWidth(cols);
  const slant = Math.SQRT1_2; // column labels at 45 degrees
  const top = Math.ceil(colLabel * slant) + 16;
  const available = canvas.parentElement.clientWidth - 4;
  const cell = clamp(Math.floor((available - left - colLabel * slant) / cols.length), 18, 44);
  const width = Math.ceil(left + cols.length * cell + colLabel * slant + 8);
  const height = top + rows.length * cell + 4;
  resizeCanvas(canvas, ctx, width, height);
  state.geometry = { left, top, cell, rows: rows.length, cols: cols.length };

  const max = Math.max(1e-9, ...weights.flat());
  const ink = getComputedStyle(canvas).color;
  ctx.font = font;
  ctx.textBaseline = "middle";
  weights.forEach((row, r) => row.forEach((value, c) => {
    const { css, light } = colour(value / max);
    ctx.fillStyle = css;
    ctx.fillRect(left + c * cell, top + r * cell, cell - 1, cell - 1);
    if (cell >= 34) {
      ctx.fillStyle = light ? "#000" : "#fff";
      ctx.textAlign = "center";
      ctx.font = "11px system-ui, sans-serif";
      ctx.fillText(value.toFixed(2).replace(/^0/, ""), left + c * cell + cell / 2, top + r * cell + cell / 2);
    }
  }));
  const active = state.cell;
  ctx.fillStyle = ink;
  rows.forEach((label, r) => {
    ctx.font = active && active.r === r ? `bold ${font}` : font;
    ctx.textAlign = "right";
    ctx.fillText(fitText(ctx, label, 150), left - 8, top + r * cell + cell / 2);
  });
  cols.forEach((label, c) => {
    ctx.save();
    ctx.font = active && active.c === c ? `bold ${font}` : font;
    ctx.translate(left + c * cell + cell / 2, top - 6);
    ctx.rotate(-Math.PI / 4);
    ctx.textAlign = "left";
    ctx.fillText(fitText(ctx, label, 150), 0, 0);
    ctx.restore();
  });
  if (active && active.r < rows.length && active.c < cols.length) {
    ctx.strokeStyle = getComputedStyle(document.documentElement).getPropertyValue("--focus").trim() || "#e60";
    ctx.lineWidth = 3;
    ctx.strokeRect(left + active.c * cell + 1.5, top + active.r * cell + 1.5, cell - 4, cell - 4);
  }

  el.legendMin.textContent = "0";
  el.legendMax.textContent = max.toFixed(2);
  const headName = el.head.value === "mean" ? "mean of the heads" : `head ${Number(el.head.value) + 1}`;
  const strongest = weights.map((row, r) => `${rows[r]} → ${cols[row.indexOf(Math.max(...row))]}`);
  canvas.setAttribute("aria-label", `Cross-attention of decoder layer ${Number(el.layer.value) + 1}, ${headName}: `
    + `${rows.length} target by ${cols.length} source subwords. Strongest source for each target: ${strongest.join(", ")}.`);
}

/** Sizes the canvas in CSS pixels and draws at the screen's resolution. */
export function resizeCanvas(canvas, ctx, width, height) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
}

/** `text`, cut with "…" to fit `maxWidth` pixels in the canvas's current font. */
export function fitText(ctx, text, maxWidth) {
  if (ctx.measureText(text).width <= maxWidth) return text;
  let cut = text;
  while (cut.length > 1 && ctx.measureText(`${cut}…`).width > maxWidth) cut = cut.slice(0, -1);
  return `${cut}…`;
}

function setCell(r, c) {
  const g = state.geometry;
  if (!g) return;
  state.cell = { r: clamp(r, 0, g.rows - 1), c: clamp(c, 0, g.cols - 1) };
  const { r: row, c: col } = state.cell;
  const value = chosenWeights()[row][col];
  const att = state.attention;
  el.readout.textContent = `Target ${att.target_pieces[row] ?? row} (row ${row + 1} of ${g.rows}) attends to source `
    + `${att.source_pieces[col] ?? col} (column ${col + 1} of ${g.cols}) with weight ${value.toFixed(3)}.`;
  drawHeatmap();
}

function onHeatmapPointer(event) {
  const g = state.geometry;
  if (!g) return;
  const box = el.heatmap.getBoundingClientRect();
  const c = Math.floor((event.clientX - box.left - g.left) / g.cell);
  const r = Math.floor((event.clientY - box.top - g.top) / g.cell);
  if (r >= 0 && r < g.rows && c >= 0 && c < g.cols && (!state.cell || state.cell.r !== r || state.cell.c !== c)) {
    setCell(r, c);
  }
}

function onHeatmapKey(event) {
  if (!state.geometry) return;
  const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
  const move = moves[event.key];
  if (!move) return;
  event.preventDefault();
  const { r, c } = state.cell || { r: 0, c: 0 };
  setCell(r + move[0], c + move[1]);
}
