"""Row chunks of a worker's partition, computed in parallel where the backend has cores.

A worker step walks its rows in chunks (bounded memory, DESIGN.md). Written as
``for start, stop, value in map_chunks(compute, n_rows, chunk_size)``, the
chunks are computed by the backend's chunk pool when it has one (the
in-process :class:`~kernelscale.backends.local.LocalCluster` with ``n_jobs > 1``), a
few chunks ahead, and always handed back in row order. A step that adds the
chunks' values up in that order gets the same result, bit for bit, with or
without the pool: parallel chunks change the time, never the answer. Without a
pool (one job, or a remote worker) it is a plain loop.

This is what keeps every core busy when one worker holds most of the data
(with power-law partitions the largest of 50 workers holds over half of the
rows): the chunks of a large partition spread over the cores.
"""

from __future__ import annotations

import contextvars
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Executor

_POOL: contextvars.ContextVar[tuple[Executor, int] | None] = contextvars.ContextVar(
    "kernelscale_chunk_pool", default=None)


def chunk_bounds(n_rows: int, chunk_size: int) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering ``range(n_rows)`` in chunks of ``chunk_size`` rows."""
    return [(start, min(start + chunk_size, n_rows)) for start in range(0, n_rows, chunk_size)]


def map_chunks(compute: Callable[[int, int], object], n_rows: int,
               chunk_size: int) -> Iterator[tuple[int, int, object]]:
    """``(start, stop, compute(start, stop))`` for every chunk, in row order.

    ``compute`` must not depend on the other chunks (it may write its own slice
    of a preallocated array). With a chunk pool, at most twice its thread count
    chunks are computed ahead of the one being consumed.
    """
    bounds = chunk_bounds(n_rows, chunk_size)
    pool = _POOL.get()
    if pool is None or len(bounds) < 2:
        for start, stop in bounds:
            yield start, stop, compute(start, stop)
        return
    executor, n_threads = pool
    ahead: deque = deque()
    todo = iter(bounds)
    try:
        while True:
            while len(ahead) < 2 * n_threads:
                bound = next(todo, None)
                if bound is None:
                    break
                ahead.append((*bound, executor.submit(compute, *bound)))
            if not ahead:
                return
            start, stop, future = ahead.popleft()
            yield start, stop, future.result()
    finally:  # a failed chunk (or an abandoned loop) leaves nothing running
        for *_, future in ahead:
            future.cancel()
        for *_, future in ahead:
            if not future.cancelled():
                future.exception()


def run_with_chunk_pool(pool: tuple[Executor, int] | None, function: Callable, *args):
    """``function(*args)`` with ``pool`` as the chunk pool of :func:`map_chunks` calls in it."""
    token = _POOL.set(pool)
    try:
        return function(*args)
    finally:
        _POOL.reset(token)


__all__ = ["chunk_bounds", "map_chunks", "run_with_chunk_pool"]
