"""The served models, and the passage every API takes to them: limits, the model's queue and the deadline.

Every sentence goes through its model's `Batcher`, so concurrent requests share decoder batches. A request
waits for its sentences at most `timeout` seconds and only while its client is connected: past the deadline
(504, or 503 for /ready) or once the client hung up (499 in the metrics), the sentences not started are
dropped from the queue. A full queue is a 503 with Retry-After. Errors are `ApiError`s, which the app
(serve/app.py) answers as JSON `{"error": "..."}`.

The event loop only waits: every pass over a request's text (reading a document, splitting, planning,
tokenising, joining) runs in a pool of text workers (`text_work`) and counts against the request's deadline.

Two passages, and each text is split into sentences and prepared once, by its pair's translator, as its request
arrives (a bad steering entry is refused before anything is queued): `translations` queues the sentences of
texts for the shared decoder batches and joins them back, and `solo` queues one text for any feature that reads
the model alone (a traced search, a word's replacements, a look inside), of one of its sentences or of all. A new
feature is a route and the function it gives `solo`.

A multilingual checkpoint (tnmt/directions.py) is served as one `ServedModel` per direction it was trained on
(and, with `zero_shot`, per other pair of its languages), all sharing its one model and one batcher: so the
sentences of requests for different pairs share decoder batches too.
"""

import asyncio
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from starlette.requests import Request

from tnmt.config import DecodeConfig, ServeConfig
from tnmt.directions import all_directions
from tnmt.errors import UserError
from tnmt.serve.batcher import Batcher, QueueFull
from tnmt.train.run_dir import RunDir, run_of
from tnmt.translate.prepared import Prepared
from tnmt.translate.steering import Steering
from tnmt.translate.translation import Translation
from tnmt.translate.translator import Translator
from tnmt.translate.whole import Split

CLIENT_GONE = 499  # nginx's "client closed request": nobody reads it, the metrics count it
Result = TypeVar("Result")
# reading, splitting, planning, tokenising and joining requests' texts: off the event loop, a few at a time (the
# GIL shares the threads, so a short text's work is not stuck behind a long one's)
_TEXT_WORKERS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="tnmt-text")


@dataclass
class ServedModel:
    """One language pair: its translator (the model's defaults in `translator.decode`) and batcher (shared by the
    directions of a multilingual model)."""

    source: str
    target: str
    translator: Translator
    batcher: Batcher
    trained: bool = True  # False: a pair of a multilingual model's languages it was not trained on (zero-shot)
    languages: tuple[str, ...] = ()  # a multilingual model's: every language it reads and writes
    run: Path | None = None  # the training run it came from, when readable: what /v1/replay replays

    @property
    def id(self) -> str:
        return f"{self.source}-{self.target}"


class ApiError(Exception):
    """An error answered as `{"error": message}` with `status` (and optional headers)."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def load_models(
    paths: list[Path],
    config: ServeConfig,
    *,
    device: str = "cpu",
    zero_shot: bool = False,
    run: Path | None = None,
) -> list[ServedModel]:
    """A `ServedModel` per direction of each checkpoint (its directions stored in it), on `device`; with
    `zero_shot`, also every untrained pair of a multilingual checkpoint's languages. Each knows its training run:
    `run` (for one checkpoint), else the run the checkpoint sits in (train/run_dir.py's `run_of`), if any.

    Raises:
        UserError: a checkpoint that does not name its languages, two checkpoints for one pair, or `run` with
            several checkpoints or not a run.
    """
    if run is not None and len(paths) != 1:
        raise UserError("--run names the training run of one --checkpoint: serve that checkpoint alone with it")
    if run is not None:
        RunDir(run).check_serves(paths[0])  # before anything loads
    models: dict[str, ServedModel] = {}
    for path in paths:
        translator = Translator.from_checkpoint(path, device=device)
        if not translator.directions:
            raise UserError(
                f'{path}: the checkpoint does not name its languages (config.json has no "languages"); '
                "tnmt import marian names them, with --source and --target where the model does not"
            )
        batcher = Batcher(
            translator,
            max_queue=config.max_queue,
            max_batch_tokens=config.max_batch_tokens,
            max_run_tokens=config.max_run_tokens,
            max_wait_ms=config.max_wait_ms,
            batching=config.batching,
            threads=config.threads,
        )
        for served in _directions(translator, batcher, zero_shot=zero_shot):
            served = replace(served, run=run or run_of(path))
            if served.id in models:
                raise UserError(f"{path}: a second checkpoint for {served.id}; serve one model per language pair")
            models[served.id] = served
    return list(models.values())


def _directions(translator: Translator, batcher: Batcher, *, zero_shot: bool) -> list[ServedModel]:
    """The pairs one checkpoint serves, each with its pair's translator and the checkpoint's batcher."""
    if not translator.multilingual:
        [(source, target)] = translator.directions
        return [ServedModel(source, target, translator, batcher)]
    languages = translator.tokenizer.languages
    pairs = all_directions(languages) if zero_shot else translator.directions
    return [
        ServedModel(
            source,
            target,
            translator.for_pair(source, target, zero_shot=True),
            batcher,
            trained=(source, target) in translator.directions,
            languages=languages,
        )
        for source, target in pairs
    ]


def batchers(models: list[ServedModel]) -> dict[str, Batcher]:
    """Each batcher once, by the name of its queue (a multilingual model's directions share theirs)."""
    return {",".join(model.languages) or model.id: model.batcher for model in models}


def pick(models: list[ServedModel], source: str | None, target: str | None) -> ServedModel:
    """The model for a pair; a missing side is filled when exactly one served model fits (400 otherwise)."""
    fits = [m for m in models if source in (None, m.source) and target in (None, m.target)]
    if len(fits) != 1:
        served = ", ".join(model.id for model in models)
        wanted = f"{source or '?'} -> {target or '?'}"
        reason = "no model translates" if not fits else "several models fit"
        knows = any({source, target} <= set(m.languages) for m in models)
        if not fits and source != target and knows:
            reason = "a multilingual model was not trained on"
            served += " (tnmt serve --zero-shot serves its other pairs)"
        raise ApiError(400, f"{reason} {wanted}; served: {served}")
    return fits[0]


def settings_for(
    model: ServedModel,
    config: ServeConfig,
    *,
    segment: bool | None = None,
    beam_size: int | None = None,
    max_len: int | None = None,
) -> DecodeConfig:
    """How a request is translated, on every route: the model's decoding defaults with what the request chose
    (None: not chosen). A text is split into segments when the request says so, else when both the server
    (`ServeConfig.segment`, `tnmt serve --no-segment`) and the model (its `DecodeConfig.segment`) do; a document,
    which has no such field, follows the server and the model."""
    segment = (config.segment and model.translator.decode.segment) if segment is None else segment
    chosen = {"beam_size": beam_size, "max_len": max_len, "segment": segment}
    return replace(model.translator.decode, **{name: value for name, value in chosen.items() if value is not None})


def check_limits(texts: list[str], beam_size: int, n_best: int, config: ServeConfig, *, size_status: int) -> None:
    """Refuse a request over `config`'s size limits with `size_status` (413 on /v1, 400 on LibreTranslate's API)
    and over its search limits or with a lone surrogate with 422 (400 on LibreTranslate's)."""
    search_status = 422 if size_status == 413 else size_status
    for limit in ("max_texts", "max_queue"):  # a request larger than the whole queue could never be served
        if len(texts) > getattr(config, limit):
            raise ApiError(size_status, f"{len(texts)} texts: over {limit}={getattr(config, limit)}")
    for i, text in enumerate(texts):
        if len(text) > config.max_chars:
            raise ApiError(size_status, f"text {i} has {len(text)} characters: over max_chars={config.max_chars}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate, which JSON allows as \ud800
            raise ApiError(search_status, f"text {i} is not valid Unicode (a lone surrogate)") from None
    if beam_size > config.max_beam_size:
        raise ApiError(search_status, f"beam_size {beam_size}: over max_beam_size={config.max_beam_size}")
    if n_best > min(beam_size, config.max_n_best):
        limit = f"beam_size={beam_size}" if n_best > beam_size else f"max_n_best={config.max_n_best}"
        raise ApiError(search_status, f"n_best {n_best}: over {limit}")


ROOM_WAIT_S = 0.05  # how often a started request's next share looks for room in a full queue


class Deadline:
    """When a request's answer is due: `seconds` after the request came. Its text work (reading a document,
    splitting, planning, tokenising, joining) and its queued sentences count against the same clock."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self._at = seconds, time.monotonic() + seconds

    def left(self) -> float:
        return max(0.0, self._at - time.monotonic())

    def grow(self, seconds: float) -> None:
        """Give the request `seconds` more (a document, once its size is known)."""
        self.seconds, self._at = self.seconds + seconds, self._at + seconds


async def text_work(
    work: Callable[[], Result], deadline: Deadline, *, refused: int = 422, unavailable: int = 504
) -> Result:
    """What `work` returns, run in the text workers' pool: the event loop only waits, so a long text delays its own
    request, never another client's. Past the deadline `unavailable` (the work, which cannot be interrupted,
    finishes unheard); a `UserError` (a steering entry that cannot be met, a bad document) is `refused`."""
    future = asyncio.get_running_loop().run_in_executor(_TEXT_WORKERS, work)
    try:
        with _refused_input(refused):
            return await asyncio.wait_for(future, deadline.left())
    except TimeoutError:
        raise ApiError(unavailable, f"no translation within the deadline of {deadline.seconds:g} s") from None


async def translations(
    model: ServedModel,
    texts: list[str],
    settings: DecodeConfig,
    *,
    n_best: int = 1,
    attention: bool = False,
    deadline: Deadline,
    unavailable: int = 504,
    client: Request | None = None,
    steering: list[Steering | None] | None = None,
    refused: int = 422,
    grow_s: float = 0.0,
    progress: Callable[[int, int], object] | None = None,
) -> list[Translation]:
    """The texts' translations by the model's batcher, within the deadline (`unavailable` past it): each text cut
    into sentences (unless `settings.segment` is false), the sentences queued, and each text's sentences joined
    back (translate/whole.py), the cutting and joining in the text workers' pool. A steering entry that cannot be
    met is refused with `refused` and the entry named, before anything is queued. `grow_s`: seconds the deadline
    grows by for each segment (a document's: its time grows with its size). `progress(segments decoded, segments)`
    is called once they are cut and after each share is decoded.

    A request of more sentences than a share of the queue (`queue_share`: a document) is queued a share at a time,
    the next share once the one before it is decoded, so it never holds more than two shares of the queue and its
    size is bounded by its deadline, not by `max_queue`; a full queue refuses its first share (503), and a later
    share waits for room (the request has started: it is not cut)."""
    work = {"deadline": deadline, "refused": refused, "unavailable": unavailable}
    split = await text_work(lambda: model.translator.split(texts, steering, settings), **work)
    share, prepared = queue_share(model.batcher.max_queue), split.prepared
    deadline.grow(grow_s * len(prepared))
    report = progress or (lambda done, total: None)
    report(0, len(prepared))
    options = {"n_best": n_best, "attention": attention}
    waiting: list[list[Future[Translation]]] = []
    found: list[Translation] = []
    try:
        for at in range(0, len(prepared), share):
            chunk, wait = prepared[at : at + share], {"deadline": deadline, "unavailable": unavailable}
            waiting.append(await _queued(model, chunk, settings, options, later=at > 0, **wait))
            if len(waiting) == 2:
                found += await _wait(waiting.pop(0), deadline=deadline, unavailable=unavailable, client=client)
                report(len(found), len(prepared))
        for futures in waiting:
            found += await _wait(futures, deadline=deadline, unavailable=unavailable, client=client)
            report(len(found), len(prepared))
    finally:
        for futures in waiting:  # past the deadline, or the client gone: the shares not decoded are dropped
            for future in futures:
                future.cancel()
    return await text_work(lambda: model.translator.translated(split, settings, segments=found), **work)


async def _queued(
    model: ServedModel,
    share: Sequence[Prepared],
    settings: DecodeConfig,
    options: dict,
    *,
    later: bool,
    deadline: Deadline,
    unavailable: int,
) -> list[Future[Translation]]:
    """One share of a request queued. A full queue refuses a request's first share (503); a `later` one waits for
    room until the deadline (`unavailable` past it): the request has started, it is not cut for another's."""
    if not later:
        with _refused_when_full():
            return model.batcher.submit(share, settings, **options)
    while True:
        try:
            return model.batcher.submit(share, settings, **options)
        except QueueFull:
            if deadline.left() == 0:
                raise ApiError(unavailable, f"no translation within the deadline of {deadline.seconds:g} s") from None
            await asyncio.sleep(min(ROOM_WAIT_S, deadline.left()))


def queue_share(max_queue: int) -> int:
    """How many sentences one request queues at a time (`translations`): a quarter of the queue."""
    return max(1, max_queue // 4)


async def solo(
    model: ServedModel,
    text: str,
    settings: DecodeConfig,
    feature: Callable[[Translator, Split], Result],
    *,
    deadline: Deadline,
    client: Request,
    steering: Steering | None = None,
    sentence: int | None = 0,
    max_trace_chars: int | None = None,
) -> Result:
    """What `feature` makes of one text alone (a traced search, a word's replacements, a look inside) by the
    model's batcher, within the deadline: the text is split and prepared in the text workers' pool by the pair's
    translator with `settings` and `steering` (`Translator.split`), and `feature(translator, split)` runs on the
    batcher's thread. A feature that reads one sentence names it (`sentence`, which `split.locate(0, sentence)`
    finds; None: a feature of the whole text). A `UserError`, a steering entry that cannot be met (before anything
    is queued) or the feature's own (a word position outside the translation), is a 422; so are a sentence the
    text does not have and a sentence of which the model reads nothing (all of it kept as written), refused
    before anything is queued, and a sentence over `max_trace_chars` characters is a 413."""
    translator = model.translator
    split = await text_work(lambda: translator.split([text], [steering], settings), deadline)
    with _refused_when_full(), _refused_input(422):
        if sentence is not None:
            try:
                chosen = split.prepared[split.locate(0, sentence)]
            except IndexError as error:
                raise UserError(str(error)) from None
            chosen.searched()  # refused now: a feature of one sentence reads what the model reads of it
            if max_trace_chars is not None and len(chosen.text) > max_trace_chars:
                n, limit = len(chosen.text), max_trace_chars
                raise ApiError(413, f"sentence {sentence} has {n} characters: over max_trace_chars={limit}")
        else:
            chosen = max(split.prepared, key=lambda p: 0 if p.source is None else len(p.source.ids), default=None)
            if chosen is None:
                raise UserError("text: a blank text has nothing to translate")
        future = model.batcher.solo(chosen, lambda: feature(translator, split))
        [found] = await _wait([future], deadline=deadline, unavailable=504, client=client)
    return found


@contextmanager
def _refused_input(status: int) -> Iterator[None]:
    """A `UserError` (a steering entry that cannot be met, named by translate/steering.py; a feature's bad input) as
    `status`, with its message."""
    try:
        yield
    except UserError as error:
        raise ApiError(status, str(error)) from None


@contextmanager
def _refused_when_full() -> Iterator[None]:
    """A full queue (`QueueFull`) as a 503 that tells the client to come back in a second."""
    try:
        yield
    except QueueFull as full:
        raise ApiError(503, f"server busy: {full}", {"Retry-After": "1"}) from None


async def _wait(
    futures: list[Future[Result]], *, deadline: Deadline, unavailable: int, client: Request | None
) -> list[Result]:
    """The results of a request's queued sentences, waited for until the deadline and only while the `client` is
    connected: past the deadline or once it hung up, the sentences not started are dropped."""
    results = asyncio.ensure_future(asyncio.gather(*[asyncio.wrap_future(future) for future in futures]))
    results.add_done_callback(_retrieve)
    hang_up = asyncio.ensure_future(_hang_up(client)) if client is not None else None
    try:
        waited = [results, hang_up] if hang_up else [results]
        await asyncio.wait(waited, timeout=deadline.left(), return_when="FIRST_COMPLETED")
    finally:
        if hang_up:
            hang_up.cancel()
        if not results.done():
            results.cancel()  # cancels the futures: the worker skips what it has not started
    if results.done() and not results.cancelled():
        return results.result()
    if hang_up and hang_up.done() and not hang_up.cancelled():
        raise ApiError(CLIENT_GONE, "the client closed the connection before the answer")
    raise ApiError(unavailable, f"no translation within the deadline of {deadline.seconds:g} s")


def _retrieve(results: asyncio.Future) -> None:
    """Mark the outcome of a request's gather as seen. One cancelled at the deadline or on a hang-up ends holding
    a CancelledError nobody awaits, which asyncio would log at exit as "exception was never retrieved"."""
    if not results.cancelled():
        results.exception()


async def _hang_up(client: Request) -> None:
    """Return when the client disconnects (the body is read: what can still arrive is the disconnect)."""
    while (await client.receive())["type"] != "http.disconnect":
        pass
