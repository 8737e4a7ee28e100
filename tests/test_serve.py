"""`tnmt serve` end to end: the real command in subprocesses, driven over HTTP (httpx, the PyPI LibreTranslate
client, schemathesis), its answers compared with the offline `Translator` on the same tiny checkpoint."""

import asyncio
import os
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict, replace
from pathlib import Path

import httpx
import pytest
import schemathesis
import torch
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from libretranslatepy import LibreTranslateAPI
from num2words import num2words
from prometheus_client.parser import text_string_to_metric_families
from schemathesis.checks import not_a_server_error

from tnmt.documents.markup import parse
from tnmt.serve.libretranslate.detect import Detector
from tnmt.translate.translator import Translator
from tnmt.views.inside import inside
from tnmt.views.inside_view import inside_dict

SRC = str(Path(__file__).resolve().parent.parent / "src")
LIMITS = {"max_chars": 50, "max_texts": 4, "max_beam_size": 4, "max_n_best": 3}
MAX_BODY = 4000
LIBRE_ERRORS = 400  # LibreTranslate's status for every bad request on its own endpoints
# The target is listed too: LibreTranslate's page looks every target up in /languages.
LANGUAGES = [{"code": "en", "name": "English", "targets": ["it"]}, {"code": "it", "name": "Italian", "targets": []}]
TIMEOUT = 30  # seconds: generous bound on any one request


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """`tnmt serve` in a subprocess on a free port, its output in a log file."""

    def __init__(self, checkpoint: Path, log_dir: Path, *flags: str) -> None:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.log = log_dir / f"serve-{port}.log"
        command = [sys.executable, "-m", "tnmt", "serve", "--checkpoint", str(checkpoint), "--port", str(port)]
        env = {
            **os.environ,
            "OMP_NUM_THREADS": "1",
            "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
        }
        with self.log.open("w") as log:
            self.process = subprocess.Popen([*command, "--threads", "1", *flags], stdout=log, stderr=log, env=env)
        self.healthy = False

    def wait_healthy(self, timeout: float = 120) -> "Server":
        deadline = time.monotonic() + timeout
        while not self.healthy:
            assert self.process.poll() is None, f"the server exited:\n{self.log.read_text()}"
            assert time.monotonic() < deadline, f"no /health within {timeout} s:\n{self.log.read_text()}"
            try:
                self.healthy = httpx.get(self.url + "/health", timeout=1).status_code == 200
            except httpx.TransportError:
                time.sleep(0.1)
        return self

    def post(self, path: str, body: dict | None = None, **options) -> httpx.Response:
        return httpx.post(self.url + path, json=body, timeout=TIMEOUT, **options)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=TIMEOUT)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(TIMEOUT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@pytest.fixture(scope="module")
def servers(tiny_checkpoint, tmp_path_factory) -> dict[str, Server]:
    """Every server this module needs, started together (each takes seconds to import torch and load)."""
    log_dir = tmp_path_factory.mktemp("serve")
    limits = [f"--{name.replace('_', '-')}={value}" for name, value in LIMITS.items()]
    flags = {
        "main": [*limits, f"--max-body-bytes={MAX_BODY}", "--max-wait-ms=30"],
        # a batch waits half a second, holding its sentence in a queue of one: what comes meanwhile is refused
        "busy": ["--max-queue=1", "--max-wait-ms=500"],
        # a batch waits 3 s, far past every deadline: always 504 (and /ready 503)
        "late": ["--timeout-s=0.2", "--ready-timeout-s=0.2", "--max-wait-ms=3000"],
        # a request stays in flight for 1.5 s: time to send SIGTERM
        "sigterm": ["--max-wait-ms=1500"],
    }
    started = {name: Server(tiny_checkpoint, log_dir, *options) for name, options in flags.items()}
    yield started
    for server in started.values():
        server.close()


@pytest.fixture(scope="module")
def server(servers) -> Server:
    return servers["main"].wait_healthy()


@pytest.fixture(scope="module")
def offline(tiny_checkpoint) -> Translator:
    return Translator.from_checkpoint(tiny_checkpoint)


def assert_error(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"] and isinstance(body["error"], str) and body["error"], body


def metric_samples(server: Server) -> dict[str, list]:
    """Sample name -> [(labels, value)] from /metrics."""
    response = server.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: dict[str, list] = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def batches_over_one_sentence(server: Server) -> float:
    samples = metric_samples(server)
    ones = next(value for labels, value in samples["tnmt_batch_sentences_bucket"] if labels["le"] == "1.0")
    return samples["tnmt_batch_sentences_count"][0][1] - ones


# --- the native API ---


def test_translate_a_text_or_a_list_like_the_offline_translator(server, offline):
    [result] = offline.translations(["two hundred and five"], evidence=True)
    response = server.post("/v1/translate", {"text": "two hundred and five"})
    assert response.status_code == 200
    assert response.json() == {
        "model": "en-it",
        "translations": [{"text": result.text, "warnings": result.evidence.warnings}],
    }

    texts = ["one", "", "seven thousand, three hundred and forty-two"]
    response = server.post("/v1/translate", {"text": texts, "source": "en", "target": "it"})
    assert [t["text"] for t in response.json()["translations"]] == offline.translate(texts)

    response = server.post("/v1/translate", {"text": texts, "beam_size": 1, "max_len": 2})
    assert [t["text"] for t in response.json()["translations"]] == offline.translate(
        texts, replace(offline.decode, beam_size=1, max_len=2)
    )


def test_alignment_confidence_and_warnings_are_the_translators_evidence(server, offline):
    texts = ["two hundred and five", "", "seven thousand, three hundred and forty-two"]
    body = {"text": texts, "return_alignment": True, "return_confidence": True}
    response = server.post("/v1/translate", body)
    assert response.status_code == 200
    for answer, result in zip(response.json()["translations"], offline.translations(texts, evidence=True), strict=True):
        evidence = result.evidence
        assert answer["alignment"] == [list(pair) for pair in evidence.alignment]
        assert answer["confidence"]["sentence"] == pytest.approx(evidence.confidence, abs=1e-6)
        assert answer["confidence"]["words"] == pytest.approx(evidence.word_probs, abs=1e-6)
        assert answer["warnings"] == evidence.warnings
    assert response.json()["translations"][1] == {
        "text": "",
        "warnings": [],
        "alignment": [],
        "confidence": {"sentence": 1.0, "words": []},
    }
    plain = server.post("/v1/translate", {"text": texts[0]}).json()["translations"][0]
    assert set(plain) == {"text", "warnings"}  # alignment and confidence only when asked for


def test_n_best_alternatives_are_sorted_by_score_and_the_first_is_the_translation(server, offline):
    response = server.post("/v1/translate", {"text": "six thousand and twelve", "beam_size": 3, "n_best": 3})
    assert response.status_code == 200
    [translation] = response.json()["translations"]
    alternatives = translation["alternatives"]
    assert len(alternatives) == 3
    assert alternatives[0]["text"] == translation["text"]
    scores = [a["score"] for a in alternatives]
    assert scores == sorted(scores, reverse=True)
    expected = offline.translations(["six thousand and twelve"], replace(offline.decode, beam_size=3), n_best=3)[
        0
    ].nbest
    assert [a["text"] for a in alternatives] == [r.text for r in expected]
    assert scores == pytest.approx([r.score for r in expected], abs=1e-5)


def test_return_attention_gives_layers_by_heads_by_target_by_source_maps(server, offline):
    response = server.post("/v1/translate", {"text": "two hundred and five", "return_attention": True})
    assert response.status_code == 200
    [translation] = response.json()["translations"]
    attention = translation["attention"]
    source, target, cross = attention["source_pieces"], attention["target_pieces"], attention["cross"]
    expected_source, expected_target, _ = offline.attention("two hundred and five")
    assert (source, target) == (expected_source, expected_target)
    assert source[-1] == "</s>" and target[0] == "<s>"
    config = offline.model.config
    assert len(cross) == config.n_decoder_layers
    for layer in cross:
        assert len(layer) == config.n_heads
        for head in layer:
            assert len(head) == len(target)
            for row in head:  # one softmax over the source per target position
                assert len(row) == len(source)
                assert sum(row) == pytest.approx(1, abs=1e-4)


@pytest.mark.parametrize("beam_size", [1, 2])
def test_explain_traces_the_search_that_translate_runs(server, offline, beam_size):
    text = "seven thousand, three hundred and forty-two"  # longer than the tiny model reads well: not split here
    body = {"text": text, "beam_size": beam_size, "segment": False}
    response = server.post("/v1/explain", body | {"top_k": 3})
    assert response.status_code == 200, response.text
    answer = response.json()
    translated = server.post("/v1/translate", body).json()["translations"][0]
    assert answer["translation"] == translated["text"]
    assert (answer["model"], answer["beam_size"], answer["top_k"]) == ("en-it", beam_size, 3)
    trace = offline.trace(text, replace(offline.decode, beam_size=beam_size), top_k=3)
    assert answer["source_pieces"] == trace.source_pieces and len(answer["steps"]) == len(trace.steps)
    for step in answer["steps"]:
        assert 1 <= len(step["hypotheses"]) <= beam_size and all(len(h["top"]) == 3 for h in step["hypotheses"])
        assert {c["fate"] for c in step["candidates"]} <= {"kept", "finished", "pruned"}
    assert answer["steps"][-1]["finished"]


@pytest.mark.parametrize(
    ("body", "status", "named"),
    [
        ({"text": "  "}, 422, "non-empty"),
        ({"text": "one " * 60}, 413, "max_chars=50"),
        ({"text": "one. two.", "sentence": 2}, 422, "sentence 2: the text has 2 sentences (0 to 1)"),
        ({"text": "one", "beam_size": 5}, 422, "max_trace_beam=4"),
        ({"text": "one", "top_k": 11}, 422, "max_top_k=10"),
        ({"text": "one", "top_k": 0}, 422, "top_k"),
        ({"text": "one", "steps": 3}, 422, "steps"),
        ({"text": "one", "target": "de"}, 400, "no model translates"),
    ],
)
def test_explain_limits_name_what_was_over(server, body, status, named):
    response = server.post("/v1/explain", body)
    assert_error(response, status)
    assert named in response.json()["error"]


def test_explain_and_inspect_record_the_sentence_asked_for(server):
    """A text of several sentences: each view records the one `sentence` names, as it records that sentence alone."""
    for path in ("/v1/explain", "/v1/inspect"):
        second = server.post(path, {"text": "one hundred. seven", "sentence": 1, "top_k": 3}).json()
        alone = server.post(path, {"text": "seven", "top_k": 3}).json()
        assert second == alone


@pytest.mark.parametrize("given", [None, "cento"])
def test_inspect_looks_inside_the_translation_translate_gives_or_the_one_given(server, offline, given):
    text = "one hundred and seven"
    body = {"text": text, "top_k": 3} | ({} if given is None else {"translation": given})
    response = server.post("/v1/inspect", body)
    assert response.status_code == 200, response.text
    answer = response.json()
    translated = server.post("/v1/translate", {"text": text}).json()["translations"][0]["text"]
    assert answer["translation"] == {"text": translated if given is None else given, "given": given is not None}
    piece = lambda i: offline.tokenizer.target_pieces([i])[0]  # noqa: E731
    found = inside(offline, text, translation=given, top_k=3)
    assert answer == {"model": "en-it", **inside_dict(found, piece, config=offline.model.config, top_k=3)}


@pytest.mark.parametrize(
    ("body", "status", "named"),
    [
        ({"text": "  "}, 422, "non-empty"),
        ({"text": "one " * 60}, 413, "text 0 has 240 characters: over max_chars=50"),
        ({"text": "one. two.", "sentence": 5}, 422, "sentence 5: the text has 2 sentences"),
        ({"text": "one", "translation": "uno " * 60}, 413, "translation has 240 characters"),
        ({"text": "one", "beam_size": 5}, 422, "max_trace_beam=4"),
        ({"text": "one", "top_k": 11}, 422, "max_top_k=10"),
        ({"text": "one", "top_k": 0}, 422, "top_k"),
        ({"text": "one", "glossary": []}, 422, "glossary"),
        ({"text": "one", "target": "de"}, 400, "no model translates"),
    ],
)
def test_inspect_limits_name_what_was_over(server, body, status, named):
    response = server.post("/v1/inspect", body)
    assert_error(response, status)
    assert named in response.json()["error"]


def test_attention_of_an_empty_text_is_a_client_error(server):
    """Translator.attention raises ValueError on an empty text; the server answers 500 instead of a 422."""
    assert_error(server.post("/v1/translate", {"text": "", "return_attention": True}), 422)


def test_models_lists_languages_size_decoding_defaults_and_limits(server, offline):
    response = server.get("/v1/models")
    assert response.status_code == 200
    body = response.json()
    [model] = body["models"]
    assert (model["id"], model["source"], model["target"]) == ("en-it", "en", "it")
    assert model["parameters"] == sum(p.numel() for p in offline.model.parameters())
    assert model["architecture"]["d_model"] == 16 and model["architecture"]["max_len"] == 16
    assert model["decoding"] == asdict(offline.decode)
    assert (model["decoding"]["beam_size"], model["decoding"]["max_len"]) == (2, 5)  # the checkpoint's own
    assert body["limits"] == {
        **LIMITS,
        "max_trace_chars": 200,
        "max_trace_beam": 4,
        "max_top_k": 10,
        "max_glossary": 256,
        "max_file_bytes": 10_000_000,
    }
    assert ".docx" in body["file_formats"] and ".srt" in body["file_formats"]


def test_health_ready_and_languages(server):
    assert server.get("/health").json() == {"status": "ok"}
    response = server.get("/ready")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "models": ["en-it"]}
    assert server.get("/languages").json() == LANGUAGES


def test_metrics_count_requests_latency_batches_and_the_queue(server):
    before = metric_samples(server)
    assert server.post("/v1/translate", {"text": ["one", "two"]}).status_code == 200
    samples = metric_samples(server)

    def requests_ok(samples: dict) -> float:
        wanted = {"endpoint": "/v1/translate", "status": "200"}
        return sum(value for labels, value in samples.get("tnmt_requests_total", []) if labels == wanted)

    assert requests_ok(samples) == requests_ok(before) + 1
    latency = [
        value for labels, value in samples["tnmt_request_seconds_count"] if labels["endpoint"] == "/v1/translate"
    ]
    assert latency and latency[0] >= 1
    assert any(labels["le"] == "+Inf" for labels, _ in samples["tnmt_request_seconds_bucket"])
    assert samples["tnmt_batch_sentences_count"][0][1] >= 1
    assert samples["tnmt_batch_sentences_sum"][0][1] >= 2
    assert samples["tnmt_queue_sentences"] == [({"model": "en-it"}, 0.0)]  # idle now


def test_64_concurrent_requests_are_batched_and_translated_as_alone(server, offline):
    sentences = [num2words(n) for n in random.Random(1).sample(range(1, 10_000), 64)]
    batched_before = batches_over_one_sentence(server)

    async def translate_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT) as client:
            calls = [client.post("/v1/translate", json={"text": text}) for text in sentences]
            return await asyncio.gather(*calls)

    responses = asyncio.run(translate_all())
    assert [r.status_code for r in responses] == [200] * 64
    assert [r.json()["translations"][0]["text"] for r in responses] == [offline.translate([s])[0] for s in sentences]
    assert batches_over_one_sentence(server) > batched_before  # some batch held sentences of several requests


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"text": 3}, 422),
        ({"text": ["one", 2]}, 422),
        ({"text": "one", "beam_size": "wide"}, 422),
        ({"text": "one", "n_best": 0}, 422),
        ({"text": "one", "beam": 2}, 422),  # unknown field
        ({"text": ["one"] * 5}, 413),  # max_texts 4
        ({"text": "x" * 51}, 413),  # max_chars 50
        ({"text": "one", "beam_size": 5}, 422),  # max_beam_size 4
        ({"text": "one", "beam_size": 2, "n_best": 3}, 422),  # n_best over the beam
        ({"text": "one", "beam_size": 4, "n_best": 4}, 422),  # max_n_best 3
        ({"text": ["one"], "return_attention": True}, 422),
        ({"text": "one", "target": "de"}, 400),
        ({"text": "one", "source": "it", "target": "en"}, 400),
    ],
)
def test_native_errors(server, body, status):
    assert_error(server.post("/v1/translate", body), status)


def test_malformed_json_is_an_error(server):
    headers = {"content-type": "application/json"}
    assert_error(httpx.post(server.url + "/v1/translate", content='{"text": ', headers=headers), 422)
    assert_error(httpx.post(server.url + "/translate", content='{"q": ', headers=headers), LIBRE_ERRORS)


@pytest.mark.parametrize("path", ["/v1/translate", "/translate"])
def test_a_body_over_max_body_bytes_is_refused(server, path):
    response = server.post(path, {"text": "one", "q": "one", "source": "en", "target": "it", "pad": "x" * MAX_BODY})
    assert_error(response, 413)


def test_a_chunked_body_over_max_body_bytes_is_refused(server):
    """A body sent without Content-Length (chunked) must not escape the size check (413 once it is over the limit,
    or 411 Length Required for any chunked body); today it is read whole and answered 200."""
    body = b'{"q": "one", "source": "en", "target": "it", "pad": "' + b"x" * (4 * MAX_BODY) + b'"}'
    chunks = iter([body[i : i + 1000] for i in range(0, len(body), 1000)])
    response = httpx.post(server.url + "/translate", content=chunks, headers={"content-type": "application/json"})
    assert response.request.headers["transfer-encoding"] == "chunked"
    assert_error(response, 413 if response.status_code != 411 else 411)


def test_a_text_that_is_not_valid_unicode_is_a_client_error(server):
    """A lone surrogate (valid JSON, not encodable as UTF-8) makes sentencepiece raise TypeError: 500."""
    headers = {"content-type": "application/json"}
    response = httpx.post(server.url + "/v1/translate", content='{"text": "one \\ud800"}', headers=headers)
    assert_error(response, 422)
    body = '{"q": "one \\ud800", "source": "en", "target": "it"}'
    assert_error(httpx.post(server.url + "/translate", content=body, headers=headers), LIBRE_ERRORS)


def test_unknown_paths_and_methods_answer_json_errors(server):
    """The module promises `{"error": ...}` for errors; Starlette's own 404/405 answer `{"detail": ...}`."""
    assert_error(server.get("/v2/translate"), 404)
    assert_error(server.get("/v1/translate"), 405)


def test_unknown_paths_do_not_grow_the_metrics(server):
    """The endpoint label is the raw path: every scanned URL would become a time series of its own."""
    server.get("/no-such-page-4b1d")
    assert "/no-such-page-4b1d" not in server.get("/metrics").text


# --- the LibreTranslate API ---


def libre(answer: dict, result) -> dict:
    """A LibreTranslate answer with its `confidence` checked against `result`'s evidence, then left out."""
    assert answer.pop("confidence") == pytest.approx(result.evidence.confidence, abs=1e-6)
    return answer


def test_libretranslate_json_and_form_bodies(server, offline):
    [result] = offline.translations(["two hundred"], evidence=True)
    expected = {"translatedText": result.text, "warnings": result.evidence.warnings}
    fields = {"q": "two hundred", "source": "en", "target": "it"}
    assert libre(server.post("/translate", fields).json(), result) == expected
    assert libre(httpx.post(server.url + "/translate", data=fields, timeout=TIMEOUT).json(), result) == expected
    multipart = {name: (None, value) for name, value in fields.items()}
    assert libre(httpx.post(server.url + "/translate", files=multipart, timeout=TIMEOUT).json(), result) == expected


def test_libretranslate_list_auto_and_alternatives(server, offline):
    texts = ["eighty", "Hello", "42"]  # English; Italian at 71% (short: not refused); no letters
    response = server.post("/translate", {"q": texts, "source": "auto", "target": "it"})
    english = Detector(["en"])  # the server's: its one source language, compared with the common others
    detected = [{"confidence": dict(english.detect(text))["en"], "language": "en"} for text in texts]
    results = offline.translations(texts, evidence=True)
    body = response.json()
    assert body.pop("confidence") == pytest.approx([r.evidence.confidence for r in results], abs=1e-6)
    assert body == {
        "translatedText": [r.text for r in results],
        "warnings": [r.evidence.warnings for r in results],
        "detectedLanguage": detected,
    }
    confidences = [language["confidence"] for language in detected]
    assert confidences[0] > 99 and confidences[1] < 10 and confidences[2] == 0.0
    assert english.detect("Hello")[0] == ("it", pytest.approx(71, abs=1))

    response = server.post("/translate", {"q": "eighty", "source": "en", "target": "it", "alternatives": 2})
    result = offline.translations(["eighty"], n_best=2, evidence=True)[0]  # alternatives + 1 hypotheses: the beam (2)
    assert libre(response.json(), result) == {
        "translatedText": result.text,
        "alternatives": [result.alternatives[0].text],
        "warnings": result.evidence.warnings,
    }


def test_libretranslate_html_keeps_the_markup(server, offline):
    fragment = '<p class="x">two <b>ten</b> &amp; one<!--c--></p>'  # max_chars 50
    response = server.post("/translate", {"q": fragment, "source": "en", "target": "it", "format": "html"})
    document = parse(fragment)
    assert document.texts == ["two ten & one"]  # one sentence, translated whole: not "two", "ten", "& one"
    [result] = offline.translations(document.texts, evidence=True)
    expected = document.render([(result.text, result.evidence.alignment)])
    assert libre(response.json(), result) == {"translatedText": expected, "warnings": result.evidence.warnings}
    assert expected.startswith('<p class="x">') and expected.endswith("<!--c--></p>")
    assert expected.count("<b>") == expected.count("</b>") == 1


@pytest.mark.parametrize(
    "body",
    [
        {"source": "en", "target": "it"},  # no q
        {"q": 3, "source": "en", "target": "it"},
        {"q": ["one", 3], "source": "en", "target": "it"},
        {"q": "one", "target": "it"},
        {"q": ["one"] * 5, "source": "en", "target": "it"},  # max_texts 4
        {"q": "x" * 51, "source": "en", "target": "it"},  # max_chars 50
        {"q": "one", "source": "fr", "target": "it"},
        {"q": "one", "source": "en", "target": "it", "format": "markdown"},
        {"q": "one", "source": "en", "target": "it", "alternatives": "many"},
    ],
)
def test_libretranslate_errors_are_400(server, body):
    assert_error(server.post("/translate", body), LIBRE_ERRORS)


ALTERNATIVES_ERROR = {"error": "Invalid request: alternatives must be an integer from 0 to 2 (max_n_best - 1)"}


@pytest.mark.parametrize("value", [-3, -1, 3, 10**9, 2.5, 1.0, True, None, "x", "2.5", [1], "1e400"])
def test_libretranslate_alternatives_outside_0_to_max_n_best_minus_1_are_400(server, value):
    """max_n_best 3: 0 to 2. LibreTranslate reads -3 as 0 and 2.5 as 2; here the client hears of its bug."""
    response = server.post("/translate", {"q": "one", "source": "en", "target": "it", "alternatives": value})
    assert (response.status_code, response.json()) == (LIBRE_ERRORS, ALTERNATIVES_ERROR)


def test_libretranslate_alternatives_in_forms_and_out_of_range_json(server, offline):
    """Forms send strings; JSON allows 1e400, parsed as inf (int(inf) would raise OverflowError: a 500)."""
    fields = {"q": "eighty", "source": "en", "target": "it"}
    for value in ("-3", "3", "x"):
        response = httpx.post(server.url + "/translate", data={**fields, "alternatives": value}, timeout=TIMEOUT)
        assert (response.status_code, response.json()) == (LIBRE_ERRORS, ALTERNATIVES_ERROR)
    answer = httpx.post(server.url + "/translate", data={**fields, "alternatives": "2"}, timeout=TIMEOUT).json()
    result = offline.translations(["eighty"], n_best=2, evidence=True)[0]
    assert answer["alternatives"] == [result.alternatives[0].text]
    body = '{"q": "one", "source": "en", "target": "it", "alternatives": 1e400}'
    response = httpx.post(server.url + "/translate", content=body, headers={"content-type": "application/json"})
    assert (response.status_code, response.json()) == (LIBRE_ERRORS, ALTERNATIVES_ERROR)


def test_the_pypi_libretranslate_client_works_unchanged(server, offline):
    client = LibreTranslateAPI(server.url)
    assert client.translate("two hundred", "en", "it") == offline.translate(["two hundred"])[0]
    assert client.languages() == LANGUAGES
    assert client.detect("two hundred and five")[0] == {"confidence": 100.0, "language": "en"}


def test_detect_json_and_form_bodies(server):
    english, german = "Two dogs play in the snow.", "Zwei Hunde spielen im Schnee."
    found = server.post("/detect", {"q": english}).json()
    served = Detector(["en"])  # the server's
    assert found == [{"confidence": c, "language": code} for code, c in served.detect(english) if c or code == "en"]
    assert found[0] == {"confidence": pytest.approx(100, abs=0.5), "language": "en"}
    assert httpx.post(server.url + "/detect", data={"q": english}, timeout=TIMEOUT).json() == found
    other = httpx.post(server.url + "/detect", files={"q": (None, german)}, timeout=TIMEOUT).json()
    assert other[0] == {"confidence": pytest.approx(100, abs=0.5), "language": "de"}  # what it is, though not served
    assert {"confidence": 0.0, "language": "en"} in other  # every served language is listed
    assert server.post("/detect", {"q": "1, 2, 3"}).json() == [{"confidence": 0.0, "language": "en"}]


def test_detect_gives_a_clear_short_sentence_a_high_confidence(server):
    """Lingua's own value is 36% over the 13 languages compared (37% over 12 before): detect.py calibrates it."""
    found = server.post("/detect", {"q": "A dog runs on the beach."}).json()
    assert found[0] == {"confidence": pytest.approx(96, abs=1), "language": "en"}


UNSUPPORTED = (
    r"(\w\w) is not supported as a source language: text (\d) was detected as \1 \((\d+(?:\.\d)?)% confident\); "
    r"served: en-it; if the text is not \1, name its source language instead of auto"
)


def test_auto_refuses_french_and_german_on_an_english_only_server(server):
    """Translated through the English model they would be garbage that looks like an answer."""
    texts = {"fr": "Deux chiens jouent dans la neige.", "de": "Zwei Hunde spielen im Schnee."}
    for language, text in texts.items():
        response = server.post("/translate", {"q": text, "source": "auto", "target": "it"})
        assert response.status_code == LIBRE_ERRORS and list(response.json()) == ["error"], response.text
        match = re.fullmatch(UNSUPPORTED, response.json()["error"])
        assert match and match.group(1, 2) == (language, "0") and float(match.group(3)) >= 99, response.json()
    response = server.post("/translate", {"q": texts["fr"], "source": "en", "target": "it"})
    assert response.status_code == 200  # a source named by the client is trusted


def test_auto_refuses_a_list_naming_its_first_text_not_served_and_translates_english(server, offline):
    texts = ["eighty", "Zwei Hunde spielen im Schnee.", "Deux chiens jouent dans la neige."]
    response = server.post("/translate", {"q": texts, "source": "auto", "target": "it"})
    assert response.status_code == LIBRE_ERRORS
    match = re.fullmatch(UNSUPPORTED, response.json()["error"])
    assert match and match.group(1, 2) == ("de", "1"), response.json()
    english = ["eighty", "A dog runs on the beach."]
    body = server.post("/translate", {"q": english, "source": "auto", "target": "it"}).json()
    assert body["translatedText"] == offline.translate(english)
    assert [d["language"] for d in body["detectedLanguage"]] == ["en", "en"]
    assert [d["confidence"] for d in body["detectedLanguage"]] == [
        dict(Detector(["en"]).detect(t))["en"] for t in english
    ]


@pytest.mark.parametrize(
    "body",
    [{}, {"q": ""}, {"q": 3}, {"q": ["one"]}, {"q": "x" * 51}],  # max_chars 50
)
def test_detect_errors_are_400(server, body):
    assert_error(server.post("/detect", body), LIBRE_ERRORS)


def test_frontend_settings_give_the_limit_and_preselect_auto(server):
    assert server.get("/frontend/settings").json() == {
        "charLimit": LIMITS["max_chars"],
        "frontendTimeout": 500,
        "apiKeys": False,
        "keyRequired": False,
        "suggestions": False,
        "filesTranslation": True,  # /translate_file (tnmt/documents)
        "supportedFilesFormat": [
            *(
                ".docx",
                ".epub",
                ".htm",
                ".html",
                ".markdown",
                ".md",
                ".odp",
                ".odt",
                ".pdf",
                ".po",
                ".pptx",
                ".srt",
                ".txt",
                ".vtt",
                ".xlf",
            ),
            ".xliff",
        ],
        "language": {"source": {"code": "auto", "name": "Auto Detect"}, "target": {"code": "it", "name": "Italian"}},
    }


@pytest.fixture(scope="module")
def three_pairs(tiny_checkpoint, tmp_path_factory) -> Iterator[tuple[TestClient, dict[str, Translator]]]:
    """The real app in this process serving en-it (the tiny checkpoint), de-it and en-fr (other random weights),
    and an offline `Translator` per pair."""
    from tnmt.checkpoint import load_checkpoint, save_checkpoint
    from tnmt.config import ServeConfig
    from tnmt.model import Transformer
    from tnmt.serve.app import create_app
    from tnmt.serve.models import load_models

    tiny = load_checkpoint(tiny_checkpoint)
    paths = {"en-it": tiny_checkpoint}
    for seed, pair in ((1, "de-it"), (2, "en-fr")):
        torch.manual_seed(seed)
        model, languages = Transformer(tiny.model.config), tuple(pair.split("-"))
        path = tmp_path_factory.mktemp(pair) / "ckpt"
        paths[pair] = save_checkpoint(path, model, tiny.tokenizer, decode=tiny.decode, directions=[languages])
    config = ServeConfig(threads=1, max_wait_ms=1)
    with TestClient(create_app(load_models(list(paths.values()), config), config)) as client:
        yield client, {pair: Translator.from_checkpoint(path) for pair, path in paths.items()}


def test_auto_routes_each_text_to_the_model_from_its_language(three_pairs):
    client, offline = three_pairs
    texts = ["Two dogs play in the snow.", "Zwei Hunde spielen im Schnee.", "42"]
    assert offline["en-it"].translate(texts[:2]) != offline["de-it"].translate(texts[:2])  # the route shows
    response = client.post("/translate", json={"q": texts, "source": "auto", "target": "it"})
    assert response.status_code == 200, response.text
    body = response.json()
    expected = [offline["en-it"].translate(texts[:1])[0], *offline["de-it"].translate(texts[1:])]
    assert body["translatedText"] == expected  # "42", no letters: the detector's first (by code) with a model to it
    served = Detector(["de", "en"])
    confidence = [served.detect(text)[0][1] for text in texts]
    assert body["detectedLanguage"] == [
        {"confidence": confidence[0], "language": "en"},
        {"confidence": confidence[1], "language": "de"},
        {"confidence": 0.0, "language": "de"},
    ]
    assert confidence[0] > 50 and confidence[1] > 50
    form = client.post("/translate", data={"q": texts[1], "source": "auto", "target": "it"}).json()
    assert form["translatedText"] == expected[1] and form["detectedLanguage"] == body["detectedLanguage"][1]


def test_auto_detects_an_html_fragment_by_its_text_not_its_tags(three_pairs):
    client, offline = three_pairs
    fragment = '<p title="Zwei Hunde spielen im Schnee und die Kinder lachen">Two dogs play in the <b>snow</b>.</p>'
    response = client.post("/translate", json={"q": fragment, "source": "auto", "target": "it", "format": "html"})
    assert response.status_code == 200, response.text
    assert response.json()["detectedLanguage"]["language"] == "en"


def test_auto_refuses_a_detected_language_without_a_model_to_the_target(three_pairs):
    client, _ = three_pairs
    texts = ["Two dogs.", "Zwei Hunde spielen im Schnee."]
    response = client.post("/translate", json={"q": texts, "source": "auto", "target": "fr"})
    assert_error(response, LIBRE_ERRORS)
    assert re.fullmatch(
        r"fr is not available as a target language from de: text 1 was detected as de \(\d+(\.\d)?% confident\); "
        r"served: en-it, de-it, en-fr; if the text is not de, name its source language instead of auto",
        response.json()["error"],
    ), response.json()
    assert_error(client.post("/translate", json={"q": "Two dogs.", "source": "auto", "target": "cs"}), LIBRE_ERRORS)


def test_detect_ranks_the_best_language_first_and_lists_every_served_source(three_pairs):
    client, _ = three_pairs
    found = client.post("/detect", json={"q": "Zwei Hunde spielen im Schnee."}).json()
    assert found[0] == {"confidence": pytest.approx(100, abs=0.5), "language": "de"}
    assert {"confidence": 0.0, "language": "en"} in found
    found = client.post("/detect", json={"q": "Un hombre con un sombrero naranja mirando algo."}).json()
    assert found[0]["language"] == "es" and {"de", "en"} <= {language["language"] for language in found}


def test_sources_lingua_does_not_know_are_never_detected(tiny_checkpoint, caplog):
    from tnmt.config import ServeConfig
    from tnmt.serve.app import create_app
    from tnmt.serve.models import load_models

    config = ServeConfig()
    [model] = load_models([tiny_checkpoint], config)
    with caplog.at_level("WARNING", logger="tnmt"):
        app = create_app([replace(model, source="xx")], config)
    assert "language detection does not know ['xx']" in caplog.text
    response = TestClient(app).post("/detect", json={"q": "Two dogs play in the snow."})
    assert response.json() == {"error": "language detection knows none of the served source languages (xx)"}


# --- load, deadlines, shutdown ---


def test_a_full_queue_answers_503_with_retry_after(servers, offline):
    busy = servers["busy"].wait_healthy()

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=busy.url, timeout=TIMEOUT) as client:
            return await asyncio.gather(*[client.post("/v1/translate", json={"text": "one"}) for _ in range(8)])

    responses = asyncio.run(burst())
    assert {r.status_code for r in responses} <= {200, 503}
    refused = [r for r in responses if r.status_code == 503]
    assert refused, "a queue of one sentence, held for 0.5 s, took 8 concurrent requests"
    for response in refused:
        assert_error(response, 503)
        assert response.headers["retry-after"] == "1"
    assert all(
        r.json()["translations"][0]["text"] == offline.translate(["one"])[0] for r in responses if r.status_code == 200
    )


def test_a_request_larger_than_the_whole_queue_is_not_told_to_retry(servers):
    """Two texts can never fit a queue of one: 503 + Retry-After invites a retry that can never succeed."""
    response = servers["busy"].wait_healthy().post("/v1/translate", {"text": ["one", "two"]})
    assert response.status_code != 503 and response.status_code < 500, response.text


def test_past_the_deadline_the_answer_is_504_and_the_server_lives_on(servers):
    late = servers["late"].wait_healthy()
    assert_error(late.post("/v1/translate", {"text": "one"}), 504)
    assert_error(late.post("/translate", {"q": "one", "source": "en", "target": "it"}), 504)
    assert_error(late.get("/ready"), 503)
    assert late.get("/health").status_code == 200


def test_sigterm_finishes_the_request_in_flight_then_exits_0(servers, offline):
    server = servers["sigterm"].wait_healthy()
    answers: list[httpx.Response] = []
    request = threading.Thread(target=lambda: answers.append(server.post("/v1/translate", {"text": "one"})))
    request.start()
    deadline = time.monotonic() + TIMEOUT
    while metric_samples(server)["tnmt_queue_sentences"][0][1] != 1:  # the sentence waits for its batch (1.5 s)
        assert time.monotonic() < deadline and request.is_alive(), "the request never reached the queue"
        time.sleep(0.02)
    server.process.send_signal(signal.SIGTERM)
    request.join(TIMEOUT)

    assert [r.status_code for r in answers] == [200]
    [result] = offline.translations(["one"], evidence=True)
    assert answers[0].json()["translations"] == [{"text": result.text, "warnings": result.evidence.warnings}]
    assert server.process.wait(TIMEOUT) == 0, server.log.read_text()
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url + "/health", timeout=5)


# --- generated requests ---


@pytest.mark.parametrize("mode", [schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE])
def test_generated_requests_never_get_a_server_error(server, mode):
    """schemathesis generates requests from /openapi.json (valid ones, then invalid ones) for every operation.

    (Its pytest plugin, `schemathesis.pytest.from_fixture(...).parametrize()`, fails under pytest 9, so the
    Hypothesis test is built here from each operation's strategy.)"""
    schema = schemathesis.openapi.from_url(server.url + "/openapi.json")
    failures = []
    for operation in (result.ok() for result in schema.get_all_operations()):

        @given(case=operation.as_strategy(generation_mode=mode))
        @settings(max_examples=40, deadline=None, database=None, derandomize=True, suppress_health_check=[*HealthCheck])
        def no_server_error(case) -> None:
            case.call_and_validate(checks=[not_a_server_error], timeout=TIMEOUT)

        try:
            no_server_error()
        except Unsatisfiable:  # no invalid request exists for an operation without parameters or body
            assert mode == schemathesis.GenerationMode.NEGATIVE, operation.label
        except (Exception, BaseExceptionGroup) as error:  # every operation is tried; failures are reported together
            failures.append(f"{operation.label}: {error}")
    assert not failures, "\n\n".join(failures)


@pytest.fixture(scope="module")
def multi_server(multi_checkpoint, tmp_path_factory) -> Iterator[Server]:
    server = Server(multi_checkpoint, tmp_path_factory.mktemp("serve_multi"), "--max-wait-ms=30").wait_healthy()
    yield server
    server.close()


def test_a_multilingual_checkpoint_serves_each_trained_direction_from_one_queue(multi_server, multi_checkpoint):
    models = multi_server.get("/v1/models").json()["models"]
    assert [(m["id"], m["trained"]) for m in models] == [(p, True) for p in ("en-de", "de-en", "en-it", "it-en")]
    languages = {entry["code"]: entry["targets"] for entry in multi_server.get("/languages").json()}
    assert languages == {"en": ["de", "it"], "de": ["en"], "it": ["en"]}
    queues = {labels["model"] for labels, _ in metric_samples(multi_server)["tnmt_queue_sentences"]}
    assert queues == {"en,de,it"}  # one batcher for every direction

    base = Translator.from_checkpoint(multi_checkpoint)
    rng = random.Random(2)
    asks = [
        (pair, num2words(n, lang=pair[0]))
        for n in rng.sample(range(1, 10_000), 12)
        for pair in (("en", "de"), ("de", "en"), ("en", "it"), ("it", "en"))
    ]
    batched_before = batches_over_one_sentence(multi_server)

    async def translate_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=multi_server.url, timeout=TIMEOUT) as client:
            calls = [
                client.post("/v1/translate", json={"text": text, "source": s, "target": t}) for (s, t), text in asks
            ]
            return await asyncio.gather(*calls)

    responses = asyncio.run(translate_all())
    assert [r.status_code for r in responses] == [200] * len(asks)
    offline = [base.for_pair(*pair).translate([text])[0] for pair, text in asks]
    assert [r.json()["translations"][0]["text"] for r in responses] == offline
    assert batches_over_one_sentence(multi_server) > batched_before  # batches held several requests' sentences


def test_a_pair_a_multilingual_model_was_not_trained_on_is_refused_in_one_line(multi_server):
    response = multi_server.post("/v1/translate", {"text": "zwei", "source": "de", "target": "it"})
    assert_error(response, 400)
    assert response.json()["error"] == (
        "a multilingual model was not trained on de -> it; served: en-de, de-en, en-it, it-en"
        " (tnmt serve --zero-shot serves its other pairs)"
    )
    assert_error(multi_server.post("/translate", {"q": "zwei", "source": "de", "target": "it"}), 400)


def test_source_auto_routes_each_text_to_the_direction_from_its_language(multi_server, multi_checkpoint):
    german = "Ein Mann fährt mit seinem Fahrrad durch die Stadt."
    answer = multi_server.post("/translate", {"q": german, "source": "auto", "target": "en"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["detectedLanguage"]["language"] == "de"
    offline = Translator.from_checkpoint(multi_checkpoint).for_pair("de", "en").translate([german])[0]
    assert answer.json()["translatedText"] == offline
    english = multi_server.post(
        "/translate", {"q": "A man rides his bicycle through the city.", "source": "auto", "target": "it"}
    )
    assert english.status_code == 200 and english.json()["detectedLanguage"]["language"] == "en"


def test_auto_routes_a_document_to_the_model_from_its_language(three_pairs):
    """LibreTranslate's page sends `source: "auto"` with a file: two models translate to Italian, and the German
    document goes to the German one (a 400 "several models fit" before)."""
    client, offline = three_pairs
    german = "Zwei Hunde spielen im Schnee. Die Kinder lachen."
    response = client.post(
        "/translate_file", files={"file": ("d.txt", german.encode())}, data={"source": "auto", "target": "it"}
    )
    assert response.status_code == 200, response.text
    assert client.get(response.json()["translatedFileUrl"]).text == offline["de-it"].translate([german])[0]
    french = "Deux chiens jouent dans la neige et les enfants rient aux éclats."
    response = client.post(
        "/translate_file", files={"file": ("d.txt", french.encode())}, data={"source": "auto", "target": "it"}
    )
    assert_error(response, LIBRE_ERRORS)
    assert response.json()["error"].startswith("fr is not supported as a source language: text 0 was detected as fr")
