"""serve/replay.py: POST /v1/replay over a served model's training run, the same replay `tnmt replay` prints,
refused in one JSON line when there is no run, the sentence is too long or is several sentences."""

import pytest
from fastapi.testclient import TestClient

from tnmt.config import ServeConfig
from tnmt.errors import UserError
from tnmt.serve.app import create_app
from tnmt.serve.models import load_models
from tnmt.views.replay import replay, replay_dict


@pytest.fixture(scope="module")
def client(tiny_run):
    config = ServeConfig(max_trace_chars=40)
    with TestClient(create_app(load_models([tiny_run / "best"], config), config)) as client:
        yield client


def test_the_run_a_checkpoint_sits_in_is_replayed(client, tiny_run):
    assert client.get("/v1/models").json()["models"][0]["replay"] is True
    answer = client.post("/v1/replay", json={"text": "two hundred", "reference": "duecento"})
    assert answer.status_code == 200, answer.text
    expected = replay_dict(replay(tiny_run, "two hundred", reference="duecento", source="en", target="de"))
    assert answer.json() == {"model": "en-de", **expected}  # the recipe names the Italian numbers "de"
    assert client.post("/v1/replay", json={"text": "two hundred", "reference": "duecento"}).json() == answer.json()


def test_bad_replays_are_refused_in_one_line(client):
    cases = [
        ({"text": "one " * 20}, 413, "text has 80 characters: over max_trace_chars=40"),
        ({"text": "two. five."}, 422, "a replay follows one sentence: this text has several (give one)"),
        ({"text": "two", "source": "en", "target": "fr"}, 400, "no model translates en -> fr"),
        ({"text": "two", "steps": 3}, 422, "steps: Extra inputs are not permitted"),
    ]
    for body, status, message in cases:
        answer = client.post("/v1/replay", json=body)
        assert answer.status_code == status and message in answer.json()["error"], answer.text


def test_a_model_served_without_its_run_says_how_to_serve_it(tiny_checkpoint, tiny_run):
    config = ServeConfig()
    with TestClient(create_app(load_models([tiny_checkpoint], config), config)) as client:
        assert client.get("/v1/models").json()["models"][0]["replay"] is False
        answer = client.post("/v1/replay", json={"text": "two"})
        assert answer.status_code == 404 and "serve it with --run RUN" in answer.json()["error"]
    assert load_models([tiny_run / "last"], config, run=tiny_run)[0].run == tiny_run  # --run names it
    with pytest.raises(UserError, match="its models translate en-de, not the checkpoint's pairs"):
        load_models([tiny_checkpoint], config, run=tiny_run)  # en-it
    with pytest.raises(UserError, match="not a training run"):
        load_models([tiny_checkpoint], config, run=tiny_checkpoint)
    with pytest.raises(UserError, match="serve that checkpoint alone"):
        load_models([tiny_checkpoint, tiny_checkpoint], config, run=tiny_run)


def test_a_replay_past_its_deadline_is_a_504_and_stops_before_its_next_model(tiny_run, monkeypatch):
    import time

    from tnmt.translate.translator import Translator

    loaded = []
    from_checkpoint = Translator.from_checkpoint.__func__

    def slow(cls, path, **options):
        loaded.append(options.get("device"))
        time.sleep(0.4)
        return from_checkpoint(cls, path, **options)

    monkeypatch.setattr(Translator, "from_checkpoint", classmethod(slow))
    config = ServeConfig(timeout_s=0.6)
    models = load_models([tiny_run / "best"], config)  # loaded through the slow path too: counted from here
    loaded.clear()
    with TestClient(create_app(models, config)) as client:
        response = client.post("/v1/replay", json={"text": "two hundred"})
        assert response.status_code == 504, response.text
        assert response.json() == {"error": "no translation within the deadline of 0.6 s"}
        time.sleep(1.5)  # what the replay would have loaded had it gone on: its four models, 0.4 s each
    assert 1 <= len(loaded) <= 3 and set(loaded) == {"cpu"}  # stopped early, on the served model's device
