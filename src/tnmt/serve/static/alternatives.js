// Other words for a word of the translation: a click, a tap, or Enter or Space on a focused word opens a list of
// the model's likeliest replacements there (POST /v1/alternatives, k = 5), each with its probability and the
// translation it leads to (the words before it kept, the rest translated again). Choosing one (a click, or ↑ ↓ and
// Enter) shows that translation for its line until the line, the pair or the glossary changes; Escape closes.
// The chosen line then gets its own evidence: /v1/translate with the choice as the prefix, which the model ends
// there. The list is an ARIA listbox: focus moves into it once it has options, and back to the word when it closes.

import { Latest } from "./api.js";
import { steering } from "./glossary.js";
import { currentModel } from "./settings.js";
import { $, clamp, count, make, percent, sentence } from "./util.js";

const K = 5; // replacements asked for
const el = {
  source: $("source"), beam: $("beam"), output: $("output"), popup: $("word-popup"), label: $("word-popup-label"),
  status: $("word-popup-status"), list: $("word-choices"),
};
const state = {
  latest: new Latest((busy) => el.popup.setAttribute("aria-busy", String(busy))),
  choices: new Map(), // choiceKey(line text) -> {translation, note, evidence}: the lines shown as the user chose
  sent: [], // the source lines shown, {text, number}, by line index
  word: null, // the word span whose list is open
  options: [], // its alternatives, as the server listed them
  active: 0, // the option ↑ ↓ point at
  onChoose: () => {},
};

/** `onChoose()` shows the translation again, `applyChoices` putting the chosen line in. */
export function wireAlternatives(onChoose) {
  state.onChoose = onChoose;
  el.output.addEventListener("click", (event) => {
    const word = event.target.closest(".word");
    if (word && window.getSelection().isCollapsed) toggle(word); // not at the end of selecting text to copy
  });
  el.output.addEventListener("keydown", (event) => {
    const word = event.target.closest(".word");
    if (!word || event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.key === "Enter" || event.key === " ") {
      event.preventDefault();
      toggle(word);
    } else if (event.key === "Escape" && state.word) {
      event.preventDefault();
      close();
    }
  });
  el.list.addEventListener("keydown", onListKey);
  el.list.addEventListener("click", (event) => {
    const option = event.target.closest("[role='option']");
    if (option) choose(Number(option.dataset.index));
  });
  document.addEventListener("pointerdown", (event) => {
    if (state.word && !el.popup.contains(event.target) && !state.word.contains(event.target)) close(false);
  });
  el.popup.addEventListener("focusout", (event) => {
    if (event.relatedTarget && !el.popup.contains(event.relatedTarget)) close(false); // tabbed away
  });
  el.source.addEventListener("input", () => close(false));
  window.addEventListener("resize", place);
}

/** The translations to show for the lines `sent`: a line the user chose an alternative for shows it instead,
 * with a `chosen` note and its own evidence once known (the model's is of another text). Choices of lines no
 * longer sent are forgotten; an open list closes, its word being about to be replaced. */
export function applyChoices(translations, sent) {
  close(false);
  state.sent = sent;
  const keys = sent.map((line) => choiceKey(line.text));
  for (const key of state.choices.keys()) if (!keys.includes(key)) state.choices.delete(key);
  return translations.map((translation, k) => {
    const choice = state.choices.get(keys[k]);
    if (!choice) return translation;
    return { ...(choice.evidence || { text: choice.translation }), chosen: choice.note };
  });
}

/** A choice holds for its line's text under the pair and glossary it was made with. */
function choiceKey(text) {
  return JSON.stringify([currentModel().id, text, steering()]);
}

function toggle(word) {
  if (state.word === word) close();
  else open(word);
}

async function open(word) {
  close(false);
  const k = Number(word.dataset.line);
  const line = state.sent[k];
  if (!line) return;
  const position = Number(word.dataset.word);
  state.word = word;
  word.setAttribute("aria-expanded", "true");
  const shown = make("span", "", word.textContent);
  shown.lang = currentModel().target;
  el.label.replaceChildren("Instead of “", shown, "”");
  el.status.textContent = "Asking the model for other words…";
  el.list.hidden = true;
  el.popup.hidden = false;
  place();

  const model = currentModel();
  const body = {
    text: line.text, position, k: K, source: model.source, target: model.target, beam_size: Number(el.beam.value),
    ...steering(),
  };
  if (state.choices.has(choiceKey(line.text)) && position > 0) {
    // The server replaces a word of its own translation: make it the one shown, up to this word.
    const words = [...el.output.querySelectorAll(`.word[data-line="${k}"]`)].slice(0, position);
    body.prefix = words.map((w) => w.textContent).join(" ");
  }
  await state.latest.send("/v1/alternatives", body, {
    answer: (data) => {
      if (!data || !Array.isArray(data.alternatives)) throw new Error("the server's answer has no alternatives");
      showOptions(data.alternatives);
    },
    refused: (response, message) => say(`The server refused (${response.status}): ${sentence(message)}`),
    fail: (error) => say(error instanceof TypeError
      ? "Cannot reach the server (network error). Is `tnmt serve` still running?"
      : `Finding other words failed: ${error.message}.`),
  });
}

function say(text) {
  el.status.textContent = text;
  place();
}

function showOptions(options) {
  state.options = options;
  if (!options.length) {
    say("The model offers no other word here.");
    return;
  }
  const lang = currentModel().target;
  el.list.replaceChildren(...options.map((option, i) => {
    const item = make("li", "choice");
    item.id = `word-choice-${i}`;
    item.dataset.index = String(i);
    item.setAttribute("role", "option");
    item.setAttribute("aria-selected", "false");
    const word = make("span", "choice-word", option.word);
    const translation = make("span", "choice-translation", option.translation);
    word.lang = translation.lang = lang;
    item.append(word, make("span", "choice-prob", percent(option.probability)), translation);
    return item;
  }));
  el.status.textContent = `${count(options.length, "other word", "other words")}, likeliest first, with the `
    + "translation each leads to:";
  el.list.hidden = false;
  place();
  setActive(0);
  el.list.focus();
}

function setActive(i) {
  state.active = clamp(i, 0, state.options.length - 1);
  for (const option of el.list.children) {
    option.setAttribute("aria-selected", String(Number(option.dataset.index) === state.active));
  }
  const active = el.list.children[state.active];
  el.list.setAttribute("aria-activedescendant", active.id);
  active.scrollIntoView({ block: "nearest" });
}

function onListKey(event) {
  if (event.altKey || event.ctrlKey || event.metaKey) return;
  const last = state.options.length - 1;
  const moves = { ArrowDown: state.active + 1, ArrowUp: state.active - 1, Home: 0, End: last };
  if (event.key in moves) setActive(moves[event.key]);
  else if (event.key === "Enter" || event.key === " ") choose(state.active);
  else if (event.key === "Escape") close();
  else if (event.key === "Tab") close(); // back on the word, Tab goes on from there
  else return;
  if (event.key !== "Tab") event.preventDefault();
}

/** Shows option `i`'s translation for the word's line, focuses the word at its place, and asks for its evidence. */
function choose(i) {
  const option = state.options[i];
  if (!option || !state.word) return;
  const { line, word } = state.word.dataset;
  const text = state.sent[Number(line)].text;
  const choice = {
    translation: option.translation,
    note: `You chose “${option.word}” (${percent(option.probability)}) instead of “${state.word.textContent}”, `
      + `word ${Number(word) + 1}; the words after it were translated again.`,
    evidence: null,
  };
  state.choices.set(choiceKey(text), choice);
  close(false);
  showAgain({ line, word });
  askEvidence(text, choice);
}

/** The chosen translation's evidence (alignment, confidence, terms): forced as the prefix, the model ends it
 * there; an answer of another text, or none, leaves the line without. */
async function askEvidence(text, choice) {
  const model = currentModel();
  const body = {
    text, source: model.source, target: model.target, beam_size: Number(el.beam.value), prefix: choice.translation,
    return_alignment: true, return_confidence: true, ...steering(),
    segment: false, // the prefix is the whole line's translation: the line is read as one text
  };
  const ignore = () => {};
  await new Latest().send("/v1/translate", body, { // its own: a choice on another line does not cancel it
    answer: (data) => {
      const found = data && Array.isArray(data.translations) ? data.translations[0] : null;
      if (!found || found.text !== choice.translation || ![...state.choices.values()].includes(choice)) return;
      choice.evidence = found;
      if (!state.word) showAgain(el.output.contains(document.activeElement) ? document.activeElement.dataset : {});
    },
    refused: ignore,
    fail: ignore,
  });
}

/** Shows the translation again with the choices, focus on the word at `line` and `word` when given. */
function showAgain({ line, word }) {
  state.onChoose();
  const again = el.output.querySelector(`.word[data-line="${line}"][data-word="${word}"]`);
  if (again) again.focus();
}

/** Closes the list (dropping its request); `refocus` gives focus back to its word. */
function close(refocus = true) {
  if (!state.word) return;
  const word = state.word;
  state.latest.cancel();
  state.word = null;
  state.options = [];
  word.setAttribute("aria-expanded", "false");
  el.popup.hidden = true;
  el.popup.setAttribute("aria-busy", "false");
  el.list.replaceChildren();
  el.list.removeAttribute("aria-activedescendant");
  if (refocus && word.isConnected) word.focus();
}

/** Under its word, inside the window's width (a phone's too). */
function place() {
  if (!state.word) return;
  const rect = state.word.getBoundingClientRect();
  const room = document.documentElement.clientWidth - el.popup.offsetWidth - 8;
  el.popup.style.left = `${Math.max(8, Math.min(rect.left, room)) + window.scrollX}px`;
  el.popup.style.top = `${rect.bottom + 4 + window.scrollY}px`;
}
