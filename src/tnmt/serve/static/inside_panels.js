// The "Inside the model" view's first and last stages, drawn from a /v1/inspect answer: 1. pieces and ids,
// 2. embeddings x sqrt(d_model) plus positions, 3. the masks, and 9. the linear layer and softmax that predict each
// next piece. Positions count from 0, as the positional formula does.

import {
  barLegend, barRows, cellTable, heatMap, largest, quoted, readableList, scrollBox, smallest, titled,
} from "./inside_draw.js";
import { currentModel } from "./settings.js";
import { $, clamp, make, range } from "./util.js";

const el = {
  pieces: $("pieces-picture"), piecesReadout: $("pieces-readout"),
  embedding: $("embedding-picture"), embeddingNote: $("embedding-note"), embeddingReadout: $("embedding-readout"),
  masks: $("masks-picture"), masksReadout: $("masks-readout"),
  softmax: $("softmax-picture"), softmaxReadout: $("softmax-readout"),
};

/** 1. The pieces the encoder reads, with ids; what the decoder is fed (BOS first) and should predict. */
export function drawPieces({ source, target }) {
  const readout = el.piecesReadout;
  const last = source.pieces.length - 1;
  const sourceTable = cellTable({
    name: `Encoder input: ${source.pieces.length} source pieces and their ids, EOS last`,
    colHeads: range(0, last).map(String),
    rowHeads: ["piece", "id"],
    cell: (r, c) => ({ text: r ? String(source.ids[c]) : source.pieces[c], className: r ? "id" : "piece" }),
    read: (_, c) => `Source position ${c}: ${quoted(source.pieces[c])}, id ${source.ids[c]}`
      + `${c === last ? "; EOS ends the source (there is no BOS on it)" : ""}.`,
    readout,
  });
  const n = target.fed_pieces.length;
  const texts = [target.fed_pieces, target.fed_ids.map(String), target.next_pieces];
  const targetTable = cellTable({
    name: `Decoder input: ${n} pieces fed, BOS first, and the piece each position should predict`,
    colHeads: range(0, n - 1).map(String),
    rowHeads: ["fed piece", "fed id", "to predict"],
    cell: (r, c) => ({ text: texts[r][c], className: r === 1 ? "id" : "piece" }),
    read: (_, c) => `Decoder position ${c}: fed ${quoted(target.fed_pieces[c])} (id ${target.fed_ids[c]})`
      + `${c === 0 ? ", BOS, the start" : ""}; it should predict ${quoted(target.next_pieces[c])}`
      + `${c === n - 1 ? ", EOS: the end" : ""}.`,
    readout,
  });
  el.pieces.replaceChildren(
    titled("Encoder input (the source)", sourceTable),
    titled("Decoder input (the translation shifted right by BOS) and what each position should predict", targetTable),
  );
}

/** What a dimension of the positional table is: a sine or cosine of which frequency pair, or a learned number. */
function dimension(embedding, d) {
  if (embedding.positional !== "sinusoidal") return "learned";
  const half = embedding.d_model / 2;
  const [wave, pair] = embedding.layout === "concat"
    ? [d < half ? "sin" : "cos", d % half]
    : [d % 2 ? "cos" : "sin", Math.floor(d / 2)];
  return `${wave} of frequency pair ${pair}`;
}

function layoutWords(embedding) {
  if (embedding.positional !== "sinusoidal") {
    return "Learned positions: the table is trained with the model, one row per position.";
  }
  return embedding.layout === "concat"
    ? "Sinusoids, concat layout: the first half of the dimensions are sines, the second half their cosines."
    : "Sinusoids, interleaved layout: dimension 2i is a sine and 2i+1 its cosine, at the same frequency.";
}

/** 2. The positional table with this sentence's positions marked, and per position the sizes added. */
export function drawEmbedding({ embedding, source, target }) {
  const readout = el.embeddingReadout;
  const { table, d_model: d, scale } = embedding;
  const s = source.pieces.length;
  const t = target.fed_pieces.length;
  el.embeddingNote.textContent = `d_model = ${d}, so the scale is √${d} = ${scale.toFixed(2)}. `
    + layoutWords(embedding);
  const who = (p) => {
    const uses = [
      p < s && `the source's ${quoted(source.pieces[p])}`, p < t && `the decoder's ${quoted(target.fed_pieces[p])}`,
    ].filter(Boolean);
    return uses.length ? `Here: ${uses.join(" and ")}.` : "Past this sentence.";
  };
  const map = heatMap({
    values: table,
    rowLabels: table.map((_, p) => (p % 4 ? "" : String(p))), // rows of 8 px: every 4th labelled
    cell: [clamp(Math.floor(512 / d), 2, 12), 8],
    lo: smallest(table.flat()),
    hi: largest(table.flat()),
    gutter: 16,
    decorate: (ctx, g, ink) => markPositions(ctx, g, ink, s, t),
    name: `Positional table: ${table.length} positions by ${d} dimensions; the lines at its left mark the `
      + `source's ${s} and the decoder's ${t} positions`,
    read: (p, k) => `Position ${p}, dimension ${k} (${dimension(embedding, k)}): ${table[p][k].toFixed(3)}. ${who(p)}`,
    readout,
  });
  const series = (side) => [
    { name: `token × ${scale.toFixed(2)}`, values: side.scaled_rms, className: "scaled" },
    { name: "position", values: side.position_rms, className: "position" },
    { name: "sum", values: side.sum_rms, className: "sum" },
  ];
  const sides = [["Source", source.pieces, embedding.source], ["Decoder input", target.fed_pieces, embedding.target]];
  const max = largest(sides.flatMap(([, , e]) => [...e.scaled_rms, ...e.position_rms, ...e.sum_rms]));
  const sizes = sides.map(([name, pieces, e]) => titled(name, barRows({
    name: `${name}: per position the size of the token's embedding × scale, of the position's vector and of their sum`,
    labels: pieces, series: series(e), max, signs: [" + ", " → "], readout,
    read: (p) => `${name} position ${p}, ${quoted(pieces[p])}: token × scale ${e.scaled_rms[p].toFixed(2)} `
      + `(the token alone ${e.token_rms[p].toFixed(2)}), position ${e.position_rms[p].toFixed(2)}, `
      + `their sum ${e.sum_rms[p].toFixed(2)}.`,
  })));
  const both = make("div", "sides");
  both.append(...sizes);
  el.embedding.replaceChildren(
    titled("The positional table (brighter = larger)", scrollBox(map),
      make("p", "hint", `Solid line: the source's positions 0–${s - 1}; dashed: the decoder's 0–${t - 1}.`)),
    titled("Sizes per position (root mean square over the features: vectors add, their sizes need not)",
      barLegend(series(embedding.source)), both),
  );
}

/** Two lines in the map's left margin: the source's positions (solid), the decoder's (dashed). */
function markPositions(ctx, g, ink, s, t) {
  ctx.strokeStyle = ink;
  ctx.lineWidth = 2;
  for (const [x, rows, dash] of [[4, s, []], [10, t, [3, 2]]]) {
    ctx.setLineDash(dash);
    ctx.beginPath();
    ctx.moveTo(x, g.top);
    ctx.lineTo(x, g.top + rows * g.h);
    ctx.stroke();
  }
  ctx.setLineDash([]);
}

/** 3. The padding mask over the source keys and the decoder's causal mask, as applied. */
export function drawMasks({ masks, source, target }) {
  const readout = el.masksReadout;
  const mark = (allowed) => (allowed ? { text: "✓", className: "allow" } : { text: "·", className: "hide" });
  const fed = target.fed_pieces;
  const padding = cellTable({
    name: `Padding mask: which of the ${source.pieces.length} source keys may be attended`,
    colHeads: source.pieces, rowHeads: ["may attend"], upright: true, readout,
    cell: (_, c) => mark(masks.source_padding[c]),
    read: (_, c) => `Source key ${c}, ${quoted(source.pieces[c])}: `
      + `${masks.source_padding[c] ? "may be attended (not padding)" : "hidden (padding)"}.`,
  });
  const causal = cellTable({
    name: `Causal mask: ${fed.length} by ${fed.length}, which keys each decoder position may attend`,
    colHeads: fed, rowHeads: fed.map((piece, i) => `${i} ${piece}`), upright: true, readout,
    cell: (r, c) => mark(masks.causal[r][c]),
    read: (r, c) => `Decoder position ${r}, ${quoted(fed[r])}, `
      + `${masks.causal[r][c] ? "may attend" : "may not attend"} position ${c}, ${quoted(fed[c])}`
      + `${c > r ? ": a later position, the future it must predict" : ""}.`,
  });
  el.masks.replaceChildren(
    titled("Padding mask (a row over the source keys: ✓ may attend)", padding),
    titled("Causal mask (rows: decoder positions as queries; columns: keys; · hidden)", causal),
  );
}

/** 9. Per position: the piece fed, the likeliest next pieces as bars, the right one marked with its rank. */
export function drawSoftmax({ output, target, top_k: k }) {
  const lang = currentModel().target;
  const items = output.map((o, i) => {
    const item = make("li", "prediction");
    const head = make("p", "prediction-head");
    head.append(`${i}: fed `, piece(o.fed, lang), " → should predict ", piece(o.next, lang),
      ` (${percentText(o.prob)}, rank ${o.rank})`);
    const right = target.next_ids[i];
    const rows = o.top.map((option) => topRow(option.piece, option.prob, option.token === right ? o.rank : 0, lang));
    if (o.rank > o.top.length) rows.push(topRow(o.next, o.prob, o.rank, lang));
    const list = make("ol", "topk");
    list.append(...rows);
    item.append(head, list);
    return item;
  });
  const list = make("ol", "predictions");
  list.append(...items);
  readableList(list, `Next-piece probabilities at ${output.length} positions, the top ${k} of each`, items, (i) => {
    const o = output[i];
    const top = o.top.map((option) => `${quoted(option.piece)} ${percentText(option.prob)}`).join(", ");
    return `Position ${i}, fed ${quoted(o.fed)}: should predict ${quoted(o.next)}, probability `
      + `${percentText(o.prob)}, rank ${o.rank}. The likeliest: ${top}.`;
  }, el.softmaxReadout);
  el.softmax.replaceChildren(list);
}

function piece(text, lang) {
  const span = make("span", "piece", text);
  span.lang = lang;
  return span;
}

function percentText(p) {
  return `${(p * 100).toFixed(1)}%`;
}

/** One bar of the top k; `rank` > 0 marks the right next piece. */
function topRow(text, prob, rank, lang) {
  const row = make("li", rank ? "right" : "");
  const track = make("span", "bar-track");
  const bar = make("span", "bar");
  bar.style.width = `${clamp(prob, 0, 1) * 100}%`;
  track.append(bar);
  track.setAttribute("aria-hidden", "true"); // the percentage says it
  row.append(piece(text, lang), track, make("span", "prob", percentText(prob)),
    make("span", "fate", rank ? `✓ right, rank ${rank}` : ""));
  return row;
}
