"""HTML with inline tags, translated whole with the tags carried by alignment (issue 40) or node by node.

    python -m benchmarks.quality.markup --checkpoint /work/runs/base/best [--limit 1000] [--seed 0] [--beam-size 4]

The English sources of test_2016_flickr (`TNMT_DATA_DIR` or ../shared/data/multi30k beside the
repository, `.en.gz` and the `.de.gz` references) get 1-2 inline elements each at random (seeded), around
spans of 1-3 words: the second nested inside the first or beside it; the text HTML-escaped. Then:

  (a) plain: the sources translated as plain text;
  (b) markup: each fragment through `tnmt.documents.markup.parse`, its sentence translated with
      `evidence=True`, and `render` putting the tags back through the evidence's word alignment;
  (c) node by node: every text node of the fragment translated on its own and put back between the same
      tags (what tnmt.serve.html_text did before issue 40; written here in a few lines).

Reported for (b) and (c), tags stripped: sacreBLEU against the references (tokenize="13a", and the
default), and the difference from (a) (the target for (b): within 0.5); the share of outputs that a
real HTML parser (html5lib, strict, when installed; else html.parser with a tag-balance check) reads
without error with every element of the input exactly once under the same parent; the share of elements
left without words; the seconds each took.

Then the dictionary test (`dictionary_test`): does a tag hold the word it wraps? The test captions with an
English word of `DICTIONARY` (colours, animals, people, numbers, things: each with the German forms that
translate it) whose translation the model's plain output holds exactly once (and no other dictionary word of
the caption could have given) get that word wrapped, in one of
`SHAPES` (one tag, two nested, the word inside a phrase tag over it and its neighbours, the word beside a second
element), and go through (b). The tag holds the right word when its words in the output are exactly that
German word (`held_share`; `contains_share`: it is among them); `emptied_share`: the tag came back without
words although the word was translated. Writes benchmarks/results/markup.json and a markdown table.
"""

import argparse
import gzip
import html
import json
import os
import random
import re
import sys
import time
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import sacrebleu

from tnmt.documents.markup import VOID, parse

TAGS = ["b", "i", "em", 'a href="#x"', 'span class="k"']  # what an element opens with; its id is added
_ADJ = "(e|er|en|es|em)?"  # German adjective endings
DICTIONARY = {  # English word -> the German words (a regular expression over the lowercased word) it becomes
    "red": f"rot{_ADJ}", "blue": f"blau{_ADJ}", "green": f"grün{_ADJ}", "yellow": f"gelb{_ADJ}",
    "black": f"schwarz{_ADJ}", "white": f"weiß{_ADJ}", "brown": f"braun{_ADJ}", "gray": f"grau{_ADJ}",
    "grey": f"grau{_ADJ}", "pink": f"(rosa|pink{_ADJ})", "purple": f"(lila|violett{_ADJ})",
    "orange": f"(orange{_ADJ}|orangefarben{_ADJ})", "old": f"alt{_ADJ}",
    "small": f"klein{_ADJ}", "little": f"klein{_ADJ}", "large": f"groß{_ADJ}", "big": f"groß{_ADJ}",
    "dog": "(hund|hunde|hundes|hunden)", "dogs": "(hunde|hunden)", "cat": "(katze|katzen)",
    "horse": "(pferd|pferde|pferdes|pferden)", "bird": "(vogel|vögel|vogels)", "cow": "(kuh|kühe)",
    "man": "(mann|mannes|manne)", "men": "(männer|männern)", "woman": "frau", "women": "frauen",
    "boy": "(junge|jungen)", "boys": "(jungen)", "girl": "(mädchen)", "girls": "(mädchen)",
    "child": "(kind|kindes)", "children": "(kinder|kindern)", "baby": "(baby|babys)",
    "people": "(menschen|leute|personen)",
    "two": "zwei", "three": "drei", "four": "vier", "five": "fünf",
    "car": "(auto|autos|wagen)", "water": "wasser", "street": "(straße|straßen)", "snow": "schnee",
    "beach": "(strand|strandes)", "ball": "(ball|balls|bälle)", "building": "(gebäude|gebäudes)",
    "grass": "(gras|rasen)", "hat": "(hut|hutes|mütze)", "shirt": "(hemd|t-shirt|shirt|oberteil)",
    "bike": "(fahrrad|rad)", "bicycle": "fahrrad", "guitar": "gitarre", "table": "tisch",
    "city": "(stadt)", "field": "(feld|wiese)", "wall": "(wand|mauer)", "crowd": "(menge|menschenmenge)",
}  # fmt: skip
SHAPES = ("one", "nested", "phrase", "beside")
README_EXAMPLE = "<p>The <b>red</b> car is parked in front of an <i>old</i> house.</p>"  # tests/test_readme.py


def data_dir() -> Path:
    default = Path(__file__).resolve().parents[3] / "shared" / "data" / "multi30k"
    return Path(os.environ.get("TNMT_DATA_DIR", default))


def read(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return f.read().splitlines()


def mark_up(words: list[str], rng: random.Random) -> str:
    """The sentence as HTML with 1-2 elements over 1-3-word spans (a second one nested in the first or
    beside it; never one tag name twice, so never a link in a link), one space between words and the spaces
    outside the tags."""
    if not words:
        return ""
    first_len = rng.randint(1, min(3, len(words)))
    start = rng.randrange(len(words) - first_len + 1)
    spans = [(start, start + first_len)]
    if rng.random() < 0.5:
        if rng.random() < 0.5:  # nested: inside the first (or around the same words)
            inner_len = rng.randint(1, first_len)
            inner = start + rng.randrange(first_len - inner_len + 1)
            spans.append((inner, inner + inner_len))
        else:  # beside it
            lengths = range(1, 4)
            free = [
                (a, a + n) for n in lengths for a in range(len(words) - n + 1) if a + n <= start or a >= spans[0][1]
            ]
            spans += [rng.choice(free)] if free else []
    opens = {k: [] for k in range(len(words))}
    closes = {k: [] for k in range(len(words))}
    ordered = sorted(spans, key=lambda s: (s[0], -s[1]))  # the outer one opens first
    for n, ((a, b), tag) in enumerate(zip(ordered, rng.sample(TAGS, len(ordered)), strict=True)):
        opens[a].append(f'<{tag} id="t{n}">')
        closes[b - 1].insert(0, f"</{tag.split()[0]}>")  # the inner one closes first
    pieces = ["".join(opens[k]) + html.escape(word, quote=False) + "".join(closes[k]) for k, word in enumerate(words)]
    return " ".join(pieces)


def node_by_node(fragment: str, translate) -> str:
    """The fragment with each text node translated on its own, its surrounding whitespace kept."""
    parts = re.split(r"(<[^>]*>)", fragment)
    for k in range(0, len(parts), 2):
        text = parts[k]
        if text.strip():
            lead, trail = text[: len(text) - len(text.lstrip())], text[len(text.rstrip()) :]
            parts[k] = lead + html.escape(translate(html.unescape(text.strip())), quote=False) + trail
    return "".join(parts)


class Elements(HTMLParser):
    """A fragment's elements: each id's parent id (None at the top), each id's text, its text without tags;
    `balanced`: every end tag closes the innermost open element and none stays open."""

    def __init__(self, fragment: str) -> None:
        super().__init__(convert_charrefs=True)
        self.parents: dict[str, str | None] = {}
        self.words: dict[str, str] = {}
        self.text, self.balanced, self.repeated = "", True, False
        self._open: list[tuple[str, str | None]] = []
        self.feed(fragment)
        self.close()
        self.balanced = self.balanced and not self._open

    def handle_starttag(self, tag: str, attrs: list) -> None:
        element_id = dict(attrs).get("id")
        self.repeated = self.repeated or element_id in self.parents
        self.parents[element_id] = self._open[-1][1] if self._open else None
        self.words.setdefault(element_id, "")
        if tag not in VOID:
            self._open.append((tag, element_id))

    def handle_endtag(self, tag: str) -> None:
        if self._open and self._open[-1][0] == tag:
            self._open.pop()
        else:
            self.balanced = False

    def handle_data(self, data: str) -> None:
        self.text += data
        for _, element_id in self._open:
            self.words[element_id] += data


def strict_parser():
    """html5lib's strict parser (any misnesting raises), or None where html5lib is not installed."""
    try:
        import html5lib
    except ImportError:
        return None
    return html5lib.HTMLParser(strict=True, namespaceHTMLElements=False)


def judge(source: str, output: str, parser) -> dict:
    """Whether `output` parses cleanly with every element of `source` once under the same parent, and how
    many of its elements hold no word."""
    found, given = Elements(output), Elements(source)
    well_formed = found.balanced
    if parser is not None:
        try:
            parser.parseFragment(output)
        except Exception:  # html5lib.html5parser.ParseError: a misnested or stray tag
            well_formed = False
    kept = not found.repeated and found.parents == given.parents
    return {
        "well_formed": well_formed,
        "kept": kept,
        "empty": sum(1 for words in found.words.values() if not words.strip()),
        "elements": len(given.parents),
    }


def bleu(hypotheses: list[str], references: list[str]) -> dict:
    """sacreBLEU with tokenize="13a" and with the default settings, each with its signature."""
    result = {}
    for name, metric in (("13a", sacrebleu.BLEU(tokenize="13a")), ("default", sacrebleu.BLEU())):
        result[f"bleu_{name}"] = round(metric.corpus_score(hypotheses, [references]).score, 2)
        result[f"signature_{name}"] = str(metric.get_signature())
    return result


def carry(translator, docs: list) -> list[str]:
    """Each parsed fragment rendered with its sentences translated in one batched call, the tags put back by the
    evidence's alignment: what LibreTranslate's `format: "html"` does (serve/libretranslate/translate.py)."""
    found = iter(translator.translations([text for doc in docs for text in doc.texts], evidence=True))
    return [doc.render([(t.text, t.evidence.alignment) for t in (next(found) for _ in doc.texts)]) for doc in docs]


def run(translator, sources: list[str], references: list[str], *, seed: int) -> dict:
    """The three ways over `sources` (see the module docstring): their scores, checks and seconds."""
    rng = random.Random(seed)
    fragments = [mark_up(source.split(), rng) for source in sources]
    parser = strict_parser()

    started = time.perf_counter()
    plain = [t.text for t in translator.translations(sources)]
    plain_s = time.perf_counter() - started

    started = time.perf_counter()
    docs = [parse(fragment) for fragment in fragments]
    carried = carry(translator, docs)
    carried_s = time.perf_counter() - started

    started = time.perf_counter()
    nodes = [html.unescape(part.strip()) for f in fragments for part in re.split(r"<[^>]*>", f) if part.strip()]
    translated = iter([t.text for t in translator.translations(nodes)])  # all nodes in one call: batched
    separate = [node_by_node(fragment, lambda _: next(translated)) for fragment in fragments]
    separate_s = time.perf_counter() - started

    report = {"plain": {**bleu(plain, references), "seconds": round(plain_s, 2)}}
    for name, outputs, seconds in (("markup", carried, carried_s), ("node_by_node", separate, separate_s)):
        checks = [judge(fragment, output, parser) for fragment, output in zip(fragments, outputs, strict=True)]
        stripped = [" ".join(Elements(output).text.split()) for output in outputs]
        scores = bleu(stripped, references)
        elements = sum(c["elements"] for c in checks)
        report[name] = {
            **scores,
            "bleu_13a_minus_plain": round(scores["bleu_13a"] - report["plain"]["bleu_13a"], 2),
            "well_formed_share": round(sum(c["well_formed"] for c in checks) / len(checks), 4),
            "every_element_once_nested_as_given_share": round(sum(c["kept"] for c in checks) / len(checks), 4),
            "elements_without_words_share": round(sum(c["empty"] for c in checks) / max(1, elements), 4),
            "seconds": round(seconds, 2),
        }
    report["markup"]["texts_as_plain_share"] = round(
        sum(doc.texts == [" ".join(s.split())] for doc, s in zip(docs, sources, strict=True)) / len(sources), 4
    )
    report["node_by_node"]["segments_translated"] = len(nodes)
    report["dictionary"] = dictionary_test(translator, sources, plain, seed=seed)
    report["well_formed_parser"] = "html5lib (strict)" if parser is not None else "html.parser + tag balance"
    report["elements"] = sum(len(Elements(fragment).parents) for fragment in fragments)
    report["examples"] = [
        {"fragment": f, "markup": c, "node_by_node": s}
        for f, c, s in zip(fragments[:5], carried[:5], separate[:5], strict=True)
    ]
    return report


def _bare(word: str) -> str:
    return word.strip(".,;:!?\"'()").lower()


def dictionary_hits(sources: list[str], plain: list[str], rng: random.Random) -> list[tuple[int, int, str]]:
    """The test captions with a dictionary word whose translation the plain output holds exactly once: (the
    caption's index, the word's index in `source.split()`, the German word), one word per caption (seeded)."""
    hits = []
    for k, (source, output) in enumerate(zip(sources, plain, strict=True)):
        words = source.split()
        found = [(i, DICTIONARY[_bare(w)]) for i, w in enumerate(words) if _bare(w) in DICTIONARY]
        for i, pattern in rng.sample(found, len(found)):
            held = [w for w in output.split() if re.fullmatch(pattern, _bare(w))]
            # one German word, which no other dictionary word of the source could have given ("dogs ... dog")
            if len(held) == 1 and not any(re.fullmatch(p, _bare(held[0])) for j, p in found if j != i):
                hits.append((k, i, held[0]))
                break
    return hits


def dictionary_cases(sources: list[str], plain: list[str], rng: random.Random) -> list[dict]:
    """`dictionary_hits`, each word wrapped in one of `SHAPES` (seeded). Each case: the caption's index, the shape,
    the fragment (the word's own element has id "w") and the German word that element must hold."""
    cases = []
    for k, i, expected in dictionary_hits(sources, plain, rng):
        shape = rng.choice(SHAPES)
        fragment = _wrap(sources[k].split(), i, shape, rng)
        cases.append({"sentence": k, "shape": shape, "fragment": fragment, "expected": expected})
    return cases


def _wrap(words: list[str], i: int, shape: str, rng: random.Random) -> str:
    """The sentence as HTML with word i in an element of id "w" (its punctuation outside the tag), in `shape`;
    the other element, if any, has id "o"."""
    opens, closes = [""] * len(words), [""] * len(words)  # tags before / after each word's letters
    core = words[i].rstrip(".,;:!?")
    tails = [""] * len(words)
    tails[i] = words[i][len(core) :]
    texts = [*words[:i], core, *words[i + 1 :]]
    opens[i], closes[i] = '<b id="w">', "</b>"
    if shape == "nested":
        opens[i], closes[i] = '<i id="o"><b id="w">', "</b></i>"
    elif shape == "phrase":  # the word and up to two neighbours in a link
        a, b = max(0, i - rng.randint(0, 2)), min(len(words), i + 1 + rng.randint(0, 1))
        opens[a] = '<a href="#x" id="o">' + opens[a]
        closes[b - 1] += "</a>"
    elif shape == "beside" and len(words) > 2:
        j = rng.choice([n for n in range(len(words)) if abs(n - i) > 1] or [n for n in range(len(words)) if n != i])
        opens[j], closes[j] = '<em id="o">', "</em>"
    return " ".join(
        o + html.escape(t, quote=False) + c + html.escape(tail, quote=False)
        for o, t, c, tail in zip(opens, texts, closes, tails, strict=True)
    )


def dictionary_test(translator, sources: list[str], plain: list[str], *, seed: int) -> dict:
    """`dictionary_cases` through (b): how often the word's tag holds its German word (see the module docstring)."""
    cases = dictionary_cases(sources, plain, random.Random(seed))
    parser = strict_parser()
    outputs = carry(translator, [parse(case["fragment"]) for case in cases])
    held = contains = emptied = well_formed = 0
    by_shape: dict[str, list[int]] = {shape: [0, 0] for shape in SHAPES}
    misses, emptied_cases = [], []
    for case, output in zip(cases, outputs, strict=True):
        inside = [_bare(w) for w in Elements(output).words.get("w", "").split()]
        expected = _bare(case["expected"])
        ok = inside == [expected]
        held += ok
        contains += expected in inside
        emptied += not inside
        if not inside:
            emptied_cases.append({"fragment": case["fragment"], "output": output, "expected": case["expected"]})
        checked = judge(case["fragment"], output, parser)
        well_formed += checked["well_formed"] and checked["kept"]
        by_shape[case["shape"]][0] += ok
        by_shape[case["shape"]][1] += 1
        if not ok and len(misses) < 12:
            misses.append({"fragment": case["fragment"], "output": output, "expected": case["expected"]})
    n = max(1, len(cases))
    return {
        "cases": len(cases),
        "held_share": round(held / n, 4),
        "contains_share": round(contains / n, 4),
        "emptied_share": round(emptied / n, 4),
        "well_formed_every_element_once_share": round(well_formed / n, 4),
        "held_share_by_shape": {s: round(h / max(1, c), 4) for s, (h, c) in by_shape.items()},
        "cases_by_shape": {s: c for s, (_, c) in by_shape.items()},
        "misses": misses,
        "emptied": emptied_cases,
    }


def readme_example(translator) -> dict:
    """README's html example as this checkpoint answers it, with the translation and alignment the tags followed
    (tests/test_readme.py renders them again and finds the README's answer)."""
    doc = parse(README_EXAMPLE)
    found = translator.translations(doc.texts, evidence=True)
    outputs = [(t.text, [list(pair) for pair in t.evidence.alignment]) for t in found]
    return {"fragment": README_EXAMPLE, "sentences": outputs, "output": doc.render(outputs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--limit", type=int, default=0, help="the first N sentences only (0: all)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--beam-size", type=int, default=0, help="0: the checkpoint's")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--alignment-head", type=int, default=None, help="read this head (1 = the first; 0: the mean)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "results" / "markup.json"))
    args = parser.parse_args()

    import torch

    from benchmarks.common.host import describe
    from tnmt.translate.translator import Translator

    torch.set_num_threads(args.threads)
    sources = read(data_dir() / "test_2016_flickr.en.gz")
    references = read(data_dir() / "test_2016_flickr.de.gz")
    if args.limit:
        sources, references = sources[: args.limit], references[: args.limit]
    translator = Translator.from_checkpoint(args.checkpoint)
    if args.beam_size:
        translator.decode = replace(translator.decode, beam_size=args.beam_size)  # every call's default
    if args.alignment_head is not None:
        translator.decode = replace(translator.decode, alignment_head=args.alignment_head)
    report = {
        "command": " ".join(["python -m benchmarks.quality.markup", *sys.argv[1:]]),
        "machine": describe(),
        "checkpoint": str(Path(args.checkpoint).resolve()),
        "beam_size": translator.decode.beam_size,
        "alignment": {k: getattr(translator.decode, f"alignment_{k}") for k in ("layer", "head", "shift")},
        "threads": args.threads,
        "sentences": len(sources),
        "seed": args.seed,
        **run(translator, sources, references, seed=args.seed),
        "readme_example": readme_example(translator),
    }
    Path(args.out).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    print("| way | BLEU 13a | BLEU default | - plain | well-formed | elements kept | without words | s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    plain = report["plain"]
    print(f"| (a) plain | {plain['bleu_13a']} | {plain['bleu_default']} | | | | | {plain['seconds']} |")
    for name in ("markup", "node_by_node"):
        r = report[name]
        print(
            f"| ({'b' if name == 'markup' else 'c'}) {name} | {r['bleu_13a']} | {r['bleu_default']} |"
            f" {r['bleu_13a_minus_plain']} | {r['well_formed_share']} | {r['every_element_once_nested_as_given_share']}"
            f" | {r['elements_without_words_share']} | {r['seconds']} |"
        )
    d = report["dictionary"]
    print(
        f"dictionary test: {d['cases']} tags, the word held {d['held_share']:.1%} (among the tag's words"
        f" {d['contains_share']:.1%}), emptied {d['emptied_share']:.1%}, well-formed"
        f" {d['well_formed_every_element_once_share']:.1%}; by shape {d['held_share_by_shape']}"
    )
    print("README example:", report["readme_example"]["output"])


if __name__ == "__main__":
    main()
