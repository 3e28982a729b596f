"""Drawing distinct rows from the workers, and keeping track of what was drawn.

Every sampler of :mod:`kernelscale.horizontal` draws its points with these. On
the master: the allocation of a sample budget over workers (:func:`allocate`),
:func:`sample_distinct`, the loop that draws until the budget holds that many
distinct points, :func:`uniform_sample` (used by disKPCA and the uniform
baselines alike) and the :func:`inclusion_weights` that make a uniform
sample's distinct points stand for all rows. On a worker: :func:`sample_rows`,
which draws distinct unsampled rows in proportion to weights and marks every
local copy of a drawn row sampled too (copies found by a random-projection hash
of the rows, confirmed exactly), and the uniform baselines' steps.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from kernelscale.arrays import (
    is_device_array,
    namespace,
    rows,
    take_rows,
    to_device_of,
    to_host,
)
from kernelscale.linalg import unique_rows
from kernelscale.runtime import Cluster, Tagged, WorkerState, worker_seeds
from kernelscale.runtime.lost import answered
from kernelscale.runtime.steps import worker_step


def allocate(budget: int, weights, capacity, rng: np.random.Generator) -> np.ndarray:
    """Split ``budget`` draws over workers in proportion to ``weights``, within ``capacity``.

    A multinomial draw (the i.i.d. sampling of the paper, aggregated per worker);
    a worker cannot give more distinct points than it has with positive weight,
    so the excess is drawn again among the others.
    """
    weights = np.asarray(weights, dtype=float)
    capacity = np.asarray(capacity, dtype=np.int64)
    counts = np.zeros(len(weights), dtype=np.int64)
    budget = int(min(budget, capacity.sum()))
    while budget > 0:
        open_ = (counts < capacity) & (weights > 0)
        if not open_.any():
            break
        p = np.where(open_, weights, 0.0)
        draw = rng.multinomial(budget, p / p.sum())
        take = np.minimum(draw, capacity - counts)
        counts += take
        budget -= int(take.sum())
    return counts


def distinct_rows(Y) -> np.ndarray:
    """Sorted indices of the first occurrence of each distinct row of ``Y``.

    The same answer as :func:`kernelscale.linalg.unique_rows`, but a CSR ``Y``
    is compared row by row on its canonical (indices, values) without
    densifying it (|Y| x d would be 320 MB for 400 rows of d = 100,000).
    """
    if not sp.issparse(Y):
        return unique_rows(Y)
    seen, first = set(), []
    for i, key in enumerate(row_keys(Y)):
        if key not in seen:
            seen.add(key)
            first.append(i)
    return np.asarray(first, dtype=np.intp)


def row_keys(X) -> list[bytes]:
    """Each row's exact value as bytes, equal for equal rows.

    -0.0 and 0.0 alike; a CSR row by its canonical indices and values, without
    densifying it.
    """
    if not sp.issparse(X):
        return [row.tobytes() for row in np.asarray(X, dtype=float) + 0.0]
    X = sp.csr_matrix(X, copy=True)
    X.sum_duplicates()
    X.eliminate_zeros()
    X.data[X.data == 0] = 0.0  # -0.0 and 0.0 are equal
    return [X.indices[lo:hi].tobytes() + b"|" + X.data[lo:hi].tobytes()
            for lo, hi in zip(X.indptr[:-1], X.indptr[1:], strict=True)]


def sample_distinct(cluster: Cluster, kept, budget: int, weights, capacity, step, rng,
                    round_name: str, redraw: bool = True, arrivals: list | None = None,
                    first: tuple | None = None):
    """Draw rows with ``step`` until ``kept`` plus the new rows hold ``budget`` distinct points.

    The master's side of every sampling stage. Each round allocates the
    shortfall over the workers (:func:`allocate`, by ``weights`` within the
    remaining ``capacity``, an upper bound on each worker's unsampled rows of
    positive weight), each worker answers ``step(state, count)`` with up to
    ``count`` distinct unsampled rows (:func:`sample_rows`; fewer means it has
    no more, and it gets no further requests), and the master drops the rows
    equal to a point it already has (copies on several workers). While copies
    keep the budget short it tops up, asking for twice the shortfall each
    further round (keeping a random subset of the new distinct rows when that
    overshoots), so heavily duplicated data costs O(log n) rounds. It stops
    when the budget is met or no worker has capacity left; capacity shrinks
    every round, so it always ends. With ``redraw=False`` it stops after the
    first round (a word budget: the copies' replacements were not forecast),
    leaving the sample short by the copies. ``arrivals``, when given, gets
    every round's replies' rows, one entry per worker (``None`` for a worker
    that sent none), for :func:`inclusion_weights`. ``first``: ``(step,
    per-worker seeds)`` for the first round, whose step gets
    ``Tagged(seed=own seed, scalars=count)`` and sets the worker's sampler up
    before it draws (the round goes out even when no row is asked, so every
    worker is set up).

    Returns
    -------
    (new distinct rows, not in ``kept``; rows received from each worker)
    """
    weights = np.asarray(weights, dtype=float)
    remaining = np.asarray(capacity, dtype=np.int64).copy()
    remaining[sorted(cluster.lost_workers)] = 0
    received = np.zeros_like(remaining)
    n_kept = 0 if kept is None else kept.shape[0]
    chosen, attempt = None, 0
    while (short := budget - n_kept - (0 if chosen is None else chosen.shape[0])) > 0 or (
            first is not None and attempt == 0):
        counts = allocate(max(short, 0) * 2 ** min(attempt, 30), weights, remaining, rng)
        if counts.sum() == 0 and (first is None or attempt > 0):
            break
        name = round_name + ("" if attempt == 0 else f" (top-up {attempt})")
        if first is not None and attempt == 0:  # the sampler's setup in the same message
            setup, seeds = first
            replies = cluster.scatter_map(
                setup, [(Tagged(seed=seed, scalars=int(c)),) for seed, c in zip(
                    seeds, counts, strict=True)], round=name, reply_kind="raw_points")
        else:
            replies = cluster.scatter_map(step, [(int(c),) for c in counts], round=name,
                                          kind="scalars", reply_kind="raw_points")
        got = np.array([0 if r is None else r["raw_points"].shape[0] for r in replies],
                       dtype=np.int64)
        received += got
        # A short reply means the worker has no more (and a lost one answers nothing).
        remaining = np.where(got < counts, 0, remaining - counts)
        remaining[sorted(cluster.lost_workers)] = 0
        new = stack_rows([r["raw_points"] for r in answered(replies)])
        if arrivals is not None:
            arrivals.append([None if r is None else r["raw_points"] for r in replies])
        before = [b for b in (kept, chosen) if b is not None]
        offset = sum(b.shape[0] for b in before)
        first = distinct_rows(stack_rows(before + [new]))
        fresh = first[first >= offset] - offset
        if fresh.size > short:
            fresh = np.sort(rng.choice(fresh, size=short, replace=False))
        chosen = new[fresh] if chosen is None else stack_rows([chosen, new[fresh]])
        attempt += 1
        if not redraw:
            break
    if chosen is None and kept is not None:
        chosen = _empty_rows(kept)
    return chosen, received


def uniform_sample(cluster: Cluster, n_rows, budget: int, rng, round_name: str,
                   kept=None, redraw: bool = True, arrivals: list | None = None):
    """Sample ``budget`` distinct points uniformly over all workers' rows.

    One round (:func:`sample_distinct`, which draws again when copies of drawn
    points leave the sample short): each worker's own seed travels with its
    count (one word each), so it sets its sampler up and draws in the same
    message. Returns (the distinct points, the rows received from each worker).
    """
    seeds = worker_seeds(rng, cluster.n_workers)
    rows = np.asarray(n_rows, dtype=np.int64)
    return sample_distinct(cluster, kept, budget, rows, rows, uniform_sample_step, rng,
                           round_name, redraw, arrivals, first=(uniform_first_sample_step, seeds))


def inclusion_weights(cluster: Cluster, Y, arrivals: list, n_samples: int,
                      round_name: str) -> np.ndarray:
    """Weights that make the distinct points ``Y`` of a uniform sample stand for all rows.

    A uniform sample holds each distinct point once, so a point with c copies
    in the data (spam has one with 69) counts as one row. Each worker replies
    with the copies in its partition of every row it sent (round
    ``round_name``, one word per row received, in the order sent;
    :func:`sent_copies_step`); a point's copies c are the sum over the workers
    that sent it. The sample consumed every copy of each row it drew, so it is
    a uniform sample of rows at the rate q = (copies consumed) / n, which
    holds a point with c copies with probability ``1 - (1 - q)^c``; its
    Horvitz-Thompson weight is c over that probability (about 1/q for a point
    without copies, c for one drawn surely). Returned scaled to mean 1.
    ``arrivals``: the rows each worker sent, per sampling round (from
    :func:`uniform_sample` or :func:`sample_distinct`).
    """
    replies = cluster.broadcast_map(sent_copies_step, round=round_name, reply_kind="scalars")
    where = {key: i for i, key in enumerate(row_keys(Y))}
    copies = np.zeros(Y.shape[0])
    consumed = 0.0
    for worker, counts in enumerate(replies):
        rows = [block[worker] for block in arrivals if block[worker] is not None]
        if counts is None or not rows:  # lost (lost="drop"): its points count one row
            continue
        for key, count in zip(row_keys(stack_rows(rows)), np.asarray(counts, dtype=float),
                              strict=True):
            consumed += count
            i = where.get(key)
            if i is not None:  # a row the master kept (a top-up's overshoot is not)
                copies[i] += count
    copies = np.maximum(copies, 1.0)
    rate = min(consumed / n_samples, 1.0)
    weights = copies / -np.expm1(copies * np.log1p(-rate)) if rate < 1.0 else copies
    return weights / weights.mean()


@worker_step(discloses="nothing")
def uniform_setup_step(state: WorkerState, own_seed: int):
    """Uniform baselines: a fresh sampler state (own seed, nothing sampled yet)."""
    state.rng = np.random.default_rng(own_seed)
    state.sampled = np.zeros(state.data.shape[0], dtype=bool)
    state.sent_copies = np.zeros(0)


@worker_step(discloses="rows")
def uniform_first_sample_step(state: WorkerState, message):
    """A fresh sampler state (:func:`uniform_setup_step`), then ``count`` rows uniformly:
    ``message`` is ``Tagged(seed=own seed, scalars=count)``."""
    uniform_setup_step(state, int(message["seed"]))
    return uniform_sample_step(state, int(message["scalars"]))


@worker_step(discloses="rows")
def uniform_sample_step(state: WorkerState, count: int):
    """``count`` rows uniformly among the worker's unsampled rows."""
    return Tagged(raw_points=sample_rows(state, np.ones(state.data.shape[0]), int(count)))


def sample_rows(state: WorkerState, weights: np.ndarray, count: int):
    """Draw up to ``count`` distinct unsampled rows with probability proportional to ``weights``.

    Rows are drawn without replacement; a drawn row marks its local copies
    sampled too, so a worker never sends the same point twice and returns
    fewer than ``count`` rows only when it has no more distinct ones.
    """
    if count == 0:
        return _empty_rows(state.data)
    picked, copies = [], []
    while count > 0:
        p = np.where(state.sampled, 0.0, weights)
        available = np.count_nonzero(p)
        if available == 0:
            break
        idx = state.rng.choice(len(p), size=min(count, available), replace=False,
                               p=p / p.sum())
        idx, local_copies = _mark_sampled_with_copies(state, np.sort(idx))
        picked.append(idx)
        copies.append(local_copies)
        count -= idx.size
    if not picked:
        return _empty_rows(state.data)
    idx, copies = np.concatenate(picked), np.concatenate(copies)
    order = np.argsort(idx, kind="stable")
    # Each sent row's copies in this partition, in the order sent (sent_copies_step).
    state.sent_copies = np.concatenate([getattr(state, "sent_copies", np.zeros(0)),
                                        copies[order]])
    return to_host(take_rows(state.data, idx[order]))  # the rows sent live on the host


def _mark_sampled_with_copies(state: WorkerState, idx: np.ndarray):
    """Mark rows ``idx`` and their local copies sampled.

    Returns ``idx`` without copies, and how many copies (itself included) each
    has in the partition.

    Copies are found through a random-projection hash of every row (computed
    and sorted once per worker, :func:`_hash_rows`) and confirmed by exact
    comparison. On data without duplicates this changes nothing.
    """
    X = state.data
    if getattr(state, "hash_order", None) is None:
        _hash_rows(state)
    h = state.row_hash
    candidates = _rows_hashed_as(state, h[idx])
    state.sampled[idx] = True
    if candidates.size == idx.size == np.unique(h[idx]).size:  # no hash shared: no copies
        return idx, np.ones(idx.size)
    keep, counts = [], []
    taken = set()
    for i in idx:
        if i in taken:
            continue
        keep.append(i)
        group = candidates[h[candidates] == h[i]]
        copies = group[_equal_rows(X, group, i)]
        state.sampled[copies] = True
        taken.update(copies.tolist())
        counts.append(copies.size)
    return np.asarray(keep, dtype=np.intp), np.asarray(counts, dtype=float)


@worker_step(discloses="per-row")
def sent_copies_step(state: WorkerState):
    """The copies in this partition of every row sent so far, in the order sent.

    Each count includes the row itself, as counted when it was drawn (for
    :func:`inclusion_weights`).
    """
    return getattr(state, "sent_copies", np.zeros(0))


def _hash_rows(state: WorkerState) -> None:
    """Hash every row and sort the hashes, once per worker.

    ``state.row_hash``: a random projection of every row (O(nnz)); and its sorted order
    (``state.hash_order``, ``state.sorted_hash``), so that each draw finds the rows that
    share a hash by binary search (O(k log n) for k drawn rows, not O(n) per draw).

    A device partition is hashed and sorted on its device; only the hashes and the
    order come to the host.
    """
    X = state.data
    probe = np.random.default_rng(0x5EED).standard_normal(X.shape[1])
    # In the partition's dtype: a float64 probe would copy a float32 partition.
    if is_device_array(X):
        xp = namespace(X)
        hashed = xp.reshape(X @ to_device_of(probe, X, X.dtype), (-1,))
        order = to_host(xp.argsort(hashed))
        state.row_hash = np.asarray(to_host(hashed), dtype=float)
    else:
        state.row_hash = np.asarray(X @ probe.astype(X.dtype), dtype=float).ravel()
        order = np.argsort(state.row_hash)
    state.hash_order = np.asarray(order, dtype=np.intp)
    state.sorted_hash = state.row_hash[state.hash_order]


def _rows_hashed_as(state: WorkerState, targets: np.ndarray) -> np.ndarray:
    """The rows (sorted indices) whose hash equals one of ``targets``."""
    targets = np.unique(targets)
    first = np.searchsorted(state.sorted_hash, targets, side="left")
    last = np.searchsorted(state.sorted_hash, targets, side="right")
    if not targets.size:
        return np.zeros(0, dtype=np.intp)
    return np.sort(np.concatenate([state.hash_order[a:b] for a, b in zip(first, last,
                                                                           strict=True)]))


def _equal_rows(X, rows: np.ndarray, i: int) -> np.ndarray:
    """Mask over ``rows``: which rows of ``X`` equal row ``i`` exactly."""
    if is_device_array(X):
        xp = namespace(X)
        return to_host(xp.all(take_rows(X, rows) == X[i:i + 1, ...], axis=1))
    if not sp.issparse(X):
        return np.all(X[rows] == X[i], axis=1)
    diff = (sp.csr_matrix(X[rows])
            - sp.csr_matrix(np.ones((rows.size, 1))) @ sp.csr_matrix(X[i])).tocsr()
    diff.eliminate_zeros()
    return np.diff(diff.indptr) == 0


def _empty_rows(X):
    return to_host(rows(X, 0, 0))


def stack_rows(blocks):
    """Vertically stack dense or CSR row blocks."""
    if any(sp.issparse(b) for b in blocks):
        return sp.vstack([sp.csr_matrix(b) for b in blocks], format="csr")
    return np.vstack(blocks)
