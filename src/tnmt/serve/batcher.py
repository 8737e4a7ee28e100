"""Dynamic batching: the sentences of concurrent requests share decoder batches.

Decoding one sentence at a time leaves most of each matrix multiply idle; a batch of 32 costs little
more than a batch of one. So every sentence of every request enters one bounded queue per model, and
one worker thread per model (the only thread that runs it) takes the oldest request, then keeps taking
requests until `max_batch_tokens` source tokens are gathered or `max_wait_ms` has passed, decodes them
together and hands each result back through its future.

Promises:
- Batching never changes an output: each sentence's translation is what `Translator.translate` gives
  it alone (the searches are batch-invariant; tests/test_batcher.py and tests/test_serve.py check it).
- A full queue refuses at once (`QueueFull`) instead of blocking; a job whose request gave up (its
  future was cancelled at the deadline) is skipped, not decoded.
- A translation's future resolves to a `Translation`; a trace's (`Batcher.trace`), a word's alternatives' and a
  look inside (`Batcher.inside`) to what they make: these queue with the translations because only the
  worker's thread runs the model, and run one at a time.
- `stop()` lets the worker finish everything already accepted, then ends it.
- A multilingual model has one batcher for all its directions: each request is planned and tokenised by its
  pair's translator (`Translator.for_pair`), whose sources carry their decoder's start token, so one decoder
  batch may mix directions and each sentence still gets what it would get alone.
"""

import queue
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace

import torch

from tnmt.config import DecodeConfig
from tnmt.decode.trace import Trace
from tnmt.translate.replacements import WordAlternatives, word_alternatives
from tnmt.translate.steering import Plan, Steering
from tnmt.translate.translator import Source, Translation, Translator
from tnmt.views.inside import Inside, inside

# One element of `Translator.encode`: tokenised once when the request arrives and handed back to the translator
# as it is; only `_tokens` looks into it.


class QueueFull(Exception):
    """The model's queue holds `max_queue` sentences already: come back later."""


@dataclass(frozen=True)
class Job:
    """One sentence to translate, and where its translation goes."""

    text: str
    source: Source | None  # tokenised once when the request arrives (ids and pieces); None: an empty text
    settings: DecodeConfig  # complete: the request's choices over the model's defaults
    n_best: int
    attention: bool
    future: Future[Translation]
    plan: Plan  # what the model reads of the text and how its search is steered (translate/steering.py)


@dataclass(frozen=True)
class SoloJob:
    """One sentence whose request needs the model alone (a traced search, a word's alternatives, a look inside):
    `work` runs it on the worker's thread, and its result goes to `future`."""

    source: Source | None  # what the model reads of the text: counted in the batch budget
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
        on_batch: Callable[[int], None] = lambda size: None,
    ) -> None:
        """`threads` (0 = PyTorch's setting): torch threads of the worker; see `_run` for why it is set there."""
        self.translator = translator
        self.threads = threads
        self.max_queue, self.max_batch_tokens, self.max_wait = max_queue, max_batch_tokens, max_wait_ms / 1000
        self.batching, self.on_batch = batching, on_batch
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
        self,
        texts: Sequence[str],
        settings: DecodeConfig,
        *,
        n_best: int = 1,
        attention: bool = False,
        steering: Sequence[Steering | None] | None = None,
        translator: Translator | None = None,
    ) -> list[Future[Translation]]:
        """Queue a request's texts for translation, each with its `steering` (translate/steering.py); one future per
        text, in order. `translator`: the pair's (`Translator.for_pair` of this batcher's), default this one's.

        Raises:
            QueueFull: the queue has no room for all of them (none is queued then).
            UserError: a steering entry that cannot be met (planned here, before anything is queued).
        """
        translator = translator or self.translator
        plans = translator.plans(texts, steering or [None] * len(texts), settings)
        sources = translator.encode([p.text for p in plans])
        jobs = [
            Job(text, source, settings, n_best, attention, Future(), plan)
            for text, source, plan in zip(texts, sources, plans, strict=True)
        ]
        self._enqueue(jobs)
        return [job.future for job in jobs]

    def trace(
        self,
        text: str,
        settings: DecodeConfig,
        *,
        top_k: int,
        steering: Steering | None = None,
        translator: Translator | None = None,
    ) -> Future[Trace]:
        """Queue one text whose search is traced (`Translator.trace`) with `top_k` next tokens per hypothesis
        (`translator`: as for `submit`).

        Raises:
            QueueFull: the queue is full.
            UserError: a steering entry that cannot be met.
        """
        translator = translator or self.translator
        source = self._source(translator, text, settings, steering)
        trace = translator.trace
        return self._solo(source, lambda: trace(text, settings, top_k=top_k, source=source, steering=steering))

    def alternatives(
        self,
        text: str,
        settings: DecodeConfig,
        *,
        position: int,
        k: int,
        steering: Steering | None = None,
        translator: Translator | None = None,
    ) -> Future[WordAlternatives]:
        """Queue one text whose word `position` gets its `k` likeliest replacements (translate/replacements.py;
        `translator`: as for `submit`).

        Raises:
            QueueFull: the queue is full.
            UserError: a steering entry that cannot be met.
        """
        translator = translator or self.translator
        source = self._source(translator, text, settings, steering)
        return self._solo(source, lambda: word_alternatives(translator, text, position, k, settings, steering=steering))

    def inside(
        self,
        text: str,
        settings: DecodeConfig,
        *,
        translation: str | None,
        top_k: int,
        translator: Translator | None = None,
    ) -> Future[Inside]:
        """Queue one text whose forward pass is recorded (tnmt/inside.py), over its translation for `settings` or
        over `translation` as given (`translator`: as for `submit`).

        Raises:
            QueueFull: the queue is full.
        """
        translator = translator or self.translator
        source = self._source(translator, text, settings, None)
        return self._solo(source, lambda: inside(translator, text, settings, translation=translation, top_k=top_k))

    def _solo(self, source: Source | None, work: Callable[[], object]) -> Future:
        job = SoloJob(source, work, Future())
        self._enqueue([job])
        return job.future

    @staticmethod
    def _source(translator: Translator, text: str, settings: DecodeConfig, steering: Steering | None) -> Source | None:
        """What the model will read of one text, tokenised: planned now, so a bad steering entry is refused before
        anything is queued (and the batch budget counts the right tokens)."""
        [plan] = translator.plans([text], [steering], settings)
        return translator.encode([plan.text])[0]

    def _enqueue(self, jobs: list[Job | SoloJob]) -> None:
        """Queue one request's jobs together, or none of them when the queue has no room for all."""
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
        carried: list[Job | SoloJob] | None = None  # a request that did not fit the last batch: it starts the next
        stopping = False
        while not stopping or carried:
            first = carried if carried is not None else self._requests.get()
            carried = None
            if first is None:
                return
            batch, tokens = list(first), _tokens(first)
            deadline = time.monotonic() + self.max_wait
            while self.batching and not stopping and tokens < self.max_batch_tokens:
                try:
                    more = self._requests.get(timeout=max(deadline - time.monotonic(), 0))
                except queue.Empty:
                    break
                if more is None:  # finish what was accepted, then stop
                    stopping = True
                elif tokens + _tokens(more) > self.max_batch_tokens:  # a request is never split
                    carried = more
                    break
                else:
                    batch, tokens = batch + more, tokens + _tokens(more)
            with self._lock:
                self._depth -= len(batch)
            self._decode([job for job in batch if job.future.set_running_or_notify_cancel()])

    def _decode(self, jobs: list[Job | SoloJob]) -> None:
        """Translate the jobs that share settings together, every future getting a `Translation` with its
        evidence (the server answers every translation with its warnings); then the solo jobs, one at a time
        (a trace follows one search)."""
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
        return self.translator.translations(
            [job.text for job in group],
            replace(first.settings, batch_size=len(group)),  # one decoder batch; sorted by length
            n_best=first.n_best,
            attention=first.attention,
            evidence=True,
            sources=[job.source for job in group],
            plans=[job.plan for job in group],
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
    """Source tokens with EOS, for the batch budget: the one place that looks into a source."""
    return sum((0 if job.source is None else len(job.source.ids)) + 1 for job in jobs)
