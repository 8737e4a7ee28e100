"""Real text through the server (issue 65): sentences split and joined back on every route, the switch that turns
it off, and bad text that must get a clear answer. On the app over the tiny en -> it checkpoint, in process."""

import pytest
from fastapi.testclient import TestClient

from tnmt.config import ServeConfig
from tnmt.serve.app import create_app
from tnmt.serve.models import load_models
from tnmt.translate.translator import Translator


@pytest.fixture(scope="module")
def app(tiny_checkpoint):
    config = ServeConfig(max_chars=20_000, max_queue=4096, max_batch_tokens=64)  # a long text goes in runs
    models = load_models([tiny_checkpoint], config)
    with TestClient(create_app(models, config)) as client:
        yield client


@pytest.fixture(scope="module")
def offline(tiny_checkpoint) -> Translator:
    return Translator.from_checkpoint(tiny_checkpoint)


def translate(app, text, **fields) -> dict:
    response = app.post("/v1/translate", json={"text": text, **fields})
    assert response.status_code == 200, response.text
    return response.json()["translations"][0]


def test_a_paragraph_and_a_list_come_back_sentence_by_sentence_and_line_by_line(app, offline):
    text = "two hundred. three thousand and five.\n\n  - seven\n1. nine"
    found = translate(app, text, return_alignment=True, return_confidence=True)
    alone = offline.translate(["two hundred.", "three thousand and five.", "seven", "nine"])
    assert found["text"] == f"{alone[0]} {alone[1]}\n\n  - {alone[2]}\n1. {alone[3]}"
    assert [text[a:b] for a, b in (s["source"] for s in found["sentences"])] == [
        "two hundred.",
        "three thousand and five.",
        "seven",
        "nine",
    ]
    assert [found["text"][a:b] for a, b in (s["target"] for s in found["sentences"])] == alone
    n_source, n_target = len(text.split()), len(found["text"].split())
    assert all(0 <= i < n_source and 0 <= j < n_target for i, j in found["alignment"])
    assert len(found["confidence"]["words"]) == n_target
    assert all(0 <= s["confidence"] <= 1 for s in found["sentences"])
    libre = app.post("/translate", json={"q": text, "source": "en", "target": "it"}).json()
    assert libre["translatedText"] == found["text"]


def test_segmentation_is_turned_off_per_request(app, offline):
    from dataclasses import replace

    as_given = replace(offline.decode, segment=False)
    found = translate(app, "two hundred. seven", segment=False)
    assert found["text"] == offline.translate(["two hundred. seven"], as_given)[0] and "sentences" not in found
    libre = app.post("/translate", json={"q": "two hundred. seven", "source": "en", "target": "it", "segment": "false"})
    assert libre.json()["translatedText"] == found["text"]


def test_alternatives_count_words_over_the_whole_translation(app, offline):
    text = "two hundred. seven thousand"
    whole = translate(app, text)["text"]
    first = offline.translate(["two hundred."])[0]
    position = len(first.split())  # the first word of the second sentence
    answer = app.post("/v1/alternatives", json={"text": text, "position": position, "k": 2}).json()
    assert answer["translation"] == whole and answer["position"] == position
    assert answer["word"] == whole.split()[position]
    for alternative in answer["alternatives"]:
        assert alternative["translation"].startswith(first + " ")  # the other sentence as it was


def test_html_with_two_sentences_in_one_block_and_a_tag_across_them(app):
    fragment = "<p>two <b>hundred. seven</b> thousand.</p>"
    body = {"q": fragment, "source": "en", "target": "it", "format": "html"}
    answer = app.post("/translate", json=body).json()
    out = answer["translatedText"]
    assert out.startswith("<p>") and out.endswith("</p>") and out.count("<b>") == 1 and out.count("</b>") == 1


@pytest.mark.parametrize(
    "text",
    [
        "   \n\t  \n",  # only whitespace
        "?!... ,; —",  # only punctuation
        "\n" * 10_000,  # ten thousand newlines
        "one two three four five six seven eight nine ten " * 100,  # 5,000 characters, no punctuation
        "Hello мир 世界 مرحبا. two hundred. 🐶",  # mixed scripts
    ],
)
def test_bad_text_gets_a_clear_answer_and_nothing_dropped(app, text):
    found = translate(app, text)
    assert found["text"].count("\n") == text.count("\n")
    if not text.strip():
        assert found["text"] == text
    assert "truncated" not in found["warnings"]


def test_a_sentence_longer_than_the_model_reads_is_translated_in_parts(app):
    text = "one two three four five six seven eight nine ten " * 100
    found = translate(app, text.strip())
    [sentence] = found["sentences"]
    assert len(sentence["cuts"]) >= 100 and "sentence_split" in found["warnings"]  # parts of at most 15 tokens
    assert all(text[cut - 1] == " " for cut in sentence["cuts"]) and found["text"].strip()


def test_views_hold_the_sentence_they_record_to_max_trace_chars(app):
    text = "seven. " + "x" * 250  # one unbroken word: nowhere to cut it, over max_trace_chars=200
    for path in ("/v1/explain", "/v1/inspect"):
        response = app.post(path, json={"text": text, "sentence": 1})
        assert response.status_code == 413
        assert response.json() == {"error": "sentence 1 has 250 characters: over max_trace_chars=200"}
        assert app.post(path, json={"text": text, "sentence": 0}).status_code == 200


SIX = ("one.", "two.", "three.", "four.", "five.", "six.")


def test_a_text_of_more_sentences_than_the_queue_holds_is_queued_a_share_at_a_time(tiny_checkpoint):
    config = ServeConfig(max_queue=4)  # shares of one sentence
    models = load_models([tiny_checkpoint], config)
    batcher, depths = models[0].batcher, []
    submit = batcher.submit

    def watched(prepared, *args, **kwargs):
        futures = submit(prepared, *args, **kwargs)
        depths.append(batcher._depth)
        return futures

    batcher.submit = watched
    with TestClient(create_app(models, config)) as client:
        response = client.post("/v1/translate", json={"text": " ".join(SIX)})
        depths_then = list(depths)
        alone = [client.post("/v1/translate", json={"text": t}).json()["translations"][0]["text"] for t in SIX]
    assert response.status_code == 200, response.text
    assert len(depths_then) == 6 and max(depths_then) <= 2  # six shares of one, never more than two queued at once
    assert response.json()["translations"][0]["text"] == " ".join(alone)  # each sentence as it is alone


def _served(tiny_checkpoint, config, *, model_segments=True):
    models = load_models([tiny_checkpoint], config)
    if not model_segments:  # a model whose own decoding settings say: as given
        from dataclasses import replace

        for model in models:
            model.translator.decode = replace(model.translator.decode, segment=False)
    return TestClient(create_app(models, config))


def test_a_server_that_does_not_segment_leaves_a_documents_units_whole(tiny_checkpoint, offline):
    from dataclasses import replace

    text = "two hundred. seven"
    whole, split = (offline.translate([text], replace(offline.decode, segment=on))[0] for on in (False, True))
    assert whole != split  # else the test could not tell
    with _served(tiny_checkpoint, ServeConfig(segment=False)) as client:
        for path in ("/v1/translate_file", "/translate_file"):
            response = client.post(
                path, files={"file": ("a.txt", text.encode())}, data={"source": "en", "target": "it"}
            )
            assert response.status_code == 200, response.text
            if path == "/translate_file":
                response = client.get(response.json()["translatedFileUrl"])
            assert response.text.strip() == whole.strip(), path


def test_a_requests_segment_field_chooses_on_every_api_over_the_models_default(tiny_checkpoint, offline):
    from dataclasses import replace

    text = "two hundred. seven"
    split = offline.translate([text], replace(offline.decode, segment=True))[0]
    whole = offline.translate([text], replace(offline.decode, segment=False))[0]
    with _served(tiny_checkpoint, ServeConfig(), model_segments=False) as client:
        assert translate(client, text)["text"] == whole  # the model's default
        libre = client.post("/translate", json={"q": text, "source": "en", "target": "it"}).json()
        assert libre["translatedText"] == whole
        assert translate(client, text, segment=True)["text"] == split
        libre = client.post("/translate", json={"q": text, "source": "en", "target": "it", "segment": True}).json()
        assert libre["translatedText"] == split
