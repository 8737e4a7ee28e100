// The "Watch it learn" view: the caret's sentence through the training run of the served model, model by model
// as the run kept them (POST /v1/replay), when the server has the run (`"replay": true` in /v1/models).
//
// Promises to the user:
// - nothing is asked until the view is opened; then the caret's sentence (and the reference, if typed) is replayed
//   once, under the same debounce and abort rules as the other views (a stale replay never replaces a newer one);
// - the slider (a native range: ← →, Home, End) and Play walk the kept models; "Model k of n, update s" is said;
// - the model's beam translation shows its words tinted by probability (and each word's probability in its title),
//   its greedy translation below, the metrics logged by then, its aligning layer's cross-attention beside the
//   final model's (each one Tab stop read cell by cell, as in "Inside the model"), and the run's curves with a line
//   at its update; errors are sentences in the view's own alert region.

import { Latest } from "./api.js";
import { heatMap, scrollBox, titled } from "./inside_draw.js";
import { caretSentenceText } from "./sentences.js";
import { currentModel, DEBOUNCE_MS, sourceLines } from "./settings.js";
import { $, count, make, percent, probability, sentence } from "./util.js";

const PLAY_MS = 900; // a model shown this long while playing
const CELL = [22, 18]; // px of an attention cell

const el = {
  section: $("replay-section"), view: $("replay-view"), source: $("source"), pair: $("pair"),
  reference: $("replay-reference"), play: $("replay-play"), slider: $("replay-slider"), step: $("replay-step"),
  status: $("replay-status"), error: $("replay-error"), moment: $("replay-moment"), words: $("replay-words"),
  greedy: $("replay-greedy"), metrics: $("replay-metrics"), attention: $("replay-attention"),
  final: $("replay-final"), readout: $("replay-readout"), curves: $("replay-curves"),
};
const state = {
  latest: new Latest((busy) => el.view.setAttribute("aria-busy", String(busy))),
  timer: 0, key: null, replay: null, playing: 0,
};

export function wireReplay() {
  el.section.addEventListener("toggle", () => (el.section.open ? scheduleReplay(0) : stop()));
  el.source.addEventListener("input", () => scheduleReplay(DEBOUNCE_MS));
  for (const moved of ["keyup", "click"]) el.source.addEventListener(moved, () => scheduleReplay(DEBOUNCE_MS));
  el.reference.addEventListener("input", () => scheduleReplay(DEBOUNCE_MS));
  el.pair.addEventListener("change", () => {
    showReplayView();
    scheduleReplay(0);
  });
  el.slider.addEventListener("input", () => show(Number(el.slider.value)));
  el.play.addEventListener("click", togglePlay);
}

/** The view is offered only for a model whose training run the server has. */
export function showReplayView() {
  const model = currentModel();
  el.section.hidden = !(model && model.replay);
  if (el.section.hidden && el.section.open) el.section.open = false;
}

/** Asks for a replay after `delay` ms, only while the view is open. */
export function scheduleReplay(delay) {
  if (!el.section.open || el.section.hidden) return;
  clearTimeout(state.timer);
  state.timer = setTimeout(replay, delay);
}

function stop() {
  clearTimeout(state.timer);
  state.latest.cancel();
  state.key = null;
  pause();
}

async function replay() {
  const text = caretSentenceText(el.source, sourceLines());
  const model = currentModel();
  const body = { text: text || "", source: model.source, target: model.target };
  if (el.reference.value.trim()) body.reference = el.reference.value.trim();
  const key = JSON.stringify(body);
  if (key === state.key) return;
  state.latest.cancel();
  state.key = key;
  el.error.textContent = "";
  if (!text) {
    setStatus("Type a sentence above to watch the run learn it.");
    return;
  }
  setStatus("Replaying the run: every kept model translates the sentence…");
  await state.latest.send("/v1/replay", body, {
    answer: (data) => {
      if (!data || !Array.isArray(data.moments) || !data.moments.length) throw new Error("the answer has no models");
      state.replay = data;
      el.slider.max = String(data.moments.length - 1);
      el.slider.disabled = el.play.disabled = false;
      el.moment.hidden = false;
      drawFinal(data);
      show(0);
      setStatus(`${count(data.moments.length, "kept model", "kept models")}, updates ${data.moments[0].step} to `
        + `${data.moments[data.moments.length - 1].step}.`);
    },
    refused: (response, message) => fail(`The server refused (${response.status}): ${sentence(message)}`),
    fail: (error) => fail(error instanceof TypeError
      ? "Cannot reach the server (network error). Is `tnmt serve` still running?"
      : `The replay failed: ${error.message}.`),
  });
}

function fail(message) {
  state.key = null;
  setStatus("");
  el.error.textContent = message;
}

function setStatus(text) {
  el.status.textContent = text;
}

/** Shows kept model `k` of the replay. */
function show(k) {
  const moments = state.replay.moments;
  const m = moments[k];
  el.slider.value = String(k);
  el.step.textContent = `Model ${k + 1} of ${moments.length}: update ${m.step} (${m.kind})`;
  const words = m.words.map((word, i) => {
    const p = m.word_probs[i];
    const span = make("span", p < 0.5 ? "replay-word low" : "replay-word", word);
    span.style.setProperty("--p", String(p));
    span.title = `probability ${percent(p)}`;
    return span;
  });
  el.words.replaceChildren(...(words.length ? words : [nothing()]));
  el.greedy.replaceChildren(m.greedy.trim() ? m.greedy : nothing());
  el.metrics.textContent = metricsLine(m);
  el.attention.replaceChildren(attentionPicture(m, `Update ${m.step}`));
  drawCurves(state.replay, m.step);
}

/** What an empty translation shows: as `tnmt replay` prints it. */
function nothing() {
  return make("span", "replay-nothing", "(nothing: the model writes EOS first)");
}

function metricsLine(m) {
  const names = { train_loss: "training loss", val_loss: "validation loss", val_bleu: "validation BLEU" };
  const parts = Object.entries(names).filter(([key]) => key in m.metrics)
    .map(([key, name]) => `${name} ${Number(m.metrics[key]).toFixed(2)}`);
  parts.push(`confidence ${percent(m.confidence)}`);
  if (m.reference_log_prob !== null) {
    parts.push(`reference: ${probability(Math.exp(m.reference_log_prob / Math.max(m.reference_tokens, 1)))} a token`);
  }
  return `${parts.join(", ")}.`;
}

function drawFinal(data) {
  const last = data.moments[data.moments.length - 1];
  el.final.replaceChildren(attentionPicture(last, `The last kept model (update ${last.step})`));
}

/** The aligning layer's cross-attention of one model, a heat map read cell by cell. */
function attentionPicture(m, title) {
  const a = m.attention;
  const head = a.head === 0 ? "the heads' mean" : `head ${a.head}`;
  const map = heatMap({
    values: a.weights, rowLabels: a.target, colLabels: a.source, cell: CELL, lo: 0, hi: 1,
    name: `${title}: cross-attention of decoder layer ${a.layer}, ${head}`,
    read: (r, c) => `${title}: “${a.target[r]}” attends to “${a.source[c]}” with ${probability(a.weights[r][c])}.`,
    readout: el.readout,
  });
  return titled(`${title}: layer ${a.layer}, ${head}`, scrollBox(map));
}

/** Training loss (left axis) and validation BLEU (right axis) against the update, a line at `step`. */
function drawCurves(data, step) {
  const [w, h, pad] = [600, 180, 30];
  const train = data.curves.train_loss || [];
  const bleu = data.curves.val_bleu || [];
  const last = Math.max(1, ...[...train, ...bleu].map(([s]) => s), data.moments[data.moments.length - 1].step);
  const x = (s) => pad + (s / last) * (w - 2 * pad);
  const line = (points, lo, hi, className) => {
    if (!points.length) return "";
    const y = (v) => h - pad - ((v - lo) / Math.max(hi - lo, 1e-9)) * (h - 2 * pad);
    return `<polyline class="${className}" points="${points.map(([s, v]) => `${x(s)},${y(v)}`).join(" ")}"/>`;
  };
  const losses = train.map(([, v]) => v);
  const scores = bleu.map(([, v]) => v);
  el.curves.innerHTML = [
    `<line class="axis" x1="${pad}" y1="${h - pad}" x2="${w - pad}" y2="${h - pad}"/>`,
    line(train, Math.min(...losses, 0), Math.max(...losses, 1), "loss"),
    line(bleu, 0, Math.max(...scores, 1), "bleu"),
    `<line class="now" x1="${x(step)}" y1="${pad / 2}" x2="${x(step)}" y2="${h - pad}"/>`,
    `<text x="${pad}" y="${h - 8}">update 0</text>`,
    `<text x="${w - pad}" y="${h - 8}" text-anchor="end">${last}</text>`,
    `<text class="loss" x="${pad}" y="22">training loss</text>`,
    `<text class="bleu" x="${w - pad}" y="22" text-anchor="end">validation BLEU</text>`,
  ].join("");
  el.curves.setAttribute("aria-label", `Training loss and validation BLEU to update ${last}; marked: update ${step}.`);
}

function togglePlay() {
  if (state.playing) {
    pause();
    return;
  }
  if (Number(el.slider.value) >= state.replay.moments.length - 1) show(0);
  el.play.textContent = "⏸ Pause";
  state.playing = setInterval(() => {
    const next = Number(el.slider.value) + 1;
    if (next >= state.replay.moments.length) pause();
    else show(next);
  }, PLAY_MS);
}

function pause() {
  clearInterval(state.playing);
  state.playing = 0;
  el.play.textContent = "▶ Play";
}
