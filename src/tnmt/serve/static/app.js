// The page of `tnmt serve`: translate as you type, and draw where the decoder looked.
//
// Promises to the user:
// - typing waits ~300 ms of quiet before asking the server; a newer request aborts the older one and a
//   late answer to an older request never overwrites a newer one;
// - one line is one sentence (with its attention heat map); several lines are translated line by line;
// - a line over `limits.max_chars` is not sent: the limit is per line, as the server's is per text (each
//   line is one text), and the counter and the error name the line in words;
// - every server or network error is shown as a sentence in #error (an ARIA live region).
"use strict";

const $ = (id) => document.getElementById(id);
const el = {
  pair: $("pair"), source: $("source"), beam: $("beam"), alternatives: $("alternatives"),
  output: $("output"), alternativesList: $("alternatives-list"), copy: $("copy"), counter: $("counter"),
  error: $("error"), status: $("status"), heatmap: $("heatmap"), layer: $("layer"), head: $("head"),
  readout: $("heatmap-readout"), legendMin: $("legend-min"), legendMax: $("legend-max"),
};

const DEBOUNCE_MS = 300;
const MAX_RETRIES = 3; // after 503 "queue full", honouring Retry-After
const state = {
  models: [],
  limits: { max_chars: Infinity, max_texts: Infinity, max_beam_size: 1, max_n_best: 1 },
  seq: 0,            // id of the newest request; answers to older ones are dropped
  controller: null,  // AbortController of the request in flight
  timer: 0,          // debounce / retry timer
  retries: 0,
  attention: null,   // {source_pieces, target_pieces, cross: [layer][head][target][source]}
  cell: null,        // {r, c}: the heat-map cell under the pointer or keyboard focus
  geometry: null,    // where the heat-map cells are on the canvas
};

// ---------------------------------------------------------------------------------------------- setup

async function init() {
  wireEvents();
  try {
    const response = await fetch("/v1/models");
    const data = await readJson(response);
    if (!response.ok) throw new Error(errorMessage(response, data));
    if (!data || !Array.isArray(data.models) || data.models.length === 0) throw new Error("the server lists no models");
    state.models = data.models;
    state.limits = { ...state.limits, ...data.limits };
  } catch (error) {
    showError(`Could not load the list of models: ${error.message}. Reload the page to try again.`);
    el.pair.replaceChildren(new Option("no models", ""));
    return;
  }
  el.pair.replaceChildren(...state.models.map((m) => new Option(`${m.source} → ${m.target}  (${m.id})`, m.id)));
  el.pair.disabled = false;
  onPairChange({ translate: false });
  updateCounter();
  if (el.source.value.trim()) translateNow(); // text restored by the browser on reload
}

function wireEvents() {
  el.source.addEventListener("input", () => {
    updateCounter();
    state.retries = 0;
    schedule(DEBOUNCE_MS);
  });
  el.source.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) {
      event.preventDefault();
      translateNow();
    }
  });
  el.pair.addEventListener("change", () => onPairChange({ translate: true }));
  el.beam.addEventListener("change", () => {
    fillAlternatives();
    translateNow();
  });
  el.alternatives.addEventListener("change", translateNow);
  el.layer.addEventListener("change", drawHeatmap);
  el.head.addEventListener("change", drawHeatmap);
  el.copy.addEventListener("click", copyTranslation);
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

function currentModel() {
  return state.models.find((m) => m.id === el.pair.value) || state.models[0];
}

function onPairChange({ translate }) {
  const model = currentModel();
  const max = state.limits.max_beam_size;
  const preferred = clamp((model.decoding && model.decoding.beam_size) || 1, 1, max);
  el.beam.replaceChildren(...range(1, max).map((k) => new Option(k === 1 ? "1 (greedy)" : String(k), String(k))));
  el.beam.value = String(preferred);
  fillAlternatives();
  el.source.lang = model.source;
  el.output.lang = model.target;
  if (translate) translateNow();
}

/** Options 0..min(beam, max_n_best); the value is the n_best sent (the server lists alternatives when > 1). */
function fillAlternatives() {
  const max = Math.min(Number(el.beam.value), state.limits.max_n_best);
  const previous = Number(el.alternatives.value) || 0;
  el.alternatives.replaceChildren(
    ...range(0, max).map((k) => new Option(k === 0 ? "none" : k === 1 ? "1 (best only)" : String(k), String(k))),
  );
  el.alternatives.value = String(Math.min(previous, max));
}

// ----------------------------------------------------------------------------------------- the counter

/** Characters as the server counts them: Unicode code points (Python's len), not UTF-16 units. */
function charCount(text) {
  return [...text].length;
}

/** The lines the server is sent (trimmed, non-empty), each with its 1-based line number in the textarea. */
function sourceLines() {
  return el.source.value.split(/\r?\n/)
    .map((line, i) => ({ text: line.trim(), number: i + 1 }))
    .filter((line) => line.text);
}

/** The longest line as {number, n} (n in characters), or {number: 0, n: 0} when there is none. */
function longestLine(lines) {
  return lines.reduce(
    (longest, line) => (charCount(line.text) > longest.n ? { number: line.number, n: charCount(line.text) } : longest),
    { number: 0, n: 0 },
  );
}

function updateCounter() {
  const lines = sourceLines();
  const { number, n } = longestLine(lines);
  const max = state.limits.max_chars;
  const over = n > max;
  const limit = Number.isFinite(max) ? ` / ${max}` : "";
  const which = lines.length > 1 ? `longest line (${number}): ` : "";
  el.counter.textContent = over
    ? `${which}${n}${limit} characters: ${n - max} over the limit`
    : `${which}${n}${limit} characters${lines.length > 1 ? " per line" : ""}`;
  el.counter.classList.toggle("over", over);
  el.source.setAttribute("aria-invalid", String(over));
  return over;
}

// ------------------------------------------------------------------------------------- translating

function schedule(delay) {
  clearTimeout(state.timer);
  state.timer = setTimeout(translate, delay);
}

function translateNow() {
  state.retries = 0;
  schedule(0);
}

async function translate() {
  if (!state.models.length) return;
  if (state.controller) state.controller.abort(); // the newer request wins
  state.controller = null;
  const seq = ++state.seq;
  const numbered = sourceLines();
  const lines = numbered.map((line) => line.text);
  if (lines.length === 0) {
    clearError();
    showTranslation(null);
    setStatus("");
    return;
  }
  const { number, n } = longestLine(numbered);
  if (n > state.limits.max_chars) {
    setStale();
    setStatus("");
    const which = lines.length > 1 ? `Line ${number}` : "The text";
    showError(`${which} has ${n} characters; the limit is ${state.limits.max_chars} per line. Shorten it by ${n - state.limits.max_chars} to translate.`);
    return;
  }
  if (lines.length > state.limits.max_texts) {
    setStale();
    setStatus("");
    showError(`The text has ${lines.length} lines; the server translates at most ${state.limits.max_texts} at once.`);
    return;
  }

  const model = currentModel();
  const beam = Number(el.beam.value);
  const nBest = Number(el.alternatives.value);
  const single = lines.length === 1;
  const body = { text: single ? lines[0] : lines, source: model.source, target: model.target, beam_size: beam };
  if (nBest > 0) body.n_best = nBest;
  if (single) body.return_attention = true; // the server gives attention for one sentence only

  const controller = new AbortController();
  state.controller = controller;
  el.output.setAttribute("aria-busy", "true");
  setStatus("Translating…");
  const started = performance.now();
  try {
    const response = await fetch("/v1/translate", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    const data = await readJson(response);
    if (seq !== state.seq) return; // a newer request exists: this answer is stale
    if (!response.ok) {
      onHttpError(response, data);
      return;
    }
    if (!data || !Array.isArray(data.translations)) throw new Error("the server's answer has no translations");
    clearError();
    state.retries = 0;
    showTranslation(data.translations, { single });
    const ms = Math.round(performance.now() - started);
    setStatus(`Translated by ${data.model || model.id} with beam ${beam} in ${ms} ms.`);
  } catch (error) {
    if (error.name === "AbortError" || seq !== state.seq) return;
    setStale();
    setStatus("");
    showError(error instanceof TypeError
      ? "Cannot reach the server (network error). Is `tnmt serve` still running?"
      : `Translation failed: ${error.message}.`);
  } finally {
    if (seq === state.seq) {
      el.output.setAttribute("aria-busy", "false");
      state.controller = null;
    }
  }
}

async function readJson(response) {
  try {
    return await response.json();
  } catch (error) {
    if (error.name === "AbortError") throw error;
    return null;
  }
}

function errorMessage(response, data) {
  if (data && typeof data.error === "string" && data.error) return data.error;
  return `HTTP ${response.status} ${response.statusText}`.trim();
}

function onHttpError(response, data) {
  setStale();
  setStatus("");
  let message = errorMessage(response, data);
  const retryAfter = Number(response.headers.get("Retry-After"));
  if (response.status === 503 && retryAfter > 0 && state.retries < MAX_RETRIES) {
    state.retries += 1;
    message = `${sentence(message)} Retrying in ${retryAfter} s.`;
    schedule(retryAfter * 1000);
  } else if (response.status === 504) {
    message = `${sentence(message)} A shorter text or a smaller beam is faster.`;
  }
  showError(`The server refused (${response.status}): ${message}`);
}

// ------------------------------------------------------------------------------------------ output

function showTranslation(translations, { single = true } = {}) {
  el.output.classList.remove("stale");
  const text = translations ? translations.map((t) => t.text).join("\n") : "";
  el.output.textContent = text;
  el.copy.disabled = text === "";

  const first = translations && translations[0];
  const alternatives = single && first && Array.isArray(first.alternatives) ? first.alternatives : [];
  el.alternativesList.replaceChildren(...alternatives.map((alt, i) => {
    const item = document.createElement("li");
    const hypothesis = document.createElement("span");
    hypothesis.className = "hypothesis";
    hypothesis.lang = currentModel().target;
    hypothesis.textContent = alt.text;
    const score = document.createElement("span");
    score.className = "score";
    score.textContent = `score ${Number(alt.score).toFixed(3)}${i === 0 ? " (shown above)" : ""}`;
    item.append(hypothesis, score);
    return item;
  }));
  el.alternativesList.closest("section").hidden = alternatives.length === 0;

  state.attention = single && first && first.attention ? first.attention : null;
  state.cell = null;
  fillLayerHead();
  drawHeatmap();
}

/** Marks the shown translation as not matching the source any more (after an error). */
function setStale() {
  el.output.classList.add("stale");
}

function setStatus(text) {
  el.status.textContent = text;
}

function showError(text) {
  el.error.textContent = text;
}

function clearError() {
  el.error.textContent = "";
}

async function copyTranslation() {
  const text = el.output.textContent;
  if (!text) return;
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
    } else if (!copyWithSelection(text)) {
      throw new Error("copy command refused");
    }
    flash(el.copy, "Copied");
    setStatus("Translation copied to the clipboard.");
  } catch {
    // Last resort: select the translation so that Ctrl+C / ⌘C copies it.
    const selection = window.getSelection();
    const rangeOfOutput = document.createRange();
    rangeOfOutput.selectNodeContents(el.output);
    selection.removeAllRanges();
    selection.addRange(rangeOfOutput);
    setStatus("The browser refused to copy: the translation is selected, press Ctrl+C (⌘C) to copy it.");
  }
}

/** The pre-Clipboard-API way (plain-http pages on another host are not a secure context). */
function copyWithSelection(text) {
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.style.position = "fixed";
  area.style.opacity = "0";
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } finally {
    area.remove();
    el.copy.focus();
  }
  return ok;
}

function flash(button, label) {
  const original = button.dataset.label || button.textContent;
  button.dataset.label = original;
  button.textContent = label;
  setTimeout(() => { button.textContent = original; }, 1500);
}

// ---------------------------------------------------------------------------------------- heat map

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
  el.layer.replaceChildren(...range(0, layers - 1).map((l) => new Option(`${l + 1} of ${layers}`, String(l))));
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

function colour(t) {
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
function resizeCanvas(canvas, ctx, width, height) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.round(width * dpr);
  canvas.height = Math.round(height * dpr);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
}

function fitText(ctx, text, maxWidth) {
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

// ------------------------------------------------------------------------------------------- helpers

/** Ends a message with a full stop unless it has one. */
function sentence(text) {
  return /[.!?]$/.test(text) ? text : `${text}.`;
}

function clamp(x, lo, hi) {
  return Math.max(lo, Math.min(hi, x));
}

/** Integers lo..hi inclusive. */
function range(lo, hi) {
  return Array.from({ length: Math.max(0, hi - lo + 1) }, (_, i) => lo + i);
}

init();
