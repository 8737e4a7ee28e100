"""The server's Batcher on a scripted fake translator (which batches it receives, with which settings) and
on the real tiny Translator (batching never changes an output)."""

import threading
from concurrent.futures import CancelledError
from dataclasses import replace
from types import SimpleNamespace

import pytest

from tnmt.config import DecodeConfig
from tnmt.decode.translator import Translator
from tnmt.serve.batcher import Batcher, QueueFull

WAIT = 10  # seconds: generous bounds on waits that should end at once
SETTINGS = DecodeConfig(beam_size=1, max_len=5)


class ScriptedTranslator:
    """Translates a text to its upper case; a text costs one token per word (+ EOS in the batcher).

    Records every call as (method, texts, decode settings). With `hold=True` its first call blocks until
    `release` is set (`busy` tells that the worker is inside it), so the test can queue requests meanwhile.
    Texts listed in `fail_on` make their call raise.
    """

    def __init__(self, *, hold: bool = False, fail_on: tuple[str, ...] = ()) -> None:
        self.tokenizer = SimpleNamespace(encode_source=lambda text: text.split())
        self.decode = SETTINGS
        self.calls: list[tuple[str, list[str], dict]] = []
        self.busy, self.release = threading.Event(), threading.Event()
        self.hold, self.fail_on = hold, fail_on

    def _call(self, method: str, texts: list[str], decode: dict) -> None:
        self.calls.append((method, list(texts), decode))
        if self.hold:
            self.hold = False
            self.busy.set()
            assert self.release.wait(WAIT), "the test never released the worker"
        if failing := [text for text in texts if text in self.fail_on]:
            raise RuntimeError(f"scripted failure on {failing}")

    def translate(self, texts: list[str], **decode) -> list[str]:
        self._call("translate", texts, decode)
        return [text.upper() for text in texts]

    def translate_nbest(self, texts: list[str], *, n_best: int, **decode) -> list[list[SimpleNamespace]]:
        self._call("translate_nbest", texts, decode)
        n = n_best
        return [
            [SimpleNamespace(text=f"{text.upper()} {k}", score=-float(k), tokens=[text.upper(), k]) for k in range(n)]
            for text in texts
        ]

    def attention(self, text: str, *, output: list, **decode) -> tuple:
        self._call("attention", [text], {"output": output, **decode})
        return (text.split(), ["<s>", *output], "maps")

    def batches(self) -> list[list[str]]:
        """The texts of each call, the held first call included."""
        return [texts for _, texts, _ in self.calls]


def make_batcher(fake: ScriptedTranslator, **options) -> tuple[Batcher, list[int]]:
    """A started Batcher over `fake` and the list its `on_batch` appends batch sizes to."""
    sizes: list[int] = []
    defaults = {"max_queue": 100, "max_batch_tokens": 1000, "max_wait_ms": 20, "on_batch": sizes.append}
    batcher = Batcher(fake, **{**defaults, **options})
    batcher.start()
    return batcher, sizes


def hold_worker(batcher: Batcher, fake: ScriptedTranslator):
    """Submit a request the fake blocks on, and return its futures once the worker is inside the fake."""
    futures = batcher.submit(["hold"], SETTINGS)
    assert fake.busy.wait(WAIT)
    return futures


def results(futures) -> list:
    return [future.result(timeout=WAIT) for future in futures]


def test_requests_queued_while_the_worker_is_busy_share_one_batch():
    fake = ScriptedTranslator(hold=True)
    batcher, sizes = make_batcher(fake)
    held = hold_worker(batcher, fake)
    a = batcher.submit(["a"], SETTINGS)
    b = batcher.submit(["b one", "b two"], SETTINGS)
    c = batcher.submit(["c"], SETTINGS)
    assert batcher.depth == 4
    fake.release.set()

    assert results(held) == [[("HOLD", None)]]
    assert results(a) == [[("A", None)]]
    assert results(b) == [[("B ONE", None)], [("B TWO", None)]]
    assert results(c) == [[("C", None)]]
    assert fake.batches() == [["hold"], ["a", "b one", "b two", "c"]]
    assert sizes == [1, 4]
    assert batcher.depth == 0
    batcher.stop()


def test_a_batch_closes_when_its_token_budget_is_reached():
    # Each request costs 3 tokens (two words + EOS): a budget of 6 takes two requests per batch.
    fake = ScriptedTranslator(hold=True)
    batcher, sizes = make_batcher(fake, max_batch_tokens=6)
    hold_worker(batcher, fake)
    futures = [batcher.submit([f"w{i} x"], SETTINGS)[0] for i in range(5)]
    fake.release.set()

    assert results(futures) == [[(f"W{i} X", None)] for i in range(5)]
    assert fake.batches()[1:] == [["w0 x", "w1 x"], ["w2 x", "w3 x"], ["w4 x"]]
    assert sizes == [1, 2, 2, 1]
    batcher.stop()


def test_a_batch_never_exceeds_its_token_budget():
    """ServeConfig.max_batch_tokens promises "source tokens decoded together at most": a request that does
    not fit waits for the next batch (only a request alone may be over the budget)."""
    fake = ScriptedTranslator(hold=True)
    batcher, _ = make_batcher(fake, max_batch_tokens=5)
    hold_worker(batcher, fake)
    futures = [batcher.submit([f"w{i} x"], SETTINGS)[0] for i in range(3)]  # 3 tokens each
    fake.release.set()

    results(futures)
    assert fake.batches()[1:] == [["w0 x"], ["w1 x"], ["w2 x"]]
    batcher.stop()


def test_a_batch_waits_for_more_within_max_wait_and_closes_at_the_budget():
    # max_wait of a minute: the batch must close because the second request fills the budget, not by timeout.
    fake = ScriptedTranslator()
    batcher, sizes = make_batcher(fake, max_batch_tokens=4, max_wait_ms=60_000)
    first = batcher.submit(["a"], SETTINGS)  # 2 tokens: the worker takes it and waits for more
    second = batcher.submit(["b"], SETTINGS)
    assert results(first + second) == [[("A", None)], [("B", None)]]
    assert fake.batches() == [["a", "b"]]
    assert sizes == [2]
    batcher.stop()


def test_a_batch_does_not_wait_for_a_request_that_never_comes():
    fake = ScriptedTranslator()
    batcher, sizes = make_batcher(fake, max_wait_ms=50)
    assert results(batcher.submit(["alone"], SETTINGS)) == [[("ALONE", None)]]
    assert sizes == [1]
    batcher.stop()


def test_without_batching_each_request_is_its_own_batch():
    fake = ScriptedTranslator(hold=True)
    batcher, sizes = make_batcher(fake, batching=False, max_wait_ms=60_000)
    hold_worker(batcher, fake)
    futures = [batcher.submit(["a"], SETTINGS), batcher.submit(["b one", "b two"], SETTINGS)]
    futures.append(batcher.submit(["c"], SETTINGS))
    fake.release.set()

    assert [results(f) for f in futures] == [[[("A", None)]], [[("B ONE", None)], [("B TWO", None)]], [[("C", None)]]]
    assert fake.batches() == [["hold"], ["a"], ["b one", "b two"], ["c"]]
    assert sizes == [1, 1, 2, 1]
    batcher.stop()


def test_a_full_queue_refuses_the_whole_request_and_queues_nothing():
    fake = ScriptedTranslator(hold=True)
    batcher, _ = make_batcher(fake, max_queue=3)
    hold_worker(batcher, fake)  # taken off the queue: it no longer counts
    accepted = batcher.submit(["a", "b"], SETTINGS)
    with pytest.raises(QueueFull):
        batcher.submit(["refused one", "refused two"], SETTINGS)
    assert batcher.depth == 2
    accepted += batcher.submit(["c"], SETTINGS)  # exactly fills the queue
    with pytest.raises(QueueFull):
        batcher.submit(["refused three"], SETTINGS)
    fake.release.set()

    assert results(accepted) == [[("A", None)], [("B", None)], [("C", None)]]
    assert fake.batches() == [["hold"], ["a", "b", "c"]]
    batcher.stop()


def test_a_cancelled_job_is_skipped():
    fake = ScriptedTranslator(hold=True)
    batcher, sizes = make_batcher(fake)
    hold_worker(batcher, fake)
    kept = batcher.submit(["kept"], SETTINGS)
    given_up = batcher.submit(["given up", "also given up"], SETTINGS)
    assert all(future.cancel() for future in given_up)  # what the app does at a request's deadline
    fake.release.set()

    assert results(kept) == [[("KEPT", None)]]
    assert all(future.cancelled() for future in given_up)
    with pytest.raises(CancelledError):
        given_up[0].result(timeout=WAIT)
    assert fake.batches() == [["hold"], ["kept"]]
    assert sizes == [1, 1]
    assert batcher.depth == 0
    batcher.stop()


@pytest.mark.parametrize("batching", [True, False])
def test_stop_finishes_every_accepted_job_then_ends_the_worker(batching):
    fake = ScriptedTranslator(hold=True)
    batcher, _ = make_batcher(fake, batching=batching)
    held = hold_worker(batcher, fake)
    accepted = batcher.submit(["a"], SETTINGS) + batcher.submit(["b"], SETTINGS)
    stopper = threading.Thread(target=batcher.stop)
    stopper.start()
    fake.release.set()
    stopper.join(WAIT)

    assert not stopper.is_alive(), "stop() did not return"
    assert all(future.done() for future in held + accepted)  # stop() returned after they were decoded
    assert results(held + accepted) == [[("HOLD", None)], [("A", None)], [("B", None)]]
    assert [text for batch in fake.batches() for text in batch] == ["hold", "a", "b"]


def test_an_error_reaches_the_futures_of_its_group_and_the_worker_keeps_serving():
    fake = ScriptedTranslator(hold=True, fail_on=("boom",))
    batcher, _ = make_batcher(fake)
    hold_worker(batcher, fake)
    boom = batcher.submit(["boom"], SETTINGS)
    same_group = batcher.submit(["fine"], SETTINGS)
    other_group = batcher.submit(["other"], replace(SETTINGS, beam_size=3))
    fake.release.set()

    for future in boom + same_group:
        with pytest.raises(RuntimeError, match="scripted failure"):
            future.result(timeout=WAIT)
    assert results(other_group) == [[("OTHER", None)]]
    assert results(batcher.submit(["later"], SETTINGS)) == [[("LATER", None)]]
    batcher.stop()


def test_groups_with_different_settings_are_decoded_separately():
    fake = ScriptedTranslator(hold=True)
    batcher, sizes = make_batcher(fake)
    hold_worker(batcher, fake)
    beam3 = replace(SETTINGS, beam_size=3)
    greedy_a = batcher.submit(["a"], SETTINGS)
    beam_b = batcher.submit(["b"], beam3)
    greedy_c = batcher.submit(["c one", "c two"], SETTINGS)
    nbest_d = batcher.submit(["d"], beam3, n_best=2)
    attention_e = batcher.submit(["e"], SETTINGS, attention=True)
    fake.release.set()

    assert results(greedy_a + greedy_c) == [[("A", None)], [("C ONE", None)], [("C TWO", None)]]
    assert results(beam_b) == [[("B", None)]]
    assert results(nbest_d) == [[("D 0", -0.0), ("D 1", -1.0)]]
    assert results(attention_e) == [([("E 0", None)], (["e"], ["<s>", "E", 0], "maps"))]
    assert sizes == [1, 3, 1, 1, 1]
    calls = [(call, texts, decode.get("beam_size"), decode.get("batch_size")) for call, texts, decode in fake.calls[1:]]
    assert calls == [
        ("translate", ["a", "c one", "c two"], 1, 3),  # one decoder batch for the group
        ("translate", ["b"], 3, 1),
        ("translate_nbest", ["d"], 3, 1),
        ("translate_nbest", ["e"], 1, 1),  # searched once; the maps explain its best output
        ("attention", ["e"], None, None),
    ]
    assert fake.calls[-1][2] == {"output": ["E", 0]}
    assert all("quantize" not in decode for _, _, decode in fake.calls)  # fixed when the model was loaded
    batcher.stop()


SENTENCES = [
    "one",
    "two hundred and five",
    "seven thousand, three hundred and forty-two",
    "",
    "nine thousand nine hundred and ninety-nine",
    "eighty",
    "one thousand and one",
]


@pytest.fixture(scope="module")
def translator(tiny_checkpoint) -> Translator:
    return Translator.from_checkpoint(tiny_checkpoint)


@pytest.mark.parametrize("beam_size", [1, 2])
def test_batched_outputs_equal_translating_each_sentence_alone(translator, beam_size):
    sizes: list[int] = []
    batcher = Batcher(translator, max_queue=100, max_batch_tokens=10_000, max_wait_ms=20, on_batch=sizes.append)
    settings = replace(translator.decode, beam_size=beam_size)
    futures = [batcher.submit([text], settings)[0] for text in SENTENCES]  # queued before the worker starts
    nbest = [batcher.submit([text], settings, n_best=beam_size)[0] for text in SENTENCES]
    batcher.start()
    batcher.stop()

    assert sizes == ([len(SENTENCES), len(SENTENCES)] if beam_size > 1 else [2 * len(SENTENCES)])  # really batched
    assert [future.result()[0][0] for future in futures] == [
        translator.translate([text], beam_size=beam_size)[0] for text in SENTENCES
    ]
    if beam_size > 1:
        for text, future in zip(SENTENCES, nbest, strict=True):
            alone = translator.translate_nbest([text], n_best=beam_size, beam_size=beam_size)[0]
            assert [t for t, _ in future.result()] == [r.text for r in alone]
            assert [s for _, s in future.result()] == pytest.approx([r.score for r in alone], abs=1e-5)


def test_the_worker_decodes_with_its_own_torch_threads_and_leaves_the_callers_alone():
    """The worker sets `threads` in its own thread: the thread that built the model keeps one (see Batcher._run)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fake = ScriptedTranslator()
        seen = []
        fake.translate = lambda texts, **decode: seen.append(torch.get_num_threads()) or list(texts)
        batcher, _ = make_batcher(fake, threads=3)  # neither 1 nor the default
        batcher.submit(["one"], SETTINGS)[0].result(WAIT)
        batcher.stop()
        assert seen == [3] and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
