"""serve/libretranslate/detect.py with the real lingua detector: the four Multi30k languages, short texts, one
served language, texts in languages not served, and the calibration of lingua's values."""

import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from tnmt.errors import UserError
from tnmt.serve.libretranslate.detect import COMMON, Detector, calibrated, supported

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
DOG = "A dog runs on the beach."


@pytest.fixture(scope="module")
def detector() -> Detector:
    return Detector(["fr", "en", "cs", "de"])


@pytest.mark.parametrize("language", sorted(SENTENCES))
def test_each_language_is_found_well_ahead_of_the_others(detector, language):
    for sentence in SENTENCES[language]:
        found = detector.detect(sentence)
        assert found[0][0] == language and found[0][1] > 99, (sentence, found)
        assert found[1][1] < 1, found


def test_every_compared_language_once_best_first_adding_up_to_100(detector):
    assert detector.compared == tuple(sorted(COMMON))  # the four are common languages
    for text in [*(s for sentences in SENTENCES.values() for s in sentences), "Hund", "chat", SPANISH, DOG]:
        found = detector.detect(text)
        assert sorted(code for code, _ in found) == sorted(COMMON)
        confidences = [confidence for _, confidence in found]
        assert confidences == sorted(confidences, reverse=True)
        assert all(0 <= confidence <= 100 for confidence in confidences)
        assert sum(confidences) == pytest.approx(100, abs=0.05 * len(found))  # rounding to 0.1 per language


def test_a_clear_sentence_is_confident_and_short_texts_less_so(detector):
    """Lingua's own value for the dog sentence is 36% (over the 13 languages): a per-character average."""
    assert detector.detect(DOG)[0] == ("en", pytest.approx(96, abs=1))
    short = {"en": "The dog", "de": "Ein Hund", "fr": "Deux hommes", "cs": "Dva muži"}
    for language, text in short.items():
        assert detector.detect(text)[0][0] == language, (text, detector.detect(text))
    for text, language in (("The dog", "en"), ("Ein Hund", "de"), ("Hund", "de"), ("chat", "en")):
        code, confidence = detector.detect(text)[0]
        assert code == language and 60 < confidence < detector.detect(SENTENCES[language][0])[0][1] - 2, (text, code)


def test_a_text_in_an_unserved_language_is_named_served_or_not():
    """Spanish on an en/de/fr/cs detector, German and Czech on an English one: what the text is, first."""
    assert Detector(["cs", "de", "en", "fr"]).detect(SPANISH)[0] == ("es", pytest.approx(100, abs=0.5))
    english = Detector(["en"])
    assert english.languages == ("en",)
    for language in ("de", "cs"):
        found = dict(english.detect(SENTENCES[language][0]))
        assert max(found, key=found.__getitem__) == language and found[language] > 99 and found["en"] < 1
    assert english.detect(SENTENCES["en"][0])[0] == ("en", pytest.approx(100, abs=0.5))


@pytest.mark.parametrize("text", ["", " ", "1234", "12:30 !?", "🙂"])
def test_text_without_letters_gets_0_everywhere_served_languages_first(detector, text):
    found = detector.detect(text)
    assert found[:4] == [("cs", 0.0), ("de", 0.0), ("en", 0.0), ("fr", 0.0)]
    assert found[4:] == [(code, 0.0) for code in sorted(set(COMMON) - {"cs", "de", "en", "fr"})]
    assert Detector(["en"]).detect(text)[0] == ("en", 0.0)


def test_when_every_served_language_is_ruled_out_lingua_over_them_alone_orders_them():
    """Lingua's rules give "ó" to Spanish but not Czech: this Czech caption is Spanish, Czech gets 0."""
    czech = "Kuchař pózuje na kameru zatímco vaří."
    found = Detector(["bg", "cs"]).detect(czech)
    assert found[0][0] == "es"
    assert [(code, confidence) for code, confidence in found if code in ("bg", "cs")] == [("cs", 0.0), ("bg", 0.0)]
    assert Detector(["bg", "cs"]).detect("42")[:2] == [("bg", 0.0), ("cs", 0.0)]  # not the alone order: code order


def test_calibration_sharpens_lingua_with_the_length_and_keeps_zeros():
    values = {"en": 0.5, "de": 0.3, "nl": 0.2, "cs": 0.0}
    assert calibrated(values, 1, sharpness=1, exponent=0) == pytest.approx(values)  # power 1: lingua's own
    short, long = calibrated(values, 4), calibrated(values, 36)  # powers 1.5 * 2 and 1.5 * 6
    assert short["en"] == pytest.approx(0.5**3 / (0.5**3 + 0.3**3 + 0.2**3))
    assert 0.5 < short["en"] < long["en"] < 1 and short["cs"] == long["cs"] == 0.0
    assert sum(long.values()) == pytest.approx(1)
    assert calibrated({"en": 0.0, "de": 0.0}, 10) == {"en": 0.0, "de": 0.0}
    assert calibrated({"en": 1.0, "de": 1e-300}, 100) == {"en": 1.0, "de": 0.0}  # no overflow: the top is subtracted


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
