"""benchmarks/quality/segmenters.py's scoring on a tiny case, without the segmenters themselves."""

from benchmarks.quality.segmenters import CASES, LANGUAGES, Case, boundaries, locate, read_cases, score, unescape

CASE = Case("en", "Dr. Smith came.  He left.", ("Dr. Smith came.", "He left."))


def test_a_perfect_splitter_scores_one():
    result = score([CASE], lambda text: ["Dr. Smith came.  ", "He left."])
    assert result["accuracy"] == 1.0
    assert (result["false_splits"], result["missed_splits"], result["expected_boundaries"]) == (0, 0, 1)
    assert result["round_trip"] == result["located"] == 1.0
    assert result["wrong"] == []


def test_a_splitter_that_never_splits_scores_less():
    result = score([CASE], lambda text: [text])
    assert result["accuracy"] == 0.0
    assert (result["false_splits"], result["missed_splits"]) == (0, 1)
    assert result["round_trip"] == 1.0
    assert result["wrong"][0]["got"] == [CASE.text]


def test_a_false_split_after_an_abbreviation_counts_once():
    result = score([CASE], lambda text: ["Dr.", "Smith came.", "He left."])
    assert result["accuracy"] == 0.0
    assert (result["false_splits"], result["missed_splits"]) == (1, 0)


def test_stripped_sentences_are_located_and_collapsed_whitespace_is_noticed():
    result = score([CASE], lambda text: ["Dr. Smith came.", "He left."])
    assert result["accuracy"] == 1.0
    assert result["round_trip"] == 0.0 and result["located"] == 1.0  # the two spaces between: recoverable
    assert locate("A  b. C.", ["A b.", "C."]) == ([0, 6], True)  # the two spaces inside: lost
    assert locate("A b. C.", ["A b.", "D."]) == (None, False)


def test_boundaries_ignore_whitespace():
    assert boundaries(["Dr. Smith came.  ", "He left."]) == boundaries(["Dr. Smith came.", "He left."]) == {13}


def test_the_cases_file_reads():
    cases = read_cases(CASES)
    for language in LANGUAGES:
        assert sum(case.language == language for case in cases) >= 25
    assert all(case.expected and all(s == s.strip() for s in case.expected) for case in cases)
    assert all("".join("".join(case.expected).split()) == "".join(case.text.split()) for case in cases)
    assert unescape(r"a\nb\u202f?") == "a\nb\u202f?"
