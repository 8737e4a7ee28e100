// The beam of a traced search as a tree: a "start" column, then one column per step with the candidates it
// considered under their parents, joined by curves. Built once per trace; stepping only shows columns and moves
// marks, so focus stays put. Kept, finished and pruned differ by border, mark and words, never colour alone; under
// a glossary, each hypothesis says how many of its terms it has met.
// `view` is the step view's state: {trace, tree, step, hyp}.

import { $, count, decimal, make, probability } from "./util.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const FATE_MARKS = { kept: "", finished: "✓ end", pruned: "✗" };
const el = { explainSection: $("explain-section"), treeBox: $("tree-box"), tree: $("tree") };

/** A "start" column, then one column per step with the candidates it considered, grouped under their parent. */
export function buildTree(trace) {
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
      if (live) markTerms(node, trace.steps[t + 1].hypotheses[candidate.child].constraints);
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

/** "1/2" on a hypothesis that has met one of its two terms (positive constraints); nothing when it has none. */
function markTerms(node, constraints = []) {
  if (!constraints.length) return;
  const mark = make("span", "terms", `${constraints.filter(Boolean).length}/${constraints.length}`);
  mark.setAttribute("aria-hidden", "true");
  node.append(mark, make("span", "sr-only", `, ${termsMet(constraints)}`));
  node.title += `; ${termsMet(constraints)}`;
}

/** "1 of 2 terms met", from a hypothesis's `constraints` (met yet, per term). */
export function termsMet(constraints) {
  return `${constraints.filter(Boolean).length} of ${count(constraints.length, "term", "terms")} met`;
}

export function fateWords(candidate) {
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

/** The hypothesis of step t + 1 that continues `hyp` of step t: its best kept child, else the best of all. */
export function bestChild(trace, t, hyp) {
  const child = trace.steps[t].candidates
    .find((c) => c.parent === hyp && c.fate === "kept" && c.child != null);
  return child ? child.child : 0; // its line ended: the best hypothesis of the next step
}

/** The hypothesis of step t - 1 that `hyp` of step t extends. */
export function parentOf(trace, t, hyp) {
  if (t === 0) return 0;
  const self = trace.steps[t - 1].candidates.find((c) => c.fate === "kept" && c.child === hyp);
  return self ? self.parent : 0;
}

/** Shows the columns up to this step's candidates and marks the selection, its line and its candidates. */
export function markTree(view) {
  const { tree, step, hyp } = view;
  const line = lineage(view);
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
  keepSelectionInView(view);
}

/** The nodes from the start to the selected hypothesis. */
function lineage({ trace, tree, step, hyp }) {
  const line = new Set();
  for (let s = step, h = hyp; s >= 0; h = parentOf(trace, s, h), s -= 1) {
    const node = tree.nodes[s][h];
    if (node) line.add(node);
  }
  return line;
}

/** Scrolls the tree's own box, never the page (which must not move under the reader while playing), so that
 * the selected hypothesis and the step's column are in sight. */
export function keepSelectionInView({ tree, step, hyp }) {
  const selected = tree && tree.nodes[step][hyp];
  if (!selected || !el.explainSection.open) return;
  const box = el.treeBox.getBoundingClientRect();
  const node = selected.getBoundingClientRect();
  const right = tree.columns[step + 1].box.getBoundingClientRect().right;
  el.treeBox.scrollLeft += Math.max(0, right - box.right) || Math.min(0, node.left - box.left);
  el.treeBox.scrollTop += Math.max(0, node.bottom - box.bottom) || Math.min(0, node.top - box.top);
}

/** Parent-to-child curves over the shown columns; dashed to pruned children, bold from the selection. */
export function drawEdges({ tree, step }) {
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
