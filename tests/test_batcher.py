"""The server's Batcher on a scripted fake translator (which batches it receives, with which settings) and
on the real tiny Translator (batching never changes an output)."""

import queue
import threading
from concurrent.futures import CancelledError
from dataclasses import replace

import pytest

from tnmt.config import DecodeConfig
from tnmt.decode.constraints import NO_CONSTRAINTS
from tnmt.serve.batcher import Batcher, QueueFull
from tnmt.translate.evidence import Evidence, TokenAttention
from tnmt.translate.prepared import Prepared, Source
from tnmt.translate.replacements import word_replacements
from tnmt.translate.steering import Plan
from tnmt.translate.translation import EMPTY, Translation

WAIT = 10  # seconds: generous bounds on waits that should end at once
SETTINGS = DecodeConfig(beam_size=1, max_len=5)


class ScriptedTranslator:
    """Translates a text to its upper case; a text costs one token per word (+ EOS in the batcher).

    Records every text it prepares (`prepared`, per call), every call as (texts, settings, n_best, attention,
    prepared), and every trace as (text, settings, top_k, prepared); a trace is a tuple saying what it traced. With
    `hold=True` its first call blocks until `release` is set (`busy` tells that the worker is inside it), so the test
    can queue requests meanwhile. Texts listed in `fail_on` make their call or trace raise.
    """

    def __init__(self, *, hold: bool = False, fail_on: tuple[str, ...] = ()) -> None:
        self.decode = SETTINGS
        self.prepared: list[list[str]] = []
        self.calls: list[tuple[list[str], DecodeConfig, int, bool, list[Prepared]]] = []
        self.busy, self.release = threading.Event(), threading.Event()
        self.hold, self.fail_on = hold, fail_on
        self.evidence_asked: list[bool] = []
        self.traced: list[tuple[str, DecodeConfig, int, Prepared]] = []

    def prepare(self, texts, steering=None, settings=None) -> list[Prepared]:
        """Each text read as sent, nothing to constrain; a word is a token."""
        self.prepared.append(list(texts))
        return [
            Prepared(text, Plan(text, NO_CONSTRAINTS), Source(text.split(), text.split(), 1) if text.strip() else None)
            for text in texts
        ]

    def translations(
        self, texts, settings, *, n_best=1, attention=False, evidence=False, prepared
    ) -> list[Translation]:
        self.calls.append((list(texts), settings, n_best, attention, list(prepared)))
        self.evidence_asked.append(evidence)
        if self.hold:
            self.hold = False
            self.busy.set()
            assert self.release.wait(WAIT), "the test never released the worker"
        if failing := [text for text in texts if text in self.fail_on]:
            raise RuntimeError(f"scripted failure on {failing}")
        proof = Evidence([], [], 0.5, ["copy"]) if evidence else None
        return [replace(self._translation(text, n_best, attention), evidence=proof) for text in texts]

    def translate_prepared(self, prepared, settings, **options) -> list[Translation]:
        return self.translations([p.text for p in prepared], settings, prepared=prepared, **options)

    def trace(self, text, settings, *, top_k, prepared) -> tuple:
        self.traced.append((text, settings, top_k, prepared))
        if text in self.fail_on:
            raise RuntimeError(f"scripted failure on {text}")
        return ("trace of", text)

    @staticmethod
    def _translation(text: str, n_best: int, attention: bool) -> Translation:
        nbest = [
            Translation(f"{text.upper()} {k}" if n_best > 1 else text.upper(), [k], -float(k), -k)
            for k in range(n_best)
        ]
        maps = TokenAttention(text.split(), ["<s>", text.upper()], "maps") if attention else None
        return replace(nbest[0], alternatives=tuple(nbest[1:]), attention=maps)

    def batches(self) -> list[list[str]]:
        """The texts of each call, the held first call included."""
        return [texts for texts, *_ in self.calls]


def make_batcher(fake: ScriptedTranslator, **options) -> tuple[Batcher, list[int]]:
    """A started Batcher over `fake` and the list its `on_batch` appends batch sizes to."""
    sizes: list[int] = []
    defaults = {"max_queue": 100, "max_batch_tokens": 1000, "max_wait_ms": 20, "on_batch": sizes.append}
    batcher = Batcher(fake, **{**defaults, **options})
    batcher.start()
    return batcher, sizes


def submit(batcher: Batcher, texts: list[str], settings: DecodeConfig, **options) -> list:
    """Queue texts as the server does (serve/models.py): prepared on arrival by the translator, then submitted."""
    return batcher.submit(batcher.translator.prepare(texts, None, settings), settings, **options)


def trace(batcher: Batcher, text: str, settings: DecodeConfig, *, top_k: int):
    """Queue a trace as the server does: the text prepared on arrival, the trace solo work that reads it."""
    [prepared] = batcher.translator.prepare([text], [None], settings)
    return batcher.solo(prepared, lambda: batcher.translator.trace(text, settings, top_k=top_k, prepared=prepared))


def hold_worker(batcher: Batcher, fake: ScriptedTranslator):
    """Submit a request the fake blocks on, and return its futures once the worker is inside the fake."""
    futures = submit(batcher, ["hold"], SETTINGS)
    assert fake.busy.wait(WAIT)
    return futures


def results(futures) -> list[Translation]:
    return [future.result(timeout=WAIT) for future in futures]


def texts(futures) -> list[str]:
    return [translation.text for translation in results(futures)]


def test_requests_queued_while_the_worker_is_busy_share_one_batch():
    fake = ScriptedTranslator(hold=True)
    batcher, sizes = make_batcher(fake)
    held = hold_worker(batcher, fake)
    a = submit(batcher, ["a"], SETTINGS)
    b = submit(batcher, ["b one", "b two"], SETTINGS)
    c = submit(batcher, ["c"], SETTINGS)
    assert batcher.depth == 4
    fake.release.set()

    assert texts(held) == ["HOLD"]
    assert texts(a) == ["A"]
    assert texts(b) == ["B ONE", "B TWO"]
    assert texts(c) == ["C"]
    assert fake.batches() == [["hold"], ["a", "b one", "b two", "c"]]
    assert sizes == [1, 4]
    assert batcher.depth == 0
    assert fake.evidence_asked == [True, True]  # every answer carries its warnings
    assert a[0].result().evidence.warnings == ["copy"]
    batcher.stop()


def test_a_batch_closes_when_its_token_budget_is_reached():
    # Each request costs 3 tokens (two words + EOS): a budget of 6 takes two requests per batch.
    fake = ScriptedTranslator(hold=True)
    batcher, sizes = make_batcher(fake, max_batch_tokens=6)
    hold_worker(batcher, fake)
    futures = [submit(batcher, [f"w{i} x"], SETTINGS)[0] for i in range(5)]
    fake.release.set()

    assert texts(futures) == [f"W{i} X" for i in range(5)]
    assert fake.batches()[1:] == [["w0 x", "w1 x"], ["w2 x", "w3 x"], ["w4 x"]]
    assert sizes == [1, 2, 2, 1]
    batcher.stop()


def test_a_long_request_is_decoded_in_runs_in_turn_with_the_others():
    """A request over the budget (a long text's sentences) goes a run at a time: a short request sent after it
    is decoded after its first run, not after all of them, and each answer keeps its order."""
    fake = ScriptedTranslator(hold=True)
    batcher, _ = make_batcher(fake, max_batch_tokens=6)
    hold_worker(batcher, fake)
    long = submit(batcher, [f"s{i} x" for i in range(6)], SETTINGS)  # 3 tokens each: three runs of two
    short = submit(batcher, ["q x"], SETTINGS)
    fake.release.set()

    assert texts(long) == [f"S{i} X" for i in range(6)] and texts(short) == ["Q X"]
    assert fake.batches()[1:] == [["s0 x", "s1 x"], ["q x"], ["s2 x", "s3 x"], ["s4 x", "s5 x"]]
    batcher.stop()


def test_a_long_requests_runs_are_max_run_tokens_and_decode_alone_between_the_short_requests():
    """`max_run_tokens` slices a document finer than the batch budget: short requests still share one batch of
    up to `max_batch_tokens`, a long one goes in runs of `max_run_tokens`, each run a batch of its own (a short
    request never decodes beside a document's sentences), a short one sent after it waiting for one run only,
    and the runs stay short while short requests came of late."""
    fake = ScriptedTranslator(hold=True)
    batcher, _ = make_batcher(fake, max_batch_tokens=12, max_run_tokens=3)
    hold_worker(batcher, fake)
    long = submit(batcher, [f"s{i} x" for i in range(3)], SETTINGS)  # 3 tokens each: three runs of one
    shorts = [submit(batcher, [f"q{i} x"], SETTINGS)[0] for i in range(3)]
    fake.release.set()

    assert texts(long) == [f"S{i} X" for i in range(3)] and texts(shorts) == ["Q0 X", "Q1 X", "Q2 X"]
    assert fake.batches()[1:] == [["s0 x"], ["q0 x", "q1 x", "q2 x"], ["s1 x"], ["s2 x"]]
    batcher.stop()


def test_a_long_request_alone_decodes_in_batches_of_the_whole_budget(monkeypatch):
    """Runs are short so that a short request waits little; with no short request of late, they join up to the
    budget."""
    import tnmt.serve.batcher

    monkeypatch.setattr(tnmt.serve.batcher, "QUIET_S", 0.0)  # the held request, a short one, is long ago
    fake = ScriptedTranslator(hold=True)
    batcher, _ = make_batcher(fake, max_batch_tokens=9, max_run_tokens=3)
    hold_worker(batcher, fake)
    long = submit(batcher, [f"s{i} x" for i in range(7)], SETTINGS)  # 3 tokens each: seven runs of one
    fake.release.set()

    assert texts(long) == [f"S{i} X" for i in range(7)]
    assert fake.batches()[1:] == [["s0 x", "s1 x", "s2 x"], ["s3 x", "s4 x", "s5 x"], ["s6 x"]]
    batcher.stop()


def test_with_short_requests_always_waiting_a_long_request_still_gets_every_other_batch():
    """The batches alternate while both kinds wait: a stream of short requests cannot starve a document."""
    fake = ScriptedTranslator(hold=True)
    batcher, _ = make_batcher(fake, max_batch_tokens=3, max_run_tokens=3)
    hold_worker(batcher, fake)
    long = submit(batcher, [f"s{i} x" for i in range(3)], SETTINGS)
    shorts = [submit(batcher, [f"q{i} x"], SETTINGS)[0] for i in range(4)]  # one per batch: the budget is 3
    fake.release.set()

    results([*long, *shorts])
    expected = [["s0 x"], ["q0 x"], ["s1 x"], ["q1 x"], ["s2 x"], ["q2 x"], ["q3 x"]]
    assert fake.batches()[1:] == expected
    batcher.stop()


def test_a_request_of_blank_texts_queues_nothing_and_the_worker_lives_on():
    fake = ScriptedTranslator()
    batcher, _ = make_batcher(fake)
    assert submit(batcher, ["", "  "], SETTINGS)[0].result(WAIT).text == ""  # blank: never decoded
    assert batcher.submit([], SETTINGS) == []
    assert texts(submit(batcher, ["a"], SETTINGS)) == ["A"]
    batcher.stop()


def test_a_batch_never_exceeds_its_token_budget():
    """ServeConfig.max_batch_tokens promises "source tokens decoded together at most": a request that does
    not fit waits for the next batch (only a request alone may be over the budget)."""
    fake = ScriptedTranslator(hold=True)
    batcher, _ = make_batcher(fake, max_batch_tokens=5)
    hold_worker(batcher, fake)
    futures = [submit(batcher, [f"w{i} x"], SETTINGS)[0] for i in range(3)]  # 3 tokens each
    fake.release.set()

    results(futures)
    assert fake.batches()[1:] == [["w0 x"], ["w1 x"], ["w2 x"]]
    batcher.stop()


def test_a_batch_waits_for_more_within_max_wait_and_closes_at_the_budget():
    # max_wait of a minute: the batch must close because the second request fills the budget, not by timeout.
    fake = ScriptedTranslator()
    batcher, sizes = make_batcher(fake, max_batch_tokens=4, max_wait_ms=60_000)
    first = submit(batcher, ["a"], SETTINGS)  # 2 tokens: the worker takes it and waits for more
    second = submit(batcher, ["b"], SETTINGS)
    assert texts(first + second) == ["A", "B"]
    assert fake.batches() == [["a", "b"]]
    assert sizes == [2]
    batcher.stop()


def test_a_batch_does_not_wait_for_a_request_that_never_comes():
    fake = ScriptedTranslator()
    batcher, sizes = make_batcher(fake, max_wait_ms=50)
    assert texts(submit(batcher, ["alone"], SETTINGS)) == ["ALONE"]
    assert sizes == [1]
    batcher.stop()


def test_without_batching_each_request_is_its_own_batch():
    fake = ScriptedTranslator(hold=True)
    batcher, sizes = make_batcher(fake, batching=False, max_wait_ms=60_000)
    hold_worker(batcher, fake)
    futures = [submit(batcher, ["a"], SETTINGS), submit(batcher, ["b one", "b two"], SETTINGS)]
    futures.append(submit(batcher, ["c"], SETTINGS))
    fake.release.set()

    assert [texts(f) for f in futures] == [["A"], ["B ONE", "B TWO"], ["C"]]
    assert fake.batches() == [["hold"], ["a"], ["b one", "b two"], ["c"]]
    assert sizes == [1, 1, 2, 1]
    batcher.stop()


def test_a_full_queue_refuses_the_whole_request_and_queues_nothing():
    fake = ScriptedTranslator(hold=True)
    batcher, _ = make_batcher(fake, max_queue=3)
    hold_worker(batcher, fake)  # taken off the queue: it no longer counts
    accepted = submit(batcher, ["a", "b"], SETTINGS)
    with pytest.raises(QueueFull):
        submit(batcher, ["refused one", "refused two"], SETTINGS)
    assert batcher.depth == 2
    accepted += submit(batcher, ["c"], SETTINGS)  # exactly fills the queue
    with pytest.raises(QueueFull):
        submit(batcher, ["refused three"], SETTINGS)
    fake.release.set()

    assert texts(accepted) == ["A", "B", "C"]
    assert fake.batches() == [["hold"], ["a", "b", "c"]]
    batcher.stop()


def test_a_cancelled_job_is_skipped():
    fake = ScriptedTranslator(hold=True)
    batcher, sizes = make_batcher(fake)
    hold_worker(batcher, fake)
    kept = submit(batcher, ["kept"], SETTINGS)
    given_up = submit(batcher, ["given up", "also given up"], SETTINGS)
    assert all(future.cancel() for future in given_up)  # what the app does at a request's deadline
    fake.release.set()

    assert texts(kept) == ["KEPT"]
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
    accepted = submit(batcher, ["a"], SETTINGS) + submit(batcher, ["b"], SETTINGS)
    stopper = threading.Thread(target=batcher.stop)
    stopper.start()
    fake.release.set()
    stopper.join(WAIT)

    assert not stopper.is_alive(), "stop() did not return"
    assert all(future.done() for future in held + accepted)  # stop() returned after they were decoded
    assert texts(held + accepted) == ["HOLD", "A", "B"]
    assert [text for batch in fake.batches() for text in batch] == ["hold", "a", "b"]


def test_an_error_reaches_the_futures_of_its_group_and_the_worker_keeps_serving():
    fake = ScriptedTranslator(hold=True, fail_on=("boom",))
    batcher, _ = make_batcher(fake)
    hold_worker(batcher, fake)
    boom = submit(batcher, ["boom"], SETTINGS)
    same_group = submit(batcher, ["fine"], SETTINGS)
    other_group = submit(batcher, ["other"], replace(SETTINGS, beam_size=3))
    fake.release.set()

    for future in boom + same_group:
        with pytest.raises(RuntimeError, match="scripted failure"):
            future.result(timeout=WAIT)
    assert texts(other_group) == ["OTHER"]
    assert texts(submit(batcher, ["later"], SETTINGS)) == ["LATER"]
    batcher.stop()


def test_groups_with_different_settings_are_decoded_separately():
    fake = ScriptedTranslator(hold=True)
    batcher, sizes = make_batcher(fake)
    hold_worker(batcher, fake)
    beam3 = replace(SETTINGS, beam_size=3)
    greedy_a = submit(batcher, ["a"], SETTINGS)
    beam_b = submit(batcher, ["b"], beam3)
    greedy_c = submit(batcher, ["c one", "c two"], SETTINGS)
    nbest_d = submit(batcher, ["d"], beam3, n_best=2)
    attention_e = submit(batcher, ["e"], SETTINGS, attention=True)
    fake.release.set()

    assert texts(greedy_a + greedy_c) == ["A", "C ONE", "C TWO"]
    assert texts(beam_b) == ["B"]
    assert [(t.text, t.score) for t in results(nbest_d)[0].nbest] == [("D 0", -0.0), ("D 1", -1.0)]
    assert results(attention_e)[0].attention == (["e"], ["<s>", "E"], "maps")
    assert sizes == [1, 3, 1, 1, 1]
    calls = [
        (texts, settings.beam_size, settings.batch_size, n_best, attention)
        for texts, settings, n_best, attention, _ in fake.calls[1:]
    ]
    assert calls == [
        (["a", "c one", "c two"], 1, 3, 1, False),  # one decoder batch for the group
        (["b"], 3, 1, 1, False),
        (["d"], 3, 1, 2, False),
        (["e"], 1, 1, 1, True),  # searched once; the maps explain its best output
    ]
    batcher.stop()


def test_texts_prepared_on_arrival_travel_to_the_search_as_they_are():
    fake = ScriptedTranslator()
    batcher, _ = make_batcher(fake)
    prepared = fake.prepare(["a b", "", "c"], None, SETTINGS)
    assert texts(batcher.submit(prepared, SETTINGS)) == ["A B", "", "C"]
    batcher.stop()
    assert fake.prepared == [["a b", "", "c"]]  # once, on arrival: the batcher never prepares again
    [(_, _, _, _, searched)] = fake.calls
    assert len(searched) == 3 and all(got is sent for got, sent in zip(searched, prepared, strict=True))


def test_a_trace_waits_in_the_queue_with_the_translations_and_resolves_to_its_trace():
    fake = ScriptedTranslator(hold=True)
    batcher, sizes = make_batcher(fake)
    hold_worker(batcher, fake)
    a = submit(batcher, ["a"], SETTINGS)
    traced = trace(batcher, "b c", replace(SETTINGS, beam_size=2), top_k=3)
    d = submit(batcher, ["d"], SETTINGS)
    assert batcher.depth == 3
    fake.release.set()

    assert traced.result(timeout=WAIT) == ("trace of", "b c")
    assert texts(a + d) == ["A", "D"]
    assert fake.batches() == [["hold"], ["a", "d"]]  # the trace is no part of the translations' batch
    [(text, settings, top_k, prepared)] = fake.traced
    assert (text, settings, top_k) == ("b c", replace(SETTINGS, beam_size=2), 3)
    assert prepared.source == Source(["b", "c"], ["b", "c"], 1)  # what it was prepared as, on arrival
    assert fake.prepared == [["hold"], ["a"], ["b c"], ["d"]]  # each text prepared once
    assert sizes == [1, 2, 1]  # a trace follows one search: a batch of one
    assert batcher.depth == 0
    batcher.stop()


def test_a_trace_is_refused_by_a_full_queue_and_its_error_reaches_only_its_future():
    fake = ScriptedTranslator(hold=True, fail_on=("boom",))
    batcher, _ = make_batcher(fake, max_queue=2)
    hold_worker(batcher, fake)
    boom = trace(batcher, "boom", SETTINGS, top_k=1)
    fine = submit(batcher, ["fine"], SETTINGS)
    with pytest.raises(QueueFull):
        trace(batcher, "refused", SETTINGS, top_k=1)
    fake.release.set()

    with pytest.raises(RuntimeError, match="scripted failure"):
        boom.result(timeout=WAIT)
    assert texts(fine) == ["FINE"]
    assert [text for text, *_ in fake.traced] == ["boom"]
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


@pytest.mark.parametrize("beam_size", [1, 2])
def test_batched_outputs_equal_translating_each_sentence_alone(tiny_translator, beam_size):
    sizes: list[int] = []
    batcher = Batcher(tiny_translator, max_queue=100, max_batch_tokens=10_000, max_wait_ms=20, on_batch=sizes.append)
    settings = replace(tiny_translator.decode, beam_size=beam_size, segment=False)  # the batcher's are sentences
    futures = [submit(batcher, [text], settings)[0] for text in SENTENCES]  # queued before the worker starts
    nbest = [submit(batcher, [text], settings, n_best=beam_size)[0] for text in SENTENCES]
    batcher.start()
    batcher.stop()

    assert sizes == ([len(SENTENCES), len(SENTENCES)] if beam_size > 1 else [2 * len(SENTENCES)])  # really batched
    assert [future.result().text for future in futures] == [
        tiny_translator.translate([text], settings)[0] for text in SENTENCES
    ]
    if beam_size > 1:
        for text, future in zip(SENTENCES, nbest, strict=True):
            alone = tiny_translator.translations([text], settings, n_best=beam_size)[0].nbest
            assert [t.text for t in future.result().nbest] == [r.text for r in alone]
            assert [t.score for t in future.result().nbest] == pytest.approx([r.score for r in alone], abs=1e-5)


def test_solo_work_queued_among_translations_gives_what_it_gives_alone(tiny_translator):
    """A solo feature reads the text prepared on arrival; sharing the worker with a batch changes nothing."""
    batcher = Batcher(tiny_translator, max_queue=100, max_batch_tokens=10_000, max_wait_ms=20)
    settings = replace(tiny_translator.decode, beam_size=2, segment=False)  # the batcher's texts are sentences
    text = SENTENCES[1]
    translated = submit(batcher, SENTENCES, settings)
    traced = trace(batcher, text, settings, top_k=3)
    [prepared] = tiny_translator.prepare([text], None, settings)
    replaced = batcher.solo(
        prepared, lambda: word_replacements(tiny_translator, text, 0, 2, settings, prepared=prepared)
    )
    batcher.start()
    batcher.stop()

    alone = tiny_translator.trace(text, settings, top_k=3)
    assert (traced.result().translation, traced.result().source_pieces) == (alone.translation, alone.source_pieces)
    assert len(traced.result().steps) == len(alone.steps)
    assert replaced.result() == word_replacements(tiny_translator, text, 0, 2, settings)
    assert [future.result().text for future in translated] == tiny_translator.translate(SENTENCES, settings)


def test_the_worker_decodes_with_its_own_torch_threads_and_leaves_the_callers_alone():
    """The worker sets `threads` in its own thread: the thread that built the model keeps one (see Batcher._run)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        fake = ScriptedTranslator()
        seen = []
        fake.translations = lambda texts, *args, **options: seen.append(torch.get_num_threads()) or [EMPTY] * len(texts)
        batcher, _ = make_batcher(fake, threads=3)  # neither 1 nor the default
        submit(batcher, ["one"], SETTINGS)[0].result(WAIT)
        batcher.stop()
        assert seen == [3] and torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


class RecordingQueue(queue.Queue):
    """A queue that records the timeout of every `get` that may wait (None: a blocking get for the next batch); a
    `get_nowait` (what is queued already joins the turn) never waits and is not recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []

    def get(self, block=True, timeout=None):
        if block:
            self.timeouts.append(timeout)
        return super().get(block, timeout)


def test_a_lone_client_does_not_wait_for_company_after_its_first_request():
    """A batch that gathered one request (nobody else sent anything meanwhile) makes the next batch take only what
    is queued already: a lone client would pay `max_wait_ms` on every request for nothing."""
    fake = ScriptedTranslator()
    batcher = Batcher(fake, max_queue=100, max_batch_tokens=1000, max_wait_ms=200)
    batcher._requests = waits = RecordingQueue()
    batcher.start()
    assert [t.text for t in results(submit(batcher, ["a"], SETTINGS))] == ["A"]
    assert [t.text for t in results(submit(batcher, ["b"], SETTINGS))] == ["B"]
    batcher.stop()
    # each batch: a blocking get (None) for its first request, then waits for company
    starts = [i for i, timeout in enumerate(waits.timeouts) if timeout is None]
    first, second = (waits.timeouts[start + 1] for start in starts[:2])
    assert first > 0.1  # the first request: up to max_wait_ms
    assert second == 0  # after a lone batch: only what is queued already
