// The page's inputs and the server's limits on them: the models and limits GET /v1/models lists, the language
// pair, the beam size and the number of alternatives, and the lines of the source text.

import { Latest } from "./api.js";
import { $, clamp, range } from "./util.js";

export const DEBOUNCE_MS = 300; // typing waits this long of quiet before the server is asked

export const server = {
  models: [],
  limits: { max_chars: Infinity, max_texts: Infinity, max_beam_size: 1, max_n_best: 1, max_file_bytes: Infinity },
  fileFormats: [], // the extensions /v1/translate_file reads (".docx")
};

const el = { pair: $("pair"), beam: $("beam"), alternatives: $("alternatives"), source: $("source"), output: $("output") };

/** Asks for the models and limits and offers the pairs; false, said through `showError`, when there are none. */
export async function loadModels(showError) {
  const failed = (message) => {
    showError(`Could not load the list of models: ${message}. Reload the page to try again.`);
    el.pair.replaceChildren(new Option("no models", ""));
  };
  await new Latest().send("/v1/models", undefined, {
    answer: (data) => {
      if (!data || !Array.isArray(data.models) || data.models.length === 0) throw new Error("the server lists no models");
      server.models = data.models;
      server.limits = { ...server.limits, ...data.limits };
      server.fileFormats = Array.isArray(data.file_formats) ? data.file_formats : [];
    },
    refused: (_, message) => failed(message),
    fail: (error) => failed(error.message),
  });
  if (!server.models.length) return false;
  el.pair.replaceChildren(...pairOptions(server.models));
  el.pair.disabled = false;
  choosePair();
  return true;
}

/** One option per pair, grouped by source language when a language is read by several pairs (a multilingual
 * model serves every direction of its languages); a pair it was not trained on says "zero-shot". */
function pairOptions(models) {
  const option = (m) => new Option(`${m.source} → ${m.target}${m.trained === false ? "  (zero-shot)" : ""}`, m.id);
  const sources = [...new Set(models.map((m) => m.source))];
  if (sources.length === models.length) return models.map(option);
  return sources.map((source) => {
    const group = document.createElement("optgroup");
    group.label = `from ${source}`;
    group.append(...models.filter((m) => m.source === source).map(option));
    return group;
  });
}

export function currentModel() {
  return server.models.find((m) => m.id === el.pair.value) || server.models[0];
}

/** The beam sizes the server allows, the model's own preselected, and the languages of the two texts. */
export function choosePair() {
  const model = currentModel();
  const max = server.limits.max_beam_size;
  const preferred = clamp((model.decoding && model.decoding.beam_size) || 1, 1, max);
  el.beam.replaceChildren(...range(1, max).map((k) => new Option(k === 1 ? "1 (greedy)" : String(k), String(k))));
  el.beam.value = String(preferred);
  fillAlternatives();
  el.source.lang = model.source;
  el.output.lang = model.target;
}

/** Options 0..min(beam, max_n_best); the value is the n_best sent (the server lists alternatives when > 1). */
export function fillAlternatives() {
  const max = Math.min(Number(el.beam.value), server.limits.max_n_best);
  const previous = Number(el.alternatives.value) || 0;
  el.alternatives.replaceChildren(
    ...range(0, max).map((k) => new Option(k === 0 ? "none" : k === 1 ? "1 (best only)" : String(k), String(k))),
  );
  el.alternatives.value = String(Math.min(previous, max));
}

/** Characters as the server counts them: Unicode code points (Python's len), not UTF-16 units. */
function charCount(text) {
  return [...text].length;
}

/** The lines the server is sent (trimmed, non-empty), each with its 1-based line number in the textarea. */
export function sourceLines() {
  return el.source.value.split(/\r?\n/)
    .map((line, i) => ({ text: line.trim(), number: i + 1 }))
    .filter((line) => line.text);
}

/** The longest line as {number, n} (n in characters), or {number: 0, n: 0} when there is none. */
export function longestLine(lines) {
  return lines.reduce(
    (longest, line) => (charCount(line.text) > longest.n ? { number: line.number, n: charCount(line.text) } : longest),
    { number: 0, n: 0 },
  );
}
