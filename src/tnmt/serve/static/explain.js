// The "Step through the search" view: the first line's search as /v1/explain traces it under the glossary, asked
// for when the view opens and when the source, the pair, the beam or the glossary changes while it is open
// (debounced; a stale trace never replaces a newer one), stepped through by buttons and keys, played, with
// "Step t of n" spoken.

import { Latest } from "./api.js";
import { drawAttentionRow, drawPanels, fillExplainLayerHead } from "./explain_panels.js";
import { bestChild, buildTree, drawEdges, keepSelectionInView, markTree, parentOf } from "./explain_tree.js";
import { steering } from "./glossary.js";
import { caretSentence } from "./sentences.js";
import { DEBOUNCE_MS, currentModel, server, sourceLines } from "./settings.js";
import { $, clamp, count, sentence } from "./util.js";

const TOP_K = 5; // next-subword candidates the server lists per hypothesis
const PLAY_MS = 1200; // one step per this while playing: time to read the tree and the bars
const el = {
  pair: $("pair"), source: $("source"), beam: $("beam"),
  explainSection: $("explain-section"), explainView: $("explain-view"), explainStep: $("explain-step"),
  explainStatus: $("explain-status"), explainError: $("explain-error"), explainTranslation: $("explain-translation"),
  explainFirst: $("explain-first"), explainBack: $("explain-back"), explainPlay: $("explain-play"),
  explainForward: $("explain-forward"), explainLast: $("explain-last"), tree: $("tree"),
  explainLayer: $("explain-layer"), explainHead: $("explain-head"), termsLegend: $("terms-legend"),
};
const state = {
  latest: new Latest((busy) => el.explainView.setAttribute("aria-busy", String(busy))),
  timer: 0,
  key: null, // the request (as JSON) whose trace is shown or on its way: the same one is not asked twice
  trace: null, // the answer of /v1/explain
  tree: null, // {svg, columns: [{box, items: [{node, parent, fate, from}]}], nodes: [step][hypothesis]}
  step: 0, // the step shown
  hyp: 0, // the selected hypothesis of that step
  playing: 0, // the play interval; 0 when paused
};

export function wireExplain() {
  el.explainSection.addEventListener("toggle", () => {
    if (el.explainSection.open) {
      drawEdges(state); // laid out again now that the view shows
      scheduleExplain(0);
    } else {
      stopExplaining();
    }
  });
  el.source.addEventListener("input", () => scheduleExplain(DEBOUNCE_MS));
  for (const moved of ["keyup", "click"]) el.source.addEventListener(moved, () => scheduleExplain(DEBOUNCE_MS));
  el.beam.addEventListener("change", () => scheduleExplain(0));
  el.pair.addEventListener("change", () => scheduleExplain(0));
  el.explainFirst.addEventListener("click", () => navigate(() => goToStep(0, 0)));
  el.explainBack.addEventListener("click", () => navigate(() => stepBy(-1)));
  el.explainForward.addEventListener("click", () => navigate(() => stepBy(1)));
  el.explainLast.addEventListener("click", () => navigate(goToLast));
  el.explainPlay.addEventListener("click", togglePlay);
  el.explainView.addEventListener("keydown", onExplainKey);
  el.tree.addEventListener("click", (event) => {
    const node = event.target.closest("button.node");
    if (node) navigate(() => goToStep(Number(node.dataset.step), Number(node.dataset.hyp)));
  });
  el.explainLayer.addEventListener("change", () => drawAttentionRow(state));
  el.explainHead.addEventListener("change", () => drawAttentionRow(state));
  // e.g. a phone turned upright: a narrower tree box
  window.addEventListener("resize", () => keepSelectionInView(state));
}

/** Asks for a new trace after `delay` ms, only while the view is open (a closed view costs the server nothing). */
export function scheduleExplain(delay) {
  if (!el.explainSection.open) return;
  clearTimeout(state.timer);
  state.timer = setTimeout(explain, delay);
}

function stopExplaining() {
  clearTimeout(state.timer);
  state.latest.cancel(); // whatever is still on its way is stale
  state.key = null; // opening the view again asks again
  el.explainView.setAttribute("aria-busy", "false");
  pause();
}

/** The body of POST /v1/explain for the sentence the caret is in (the first line's first sentence when it is on
 * no line), or null when there is none. */
function explainRequest() {
  const at = caretSentence(el.source, sourceLines());
  if (!at) return null;
  const model = currentModel();
  return {
    text: at.text, sentence: at.sentence, source: model.source, target: model.target, beam_size: Number(el.beam.value),
    top_k: TOP_K, ...steering(),
  };
}

async function explain() {
  if (!el.explainSection.open || !server.models.length) return;
  const body = explainRequest();
  const key = JSON.stringify(body);
  if (key === state.key) return; // e.g. another line was edited: the caret's sentence's trace stands
  state.latest.cancel(); // the newer request wins
  state.key = key;
  el.explainError.textContent = "";
  if (!body) {
    showTrace(null);
    setExplainStatus("Type a sentence above to step through its search.");
    return;
  }
  setExplainStatus("Tracing the search…");
  await state.latest.send("/v1/explain", body, {
    answer: (data) => {
      if (!data || !Array.isArray(data.steps) || data.steps.length === 0) throw new Error("the server's answer has no steps");
      showTrace(data);
      setExplainStatus(`Traced by ${data.model || body.source + "-" + body.target} with beam ${data.beam_size ?? body.beam_size}: `
        + `${count(data.steps.length, "step", "steps")}.`);
    },
    refused: (response, message) => failExplain(`The server refused (${response.status}): ${sentence(message)}`),
    fail: (error) => failExplain(error instanceof TypeError
      ? "Cannot reach the server (network error). Is `tnmt serve` still running?"
      : `Tracing failed: ${error.message}.`),
  });
}

function failExplain(message) {
  state.key = null; // the same line and beam may be asked again
  el.explainView.classList.add("stale");
  setExplainStatus("");
  el.explainError.textContent = message;
}

function setExplainStatus(text) {
  el.explainStatus.textContent = text;
}

/** Shows a new trace (or none) from its first step, with the best hypothesis selected. */
function showTrace(trace) {
  pause();
  el.explainView.classList.remove("stale");
  state.trace = trace;
  state.step = 0;
  state.hyp = 0;
  state.tree = trace ? buildTree(trace) : null;
  if (!trace) el.tree.replaceChildren();
  el.explainTranslation.textContent = trace ? trace.translation : "";
  el.explainTranslation.lang = currentModel().target;
  el.termsLegend.hidden = !(trace && trace.steps[0].hypotheses[0].constraints?.length);
  fillExplainLayerHead(trace);
  renderStep();
}

/** A move by the reader stops playing. */
function navigate(move) {
  pause();
  move();
}

/** Shows step `t` with its hypothesis `hyp` selected; a tree that had focus gives it to the selection. */
function goToStep(t, hyp) {
  if (!state.trace) return;
  const hadFocus = el.tree.contains(document.activeElement);
  state.step = clamp(t, 0, state.trace.steps.length - 1);
  state.hyp = clamp(hyp, 0, state.trace.steps[state.step].hypotheses.length - 1);
  renderStep();
  const selected = state.tree.nodes[state.step][state.hyp];
  if (hadFocus && selected) selected.focus({ preventScroll: true });
}

/** One step on or back, following the selected hypothesis's line: on to its best kept child, back to its parent. */
function stepBy(delta) {
  if (!state.trace) return;
  const t = state.step + delta;
  if (t < 0 || t >= state.trace.steps.length) return;
  goToStep(t, delta > 0 ? bestChild(state.trace, state.step, state.hyp) : parentOf(state.trace, state.step, state.hyp));
}

function goToLast() {
  if (state.trace) goToStep(state.trace.steps.length - 1, 0);
}

function togglePlay() {
  if (state.playing) {
    pause();
    return;
  }
  if (!state.trace) return;
  if (state.step === state.trace.steps.length - 1) goToStep(0, 0); // from the start again
  state.playing = setInterval(() => {
    stepBy(1);
    if (state.step === state.trace.steps.length - 1) pause();
  }, PLAY_MS);
  el.explainPlay.textContent = "❙❙ Pause";
}

function pause() {
  clearInterval(state.playing);
  state.playing = 0;
  el.explainPlay.textContent = "▶ Play";
}

function onExplainKey(event) {
  if (!state.trace || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
  if (event.target.closest("select")) return; // arrows, Home and End belong to the select
  const inTree = el.tree.contains(event.target);
  // Space on a button outside the tree presses that button, as everywhere else.
  if (event.key === " " && event.target.closest("button") && !inTree) return;
  const actions = {
    ArrowRight: () => navigate(() => stepBy(1)),
    ArrowLeft: () => navigate(() => stepBy(-1)),
    Home: () => navigate(() => goToStep(0, 0)),
    End: () => navigate(goToLast),
    " ": togglePlay,
    ...(inTree && {
      ArrowDown: () => navigate(() => goToStep(state.step, state.hyp + 1)),
      ArrowUp: () => navigate(() => goToStep(state.step, state.hyp - 1)),
    }),
  };
  const action = actions[event.key];
  if (!action) return;
  event.preventDefault();
  action();
}

function renderStep() {
  const { trace, step } = state;
  updateStepper();
  if (!trace) {
    el.explainStep.textContent = "No trace yet.";
    drawPanels(state);
    return;
  }
  el.explainStep.textContent = `Step ${step + 1} of ${trace.steps.length}: ${stepSummary(trace.steps[step])}`;
  markTree(state);
  drawEdges(state);
  drawPanels(state);
}

function stepSummary(step) {
  const fates = (fate) => step.candidates.filter((c) => c.fate === fate).length;
  return `the decoder extends ${count(step.hypotheses.length, "hypothesis", "hypotheses")}; `
    + `${fates("kept")} kept, ${fates("finished")} finished, ${fates("pruned")} pruned.`;
}

function updateStepper() {
  const { trace, step } = state;
  const last = trace ? trace.steps.length - 1 : 0;
  const focused = document.activeElement;
  el.explainFirst.disabled = el.explainBack.disabled = !trace || step === 0;
  el.explainForward.disabled = el.explainLast.disabled = !trace || step === last;
  el.explainPlay.disabled = !trace;
  if (focused && focused.disabled) el.explainView.focus({ preventScroll: true }); // keys keep working
}
