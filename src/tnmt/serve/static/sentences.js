// Translating as you type, sentence by sentence: the server says how it splits each line (POST /v1/segment, no
// model runs), and only the sentences not translated yet under the same pair, beam, alternatives and glossary are
// sent to /v1/translate; a sentence typed again is not sent again. Each line's translation is then joined from
// its sentences' as the server joins a text's (src/tnmt/translate/whole.py): the line's own characters between
// the sentences, the alignment and word probabilities offset to the line's words (a copied list marker aligned to
// itself, probability 1), the warnings and terms of every sentence, and the k-th alternative made of each
// sentence's k-th. The caret's sentence is what the step and inside views record.

import { currentModel } from "./settings.js";

const MAX_CACHED = 2000; // sentences remembered, the oldest forgotten first
// What Python's str.split() splits on (str.isspace), which JavaScript's \s is not: the server counts words so.
const PY_SPACE = "\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";
const SPACES = new RegExp(`[${PY_SPACE}]+`);

const state = {
  cache: new Map(), // key (settings + sentence) -> the server's translation of that sentence
  split: new Map(), // line text -> {sentences, gaps}, as /v1/segment answered for the current pair
  pair: "",
};

/** The words of a text as the server counts them. */
export function countWords(text) {
  return text.split(SPACES).filter((part) => part !== "").length;
}

/** Remembers how the server split `lines` ({sentences, gaps} each, in order), for the caret and the next edit. */
export function rememberSplit(lines, answers) {
  const pair = currentModel().id;
  if (pair !== state.pair) state.split.clear();
  state.pair = pair;
  lines.forEach((line, k) => state.split.set(line, answers[k]));
}

/** The lines whose split is not known yet. */
export function unsplit(lines) {
  if (currentModel().id !== state.pair) return [...new Set(lines)];
  return [...new Set(lines.filter((line) => !state.split.has(line)))];
}

/** How many sentences `lines` have (all split already). */
export function countSentences(lines) {
  return lines.reduce((n, line) => n + state.split.get(line).sentences.length, 0);
}

/** The sentences of `lines` not translated yet under `settings` (a JSON string), each once. */
export function untranslated(lines, settings) {
  const sentences = lines.flatMap((line) => state.split.get(line).sentences);
  return [...new Set(sentences.filter((s) => !state.cache.has(key(settings, s))))];
}

/** Keeps the server's translations of `sentences` under `settings`. */
export function remember(sentences, translations, settings) {
  sentences.forEach((sentence, k) => {
    state.cache.set(key(settings, sentence), translations[k]);
  });
  while (state.cache.size > MAX_CACHED) state.cache.delete(state.cache.keys().next().value);
}

/** Each line's translation, joined from its sentences' (all translated under `settings`). */
export function joinedLines(lines, settings) {
  return lines.map((line) => {
    const { sentences, gaps } = state.split.get(line);
    return join(gaps, sentences, sentences.map((s) => state.cache.get(key(settings, s))));
  });
}

/** The line and sentence the caret is in (`source` the textarea, its lines numbered as `numbered`), for the views:
 * {text, sentence}, or the first line's first sentence when the caret is on no translated line. */
export function caretSentence(source, numbered) {
  if (!numbered.length) return null;
  const before = source.value.slice(0, source.selectionStart ?? 0);
  const number = before.split(/\r?\n/).length;
  const line = numbered.find((l) => l.number === number) || numbered[0];
  const split = state.split.get(line.text);
  if (!split || line.number !== number) return { text: line.text, sentence: 0 };
  const raw = source.value.split(/\r?\n/)[number - 1];
  let at = before.length - before.lastIndexOf("\n") - 1 - (raw.length - raw.trimStart().length); // in the line
  let sentence = 0;
  for (let k = 0; k < split.sentences.length; k += 1) {
    at -= split.gaps[k].length;
    if (at < split.sentences[k].length) break;
    at -= split.sentences[k].length;
    sentence = Math.min(k + 1, split.sentences.length - 1);
  }
  return { text: line.text, sentence };
}

/** The text of the sentence the caret is in (as `caretSentence` finds it), or null when there is no line. */
export function caretSentenceText(source, numbered) {
  const at = caretSentence(source, numbered);
  if (!at) return null;
  const split = state.split.get(at.text);
  return split ? split.sentences[at.sentence].trim() : at.text.trim();
}

function key(settings, sentence) {
  return `${settings}\u0000${sentence}`;
}

/** One line's translation from its sentences' (`results`, the server's answers), as the server joins a text. */
function join(gaps, sentences, results) {
  if (results.length === 1 && gaps[0] === "" && gaps[1] === "") return results[0];
  let text = gaps[0];
  let source = countWords(gaps[0]);
  let target = source;
  const alignment = [];
  const words = [];
  const warnings = [];
  const constraints = [];
  for (let k = 0; k < source; k += 1) {
    alignment.push([k, k]);
    words.push(1);
  }
  results.forEach((r, i) => {
    text += r.text;
    for (const [a, b] of r.alignment || []) alignment.push([source + a, target + b]);
    const probs = (r.confidence && r.confidence.words) || [];
    words.push(...countWordsArray(r.text).map((_, j) => (typeof probs[j] === "number" ? probs[j] : 1)));
    for (const code of r.warnings || []) if (!warnings.includes(code)) warnings.push(code);
    for (const c of r.constraints || []) constraints.push({ ...c, words: (c.words || []).map((w) => w + target) });
    source += countWords(sentences[i]);
    target += countWords(r.text);
    const copied = countWords(gaps[i + 1]);
    for (let k = 0; k < copied; k += 1) {
      alignment.push([source + k, target + k]);
      words.push(1);
    }
    source += copied;
    target += copied;
    text += gaps[i + 1];
  });
  const confidences = results.map((r) => (r.confidence ? r.confidence.sentence : null));
  const joined = {
    text, warnings, alignment, constraints,
    confidence: { sentence: lineConfidence(results), words, sentences: confidences },
  };
  if (results.every((r) => Array.isArray(r.alternatives))) joined.alternatives = alternatives(gaps, results);
  return joined;
}

function countWordsArray(text) {
  return text.split(SPACES).filter((part) => part !== "");
}

/** The geometric mean of the sentences' confidences, each weighted by its words and EOS (the page does not see
 * tokens: the server's own answer for the whole line weighs by tokens). */
function lineConfidence(results) {
  let total = 0;
  let sum = 0;
  for (const r of results) {
    if (!r.confidence || typeof r.confidence.sentence !== "number") return null;
    const n = countWords(r.text) + 1;
    total += n;
    sum += n * Math.log(Math.max(r.confidence.sentence, 1e-300));
  }
  return total ? Math.exp(sum / total) : null;
}

/** The line's n-best list: the k-th joins each sentence's k-th (its last when it has fewer), scores summed. */
function alternatives(gaps, results) {
  const n = Math.max(...results.map((r) => r.alternatives.length));
  return Array.from({ length: n }, (_, k) => {
    const parts = results.map((r) => r.alternatives[Math.min(k, r.alternatives.length - 1)]);
    const text = parts.reduce((all, part, i) => all + part.text + gaps[i + 1], gaps[0]);
    return { text, score: parts.reduce((all, part) => all + part.score, 0) };
  });
}
