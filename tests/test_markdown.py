"""tnmt/documents/markdown.py: Markdown translated with its structure, code and URLs kept as written and its
inline formatting carried to the aligned words, on the tiny en -> it model (whose wording is arbitrary: the
tests assert structure)."""

import re
from collections import Counter
from types import SimpleNamespace

from markdown_it import MarkdownIt

from tnmt.config import DecodeConfig
from tnmt.documents.formats import translate_file
from tnmt.documents.markdown import _blocks, _markdown, read_markdown
from tnmt.documents.markup import parse

SETTINGS = DecodeConfig(beam_size=2, max_len=12)
PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"])

FRONT = "---\ntitle: two *hundred*\ntags: [seven]\n---\n"
FENCE = "```python\nprint('two hundred')  # *five*\n```\n"
INDENTED = "    seven hundred [x](y)\n"
HTML_BLOCK = '<div class="box">\ntwo hundred\n</div>\n'
DOCUMENT = f"""{FRONT}
# two *hundred* and `five`

seven hundred
=============

two **hundred** and _five_ with `code_span()` and [seven](https://x.org/a_b "two title")
and ![five hundred](img/a.png "seven") then <http://auto.example/x> and ~~nine~~ <kbd>Ctrl</kbd>.{"  "}
one thousand\\
and [two][ref] or <span class="x">seven</span> %s {{name}}

> two *hundred*
> and five
>
> > seven

- two hundred
  - and *five*
    lazy seven
- nine

3. two
4. **five** hundred

***

| two | *five* | `a\\|b` |
|:----|-------:|:-----:|
| seven \\| nine | [one](http://t.org) | two hundred |

{FENCE}
{INDENTED}
{HTML_BLOCK}
[ref]: http://ref.example/path "two"
"""
INLINE = ("em_open", "strong_open", "s_open", "link_open", "image", "code_inline", "html_inline", "hardbreak")


def structure(text: str) -> list[tuple]:
    """The block tokens of `text`, without their lines and text: what a translation must keep."""
    return [(t.type, t.tag, t.nesting, t.markup, t.info) for t in PARSER.parse(text) if t.type != "inline"]


def inline_counts(text: str) -> Counter:
    """How many of each inline construct (`INLINE`) `text` has, with each kept one's Markdown as written."""
    found: Counter = Counter()
    for token in PARSER.parse(text):
        for child in token.children or []:
            if child.type in INLINE:
                found[child.type, child.content if child.type in ("code_inline", "html_inline") else ""] += 1
    return found


def identity(fragment: str) -> str:
    """The fragment as markup.py renders it from its own sentences, each word aligned to itself."""
    document = parse(fragment)
    return document.render([(text, [(i, i) for i in range(len(text.split()))]) for text in document.texts])


def test_a_markdown_document_keeps_its_structure_code_urls_and_formatting(tiny_translator):
    out = translate_file(tiny_translator, DOCUMENT.encode(), "x.md", settings=SETTINGS).decode()
    body = DOCUMENT.split(FRONT, 1)[1]
    assert out.startswith(FRONT) and structure(out.split(FRONT, 1)[1]) == structure(body)
    for kept in (
        FENCE,
        INDENTED,
        HTML_BLOCK,
        "\n***\n",
        '[ref]: http://ref.example/path "two"\n',
        "|:----|-------:|:-----:|\n",
    ):
        assert out.count(kept) == 1, kept
    for kept in (
        '](https://x.org/a_b "two title")',
        '](img/a.png "seven")',
        "<http://auto.example/x>",
        "](http://t.org)",
    ):
        assert out.count(kept) == 1, kept
    assert "][ref]" in out and "%s" in out and "{name}" in out
    assert inline_counts(out) == inline_counts(DOCUMENT)  # every emphasis, link, code span and tag, once
    assert [len(re.findall(r"(?<!\\)\|", line)) for line in out.split("\n") if line.startswith("|")] == [4, 4, 4]
    assert "# two *hundred* and `five`\n" not in out  # translated, not copied


def test_inline_fragments_read_back_as_the_markdown_they_came_from():
    lines, blocks = _blocks(DOCUMENT.replace("[two][ref]", "[two][ref] [ref]"))
    for block in blocks:
        bounds = [0, *block.breaks, len(block.spans)]
        expected = [
            " ".join(lines[block.first + n][slice(*block.spans[n])].strip() for n in range(a, b))
            for a, b in zip(bounds[:-1], bounds[1:], strict=True)
        ]
        expected = [e.replace("[ref] [ref]", "[ref] [ref][ref]") for e in expected]  # a shortcut written in full
        assert _markdown(block, identity(block.fragment)) == expected


def test_unit_texts_are_the_words_without_markdown():
    pending = read_markdown("# two *hundred*\n\n- seven `x` and [five](http://u.org) ![nine](i.png)\n", where="x.md")
    assert [u.text for u in pending.units] == ["two hundred", "seven and five nine"]
    texts = " ".join(u.text for u in read_markdown(DOCUMENT, where="x.md").units)
    literal = texts.replace("%s", "").replace("{name}", "").replace("seven | nine", "")  # an escaped pipe is text
    assert not re.search(r"[*_`\[\]()<>#|~\\]|http|title", literal)


def test_translated_words_are_escaped_where_they_would_read_as_markdown():
    (block,) = _blocks("- two *hundred*\n")[1]
    translated = '1. due <em data-md="0">cento_</em> * [x] `y` a_b &amp;copy; <b>|</b>'
    assert _markdown(block, translated) == ["1\\. due *cento\\_* \\* \\[x\\] \\`y\\` a_b \\&copy; |"]
    assert _markdown(block, 'due <em data-md="0"></em>tre') == ["*due* tre"]  # left without words: the word before
    assert _markdown(block, '<em data-md="0"> </em>') == [""]  # no word to take: no emphasis


def test_a_block_is_written_on_its_first_line_and_a_hard_break_keeps_its_line_s_prefix():
    text = "> two *hundred*\r\n> and five  \r\n> seven\r\n\r\n- nine\r\n  one\r\n"
    pending = read_markdown(text, where="x.md")
    upper = [  # each word upper-cased and aligned to itself
        SimpleNamespace(
            text=u.text.upper(), evidence=SimpleNamespace(alignment=[(i, i) for i in range(len(u.text.split()))])
        )
        for u in pending.units
    ]
    assert pending.write(upper).decode() == "> TWO *HUNDRED* AND FIVE  \r\n> SEVEN\r\n\r\n- NINE ONE\r\n"
