"""`tnmt serve` under faults: clients that hang up, clients that send their body slowly, SIGTERM under load.

Each on loopback against a real server process, bounded by seconds. The server's own view comes from
/metrics: queue depth, decoded batches, requests by status, asyncio tasks.
"""

import asyncio
import http.client
import json
import signal
import socket
import time

import httpx
import pytest
from test_serve import TIMEOUT, Server, metric_samples

from tnmt.translate.translator import Translator

HOLD_MS = 1500  # a batch waits this long for company: a request stays queued long enough to act on it


@pytest.fixture(scope="module")
def servers(tiny_checkpoint, tmp_path_factory) -> dict[str, Server]:
    log_dir = tmp_path_factory.mktemp("serve_faults")
    flags = {
        "held": [f"--max-wait-ms={HOLD_MS}", "--body-timeout-s=1"],
        "sigterm": [f"--max-wait-ms={HOLD_MS}", "--max-batch-tokens=100000"],
        "cancelled": [f"--max-wait-ms={2 * HOLD_MS}", "--timeout-s=1"],  # a held request passes its deadline
    }
    started = {name: Server(tiny_checkpoint, log_dir, *options) for name, options in flags.items()}
    yield started
    for server in started.values():
        server.close()


@pytest.fixture(scope="module")
def offline(tiny_checkpoint) -> Translator:
    return Translator.from_checkpoint(tiny_checkpoint)


def sample(server: Server, name: str, **labels: str) -> float:
    values = [value for found, value in metric_samples(server).get(name, []) if labels.items() <= found.items()]
    return sum(values)


def raw_request(server: Server, body: bytes, *, length: int | None = None) -> socket.socket:
    """A connection that sent a POST /v1/translate with `body` (and a Content-Length of `length`)."""
    host, port = server.url.removeprefix("http://").split(":")
    connection = socket.create_connection((host, int(port)), timeout=TIMEOUT)
    head = f"POST /v1/translate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    connection.sendall(f"{head}Content-Length: {length or len(body)}\r\n\r\n".encode() + body)
    return connection


def response(connection: socket.socket) -> tuple[int, str]:
    """The status and body of the answer on `connection`, then closes it."""
    answer = http.client.HTTPResponse(connection)
    answer.begin()
    body = answer.read().decode()
    connection.close()
    return answer.status, body


def wait_for(condition, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        time.sleep(0.02)


def test_a_client_that_hangs_up_has_its_sentences_dropped(servers, offline):
    server = servers["held"].wait_healthy()
    tasks_before = sample(server, "tnmt_tasks")
    batches_before = sample(server, "tnmt_batch_sentences_count")
    connections = [raw_request(server, json.dumps({"text": ["one", "two"]}).encode()) for _ in range(5)]
    wait_for(lambda: sample(server, "tnmt_queue_sentences") == 10, "10 sentences queued")
    for connection in connections:
        connection.close()
    wait_for(lambda: sample(server, "tnmt_requests_total", status="499") == 5, "5 requests counted as gone")
    wait_for(lambda: sample(server, "tnmt_queue_sentences") == 0, "the queue emptied")
    time.sleep(HOLD_MS / 1000)  # past the batch's wait: it would have been decoded by now
    assert sample(server, "tnmt_batch_sentences_count") == batches_before  # nothing decoded for nobody
    assert sample(server, "tnmt_tasks") == tasks_before  # every request task ended
    answer = server.post("/v1/translate", {"text": "one"})
    assert answer.status_code == 200
    assert [t["text"] for t in answer.json()["translations"]] == offline.translate(["one"])


def test_a_body_sent_too_slowly_gets_408_and_a_timely_one_is_served(servers, offline):
    server = servers["held"].wait_healthy()
    body = json.dumps({"text": "one"}).encode()
    slow = raw_request(server, body[:5], length=len(body))  # the rest never comes
    assert response(slow) == (408, '{"error":"the request body did not arrive within 1 s"}')

    timely = raw_request(server, body[:5], length=len(body))
    time.sleep(0.3)
    timely.sendall(body[5:])
    status, answer = response(timely)
    assert status == 200 and [t["text"] for t in json.loads(answer)["translations"]] == offline.translate(["one"])
    assert sample(server, "tnmt_requests_total", status="408") == 1


def test_sigterm_under_load_answers_every_accepted_request(servers, offline):
    """48 requests (96 sentences) are queued when SIGTERM comes: every one gets its full answer."""
    server = servers["sigterm"].wait_healthy()
    texts = [[f"{n}", f"{n} {n}"] for n in ("one", "two", "three", "four", "five", "six")] * 8

    async def load() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.url, timeout=TIMEOUT) as client:
            requests = [asyncio.ensure_future(client.post("/v1/translate", json={"text": t})) for t in texts]
            while sample(server, "tnmt_queue_sentences") < 2 * len(texts):
                await asyncio.sleep(0.02)
            server.process.send_signal(signal.SIGTERM)
            return await asyncio.gather(*requests)

    responses = asyncio.run(asyncio.wait_for(load(), TIMEOUT))
    assert [r.status_code for r in responses] == [200] * len(texts)
    expected = {tuple(t): offline.translate(t) for t in texts}
    assert [[x["text"] for x in r.json()["translations"]] for r in responses] == [expected[tuple(t)] for t in texts]
    assert server.process.wait(TIMEOUT) == 0, server.log.read_text()


def test_requests_cancelled_by_a_hang_up_or_their_deadline_log_nothing(servers):
    """The page cancels a request when its user types on; then the server is stopped. Each cancelled request's
    results (a gather of its sentences) ended holding a CancelledError nobody retrieved, which asyncio logged
    at exit as "_GatheringFuture exception was never retrieved" and a CancelledError: lines that say nothing
    to the person reading the log. The log holds tnmt's own lines only."""
    server = servers["cancelled"].wait_healthy()
    connections = [raw_request(server, json.dumps({"text": ["one", "two"]}).encode()) for _ in range(3)]
    wait_for(lambda: sample(server, "tnmt_queue_sentences") == 6, "6 sentences queued")
    for connection in connections:
        connection.close()
    wait_for(lambda: sample(server, "tnmt_requests_total", status="499") == 3, "3 requests counted as gone")
    assert server.post("/v1/translate", {"text": "three"}).status_code == 504  # held past its deadline of 1 s
    server.process.send_signal(signal.SIGTERM)
    assert server.process.wait(TIMEOUT) == 0
    log = server.log.read_text()
    assert [line for line in log.splitlines() if not line.startswith("tnmt serve: ")] == [], log
