"""markup: HTML cut into whole sentences, and their tags carried to hand-aligned translations.

The property tests draw fragments of blocks holding nested inline elements, empty elements, images and
tags inside words, and check the output with two parsers: html.parser with a tag-balance check, and
html5lib (the WHATWG algorithm, strict: any misnesting is an error) when it is installed.
"""

import html
import itertools
from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tnmt.documents.markup import VOID, parse

try:
    import html5lib
except ImportError:  # the dev extra lists it; without it, html.parser's balance check alone
    html5lib = None


def identity(n: int) -> list[tuple[int, int]]:
    return [(i, i) for i in range(n)]


def test_red_car_is_one_sentence_with_the_bold_on_the_aligned_word():
    doc = parse("<p>The <b>red</b> car is fast.</p>")
    assert doc.texts == ["The red car is fast."]
    assert doc.render([("Das rote Auto ist schnell.", identity(5))]) == "<p>Das <b>rote</b> Auto ist schnell.</p>"
    french = [("La voiture rouge est rapide.", [(0, 0), (1, 2), (2, 1), (3, 3), (4, 4)])]
    assert doc.render(french) == "<p>La voiture <b>rouge</b> est rapide.</p>"


@pytest.mark.parametrize(
    ("fragment", "expected"),
    [
        ("<p>A <b>car</b>.</p>", "<p>Ein <b>Auto</b>.</p>"),  # the punctuation stays outside, as it was
        ("<p>A <b>car.</b></p>", "<p>Ein <b>Auto.</b></p>"),  # and inside where it was inside
        ("<p>A <i><b>car</b></i>.</p>", "<p>Ein <i><b>Auto</b></i>.</p>"),
        ("<p>A <i><b>car</b>.</i></p>", "<p>Ein <i><b>Auto</b>.</i></p>"),
        ('<p><a href="#">A car</a>!</p>', '<p><a href="#">Ein Auto</a>!</p>'),
    ],
)
def test_an_element_that_ends_before_its_words_punctuation_ends_before_the_translations(fragment, expected):
    doc = parse(fragment)
    punctuation = doc.texts[0][-1]
    assert doc.render([(f"Ein Auto{punctuation}", identity(2))]) == expected


def test_nested_elements_stay_nested_when_the_words_reorder():
    doc = parse('<p>He <b>saw the <i class="c">red</i> car</b> today.</p>')
    assert doc.texts == ["He saw the red car today."]
    german = "Er hat heute das rote Auto gesehen."  # saw -> hat ... gesehen, around "heute"
    alignment = [(0, 0), (1, 1), (1, 6), (2, 3), (3, 4), (4, 5), (5, 2)]
    assert doc.render([(german, alignment)]) == '<p>Er <b>hat heute das <i class="c">rote</i> Auto gesehen.</b></p>'


def test_crossing_alignments_give_siblings_disjoint_parts():
    doc = parse('<p><a href="1">A B</a> <a href="2">C D</a></p>')
    out = doc.render([("a c b d", [(0, 0), (1, 2), (2, 1), (3, 3)])])
    assert out == '<p><a href="1">a</a> <a href="2">c b d</a></p>'


def test_a_child_aligned_outside_its_parent_is_clipped_to_it():
    doc = parse("<p>the <b>red <i>car</i></b> stops</p>")
    # car is also aligned to "hält", which the stops and the own "the" claim: the bold ends before it
    alignment = [(0, 0), (1, 1), (2, 2), (2, 3), (3, 3), (0, 3)]
    assert doc.render([("das rote Auto hält", alignment)]) == "<p>das <b>rote <i>Auto</i></b> hält</p>"


def test_an_element_whose_words_vanished_stays_empty_after_its_neighbour():
    doc = parse("<p>Click <b>here <i>now</i></b></p>")
    assert doc.render([("Jetzt klicken", [(0, 1)])]) == "<p>Jetzt klicken<b><i></i></b></p>"
    assert doc.render([("", [])]) == "<p><b><i></i></b></p>"


def test_unaligned_target_words_join_an_element_only_between_its_words():
    doc = parse("<p>The <b>red car</b> here</p>")
    assert (
        doc.render([("Das sehr rote Auto hier", [(0, 0), (1, 2), (3, 4)])]) == "<p>Das sehr <b>rote</b> Auto hier</p>"
    )
    alignment = [(0, 0), (1, 1), (2, 3), (3, 4)]
    assert doc.render([("Das rote schnelle Auto hier", alignment)]) == "<p>Das <b>rote schnelle Auto</b> hier</p>"


def test_blocks_doctype_script_style_comments_attributes_and_entities_pass_through():
    fragment = (
        "<!DOCTYPE html>\n<html><head><title>Cats &amp; dogs</title><style>p > b { color: red }</style></head>\n"
        '<body>\n  <h1 class="t">Hello</h1>\n  <!-- a note -->\n'
        '  <p>Tom &amp; Jerry &lt;3 <a href="/x?a=1&amp;b=2" title=\'q "x"\'>here</a></p>\n'
        '<script>if (a < b) { x = "<p>no</p>"; }</script></body></html>'
    )
    doc = parse(fragment)
    assert doc.texts == ["Cats & dogs", "Hello", "Tom & Jerry <3 here"]
    outputs = [("Katzen & Hunde", []), ("Hallo", []), ("Tom & Jerry <3 hier", identity(5))]
    expected = (
        fragment.replace("Cats &amp; dogs", "Katzen &amp; Hunde")
        .replace(">Hello<", ">Hallo<")
        .replace(">here<", ">hier<")
    )
    assert doc.render(outputs) == expected


def test_a_fragment_without_markup_becomes_its_translation_exactly():
    assert parse("Hello  world").texts == ["Hello world"]
    assert parse("Hello  world").render([("Hallo,  Welt!", [])]) == "Hallo,  Welt!"
    assert parse("").texts == [] and parse("").render([]) == ""
    assert parse("<p> </p>\n<!-- x --><p>...</p>").render([]) == "<p> </p>\n<!-- x --><p>...</p>"


def test_a_tag_inside_a_word_keeps_the_word_whole():
    doc = parse("<p>H<sub>2</sub>O is <b>red</b>dish</p>")
    assert doc.texts == ["H2O is reddish"]
    kept = doc.render([("H2O ist reddish", identity(3))])
    assert kept == "<p>H<sub>2</sub>O ist <b>red</b>dish</p>"  # unchanged words: their markup as given
    translated = doc.render([("Wasser ist rötlich", identity(3))])
    assert translated == "<p><sub>Wasser</sub> ist <b>rötlich</b></p>"  # else around the whole word


def test_void_elements_stick_to_the_word_they_touch():
    doc = parse('<p>Look<img src="a.png" alt="A"> at <input type="checkbox">this<br>now<hr>ok</p>')
    assert doc.texts == ["Look at this", "now", "ok"]
    outputs = [("Schau dir das an", [(0, 0), (1, 3), (2, 2)]), ("jetzt", [(0, 0)]), ("gut", [(0, 0)])]
    expected = '<p>Schau<img src="a.png" alt="A"> dir <input type="checkbox">das an<br>jetzt<hr>gut</p>'
    assert doc.render(outputs) == expected


def test_a_void_element_inside_a_word_stays_there_or_goes_before_the_translated_word():
    doc = parse("<p>foo<img src=x>bar baz</p>")
    assert doc.texts == ["foobar baz"]
    assert doc.render([("foobar Baz", identity(2))]) == "<p>foo<img src=x>bar Baz</p>"
    assert doc.render([("Baz Fubar", [(0, 1), (1, 0)])]) == "<p>Baz <img src=x>Fubar</p>"


def test_a_comment_inside_a_sentence_stays_with_its_word():
    doc = parse("<p>one<!-- c --> two</p>")
    assert doc.texts == ["one two"]
    assert doc.render([("zwei eins", [(0, 1), (1, 0)])]) == "<p>zwei eins<!-- c --></p>"


def test_an_inline_element_cut_by_a_block_keeps_both_tags():
    fragment = "<b>Hello <p>big</p> world</b> now"
    doc = parse(fragment)
    assert doc.texts == ["Hello", "big", "world now"]
    outputs = [("Hallo", [(0, 0)]), ("groß", [(0, 0)]), ("jetzt Welt", [(0, 1), (1, 0)])]
    # its start tag is in an earlier sentence: the bold runs from the start of this one, over "jetzt" too
    assert doc.render(outputs) == "<b>Hallo <p>groß</p> jetzt Welt</b>"


def test_deep_nesting_is_carried_without_running_out_of_stack():
    fragment = "<b>" * 1500 + "x y" + "</b>" * 1500  # past MAX_DEPTH, the tags are carried one by one
    assert parse(fragment).render([("x y", identity(2))]) == fragment


def test_a_block_longer_than_max_words_is_cut_after_a_sentence_and_keeps_every_tag():
    """A paragraph of 1,000 bold words inside one italic: sentences of at most MAX_WORDS words, each ending
    where a sentence ends when one does in its second half; identity translations give the fragment back, the
    italic's tags once each (its start in the first sentence, its end in the last)."""
    from tnmt.documents.markup import MAX_WORDS

    words = " ".join(f"<b>w{i}</b>" + ("." if i % 37 == 36 else "") for i in range(1000))
    fragment = f"<p>Start <i>{words}</i> end.</p>"
    doc = parse(fragment)
    assert len(doc.texts) > 1000 // MAX_WORDS and all(len(text.split()) <= MAX_WORDS for text in doc.texts)
    assert all(text.endswith(".") for text in doc.texts)  # a sentence's end in every stretch's second half
    assert doc.render([(text, identity(len(text.split()))) for text in doc.texts]) == fragment
    expected = ["Start", *(f"w{i}" + ("." if i % 37 == 36 else "") for i in range(1000)), "end."]
    assert " ".join(doc.texts).split() == expected  # every word once, in order


def test_render_needs_one_aligned_translation_per_text():
    doc = parse("<p>a <b>b</b></p><p>c</p>")
    with pytest.raises(ValueError, match="1 translations for 2 texts"):
        doc.render([("x", [])])
    with pytest.raises(ValueError, match=r"alignment pair \(2, 0\) outside 2 source x 1 target words"):
        doc.render([("x", [(2, 0)]), ("y", [])])


# ---- property tests ------------------------------------------------------------------------------------

WORDS = ["the", "red", "car", "a&b", "x<y", "fast.", "été", "42", "'s"]
INLINE_NAMES = ["b", "i", "span", "sub", "a"]  # "a" only at the top: a link inside a link is not HTML


@st.composite
def fragments(draw) -> tuple[str, list[list[list[str]]]]:
    """An HTML fragment of 1-3 paragraphs with inline markup and line breaks, written with one space between
    words and the spaces outside the tags (as `render` writes them); the words of each paragraph's sentences."""
    ids = itertools.count()
    blocks, paragraphs = [], []
    for _ in range(draw(st.integers(1, 3))):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=7))
        breaks: list[int] = []
        tokens = _content(draw, words, 0, len(words), depth=0, ids=ids, breaks=breaks)
        blocks.append(f'<p id="p{next(ids)}">{_spaced(tokens)}</p>')
        cuts = [0, *sorted(set(breaks)), len(words)]
        paragraphs.append([words[a:b] for a, b in itertools.pairwise(cuts) if a < b])
    return "\n".join(blocks), paragraphs


def _content(draw, words: list[str], a: int, b: int, *, depth: int, ids, breaks: list[int]) -> list[tuple[str, str]]:
    """Tokens for words[a:b]: (text, kind), kind "word", "open", "close", "after" (a tag touching the word
    before it), "before" (touching the word after it) or "break" (a <br>, whose position goes to `breaks`)."""
    tokens, k = [], a
    while k < b:
        if draw(st.integers(0, 7)) == 0:  # a line break, inside whatever elements are open
            tokens.append((f'<br id="e{next(ids)}">', "break"))
            breaks.append(k)
        for _ in range(draw(st.integers(0, 1))):  # an image or an empty element between words
            tag = f'<img id="e{next(ids)}">' if draw(st.booleans()) else f'<i id="e{next(ids)}"></i>'
            tokens.append((tag, draw(st.sampled_from(["after", "before"]))))
        if depth < 3 and draw(st.integers(0, 2)) == 0:
            end = draw(st.integers(k + 1, b))
            name = draw(st.sampled_from(INLINE_NAMES if depth == 0 else INLINE_NAMES[:-1]))
            tokens.append((f'<{name} id="e{next(ids)}" title="a&amp;b">', "open"))
            tokens += _content(draw, words, k, end, depth=depth + 1, ids=ids, breaks=breaks)
            tokens.append((f"</{name}>", "close"))
            k = end
        else:
            word = words[k]
            cut = draw(st.integers(0, len(word)))
            if cut < len(word) and draw(st.integers(0, 3)) == 0:  # a tag inside the word
                inner = f'<sub id="e{next(ids)}">{html.escape(word[cut:], quote=False)}</sub>'
                tokens.append((html.escape(word[:cut], quote=False) + inner, "word"))
            else:
                tokens.append((html.escape(word, quote=False), "word"))
            k += 1
    return tokens


def _spaced(tokens: list[tuple[str, str]]) -> str:
    """One space between consecutive words of a sentence (a <br> ends one): after the close tags and the tags
    touching the word before, before the others."""
    out, space_due = "", False
    for i, (text, kind) in enumerate(tokens):
        if space_due and kind in ("word", "open", "before"):
            out += " "
        if kind in ("word", "open", "before", "break"):
            space_due = False
        out += text
        rest = itertools.takewhile(lambda token: token[1] != "break", tokens[i + 1 :])
        space_due = space_due or (kind == "word" and any(later == "word" for _, later in rest))
    return out


@given(fragments())
def test_identity_translations_give_the_fragment_back(drawn):
    fragment, paragraphs = drawn
    doc = parse(fragment)
    assert doc.texts == [" ".join(words) for sentences in paragraphs for words in sentences]
    assert doc.render([(text, identity(len(text.split()))) for text in doc.texts]) == fragment


@st.composite
def translated(draw) -> tuple[str, list[list[tuple[str, list[tuple[int, int]]]]]]:
    """A fragment and, per paragraph and sentence, a random translation (some of the source words among
    random ones) with a random alignment."""
    fragment, paragraphs = draw(fragments())
    outputs = []
    for sentences in paragraphs:
        outputs.append([])
        for words in sentences:
            target = draw(st.lists(st.sampled_from(WORDS + ["Auto", "rötlich"] + words), max_size=8))
            pairs = [(i, j) for i in range(len(words)) for j in range(len(target))]
            alignment = draw(st.lists(st.sampled_from(pairs), max_size=12, unique=True)) if pairs else []
            outputs[-1].append((" ".join(target), alignment))
    return fragment, outputs


@given(translated())
def test_every_element_is_kept_once_nested_as_given_around_the_translation(drawn):
    fragment, outputs = drawn
    out = parse(fragment).render([output for paragraph in outputs for output in paragraph])
    source, result = _Tree(fragment), _Tree(out)
    assert result.parents == source.parents  # each id once, under the same parent: well-formed, nothing lost
    assert result.texts == ["".join(text for text, _ in paragraph) for paragraph in outputs]  # <br> between
    if html5lib is not None:
        tree = html5lib.HTMLParser(strict=True, namespaceHTMLElements=False).parseFragment(out)  # raises if misnested
        parents = {child.get("id"): parent.get("id") for parent in tree.iter() for child in parent if child.get("id")}
        assert parents == source.parents


class _Tree(HTMLParser):
    """Each element's id and its parent's (None at the top), checking that every end tag closes the
    innermost open element; and each paragraph's text, tags stripped and entities decoded."""

    def __init__(self, fragment: str) -> None:
        super().__init__(convert_charrefs=True)
        self.parents: dict[str, str | None] = {}
        self.texts: list[str] = []
        self._open: list[tuple[str, str | None]] = []
        self.feed(fragment)
        self.close()
        assert not self._open, f"never closed: {self._open}"

    def handle_starttag(self, tag: str, attrs: list) -> None:
        element_id = dict(attrs)["id"]
        assert element_id not in self.parents, f"{element_id} twice"
        self.parents[element_id] = self._open[-1][1] if self._open else None
        if tag == "p":
            self.texts.append("")
        if tag not in VOID:
            self._open.append((tag, element_id))

    def handle_endtag(self, tag: str) -> None:
        assert self._open and self._open[-1][0] == tag, f"</{tag}> closes {self._open[-1:]}"
        self._open.pop()

    def handle_data(self, data: str) -> None:
        if self._open:
            self.texts[-1] += data


def test_elements_marked_notranslate_are_kept_as_written_and_not_read():
    doc = parse('<p>Call <span class="notranslate">Acme <b>Corp</b></span> today.</p><p translate="no">Keep</p>')
    assert doc.texts == ["Call today."]
    out = doc.render([("Ruf heute an.", [(0, 0), (1, 1), (1, 2)])])
    assert out.count('<span class="notranslate">Acme <b>Corp</b></span>') == 1 and out.count("<b>") == 1
    assert out == '<p>Ruf <span class="notranslate">Acme <b>Corp</b></span> heute an.</p><p translate="no">Keep</p>'
    glued = parse('<p>(<span translate="no">Acme</span>) today.</p>')
    assert glued.texts == ["() today."]
    assert parse("Run <code>ls -l</code> now").texts == ["Run now"]  # code is not prose
    assert parse('<code translate="yes">x = 1</code> here').texts == ["x = 1 here"]
