"""`POST /v1/replay`: one sentence through the training run of a served model, model by model kept
(views/replay.py), for the page's "Watch it learn" view.

A replay loads the run's kept models one at a time, beside the served one and on its device, so it does not go
through the batcher: it runs in the text workers' pool, one replay at a time (a lock: each holds a model's
weights and a few passes), within the request's deadline (past it, a 504, and the replay stops before its next
model), its answer kept for the next identical request (the page asks once, then scrubs through the answer). The
sentence is held to `max_trace_chars`, as the other views' are; a model served without its run is a 404 saying how
to serve it.
"""

import asyncio
import threading
from collections import OrderedDict
from typing import Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from tnmt.config import ServeConfig
from tnmt.serve.models import ApiError, Deadline, ServedModel, pick, text_work
from tnmt.views.replay import replay, replay_dict

CACHED = 8  # replays kept for an identical request


class ReplayRequest(BaseModel):
    """POST /v1/replay."""

    model_config = ConfigDict(extra="forbid")

    text: str
    reference: str | None = None  # a translation whose probability each kept model is asked for
    source: str | None = None
    target: str | None = None


class _Abandoned(Exception):
    """The request gave up (its deadline passed): the replay stops before its next model."""


def _go_on(late: threading.Event) -> None:
    if late.is_set():
        raise _Abandoned


def router(models: list[ServedModel], config: ServeConfig) -> APIRouter:
    """`/v1/replay` over `models`."""
    api = APIRouter()
    lock = asyncio.Lock()
    answers: OrderedDict[tuple, dict[str, Any]] = OrderedDict()

    @api.post("/v1/replay")
    async def replay_sentence(request: ReplayRequest) -> dict[str, Any]:
        """The sentence through every model the served model's training run kept: at each kept update, the greedy
        and beam translations with their words' probabilities, the reference's probability, the aligning layer's
        cross-attention, and the metrics logged by then; and the run's curves."""
        for name, text in (("text", request.text), ("reference", request.reference or "")):
            if len(text) > config.max_trace_chars:
                raise ApiError(413, f"{name} has {len(text)} characters: over max_trace_chars={config.max_trace_chars}")
        model = pick(models, request.source, request.target)
        if model.run is None:
            raise ApiError(404, f"no training run to replay for {model.id}: serve it with --run RUN (its out_dir)")
        key = (model.id, request.text, request.reference)
        async with lock:
            if key not in answers:
                pair = {"source": model.source, "target": model.target, "reference": request.reference}
                device = str(next(model.translator.model.parameters()).device)
                late = threading.Event()  # set past the deadline: the replay stops before its next model

                def work() -> dict[str, Any]:
                    found = replay(model.run, request.text, **pair, device=device, progress=lambda *_: _go_on(late))
                    return {"model": model.id, **replay_dict(found)}

                try:
                    answers[key] = await text_work(work, Deadline(config.timeout_s))
                except ApiError:
                    late.set()
                    raise
                while len(answers) > CACHED:
                    answers.popitem(last=False)
            answers.move_to_end(key)
            return answers[key]

    return api
