// The evidence of each translated line: its words as spans that outline, on pointing or focus, the source words
// the server aligned them to (and the other way round), unsure words underlined, the sentence's confidence, its
// warnings and its glossary terms in words, and a note on a line the user chose. The translation's words are
// also buttons that open their alternatives (alternatives.js). Words are the server's: runs of what Python's
// str.split() splits on.

import { markTerms, termsList } from "./glossary.js";
import { currentModel } from "./settings.js";
import { $, make, percent } from "./util.js";

const LOW_CONFIDENCE = 0.5; // a word under this probability is marked as unsure
// What Python's str.split() splits on (str.isspace), which JavaScript's \s is not: the server counts words so.
const PY_SPACE = "\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";
const SPACES = new RegExp(`([${PY_SPACE}]+)`);
export const WARNING_WORDS = {
  repetition: "The translation repeats a word or phrase in a loop.",
  copy: "The translation copies the source instead of translating it.",
  length_ratio: "The translation is much shorter or longer than translations of such a source usually are.",
  uncovered_source: "A source word got almost no attention: it may be missing from the translation.",
  truncated: "The source was too long for the model: only its beginning was translated.",
  sentence_split: "A sentence was too long for the model to read whole: it was translated in parts.",
  term_doubled: "A glossary term's source is translated twice: by the term and by the model's own word.",
  term_lost_words: "Words near a glossary term lost their translation when the term was placed.",
};

const el = {
  output: $("output"), evidence: $("evidence"), evidenceLines: $("evidence-lines"),
  evidenceReadout: $("evidence-readout"), lowThreshold: $("low-threshold"),
};
const state = {
  // per translated line: {number, source, target, pairs, probs, sentence, warnings, checked, constraints,
  // chosen, spans}
  lines: [],
};

export function wireEvidence() {
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
export function showEvidence(translations, sent) {
  state.lines = translations.map((t, k) => lineEvidence(t, sent[k] || { text: "", number: k + 1 }));
  const lines = state.lines.map((line, k) => {
    const box = make("span", "line");
    box.append(...wordNodes(translations[k].text, k, "target", (span, j) => {
      markConfidence(span, line.probs, j);
      span.setAttribute("role", "button"); // opens its alternatives
      span.setAttribute("aria-haspopup", "listbox");
      span.setAttribute("aria-expanded", "false");
    }));
    line.spans.target = [...box.querySelectorAll(".word")];
    markTerms(line.spans.target, line.constraints);
    return box;
  });
  // as many line breaks between two lines as in the source: its blank lines stay blank
  const breaks = (k) => "\n".repeat(Math.max(1, (sent[k] && sent[k - 1] ? sent[k].number - sent[k - 1].number : 1)));
  el.output.replaceChildren(...lines.flatMap((line, k) => (k ? [document.createTextNode(breaks(k)), line] : [line])));
  const first = el.output.querySelector(".word");
  if (first) first.tabIndex = 0;

  const several = state.lines.length > 1;
  el.evidenceLines.replaceChildren(...state.lines.map((line, k) => evidenceItem(line, k, several)));
  const firstSource = el.evidenceLines.querySelector(".word");
  if (firstSource) firstSource.tabIndex = 0;
  el.evidenceReadout.textContent = "";
  el.evidence.hidden = !state.lines.some((line) => line.pairs || line.probs || line.sentence != null
    || line.warnings.length || line.constraints.length || line.chosen);
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
    sentences: Array.isArray(confidence.sentences) && confidence.sentences.length > 1 ? confidence.sentences : null,
    warnings: Array.isArray(translation.warnings) ? translation.warnings : [],
    checked: Array.isArray(translation.warnings), // a chosen line waiting for its evidence is not
    constraints: Array.isArray(translation.constraints) ? translation.constraints : [],
    chosen: translation.chosen || null, // alternatives.js's note on a line the user chose
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
  if (line.sentences) { // a line of several sentences: each one's
    const each = line.sentences.map((c) => (typeof c === "number" ? percent(c) : "?")).join(", ");
    head.append(make("span", "confidence", `sentence confidences ${each}`));
  } else if (line.sentence != null) {
    head.append(make("span", "confidence", `sentence confidence ${percent(line.sentence)}`));
  }
  if (line.checked && !line.warnings.length) head.append(make("span", "clean", "no warnings"));
  item.append(head);
  if (line.chosen) item.append(make("p", "chosen", line.chosen));
  if (line.warnings.length) {
    const list = make("ul", "warnings");
    list.setAttribute("aria-label", several ? `Warnings for line ${line.number}` : "Warnings");
    list.append(...line.warnings.map((code) => make("li", "", WARNING_WORDS[code] || String(code))));
    item.append(list);
  }
  const terms = termsList(line.constraints, line.target, several ? `Terms of line ${line.number}` : "Terms");
  if (terms) item.append(terms);
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
  const line = state.lines[Number(word.dataset.line)];
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
  const where = state.lines.length > 1 ? ` in line ${line.number}` : "";
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

