// The page of `tnmt serve`: translate as you type, and draw where the decoder looked.
//
// Promises to the user:
// - typing waits ~300 ms of quiet before asking the server; a newer request aborts the older one and a
//   late answer to an older request never overwrites a newer one;
// - one line is one sentence (with its attention heat map); several lines are translated line by line;
// - a line over `limits.max_chars` is not sent: the limit is per line, as the server's is per text (each
//   line is one text), and the counter and the error name the line in words;
// - every server or network error is shown as a sentence in #error (an ARIA live region);
// - "Step through the search" asks /v1/explain for the first line when it is opened and when the source, the
//   pair or the beam changes while it is open, under the same debounce and abort rules (a stale trace never
//   replaces a newer one); its errors are sentences in its own alert region, the server's words included;
// - the trace steps by buttons and keys (← →, Home/End, Space plays) with "Step t of n" spoken; the beam is a
//   tree of DOM nodes in which kept, finished and pruned differ by border, mark and words, never colour alone;
//   the selected hypothesis is a focusable button, and its next-subword bars and attention row follow it;
// - every translation comes with its evidence, line by line: its words are spans (one Tab stop, then ← → and ↑ ↓)
//   and pointing at or focusing one outlines the source words the server aligned it to, in a strip of the line's
//   source words, and the other way round; words under LOW_CONFIDENCE probability are underlined (dotted) on a
//   tint, the legend says the threshold in words; each line shows its sentence confidence as a percentage and its
//   warnings as sentences. Words are the server's: runs of what Python's str.split() splits on.
"use strict";

const $ = (id) => document.getElementById(id);
const el = {
  pair: $("pair"), source: $("source"), beam: $("beam"), alternatives: $("alternatives"),
  output: $("output"), alternativesList: $("alternatives-list"), copy: $("copy"), counter: $("counter"),
  error: $("error"), status: $("status"), heatmap: $("heatmap"), layer: $("layer"), head: $("head"),
  readout: $("heatmap-readout"), legendMin: $("legend-min"), legendMax: $("legend-max"),
  explainSection: $("explain-section"), explainView: $("explain-view"), explainStep: $("explain-step"),
  explainStatus: $("explain-status"), explainError: $("explain-error"), explainTranslation: $("explain-translation"),
  explainFirst: $("explain-first"), explainBack: $("explain-back"), explainPlay: $("explain-play"),
  explainForward: $("explain-forward"), explainLast: $("explain-last"), treeBox: $("tree-box"), tree: $("tree"),
  explainHypothesis: $("explain-hypothesis"), topk: $("topk"), explainLayer: $("explain-layer"),
  explainHead: $("explain-head"), attentionRow: $("attention-row"), finishedList: $("finished-list"),
  evidence: $("evidence"), evidenceLines: $("evidence-lines"), evidenceReadout: $("evidence-readout"),
  lowThreshold: $("low-threshold"),
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
  evidence: [],      // per translated line: {number, source, target, pairs, probs, sentence, warnings, spans}
  cell: null,        // {r, c}: the heat-map cell under the pointer or keyboard focus
  geometry: null,    // where the heat-map cells are on the canvas
  explain: {         // the "Step through the search" view
    seq: 0,          // as above, for /v1/explain
    controller: null,
    timer: 0,
    key: null,       // the request (as JSON) whose trace is shown or on its way: the same one is not asked twice
    trace: null,     // the answer of /v1/explain
    tree: null,      // {svg, columns: [{box, items: [{node, parent, fate, from}]}], nodes: [step][hypothesis]}
    step: 0,         // the step shown
    hyp: 0,          // the selected hypothesis of that step
    playing: 0,      // the play interval; 0 when paused
  },
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
  scheduleExplain(0); // the view may have been opened before the models were known
}

function wireEvents() {
  wireExplainEvents();
  wireEvidenceEvents();
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
  body.return_alignment = true;
  body.return_confidence = true;

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
    showTranslation(data.translations, { single, sent: numbered });
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

/** Shows the translations of the lines `sent` ({text, number}: as sent, with their line numbers in the source). */
function showTranslation(translations, { single = true, sent = [] } = {}) {
  el.output.classList.remove("stale");
  el.evidence.classList.remove("stale");
  const text = translations ? translations.map((t) => t.text).join("\n") : "";
  showEvidence(translations || [], sent);
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
  el.evidence.classList.add("stale");
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

// ----------------------------------------------------------------------------------------- evidence

const LOW_CONFIDENCE = 0.5; // a word under this probability is marked as unsure
// What Python's str.split() splits on (str.isspace), which JavaScript's \s is not: the server counts words so.
const PY_SPACE = "\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";
const SPACES = new RegExp(`([${PY_SPACE}]+)`);
const WARNING_WORDS = {
  repetition: "The translation repeats a word or phrase in a loop.",
  copy: "The translation copies the source instead of translating it.",
  length_ratio: "The translation is much shorter or longer than translations of such a source usually are.",
  uncovered_source: "A source word got almost no attention: it may be missing from the translation.",
  truncated: "The source was too long for the model: only its beginning was translated.",
};

function wireEvidenceEvents() {
  el.lowThreshold.textContent = percent(LOW_CONFIDENCE);
  for (const box of [el.output, el.evidenceLines]) {
    box.addEventListener("mouseover", (event) => {
      const word = event.target.closest(".word");
      if (word) highlight(word);
    });
    box.addEventListener("mouseleave", () => highlight(focusedWord()));
    box.addEventListener("focusin", (event) => {
      const word = event.target.closest(".word");
      if (!word) return;
      for (const other of box.querySelectorAll(".word[tabindex='0']")) other.tabIndex = -1;
      word.tabIndex = 0; // roving: the word last visited is the box's one Tab stop
      highlight(word);
    });
    box.addEventListener("focusout", (event) => {
      const next = event.relatedTarget;
      if (!(next && next.classList.contains("word"))) highlight(null); // to another word: its focusin highlights
    });
    box.addEventListener("keydown", (event) => onWordKey(event, box));
  }
}

/** The words of a text as the server counts them (Python's `text.split()`). */
function words(text) {
  return text.split(SPACES).filter((part, k) => k % 2 === 0 && part !== "");
}

/** The evidence of each line, the translation as word spans, and per line its confidence, warnings and source. */
function showEvidence(translations, sent) {
  state.evidence = translations.map((t, k) => lineEvidence(t, sent[k] || { text: "", number: k + 1 }));
  const lines = state.evidence.map((line, k) => {
    const box = make("span", "line");
    box.append(...wordNodes(translations[k].text, k, "target", (span, j) => markConfidence(span, line.probs, j)));
    line.spans.target = [...box.querySelectorAll(".word")];
    return box;
  });
  el.output.replaceChildren(...lines.flatMap((line, k) => (k ? [document.createTextNode("\n"), line] : [line])));
  const first = el.output.querySelector(".word");
  if (first) first.tabIndex = 0;

  const several = state.evidence.length > 1;
  el.evidenceLines.replaceChildren(...state.evidence.map((line, k) => evidenceItem(line, k, several)));
  const firstSource = el.evidenceLines.querySelector(".word");
  if (firstSource) firstSource.tabIndex = 0;
  el.evidenceReadout.textContent = "";
  el.evidence.hidden = !state.evidence.some((line) => line.pairs || line.probs || line.sentence != null
    || line.warnings.length);
}

function lineEvidence(translation, line) {
  const confidence = translation.confidence || {};
  return {
    number: line.number,
    source: words(line.text),
    target: words(translation.text),
    pairs: Array.isArray(translation.alignment) ? translation.alignment : null,
    probs: Array.isArray(confidence.words) ? confidence.words : null,
    sentence: typeof confidence.sentence === "number" ? confidence.sentence : null,
    warnings: Array.isArray(translation.warnings) ? translation.warnings : [],
    spans: { source: [], target: [] },
  };
}

/** The text as word spans (focusable, numbered) and the whitespace between them as it is: textContent unchanged. */
function wordNodes(text, line, side, decorate = () => {}) {
  let j = 0;
  return text.split(SPACES).flatMap((part, k) => {
    if (part === "") return [];
    if (k % 2 === 1) return [document.createTextNode(part)];
    const span = make("span", `word ${side}`, part);
    span.tabIndex = -1;
    span.dataset.line = String(line);
    span.dataset.word = String(j);
    decorate(span, j);
    j += 1;
    return [span];
  });
}

function markConfidence(span, probs, j) {
  const p = probs && probs[j];
  if (typeof p !== "number") return;
  const low = p < LOW_CONFIDENCE;
  span.classList.toggle("low", low);
  span.title = `probability ${percent(p)}${low ? `: under ${percent(LOW_CONFIDENCE)}` : ""}`;
}

/** One line's sentence confidence, warnings in words, and its source words (when the alignment came). */
function evidenceItem(line, k, several) {
  const item = make("li", "evidence-line");
  item.dataset.line = String(k);
  const head = make("p", "line-head");
  if (several) head.append(make("span", "line-name", `Line ${line.number}`));
  if (line.sentence != null) head.append(make("span", "confidence", `sentence confidence ${percent(line.sentence)}`));
  if (!line.warnings.length) head.append(make("span", "clean", "no warnings"));
  item.append(head);
  if (line.warnings.length) {
    const list = make("ul", "warnings");
    list.setAttribute("aria-label", several ? `Warnings for line ${line.number}` : "Warnings");
    list.append(...line.warnings.map((code) => make("li", "", WARNING_WORDS[code] || String(code))));
    item.append(list);
  }
  if (line.pairs && line.source.length) {
    const strip = make("p", "source-strip");
    strip.lang = currentModel().source;
    strip.append(make("span", "strip-label", "Source:"), " ");
    const nodes = wordNodes(line.source.join(" "), k, "source");
    strip.append(...nodes);
    line.spans.source = nodes.filter((node) => node.nodeType === Node.ELEMENT_NODE);
    item.append(strip);
  }
  return item;
}

function focusedWord() {
  const active = document.activeElement;
  return active && active.classList && active.classList.contains("word") ? active : null;
}

/** Outlines `word` and the words aligned to it on the other side (none when null), and says so in the readout. */
function highlight(word) {
  for (const node of document.querySelectorAll(".word.active, .word.linked, .evidence-line.active")) {
    node.classList.remove("active", "linked");
  }
  if (!word) return;
  const line = state.evidence[Number(word.dataset.line)];
  if (!line) return;
  const j = Number(word.dataset.word);
  const fromTarget = word.classList.contains("target");
  const [own, other] = fromTarget ? [1, 0] : [0, 1]; // pairs are [source word, target word]
  const linked = (line.pairs || []).filter((pair) => pair[own] === j).map((pair) => pair[other]);
  const indices = [...new Set(linked)].sort((a, b) => a - b);
  const spans = fromTarget ? line.spans.source : line.spans.target;
  word.classList.add("active");
  for (const i of indices) if (spans[i]) spans[i].classList.add("linked");
  const item = el.evidenceLines.querySelector(`.evidence-line[data-line="${word.dataset.line}"]`);
  if (item) item.classList.add("active");
  el.evidenceReadout.textContent = readout(line, j, fromTarget, indices);
}

function readout(line, j, fromTarget, indices) {
  const where = state.evidence.length > 1 ? ` in line ${line.number}` : "";
  const own = fromTarget ? line.target : line.source;
  const other = fromTarget ? line.source : line.target;
  const quoted = indices.map((i) => `“${other[i] ?? `#${i + 1}`}”`).join(", ");
  let text = `${fromTarget ? "Translation" : "Source"} word ${j + 1} of ${own.length}${where}, “${own[j]}”`;
  const p = fromTarget && line.probs ? line.probs[j] : undefined;
  if (typeof p === "number") {
    text += `: probability ${percent(p)}${p < LOW_CONFIDENCE ? `, under ${percent(LOW_CONFIDENCE)}` : ""}`;
  }
  if (!line.pairs) return `${text}.`;
  if (!indices.length) {
    return `${text}. ${fromTarget ? "Aligned to no source word." : "No translation word is aligned to it."}`;
  }
  return `${text}. ${fromTarget ? "From the source" : "Translated as"} ${quoted}.`;
}

/** ← → move to the previous / next word, ↑ ↓ to the nearest word of the previous / next line, Home / End. */
function onWordKey(event, box) {
  const word = event.target.closest(".word");
  if (!word || event.altKey || event.ctrlKey || event.metaKey) return;
  const all = [...box.querySelectorAll(".word")];
  const at = all.indexOf(word);
  const lines = [...new Set(all.map((w) => w.dataset.line))];
  const nearest = (delta) => {
    const line = lines[lines.indexOf(word.dataset.line) + delta];
    const inLine = all.filter((w) => w.dataset.line === line);
    return inLine[Math.min(Number(word.dataset.word), inLine.length - 1)];
  };
  const moves = {
    ArrowLeft: () => all[at - 1], ArrowRight: () => all[at + 1], Home: () => all[0], End: () => all[all.length - 1],
    ArrowUp: () => nearest(-1), ArrowDown: () => nearest(1),
  };
  if (!moves[event.key]) return;
  event.preventDefault();
  const next = moves[event.key]();
  if (next) next.focus();
}

/** A probability as a whole percentage, never rounded to a certainty it is not: "<1%", "73%", ">99%". */
function percent(p) {
  const x = clamp(Number(p), 0, 1) * 100;
  if (x > 0 && x < 1) return "<1%";
  if (x > 99 && x < 100) return ">99%";
  return `${Math.round(x)}%`;
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

// ---------------------------------------------------------------------------- step through the search

const TOP_K = 5;      // next-subword candidates the server lists per hypothesis
const PLAY_MS = 1200; // one step per this while playing: time to read the tree and the bars
const SVG_NS = "http://www.w3.org/2000/svg";
const FATE_MARKS = { kept: "", finished: "✓ end", pruned: "✗" };

function wireExplainEvents() {
  el.explainSection.addEventListener("toggle", () => {
    if (el.explainSection.open) {
      drawEdges(); // laid out again now that the view shows
      scheduleExplain(0);
    } else {
      stopExplaining();
    }
  });
  el.source.addEventListener("input", () => scheduleExplain(DEBOUNCE_MS));
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
  el.explainLayer.addEventListener("change", drawAttentionRow);
  el.explainHead.addEventListener("change", drawAttentionRow);
  window.addEventListener("resize", keepSelectionInView); // e.g. a phone turned upright: a narrower tree box
}

/** Asks for a new trace after `delay` ms, only while the view is open (a closed view costs the server nothing). */
function scheduleExplain(delay) {
  if (!el.explainSection.open) return;
  clearTimeout(state.explain.timer);
  state.explain.timer = setTimeout(explain, delay);
}

function stopExplaining() {
  const x = state.explain;
  clearTimeout(x.timer);
  if (x.controller) x.controller.abort();
  x.controller = null;
  x.seq += 1; // whatever is still on its way is stale
  x.key = null; // opening the view again asks again
  el.explainView.setAttribute("aria-busy", "false");
  pause();
}

/** The body of POST /v1/explain for the first non-empty line, or null when there is none. */
function explainRequest() {
  const line = sourceLines()[0];
  if (!line) return null;
  const model = currentModel();
  return { text: line.text, source: model.source, target: model.target, beam_size: Number(el.beam.value), top_k: TOP_K };
}

async function explain() {
  const x = state.explain;
  if (!el.explainSection.open || !state.models.length) return;
  const body = explainRequest();
  const key = JSON.stringify(body);
  if (key === x.key) return; // e.g. a second line was edited: the first line's trace stands
  if (x.controller) x.controller.abort(); // the newer request wins
  x.controller = null;
  x.key = key;
  const seq = ++x.seq;
  el.explainError.textContent = "";
  if (!body) {
    showTrace(null);
    setExplainStatus("Type a sentence above to step through its search.");
    return;
  }
  const controller = new AbortController();
  x.controller = controller;
  el.explainView.setAttribute("aria-busy", "true");
  setExplainStatus("Tracing the search…");
  try {
    const response = await fetch("/v1/explain", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      signal: controller.signal,
    });
    const data = await readJson(response);
    if (seq !== x.seq) return; // a newer request exists: this answer is stale
    if (!response.ok) {
      failExplain(`The server refused (${response.status}): ${sentence(errorMessage(response, data))}`);
      return;
    }
    if (!data || !Array.isArray(data.steps) || data.steps.length === 0) throw new Error("the server's answer has no steps");
    showTrace(data);
    setExplainStatus(`Traced by ${data.model || body.source + "-" + body.target} with beam ${data.beam_size ?? body.beam_size}: `
      + `${count(data.steps.length, "step", "steps")}.`);
  } catch (error) {
    if (error.name === "AbortError" || seq !== x.seq) return;
    failExplain(error instanceof TypeError
      ? "Cannot reach the server (network error). Is `tnmt serve` still running?"
      : `Tracing failed: ${error.message}.`);
  } finally {
    if (seq === x.seq) {
      el.explainView.setAttribute("aria-busy", "false");
      x.controller = null;
    }
  }
}

function failExplain(message) {
  state.explain.key = null; // the same line and beam may be asked again
  el.explainView.classList.add("stale");
  setExplainStatus("");
  el.explainError.textContent = message;
}

function setExplainStatus(text) {
  el.explainStatus.textContent = text;
}

/** Shows a new trace (or none) from its first step, with the best hypothesis selected. */
function showTrace(trace) {
  const x = state.explain;
  pause();
  el.explainView.classList.remove("stale");
  x.trace = trace;
  x.step = 0;
  x.hyp = 0;
  x.tree = trace ? buildTree(trace) : null;
  if (!trace) el.tree.replaceChildren();
  el.explainTranslation.textContent = trace ? trace.translation : "";
  el.explainTranslation.lang = currentModel().target;
  fillExplainLayerHead();
  renderStep();
}

// The tree is built once per trace; stepping only shows columns and moves marks, so focus stays put.

/** A "start" column, then one column per step with the candidates it considered, grouped under their parent. */
function buildTree(trace) {
  const nodes = trace.steps.map(() => []); // nodes[t][h]: the button of hypothesis h live at step t
  const starts = trace.steps[0].hypotheses.map((_, h) => {
    const node = hypothesisButton(0, h);
    node.classList.add("kept", "start");
    node.append(make("span", "piece", "<s>"), make("span", "sr-only", ", the start token"));
    node.title = "<s>: the start token, where every hypothesis begins";
    return (nodes[0][h] = node);
  });
  const columns = [treeColumn("start", starts.map((node) => ({ node, parent: null, fate: "kept", from: -1 })))];
  trace.steps.forEach((step, t) => {
    const items = byParent(step.candidates).map((candidate) => {
      const live = candidate.fate === "kept" && candidate.child != null && t + 1 < trace.steps.length;
      const node = live ? hypothesisButton(t + 1, candidate.child) : document.createElement("span");
      if (live) nodes[t + 1][candidate.child] = node;
      fillCandidate(node, candidate);
      return { node, parent: nodes[t][candidate.parent], fate: candidate.fate, from: candidate.parent };
    });
    columns.push(treeColumn(`step ${t + 1}`, items));
  });
  const svg = document.createElementNS(SVG_NS, "svg");
  svg.setAttribute("class", "edges");
  svg.setAttribute("aria-hidden", "true"); // the columns say the same in words
  el.tree.replaceChildren(svg, ...columns.map((column) => column.box));
  return { svg, columns, nodes };
}

function hypothesisButton(step, hyp) {
  const node = make("button", "node");
  node.type = "button";
  node.tabIndex = -1; // roving: only the selected hypothesis is in the tab order
  node.dataset.step = String(step);
  node.dataset.hyp = String(hyp);
  return node;
}

/** Kept, finished and pruned differ by class (border style), a visible mark and words for screen readers. */
function fillCandidate(node, candidate) {
  node.classList.add("node", candidate.fate);
  const mark = make("span", "mark", FATE_MARKS[candidate.fate] ?? "");
  const prob = make("span", "prob", probability(candidate.prob));
  mark.setAttribute("aria-hidden", "true");
  prob.setAttribute("aria-hidden", "true");
  node.append(make("span", "piece", candidate.piece), prob, mark,
    make("span", "sr-only", `, probability ${probability(candidate.prob)}, ${fateWords(candidate)}`));
  node.title = `${candidate.piece}: probability ${Number(candidate.prob).toFixed(3)}, score ${decimal(candidate.score)}; `
    + fateWords(candidate);
}

function fateWords(candidate) {
  return candidate.reason ? `${candidate.fate} (${candidate.reason})` : candidate.fate;
}

/** Candidates grouped by parent (in beam order) so that edges barely cross; best first within a group. */
function byParent(candidates) {
  return [...candidates].sort((a, b) => a.parent - b.parent); // a stable sort keeps the server's order
}

function treeColumn(title, items) {
  const box = make("div", "tree-col");
  const list = document.createElement("ol");
  list.append(...items.map(({ node }) => {
    const item = document.createElement("li");
    item.append(node);
    return item;
  }));
  box.append(make("h4", "", title), list);
  return { box, items };
}

// Navigating.

/** A move by the reader stops playing. */
function navigate(move) {
  pause();
  move();
}

/** Shows step `t` with its hypothesis `hyp` selected; a tree that had focus gives it to the selection. */
function goToStep(t, hyp) {
  const x = state.explain;
  if (!x.trace) return;
  const hadFocus = el.tree.contains(document.activeElement);
  x.step = clamp(t, 0, x.trace.steps.length - 1);
  x.hyp = clamp(hyp, 0, x.trace.steps[x.step].hypotheses.length - 1);
  renderStep();
  const selected = x.tree.nodes[x.step][x.hyp];
  if (hadFocus && selected) selected.focus({ preventScroll: true });
}

/** One step on or back, following the selected hypothesis's line: on to its best kept child, back to its parent. */
function stepBy(delta) {
  const x = state.explain;
  if (!x.trace) return;
  const t = x.step + delta;
  if (t < 0 || t >= x.trace.steps.length) return;
  goToStep(t, delta > 0 ? bestChild(x.step, x.hyp) : parentOf(x.step, x.hyp));
}

function goToLast() {
  if (state.explain.trace) goToStep(state.explain.trace.steps.length - 1, 0);
}

function bestChild(t, hyp) {
  const child = state.explain.trace.steps[t].candidates
    .find((c) => c.parent === hyp && c.fate === "kept" && c.child != null);
  return child ? child.child : 0; // its line ended: the best hypothesis of the next step
}

function parentOf(t, hyp) {
  if (t === 0) return 0;
  const self = state.explain.trace.steps[t - 1].candidates.find((c) => c.fate === "kept" && c.child === hyp);
  return self ? self.parent : 0;
}

function togglePlay() {
  const x = state.explain;
  if (x.playing) {
    pause();
    return;
  }
  if (!x.trace) return;
  if (x.step === x.trace.steps.length - 1) goToStep(0, 0); // from the start again
  x.playing = setInterval(() => {
    stepBy(1);
    if (x.step === x.trace.steps.length - 1) pause();
  }, PLAY_MS);
  el.explainPlay.textContent = "❙❙ Pause";
}

function pause() {
  clearInterval(state.explain.playing);
  state.explain.playing = 0;
  el.explainPlay.textContent = "▶ Play";
}

function onExplainKey(event) {
  const x = state.explain;
  if (!x.trace || event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
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
      ArrowDown: () => navigate(() => goToStep(x.step, x.hyp + 1)),
      ArrowUp: () => navigate(() => goToStep(x.step, x.hyp - 1)),
    }),
  };
  const action = actions[event.key];
  if (!action) return;
  event.preventDefault();
  action();
}

// Drawing the step.

function renderStep() {
  const { trace, step } = state.explain;
  updateStepper();
  if (!trace) {
    el.explainStep.textContent = "No trace yet.";
    for (const list of [el.topk, el.attentionRow, el.finishedList]) list.replaceChildren();
    el.explainHypothesis.textContent = "";
    return;
  }
  const current = trace.steps[step];
  el.explainStep.textContent = `Step ${step + 1} of ${trace.steps.length}: ${stepSummary(current)}`;
  markTree();
  drawEdges();
  drawTopK(current);
  drawAttentionRow();
  drawFinished(current);
}

function stepSummary(step) {
  const fates = (fate) => step.candidates.filter((c) => c.fate === fate).length;
  return `the decoder extends ${count(step.hypotheses.length, "hypothesis", "hypotheses")}; `
    + `${fates("kept")} kept, ${fates("finished")} finished, ${fates("pruned")} pruned.`;
}

function updateStepper() {
  const { trace, step } = state.explain;
  const last = trace ? trace.steps.length - 1 : 0;
  const focused = document.activeElement;
  el.explainFirst.disabled = el.explainBack.disabled = !trace || step === 0;
  el.explainForward.disabled = el.explainLast.disabled = !trace || step === last;
  el.explainPlay.disabled = !trace;
  if (focused && focused.disabled) el.explainView.focus({ preventScroll: true }); // keys keep working
}

/** Shows the columns up to this step's candidates and marks the selection, its line and its candidates. */
function markTree() {
  const { tree, step, hyp } = state.explain;
  const line = lineage(step, hyp);
  tree.columns.forEach((column, c) => {
    column.box.hidden = c > step + 1;
    column.box.classList.toggle("current", c === step + 1);
    for (const item of column.items) {
      item.node.classList.toggle("on-line", line.has(item.node));
      item.node.classList.toggle("from-selected", c === step + 1 && item.from === hyp);
    }
  });
  for (const node of tree.nodes.flat()) {
    node.tabIndex = -1;
    node.classList.remove("selected");
    node.removeAttribute("aria-current");
  }
  const selected = tree.nodes[step][hyp];
  if (!selected) return;
  selected.tabIndex = 0;
  selected.classList.add("selected");
  selected.setAttribute("aria-current", "true");
  keepSelectionInView();
}

/** The nodes from the start to hypothesis `hyp` of step `t`. */
function lineage(t, hyp) {
  const line = new Set();
  for (let s = t, h = hyp; s >= 0; h = parentOf(s, h), s -= 1) {
    const node = state.explain.tree.nodes[s][h];
    if (node) line.add(node);
  }
  return line;
}

/** Scrolls the tree's own box, never the page (which must not move under the reader while playing), so that
 * the selected hypothesis and the step's column are in sight. */
function keepSelectionInView() {
  const { tree, step, hyp } = state.explain;
  const selected = tree && tree.nodes[step][hyp];
  if (!selected || !el.explainSection.open) return;
  const box = el.treeBox.getBoundingClientRect();
  const node = selected.getBoundingClientRect();
  const right = tree.columns[step + 1].box.getBoundingClientRect().right;
  el.treeBox.scrollLeft += Math.max(0, right - box.right) || Math.min(0, node.left - box.left);
  el.treeBox.scrollTop += Math.max(0, node.bottom - box.bottom) || Math.min(0, node.top - box.top);
}

/** Parent-to-child curves over the shown columns; dashed to pruned children, bold from the selection. */
function drawEdges() {
  const { tree, step } = state.explain;
  if (!tree || !el.explainSection.open) return; // a closed view has no layout to measure
  const items = tree.columns.slice(1, step + 2).flatMap((column) => column.items).filter((item) => item.parent);
  tree.svg.replaceChildren(...items.map(edge));
}

function edge({ node, parent, fate }) {
  // Offsets are relative to #tree (the positioned ancestor), as the svg is.
  const x1 = parent.offsetLeft + parent.offsetWidth;
  const y1 = parent.offsetTop + parent.offsetHeight / 2;
  const x2 = node.offsetLeft;
  const y2 = node.offsetTop + node.offsetHeight / 2;
  const mid = (x1 + x2) / 2;
  const path = document.createElementNS(SVG_NS, "path");
  path.setAttribute("d", `M${x1},${y1} C${mid},${y1} ${mid},${y2} ${x2},${y2}`);
  const marks = ["from-selected", "on-line"].filter((mark) => node.classList.contains(mark));
  path.setAttribute("class", [fate, ...marks].join(" "));
  return path;
}

/** The selected hypothesis and its next-subword distribution, with what became of each option. */
function drawTopK(step) {
  const { hyp } = state.explain;
  const hypothesis = step.hypotheses[hyp];
  el.explainHypothesis.textContent = `Hypothesis ${hyp + 1} of ${step.hypotheses.length}: ${prefix(hypothesis)}; `
    + `log-probability ${decimal(hypothesis.log_prob)}, score ${decimal(hypothesis.score)}.`;
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

function fillExplainLayerHead() {
  const trace = state.explain.trace;
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
    ...range(0, layers - 1).map((l) => new Option(`${l + 1} of ${layers}`, String(l))));
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

function drawAttentionRow() {
  const { trace, step, hyp } = state.explain;
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

/** "1 step", "3 steps". */
function count(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

function decimal(x) {
  return Number(x).toFixed(3);
}

/** A probability in two digits without the leading zero, as the heat map writes weights: ".71". */
function probability(p) {
  return Number(p).toFixed(2).replace(/^0/, "");
}

/** An element with a class and text. */
function make(tag, className, text = "") {
  const node = document.createElement(tag);
  if (className) node.className = className;
  node.textContent = text;
  return node;
}

init();
