"""serve/models.py's passage to a model on a scripted batcher: translations and solo features (a trace, a word's
replacements, a look inside) share its queue refusal, deadline and hang-up handling, and pick and check_limits say
what was wrong."""

import asyncio
import json
import shutil
import time
from concurrent.futures import Future

import pytest

from tnmt.config import DecodeConfig, ServeConfig
from tnmt.errors import UserError
from tnmt.serve.batcher import QueueFull
from tnmt.serve.models import (
    CLIENT_GONE,
    ApiError,
    Deadline,
    ServedModel,
    check_limits,
    load_models,
    pick,
    solo,
    translations,
)
from tnmt.translate.prepared import Prepared, Source
from tnmt.translate.whole import Split

SETTINGS = DecodeConfig(beam_size=1, max_len=5)


class ScriptedBatcher:
    """Hands out futures the test settles (`futures`), or refuses with QueueFull when `full`."""

    def __init__(self, *, full: bool = False) -> None:
        self.full = full
        self.max_queue = 1024
        self.futures: list[Future] = []
        self.queued: list = []  # what each call queued: a request's prepared texts, or a solo's (prepared, work)

    def _queue(self, n: int) -> list[Future]:
        if self.full:
            raise QueueFull("2 sentences are queued (max_queue=2)")
        self.futures += [Future() for _ in range(n)]
        return self.futures[-n:]

    def submit(self, prepared, settings, *, n_best=1, attention=False) -> list[Future]:
        futures = self._queue(len(prepared))
        self.queued.append(prepared)
        return futures

    def solo(self, prepared, work) -> Future:
        [future] = self._queue(1)
        self.queued.append((prepared, work))
        return future


class ScriptedTranslator:
    """Prepares a text as itself, a word a token, and a text of "🐶" as one the model reads nothing of; refuses a
    steering entry that is the string "bad"."""

    def prepare(self, texts, steering=None, settings=None) -> list[Prepared]:
        if steering is not None and "bad" in steering:
            raise UserError("glossary[0]: a scripted bad entry")
        read = [text.replace("🐶", "").strip() for text in texts]
        return [
            Prepared(text, None, Source([5] * len(r.split()), None, 1) if r else None)
            for text, r in zip(texts, read, strict=True)
        ]

    def split(self, texts, steering=None, settings=None) -> Split:
        """Each text one sentence (segmentation is translate/segment.py's, tested there)."""
        return Split(None, self.prepare(texts, steering, settings))

    def translated(self, split, settings=None, *, segments) -> list:
        return split.joined(segments)


async def queued(batcher: ScriptedBatcher, n: int) -> None:
    """Wait until the batcher holds `n` futures: a passage splits its text in the text workers' pool first."""
    for _ in range(2000):
        if len(batcher.futures) >= n:
            return
        await asyncio.sleep(0.001)
    raise AssertionError(f"{len(batcher.futures)} of {n} futures queued")


class Client:
    """A request's client: connected until `leave()`."""

    def __init__(self) -> None:
        self.gone = asyncio.Event()

    async def receive(self) -> dict:
        await self.gone.wait()
        return {"type": "http.disconnect"}


def served(batcher: ScriptedBatcher, source: str = "en", target: str = "it") -> ServedModel:
    return ServedModel(source, target, translator=ScriptedTranslator(), batcher=batcher)


PASSAGES = {
    "translations": lambda model, client, timeout: translations(
        model, ["a", "b"], SETTINGS, deadline=Deadline(timeout), client=client
    ),
    "solo": lambda model, client, timeout: solo(
        model, "a", SETTINGS, lambda translator, prepared: "never run", deadline=Deadline(timeout), client=client
    ),
}


def test_each_passage_resolves_to_its_own_result():
    async def run() -> tuple:
        batcher = ScriptedBatcher()
        model = served(batcher)
        translated = asyncio.ensure_future(PASSAGES["translations"](model, Client(), 10))
        await queued(batcher, 2)
        for future, text in zip(batcher.futures, ["A", "B"], strict=True):
            future.set_result(text)
        traced = asyncio.ensure_future(PASSAGES["solo"](model, Client(), 10))
        await queued(batcher, 3)
        batcher.futures[-1].set_result("trace of a")
        return await translated, await traced

    assert asyncio.run(run()) == (["A", "B"], "trace of a")  # a list of translations; one solo result, not a list


@pytest.mark.parametrize("passage", PASSAGES)
def test_a_full_queue_is_503_with_retry_after(passage):
    with pytest.raises(ApiError) as refused:
        asyncio.run(PASSAGES[passage](served(ScriptedBatcher(full=True)), Client(), 10))
    assert refused.value.status == 503 and refused.value.headers == {"Retry-After": "1"}
    assert refused.value.message == "server busy: 2 sentences are queued (max_queue=2)"


@pytest.mark.parametrize("passage", PASSAGES)
def test_past_the_deadline_the_sentences_not_started_are_dropped(passage):
    batcher = ScriptedBatcher()
    with pytest.raises(ApiError) as late:
        asyncio.run(PASSAGES[passage](served(batcher), Client(), 0.05))
    assert (late.value.status, late.value.message) == (504, "no translation within the deadline of 0.05 s")
    assert batcher.futures and all(future.cancelled() for future in batcher.futures)  # the worker skips them


def test_a_solo_feature_reads_the_text_split_on_arrival_by_the_pair_s_translator():
    async def run() -> tuple:
        batcher = ScriptedBatcher()
        model = served(batcher)
        waiting = asyncio.ensure_future(
            solo(model, "a b", SETTINGS, lambda *given: given, deadline=Deadline(10), client=Client())
        )
        await queued(batcher, 1)
        [(prepared, work)] = batcher.queued
        batcher.futures[-1].set_result(work())  # what the worker's thread does
        return model.translator, prepared, await waiting

    translator, prepared, (fed_translator, fed_split) = asyncio.run(run())
    assert fed_translator is translator and fed_split.prepared == [prepared] and prepared.text == "a b"


def test_a_steering_entry_that_cannot_be_met_is_refused_before_anything_is_queued():
    batcher = ScriptedBatcher()
    model = served(batcher)
    refusals = [
        (422, translations(model, ["a"], SETTINGS, deadline=Deadline(10), steering=["bad"])),
        (
            400,
            translations(model, ["a"], SETTINGS, deadline=Deadline(10), steering=["bad"], refused=400),
        ),  # LibreTranslate's
        (422, solo(model, "a", SETTINGS, lambda *given: given, deadline=Deadline(10), client=Client(), steering="bad")),
    ]
    for status, passage in refusals:
        with pytest.raises(ApiError) as refused:
            asyncio.run(passage)
        assert (refused.value.status, refused.value.message) == (status, "glossary[0]: a scripted bad entry")
    assert batcher.queued == []


def test_a_text_the_model_reads_nothing_of_is_refused_before_a_solo_feature_is_queued():
    batcher = ScriptedBatcher()
    with pytest.raises(ApiError) as refused:
        asyncio.run(solo(served(batcher), "🐶", SETTINGS, lambda *given: given, deadline=Deadline(10), client=Client()))
    assert (refused.value.status, refused.value.message) == (
        422,
        "nothing of this text is translated: it is all kept as written",
    )
    assert batcher.queued == []


def test_a_solo_feature_s_user_error_is_a_422_and_any_other_error_passes_through():
    async def run(error: Exception) -> None:
        batcher = ScriptedBatcher()
        waiting = asyncio.ensure_future(PASSAGES["solo"](served(batcher), Client(), 10))
        await queued(batcher, 1)
        batcher.futures[-1].set_exception(error)
        await waiting

    with pytest.raises(ApiError) as refused:
        asyncio.run(run(UserError("position 9: the translation has 2 words (0 to 1)")))
    assert (refused.value.status, refused.value.message) == (422, "position 9: the translation has 2 words (0 to 1)")
    with pytest.raises(RuntimeError, match="^scripted$"):
        asyncio.run(run(RuntimeError("scripted")))


def test_ready_answers_503_past_its_deadline():
    with pytest.raises(ApiError) as late:
        asyncio.run(
            translations(served(ScriptedBatcher()), ["Hello."], SETTINGS, deadline=Deadline(0.01), unavailable=503)
        )
    assert late.value.status == 503


@pytest.mark.parametrize("passage", PASSAGES)
def test_a_client_that_hangs_up_has_its_sentences_dropped(passage):
    batcher = ScriptedBatcher()

    async def run() -> None:
        client = Client()
        waiting = asyncio.ensure_future(PASSAGES[passage](served(batcher), client, 10))
        await queued(batcher, 1)
        client.gone.set()
        await waiting

    with pytest.raises(ApiError) as gone:
        asyncio.run(run())
    assert gone.value.status == CLIENT_GONE
    assert all(future.cancelled() for future in batcher.futures)


def test_pick_fills_a_missing_side_only_when_one_model_fits():
    models = [served(None, "en", "it"), served(None, "en", "de"), served(None, "fr", "de")]
    assert pick(models, "fr", None).id == "fr-de"
    assert pick(models, None, "it").id == "en-it"
    with pytest.raises(ApiError, match=r"^several models fit en -> \?; served: en-it, en-de, fr-de$"):
        pick(models, "en", None)
    with pytest.raises(ApiError, match=r"^no model translates cs -> it; served"):
        pick(models, "cs", "it")


@pytest.mark.parametrize(("size_status", "search_status"), [(413, 422), (400, 400)])
def test_limits_answer_size_and_search_with_the_api_s_statuses(size_status, search_status):
    config = ServeConfig(max_texts=2, max_chars=5, max_beam_size=4, max_n_best=2)
    cases = [
        (["a", "b", "c"], 1, 1, size_status, "3 texts: over max_texts=2"),
        (["a", "abcdef"], 1, 1, size_status, "text 1 has 6 characters: over max_chars=5"),
        (["\ud800"], 1, 1, search_status, "text 0 is not valid Unicode (a lone surrogate)"),
        (["a"], 5, 1, search_status, "beam_size 5: over max_beam_size=4"),
        (["a"], 2, 3, search_status, "n_best 3: over beam_size=2"),
        (["a"], 4, 3, search_status, "n_best 3: over max_n_best=2"),
    ]
    for texts, beam_size, n_best, status, message in cases:
        with pytest.raises(ApiError) as refused:
            check_limits(texts, beam_size, n_best, config, size_status=size_status)
        assert (refused.value.status, refused.value.message) == (status, message)
    check_limits(["a", "abcde"], 4, 2, config, size_status=size_status)  # at every limit: accepted


def test_a_checkpoint_that_names_no_languages_is_refused_with_how_to_name_them(tiny_checkpoint, tmp_path):
    """A server knows a model by its pair; an import names it (tests/test_marian.py), with flags if need be."""
    ckpt = shutil.copytree(tiny_checkpoint, tmp_path / "ckpt")
    config = json.loads((ckpt / "config.json").read_text())
    del config["languages"]
    (ckpt / "config.json").write_text(json.dumps(config))
    expected = f'{ckpt}: the checkpoint does not name its languages (config.json has no "languages"); '
    expected += "tnmt import marian names them, with --source and --target where the model does not"
    with pytest.raises(UserError) as refused:
        load_models([ckpt], ServeConfig())
    assert str(refused.value) == expected


def test_text_work_runs_off_the_event_loop_and_counts_against_the_deadline():
    """A text that takes long to split holds neither the event loop (another coroutine keeps running) nor the
    queue (past the deadline the request is a 504 before anything is queued)."""
    batcher = ScriptedBatcher()
    model = served(batcher)
    split = model.translator.split
    model.translator.split = lambda *given: (time.sleep(0.4), split(*given))[1]

    async def run() -> tuple[int, ApiError]:
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        ticking = asyncio.ensure_future(tick())
        with pytest.raises(ApiError) as late:
            await translations(model, ["a"], SETTINGS, deadline=Deadline(0.2))
        ticking.cancel()
        return ticks, late.value

    ticks, late = asyncio.run(run())
    assert (late.status, late.message) == (504, "no translation within the deadline of 0.2 s")
    assert ticks >= 10 and batcher.queued == []


def test_a_large_request_goes_a_share_at_a_time_and_a_later_share_waits_for_room():
    progress = []

    async def run() -> list:
        batcher = ScriptedBatcher()
        batcher.max_queue = 8  # shares of 2
        found = asyncio.ensure_future(
            translations(
                served(batcher),
                list("abcde"),
                SETTINGS,
                deadline=Deadline(10),
                client=Client(),
                progress=lambda done, total: progress.append((done, total)),
            )
        )
        await queued(batcher, 4)
        await asyncio.sleep(0.05)
        assert [len(q) for q in batcher.queued] == [2, 2]  # two shares in flight, the third waits for the first
        batcher.full = True  # the queue fills with other clients' sentences
        for future in batcher.futures[:2]:
            future.set_result("x")
        await asyncio.sleep(0.2)
        assert len(batcher.queued) == 2 and not found.done()  # a later share waits for room: no 503
        batcher.full = False
        await queued(batcher, 5)
        for future in batcher.futures[2:]:
            future.set_result("y")
        return await found

    assert asyncio.run(run()) == ["x", "x", "y", "y", "y"]
    assert progress == [(0, 5), (2, 5), (4, 5), (5, 5)]  # once cut, then after each share decoded


def test_a_full_queue_refuses_a_request_s_first_share():
    with pytest.raises(ApiError) as refused:
        asyncio.run(translations(served(ScriptedBatcher(full=True)), ["a"], SETTINGS, deadline=Deadline(10)))
    assert refused.value.status == 503


def test_a_document_s_deadline_grows_with_its_segments():
    async def run(grow_s: float) -> list:
        batcher = ScriptedBatcher()
        found = asyncio.ensure_future(
            translations(served(batcher), ["a", "b"], SETTINGS, deadline=Deadline(0.2), client=Client(), grow_s=grow_s)
        )
        await queued(batcher, 2)
        await asyncio.sleep(0.4)  # past 0.2 s, within 0.2 + 2 x 1 s
        for future in batcher.futures:
            if not future.cancelled():  # cancelled at the deadline: dropped
                future.set_result("x")
        return await found

    assert asyncio.run(run(1.0)) == ["x", "x"]
    with pytest.raises(ApiError) as late:
        asyncio.run(run(0.0))
    assert late.value.status == 504


def test_a_later_share_waits_for_room_only_until_the_deadline():
    async def run() -> None:
        batcher = ScriptedBatcher()
        batcher.max_queue = 4  # shares of 1
        found = asyncio.ensure_future(translations(served(batcher), list("abc"), SETTINGS, deadline=Deadline(0.3)))
        await queued(batcher, 2)
        batcher.full = True  # and it stays full
        batcher.futures[0].set_result("x")
        await found

    with pytest.raises(ApiError) as late:
        asyncio.run(run())
    assert late.value.status == 504
