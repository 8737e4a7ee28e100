// Small helpers of every view: DOM lookups and elements, numbers and words.

/** The element with this id. */
export const $ = (id) => document.getElementById(id);

/** Ends a message with a full stop unless it has one. */
export function sentence(text) {
  return /[.!?]$/.test(text) ? text : `${text}.`;
}

export function clamp(x, lo, hi) {
  return Math.max(lo, Math.min(hi, x));
}

/** Integers lo..hi inclusive. */
export function range(lo, hi) {
  return Array.from({ length: Math.max(0, hi - lo + 1) }, (_, i) => lo + i);
}

/** "1 step", "3 steps". */
export function count(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

export function decimal(x) {
  return Number(x).toFixed(3);
}

/** A probability in two digits without the leading zero, as the heat map writes weights: ".71". */
export function probability(p) {
  return Number(p).toFixed(2).replace(/^0/, "");
}

/** An element with a class and text. */
export function make(tag, className, text = "") {
  const node = document.createElement(tag);
  if (className) node.className = className;
  node.textContent = text;
  return node;
}

/** A probability as a whole percentage, never rounded to a certainty it is not: "<1%", "73%", ">99%". */
export function percent(p) {
  const x = clamp(Number(p), 0, 1) * 100;
  if (x > 0 && x < 1) return "<1%";
  if (x > 99 && x < 100) return ">99%";
  return `${Math.round(x)}%`;
}
