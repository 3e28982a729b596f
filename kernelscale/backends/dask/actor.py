"""The pieces of :mod:`kernelscale.backends.dask.cluster` that touch the actors.

``PartitionActor`` runs on a Dask worker (which imports only this module, the
runtime and the protocol's steps); ``settle`` waits on its calls in the client's
event loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from kernelscale.runtime.cluster import WorkerState, one_blas_thread
from kernelscale.runtime.inputs import load_partition
from kernelscale.runtime.ledger import count_words


async def settle(pending: dict, timeout: float) -> dict:
    """Wait up to ``timeout`` s for the actor calls; ``{worker: (ok, reply or exception)}``."""

    async def one(worker, future):
        try:
            return worker, (True, await future)
        except Exception as exc:
            return worker, (False, exc)

    tasks = [asyncio.ensure_future(one(w, f)) for w, f in pending.items()]
    done, not_done = await asyncio.wait(tasks, timeout=timeout)
    for task in not_done:  # stops waiting only: the call goes on and is awaited again
        task.cancel()
    return dict(task.result() for task in done)


class PartitionActor:
    """Holds one worker's :class:`WorkerState` on a Dask worker and runs steps on it."""

    def __init__(self, source_kind: str, source, worker: int):
        # Steps run with one BLAS thread, as in-process (set for the worker process:
        # a per-call limit would be undone by a concurrent call's exit).
        one_blas_thread()
        data = load_partition(source) if source_kind == "loader" else source
        self.state = WorkerState(data, worker)

    def run(self, step: Callable, *args):
        reply = step(self.state, *args)
        # A reply the ledger cannot count cannot be sent either (Dask would stall
        # on it until the timeout): fail now, as a step error.
        count_words(reply)
        return reply

    def run_timed(self, step: Callable, *args) -> tuple:
        """``(reply, seconds in the step)``."""
        start = time.perf_counter()
        reply = self.run(step, *args)
        return reply, time.perf_counter() - start


__all__ = ["PartitionActor", "settle"]
