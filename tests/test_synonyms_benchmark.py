"""benchmarks/quality/synonyms.py without a model: its dictionary, the set it builds, and the measures it reports
from given outputs. The real run: `python -m benchmarks.quality.synonyms --checkpoint CKPT [--baseline DIR]`."""

from benchmarks.quality import synonyms as bench


def test_the_dictionary_gives_each_word_usual_words_and_a_synonym_outside_them():
    rows = bench.dictionary()
    assert len(rows) >= 20 and len({word for word, _, _ in rows}) == len(rows)
    for word, usual, synonym in rows:
        assert word == word.lower() and usual and synonym
        assert synonym.casefold() not in {u.casefold() for u in usual}, word


def test_the_set_takes_whole_words_at_most_per_word_each():
    sources = ["A girl runs.", "Girls dance.", "A girl sits.", "A girl eats.", "The dog barks.", "No match here."]
    chosen = bench.glossary_set(sources, n=10, per_word=2)
    rows = bench.dictionary()
    assert [(text, rows[r][0]) for text, r in chosen] == [
        ("A girl runs.", "girl"),
        ("Girls dance.", "girls"),
        ("A girl sits.", "girl"),
        ("The dog barks.", "dog"),
    ]


def test_the_measures_read_the_outputs():
    rows = bench.dictionary()
    girl = next(r for r, row in enumerate(rows) if row[0] == "girl")
    chosen = [("A girl runs.", girl), ("A girl in red runs fast.", girl)]
    found = {
        "tnmt": "here",
        "plain": {"outputs": ["Ein Mädchen läuft.", "Ein Mädchen in Rot läuft schnell."], "seconds": [1.0]},
        "steered": {
            "outputs": ["Ein Mädel läuft.", "Ein Mädchen Mädel läuft."],
            "seconds": [2.0],
            "reports": [[False], [True]],
        },
    }
    measured = bench.measure(chosen, rows, found)
    assert measured["term_used_pct"] == 100.0 and measured["doubled_pct"] == 50.0
    assert measured["shorter_pct"] == 50.0  # 4 words against 6
    assert measured["reported_doubled_or_lost_pct"] == 50.0
    assert bench.swapped("Ein Mädchen läuft.", ("Mädchen",), "Mädel") == "Ein Mädel läuft."
    assert bench.swapped("Zwei Mädchen, drei.", ("Mädchen",), "Mädels") == "Zwei Mädels, drei."
    assert measured["failures"][0]["steered"] == "Ein Mädchen Mädel läuft."
