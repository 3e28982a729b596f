"""The protocol runtime: master-side code talks to workers only through a Cluster.

An algorithm is a master function that calls ``cluster.broadcast_map`` and
``cluster.scatter_map`` with small worker steps ``step(state, *args) -> reply``.
The cluster sends the arguments, runs the step on every worker, gathers the
replies in worker order and counts every message in its :class:`Ledger`.
Backends (:mod:`kernelscale.backends`: in-process, Dask, Flower) only implement
``_run``; the counting, the phases, the timing, the reductions and the error
contract live in the base class, so every backend produces the same ledger for
the same protocol. Rounds whose replies the master only sums say so
(``reduce="sum"``): the master then keeps one running sum instead of every
reply, and a federated backend may add them up securely.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextlib import contextmanager

import numpy as np
import scipy.sparse as sp
from threadpoolctl import ThreadpoolController

from kernelscale.runtime.errors import LostWorkerWarning, WorkerError
from kernelscale.runtime.ledger import DOWN, UP, Ledger, Tagged
from kernelscale.runtime.lost import LostWorkers, scale_reply
from kernelscale.runtime.steps import ROWS, is_registered, step_disclosure, worker_step

Step = Callable[..., object]
REDUCTIONS = (None, "sum")


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


class Cluster(LostWorkers, ABC):
    """A master and ``n_workers`` workers, each holding one partition.

    Parameters
    ----------
    n_workers : int
        Number of workers (partitions).

    Attributes
    ----------
    ledger : Ledger
        Every message sent through this cluster, and the time of every round.
    lost_workers : set of int
        Workers a backend lost and dropped in this protocol run (``lost="drop"``;
        see :mod:`kernelscale.runtime.lost`).
    """

    def __init__(self, n_workers: int):
        if n_workers < 1:
            raise ValueError("A cluster needs at least one worker.")
        self._n_workers = int(n_workers)
        self.ledger = Ledger()
        self._phase = "fit"
        self._listeners: list = []
        self._idle_since = time.perf_counter()
        self._init_lost()

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
            if worker in self.lost_workers:  # dropped earlier: nothing is sent to it
                continue
            for arg in args:
                self.ledger.record(round, self._phase, DOWN, kind, worker, arg)
        replies = RoundReplies(self, round, reply_kind, reduce,
                               declared_rows=_declares_rows(step, per_worker_args))
        try:
            self._run(step, per_worker_args, round, replies.deliver)
            result = replies.result()
        finally:
            self._idle_since = time.perf_counter()
        seconds = self._idle_since - start
        self.ledger.record_time(round, self._phase, master_seconds, seconds, replies.seconds)
        for listener in self._listeners:
            listener(round, self._phase, seconds)
        if reduce == "sum" and self.lost_workers and result is not None:
            result = scale_reply(result, self.rescale_factor())  # the ratio estimate
        return result

    def reset(self) -> None:
        """Drop what every worker kept from earlier protocol runs (no messages); a new
        protocol run starts with every worker."""
        self._start_protocol_run()
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


@worker_step(discloses="nothing")
def _reset_state(state: WorkerState) -> None:
    state.reset()


def _ignore_reply(worker: int, reply, seconds: float) -> None:
    return None


def _declares_rows(step: Step, per_worker_args: list[tuple]) -> list[bool] | None:
    """For a registered step: whether it declares ``'rows'`` for each worker's arguments."""
    if not is_registered(step):
        return None
    return [step_disclosure(step, args) == ROWS for args in per_worker_args]


class RoundReplies:
    """The replies of one round, whatever order they arrive in.

    Each reply is counted as it arrives; the ledger receives the uploads in
    worker order when the round ends. For a reduction (``reduce="sum"``) the
    replies are added along a fixed binary tree over the worker indices
    (pairwise summation): two partial sums are added as soon as both are
    there, always in the same order, so the sum is the same bit for bit for
    any arrival order, and while the slowest worker is awaited the master holds
    O(log s) partial sums instead of s replies.
    """

    def __init__(self, cluster: Cluster, round: str, reply_kind: str, reduce: str | None,
                 declared_rows: list[bool] | None = None):
        self._cluster, self._round, self._reply_kind = cluster, round, reply_kind
        self._declared_rows = declared_rows  # None: an unregistered (in-process) step
        self._undeclared_rows: list[int] = []
        self._reduce = reduce
        self._phase = cluster.current_phase
        n = cluster.n_workers
        self._messages: list = [None] * n
        self._replies: list = [None] * n
        self._partial: dict[tuple[int, int], object] = {}  # (first worker, level) -> sum
        self._top = max(n - 1, 0).bit_length()  # the root covers workers [0, 2^top)
        self.seconds = np.zeros(n)

    def deliver(self, worker: int, reply, seconds: float) -> None:
        """Take worker ``worker``'s reply (and its step time)."""
        if self._messages[worker] is not None:
            raise RuntimeError(f"worker {worker} answered twice in round {self._round!r}")
        self.seconds[worker] = seconds
        self._messages[worker] = self._cluster.ledger.count(
            self._round, self._phase, UP, self._reply_kind, worker, reply)
        if (self._declared_rows is not None and not self._declared_rows[worker]
                and any(m.kind == "raw_points" for m in self._messages[worker])):
            self._undeclared_rows.append(worker)
        if self._reduce is None:
            self._replies[worker] = reply
        else:
            self._climb(worker, 0, None if reply is None else _copy_reply(reply))

    def _climb(self, first: int, level: int, value) -> None:
        """Put the sum over workers [first, first + 2^level) in the tree; merge upwards."""
        n = self._cluster.n_workers
        while level < self._top:
            size = 1 << level
            sibling = first ^ size
            if sibling >= n:  # no worker on the other side: the sum moves up as it is
                first &= ~size
            elif (sibling, level) in self._partial:
                other = self._partial.pop((sibling, level))
                left, right = (value, other) if first < sibling else (other, value)
                value = _merge(left, right)
                first = min(first, sibling)
            else:
                break
            level += 1
        self._partial[(first, level)] = value

    def result(self):
        if self._undeclared_rows:  # a step's declaration is wrong: a bug, never sent on
            raise WorkerError(self._undeclared_rows[0], self._round,
                              "the step replied raw rows but does not declare "
                              "discloses='rows' (kernelscale.runtime.steps)")
        missing = [w for w, m in enumerate(self._messages) if m is None]
        if missing:
            raise WorkerError(missing[0], self._round, "no reply (the backend lost it)")
        for messages in self._messages:
            self._cluster.ledger.extend(messages)
        if self._reduce is None:
            return self._replies
        return self._partial.pop((0, self._top))


def _merge(left, right):
    """``left + right`` of two owned partial sums (``None`` is an empty sum)."""
    if left is None:
        return right
    if right is None:
        return left
    return add_reply(left, right)


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


def one_openmp_thread():
    """A context in which OpenMP code (scikit-learn's ``KMeans``) runs one thread.

    For the k-means of a worker step (one core per worker, as BLAS) and of the
    master's small coreset. OpenMP's limit holds for the calling thread only.
    Two OpenMP threads on a few hundred points gain nothing, and on a busy
    machine they spin waiting for a core: a 30-point ``KMeans`` fit took 75 ms
    instead of 5 ms with the load of other processes (measured here).
    """
    global _BLAS
    if _BLAS is None:
        _BLAS = ThreadpoolController()
    return _BLAS.limit(limits=1, user_api="openmp")


def worker_seeds(random_state: np.random.Generator, n_workers: int) -> list[int]:
    """Independent per-worker seeds from ``SeedSequence(...).spawn(n_workers)``.

    Reproducible for a given generator whatever the backend and whatever order
    the workers answer in. Each seed is one word when sent.

    Parameters
    ----------
    random_state : numpy.random.Generator
        The master's generator.
    n_workers : int
        How many seeds.

    Returns
    -------
    seeds : list of int
        One seed per worker, in worker order.

    See Also
    --------
    shared_seed : One seed for randomness every worker must share.
    """
    root = int(random_state.integers(2**63))
    children = np.random.SeedSequence(root).spawn(n_workers)
    return [int(c.generate_state(1, dtype=np.uint64)[0]) for c in children]


def shared_seed(random_state: np.random.Generator) -> int:
    """A seed the master broadcasts for randomness every worker must share.

    Parameters
    ----------
    random_state : numpy.random.Generator
        The master's generator (from the estimator's ``random_state``).

    Returns
    -------
    seed : int
        One word when broadcast; every worker rebuilds the same random operator
        (a feature map, a sketch) from it.

    See Also
    --------
    worker_seeds : Independent seeds for randomness local to each worker.
    """
    return int(random_state.integers(2**63))


__all__ = [
    "REDUCTIONS",
    "Cluster",
    "LostWorkerWarning",
    "RoundReplies",
    "add_reply",
    "one_blas_thread",
    "Tagged",
    "WorkerError",
    "WorkerState",
    "shared_seed",
    "worker_seeds",
]
