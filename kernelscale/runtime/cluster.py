"""The protocol runtime: master-side code talks to workers only through a Cluster.

An algorithm is a master function that calls ``cluster.broadcast_map`` and
``cluster.scatter_map`` with small worker steps ``step(state, *args) -> reply``.
The cluster sends the arguments, runs the step on every worker, gathers the
replies in worker order and counts every message in its :class:`Ledger`.
Backends (in-process here, Dask in ``kernelscale.runtime.dask``) only implement
``_run``; the counting, the phases and the error contract live in the base
class, so every backend produces the same ledger for the same protocol.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import contextmanager

import numpy as np

from kernelscale.runtime.ledger import DOWN, UP, Ledger, Tagged

Step = Callable[..., object]


class WorkerError(RuntimeError):
    """A worker step failed: names the worker and the round.

    Attributes
    ----------
    worker : int
        Index of the failed worker (its partition).
    round : str
        Name of the protocol round.
    cause : str
        ``repr`` of the original exception (also chained as ``__cause__`` in-process).
    """

    def __init__(self, worker: int, round: str, cause: str):
        self.worker = worker
        self.round = round
        self.cause = cause
        super().__init__(f"worker {worker} failed in round {round!r}: {cause}")

    def __reduce__(self):
        return (type(self), (self.worker, self.round, self.cause))


class WorkerState:
    """What one worker holds: its partition ``data`` and what it keeps between rounds.

    Steps store their own attributes (``state.embedding = ...``); ``reset`` drops
    them and keeps the data.
    """

    def __init__(self, data, worker: int):
        self.data = data
        self.worker = worker

    def reset(self) -> None:
        for name in list(vars(self)):
            if name not in ("data", "worker"):
                delattr(self, name)


class Cluster(ABC):
    """A master and ``n_workers`` workers, each holding one partition.

    Parameters
    ----------
    n_workers : int
        Number of workers (partitions).

    Attributes
    ----------
    ledger : Ledger
        Every message sent through this cluster.
    """

    def __init__(self, n_workers: int):
        if n_workers < 1:
            raise ValueError("A cluster needs at least one worker.")
        self._n_workers = int(n_workers)
        self.ledger = Ledger()
        self._phase = "fit"
        self._listeners: list = []

    @property
    def n_workers(self) -> int:
        return self._n_workers

    def add_listener(self, listener) -> None:
        """Call ``listener(round, phase, seconds)`` after every round."""
        self._listeners.append(listener)

    @property
    def current_phase(self) -> str:
        return self._phase

    @contextmanager
    def phase(self, name: str):
        """Count the messages sent inside the block under phase ``name``."""
        previous, self._phase = self._phase, name
        try:
            yield self
        finally:
            self._phase = previous

    def broadcast_map(
        self, step: Step, *args, round: str, kind: str = "model", reply_kind: str = "sketch"
    ) -> list:
        """Send the same ``args`` to every worker, run ``step``, gather the replies.

        The arguments cost ``n_workers`` times their words (under ``kind``); each
        reply costs its words (under ``reply_kind``, or per part if it is ``Tagged``).
        """
        return self.scatter_map(
            step, [args] * self.n_workers, round=round, kind=kind, reply_kind=reply_kind
        )

    def scatter_map(
        self,
        step: Step,
        per_worker_args: Sequence[tuple],
        round: str,
        kind: str = "model",
        reply_kind: str = "sketch",
    ) -> list:
        """Send ``per_worker_args[i]`` to worker ``i``, run ``step``, gather replies."""
        if len(per_worker_args) != self.n_workers:
            raise ValueError(
                f"scatter_map got {len(per_worker_args)} argument tuples "
                f"for {self.n_workers} workers."
            )
        per_worker_args = [tuple(a) for a in per_worker_args]
        for worker, args in enumerate(per_worker_args):
            for arg in args:
                self.ledger.record(round, self._phase, DOWN, kind, worker, arg)
        start = time.perf_counter()
        replies = self._run(step, per_worker_args, round)
        seconds = time.perf_counter() - start
        for worker, reply in enumerate(replies):
            self.ledger.record(round, self._phase, UP, reply_kind, worker, reply)
        for listener in self._listeners:
            listener(round, self._phase, seconds)
        return replies

    def reset(self) -> None:
        """Drop what every worker kept from earlier protocol runs (no messages)."""
        self._run(_reset_state, [()] * self.n_workers, "reset")

    @abstractmethod
    def _run(self, step: Step, per_worker_args: list[tuple], round: str) -> list:
        """Run ``step(state_i, *per_worker_args[i])`` on every worker; replies in order.

        Must raise :class:`WorkerError` naming the worker and the round when a
        step fails, and must never hang.
        """

    def close(self) -> None:
        """Release the backend's resources (nothing to do in-process)."""
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _reset_state(state: WorkerState) -> None:
    state.reset()


class LocalCluster(Cluster):
    """The in-process backend: every worker is a :class:`WorkerState` in this process.

    Parameters
    ----------
    partitions : sequence of arrays or CSR matrices
        One partition per worker, rows are points. They are validated by
        :func:`kernelscale.runtime.validate_cluster` when an algorithm starts.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelscale.runtime import LocalCluster
    >>> cluster = LocalCluster([np.ones((3, 2)), np.zeros((2, 2))])
    >>> cluster.broadcast_map(lambda state: state.data.shape[0], round="count",
    ...                       reply_kind="scalars")
    [3, 2]
    """

    def __init__(self, partitions: Sequence):
        partitions = list(partitions)
        super().__init__(len(partitions))
        self.states = [WorkerState(p, i) for i, p in enumerate(partitions)]

    def _run(self, step, per_worker_args, round):
        replies = []
        for worker, (state, args) in enumerate(zip(self.states, per_worker_args, strict=True)):
            try:
                replies.append(step(state, *args))
            except Exception as exc:  # one exception naming the worker and the round
                raise WorkerError(worker, round, f"{type(exc).__name__}: {exc}") from exc
        return replies


def worker_seeds(random_state: np.random.Generator, n_workers: int) -> list[int]:
    """Independent per-worker seeds from ``SeedSequence(...).spawn(n_workers)``.

    Reproducible for a given generator whatever the backend and whatever order
    the workers answer in. Each seed is one word when sent.
    """
    root = int(random_state.integers(2**63))
    children = np.random.SeedSequence(root).spawn(n_workers)
    return [int(c.generate_state(1, dtype=np.uint64)[0]) for c in children]


def shared_seed(random_state: np.random.Generator) -> int:
    """A seed the master broadcasts for randomness every worker must share."""
    return int(random_state.integers(2**63))


__all__ = [
    "Cluster",
    "LocalCluster",
    "Tagged",
    "WorkerError",
    "WorkerState",
    "shared_seed",
    "worker_seeds",
]
