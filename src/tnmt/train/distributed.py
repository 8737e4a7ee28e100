"""Data-parallel training across processes and machines with `torch.distributed`, launched by `torchrun`.

    torchrun --nproc_per_node 2 -m tnmt train RECIPE                       # one machine, 2 processes
    torchrun --nnodes 2 --nproc_per_node 8 --rdzv-backend c10d \\
             --rdzv-endpoint HOST:PORT -m tnmt train RECIPE               # run on every machine

torchrun sets RANK, WORLD_SIZE and LOCAL_RANK (and MASTER_ADDR/PORT) for every process; `env_world`
reads them and `process_group` joins (gloo on the CPU, NCCL on CUDA). Without them, or with a world of one,
there is no process group and every helper here is the identity, so a single-process run is unchanged.

What the loop promises with N ranks (see loop.py): the global batch order of an epoch stays the pure
function of (seed, epoch); an update with accumulation A takes the next N * A global batches and the j-th
of them goes to rank j mod N; the loss is normalised by the all-reduced number of target tokens, so N
ranks equal one process with accumulation N. Only rank 0 writes (metrics, curves, recipe.json,
checkpoints); validation and self-distillation share their decoding among the ranks (`translate_across`),
and the validation result and the budget decision are broadcast, so every rank stops at the same update.

A rank that dies closes its sockets, and the next collective of the others fails at once; a rank that
hangs is caught by `train.collective_timeout_s`. Either way the survivors raise `PeerLost`, which the
CLI prints as one line before exiting with status 1, instead of hanging or printing a C++ backtrace.
"""

import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from typing import TypeVar

import torch
import torch.distributed as dist

from tnmt.translate.prepared import length_batches
from tnmt.translate.translator import Translator
from tnmt.translate.whole import Split

T = TypeVar("T")


class PeerLost(RuntimeError):
    """Another rank died or stopped answering: this rank cannot go on."""


@dataclass(frozen=True)
class World:
    """This process's place among the training processes, and the collectives the loop needs."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0  # index of the process on its machine: picks the GPU

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that validates, logs and writes checkpoints."""
        return self.rank == 0

    def sum(self, *values: float) -> list[float]:
        """Each value summed over all ranks (float64, so token counts stay exact)."""
        if self.size == 1:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64, device=_collective_device())
        with collective(self):
            dist.all_reduce(tensor)
        return tensor.tolist()

    def barrier(self) -> None:
        """Return once every rank got here."""
        if self.size > 1:
            with collective(self):
                dist.barrier()

    def from_main(self, value: T) -> T:
        """Rank 0's `value` (any picklable object) on every rank."""
        if self.size == 1:
            return value
        box = [value]
        with collective(self):
            dist.broadcast_object_list(box, src=0, device=_collective_device())
        return box[0]

    def gather(self, value: T) -> list[T]:
        """Every rank's `value` (any picklable object), in rank order, on every rank."""
        if self.size == 1:
            return [value]
        values: list[T] = [value] * self.size  # filled in below
        with collective(self):
            dist.all_gather_object(values, value)
        return values


def translate_across(
    world: World,
    translator: Translator,
    texts: Sequence[str],
    ids: Sequence[list[int]] | None = None,
    *,
    starts: Sequence[int] | None = None,
) -> list[str]:
    """`translator.translate(texts)`, shared by the ranks: rank r decodes batches r, r + N, ... of those one
    process would decode (translate/prepared.py's `length_batches`), so every sentence is decoded in the same
    batch and gives the same translation as in one process; every rank returns all of them, in input order. A
    text is cut into sentences first (`Translator.split`), unless its ids are given: the ranks share the sentences.

    `ids`: the texts' source ids (fitted to the model, no EOS) when the caller has them, so nothing is tokenised
    twice; `starts`: with `ids`, each text's first decoder input (a multilingual model's target-language tag).
    """
    prepared = None if ids is None else translator.prepare_ids(texts, ids, starts)
    if world.size == 1:  # the translator's own doors
        return [t.text for t in translator.translations(texts, prepared=prepared)]
    # cut into sentences as `translate` cuts them (translate/segment.py), unless the ids are given
    split = translator.split(texts) if prepared is None else Split(None, prepared)
    batches = length_batches(split.prepared, translator.decode.batch_size)[world.rank :: world.size]
    done = translator.translate_prepared(split.prepared, batches=batches)
    segments = list(done)  # a segment the model reads nothing of is in no batch: each rank has it
    ordered = sorted(i for batch in batches for i in batch)
    for indices, decoded in world.gather((ordered, [done[i] for i in ordered])):
        for i, translation in zip(indices, decoded, strict=True):
            segments[i] = translation
    return [t.text for t in translator.translated(split, segments=segments)]


def env_world() -> World:
    """The rank and world size torchrun gave this process (rank 0 of 1 when not launched by it)."""
    return World(
        rank=int(os.environ.get("RANK", "0")),
        size=int(os.environ.get("WORLD_SIZE", "1")),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
    )


@contextmanager
def process_group(*, device: torch.device, timeout_s: float) -> Iterator[World]:
    """Join the process group for the duration of a training run (nothing to join for a world of one).

    `timeout_s` bounds every collective, so a rank that hangs makes the others fail instead of waiting forever.
    """
    here = env_world()
    if here.size == 1:
        yield here
        return
    if device.type == "cuda":
        torch.cuda.set_device(device)
    dist.init_process_group(backend_for(device), timeout=timedelta(seconds=timeout_s))
    try:
        yield here
        # Leave together, a stopped run as a finished one (loop.train frees what holds the group first): no rank
        # destroys its end of the group while another is still working with it.
        here.barrier()
    finally:
        dist.destroy_process_group()


def backend_for(device: torch.device) -> str:
    """NCCL between GPUs, gloo between CPU processes."""
    return "nccl" if device.type == "cuda" else "gloo"


@contextmanager
def collective(here: World) -> Iterator[None]:
    """Turn the failure of a collective (DDP's gradient all-reduce too) into a one-line `PeerLost`."""
    try:
        yield
    except RuntimeError as e:
        message = str(e)
        lost = isinstance(e, dist.DistError) or any(mark in message for mark in ("gloo", "NCCL", "Connection closed"))
        if here.size == 1 or not lost or isinstance(e, PeerLost):
            raise
        first = message.strip().splitlines()[0] if message.strip() else type(e).__name__
        first = re.sub(r"^\[[^\]]*\]\s*", "", first).split(". ")[0]  # no gloo source file, no advice
        raise PeerLost(f"rank {here.rank} of {here.size}: lost the other ranks ({first})") from None


def _collective_device() -> torch.device:
    """NCCL collectives need CUDA tensors; gloo takes CPU ones."""
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")
