"""The page of `tnmt serve` in a real browser (Chromium through Playwright): translate as you type, the
heat map, a new request when the beam changes, the over-limit state in words, stepping through the search
with the keyboard, every translation's evidence (alignment, confidence, warnings), the glossary box and a
word's alternatives; screenshots for people."""

import contextlib
import json
import math
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
import torch

pytest.importorskip("playwright")
from playwright.sync_api import Error as PlaywrightError  # noqa: E402
from playwright.sync_api import Page, Response, expect, sync_playwright  # noqa: E402

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


@contextlib.contextmanager
def serve(checkpoint: Path, *flags: str) -> Iterator[str]:
    """`tnmt serve` on `checkpoint` with `flags`, as a subprocess; yields its base URL once /health answers."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "tnmt", "serve", "--checkpoint", str(checkpoint), "--port", str(port), *flags],
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


@pytest.fixture(scope="module")
def server(tiny_checkpoint) -> Iterator[str]:
    """The tiny random model: its translations are control characters, no words (str.split() finds none)."""
    with serve(tiny_checkpoint) as url:
        yield url


@pytest.fixture(scope="module")
def wordy_checkpoint(tiny_checkpoint, tmp_path_factory) -> Path:
    """The tiny model able to write only whole-word pieces ("▁tre"): the rows of every other target piece in
    the output projection are zeroed, so the argmax is a word piece and its translations have words (and
    alignments, word confidences and warnings) for the page to show."""
    from tnmt.checkpoint import load_checkpoint, save_checkpoint

    checkpoint = load_checkpoint(tiny_checkpoint)
    pieces = checkpoint.tokenizer.target_pieces(range(checkpoint.tokenizer.vocab_size))
    words = torch.tensor([re.fullmatch(r"▁[a-z]+", piece) is not None for piece in pieces])
    assert words.any()
    with torch.no_grad():
        checkpoint.model.output.weight[~words] = 0
    path = tmp_path_factory.mktemp("wordy") / "ckpt"
    return save_checkpoint(
        path, checkpoint.model, checkpoint.tokenizer, decode=checkpoint.decode, directions=checkpoint.directions
    )


@pytest.fixture(scope="module")
def wordy_server(wordy_checkpoint) -> Iterator[str]:
    with serve(wordy_checkpoint) as url:
        yield url


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
    assert requests[-1]["text"] == [line, "two"]  # each sentence not translated yet, once
    expect(page.locator("#error")).to_be_empty()
    whole = requests[-1] | {"text": [line, "two", line]}
    answer = httpx.post(f"{server}/v1/translate", json=whole).json()["translations"]
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


FATES = ("kept", "finished", "pruned")


def fates_in_the_tree(page: Page) -> dict[str, dict]:
    """Per fate: how many candidate nodes the tree shows, and how the first looks apart from its colour."""
    return page.evaluate(
        """(fates) => Object.fromEntries(fates.map((fate) => {
            const nodes = [...document.querySelectorAll(`#tree .tree-col:not([hidden]) .node.${fate}:not(.start)`)];
            const node = nodes[0];
            return [fate, node ? {
                n: nodes.length,
                border: getComputedStyle(node).borderTopStyle,
                strike: getComputedStyle(node.querySelector('.piece')).textDecorationLine,
                text: node.textContent,
                title: node.title,
            } : {n: 0}];
        }))""",
        list(FATES),
    )


def explain_answer(page: Page, change) -> dict:
    """Does `change` and returns the /v1/explain request it caused and the answer, once the page shows it."""
    with page.expect_response("**/v1/explain") as answer:
        change()
    response = answer.value
    data = response.json()
    if response.ok:
        page.wait_for_function(
            "t => document.querySelector('#explain-translation').textContent === t", arg=data["translation"]
        )
    return {"request": response.request.post_data_json, "status": response.status, "data": data}


def test_a_paragraph_translates_sentence_by_sentence_sending_only_what_changed(server, page):
    """A pasted paragraph and a list: each line comes back as its sentences' translations with the line's own
    characters between them, and an edit sends only the sentences not translated yet; the step view traces the
    sentence the caret is in."""
    requests = []
    page.on("request", lambda r: requests.append(json.loads(r.post_data)) if r.url.endswith("/v1/translate") else None)
    page.goto(server)
    expect(page.locator("#pair")).to_be_enabled()
    text = "two hundred. three thousand and five. seven\n- nine"
    page.locator("#source").fill(text)
    expect(page.locator("#status")).to_contain_text("Translated")
    assert requests[-1]["text"] == ["two hundred.", "three thousand and five.", "seven", "nine"]
    alone = httpx.post(f"{server}/v1/translate", json=requests[-1]).json()["translations"]
    output = page.locator("#output").evaluate("e => e.textContent")
    assert output == f"{alone[0]['text']} {alone[1]['text']} {alone[2]['text']}\n- {alone[3]['text']}"

    requests.clear()
    page.locator("#source").fill(text.replace("seven", "eight"))
    expect(page.locator("#status")).to_contain_text("1 sentence of 4 sent")
    assert [r["text"] for r in requests] == [["eight"]]  # the other sentences are known already
    whole = httpx.post(f"{server}/v1/translate", json={"text": "two hundred. three thousand and five. eight"})
    first_line = page.locator("#output").evaluate("e => e.textContent").split("\n")[0]
    assert first_line == whole.json()["translations"][0]["text"]  # as the server joins a text itself

    page.locator("#source").focus()
    page.evaluate("() => { const s = document.querySelector('#source'); s.setSelectionRange(15, 15); }")
    answer = explain_answer(page, lambda: page.locator("#explain-section summary").click())
    assert (answer["request"]["text"], answer["request"]["sentence"]) == (
        text.replace("seven", "eight").split("\n")[0],
        1,
    )


def test_step_through_the_search_with_the_keyboard(server, page, repo_root):
    """The view on the real /v1/explain: asked only while open, stepped by keys, the beam's fates told apart
    without colour, the trace's translation equal to the translation pane, the server's limits in words,
    readable at phone width."""
    explains = []
    page.on("request", lambda r: explains.append(r.post_data_json) if r.url.endswith("/v1/explain") else None)
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(server)
    expect(page.locator("#pair")).to_be_enabled()
    sentence = "one hundred and twelve"
    page.locator("#source").press_sequentially(sentence, delay=20)
    expect(page.locator("#status")).to_contain_text("Translated")
    assert explains == [], "a closed view asks the server nothing"

    beam = int(page.locator("#beam").input_value())
    answer = explain_answer(page, lambda: page.locator("#explain-section summary").press("Enter"))
    expected = {"text": sentence, "sentence": 0, "source": "en", "target": "it", "beam_size": beam, "top_k": 5}
    assert answer["request"] == expected
    trace = answer["data"]
    n = len(trace["steps"])
    counter = page.locator("#explain-step")
    expect(counter).to_contain_text(f"Step 1 of {n}:")
    expect(page.locator("#explain-step")).to_have_attribute("aria-live", "polite")

    page.keyboard.press("Tab")  # from the summary into the view
    expect(page.locator("#explain-view")).to_be_focused()
    for k in range(2, n + 1):
        page.keyboard.press("ArrowRight")
        expect(counter).to_contain_text(f"Step {k} of {n}:")
    page.keyboard.press("ArrowRight")  # nothing lies past the last step
    expect(counter).to_contain_text(f"Step {n} of {n}:")
    page.keyboard.press("ArrowLeft")
    expect(counter).to_contain_text(f"Step {n - 1} of {n}:")
    page.keyboard.press("End")
    expect(counter).to_contain_text(f"Step {n} of {n}:")

    # Every candidate of the trace is a node, its fate told by border, mark and words as well as colour.
    fates = fates_in_the_tree(page)
    expected = {fate: sum(c["fate"] == fate for step in trace["steps"] for c in step["candidates"]) for fate in FATES}
    assert {fate: fates[fate]["n"] for fate in FATES} == expected and all(expected.values())
    assert [fates[fate]["border"] for fate in FATES] == ["solid", "double", "dashed"]
    assert "line-through" in fates["pruned"]["strike"] and "line-through" not in fates["kept"]["strike"]
    assert "✓" in fates["finished"]["text"] and "✗" in fates["pruned"]["text"]
    for fate in FATES:
        assert fate in fates[fate]["text"] and fate in fates[fate]["title"], "the fate in words, for readers and hover"

    # The selected hypothesis: its next-subword bars and its attention row; ↓ in the tree selects the next one.
    last = trace["steps"][-1]
    expect(page.locator("#topk li")).to_have_count(len(last["hypotheses"][0]["top"]))
    expect(page.locator("#topk li").first).to_contain_text("%")
    expect(page.locator("#attention-row li")).to_have_count(len(trace["source_pieces"]))
    assert page.locator("#explain-head option").first.text_content().startswith("average of all")
    assert len(last["hypotheses"]) == 2  # the tiny model's beam of 2 is full at the last step
    page.locator("#tree .node.selected").focus()
    page.keyboard.press("ArrowDown")
    expect(page.locator("#explain-hypothesis")).to_contain_text("Hypothesis 2 of 2")
    expect(page.locator("#tree .node.selected")).to_be_focused()

    # The trace's translation is the translation pane's (the random model's may be control characters).
    shown = page.locator("#explain-translation").text_content()
    assert shown == page.locator("#output").text_content() == trace["translation"] != ""
    (repo_root / "outputs").mkdir(exist_ok=True)
    page.screenshot(path=str(repo_root / "outputs" / "explain_page.png"), full_page=True)

    # Space plays (one step at a time) and pauses.
    page.locator("#explain-view").focus()
    page.keyboard.press("Home")
    expect(counter).to_contain_text(f"Step 1 of {n}:")
    page.keyboard.press("Space")
    expect(page.locator("#explain-play")).to_contain_text("Pause")
    expect(counter).to_contain_text(f"Step 2 of {n}:")
    page.keyboard.press("Space")
    expect(page.locator("#explain-play")).to_contain_text("Play")

    # While open, a new source or beam is traced again, and still matches the translation pane.
    answer = explain_answer(page, lambda: page.locator("#source").fill("seven"))
    assert answer["request"]["text"] == "seven"
    answer = explain_answer(page, lambda: page.select_option("#beam", "1"))
    assert answer["request"]["beam_size"] == 1
    greedy = answer["data"]["steps"]
    assert all(len(step["hypotheses"]) == 1 for step in greedy)
    expect(counter).to_contain_text(f"Step 1 of {len(greedy)}:")
    same = "t => document.querySelector('#output').textContent === t"
    page.wait_for_function(same, arg=answer["data"]["translation"])  # the translation pane, at beam 1 too

    # The endpoint's limits, in the server's words.
    answer = explain_answer(page, lambda: page.select_option("#beam", "5"))
    assert answer["status"] == 422
    expect(page.locator("#explain-error")).to_contain_text(f"The server refused (422): {answer['data']['error']}")
    explain_answer(page, lambda: page.select_option("#beam", "2"))
    answer = explain_answer(page, lambda: page.locator("#source").fill("nine" * 60))  # one word: never cut
    assert answer["status"] == 413
    expect(page.locator("#explain-error")).to_contain_text(f"The server refused (413): {answer['data']['error']}")
    explain_answer(page, lambda: page.locator("#source").fill(sentence))
    expect(page.locator("#explain-error")).to_be_empty()

    # A closed view asks nothing.
    page.locator("#explain-section summary").click()
    asked = len(explains)
    page.locator("#source").fill("eight")
    page.wait_for_function("() => document.querySelector('#status').textContent.includes('Translated')")
    page.wait_for_timeout(500)
    assert len(explains) == asked

    # At phone width, only the tree's own box scrolls sideways.
    explain_answer(page, lambda: page.locator("#explain-section summary").click())
    page.locator("#explain-view").focus()
    page.keyboard.press("End")
    page.set_viewport_size({"width": 375, "height": 800})
    page.wait_for_timeout(200)  # the heat map redraws after resizing
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.screenshot(path=str(repo_root / "outputs" / "explain_page_phone.png"), full_page=True)
    assert not errors, f"JavaScript errors: {errors}"


def greedy_trace(pieces: list[str], translation: str) -> dict:
    """A hand-written greedy trace of /v1/explain's shape: each step keeps its piece but the last, which ends."""
    steps = []
    for t, piece in enumerate(pieces):
        end = t == len(pieces) - 1
        best = {"parent": 0, "piece": piece, "token": 10 + t, "prob": 0.8, "log_prob": -0.2 * (t + 1)}
        best |= {"score": best["log_prob"], "fate": "finished" if end else "kept", "reason": "eos" if end else ""}
        other = {"parent": 0, "piece": "▁x", "token": 99, "prob": 0.1, "log_prob": -2.3, "score": -2.3}
        other |= {"fate": "pruned", "reason": "beam full", "child": None}
        hypothesis = {"pieces": pieces[:t], "tokens": list(range(10, 10 + t)), "log_prob": -0.2 * t, "score": -0.2 * t}
        hypothesis["top"] = [{k: c[k] for k in ("piece", "token", "prob")} for c in (best, other)]
        done = {"pieces": pieces[:t], "text": translation, "log_prob": best["log_prob"], "score": best["score"]}
        steps.append(
            {
                "step": t,
                "hypotheses": [hypothesis],
                "candidates": [best | {"child": None if end else 0}, other],
                "finished": [done] if end else [],
                "cross_attention": [[[[0.75, 0.25]]]],  # (layers, heads, hypotheses, source)
            }
        )
    return {
        "model": "en-it",
        "translation": translation,
        "beam_size": 1,
        "top_k": 2,
        "length_penalty": 0.6,
        "source_pieces": ["▁three", "</s>"],
        "encoder_attention": [[[[0.5, 0.5], [0.5, 0.5]]]],
        "steps": steps,
    }


def test_a_stale_trace_never_replaces_a_newer_one(server, page):
    """The test holds /v1/explain's answers back (page.route) and gives the newer request's first."""
    held = []
    page.route("**/v1/explain", lambda route: held.append(route))  # Playwright wants a Python function
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(server)
    expect(page.locator("#pair")).to_be_enabled()
    page.locator("#source").fill("three")
    page.locator("#explain-section summary").click()

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 10
        while len(held) < count:  # route handlers run while the page is being waited on
            assert time.monotonic() < deadline, f"no request number {count} to /v1/explain"
            page.wait_for_timeout(20)

    wait_for(1)
    page.select_option("#beam", "1")
    wait_for(2)
    held[1].fulfill(json=greedy_trace(["▁tre", "</s>"], "tre"))
    expect(page.locator("#explain-step")).to_contain_text("Step 1 of 2:")
    with contextlib.suppress(PlaywrightError):  # the page may have aborted it already: all the better
        held[0].fulfill(json=greedy_trace(["▁tr", "e", "</s>"], "stale"))
    page.wait_for_timeout(300)
    expect(page.locator("#explain-step")).to_contain_text("Step 1 of 2:")
    expect(page.locator("#explain-translation")).to_have_text("tre")
    expect(page.locator("#tree .node.finished")).to_have_attribute("title", re.compile(r"finished \(eos\)"))
    assert not errors, f"JavaScript errors: {errors}"


LOW = 0.5  # evidence.js's LOW_CONFIDENCE
WARNING_WORDS = {  # a word of each code's sentence on the page
    "repetition": "repeats",
    "copy": "copies the source",
    "length_ratio": "shorter or longer",
    "uncovered_source": "may be missing",
    "truncated": "too long",
    "term_doubled": "translated twice",
    "term_lost_words": "lost their translation",
}


def marked(page: Page, selector: str) -> list[int]:
    """The word numbers (data-word) of the elements `selector` finds, in page order."""
    return page.locator(selector).evaluate_all("nodes => nodes.map((n) => Number(n.dataset.word))")


def aligned(pairs: list[list[int]], *, target: int | None = None, source: int | None = None) -> list[int]:
    """The other side's words of the pairs that name this target (or source) word, sorted."""
    if target is not None:
        return sorted({i for i, j in pairs if j == target})
    return sorted({j for i, j in pairs if i == source})


def test_evidence_of_the_real_server(wordy_server, page):
    """Two lines translated by the real server: each target word, pointed at or focused, outlines exactly the
    source words of the answer's alignment (and the other way round), the unsure words are marked, each line
    says its confidence and its warnings in words."""
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(wordy_server)
    expect(page.locator("#pair")).to_be_enabled()
    source = ["one hundred and twelve", "nine nine nine nine nine"]  # a loop in the source may be repeated: a warning
    with page.expect_response("**/v1/translate") as response:
        page.locator("#source").fill("\n".join(source))
    request, answer = response.value.request.post_data_json, response.value.json()["translations"]
    assert request["return_alignment"] is True and request["return_confidence"] is True
    expect(page.locator("#status")).to_contain_text("Translated")
    assert page.locator("#output").evaluate("e => e.textContent") == "\n".join(t["text"] for t in answer)
    assert any(t["alignment"] for t in answer) and any(t["warnings"] for t in answer), "the test needs evidence"

    for k, (line, translation) in enumerate(zip(source, answer, strict=True)):
        targets = page.locator(f'#output .word.target[data-line="{k}"]')
        sources = page.locator(f'#evidence-lines .word.source[data-line="{k}"]')
        expect(targets).to_have_text(translation["text"].split())
        expect(sources).to_have_text(line.split())
        strip = f'#evidence-lines .evidence-line[data-line="{k}"]'
        for j, p in enumerate(translation["confidence"]["words"]):
            targets.nth(j).hover()
            assert marked(page, f"{strip} .word.linked") == aligned(translation["alignment"], target=j)
            assert marked(page, "#output .word.active") == [j]
            assert ("low" in targets.nth(j).get_attribute("class").split()) == (p < LOW)
        for i in range(len(line.split())):
            sources.nth(i).hover()
            linked = f'#output .word.linked[data-line="{k}"]'
            assert marked(page, linked) == aligned(translation["alignment"], source=i)
            assert page.locator("#output .word.linked").count() == page.locator(linked).count(), "its line only"
        item = page.locator(strip)
        expect(item.locator(".line-name")).to_have_text(f"Line {k + 1}")
        expect(item.locator(".confidence")).to_contain_text(f"{round(translation['confidence']['sentence'] * 100)}%")
        expect(item.locator(".warnings li")).to_have_count(len(translation["warnings"]))
        for code in translation["warnings"]:
            expect(item.locator(".warnings")).to_contain_text(WARNING_WORDS[code])

    # The keyboard: the words are one Tab stop after the Copy button, then the arrow keys; focus highlights too.
    page.mouse.move(0, 0)
    page.locator("#copy").focus()
    page.keyboard.press("Tab")
    first = page.locator("#output .word").first
    expect(first).to_be_focused()
    page.keyboard.press("ArrowDown")  # the nearest word of the next line
    expect(page.locator('#output .word[data-line="1"]').first).to_be_focused()
    assert marked(page, '#evidence-lines [data-line="1"] .word.linked') == aligned(answer[1]["alignment"], target=0)
    expect(page.locator("#evidence-readout")).to_contain_text("Translation word 1 of")
    assert not errors, f"JavaScript errors: {errors}"


def evidence_answer(texts: list[str]) -> dict:
    """A /v1/translate answer with hand-written evidence for the source lines "the black cat sleeps", "hello"."""
    assert texts == ["the black cat sleeps", "hello"], texts
    return {
        "model": "en-it",
        "translations": [
            {
                "text": "il  gatto nero dorme",  # two spaces: words are runs of non-space, as str.split() sees them
                "alignment": [[0, 0], [1, 2], [2, 1], [3, 3]],
                "confidence": {"sentence": 0.42, "words": [0.9, 0.3, 0.8, 0.49]},
                "warnings": ["uncovered_source", "made_up_code"],
            },
            {
                "text": "ciao",
                "alignment": [[0, 0]],
                "confidence": {"sentence": 0.97, "words": [0.97]},
                "warnings": [],
                "constraints": [  # a term the model also wrote its own word for, and lost words near it
                    {
                        "target": "ciao",
                        "met": True,
                        "words": [0],
                        "source": "glossary",
                        "form": "ciao",
                        "doubled": True,
                        "lost": ["there", "friend"],
                    },
                ],
            },
        ],
    }


def test_evidence_rendering_and_phone_width(server, page, repo_root):
    """/v1/translate answered by the test (page.route) with known evidence: the marks, the legend, the warnings
    in words (an unknown code as it is), both directions of the alignment, and no sideways scroll at 375 px."""
    page.route(
        "**/v1/translate",
        lambda route: route.fulfill(json=evidence_answer(route.request.post_data_json["text"])),
    )
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(server)
    expect(page.locator("#pair")).to_be_enabled()
    page.locator("#source").fill("the black cat sleeps\n\n  hello ")
    expect(page.locator("#status")).to_contain_text("Translated")

    words = page.locator("#output .word")
    expect(words).to_have_text(["il", "gatto", "nero", "dorme", "ciao"])
    expect(page.locator("#evidence-lines .line-terms li")).to_have_text(
        "✓ glossary term ciao: used as ciao; the model's own word for it is there too; source words near it lost"
        " their translation: “there”, “friend”"
    )
    assert page.locator("#output").evaluate("e => e.textContent") == "il  gatto nero dorme\n\nciao"  # blank kept
    low = [("low" in (words.nth(j).get_attribute("class") or "").split()) for j in range(5)]
    assert low == [False, True, False, True, False]
    style = words.nth(1).evaluate("e => [getComputedStyle(e).textDecorationStyle, getComputedStyle(e).backgroundColor]")
    assert style[0] == "dotted" and style[1] != "rgba(0, 0, 0, 0)", "marked by shape and tint, not colour alone"
    expect(words.nth(1)).to_have_attribute("title", "probability 30%: under 50%")
    expect(page.locator(".evidence-legend")).to_contain_text("less than 50% probability")

    lines = page.locator("#evidence-lines .evidence-line")
    expect(lines.locator(".line-name")).to_have_text(["Line 1", "Line 3"])  # the source's line numbers
    expect(lines.locator(".confidence")).to_have_text(["sentence confidence 42%", "sentence confidence 97%"])
    expect(lines.nth(0).locator(".warnings li")).to_have_text(
        ["A source word got almost no attention: it may be missing from the translation.", "made_up_code"]
    )
    expect(lines.nth(1).locator(".warnings li")).to_have_count(0)
    expect(lines.nth(1)).to_contain_text("no warnings")

    # "gatto" (target 1) comes from "cat" (source 2); "black" (source 1) became "nero" (target 2).
    words.nth(1).hover()
    expect(page.locator("#evidence-lines .word.linked")).to_have_text(["cat"])
    expect(page.locator("#evidence-readout")).to_have_text(
        "Translation word 2 of 4 in line 1, “gatto”: probability 30%, under 50%. From the source “cat”."
    )
    page.locator('#evidence-lines .word[data-line="0"][data-word="1"]').hover()
    expect(page.locator("#output .word.linked")).to_have_text(["nero"])
    expect(page.locator("#evidence-lines .evidence-line.active")).to_have_count(1)

    # The keyboard, in the source strip as in the translation.
    page.locator("#evidence-lines .word").first.focus()
    page.keyboard.press("End")
    expect(page.locator("#evidence-lines .word").last).to_be_focused()
    expect(page.locator("#output .word.linked")).to_have_text(["ciao"])
    page.locator("#output .word").first.focus()
    page.keyboard.press("ArrowRight")
    expect(words.nth(1)).to_be_focused()
    expect(page.locator("#evidence-lines .word.linked")).to_have_text(["cat"])
    (repo_root / "outputs").mkdir(exist_ok=True)
    page.screenshot(path=str(repo_root / "outputs" / "evidence_page.png"), full_page=True)

    page.set_viewport_size({"width": 375, "height": 800})
    page.wait_for_timeout(200)  # the heat map redraws after resizing
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    words.nth(3).focus()
    page.locator("#output").scroll_into_view_if_needed()
    page.screenshot(path=str(repo_root / "outputs" / "evidence_page_phone.png"), full_page=True)
    page.emulate_media(color_scheme="dark")
    page.screenshot(path=str(repo_root / "outputs" / "evidence_page_phone_dark.png"), full_page=True)
    assert not errors, f"JavaScript errors: {errors}"


def percent(p: float) -> str:
    """util.js's percent(): a whole percentage, "<1%" and ">99%" rather than a rounded certainty."""
    x = min(max(p, 0.0), 1.0) * 100
    if 0 < x < 1:
        return "<1%"
    if 99 < x < 100:
        return ">99%"
    return f"{math.floor(x + 0.5)}%"


def add_term(page: Page, source: str, target: str) -> None:
    page.locator("#glossary-source").fill(source)
    page.locator("#glossary-target").fill(target)
    page.locator("#glossary-add").click()


def translate_answer(page: Page, change) -> tuple[dict, Response]:
    """Does `change` and returns the /v1/translate request it caused, and its response."""
    with page.expect_response("**/v1/translate") as answer:
        change()
    return answer.value.request.post_data_json, answer.value


def test_glossary_box_sends_its_pairs_and_survives_a_reload(wordy_server, page):
    """Pairs added in the box go with every translation and trace, per language pair in localStorage, so a reload
    keeps them; each line lists its terms met and not (its words marked), each traced hypothesis how many. The
    targets are words of one token: the tiny model writes at most 5."""
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(wordy_server)
    expect(page.locator("#pair")).to_be_enabled()
    expect(page.locator("#glossary-pair")).to_have_text("en → it")
    expect(page.locator("#glossary-list li")).to_have_count(0)
    sentence = "one hundred and twelve"
    request, _ = translate_answer(page, lambda: page.locator("#source").fill(sentence))
    assert "glossary" not in request, "an empty glossary sends nothing"

    glossary = [{"source": "hundred", "target": "three | five"}, {"source": "twelve", "target": "nine"}]
    request, _ = translate_answer(page, lambda: add_term(page, "hundred", "three | five"))
    assert request["glossary"] == glossary[:1]
    translate_answer(page, lambda: add_term(page, "seven", "six"))
    translate_answer(page, lambda: add_term(page, "twelve", "nine"))
    request, _ = translate_answer(page, lambda: page.get_by_role("button", name="Remove “seven” → “six”").click())
    assert request["glossary"] == glossary
    expect(page.locator("#glossary-list li")).to_have_count(2)
    expect(page.locator("#glossary-status")).to_have_text("Removed “seven”.")

    page.reload()
    expect(page.locator("#glossary-list .term-source")).to_have_text(["hundred", "twelve"])
    expect(page.locator("#glossary-list .term-target")).to_have_text(["three | five", "nine"])
    request, response = translate_answer(page, lambda: page.locator("#source").fill(sentence))
    assert request["glossary"] == glossary
    stored = page.evaluate("localStorage.getItem('tnmt.glossary.en-it')")
    assert json.loads(stored) == glossary

    # The line's terms, as the answer reports them: met ones' words marked, each term listed with ✓ or ✗.
    expect(page.locator("#status")).to_contain_text("Translated")
    translation = response.json()["translations"][0]
    constraints = translation["constraints"]
    assert [c["target"] for c in constraints] == ["three | five", "nine"]  # in the source's order
    met_words = sorted({j for c in constraints if c["met"] for j in c["words"]})
    assert marked(page, "#output .word.term") == met_words
    items = page.locator("#evidence-lines .line-terms li")
    expect(items).to_have_count(2)
    for item, c in zip(items.all(), constraints, strict=True):
        expect(item).to_contain_text(("✓ glossary term " if c["met"] else "✗ glossary term ") + c["target"])
        expect(item).to_have_class("met" if c["met"] else "unmet")

    # The trace, under the same glossary: each hypothesis says how many terms it has met.
    answer = explain_answer(page, lambda: page.locator("#explain-section summary").click())
    assert answer["request"]["glossary"] == glossary
    steps = answer["data"]["steps"]
    page.locator("#explain-view").focus()
    page.keyboard.press("End")
    state = steps[-1]["hypotheses"][0]["constraints"]
    assert len(state) == 2
    expect(page.locator("#explain-hypothesis")).to_contain_text(f"{sum(state)} of 2 terms met")
    expect(page.locator("#tree .node.selected .terms")).to_have_text(f"{sum(state)}/2")
    expect(page.locator("#terms-legend")).to_be_visible()
    assert not errors, f"JavaScript errors: {errors}"


def test_a_refused_glossary_entry_is_shown_in_the_box(wordy_server, page):
    """The server's 422 for a bad entry is said in the glossary box, which marks the entry, not as a page error;
    removing the entry translates again."""
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(wordy_server)
    expect(page.locator("#pair")).to_be_enabled()
    translate_answer(page, lambda: page.locator("#source").fill("one hundred and twelve"))
    translate_answer(page, lambda: add_term(page, "seven", "six"))
    _, response = translate_answer(page, lambda: add_term(page, "twelve", "dodici |"))  # an empty second form
    assert response.status == 422
    message = response.json()["error"]
    assert message.startswith("glossary[1]")
    expect(page.locator("#glossary-error")).to_contain_text(f"entry 2 (“twelve” → “dodici |”) (422): {message}")
    expect(page.locator("#glossary-list li.refused")).to_have_count(1)
    expect(page.locator("#glossary-list li").nth(1)).to_have_class(re.compile(r"\brefused\b"))
    expect(page.locator("#error")).to_be_empty()
    expect(page.locator("#status")).to_contain_text("the glossary box says why")

    remove = page.get_by_role("button", name="Remove “twelve” → “dodici |”")
    remove.click()  # the glossary before it: its translation is known, nothing is sent again
    expect(page.locator("#glossary-error")).to_be_empty()
    expect(page.locator("#glossary-list li.refused")).to_have_count(0)
    expect(page.locator("#status")).to_contain_text("Translated")
    assert not errors, f"JavaScript errors: {errors}"


def test_a_conflicting_glossary_entry_is_refused_naming_both(wordy_server, page):
    """A source term listed again with another target is refused in the box, naming both entries, and nothing is
    sent; the same entry again changes nothing. A conflict that reaches the server (a glossary this browser kept
    from before) is its 422, naming both, shown in the box."""
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(wordy_server)
    expect(page.locator("#pair")).to_be_enabled()
    translate_answer(page, lambda: page.locator("#source").fill("one hundred and twelve"))
    translate_answer(page, lambda: add_term(page, "hundred", "tre"))
    sent = []
    page.on("request", lambda request: sent.append(request.url) if "/v1/translate" in request.url else None)
    add_term(page, "Hundred", "mille")
    expect(page.locator("#glossary-error")).to_have_text(
        "“Hundred” → “mille” conflicts with entry 1, “hundred” → “tre”: remove that entry first, or give both"
        " forms in one (“tre | mille”)."
    )
    expect(page.locator("#glossary-list li.refused")).to_have_count(1)
    expect(page.locator("#glossary-list .term-target")).to_have_text(["tre"])
    translate_answer(page, lambda: page.locator("#source").fill("one hundred and two"))  # accepted by the server
    expect(page.locator("#glossary-error")).to_contain_text("conflicts with entry 1")  # the box's refusal stays
    expect(page.locator("#glossary-list li.refused")).to_have_count(1)
    sent.clear()
    add_term(page, "hundred", "tre")
    expect(page.locator("#glossary-status")).to_have_text("“hundred” → “tre” is in the glossary already.")
    expect(page.locator("#glossary-list li")).to_have_count(1)
    page.wait_for_timeout(500)  # past the page's typing delay: a request would have gone
    assert not sent, "a refused entry sent a translation"

    kept = [{"source": "hundred", "target": "tre"}, {"source": "HUNDRED", "target": "mille"}]
    page.evaluate(f"localStorage.setItem('tnmt.glossary.en-it', {json.dumps(json.dumps(kept))})")
    page.reload()
    _, response = translate_answer(page, lambda: page.locator("#source").fill("one hundred"))
    assert response.status == 422
    message = response.json()["error"]
    assert message.startswith("glossary[1]: 'HUNDRED' -> 'mille' conflicts with glossary[0]: 'hundred' -> 'tre'")
    expect(page.locator("#glossary-error")).to_contain_text(f"entry 2 (“HUNDRED” → “mille”) (422): {message}")
    assert not errors, f"JavaScript errors: {errors}"


EN_DE = os.environ.get("TNMT_EN_DE_CHECKPOINT", "")  # a Multi30k en->de checkpoint: the real model's answer


@pytest.mark.skipif(not EN_DE, reason="needs a trained en->de Multi30k checkpoint: set TNMT_EN_DE_CHECKPOINT")
def test_a_glossary_term_replaces_the_models_word_on_the_page(page, repo_root):
    """Issue 64's sentence on a real en->de model: "girl -> Mädel" gives one girl, the term in the model's word's
    place, and keeps the red dress; the line's terms say so, with nothing doubled or lost."""
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    sentence = "A young girl in a red dress is jumping over a puddle."
    with serve(Path(EN_DE)) as url:
        plain = httpx.post(f"{url}/v1/translate", json={"text": sentence}).json()["translations"][0]["text"]
        page.goto(url)
        expect(page.locator("#pair")).to_be_enabled()
        translate_answer(page, lambda: page.locator("#source").fill(sentence))
        _, response = translate_answer(page, lambda: add_term(page, "girl", "Mädel"))
        translation = response.json()["translations"][0]
        words = [w.strip(".,").casefold() for w in translation["text"].split()]
        assert "mädel" in words and "mädchen" not in words, (plain, translation["text"])
        assert "kleid" in words and any(w.startswith("rot") for w in words), (plain, translation["text"])
        assert len(words) >= len(plain.split()) - 1
        (term,) = translation["constraints"]
        assert (term["met"], term["form"], term["doubled"], term["lost"]) == (True, "Mädel", False, [])
        expect(page.locator("#output")).to_contain_text("Mädel")
        expect(page.locator("#evidence-lines .line-terms li")).to_have_text("✓ glossary term Mädel: used as Mädel")
        page.screenshot(path=str(repo_root / "outputs" / "glossary_replaces_page.png"), full_page=True)
    assert not errors, f"JavaScript errors: {errors}"


def alternatives_answer(page: Page, change) -> tuple[dict, dict]:
    """Does `change` and returns the /v1/alternatives request it caused and the answer, once listed."""
    with page.expect_response("**/v1/alternatives") as answer:
        change()
    data = answer.value.json()
    expect(page.locator("#word-choices [role='option']")).to_have_count(len(data["alternatives"]))
    return answer.value.request.post_data_json, data


def expect_options(page: Page, data: dict) -> None:
    """The open list shows each alternative's word, probability as a percentage and translation, the first active."""
    options = page.locator("#word-choices [role='option']")
    for option, alternative in zip(options.all(), data["alternatives"], strict=True):
        expect(option.locator(".choice-word")).to_have_text(alternative["word"])
        expect(option.locator(".choice-prob")).to_have_text(percent(alternative["probability"]))
        assert option.locator(".choice-translation").text_content() == alternative["translation"]
    expect(page.locator("#word-choices")).to_be_focused()
    expect(page.locator("#word-choices")).to_have_attribute("aria-activedescendant", "word-choice-0")
    expect(options.first).to_have_attribute("aria-selected", "true")


def test_alternatives_of_a_word_by_mouse_and_keyboard(wordy_server, page):
    """A target word opened by a click and by the keyboard lists /v1/alternatives' answer in a listbox; ↓ and
    Enter replace the line with the alternative's translation, which gets its own evidence and stays until the
    source changes."""
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(wordy_server)
    expect(page.locator("#pair")).to_be_enabled()
    sentence = "one hundred and twelve"
    _, response = translate_answer(page, lambda: page.locator("#source").fill(sentence))
    shown = response.json()["translations"][0]["text"]
    expect(page.locator("#status")).to_contain_text("Translated")
    words = page.locator("#output .word")
    assert words.count() >= 2 and words.count() == len(shown.split())
    expect(words.first).to_have_attribute("aria-haspopup", "listbox")

    # The mouse: the first word's list, closed by Escape, focus back on the word.
    request, data = alternatives_answer(page, lambda: words.first.click())
    beam = int(page.locator("#beam").input_value())
    assert request == {"text": sentence, "position": 0, "k": 5, "source": "en", "target": "it", "beam_size": beam}
    assert data["translation"] == shown and len(data["alternatives"]) >= 2
    expect(words.first).to_have_attribute("aria-expanded", "true")
    expect_options(page, data)
    page.keyboard.press("Escape")
    expect(page.locator("#word-popup")).to_be_hidden()
    expect(words.first).to_be_focused()
    expect(words.first).to_have_attribute("aria-expanded", "false")

    # The keyboard: → to the second word, Enter opens its list, ↓ Enter takes the second alternative.
    page.keyboard.press("ArrowRight")
    expect(words.nth(1)).to_be_focused()
    request, data = alternatives_answer(page, lambda: page.keyboard.press("Enter"))
    assert request["position"] == 1
    expect_options(page, data)
    page.keyboard.press("ArrowDown")
    expect(page.locator("#word-choices")).to_have_attribute("aria-activedescendant", "word-choice-1")
    chosen = data["alternatives"][1]
    with page.expect_response(lambda r: r.url.endswith("/v1/translate") and "prefix" in r.request.post_data_json) as ev:
        page.keyboard.press("Enter")
    assert ev.value.request.post_data_json["prefix"] == chosen["translation"]
    expect(page.locator("#word-popup")).to_be_hidden()
    page.wait_for_function("t => document.querySelector('#output').textContent === t", arg=chosen["translation"])
    expect(page.locator("#output .word").nth(1)).to_be_focused()
    expect(page.locator("#evidence-lines .chosen")).to_contain_text(f"You chose “{chosen['word']}”")
    if ev.value.json()["translations"][0]["text"] == chosen["translation"]:  # its evidence, when the model ends there
        expect(page.locator("#evidence-lines .confidence")).to_have_count(1)

    # Space opens a list too; a click elsewhere closes it.
    with page.expect_response("**/v1/alternatives"):
        page.keyboard.press("Space")
    expect(page.locator("#word-popup")).to_be_visible()
    page.locator("h1").click()
    expect(page.locator("#word-popup")).to_be_hidden()

    # The choice stays through a new beam, and goes with a new source.
    translate_answer(page, lambda: page.select_option("#beam", "1"))
    expect(page.locator("#status")).to_contain_text("beam 1")
    assert page.locator("#output").text_content() == chosen["translation"]
    _, response = translate_answer(page, lambda: page.locator("#source").fill("seven"))
    expect(page.locator("#status")).to_contain_text("Translated")
    assert page.locator("#output").text_content() == response.json()["translations"][0]["text"]
    expect(page.locator("#evidence-lines .chosen")).to_have_count(0)
    assert not errors, f"JavaScript errors: {errors}"


STAGES = (
    "pieces",
    "embedding",
    "masks",
    "encoder-attention",
    "decoder-attention",
    "cross-attention",
    "add-norm",
    "feed-forward",
    "softmax",
)


def inspect_answer(page: Page, change) -> dict:
    """Does `change` and returns the /v1/inspect request it caused and the answer, once the page shows it."""
    with page.expect_response("**/v1/inspect") as answer:
        change()
    response = answer.value
    data = response.json()
    if response.ok:
        page.wait_for_function(
            """d => document.querySelector('#inside-fed').textContent === d.translation.text
                && [...document.querySelectorAll('#pieces-picture table')[0].tBodies[0].rows[0].querySelectorAll('td')]
                    .map((c) => c.textContent).join('|') === d.source.pieces.join('|')""",
            arg=data,
        )
    return {"request": response.request.post_data_json, "status": response.status, "data": data}


def cell_texts(page: Page, selector: str) -> list[str]:
    """The text of every `td` under `selector`, row by row (exact: the tiny model's pieces may be control
    characters, which expect() would normalise)."""
    return page.locator(f"{selector} tbody td").evaluate_all("cells => cells.map((c) => c.textContent)")


def tab_to(page: Page, locator) -> None:
    """Tab once; focus must land on `locator`."""
    page.keyboard.press("Tab")
    expect(locator).to_be_focused()


def test_inside_the_model_panel_by_panel_with_the_keyboard(server, page, repo_root):
    """The view on the real /v1/inspect: asked only while open, one panel per stage in the lesson's order, each
    reached from the stage links and walked by Tab and the arrow keys, each picture drawn for this sentence (as
    many cells, maps and bars as the answer has positions, heads and layers) and read in words; a new source or a
    translation to feed asks again; readable at phone width."""
    inspects = []
    page.on("request", lambda r: inspects.append(r.post_data_json) if r.url.endswith("/v1/inspect") else None)
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(server)
    expect(page.locator("#pair")).to_be_enabled()
    sentence = "one hundred and twelve"
    page.locator("#source").press_sequentially(sentence, delay=20)
    expect(page.locator("#status")).to_contain_text("Translated")
    assert inspects == [], "a closed view asks the server nothing"

    beam = int(page.locator("#beam").input_value())
    answer = inspect_answer(page, lambda: page.locator("#inside-section summary").press("Enter"))
    expected = {"text": sentence, "sentence": 0, "source": "en", "target": "it", "top_k": 5, "beam_size": beam}
    assert answer["request"] == expected
    data = answer["data"]
    src, fed = data["source"]["pieces"], data["target"]["fed_pieces"]
    s, t = len(src), len(fed)
    assert src[-1] == "</s>" and fed[0] == "<s>" and t == len(data["output"])
    expect(page.locator("#inside-status")).to_contain_text(f"{s} source pieces")
    expect(page.locator("#inside-whose")).to_have_text("(the model's own)")

    # The summary, the translation to feed, then the nine stage links in the lesson's order.
    tab_to(page, page.locator("#inside-translation"))
    links = page.locator("#inside-stages nav a")
    for k, stage in enumerate(STAGES):
        tab_to(page, links.nth(k))
        expect(links.nth(k)).to_have_attribute("href", f"#stage-{stage}")
    headings = page.locator("#inside-stages .stage h3").all_text_contents()
    assert [h.split(".")[0] for h in headings] == [str(k) for k in range(1, 10)]

    def enter_stage(k: int) -> None:
        """Its link, Enter: the panel itself takes focus, so Tab goes on into its controls."""
        links.nth(k).focus()
        page.keyboard.press("Enter")
        expect(page.locator(f"#stage-{STAGES[k]}")).to_be_focused()

    def readout(stage: str):
        return page.locator(f"#{stage}-readout")

    # 1. Pieces and ids: the source with EOS last, the decoder fed BOS first, what each position should predict.
    enter_stage(0)
    boxes = page.locator("#pieces-picture .picture-box")
    tab_to(page, boxes.nth(0))
    assert cell_texts(page, "#pieces-picture figure:nth-of-type(1)") == src + [str(i) for i in data["source"]["ids"]]
    target = data["target"]
    rows = [*target["fed_pieces"], *map(str, target["fed_ids"]), *target["next_pieces"]]
    assert cell_texts(page, "#pieces-picture figure:nth-of-type(2)") == rows
    expect(readout("pieces")).to_contain_text(f"Source position 0: “{src[0]}”, id {data['source']['ids'][0]}.")
    page.keyboard.press("End")
    expect(readout("pieces")).to_contain_text(f"Source position {s - 1}: “</s>”")
    expect(readout("pieces")).to_contain_text("EOS ends the source")
    tab_to(page, boxes.nth(1))
    expect(readout("pieces")).to_contain_text("Decoder position 0: fed “<s>” (id 1), BOS")
    page.keyboard.press("ArrowRight")
    expect(readout("pieces")).to_contain_text("Decoder position 1:")

    # 2. Embeddings: the positional table (the sentence's positions in it), per position the sizes added.
    enter_stage(1)
    table = data["embedding"]["table"]
    positions = page.locator("#embedding-picture canvas.map")
    tab_to(page, positions)
    assert (positions.get_attribute("data-rows"), positions.get_attribute("data-cols")) == (
        str(len(table)),
        str(data["embedding"]["d_model"]),
    )
    assert len(table) >= max(s, t)
    expect(readout("embedding")).to_contain_text(
        f"Position 0, dimension 0 (sin of frequency pair 0): {table[0][0]:.3f}."
    )
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    expect(readout("embedding")).to_contain_text(
        f"Position 1, dimension 1 (cos of frequency pair 0): {table[1][1]:.3f}."
    )
    expect(page.locator("#embedding-note")).to_contain_text(f"√{data['embedding']['d_model']}")
    expect(page.locator("#embedding-note")).to_contain_text("interleaved layout")
    sizes = page.locator("#embedding-picture ol.bar-rows")
    for side, n in ((0, s), (1, t)):
        tab_to(page, sizes.nth(side))
        expect(sizes.nth(side).locator("li")).to_have_count(n)
        expect(sizes.nth(side).locator("li .bar-track")).to_have_count(3 * n)
    e = data["embedding"]["target"]
    expect(readout("embedding")).to_contain_text(f"token × scale {e['scaled_rms'][0]:.2f}")
    page.keyboard.press("ArrowDown")
    expect(readout("embedding")).to_contain_text(f"Decoder input position 1, “{fed[1]}”")

    # 3. Masks: a row of S keys, all allowed; T x T cells, the lower triangle allowed.
    enter_stage(2)
    masks = page.locator("#masks-picture .picture-box")
    tab_to(page, masks.nth(0))
    assert cell_texts(page, "#masks-picture figure:nth-of-type(1)") == ["✓"] * s
    tab_to(page, masks.nth(1))
    causal = cell_texts(page, "#masks-picture figure:nth-of-type(2)")
    assert len(causal) == t * t
    assert causal == ["✓" if c <= r else "·" for r in range(t) for c in range(t)]
    expect(readout("masks")).to_contain_text("Decoder position 0, “<s>”, may attend position 0")
    page.keyboard.press("ArrowRight")
    expect(readout("masks")).to_contain_text("may not attend position 1")
    expect(readout("masks")).to_contain_text("the future")

    # 4-6. Attention: a layer select counting from 1, then one map per head of queries x keys.
    attentions = (("encoder-attention", "encoder", s, s), ("decoder-attention", "decoder_self", t, t))
    for k, (stage, key, queries, keys) in enumerate((*attentions, ("cross-attention", "cross", t, s)), start=3):
        enter_stage(k)
        layers = data["attention"][key]
        tab_to(page, page.locator(f"#{stage}-layer"))
        expect(page.locator(f"#{stage}-layer option")).to_have_text([f"layer {n + 1}" for n in range(len(layers))])
        maps = page.locator(f"#{stage}-picture canvas.map")
        expect(maps).to_have_count(len(layers[0]))
        heads = [f"head {h + 1}" for h in range(len(layers[0]))]
        expect(page.locator(f"#{stage}-picture figcaption")).to_have_text(heads)
        for h in range(len(layers[0])):
            tab_to(page, maps.nth(h))
            assert (maps.nth(h).get_attribute("data-rows"), maps.nth(h).get_attribute("data-cols")) == (
                str(queries),
                str(keys),
            )
            page.keyboard.press("End")
            weight = layers[0][h][0][keys - 1]
            expect(readout(stage)).to_contain_text(f"Layer 1, head {h + 1}: ")
            expect(readout(stage)).to_contain_text(f"(position {keys - 1}) with weight {weight:.3f}")

    # 7. Add & norm: a layer select over both stacks, then per sub-layer one row of three bars per position.
    enter_stage(6)
    tab_to(page, page.locator("#add-norm-layer"))
    expect(page.locator("#add-norm-layer option")).to_have_text(["encoder layer 1", "decoder layer 1"])
    expect(page.locator("#add-norm-note")).to_contain_text("Post-norm")
    lists = page.locator("#add-norm-picture ol.bar-rows")
    expect(lists).to_have_count(2)
    tab_to(page, lists.nth(0))
    expect(lists.nth(0).locator("li")).to_have_count(s)
    sub = data["layers"]["encoder"][0]["sublayers"][0]
    expect(readout("add-norm")).to_contain_text(
        f"Encoder layer 1, self-attention, “{src[0]}” (position 0): the stream in {sub['stream'][0]:.2f}, "
        f"the update {sub['update'][0]:.2f}, after add & norm {sub['out'][0]:.2f}"
    )
    page.select_option("#add-norm-layer", "decoder:0")
    expect(lists).to_have_count(3)
    expect(page.locator("#add-norm-picture figcaption")).to_have_text(
        ["masked self-attention", "cross-attention", "feed-forward"]
    )
    for n in range(3):
        expect(lists.nth(n).locator("li")).to_have_count(t)

    # 8. Feed-forward: per stack a map of layers x positions, read as counts of active units.
    enter_stage(7)
    stacks = page.locator("#feed-forward-picture canvas.map")
    for n, (stack, length) in enumerate((("encoder", s), ("decoder", t))):
        tab_to(page, stacks.nth(n))
        assert stacks.nth(n).get_attribute("data-rows") == str(len(data["layers"][stack]))
        assert stacks.nth(n).get_attribute("data-cols") == str(length)
        ffn = data["layers"][stack][0]["ffn"]
        expect(readout("feed-forward")).to_contain_text(f"{ffn['active'][0]} of {ffn['d_ff']} units active")
        expect(readout("feed-forward")).to_contain_text(f"unit {ffn['top'][0][0][0]}")

    # 9. Linear + softmax: per position the top-k bars, the right next piece marked once with its rank.
    enter_stage(8)
    predictions = page.locator("#softmax-picture li.prediction")
    tab_to(page, page.locator("#softmax-picture ol.predictions"))
    expect(predictions).to_have_count(t)
    for i, o in enumerate(data["output"]):
        bars = len(o["top"]) + (o["rank"] > len(o["top"]))  # the right piece is added when not among the top
        expect(predictions.nth(i).locator(".topk li")).to_have_count(bars)
        expect(predictions.nth(i).locator(".topk li.right")).to_have_count(1)
        expect(predictions.nth(i).locator(".topk li.right")).to_contain_text(f"rank {o['rank']}")
    expect(readout("softmax")).to_contain_text(f"Position 0, fed “<s>”: should predict “{data['output'][0]['next']}”")
    page.keyboard.press("ArrowDown")
    expect(readout("softmax")).to_contain_text("Position 1, fed")
    expect(page.locator("#softmax-picture li.prediction.cursor")).to_have_count(1)
    (repo_root / "outputs").mkdir(exist_ok=True)
    page.screenshot(path=str(repo_root / "outputs" / "inside_page.png"), full_page=True)

    # While open, a new source is looked at again; a translation to feed replaces the model's own.
    answer = inspect_answer(page, lambda: page.locator("#source").fill("seven"))
    assert answer["request"]["text"] == "seven"
    t = len(answer["data"]["target"]["fed_pieces"])
    assert len(cell_texts(page, "#masks-picture figure:nth-of-type(2)")) == t * t
    expect(page.locator("#softmax-picture li.prediction")).to_have_count(t)
    answer = inspect_answer(page, lambda: page.locator("#inside-translation").fill("sette"))
    expected = {"text": "seven", "sentence": 0, "source": "en", "target": "it", "top_k": 5, "translation": "sette"}
    assert answer["request"] == expected
    assert answer["data"]["translation"] == {"text": "sette", "given": True}
    expect(page.locator("#inside-whose")).to_have_text("(the one typed above)")
    page.locator("#inside-translation").fill("")

    # The endpoint's limits, in the server's words.
    answer = inspect_answer(page, lambda: page.select_option("#beam", "5"))
    assert answer["status"] == 422
    expect(page.locator("#inside-error")).to_contain_text(f"The server refused (422): {answer['data']['error']}")
    inspect_answer(page, lambda: page.select_option("#beam", "2"))
    expect(page.locator("#inside-error")).to_be_empty()

    # A closed view asks nothing.
    page.locator("#inside-section summary").click()
    asked = len(inspects)
    page.locator("#source").fill("eight")
    page.wait_for_function("() => document.querySelector('#status').textContent.includes('Translated')")
    page.wait_for_timeout(500)
    assert len(inspects) == asked

    # At phone width, only the pictures' own boxes scroll sideways.
    inspect_answer(page, lambda: page.locator("#inside-section summary").click())
    page.set_viewport_size({"width": 375, "height": 800})
    page.wait_for_timeout(200)  # the heat map redraws after resizing
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.screenshot(path=str(repo_root / "outputs" / "inside_page_phone.png"), full_page=True)
    assert not errors, f"JavaScript errors: {errors}"


def test_a_stale_look_inside_never_replaces_a_newer_one(server, page):
    """The test holds /v1/inspect's requests back (page.route), answers them with the real server's answers and
    gives the newer request's first."""
    held = []
    page.route("**/v1/inspect", lambda route: held.append(route))
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(server)
    expect(page.locator("#pair")).to_be_enabled()
    page.locator("#source").fill("three")
    page.locator("#inside-section summary").click()

    def wait_for(count: int) -> None:
        deadline = time.monotonic() + 10
        while len(held) < count:  # route handlers run while the page is being waited on
            assert time.monotonic() < deadline, f"no request number {count} to /v1/inspect"
            page.wait_for_timeout(20)

    def real(route) -> dict:
        return httpx.post(f"{server}/v1/inspect", json=route.request.post_data_json).json()

    wait_for(1)
    page.locator("#source").fill("one hundred and twelve")
    wait_for(2)
    newer = real(held[1])
    held[1].fulfill(json=newer)
    source_row = "#pieces-picture figure:nth-of-type(1) tbody tr:first-child td"
    expect(page.locator(source_row)).to_have_count(len(newer["source"]["pieces"]))
    with contextlib.suppress(PlaywrightError):  # the page may have aborted it already: all the better
        held[0].fulfill(json=real(held[0]))
    page.wait_for_timeout(300)
    assert page.locator(source_row).all_text_contents() == newer["source"]["pieces"]
    assert not errors, f"JavaScript errors: {errors}"


def test_the_page_offers_every_pair_of_a_multilingual_model_grouped_by_source(multi_checkpoint, page):
    with serve(multi_checkpoint, "--zero-shot") as url:
        requests = []
        page.on(
            "request", lambda r: requests.append(json.loads(r.post_data)) if r.url.endswith("/v1/translate") else None
        )
        page.goto(url)
        expect(page.locator("#pair")).to_be_enabled()
        groups = page.locator("#pair optgroup")
        expect(groups).to_have_count(3)
        assert groups.evaluate_all("gs => gs.map(g => g.label)") == ["from en", "from de", "from it"]
        labels = page.locator("#pair option").all_inner_texts()
        assert [label.strip() for label in labels] == [
            "en → de", "en → it", "de → en", "de → it  (zero-shot)", "it → en", "it → de  (zero-shot)"
        ]  # fmt: skip
        page.locator("#pair").select_option("de-it")
        assert page.locator("#source").get_attribute("lang") == "de"
        page.locator("#source").fill("zwei")
        expect(page.locator("#status")).to_contain_text("Translated")
        assert (requests[-1]["source"], requests[-1]["target"]) == ("de", "it")
        expected = httpx.post(f"{url}/v1/translate", json=requests[-1]).json()["translations"][0]["text"]
        assert page.locator("#output").text_content() == expected


def test_a_document_translated_in_the_files_view_downloads_with_its_report(server, page, repo_root, tmp_path):
    """A subtitle file chosen in the Files view: sent with the pair, offered back under the server's name with the
    same cues, the report the least confident first; an unknown format and an over-limit file refused before
    anything is sent; the view at phone width without sideways scroll."""
    subtitles = "1\n00:00:01,000 --> 00:00:02,000\ntwo hundred\n\n2\n00:00:03,000 --> 00:00:04,000\nseven\n"
    sent = []
    page.on("request", lambda r: sent.append(r.url) if r.url.endswith("/v1/translate_file") else None)
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(server)
    expect(page.locator("#pair")).to_be_enabled()
    page.locator("#files-section > summary").click()
    expect(page.locator("#files-formats")).to_contain_text(".docx")
    assert ".srt" in page.locator("#files-input").get_attribute("accept").split(",")

    page.locator("#files-input").set_input_files(
        files=[{"name": "r.rtf", "mimeType": "application/rtf", "buffer": b"{\\rtf1}"}]
    )
    expect(page.locator("#files-error")).to_contain_text("r.rtf: the server does not translate this format")
    assert not sent  # refused here

    (tmp_path / "talk.srt").write_text(subtitles)
    page.locator("#files-input").set_input_files(str(tmp_path / "talk.srt"))
    expect(page.locator("#files-download")).to_have_text("Download talk.it.srt")
    expect(page.locator("#files-error")).to_be_empty()
    assert len(sent) == 1
    rows = page.locator("#files-rows tr")
    expect(rows).to_have_count(2)
    confidences = [int(t.strip("%<>")) for t in rows.locator(".files-confidence").all_inner_texts()]
    assert confidences == sorted(confidences)  # the least confident first
    expect(page.locator("#files-summary")).to_contain_text("2 segments, mean confidence")
    with page.expect_download() as download:
        page.locator("#files-download").click()
    cues = download.value.path().read_text().split("\n\n")
    assert download.value.suggested_filename == "talk.it.srt"
    assert [c.splitlines()[:2] for c in cues if c.strip()] == [
        ["1", "00:00:01,000 --> 00:00:02,000"],
        ["2", "00:00:03,000 --> 00:00:04,000"],
    ]
    section_at_both_widths(page, "files-section", repo_root / "outputs" / "files_page")
    assert not errors, f"JavaScript errors: {errors}"


def section_at_both_widths(page: Page, section: str, picture: Path) -> None:
    """Screenshots of one section at desktop width and at a phone's 375 px (`picture`.png, `picture`_phone.png),
    the page never scrolling sideways there (the elements past the edge named when it does)."""
    picture.parent.mkdir(exist_ok=True)
    page.locator(f"#{section}").screenshot(path=f"{picture}.png")
    page.set_viewport_size({"width": 375, "height": 800})
    page.wait_for_timeout(200)
    wide = page.evaluate(
        f"[...document.querySelectorAll('#{section} *')].filter(e => e.getBoundingClientRect().right > 375)"
        ".map(e => e.tagName + '#' + e.id + '.' + e.className + ' ' + e.getBoundingClientRect().right).slice(0, 8)"
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= 375, wide
    page.locator(f"#{section}").screenshot(path=f"{picture}_phone.png")


@pytest.fixture(scope="module")
def run_server(tiny_run):
    with serve(tiny_run / "best") as url:  # the run it sits in is found
        yield url


def test_watch_it_learn_walks_the_kept_models(run_server, page, repo_root):
    asked = []
    page.on("request", lambda r: asked.append(r.url) if r.url.endswith("/v1/replay") else None)
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(run_server)
    expect(page.locator("#pair")).to_be_enabled()
    page.locator("#source").fill("two hundred and five")
    expect(page.locator("#replay-section")).to_be_visible()
    page.wait_for_timeout(500)
    assert not asked  # nothing until the view is opened
    page.locator("#replay-section > summary").click()
    expect(page.locator("#replay-step")).to_have_text("Model 1 of 4: update 1 (snapshot)")
    expect(page.locator("#replay-attention canvas")).to_have_count(1)
    expect(page.locator("#replay-final canvas")).to_have_count(1)
    expect(page.locator("#replay-status")).to_have_text("4 kept models, updates 1 to 8.")
    assert len(asked) == 1

    page.locator("#replay-slider").focus()
    page.keyboard.press("End")
    expect(page.locator("#replay-step")).to_have_text("Model 4 of 4: update 8 (checkpoint)")
    expect(page.locator("#replay-metrics")).to_contain_text("validation BLEU")
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#replay-step")).to_have_text("Model 3 of 4: update 4 (checkpoint)")
    x = page.locator("#replay-curves line.now").get_attribute("x1")
    page.keyboard.press("Home")
    assert page.locator("#replay-curves line.now").get_attribute("x1") != x  # the mark follows the model
    expect(page.locator("#replay-curves polyline")).to_have_count(2)  # training loss and validation BLEU

    page.locator("#replay-play").click()
    expect(page.locator("#replay-step")).to_have_text("Model 2 of 4: update 2 (snapshot)")
    expect(page.locator("#replay-play")).to_have_text("⏸ Pause")
    page.locator("#replay-play").click()
    expect(page.locator("#replay-play")).to_have_text("▶ Play")

    page.locator("#replay-attention canvas").focus()
    expect(page.locator("#replay-readout")).to_contain_text("attends to")
    section_at_both_widths(page, "replay-section", repo_root / "outputs" / "replay_page")
    assert not errors, f"JavaScript errors: {errors}"


def test_a_model_without_its_run_offers_no_replay(server, page):
    page.goto(server)
    expect(page.locator("#pair")).to_be_enabled()
    expect(page.locator("#replay-section")).to_be_hidden()


def test_a_model_that_writes_nothing_is_named_so(run_server, page):
    """A kept model whose translation is empty (EOS first, as early models' often are) says so, as `tnmt replay`
    prints it, instead of an empty line."""

    def empty_first(route):
        data = route.fetch().json()
        data["moments"][0].update(words=[], word_probs=[], greedy="")
        route.fulfill(json=data)

    page.route("**/v1/replay", empty_first)
    page.goto(run_server)
    expect(page.locator("#pair")).to_be_enabled()
    page.locator("#source").fill("two hundred and five")
    expect(page.locator("#replay-section")).to_be_visible()
    page.locator("#replay-section > summary").click()
    expect(page.locator("#replay-step")).to_have_text("Model 1 of 4: update 1 (snapshot)")
    expect(page.locator("#replay-words")).to_have_text("(nothing: the model writes EOS first)")
    expect(page.locator("#replay-greedy")).to_have_text("(nothing: the model writes EOS first)")
    page.locator("#replay-slider").focus()
    page.keyboard.press("End")
    expect(page.locator("#replay-words")).not_to_contain_text("nothing")
