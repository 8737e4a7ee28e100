"""serve/libretranslate/detect.py with the real lingua detector: the four Multi30k languages, short texts, one
served language."""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tnmt.errors import UserError
from tnmt.serve.libretranslate.detect import Detector, supported

# Captions 1 and 3 of Multi30k's test_2016_flickr, in its four languages.
SENTENCES = {
    "en": [
        "A man in an orange hat starring at something.",
        "A girl in karate uniform breaking a stick with a front kick.",
    ],
    "de": [
        "Ein Mann mit einem orangefarbenen Hut, der etwas anstarrt.",
        "Ein Mädchen in einem Karateanzug bricht ein Brett mit einem Tritt.",
    ],
    "fr": [
        "Un homme avec un chapeau orange regardant quelque chose.",
        "Une fille en tenue de karaté brisant un bâton avec un coup de pied.",
    ],
    "cs": [
        "Muž v oranžovém klobouku na něco zírá.",
        "Dívka v uniformě na karate, která předním kopem láme dřívko.",
    ],
}
SPANISH = "Un hombre con un sombrero naranja mirando algo."


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector(["fr", "en", "cs", "de"])


@pytest.mark.parametrize("language", sorted(SENTENCES))
def test_each_language_is_found_well_ahead_of_the_others(detector, language):
    for sentence in SENTENCES[language]:
        found = detector.detect(sentence)
        assert found[0][0] == language and found[0][1] > 60, (sentence, found)
        assert found[1][1] < 20, found


def test_every_language_once_best_first_from_0_to_100(detector):
    for text in [*(s for sentences in SENTENCES.values() for s in sentences), "Hund", "chat", SPANISH, "1 2 3"]:
        found = detector.detect(text)
        assert sorted(code for code, _ in found) == ["cs", "de", "en", "fr"]
        confidences = [confidence for _, confidence in found]
        assert confidences == sorted(confidences, reverse=True)
        assert all(0 <= confidence <= 100 for confidence in confidences)
        assert sum(confidences) <= 100.5  # rounding to 0.1 per language


def test_short_texts_are_found_with_less_confidence_than_sentences(detector):
    short = {"en": "The dog", "de": "Ein Hund", "fr": "Deux hommes", "cs": "Dva muži"}
    for language, text in short.items():
        found = detector.detect(text)
        assert found[0][0] == language, (text, found)
    for language in ("en", "de"):
        assert detector.detect(short[language])[0][1] < detector.detect(SENTENCES[language][0])[0][1] - 20


def test_text_in_none_of_the_languages_gets_low_confidence_for_all(detector):
    """Spanish on an en/de/fr/cs detector: the common languages take the probability, not the best served."""
    assert all(confidence < 20 for _, confidence in detector.detect(SPANISH))


@pytest.mark.parametrize("text", ["", " ", "1234", "12:30 !?", "🙂"])
def test_text_without_letters_gets_0_for_every_language_in_code_order(detector, text):
    assert detector.detect(text) == [("cs", 0.0), ("de", 0.0), ("en", 0.0), ("fr", 0.0)]


def test_when_every_language_is_ruled_out_lingua_over_them_alone_orders_them():
    """Lingua's rules give "ó" to Spanish but not Czech: with the common languages, this Czech caption is Spanish."""
    czech = "Kuchař pózuje na kameru zatímco vaří."
    assert Detector(["bg", "cs"]).detect(czech) == [("cs", 0.0), ("bg", 0.0)]  # not the code order
    assert Detector(["bg", "cs"]).detect("42") == [("bg", 0.0), ("cs", 0.0)]


def test_one_language_still_says_how_sure_it_is():
    """Lingua compares the served language with `COMMON`: not 100% whatever the text."""
    english = Detector(["en"])
    assert english.languages == ("en",)
    [(code, confidence)] = english.detect(SENTENCES["en"][0])
    assert code == "en" and confidence > 80
    assert english.detect(SENTENCES["de"][0])[0][1] < 5
    assert english.detect(SENTENCES["cs"][0]) == [("en", 0.0)]  # letters English does not have
    assert english.detect("42") == [("en", 0.0)]


def test_unknown_codes_and_no_codes_are_refused():
    with pytest.raises(UserError, match=r"language detection does not know \['english', 'xx'\]; ISO 639-1 codes"):
        Detector(["en", "xx", "english"])
    with pytest.raises(UserError, match="at least one language"):
        Detector([])
    assert {"en", "de", "fr", "cs", "it"} <= supported() and len(supported()) == 75 and "xx" not in supported()


def test_threads_get_the_answers_one_thread_gets(detector):
    texts = [s for sentences in SENTENCES.values() for s in sentences] * 8
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(detector.detect, texts)) == [detector.detect(text) for text in texts]


def test_importing_the_module_does_not_load_lingua():
    code = "import sys, tnmt.serve.libretranslate.detect; print('lingua' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr
