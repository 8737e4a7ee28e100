"""Steering over HTTP (serve/native.py): /v1/translate's glossary, do_not_translate, constraints, avoid and prefix,
/v1/alternatives, /v1/explain's constraint state, and the 4xx that name a bad entry. The real app in this process
on the tiny random checkpoint; every answer is compared with the offline `Translator`."""

from collections.abc import Iterator
from dataclasses import asdict

import pytest
from fastapi.testclient import TestClient

from tnmt.config import DecodeConfig, ServeConfig
from tnmt.translate.glossary import GlossaryEntry
from tnmt.translate.replacements import word_replacements
from tnmt.translate.steering import Steering
from tnmt.translate.translator import Translator


@pytest.fixture(scope="module")
def app(tiny_checkpoint) -> Iterator[tuple[TestClient, Translator]]:
    from tnmt.serve.app import create_app
    from tnmt.serve.models import load_models

    config = ServeConfig(threads=1, max_wait_ms=1, max_glossary=4, max_chars=60)
    with TestClient(create_app(load_models([tiny_checkpoint], config), config)) as client:
        yield client, Translator.from_checkpoint(tiny_checkpoint)


def settings(offline: Translator, beam_size: int = 3) -> DecodeConfig:
    return DecodeConfig(**{**offline.decode.__dict__, "beam_size": beam_size, "max_len": 12})


def test_translate_with_a_glossary_reports_each_constraint(app):
    client, offline = app
    body = {
        "text": ["two hundred", "five", "🐶 three"],
        "glossary": [{"source": "two hundred", "target": "due"}, {"source": "five", "target": ["cinque", "sei"]}],
        "constraints": [["mille"]],
        "beam_size": 3,
        "max_len": 12,
    }
    answer = client.post("/v1/translate", json=body)
    assert answer.status_code == 200, answer.text
    steering = Steering(
        glossary=(GlossaryEntry("two hundred", ("due",)), GlossaryEntry("five", ("cinque", "sei"))),
        include=(("mille",),),
    )
    expected = offline.translations(body["text"], settings(offline), steering=[steering] * 3)
    got = answer.json()["translations"]
    assert [t["text"] for t in got] == [e.text for e in expected]
    reports = [{**asdict(r), "words": list(r.words), "lost": list(r.lost)} for r in expected[0].constraints]
    assert got[0]["constraints"] == reports
    assert [(r["target"], r["met"], r["source"], r["form"]) for r in reports] == [
        ("due", True, "glossary", "due"),
        ("mille", True, "include", "mille"),
    ]
    assert got[1]["constraints"][0]["target"] == "cinque | sei" and got[1]["constraints"][0]["met"]
    assert got[2]["text"].count("🐶") == 1  # kept out of what the model read, and put back once


def test_avoid_prefix_and_do_not_translate_reach_the_search(app):
    client, offline = app
    body = {"text": "four hundred", "avoid": ["cento"], "prefix": "quattro", "do_not_translate": ["hundred"]}
    got = client.post("/v1/translate", json=body).json()["translations"][0]
    steering = Steering(do_not_translate=("hundred",), avoid=("cento",), prefix="quattro")
    [expected] = offline.translations(["four hundred"], steering=[steering])
    assert got["text"] == expected.text and got["text"].startswith("quattro") and "hundred" in got["text"].split()


def test_alternatives_match_the_offline_search(app):
    client, offline = app
    answer = client.post("/v1/alternatives", json={"text": "three hundred", "position": 0, "k": 3})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    expected = word_replacements(offline, "three hundred", 0, 3)
    assert body["translation"] == expected.translation.text and body["word"] == expected.word
    assert body["alternatives"] == [
        {"word": a.word, "probability": pytest.approx(a.probability), "translation": a.translation}
        for a in expected.replacements
    ]
    assert len(body["alternatives"]) == 3
    for alternative in body["alternatives"]:
        assert alternative["translation"].split()[0] == alternative["word"]  # word 0 replaced, the rest re-translated
        assert alternative["word"] != body["word"]


def test_explain_shows_the_constraint_state_of_every_hypothesis(app):
    client, offline = app
    body = {"text": "seven", "constraints": ["sei"], "beam_size": 2}
    trace = client.post("/v1/explain", json=body).json()
    [expected] = offline.translations(
        ["seven"],
        DecodeConfig(**{**offline.decode.__dict__, "beam_size": 2}),
        steering=[Steering(include=(("sei",),))],
    )
    assert trace["translation"] == expected.text
    states = [h["constraints"] for step in trace["steps"] for h in step["hypotheses"]]
    assert states[0] == [False] and [True] in states


@pytest.mark.parametrize(
    ("path", "body", "status", "named"),
    [
        (
            "/v1/translate",
            {"text": "one", "glossary": [{"source": " ", "target": "uno"}]},
            422,
            "glossary[0]: empty source term",
        ),
        ("/v1/translate", {"text": "one", "constraints": ["uno"], "avoid": ["uno"]}, 422, "is required and avoided"),
        ("/v1/translate", {"text": "one", "constraints": [[]]}, 422, "constraints[0]: an empty phrase"),
        ("/v1/translate", {"text": "one", "avoid": [""]}, 422, "avoid[0]: an empty term"),
        ("/v1/translate", {"text": "one", "constraints": ["uno"] * 5}, 413, "max_glossary=4"),
        ("/v1/translate", {"text": "one", "prefix": "x" * 61}, 413, "max_chars=60"),
        ("/v1/translate", {"text": "one", "constraints": ["uno " * 20]}, 422, "the output may have"),
        ("/v1/alternatives", {"text": "one", "position": 99}, 422, "position 99: the translation has"),
        ("/v1/alternatives", {"text": "  ", "position": 0}, 422, "a blank text has nothing to translate"),
        ("/v1/alternatives", {"text": "one", "position": 0, "k": 0}, 422, "k"),
        ("/v1/alternatives", {"text": "one", "position": -1}, 422, "position"),
        ("/v1/explain", {"text": "🐶", "top_k": 2}, 422, "nothing of this text is translated"),
    ],
)
def test_bad_steering_names_the_entry(app, path, body, status, named):
    client, _ = app
    answer = client.post(path, json=body)
    assert answer.status_code == status, answer.text
    assert named in answer.json()["error"]


def test_libretranslate_takes_a_glossary_and_answers_with_its_constraints(app):
    client, offline = app
    glossary = [{"source": "two", "target": "sei"}]
    answer = client.post(
        "/translate", json={"q": ["two", "three"], "source": "en", "target": "it", "glossary": glossary}
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    expected = offline.translations(
        ["two", "three"], steering=[Steering(glossary=(GlossaryEntry("two", ("sei",)),))] * 2
    )
    assert body["translatedText"] == [e.text for e in expected]
    assert body["constraints"][0] == [
        {"target": "sei", "met": True, "words": list(expected[0].constraints[0].words), "source": "glossary"}
        | {"form": "sei", "doubled": False, "lost": []}
    ]
    assert body["constraints"][1] == []
    html = client.post(
        "/translate", json={"q": "<b>two</b>", "source": "en", "target": "it", "format": "html", "glossary": glossary}
    )
    assert html.status_code == 200 and html.json()["constraints"][0]["met"]
    for bad in ([{"source": "", "target": "x"}], "two=sei", [{"source": "two"}]):
        refused = client.post("/translate", json={"q": "two", "source": "en", "target": "it", "glossary": bad})
        assert refused.status_code == 400 and refused.json()["error"].startswith("Invalid request: glossary")


def test_libretranslate_html_answers_no_alternatives_as_libretranslate_does(app):
    client, _ = app
    body = {"q": "<b>two</b> three", "source": "en", "target": "it", "format": "html", "alternatives": 2}
    answer = client.post("/translate", json=body)
    assert answer.status_code == 200 and answer.json()["alternatives"] == []
