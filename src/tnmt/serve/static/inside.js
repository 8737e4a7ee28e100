// The "Inside the model" view: one teacher-forced forward pass over the first line and its translation (the
// model's own at the beam above, or one typed in the view), as /v1/inspect records it, drawn stage by stage in the
// lesson's order by inside_panels.js and inside_layers.js. Asked for when the view opens and when the source, the
// pair, the beam or the translation to feed changes while it is open (debounced; a stale answer never replaces a
// newer one); a closed view asks nothing.

import { Latest } from "./api.js";
import { drawLayers, wireLayers } from "./inside_layers.js";
import { drawEmbedding, drawMasks, drawPieces, drawSoftmax } from "./inside_panels.js";
import { caretSentence } from "./sentences.js";
import { DEBOUNCE_MS, currentModel, server, sourceLines } from "./settings.js";
import { $, count, sentence } from "./util.js";

const TOP_K = 5; // next pieces shown per position
const el = {
  pair: $("pair"), source: $("source"), beam: $("beam"), section: $("inside-section"), view: $("inside-view"),
  feed: $("inside-translation"), status: $("inside-status"), error: $("inside-error"), fed: $("inside-fed"),
  whose: $("inside-whose"), stages: $("inside-stages"),
};
const state = {
  latest: new Latest((busy) => el.view.setAttribute("aria-busy", String(busy))),
  timer: 0,
  key: null, // the request (as JSON) whose answer is shown or on its way: the same one is not asked twice
  data: null, // the answer of /v1/inspect shown
};

export function wireInside() {
  el.section.addEventListener("toggle", () => (el.section.open ? scheduleInside(0) : stopInside()));
  el.source.addEventListener("input", () => scheduleInside(DEBOUNCE_MS));
  for (const moved of ["keyup", "click"]) el.source.addEventListener(moved, () => scheduleInside(DEBOUNCE_MS));
  el.feed.addEventListener("input", () => scheduleInside(DEBOUNCE_MS));
  el.beam.addEventListener("change", () => scheduleInside(0));
  el.pair.addEventListener("change", () => scheduleInside(0));
  wireLayers(() => state.data);
}

/** Asks for a new pass after `delay` ms, only while the view is open (a closed view costs the server nothing). */
export function scheduleInside(delay) {
  if (!el.section.open) return;
  clearTimeout(state.timer);
  state.timer = setTimeout(inspect, delay);
}

function stopInside() {
  clearTimeout(state.timer);
  state.latest.cancel(); // whatever is still on its way is stale
  state.key = null; // opening the view again asks again
  el.view.setAttribute("aria-busy", "false");
}

/** The body of POST /v1/inspect for the sentence the caret is in (the first line's first sentence when it is on no
 * line), or null when there is none. */
function inspectRequest() {
  const at = caretSentence(el.source, sourceLines());
  if (!at) return null;
  const model = currentModel();
  const feed = el.feed.value.trim();
  return {
    text: at.text, sentence: at.sentence, source: model.source, target: model.target, top_k: TOP_K,
    ...(feed ? { translation: feed } : { beam_size: Number(el.beam.value) }), // a given translation needs no search
  };
}

async function inspect() {
  if (!el.section.open || !server.models.length) return;
  const body = inspectRequest();
  const key = JSON.stringify(body);
  if (key === state.key) return; // e.g. another line was edited: the caret's sentence's pass stands
  state.latest.cancel(); // the newer request wins
  state.key = key;
  el.error.textContent = "";
  if (!body) {
    show(null);
    el.status.textContent = "Type a sentence above to look inside the model.";
    return;
  }
  el.status.textContent = "Running the model…";
  await state.latest.send("/v1/inspect", body, {
    answer: (data) => {
      if (!data || !data.source || !Array.isArray(data.output)) throw new Error("the server's answer has no stages");
      show(data);
      el.status.textContent = `Looked inside ${data.model || `${body.source}-${body.target}`}: `
        + `${count(data.source.pieces.length, "source piece", "source pieces")}, `
        + `${count(data.target.fed_pieces.length, "decoder position", "decoder positions")}.`;
    },
    refused: (response, message) => fail(`The server refused (${response.status}): ${sentence(message)}`),
    fail: (error) => fail(error instanceof TypeError
      ? "Cannot reach the server (network error). Is `tnmt serve` still running?"
      : `Looking inside failed: ${error.message}.`),
  });
}

function fail(message) {
  state.key = null; // the same request may be asked again
  el.view.classList.add("stale");
  el.status.textContent = "";
  el.error.textContent = message;
}

/** Draws every stage of `data`, or hides them when there is nothing to show. */
function show(data) {
  state.data = data;
  el.view.classList.remove("stale");
  el.stages.hidden = !data;
  if (!data) {
    el.fed.textContent = el.whose.textContent = "";
    return;
  }
  el.fed.textContent = data.translation.text;
  el.fed.lang = currentModel().target;
  el.whose.textContent = data.translation.given ? "(the one typed above)" : "(the model's own)";
  drawPieces(data);
  drawEmbedding(data);
  drawMasks(data);
  drawLayers(data);
  drawSoftmax(data);
}
