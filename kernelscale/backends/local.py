"""The in-process backend: every worker is a :class:`~kernelscale.runtime.WorkerState` here.

:class:`LocalCluster` runs the workers' steps on a thread pool (``n_jobs``
threads, one BLAS thread each); the counting, phases and reductions are the
core's (:class:`~kernelscale.runtime.Cluster`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

import numpy as np

from kernelscale.runtime.chunks import run_with_chunk_pool
from kernelscale.runtime.cluster import Cluster, WorkerError, WorkerState, one_blas_thread


def effective_n_jobs(n_jobs: int | None) -> int:
    """Threads for ``n_jobs`` as in scikit-learn (None: 1; -1: all cores; -2: all but one).

    Parameters
    ----------
    n_jobs : int or None
        scikit-learn's ``n_jobs``.

    Returns
    -------
    threads : int
        At least 1.

    Examples
    --------
    >>> effective_n_jobs(None), effective_n_jobs(3)
    (1, 3)
    """
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
        Threads, with scikit-learn's meaning: ``None`` or 1 runs the workers'
        steps one after another, ``-1`` uses every core. Steps run ``n_jobs`` at
        once, and the row chunks inside a step
        (:func:`~kernelscale.runtime.chunks.map_chunks`) on ``n_jobs`` more
        threads, so one large partition still uses every core. Every thread runs
        BLAS on one thread. The model and the ledger do not depend on ``n_jobs``
        (chunks and summed replies are added in a fixed order).

    Examples
    --------
    >>> import numpy as np
    >>> from kernelscale.backends.local import LocalCluster
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
        self._chunk_pool: ThreadPoolExecutor | None = None

    def _run(self, step, per_worker_args, round, deliver):
        calls = zip(self.states, per_worker_args, strict=True)
        with one_blas_thread():
            if self.n_jobs == 1:
                for state, args in calls:
                    deliver(state.worker, *_call_step(None, step, state, args, round))
                return
            if self._pool is None:
                # Workers' steps on one pool, their row chunks (map_chunks) on another:
                # a step waiting for its chunks never holds up a chunk's thread.
                self._pool = ThreadPoolExecutor(self.n_jobs, thread_name_prefix="kernelscale")
                self._chunk_pool = ThreadPoolExecutor(self.n_jobs,
                                                      thread_name_prefix="kernelscale-chunks")
            chunks = (self._chunk_pool, self.n_jobs)
            # Steps start in worker order, at most 2 n_jobs at once; the master takes
            # each reply as soon as it is ready, in any order (a summed round folds it
            # in at once), so it holds O(n_jobs) replies whatever the round's size.
            window, calls, pending = 2 * self.n_jobs, iter(calls), {}
            failed: dict[int, BaseException] = {}
            while True:
                while not failed and len(pending) < window:
                    call = next(calls, None)
                    if call is None:
                        break
                    state, args = call
                    future = self._pool.submit(_call_step, chunks, step, state, args, round)
                    pending[future] = state.worker
                if not pending:
                    break
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in sorted(done, key=pending.__getitem__):
                    worker = pending.pop(future)
                    if future.exception() is not None:
                        failed[worker] = future.exception()
                    elif not failed:
                        deliver(worker, *future.result())
            if failed:
                # Every worker below the first failure had started before it, and every
                # started step has ended: the lowest failure is the one a serial run meets.
                raise failed[min(failed)]

    def close(self) -> None:
        """Stop the thread pool (the partitions stay; a later round starts a new pool)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._chunk_pool.shutdown(wait=True)
            self._pool = self._chunk_pool = None


def _call_step(chunk_pool, step, state: WorkerState, args: tuple, round: str):
    """``(reply, seconds)`` of one step; a failure becomes a :class:`WorkerError`."""
    start = time.perf_counter()
    try:
        reply = run_with_chunk_pool(chunk_pool, step, state, *args)
    except Exception as exc:  # one exception naming the worker and the round
        raise WorkerError(state.worker, round, f"{type(exc).__name__}: {exc}") from exc
    return reply, time.perf_counter() - start


__all__ = ["LocalCluster", "effective_n_jobs"]
