// The page of `tnmt serve`: translate as you type, and draw where the decoder looked.
//
// Promises to the user:
// - typing waits ~300 ms of quiet before asking the server; a newer request aborts the older one and a
//   late answer to an older request never overwrites a newer one;
// - lines are translated line by line, and a line may hold several sentences: the server says how it splits a
//   line (/v1/segment) and only the sentences not translated yet (under the same pair, beam and glossary) are
//   sent; a line's translation is joined from its sentences' (sentences.js); a one-sentence text has its
//   attention heat map;
// - a line over `limits.max_chars` is not sent: the limit is per line, as the server's is per text (each
//   line is one text), and the counter and the error name the line in words;
// - every server or network error is shown as a sentence in #error (an ARIA live region);
// - "Step through the search" asks /v1/explain for the sentence the caret is in (the first line's first when it is
//   on no line) when it is opened and when the source, the caret, the pair or the beam changes while it is open,
//   under the same debounce and abort rules (a stale trace never replaces a newer one); its errors are sentences in
//   its own alert region, the server's words included;
// - the trace steps by buttons and keys (← →, Home/End, Space plays) with "Step t of n" spoken; the beam is a
//   tree of DOM nodes in which kept, finished and pruned differ by border, mark and words, never colour alone;
//   the selected hypothesis is a focusable button, and its next-subword bars and attention row follow it;
// - every translation comes with its evidence, line by line: its words are spans (one Tab stop, then ← → and ↑ ↓)
//   and pointing at or focusing one outlines the source words the server aligned it to, in a strip of the line's
//   source words, and the other way round; words under LOW_CONFIDENCE probability are underlined (dotted) on a
//   tint, the legend says the threshold in words; each line shows its sentence confidence as a percentage and its
//   warnings as sentences. Words are the server's: runs of what Python's str.split() splits on;
// - a glossary (source term -> target term, forms as "Hund | Hunde") per language pair is kept in this browser and
//   sent with every translation, alternatives and trace request; a refusal naming it is shown in its box, the
//   entry marked; each line lists the terms it met (their words marked) and those it did not, and in the trace
//   each hypothesis says how many it has met;
// - a click, a tap, or Enter or Space on a word of the translation lists its alternatives with their
//   probabilities in a listbox (↑ ↓, Enter, Escape); the one chosen replaces its line, the rest translated again,
//   until the line, the pair or the glossary changes;
// - "Inside the model" asks /v1/inspect for the caret's sentence (and the model's own translation, or one typed in
//   the view) under the same rules as the step view, and draws the forward pass in the lesson's order, one panel per
//   stage; each picture is one Tab stop read cell by cell with the arrow keys, in words, in its panel's readout;
//   layers count from 1 at the input side, heads from 1;
// - "Watch it learn" (when the server has the model's training run) asks /v1/replay for the caret's sentence through
//   every model the run kept, and walks them with a slider: translations, attention, curves (replay.js);
// - "Files" sends a dropped or chosen document to /v1/translate_file and offers its translation as a download, with
//   the report of its segments, the least confident first (files.js).
//
// The modules, one per view: settings.js (the models, limits, pair, beam, alternatives and source lines),
// glossary.js (the glossary box and each line's terms), translate.js (translating as you type) with sentences.js
// (sentence by sentence: what is sent, and each line joined from its sentences), evidence.js
// (words, alignment, confidence, warnings), alternatives.js (other words for a word), heatmap.js (the
// cross-attention map), explain.js with explain_tree.js and explain_panels.js (stepping through the search),
// inside.js with inside_panels.js, inside_layers.js and inside_draw.js (inside the model), replay.js (watch it
// learn), files.js (documents);
// api.js is the one way they ask the server (files.js sends its uploads itself, for their progress), util.js their
// small helpers.

import { scheduleExplain, wireExplain } from "./explain.js";
import { wireEvidence } from "./evidence.js";
import { showFileFormats, wireFiles } from "./files.js";
import { loadGlossary, wireGlossary } from "./glossary.js";
import { wireHeatmap } from "./heatmap.js";
import { scheduleInside, wireInside } from "./inside.js";
import { scheduleReplay, showReplayView, wireReplay } from "./replay.js";
import { loadModels, sourceLines } from "./settings.js";
import { showError, translateNow, updateCounter, wireTranslate } from "./translate.js";

async function init() {
  wireExplain();
  wireEvidence();
  wireTranslate();
  wireHeatmap();
  wireInside();
  wireFiles();
  wireReplay();
  wireGlossary(() => {
    translateNow();
    scheduleExplain(0);
  });
  if (!(await loadModels(showError))) return;
  loadGlossary();
  showFileFormats();
  showReplayView();
  updateCounter();
  if (sourceLines().length) translateNow(); // text restored by the browser on reload
  scheduleExplain(0); // the views may have been opened before the models were known
  scheduleInside(0);
  scheduleReplay(0);
}

init();
