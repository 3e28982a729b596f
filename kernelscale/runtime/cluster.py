"""The protocol runtime: master-side code talks to workers only through a Cluster.

An algorithm is a master function that calls ``cluster.broadcast_map`` and
``cluster.scatter_map`` with small worker steps ``step(state, *args) -> reply``.
The cluster sends the arguments, runs the step on every worker, gathers the
replies in worker order and counts every message in its :class:`Ledger`.
Backends (in-process here, Dask in ``kernelscale.runtime.dask``) only implement
``_run``; the counting, the phases, the timing, the reductions and the error
contract live in the base class, so every backend produces the same ledger for
the same protocol. Rounds whose replies the master only sums say so
(``reduce="sum"``): the master then keeps one running sum instead of every
reply, and a federated backend may add them up securely.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager

import numpy as np
import scipy.sparse as sp
from threadpoolctl import ThreadpoolController

from kernelscale.runtime.ledger import DOWN, UP, Ledger, Tagged
from kernelscale.runtime.steps import worker_step

Step = Callable[..., object]
REDUCTIONS = (None, "sum")


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
        Every message sent through this cluster, and the time of every round.
    """

    def __init__(self, n_workers: int):
        if n_workers < 1:
            raise ValueError("A cluster needs at least one worker.")
        self._n_workers = int(n_workers)
        self.ledger = Ledger()
        self._phase = "fit"
        self._listeners: list = []
        self._idle_since = time.perf_counter()

    @property
    def n_workers(self) -> int:
        return self._n_workers

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

    def add_listener(self, listener) -> None:
        """Call ``listener(round, phase, seconds)`` after every round."""
        self._listeners.append(listener)

    def broadcast_map(
        self,
        step: Step,
        *args,
        round: str,
        kind: str = "model",
        reply_kind: str = "sketch",
        reduce: str | None = None,
    ):
        """Send the same ``args`` to every worker, run ``step``, gather the replies.

        The arguments cost ``n_workers`` times their words (under ``kind``); each
        reply costs its words (under ``reply_kind``, or per part if it is ``Tagged``).
        See :meth:`scatter_map` for ``reduce``.
        """
        return self.scatter_map(
            step, [args] * self.n_workers, round=round, kind=kind, reply_kind=reply_kind,
            reduce=reduce,
        )

    def scatter_map(
        self,
        step: Step,
        per_worker_args: Sequence[tuple],
        round: str,
        kind: str = "model",
        reply_kind: str = "sketch",
        reduce: str | None = None,
    ):
        """Send ``per_worker_args[i]`` to worker ``i``, run ``step``, gather replies.

        Parameters
        ----------
        step : callable
            ``step(state, *args) -> reply``, run on every worker.
        per_worker_args : sequence of tuples
            One tuple of arguments per worker.
        round : str
            Name of the protocol round (in the ledger and in errors).
        kind, reply_kind : str
            Message kinds of the arguments and of the replies.
        reduce : {None, "sum"}
            ``None`` returns the list of replies in worker order. ``"sum"`` declares
            that the master only needs the sum of the replies (arrays, numbers, or
            dicts / ``Tagged`` / lists of them, added part by part; a ``None`` reply
            adds nothing): the master keeps one running sum, folded in worker order
            as the replies arrive, and returns it. Every worker's upload is still
            counted.

        Returns
        -------
        list or the summed reply
        """
        if reduce not in REDUCTIONS:
            raise ValueError(f"reduce must be one of {REDUCTIONS}, got {reduce!r}.")
        if len(per_worker_args) != self.n_workers:
            raise ValueError(
                f"scatter_map got {len(per_worker_args)} argument tuples "
                f"for {self.n_workers} workers."
            )
        start = time.perf_counter()
        master_seconds = start - self._idle_since
        per_worker_args = [tuple(a) for a in per_worker_args]
        for worker, args in enumerate(per_worker_args):
            for arg in args:
                self.ledger.record(round, self._phase, DOWN, kind, worker, arg)
        replies = RoundReplies(self, round, reply_kind, reduce)
        try:
            self._run(step, per_worker_args, round, replies.deliver)
            result = replies.result()
        finally:
            self._idle_since = time.perf_counter()
        seconds = self._idle_since - start
        self.ledger.record_time(round, self._phase, master_seconds, seconds, replies.seconds)
        for listener in self._listeners:
            listener(round, self._phase, seconds)
        return result

    def reset(self) -> None:
        """Drop what every worker kept from earlier protocol runs (no messages)."""
        self._run(_reset_state, [()] * self.n_workers, "reset", _ignore_reply)
        self._idle_since = time.perf_counter()

    @abstractmethod
    def _run(self, step: Step, per_worker_args: list[tuple], round: str, deliver) -> None:
        """Run ``step(state_i, *per_worker_args[i])`` on every worker.

        Calls ``deliver(worker, reply, seconds)`` once per worker, in any order,
        as the replies arrive (``seconds``: the worker's time in the step). Must
        raise :class:`WorkerError` naming the worker and the round when a step
        fails, and must never hang.
        """

    def close(self) -> None:
        """Release the backend's resources."""
        return None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@worker_step
def _reset_state(state: WorkerState) -> None:
    state.reset()


def _ignore_reply(worker: int, reply, seconds: float) -> None:
    return None


class RoundReplies:
    """The replies of one round, taken in worker order whatever order they arrive in.

    A reply is counted in the ledger and, for a reduction, folded into the
    running sum as soon as every reply of a lower worker has been taken, so the
    ledger and the sum are the same for any arrival order, and the master holds
    only the replies that arrived ahead of a slower, lower-numbered worker.
    """

    def __init__(self, cluster: Cluster, round: str, reply_kind: str, reduce: str | None):
        self._cluster, self._round, self._reply_kind = cluster, round, reply_kind
        self._reduce = reduce
        self._early: dict[int, object] = {}
        self._next = 0
        self._replies: list = []
        self._total = None
        self.seconds = np.zeros(cluster.n_workers)

    def deliver(self, worker: int, reply, seconds: float) -> None:
        """Take worker ``worker``'s reply (and its step time)."""
        if worker < self._next or worker in self._early:
            raise RuntimeError(f"worker {worker} answered twice in round {self._round!r}")
        self.seconds[worker] = seconds
        self._early[worker] = reply
        cluster = self._cluster
        while self._next in self._early:
            reply = self._early.pop(self._next)
            cluster.ledger.record(self._round, cluster.current_phase, UP, self._reply_kind,
                                  self._next, reply)
            if self._reduce is None:
                self._replies.append(reply)
            else:
                self._total = add_reply(self._total, reply)
            self._next += 1

    def result(self):
        missing = self._cluster.n_workers - self._next
        if missing:
            worker = self._next
            raise WorkerError(worker, self._round, "no reply (the backend lost it)")
        return self._replies if self._reduce is None else self._total


def add_reply(total, reply):
    """``total + reply`` for a summed round, part by part; ``None`` adds nothing.

    Arrays are summed in float64 (the first reply is copied, never aliased);
    dicts (and ``Tagged``) by key, lists and tuples by position.
    """
    if reply is None:
        return total
    if total is None:
        return _copy_reply(reply)
    if isinstance(reply, Mapping):
        if set(reply) != set(total):
            raise ValueError(f"Cannot sum replies with parts {sorted(total)} and {sorted(reply)}.")
        for key in reply:
            total[key] = add_reply(total[key], reply[key])
        return total
    if isinstance(reply, (list, tuple)):
        if len(reply) != len(total):
            raise ValueError("Cannot sum replies of different lengths.")
        return type(total)(add_reply(t, r) for t, r in zip(total, reply, strict=True))
    if isinstance(total, np.ndarray) and not sp.issparse(reply):
        if np.shape(reply) != total.shape:
            raise ValueError(f"Cannot sum replies of shapes {total.shape} and {np.shape(reply)}.")
        total += reply
        return total
    return total + reply


def _copy_reply(reply):
    if isinstance(reply, Tagged):
        return Tagged(**{k: _copy_reply(v) for k, v in reply.items()})
    if isinstance(reply, Mapping):
        return {k: _copy_reply(v) for k, v in reply.items()}
    if isinstance(reply, (list, tuple)):
        return type(reply)(_copy_reply(v) for v in reply)
    if isinstance(reply, np.ndarray):
        return np.array(reply, dtype=np.result_type(reply.dtype, np.float64), copy=True)
    if sp.issparse(reply):
        return reply.astype(np.result_type(reply.dtype, np.float64), copy=True)
    return reply


_BLAS: ThreadpoolController | None = None


def one_blas_thread():
    """A context in which BLAS runs one thread (threadpoolctl; limits are process-wide).

    Worker steps always run inside it: several steps run at once on the
    in-process thread pool, each on one core, and the OpenBLAS SYRK hazard of
    DESIGN.md ("Known hazards") stays out of reach.
    """
    global _BLAS
    if _BLAS is None:  # after numpy and scipy loaded their BLAS libraries
        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="blas")


def effective_n_jobs(n_jobs: int | None) -> int:
    """Threads for ``n_jobs`` as in scikit-learn (None: 1; -1: all cores; -2: all but one)."""
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0:
        raise ValueError(f"n_jobs must be a non-zero integer or None, got {n_jobs!r}.")
    if n_jobs > 0:
        return int(n_jobs)
    from joblib import cpu_count

    return max(1, cpu_count() + 1 + int(n_jobs))


class LocalCluster(Cluster):
    """The in-process backend: every worker is a :class:`WorkerState` in this process.

    Parameters
    ----------
    partitions : sequence of arrays or CSR matrices
        One partition per worker, rows are points. They are validated by
        :func:`kernelscale.runtime.validate_cluster` when an algorithm starts.
    n_jobs : int or None, default=None
        Worker steps run at once on a thread pool, with scikit-learn's meaning:
        ``None`` or 1 runs them one after another, ``-1`` uses every core. Each
        step runs with one BLAS thread. The model and the ledger do not depend
        on ``n_jobs``: replies are taken in worker order.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelscale.runtime import LocalCluster
    >>> cluster = LocalCluster([np.ones((3, 2)), np.zeros((2, 2))])
    >>> cluster.broadcast_map(lambda state: state.data.shape[0], round="count",
    ...                       reply_kind="scalars")
    [3, 2]
    """

    def __init__(self, partitions: Sequence, n_jobs: int | None = None):
        partitions = list(partitions)
        super().__init__(len(partitions))
        self.states = [WorkerState(p, i) for i, p in enumerate(partitions)]
        self.n_jobs = effective_n_jobs(n_jobs)
        self._pool: ThreadPoolExecutor | None = None

    def _run(self, step, per_worker_args, round, deliver):
        calls = zip(self.states, per_worker_args, strict=True)
        with one_blas_thread():
            if self.n_jobs == 1 or self.n_workers == 1:
                for state, args in calls:
                    deliver(state.worker, *_call_step(step, state, args, round))
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.n_jobs, thread_name_prefix="kernelscale")
            # At most 2 n_jobs steps in flight: replies finished ahead of the oldest
            # wait in their futures, so the master holds O(n_jobs) replies at once.
            window = 2 * self.n_jobs
            in_flight: deque = deque()
            try:
                for state, args in calls:
                    if len(in_flight) == window:
                        worker, future = in_flight.popleft()
                        deliver(worker, *future.result())
                    in_flight.append(
                        (state.worker, self._pool.submit(_call_step, step, state, args, round)))
                while in_flight:
                    worker, future = in_flight.popleft()
                    deliver(worker, *future.result())
            finally:  # after a failure: let no step run on once the round has ended
                for _, future in in_flight:
                    future.cancel()
                wait([future for _, future in in_flight])

    def close(self) -> None:
        """Stop the thread pool (the partitions stay; a later round starts a new pool)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


def _call_step(step, state: WorkerState, args: tuple, round: str):
    """``(reply, seconds)`` of one step; a failure becomes a :class:`WorkerError`."""
    start = time.perf_counter()
    try:
        reply = step(state, *args)
    except Exception as exc:  # one exception naming the worker and the round
        raise WorkerError(state.worker, round, f"{type(exc).__name__}: {exc}") from exc
    return reply, time.perf_counter() - start


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
    "REDUCTIONS",
    "Cluster",
    "LocalCluster",
    "RoundReplies",
    "add_reply",
    "effective_n_jobs",
    "one_blas_thread",
    "Tagged",
    "WorkerError",
    "WorkerState",
    "shared_seed",
    "worker_seeds",
]
