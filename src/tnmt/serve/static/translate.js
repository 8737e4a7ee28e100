// The translate view: the source's counter, translating as you type (debounced, one request in flight, retried
// after a full queue; only the sentences not translated yet are sent: sentences.js) under the glossary, the
// translation with its alternatives and the lines the user chose, its status and errors, and copying it.

import { Latest } from "./api.js";
import { applyChoices, wireAlternatives } from "./alternatives.js";
import { showEvidence } from "./evidence.js";
import { clearRefusal, showGlossaryRefusal, steering } from "./glossary.js";
import { showAttention } from "./heatmap.js";
import {
  DEBOUNCE_MS, choosePair, currentModel, fillAlternatives, longestLine, server, sourceLines,
} from "./settings.js";
import { countSentences, joinedLines, remember, rememberSplit, unsplit, untranslated } from "./sentences.js";
import { $, count, sentence } from "./util.js";

const MAX_RETRIES = 3; // after 503 "queue full", honouring Retry-After
const el = {
  pair: $("pair"), source: $("source"), beam: $("beam"), alternatives: $("alternatives"), output: $("output"),
  alternativesList: $("alternatives-list"), copy: $("copy"), counter: $("counter"), error: $("error"),
  status: $("status"), evidence: $("evidence"),
};
const state = {
  latest: new Latest((busy) => el.output.setAttribute("aria-busy", String(busy))),
  timer: 0, // debounce / retry timer
  retries: 0,
  shown: null, // the arguments of the translation shown, to show it again with a new choice
  generation: 0, // of the newest translate(): an older one stops before its next request
};

export function wireTranslate() {
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
  el.pair.addEventListener("change", () => {
    choosePair();
    translateNow();
  });
  el.beam.addEventListener("change", () => {
    fillAlternatives();
    translateNow();
  });
  el.alternatives.addEventListener("change", translateNow);
  el.copy.addEventListener("click", copyTranslation);
  wireAlternatives(() => showTranslation(...state.shown));
}

export function updateCounter() {
  const lines = sourceLines();
  const { number, n } = longestLine(lines);
  const max = server.limits.max_chars;
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

function schedule(delay) {
  clearTimeout(state.timer);
  state.timer = setTimeout(translate, delay);
}

export function translateNow() {
  state.retries = 0;
  schedule(0);
}

async function translate() {
  if (!server.models.length) return;
  state.latest.cancel(); // the newer request wins
  state.generation += 1; // and an older translate() still between its requests stops at its next one
  const generation = state.generation;
  const current = () => generation === state.generation;
  const numbered = sourceLines();
  const lines = numbered.map((line) => line.text);
  if (lines.length === 0) {
    clearError();
    showTranslation(null);
    setStatus("");
    return;
  }
  const { number, n } = longestLine(numbered);
  if (n > server.limits.max_chars) {
    setStale();
    setStatus("");
    const which = lines.length > 1 ? `Line ${number}` : "The text";
    showError(`${which} has ${n} characters; the limit is ${server.limits.max_chars} per line. Shorten it by ${n - server.limits.max_chars} to translate.`);
    return;
  }
  const model = currentModel();
  const beam = Number(el.beam.value);
  const nBest = Number(el.alternatives.value);
  const pair = { source: model.source, target: model.target };
  setStatus("Translating…");
  const started = performance.now();
  for (const chunk of chunks(unsplit(lines))) { // how the server splits the lines not seen yet
    if (!current()) return;
    const ok = await ask("/v1/segment", { text: chunk, ...pair }, (data) => {
      if (!data || !Array.isArray(data.texts)) throw new Error("the server's answer has no texts");
      rememberSplit(chunk, data.texts);
    });
    if (!ok) return;
  }
  const single = lines.length === 1 && countSentences(lines) === 1;
  const settings = JSON.stringify([model.id, beam, nBest, steering(), single]);
  const needed = untranslated(lines, settings);
  for (const chunk of chunks(needed)) { // only the sentences not translated yet
    if (!current()) return;
    const body = {
      text: single ? chunk[0] : chunk, ...pair, beam_size: beam, ...steering(), return_alignment: true,
      return_confidence: true,
    };
    if (nBest > 0) body.n_best = nBest;
    if (single) body.return_attention = true; // the heat map is of one sentence
    const ok = await ask("/v1/translate", body, (data) => {
      if (!data || !Array.isArray(data.translations)) throw new Error("the server's answer has no translations");
      remember(chunk, data.translations, settings);
    });
    if (!ok) return;
  }
  if (!current()) return;
  clearError();
  clearRefusal("server"); // the glossary was accepted
  state.retries = 0;
  showTranslation(joinedLines(lines, settings), { single, sent: numbered });
  const ms = Math.round(performance.now() - started);
  const total = countSentences(lines);
  const sent = needed.length === total ? "" : `; ${count(needed.length, "sentence", "sentences")} of ${total} sent`;
  setStatus(`Translated by ${model.id} with beam ${beam} in ${ms} ms${sent}.`);
}

/** Sends one request of `translate` through the view's `Latest`: true once `answer` took its answer; false when it
 * was refused, failed or overtaken by a newer one (which then says what happened). */
async function ask(path, body, answer) {
  let answered = false;
  await state.latest.send(path, body, {
    answer: (data) => {
      answer(data);
      answered = true;
    },
    refused: onHttpError,
    fail: (error) => {
      setStale();
      setStatus("");
      showError(error instanceof TypeError
        ? "Cannot reach the server (network error). Is `tnmt serve` still running?"
        : `Translation failed: ${error.message}.`);
    },
  });
  return answered;
}

/** `items` in requests of at most the server's `max_texts`. */
function chunks(items) {
  const size = Math.max(1, server.limits.max_texts || 1);
  return Array.from({ length: Math.ceil(items.length / size) }, (_, k) => items.slice(k * size, (k + 1) * size));
}

function onHttpError(response, message) {
  setStale();
  if (showGlossaryRefusal(response.status, message)) {
    clearError();
    setStatus("Not translated: the server refused the glossary; the glossary box says why.");
    return;
  }
  setStatus("");
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

/** Shows the translations of the lines `sent` ({text, number}: as sent, with their line numbers in the source). */
function showTranslation(translations, { single = true, sent = [] } = {}) {
  state.shown = [translations, { single, sent }];
  el.output.classList.remove("stale");
  el.evidence.classList.remove("stale");
  const lines = applyChoices(translations || [], sent);
  showEvidence(lines, sent);
  el.copy.disabled = lines.map((t) => t.text).join("\n") === "";

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

  showAttention(single && first && first.attention ? first.attention : null);
}

/** Marks the shown translation as not matching the source any more (after an error). */
function setStale() {
  el.output.classList.add("stale");
  el.evidence.classList.add("stale");
}

function setStatus(text) {
  el.status.textContent = text;
}

export function showError(text) {
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
