// The "Files" view: a document dropped or chosen is sent to /v1/translate_file with the pair and its glossary, and
// comes back as a download in its own format with the report of every segment, the least confident first.
//
// Promises to the user:
// - nothing is sent until a file is dropped or chosen; a file of a format the server does not read, or over its
//   max_file_bytes, is refused here in words, before it is sent;
// - the upload's progress is shown, then the translation's in segments (the server's count for the upload's random
//   token, asked every PROGRESS_MS) until the answer; a newer file cancels the older one, and a late answer to an
//   older file never replaces a newer one;
// - the translation is offered under the server's name for it (report.de.docx) from the answer itself (a blob in
//   this browser: nothing is kept on the server);
// - the report lists the segments with their confidence as a percentage, their warnings in words, the glossary
//   terms they missed and whether a sentence was cut; the first REPORT_ROWS at once, the rest on demand.

import { WARNING_WORDS } from "./evidence.js";
import { steering } from "./glossary.js";
import { currentModel, server } from "./settings.js";
import { $, count, make, percent, sentence } from "./util.js";

const REPORT_ROWS = 20; // rows of the report shown before "Show every segment"
const PROGRESS_MS = 500; // between two questions about a translation's progress

const el = {
  drop: $("files-drop"), input: $("files-input"), formats: $("files-formats"), progress: $("files-progress"),
  status: $("files-status"), error: $("files-error"), result: $("files-result"), download: $("files-download"),
  summary: $("files-summary"), rows: $("files-rows"), more: $("files-more"), caption: $("files-caption"),
};
const state = { request: null, seq: 0, url: null, segments: [], polling: null };

export function wireFiles() {
  el.input.addEventListener("change", () => {
    if (el.input.files.length) send(el.input.files[0]);
  });
  el.drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    el.drop.classList.add("dragging");
  });
  el.drop.addEventListener("dragleave", () => el.drop.classList.remove("dragging"));
  el.drop.addEventListener("drop", (event) => {
    event.preventDefault();
    el.drop.classList.remove("dragging");
    if (event.dataTransfer.files.length) send(event.dataTransfer.files[0]);
  });
  el.more.addEventListener("click", () => {
    renderRows(state.segments);
    el.more.hidden = true;
  });
}

/** Once the models are known: the formats the server reads, offered by the file picker. */
export function showFileFormats() {
  if (!server.fileFormats.length) return;
  el.input.accept = server.fileFormats.join(",");
  el.formats.textContent = `${server.fileFormats.join(" ")}, up to ${megabytes(server.limits.max_file_bytes)}`;
}

function send(file) {
  if (state.request) state.request.abort();
  clearInterval(state.polling);
  state.seq += 1;
  const seq = state.seq;
  el.error.textContent = "";
  const refusal = refused(file);
  if (refusal) {
    finish(seq);
    el.error.textContent = refusal;
    return;
  }
  const model = currentModel();
  const form = new FormData();
  form.append("file", file);
  form.append("source", model.source);
  form.append("target", model.target);
  form.append("evidence", "true");
  const { glossary } = steering();
  if (glossary) form.append("glossary", JSON.stringify(glossary));
  const token = randomToken();
  form.append("progress", token);
  const request = new XMLHttpRequest();
  state.request = request;
  request.open("POST", "/v1/translate_file");
  request.responseType = "json";
  el.result.hidden = true;
  el.progress.hidden = false;
  el.progress.value = 0;
  el.status.textContent = `Sending ${file.name}…`;
  request.upload.addEventListener("progress", (event) => {
    if (seq === state.seq && event.lengthComputable) el.progress.value = event.loaded / event.total;
  });
  request.upload.addEventListener("load", () => {
    if (seq !== state.seq) return;
    el.progress.removeAttribute("value"); // indeterminate until the server has read the document
    const translating = `Translating ${file.name} (${model.source} → ${model.target})`;
    el.status.textContent = `${translating}…`;
    state.polling = setInterval(() => follow(seq, token, translating), PROGRESS_MS);
  });
  request.addEventListener("load", () => {
    if (seq !== state.seq) return;
    finish(seq);
    const body = request.response;
    if (request.status === 200 && body && typeof body.file === "string") show(body);
    else el.error.textContent = sentence(`The server refused ${file.name}: ${(body && body.error) || `HTTP ${request.status}`}`);
  });
  request.addEventListener("error", () => {
    if (seq !== state.seq) return;
    finish(seq);
    el.error.textContent = `Could not reach the server to translate ${file.name}. Try again.`;
  });
  request.send(form);
}

/** Why `file` cannot be sent, in words; "" when it can. */
function refused(file) {
  const dot = file.name.lastIndexOf(".");
  const extension = dot >= 0 ? file.name.slice(dot).toLowerCase() : "";
  if (server.fileFormats.length && !server.fileFormats.includes(extension)) {
    return `${file.name}: the server does not translate this format; it reads ${server.fileFormats.join(" ")}.`;
  }
  if (file.size > server.limits.max_file_bytes) {
    return `${file.name} is ${megabytes(file.size)}: over the server's limit of ${megabytes(server.limits.max_file_bytes)}.`;
  }
  return "";
}

/** 128 random bits in hex: the upload's name for its progress (crypto.randomUUID needs a secure context). */
function randomToken() {
  return Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** The server's count of the upload's segments decoded, on the progress bar and in words. */
async function follow(seq, token, translating) {
  let counts;
  try {
    const answer = await fetch(`/v1/translate_file/progress/${token}`);
    if (!answer.ok) return; // not read yet, or already answered
    counts = await answer.json();
  } catch {
    return; // the answer to the upload says what went wrong
  }
  if (seq !== state.seq || !state.request || !counts.segments) return;
  el.progress.value = counts.done / counts.segments;
  el.status.textContent = `${translating}: ${counts.done.toLocaleString("en")} of ${count(counts.segments, "segment", "segments")}…`;
}

function finish(seq) {
  if (seq !== state.seq) return;
  clearInterval(state.polling);
  state.polling = null;
  state.request = null;
  el.progress.hidden = true;
  el.status.textContent = "";
}

function show(body) {
  const bytes = Uint8Array.from(atob(body.file), (c) => c.charCodeAt(0));
  if (state.url) URL.revokeObjectURL(state.url);
  state.url = URL.createObjectURL(new Blob([bytes], { type: body.media_type }));
  el.download.href = state.url;
  el.download.download = body.filename;
  el.download.textContent = `Download ${body.filename}`;
  const { summary, segments } = body.report;
  const warned = segments.filter((s) => s.warnings.length).length;
  el.summary.textContent = [
    count(summary.segments, "segment", "segments"),
    summary.mean_confidence === null ? "" : `mean confidence ${percent(summary.mean_confidence)}`,
    `${warned} with warnings`,
    summary.split ? `${summary.split} cut (too long)` : "",
    summary.terms_missed ? count(summary.terms_missed, "glossary term missed", "glossary terms missed") : "",
    summary.left ? `${count(summary.left, "piece", "pieces")} kept as written (${body.report.left[0]}…)` : "",
  ].filter(Boolean).join(", ");
  state.segments = [...segments].sort((a, b) => a.confidence - b.confidence || a.index - b.index);
  renderRows(state.segments.slice(0, REPORT_ROWS));
  el.more.hidden = state.segments.length <= REPORT_ROWS;
  el.result.hidden = false;
  el.status.textContent = `${body.filename} is ready.`;
}

function renderRows(segments) {
  el.rows.replaceChildren(...segments.map((s) => {
    const row = document.createElement("tr");
    const confidence = make("td", "files-confidence", s.confidence === null ? "–" : percent(s.confidence));
    row.append(make("td", "", String(s.index + 1)), confidence, make("td", "", s.source), make("td", "", s.translation));
    row.append(notes(s));
    return row;
  }));
  el.caption.textContent = `Segments, the least confident first (${segments.length} of ${state.segments.length} shown)`;
}

function notes(segment) {
  const cell = make("td", "files-notes");
  const items = [
    ...segment.warnings.map((code) => WARNING_WORDS[code] || code),
    ...segment.terms.filter((t) => !t.met).map((t) => `Glossary term “${t.term}” not met.`),
    ...(segment.sentences > 1 ? [`${segment.sentences} sentences.`] : []),
    ...(segment.kept.length ? [`Kept as written: ${segment.kept.join(" ")}`] : []),
  ];
  if (items.length) {
    const list = make("ul");
    list.append(...items.map((text) => make("li", "", text)));
    cell.append(list);
  }
  return cell;
}

function megabytes(bytes) {
  return bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${Math.ceil(bytes / 1e3)} kB`;
}
