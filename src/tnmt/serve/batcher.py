"""Dynamic batching: the sentences of concurrent requests share decoder batches.

Decoding one sentence at a time leaves most of each matrix multiply idle; a batch of 32 costs little more than a
batch of one. So every sentence of every request enters one bounded queue per model, and one worker thread per model
(the only thread that runs it) takes the oldest request, then keeps taking requests until `max_batch_tokens` source
tokens are gathered or `max_wait_ms` has passed, decodes them together and hands each result back through its
future. A request over `max_run_tokens` (a long text, cut into sentences by translate/segment.py; a document) is a
long request: it is decoded in runs of that many, each run a batch of its own, and while short requests wait the
batches alternate, a batch of short requests, then one run of the next long request in turn; when no short request
came for `QUIET_S`, a long request's runs join into batches of up to `max_batch_tokens` (a document alone decodes as
fast as with long runs; a server with clients keeps its turns short). So a sentence that arrives while a document
decodes waits for one run, a fraction of a second, never for the document, nor for a document's sentences decoding
beside it; a long request's answer waits for all its runs. After a batch of one request (a lone client: nobody else
sent anything while it was gathered and decoded) the next batch takes only what is queued already, so a lone client
does not pay `max_wait_ms` on every request; the first batch of several brings the wait back.

A sentence arrives prepared (`Translator.prepare`: its steering planned, what the model reads tokenised) by its
pair's translator (`Translator.for_pair`) when its request arrives, so a bad steering entry is refused before
anything is queued; the batch budget counts its ids, and the search reads it as it is.

Promises:
- Batching never changes an output: each sentence's translation is what `Translator.translate` gives
  it alone (the searches are batch-invariant; tests/test_batcher.py and tests/test_serve.py check it).
- A full queue refuses at once (`QueueFull`) instead of blocking; a job whose request gave up (its
  future was cancelled at the deadline) is skipped, not decoded.
- A translation's future resolves to a `Translation`. Every other feature (a traced search, a word's
  replacements, a look inside) is solo work (`Batcher.solo`): it queues with the translations, because only the
  worker's thread runs the model, runs alone, and its future resolves to what it returns.
- `stop()` lets the worker finish everything already accepted, then ends it.
- A multilingual model has one batcher for all its directions: each source carries its decoder's start token,
  so one decoder batch may mix directions and each sentence still gets what it would get alone.
"""

import math
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import TypeVar

import torch

from tnmt.config import DecodeConfig
from tnmt.translate.prepared import Prepared
from tnmt.translate.translation import Translation
from tnmt.translate.translator import Translator

Result = TypeVar("Result")


QUIET_S = 1.0  # no short request for this long: a long request's runs join into full batches


class QueueFull(Exception):
    """The model's queue holds `max_queue` sentences already: come back later."""


@dataclass(frozen=True)
class Job:
    """One sentence to translate, and where its translation goes."""

    prepared: Prepared  # planned and tokenised once, when its request arrived
    settings: DecodeConfig  # complete: the request's choices over the model's defaults
    n_best: int
    attention: bool
    future: Future[Translation]


@dataclass(frozen=True)
class SoloJob:
    """One sentence whose request needs the model alone (a traced search, a word's replacements, a look inside):
    `work` runs it on the worker's thread, and its result goes to `future`."""

    prepared: Prepared  # what the model reads of the text: counted in the batch budget
    work: Callable[[], object]
    future: Future


class Batcher:
    """One model's bounded queue and the worker thread that decodes it in batches."""

    def __init__(
        self,
        translator: Translator,
        *,
        max_queue: int,
        max_batch_tokens: int,
        max_wait_ms: float,
        batching: bool = True,
        threads: int = 0,
        max_run_tokens: int | None = None,
        on_batch: Callable[[int], None] = lambda size: None,
    ) -> None:
        """`threads` (0 = PyTorch's setting): torch threads of the worker; see `_run` for why it is set there.
        `max_run_tokens`: a long request's runs (default and at most `max_batch_tokens`)."""
        self.translator = translator
        self.threads = threads
        self.max_queue, self.max_batch_tokens, self.max_wait = max_queue, max_batch_tokens, max_wait_ms / 1000
        self.max_run_tokens = min(max_run_tokens or max_batch_tokens, max_batch_tokens)
        self.batching, self.on_batch = batching, on_batch
        self._last_short = -math.inf  # when a short request last arrived
        self._requests: queue.Queue[list[Job | SoloJob] | None] = queue.Queue()  # a request's jobs, or None = stop
        self._depth = 0  # sentences queued, under _lock
        self._lock = threading.Lock()
        self._worker = threading.Thread(target=self._run, name="tnmt-batcher", daemon=True)

    @property
    def depth(self) -> int:
        """Sentences waiting to be decoded."""
        return self._depth

    def start(self) -> None:
        self._worker.start()

    def stop(self) -> None:
        """Decode everything accepted so far, then end the worker."""
        self._requests.put(None)
        self._worker.join()

    def submit(
        self, prepared: Sequence[Prepared], settings: DecodeConfig, *, n_best: int = 1, attention: bool = False
    ) -> list[Future[Translation]]:
        """Queue a request's texts for translation, as `Translator.prepare` gave them with `settings`; one future per
        text, in order.

        Raises:
            QueueFull: the queue has no room for all of them (none is queued then).
        """
        settings = replace(settings, segment=False)  # each arrives as one sentence (`Translator.split` cut them)
        jobs = [Job(p, settings, n_best, attention, Future()) for p in prepared]
        self._enqueue(jobs)
        return [job.future for job in jobs]

    def solo(self, prepared: Prepared, work: Callable[[], Result]) -> Future[Result]:
        """Queue one text's solo work (a traced search, a word's replacements, a look inside: anything that reads
        the model other than a plain translation), which `work` runs alone on the worker's thread; the future
        resolves to what it returns, or holds what it raised. `prepared`: the text `work` reads, for the budget.

        Raises:
            QueueFull: the queue is full.
        """
        job = SoloJob(prepared, work, Future())
        self._enqueue([job])
        return job.future

    def _enqueue(self, jobs: list[Job | SoloJob]) -> None:
        """Queue one request's jobs together, or none of them when the queue has no room for all (a request of
        blank texts has none: nothing is queued)."""
        if not jobs:
            return
        with self._lock:
            if self._depth + len(jobs) > self.max_queue:
                raise QueueFull(f"{self._depth} sentences are queued (max_queue={self.max_queue})")
            self._depth += len(jobs)
        self._requests.put(jobs)

    def _run(self) -> None:
        # OpenMP keeps a thread team per thread that runs torch ops. When the loading thread has a team of its
        # own, libgomp sees more threads than cores and stops its worker threads spinning, so each of the
        # ~600 small parallel ops of a decoder step waits for a wake-up: with 2 threads on 2 cores a sentence
        # took 63 ms in a worker thread against 24 ms in the main one. So `tnmt serve` loads with one thread
        # and only this thread, the one that runs the model, uses `threads`.
        if self.threads:
            torch.set_num_threads(self.threads)
        short: deque[list[Job | SoloJob]] = deque()  # requests of one run, oldest first
        long: deque[deque[list[Job | SoloJob]]] = deque()  # requests cut into runs, with runs left, in turn
        stopping = False
        lone = False  # the last batch was one request's: no other came while it was gathered and decoded
        last_long = False  # the last batch was a long request's run
        while short or long or not stopping:
            if not short and not long:
                first = self._requests.get()
                if first is None:
                    return
                self._file(first, short, long)
            while not stopping:  # what arrived meanwhile takes its turn behind the requests already waiting
                try:
                    more = self._requests.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stopping = True
                else:
                    self._file(more, short, long)
            if long and not (short and last_long):  # a long request's run, alone: short ones never decode beside it
                runs = long.popleft()
                batch = runs.popleft()
                tokens = _tokens(batch)
                quiet = not short and time.monotonic() - self._last_short > QUIET_S
                while quiet and runs and tokens + _tokens(runs[0]) <= self.max_batch_tokens:
                    tokens += _tokens(runs[0])  # no other client of late: the request's next runs join, to the budget
                    batch = batch + runs.popleft()
                if runs:  # its next run waits behind the other requests
                    long.append(runs)
                lone, last_long = False, True
            else:
                batch, stopping, requests = self._short_batch(short, long, stopping, wait=not (lone or long))
                lone, last_long = requests == 1, False
            with self._lock:
                self._depth -= len(batch)
            self._decode([job for job in batch if job.future.set_running_or_notify_cancel()])

    def _file(
        self,
        jobs: list[Job | SoloJob],
        short: deque[list[Job | SoloJob]],
        long: deque[deque[list[Job | SoloJob]]],
    ) -> None:
        """A request arrived: one run of it is a short request; more (a long text, a document) a long one."""
        runs = self._runs(jobs)
        if len(runs) == 1:
            short.append(runs[0])
            self._last_short = time.monotonic()
        else:
            long.append(runs)

    def _short_batch(
        self,
        short: deque[list[Job | SoloJob]],
        long: deque[deque[list[Job | SoloJob]]],
        stopping: bool,
        *,
        wait: bool,
    ) -> tuple[list[Job | SoloJob], bool, int]:
        """The next batch of short requests, oldest first while the budget holds, then those that arrive within
        `max_wait` (when `wait`: a lone client gains nothing from the wait, nobody else sent anything during its
        last request, and would pay it on every request; nor does a batch with a long request waiting). Returns the
        batch, whether the server is stopping, and how many requests the batch holds."""
        batch: list[Job | SoloJob] = []
        tokens = requests = 0
        while short:
            if batch and (not self.batching or tokens + _tokens(short[0]) > self.max_batch_tokens):
                return batch, stopping, requests
            run = short.popleft()
            batch, tokens, requests = batch + run, tokens + _tokens(run), requests + 1
        deadline = time.monotonic() + (self.max_wait if wait else 0.0)
        while self.batching and not stopping and tokens < self.max_batch_tokens:
            try:
                more = self._requests.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                break
            if more is None:  # finish what was accepted, then stop
                return batch, True, requests
            self._file(more, short, long)
            if not short:  # a long request: it takes its turn after this batch
                continue
            if tokens + _tokens(short[-1]) > self.max_batch_tokens:  # a run is never split
                break
            run = short.pop()
            batch, tokens, requests = batch + run, tokens + _tokens(run), requests + 1
        return batch, stopping, requests

    def _runs(self, jobs: list[Job | SoloJob]) -> deque[list[Job | SoloJob]]:
        """A request's jobs in runs of at most `max_run_tokens` source tokens (a job alone may be over): the
        sentences of a long text are decoded a run at a time, each run in turn with other requests' (without
        batching, a request is one run)."""
        if not self.batching:
            return deque([jobs])
        runs: deque[list[Job | SoloJob]] = deque()
        tokens = 0
        for job in jobs:
            cost = _tokens([job])
            if runs and tokens + cost <= self.max_run_tokens:
                runs[-1].append(job)
                tokens += cost
            else:
                runs.append([job])
                tokens = cost
        return runs

    def _decode(self, jobs: list[Job | SoloJob]) -> None:
        """Translate the jobs that share settings together, every future getting a `Translation` with its
        evidence (the server answers every translation with its warnings); then the solo jobs, one at a time
        (each reads the model alone: a trace follows one search)."""
        groups: dict[tuple, list[Job]] = {}
        for job in jobs:
            if isinstance(job, Job):
                groups.setdefault((job.settings, job.n_best, job.attention), []).append(job)
        for group in groups.values():
            self._settle(group, self._translations)
        for job in jobs:
            if isinstance(job, SoloJob):
                self._settle([job], lambda solo: [solo[0].work()])

    def _translations(self, group: list[Job]) -> list[Translation]:
        """One decoder batch of jobs that share settings, n_best and attention."""
        first = group[0]
        prepared = [job.prepared for job in group]
        return self.translator.translate_prepared(
            prepared,
            replace(first.settings, batch_size=len(group)),  # one decoder batch; sorted by length
            n_best=first.n_best,
            attention=first.attention,
            evidence=True,
        )

    def _settle(self, jobs: list, decode: Callable[[list], list]) -> None:
        """Give each job its result of `decode(jobs)`, or all of them its error: the request reports it and the
        worker lives on."""
        self.on_batch(len(jobs))
        try:
            results = decode(jobs)
        except Exception as error:
            for job in jobs:
                job.future.set_exception(error)
            return
        for job, result in zip(jobs, results, strict=True):
            job.future.set_result(result)


def _tokens(jobs: list[Job | SoloJob]) -> int:
    """Source tokens with EOS, for the batch budget."""
    return sum((0 if job.prepared.source is None else len(job.prepared.source.ids)) + 1 for job in jobs)
