"""`tnmt serve` end to end: the real command in subprocesses, driven over HTTP (httpx, the PyPI LibreTranslate
client, schemathesis), its answers compared with the offline `Translator` on the same tiny checkpoint."""

import asyncio
import html
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, replace
from pathlib import Path

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from libretranslatepy import LibreTranslateAPI
from num2words import num2words
from prometheus_client.parser import text_string_to_metric_families
from schemathesis.checks import not_a_server_error

from tnmt.decode.translator import Translator

SRC = str(Path(__file__).resolve().parent.parent / "src")
LIMITS = {"max_chars": 50, "max_texts": 4, "max_beam_size": 4, "max_n_best": 3}
MAX_BODY = 4000
LIBRE_ERRORS = 400  # LibreTranslate's status for every bad request on its own endpoints
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
    response = server.post("/v1/translate", {"text": "two hundred and five"})
    assert response.status_code == 200
    assert response.json() == {
        "model": "en-it",
        "translations": [{"text": offline.translate(["two hundred and five"])[0]}],
    }

    texts = ["one", "", "seven thousand, three hundred and forty-two"]
    response = server.post("/v1/translate", {"text": texts, "source": "en", "target": "it"})
    assert [t["text"] for t in response.json()["translations"]] == offline.translate(texts)

    response = server.post("/v1/translate", {"text": texts, "beam_size": 1, "max_len": 2})
    assert [t["text"] for t in response.json()["translations"]] == offline.translate(
        texts, replace(offline.decode, beam_size=1, max_len=2)
    )


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
    text = "seven thousand, three hundred and forty-two"
    response = server.post("/v1/explain", {"text": text, "beam_size": beam_size, "top_k": 3})
    assert response.status_code == 200, response.text
    answer = response.json()
    translated = server.post("/v1/translate", {"text": text, "beam_size": beam_size}).json()["translations"][0]
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
        ({"text": "one " * 60}, 413, "max_trace_chars=200"),
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
    assert body["limits"] == {**LIMITS, "max_trace_chars": 200, "max_trace_beam": 4, "max_top_k": 10}


def test_health_ready_and_languages(server):
    assert server.get("/health").json() == {"status": "ok"}
    response = server.get("/ready")
    assert response.status_code == 200
    assert response.json() == {"status": "ready", "models": ["en-it"]}
    assert server.get("/languages").json() == [{"code": "en", "name": "English", "targets": ["it"]}]


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


def test_libretranslate_json_and_form_bodies(server, offline):
    expected = {"translatedText": offline.translate(["two hundred"])[0]}
    fields = {"q": "two hundred", "source": "en", "target": "it"}
    assert server.post("/translate", fields).json() == expected
    assert httpx.post(server.url + "/translate", data=fields, timeout=TIMEOUT).json() == expected
    multipart = {name: (None, value) for name, value in fields.items()}
    assert httpx.post(server.url + "/translate", files=multipart, timeout=TIMEOUT).json() == expected


def test_libretranslate_list_auto_and_alternatives(server, offline):
    texts = ["one", "eighty"]
    response = server.post("/translate", {"q": texts, "source": "auto", "target": "it"})
    detected = {"confidence": 100.0, "language": "en"}
    assert response.json() == {"translatedText": offline.translate(texts), "detectedLanguage": [detected] * 2}

    response = server.post("/translate", {"q": "eighty", "source": "en", "target": "it", "alternatives": 3})
    nbest = offline.translations(["eighty"], n_best=2)[0].nbest  # alternatives are capped by the beam (2)
    assert response.json() == {"translatedText": nbest[0].text, "alternatives": [nbest[1].text]}


def test_libretranslate_html_keeps_the_markup(server, offline):
    fragment = '<p class="x">two <b>ten</b> &amp; one<!--c--></p>'  # max_chars 50
    response = server.post("/translate", {"q": fragment, "source": "en", "target": "it", "format": "html"})
    t = {text: html.escape(offline.translate([text])[0], quote=False) for text in ("two", "ten", "& one")}
    assert response.json() == {"translatedText": f'<p class="x">{t["two"]} <b>{t["ten"]}</b> {t["& one"]}<!--c--></p>'}


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


def test_libretranslate_alternatives_out_of_range_is_400(server):
    """JSON allows 1e400 (parsed as inf): int(inf) raises OverflowError, which is not caught: 500."""
    body = '{"q": "one", "source": "en", "target": "it", "alternatives": 1e400}'
    response = httpx.post(server.url + "/translate", content=body, headers={"content-type": "application/json"})
    assert_error(response, LIBRE_ERRORS)


def test_the_pypi_libretranslate_client_works_unchanged(server, offline):
    client = LibreTranslateAPI(server.url)
    assert client.translate("two hundred", "en", "it") == offline.translate(["two hundred"])[0]
    assert client.languages() == [{"code": "en", "name": "English", "targets": ["it"]}]


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
    assert answers[0].json()["translations"] == [{"text": offline.translate(["one"])[0]}]
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
