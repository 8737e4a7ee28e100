// The pictures of the "Inside the model" view: heat maps on a canvas (viridis, as heatmap.js), tables of cells
// and rows of bars. Each is one Tab stop read cell by cell with the arrow keys (Home and End: a row's or a list's
// ends), or with the pointer on a map, what the cursor is on said in words in its panel's readout.

import { colour, fitText, resizeCanvas } from "./heatmap.js";
import { clamp, make } from "./util.js";

const LABEL_MAX = 90; // px: longer labels are cut with "…"
const FONT = "11px system-ui, sans-serif";
const STEPS = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };

/**
 * Moves a cursor over a rows x cols picture drawn by `show(r, c)`, saying `read(r, c)` in `readout`; in a single
 * row or column all four arrows walk it. Returns the function that moves the cursor (the pointer's way in).
 */
function cursor(target, readout, { rows, cols, read, show }) {
  let at = { r: 0, c: 0 };
  const go = (r, c) => {
    at = { r: clamp(r, 0, rows - 1), c: clamp(c, 0, cols - 1) };
    show(at.r, at.c);
    readout.textContent = read(at.r, at.c);
  };
  target.addEventListener("focus", () => go(at.r, at.c)); // says where the cursor is on the way in
  target.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    let [dr, dc] = STEPS[event.key] || [0, 0];
    if (cols === 1 && dc) [dr, dc] = [dc, 0];
    if (rows === 1 && dr) [dr, dc] = [0, dr];
    const ends = { Home: [cols === 1 ? 0 : at.r, 0], End: [cols === 1 ? rows - 1 : at.r, cols - 1] };
    const next = ends[event.key] || (dr || dc ? [at.r + dr, at.c + dc] : null);
    if (!next) return;
    event.preventDefault();
    go(...next);
  });
  return go;
}

function ink() {
  return getComputedStyle(document.documentElement).getPropertyValue("--ink").trim() || "#000";
}

function focusColour() {
  return getComputedStyle(document.documentElement).getPropertyValue("--focus").trim() || "#e60";
}

/**
 * A heat map of `values` (rows x cols) from `lo` (darkest) to `hi` (brightest) on a focusable canvas named
 * `name`: `rowLabels` on the left, `colLabels` (or none) slanted on top, cells of `cell` = [width, height] px;
 * `text(r, c)` writes into cells wide enough, `decorate(ctx, g, ink)` draws in a `gutter` px wide left margin.
 */
export function heatMap(options) {
  const { values, rowLabels, colLabels = null, cell: [w, h], name, read, readout } = options;
  const { lo = 0, hi = Math.max(1e-9, largest(values.flat())), text = null, gutter = 0, decorate = null } = options;
  const canvas = document.createElement("canvas");
  canvas.className = "map";
  canvas.tabIndex = 0;
  canvas.setAttribute("role", "img");
  canvas.setAttribute("aria-label", name);
  canvas.dataset.rows = String(values.length);
  canvas.dataset.cols = String(values[0].length);
  const ctx = canvas.getContext("2d");
  ctx.font = FONT;
  const widest = (labels) => Math.min(LABEL_MAX, Math.max(0, ...labels.map((s) => ctx.measureText(s).width)));
  const slant = colLabels ? widest(colLabels) * Math.SQRT1_2 : 0; // column labels at 45 degrees
  const g = { left: gutter + Math.ceil(widest(rowLabels)) + 6, top: Math.ceil(slant) + (colLabels ? 10 : 4), w, h };
  resizeCanvas(canvas, ctx, Math.ceil(g.left + values[0].length * w + slant + 6), g.top + values.length * h + 4);

  const draw = (active) => {
    ctx.clearRect(0, 0, canvas.width, canvas.height);
    ctx.textBaseline = "middle";
    values.forEach((row, r) => row.forEach((value, c) => {
      const { css, light } = colour((value - lo) / Math.max(hi - lo, 1e-9));
      ctx.fillStyle = css;
      ctx.fillRect(g.left + c * w, g.top + r * h, w - (w > 4), h - (h > 4)); // a 1 px seam between big cells
      if (text && w >= 26) {
        ctx.fillStyle = light ? "#000" : "#fff";
        ctx.textAlign = "center";
        ctx.font = FONT;
        ctx.fillText(text(r, c), g.left + c * w + w / 2, g.top + r * h + h / 2);
      }
    }));
    ctx.fillStyle = ink();
    rowLabels.forEach((label, r) => {
      ctx.font = active && active.r === r ? `bold ${FONT}` : FONT;
      ctx.textAlign = "right";
      ctx.fillText(fitText(ctx, label, LABEL_MAX), g.left - 4, g.top + r * h + h / 2);
    });
    (colLabels || []).forEach((label, c) => {
      ctx.save();
      ctx.font = active && active.c === c ? `bold ${FONT}` : FONT;
      ctx.translate(g.left + c * w + w / 2, g.top - 4);
      ctx.rotate(-Math.PI / 4);
      ctx.textAlign = "left";
      ctx.fillText(fitText(ctx, label, LABEL_MAX), 0, 0);
      ctx.restore();
    });
    if (decorate) decorate(ctx, g, ink());
    if (active) {
      ctx.strokeStyle = focusColour();
      ctx.lineWidth = 2;
      ctx.strokeRect(g.left + active.c * w - 1, g.top + active.r * h - 1, w + 1, h + 1);
    }
  };
  draw(null);
  const go = cursor(canvas, readout, {
    rows: values.length, cols: values[0].length, read, show: (r, c) => draw({ r, c }),
  });
  canvas.addEventListener("mousemove", (event) => {
    const box = canvas.getBoundingClientRect();
    const c = Math.floor((event.clientX - box.left - g.left) / w);
    const r = Math.floor((event.clientY - box.top - g.top) / h);
    if (r >= 0 && r < values.length && c >= 0 && c < values[0].length) go(r, c);
  });
  return canvas;
}

/** The largest and smallest of many numbers (spreading a long array into Math.max can overflow the stack). */
export const largest = (numbers) => numbers.reduce((a, b) => Math.max(a, b), -Infinity);
export const smallest = (numbers) => numbers.reduce((a, b) => Math.min(a, b), Infinity);

/** A piece in quotes, as the readouts say it. */
export const quoted = (piece) => `“${piece}”`;

/** A picture under its own short heading. */
export function titled(title, ...pictures) {
  const figure = make("figure", "titled");
  figure.append(make("figcaption", "", title), ...pictures);
  return figure;
}

/** A box that scrolls its picture sideways, so that the page never does. */
export function scrollBox(...children) {
  const box = make("div", "picture-box");
  box.append(...children);
  return box;
}

/**
 * A table named `name` of cells (rows x cols) under `colHeads` (positions, or pieces written upright when
 * `upright`), each row under its `rowHeads`; `cell(r, c)` gives {text, className}. One Tab stop: the box.
 */
export function cellTable({ name, colHeads, rowHeads, cell, read, readout, upright = false }) {
  const table = make("table", `cells${upright ? " upright" : ""}`);
  const head = table.createTHead().insertRow();
  head.append(make("td"), ...colHeads.map((label) => headCell(label, "col")));
  const body = table.createTBody();
  const cells = rowHeads.map((label, r) => {
    const row = body.insertRow();
    row.append(headCell(label, "row"));
    return colHeads.map((_, c) => {
      const { text, className } = cell(r, c);
      return row.appendChild(make("td", className, text));
    });
  });
  const box = scrollBox(table);
  box.tabIndex = 0;
  box.setAttribute("role", "group");
  box.setAttribute("aria-label", name);
  cursor(box, readout, {
    rows: rowHeads.length, cols: colHeads.length, read, show: (r, c) => mark(cells.flat(), cells[r][c]),
  });
  return box;
}

function headCell(label, scope) {
  const th = make("th", "", label);
  th.scope = scope;
  return th;
}

/** Marks `item` as the cursor's among `items`, scrolled into its box's view. */
function mark(items, item) {
  for (const other of items) other.classList.toggle("cursor", other === item);
  item.scrollIntoView({ block: "nearest", inline: "nearest" });
}

/**
 * A list named `name` with a row per label: one bar per series (each `{name, values, className}`), its length
 * `value / max`, and the values in digits joined by `signs` (" + ", " → " ...). One Tab stop, read by ↑ ↓.
 */
export function barRows({ name, labels, series, max, signs, read, readout }) {
  const list = make("ol", "bar-rows");
  const items = labels.map((label, i) => {
    const item = make("li");
    const bars = make("span", "bar-stack");
    bars.setAttribute("aria-hidden", "true"); // the digits say it
    for (const s of series) {
      const track = make("span", "bar-track");
      const bar = make("span", `bar ${s.className}`);
      bar.style.width = `${clamp(s.values[i] / max, 0, 1) * 100}%`;
      track.append(bar);
      bars.append(track);
    }
    const digits = series.map((s, k) => `${k ? signs[k - 1] : ""}${s.values[i].toFixed(2)}`).join("");
    item.append(make("span", "piece", label), bars, make("span", "digits", digits));
    return list.appendChild(item);
  });
  return readableList(list, name, items, read, readout);
}

/** Makes `list` (of `items`) one Tab stop named `name`, walked by the arrow keys, `read(i)` said in `readout`. */
export function readableList(list, name, items, read, readout) {
  list.tabIndex = 0;
  list.setAttribute("aria-label", name);
  cursor(list, readout, { rows: items.length, cols: 1, read: (r) => read(r), show: (r) => mark(items, items[r]) });
  return list;
}

/** A legend of swatches in the series' classes with their names. */
export function barLegend(series) {
  const legend = make("p", "bar-legend");
  for (const s of series) {
    const entry = make("span");
    const swatch = make("span", `swatch bar ${s.className}`);
    swatch.setAttribute("aria-hidden", "true");
    entry.append(swatch, ` ${s.name}`);
    legend.append(entry);
  }
  return legend;
}
