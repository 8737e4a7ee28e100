// The glossary box: source term -> target term pairs (a target may list forms, "Hund | Hunde"), one glossary per
// language pair, kept in this browser (localStorage) and sent as `glossary` with every request that translates
// (translate, alternatives, explain); a refusal of the server that names the glossary is shown in the box with
// its entry marked, not as a broken page. Per translated line: the words that meet a term are marked, and the
// terms it met and did not are listed (the answer's `constraints`).

import { currentModel } from "./settings.js";
import { $, make, sentence } from "./util.js";

const STORE = "tnmt.glossary"; // localStorage key: this, then the pair ("tnmt.glossary.en-de")
const KINDS = { glossary: "glossary term", do_not_translate: "term kept as written", include: "required phrase" };
const el = {
  pair: $("pair"), form: $("glossary-form"), source: $("glossary-source"), target: $("glossary-target"),
  list: $("glossary-list"), pairName: $("glossary-pair"), status: $("glossary-status"), error: $("glossary-error"),
  fields: $("glossary-fields"),
};
const state = {
  entries: [], // [{source, target}] of the current pair, in the order sent
  refused: null, // who refused what the box shows: "server" (a 413/422) or "box" (a conflicting entry)
  onChange: () => {},
};

/** `onChange()` after an entry is added or removed (not after a change of pair: that translates anyway). */
export function wireGlossary(onChange) {
  state.onChange = onChange;
  el.form.addEventListener("submit", (event) => {
    event.preventDefault();
    add(el.source.value.trim(), el.target.value.trim());
  });
  el.list.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-index]");
    if (button) remove(Number(button.dataset.index));
  });
  el.pair.addEventListener("change", loadGlossary);
}

/** Shows the current pair's glossary as this browser kept it (the box waits for the models to be known). */
export function loadGlossary() {
  const model = currentModel();
  el.fields.disabled = false;
  state.entries = read();
  el.pairName.textContent = `${model.source} → ${model.target}`;
  el.source.lang = model.source;
  el.target.lang = model.target;
  el.status.textContent = "";
  clearRefusal();
  render();
}

/** The steering fields of a request: `glossary` when there are entries, nothing otherwise. */
export function steering() {
  return state.entries.length ? { glossary: state.entries.map(({ source, target }) => ({ source, target })) } : {};
}

function storeKey() {
  const model = currentModel();
  return `${STORE}.${model.source}-${model.target}`;
}

function read() {
  try {
    const entries = JSON.parse(localStorage.getItem(storeKey()) || "[]");
    return Array.isArray(entries)
      ? entries.filter((e) => e && typeof e.source === "string" && typeof e.target === "string")
      : [];
  } catch {
    return []; // storage disabled, or not ours: start empty
  }
}

/** Adds a pair. A source term already listed (in any case) with another target is refused, naming both entries,
 * as the server refuses them: which target would win is not for the page to guess. */
function add(source, target) {
  if (!source || !target) return; // the inputs' `required` and `pattern` say so in the browser's words
  const at = state.entries.findIndex((e) => e.source.toLowerCase() === source.toLowerCase());
  if (at >= 0) {
    const listed = state.entries[at];
    clearRefusal();
    if (listed.target === target) {
      el.status.textContent = `“${listed.source}” → “${listed.target}” is in the glossary already.`;
      return;
    }
    el.error.textContent = `“${source}” → “${target}” conflicts with entry ${at + 1}, “${listed.source}” → ` +
      `“${listed.target}”: remove that entry first, or give both forms in one (“${listed.target} | ${target}”).`;
    el.list.children[at].classList.add("refused");
    state.refused = "box";
    return;
  }
  state.entries.push({ source, target });
  el.form.reset();
  el.source.focus();
  changed(`Added “${source}” → “${target}”.`);
}

function remove(index) {
  const [gone] = state.entries.splice(index, 1);
  changed(`Removed “${gone.source}”.`);
  // Focus stays in the list: on the entry that took the removed one's place (or the last), else on the form.
  const buttons = el.list.querySelectorAll("button[data-index]");
  (buttons[Math.min(index, buttons.length - 1)] || el.source).focus();
}

function changed(message) {
  let kept = true;
  try {
    localStorage.setItem(storeKey(), JSON.stringify(state.entries));
  } catch {
    kept = false;
  }
  clearRefusal();
  render();
  el.status.textContent = kept ? message : `${message} The browser refused to keep it: it lasts until you leave.`;
  state.onChange();
}

function render() {
  const model = currentModel();
  el.list.replaceChildren(...state.entries.map((entry, n) => {
    const item = make("li", "glossary-entry");
    const source = make("span", "term-source", entry.source);
    source.lang = model.source;
    const target = make("span", "term-target", entry.target);
    target.lang = model.target;
    const arrow = make("span", "arrow", " → ");
    arrow.setAttribute("aria-hidden", "true");
    const remove = make("button", "remove", "Remove");
    remove.type = "button";
    remove.dataset.index = String(n);
    remove.setAttribute("aria-label", `Remove “${entry.source}” → “${entry.target}”`);
    item.append(source, arrow, make("span", "sr-only", " becomes "), target, remove);
    return item;
  }));
}

/** Shows a refusal (413, 422) that names the glossary, or the phrases to include (its terms, to the server), in
 * the box, its entry marked when named; false for any other refusal. */
export function showGlossaryRefusal(status, message) {
  if (![413, 422].includes(status) || !/\bglossary\b|phrases to include/.test(message)) return false;
  const n = refusedEntry(message);
  const entry = state.entries[n];
  const which = entry ? `glossary entry ${n + 1} (“${entry.source}” → “${entry.target}”)` : "the glossary";
  el.error.textContent = `The server refused ${which} (${status}): ${sentence(message)}`;
  [...el.list.children].forEach((item, k) => item.classList.toggle("refused", k === n));
  state.refused = "server";
  return true;
}

/** Clears the refusal shown, or only one that `only` ("server") made: a translation the server accepted does not
 * take back the box's own refusal of an entry. */
export function clearRefusal(only = null) {
  if (only && state.refused !== only) return;
  state.refused = null;
  el.error.textContent = "";
  for (const item of el.list.querySelectorAll(".refused")) item.classList.remove("refused");
}

/** The index of the entry a message names: `glossary[2]` (as sent), or `glossary entry 'dog'` (its source). */
function refusedEntry(message) {
  const numbered = /glossary\[(\d+)\]/.exec(message);
  if (numbered) return Number(numbered[1]);
  const named = /glossary entry (['"])(.*?)\1/.exec(message);
  const spaced = (term) => term.trim().split(/\s+/).join(" ");
  return named ? state.entries.findIndex((e) => spaced(e.source) === named[2]) : -1;
}

/** Marks the words (`spans`) that meet a term, and names the term in their titles. */
export function markTerms(spans, constraints) {
  for (const constraint of constraints) {
    for (const j of constraint.words || []) {
      const span = spans[j];
      if (!span) continue;
      span.classList.add("term");
      const term = `${KINDS[constraint.source] || "term"} “${constraint.target}”`;
      span.title = span.title ? `${span.title}; ${term}` : term;
    }
  }
}

/** A line's terms in words, met (✓, with the words that meet it) or not (✗), and what placing a glossary term cost:
 * the model's own word for it kept beside it, or nearby source words left untranslated; null when it has none. */
export function termsList(constraints, words, label) {
  if (!constraints.length) return null;
  const list = make("ul", "line-terms");
  list.setAttribute("aria-label", label);
  list.append(...constraints.map((c) => {
    const item = make("li", c.met ? "met" : "unmet", `${c.met ? "✓" : "✗"} ${KINDS[c.source] || "term"} `);
    item.append(quoted(c.target));
    if (c.met) item.append(": used as ", quoted((c.words || []).map((j) => words[j]).filter(Boolean).join(" ")));
    else item.append(": not used");
    if (c.doubled) item.append("; the model's own word for it is there too");
    if (c.lost && c.lost.length) {
      item.append(`; ${c.lost.length === 1 ? "a source word" : "source words"} near it lost ` +
        `${c.lost.length === 1 ? "its" : "their"} translation: `, c.lost.map((w) => `“${w}”`).join(", "));
    }
    return item;
  }));
  return list;
}

function quoted(text) {
  const term = make("q", "", text);
  term.lang = currentModel().target;
  return term;
}
