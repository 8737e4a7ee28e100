"""The page of `tnmt serve` in a real browser (Chromium through Playwright): translate as you type, the
heat map, a new request when the beam changes, the over-limit state in words; a screenshot for people."""

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("playwright")
from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

CHROMIUM = Path("/usr/bin/chromium")
# Headless, sandbox-less (we may run as root) and quiet: no calls home on a closed network.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"needs Chromium at {CHROMIUM}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tiny_checkpoint) -> Iterator[str]:
    """`tnmt serve` on the tiny checkpoint, as a subprocess; yields its base URL once /health answers."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tnmt", "serve", "--checkpoint", str(tiny_checkpoint), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                pytest.fail(f"tnmt serve exited with {proc.returncode}: {proc.stderr.read().decode()[-2000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail("tnmt serve did not answer /health within 30 s")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture
def page(tmp_path) -> Iterator[Page]:
    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            tmp_path / "profile",  # a fresh profile each time
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1100, "height": 900},
        )
        try:
            yield context.new_page()
        finally:
            context.close()


def painted_pixels(page: Page) -> int:
    """How many pixels of the heat-map canvas are not transparent."""
    return page.evaluate(
        """() => {
            const c = document.querySelector('#heatmap');
            const data = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
            let n = 0;
            for (let i = 3; i < data.length; i += 4) if (data[i] > 0) n++;
            return n;
        }"""
    )


def test_page_translates_as_you_type_and_draws_attention(server, page, repo_root):
    limits = httpx.get(f"{server}/v1/models").json()["limits"]
    requests = []
    page.on("request", lambda r: requests.append(json.loads(r.post_data)) if r.url.endswith("/v1/translate") else None)
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(server)
    expect(page.locator("#pair option")).not_to_have_count(0)
    expect(page.locator("#pair")).to_be_enabled()

    sentence = "one hundred and twelve"
    page.locator("#source").press_sequentially(sentence, delay=20)
    expect(page.locator("#status")).to_contain_text("Translated")
    assert 1 <= len(requests) < len(sentence) // 2, "typing is debounced, not a request per key"
    assert requests[-1]["text"] == sentence and requests[-1]["return_attention"] is True
    expect(page.locator("#error")).to_be_empty()
    # The random model's output may be all control characters: compare the exact text, not what shows.
    expected = httpx.post(f"{server}/v1/translate", json=requests[-1]).json()["translations"][0]["text"]
    assert page.locator("#output").text_content() == expected != ""
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    page.click("#copy")
    expect(page.locator("#status")).to_contain_text("copied")
    assert page.evaluate("navigator.clipboard.readText()") == expected

    # The heat map: selectors filled (a layer; the mean and each head) and a painted canvas.
    expect(page.locator("#layer option")).not_to_have_count(0)
    assert page.locator("#head option").count() >= 2
    expect(page.locator("#heatmap")).to_have_attribute("aria-label", re.compile("target by"))
    assert painted_pixels(page) > 0
    page.select_option("#head", index=1)  # one head rather than their mean
    assert painted_pixels(page) > 0

    # A new beam size means a new request with it.
    n = len(requests)
    page.select_option("#beam", "1")
    expect(page.locator("#status")).to_contain_text("beam 1")
    assert len(requests) > n and requests[-1]["beam_size"] == 1
    assert page.locator("#alternatives option").count() == 2  # 0..min(beam, max_n_best)

    # Alternatives need a beam of at least their number.
    page.select_option("#beam", "2")
    page.select_option("#alternatives", "2")
    expect(page.locator("#alternatives-list li")).to_have_count(2)
    assert requests[-1]["n_best"] == 2
    expect(page.locator("#alternatives-list li").first).to_contain_text("score")
    (repo_root / "outputs").mkdir(exist_ok=True)
    page.screenshot(path=str(repo_root / "outputs" / "serve_page.png"), full_page=True)

    # Over the limit: said in words, by the counter and the error, and not sent.
    n = len(requests)
    page.locator("#source").fill("x" * (limits["max_chars"] + 5))
    expect(page.locator("#counter")).to_contain_text("5 over the limit")
    expect(page.locator("#counter")).to_have_class(re.compile(r"\bover\b"))
    expect(page.locator("#error")).to_contain_text(f"limit is {limits['max_chars']}")
    assert len(requests) == n

    # The limit is per line, as the server's is per text: three lines that only together exceed it are sent.
    line = ("nine " * limits["max_chars"])[: limits["max_chars"] - 1].strip()
    page.locator("#source").fill("\n".join([line, "two", line]))
    expect(page.locator("#counter")).to_contain_text(f"longest line (1): {len(line)} / {limits['max_chars']}")
    expect(page.locator("#counter")).not_to_have_class(re.compile(r"\bover\b"))
    expect(page.locator("#status")).to_contain_text("Translated by")  # the server answered 200
    assert requests[-1]["text"] == [line, "two", line]
    expect(page.locator("#error")).to_be_empty()
    answer = httpx.post(f"{server}/v1/translate", json=requests[-1]).json()["translations"]
    assert page.locator("#output").evaluate("e => e.textContent") == "\n".join(t["text"] for t in answer)

    # One line over: named by its number, and nothing is sent.
    n = len(requests)
    page.locator("#source").fill("\n".join(["two", "x" * (limits["max_chars"] + 3)]))
    expect(page.locator("#counter")).to_contain_text("longest line (2)")
    expect(page.locator("#error")).to_contain_text(f"Line 2 has {limits['max_chars'] + 3} characters")
    assert len(requests) == n
    assert not errors, f"JavaScript errors: {errors}"


def test_api_docs_render_from_the_server_alone(server, page):
    """FastAPI's own /docs page loads its scripts from a CDN, so offline it stays blank."""
    elsewhere = []
    page.on("request", lambda r: None if r.url.startswith(server) else elsewhere.append(r.url))
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(server + "/docs")
    expect(page.locator(".opblock-summary-path").first).to_be_visible()
    expect(page.locator("body")).to_contain_text("/v1/translate")
    assert not elsewhere, f"requests that left the server: {elsewhere}"
    assert not errors, f"JavaScript errors: {errors}"
