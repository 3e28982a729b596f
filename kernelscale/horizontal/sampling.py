"""Distributed sampling of representative points (Algorithms 1 and 2 of paper 001).

Worker steps for the kernel subspace embedding, the distributed leverage
scores (disLS), leverage-score sampling of P and adaptive sampling of Y~ by the
feature-space residual to span(phi(P)), or by the ridge residual of the
default sampler; and, on the master, the allocation of a sample budget over
workers, :func:`sample_distinct`, the loop that draws until the budget holds
that many distinct points, and :func:`uniform_sample` (used by disKPCA and the
uniform baselines alike).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from kernelscale.arrays import (
    device,
    is_device_array,
    is_float32,
    namespace,
    rows,
    take_rows,
    to_device_of,
    to_host,
)
from kernelscale.features import make_feature_map
from kernelscale.kernels import Kernel
from kernelscale.linalg import (
    gram,
    pack_symmetric,
    projected_sq_norms,
    ridge_factor,
    ridge_whitening,
    unique_rows,
    unpack_trapezoidal,
    whitening,
)
from kernelscale.runtime import Cluster, Tagged, WorkerState, worker_seeds
from kernelscale.runtime.chunks import map_chunks
from kernelscale.runtime.lost import answered
from kernelscale.runtime.steps import worker_step
from kernelscale.sketches import make_sketch

#: The share of each ridge round's new landmarks drawn uniformly (a defensive mixture)
#: where the pilot is too small to read (fewer than ``pilot.MIN_PILOT`` k points), with
#: RBF and Laplacian kernels (:func:`defensive_share`).
DEFENSIVE_SHARE = 0.5
#: The same share where the pilot is read.
READ_PILOT_SHARE = 0.5
#: From a pilot of TRUSTED_PILOT x k points on, the ridge rounds draw no uniform share.
TRUSTED_PILOT = 6


def defensive_share(kernel, n_pilot: int | None = None, n_components: int | None = None,
                    ridge_scale: float = 1.0) -> float:
    """The ridge rounds' uniform share after a pilot of ``n_pilot`` points.

    * Polynomial, linear and arc-cosine kernels: 0. The energy sits with the
      points of large norm, which the residual rounds find and a uniform draw
      mostly misses (a share of 0.25 had 0.77-2.55x the excess of none, median
      1.08x over 34 cells of seven sets; ``benchmarks/budget_heldout.py``).
    * ``ridge_scale=0`` (the pilot rule read a concentrated spectrum and draws
      by the plain residual, :mod:`kernelscale.horizontal.pilot`): 0; the
      scores are what the rule trusts there.
    * A pilot too small to read (fewer than ``MIN_PILOT`` k points, or
      ``n_pilot`` not given): :data:`DEFENSIVE_SHARE`. Its scores come from
      a handful of points.
    * A pilot of :data:`TRUSTED_PILOT` k points or more: 0. Its scores are
      trusted; in the five cells where this changes the budgeted fit, the
      excess is 0.79-0.98x that with the share (income, spam and insurance
      with RBF 1.0 x the median distance and shuttle with 0.2 x at 10^6
      words, pilots of about 100 points; digits at 3 x 10^5).
    * Otherwise :data:`READ_PILOT_SHARE`.

    The shares and the threshold were chosen by leaving one set out of nine
    (``benchmarks/budget_heldout.py``, ``docs/budget.md``).
    """
    from kernelscale.horizontal.pilot import too_small_to_read

    if not kernel.is_shift_invariant or ridge_scale == 0:
        return 0.0
    if n_pilot is None or n_components is None or too_small_to_read(n_pilot, n_components):
        return DEFENSIVE_SHARE
    if n_pilot >= TRUSTED_PILOT * n_components:
        return 0.0
    return READ_PILOT_SHARE


#: Whether the ridge sampler's ridge counts the energy outside span(phi(P)) where its
#: pilot P is too small to read (:func:`needs_ridge_floor`). Off: leaving one set out of
#: nine, it met no more cells than without (``benchmarks/budget_heldout.py``).
RIDGE_FLOOR = False


def needs_ridge_floor(kernel, n_pilot: int, n_components: int) -> bool:
    """Whether the ridge sampler measures the energy outside its pilot's span first.

    Musco and Musco's (2017) ridge is ``lambda = (1/k) sum_{i>k} lambda_i(K)``;
    from a uniform pilot P of m points, (n/m) K_PP's spectrum stands for K's
    (:func:`~kernelscale.horizontal.diskpca.pilot_ridge`) within span(phi(P))
    only. The energy outside that span, the rows' total squared distance to it
    (trace(K) minus the trace of P's Nystroem approximation), belongs to the
    tail beyond k as well, and a pilot of a few times k points leaves most of
    it out: a pilot of k points reads a tail of 0, and the rounds then draw by
    the plain residual, which chases isolated points. So where the pilot is
    too small to read (fewer than :data:`~kernelscale.horizontal.pilot.MIN_PILOT`
    k points) with RBF and Laplacian kernels, a first round sends P and has
    every worker return its rows' total residual (2 words up per worker), and
    the ridge adds it. Polynomial, linear and arc-cosine kernels keep ridge 0,
    by design (:func:`~kernelscale.horizontal.diskpca.default_pilot_size`).
    """
    from kernelscale.horizontal.pilot import too_small_to_read

    return bool(RIDGE_FLOOR and kernel.is_shift_invariant
                and too_small_to_read(int(n_pilot), int(n_components)))


def defensive_split(n_new: int, share: float | None = None) -> tuple[int, int]:
    """Split a ridge round's ``n_new`` landmarks into (by the residual, uniformly).

    The ridge sampler's scores come from a pilot of a few dozen points; where
    they mislead (a pilot of k points has no tail beyond k, so the ridge is 0
    and the plain residual chases isolated points) its sample can be worse
    than a uniform one. Defensive importance sampling (Hesterberg 1995) draws
    from a mixture of the proposal and the nominal distribution, which bounds
    the loss against the nominal one; here each round draws ``floor(share x
    n_new)`` of its points uniformly from the rows not sampled yet and the
    rest by the ridge residual, Musco and Musco's (2017) ridge leverage score
    estimate. Landmarks only add to the span, so the sample's projection error
    is never above that of its uniform part alone. ``share`` defaults to
    :data:`DEFENSIVE_SHARE`, read at call time; the sampler and the forecast
    pass :func:`defensive_share` of the kernel.
    """
    share = DEFENSIVE_SHARE if share is None else float(share)
    n_uniform = int(np.floor(share * max(int(n_new), 0) + 1e-9))
    return int(n_new) - n_uniform, n_uniform


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
    """Each row's exact value as bytes, equal for equal rows (-0.0 and 0.0 alike; a CSR
    row by its canonical indices and values, without densifying it)."""
    if not sp.issparse(X):
        return [row.tobytes() for row in np.asarray(X, dtype=float) + 0.0]
    X = sp.csr_matrix(X, copy=True)
    X.sum_duplicates()
    X.eliminate_zeros()
    X.data[X.data == 0] = 0.0  # -0.0 and 0.0 are equal
    return [X.indices[lo:hi].tobytes() + b"|" + X.data[lo:hi].tobytes()
            for lo, hi in zip(X.indptr[:-1], X.indptr[1:], strict=True)]


def sample_distinct(cluster: Cluster, kept, budget: int, weights, capacity, step, rng,
                    round_name: str, redraw: bool = True, arrivals: list | None = None):
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
    that sent none), for :func:`inclusion_weights`.

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
    while (short := budget - n_kept - (0 if chosen is None else chosen.shape[0])) > 0:
        counts = allocate(short * 2 ** min(attempt, 30), weights, remaining, rng)
        if counts.sum() == 0:
            break
        name = round_name + ("" if attempt == 0 else f" (top-up {attempt})")
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

    Two rounds: each worker's own seed (``round_name + ': seeds'``, one word
    each), then the points (:func:`sample_distinct`, which draws again when
    copies of drawn points leave the sample short). Returns (the distinct
    points, the rows received from each worker).
    """
    cluster.scatter_map(uniform_setup_step, [(s,) for s in worker_seeds(rng, cluster.n_workers)],
                        round=f"{round_name}: seeds", kind="seed")
    rows = np.asarray(n_rows, dtype=np.int64)
    return sample_distinct(cluster, kept, budget, rows, rows, uniform_sample_step, rng,
                           round_name, redraw, arrivals)


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
    """Mark rows ``idx`` and their local copies sampled; return ``idx`` without copies,
    and how many copies (itself included) each has in the partition.

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


@worker_step
def sent_copies_step(state: WorkerState):
    """The copies in this partition (the row itself included) of every row sent so far,
    in the order sent (for :func:`inclusion_weights`), as counted when they were drawn."""
    return getattr(state, "sent_copies", np.zeros(0))


def _hash_rows(state: WorkerState) -> None:
    """``state.row_hash``: a random projection of every row (O(nnz)); and its sorted order
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


def _host_rows(X, start, stop):
    """Rows of the partition on the host (the random feature maps are NumPy's)."""
    return to_host(rows(X, start, stop))


# Step 1: kernel subspace embedding E_i = phi_hat(A_i) T (Algorithm 4 of 001, line 1)
@worker_step
def embed_step(state: WorkerState, message):
    """Embed the partition, keep ``E_i``, reply the leverage-score message.

    ``message`` is ``Tagged(seed=(feature, sketch, own), model=config)``.

    ``config['messages'] == 'gram'``: ``E_i^T E_i`` packed (t(t+1)/2 words).
    ``'sketch'``: the paper's ``T_i^T E_i`` (p x t) or ``E_i`` itself when n_i <= p.
    """
    feature_seed, sketch_seed, own_seed = message["seed"]
    state.config = config = message["model"]
    state.rng = np.random.default_rng(own_seed)
    X = state.data
    state.sampled = np.zeros(X.shape[0], dtype=bool)
    kernel = Kernel.from_dict(config["kernel"])
    fmap = make_feature_map(kernel, X.shape[1], config["n_random_features"], feature_seed)
    t = config["embedding_dim"]
    sketch = make_sketch("gaussian", fmap.n_components, t, sketch_seed)
    chunk = config["chunk_size"]
    dtype = np.dtype(config.get("embedding_dtype", "float64"))
    state.embedding = E = np.empty((X.shape[0], t), dtype=dtype)

    def embed_chunk(start, stop):
        block = fmap.transform(_host_rows(X, start, stop), chunk_size=chunk, dtype=dtype)
        E[start:stop] = sketch.right(block)
        return gram(E[start:stop]) if config["messages"] == "gram" else None

    gram_sum = 0.0
    for *_, chunk_gram in map_chunks(embed_chunk, X.shape[0], chunk):
        if chunk_gram is not None:
            gram_sum = gram_sum + chunk_gram
    if config["messages"] == "gram":
        return pack_symmetric(gram_sum)
    p = config["row_sketch_dim"]
    if X.shape[0] <= p:
        return state.embedding
    return row_sketch(state.embedding, p, own_seed, chunk)


def row_sketch(M: np.ndarray, n_out: int, seed: int, chunk: int) -> np.ndarray:
    """``T_i^T M``: a CountSketch + Gaussian subspace embedding over the rows of ``M``."""
    sketch = make_sketch("countsketch+gaussian", M.shape[0], n_out, seed)
    return sketch.left(M)


# Step 2: disLS, line 3 of Algorithm 1 of 001: l_j = ||(Z^T)^-1 E^i_{:j}||^2
@worker_step
def leverage_scores_step(state: WorkerState, packed_factor: np.ndarray):
    """Keep the generalised leverage scores of the embedded rows; reply (sum, #positive).

    ``packed_factor`` is the master's upper-trapezoidal factor ``R`` (r x t,
    :func:`kernelscale.linalg.pack_trapezoidal`), with ``R^T R`` the
    pseudo-inverse of ``E^T E`` on its numerical range: the score of row ``e``
    is ``||R e||^2``, the paper's ``||(Z^T)^-1 e||^2`` without inverting a
    singular ``Z``.
    """
    E, chunk = state.embedding, state.config["chunk_size"]
    factor_t = unpack_trapezoidal(packed_factor, E.shape[1]).T.astype(E.dtype, copy=False)
    state.scores = np.empty(E.shape[0])
    for start in range(0, E.shape[0], chunk):  # no n_i x t temporaries
        projected = E[start : start + chunk] @ factor_t
        state.scores[start : start + chunk] = np.einsum("ij,ij->i", projected, projected)
    return np.array([state.scores.sum(), np.count_nonzero(state.scores > 0)])


# Step 3: leverage-score sampling of P (Algorithm 2 of 001, line 1)
@worker_step
def leverage_sample_step(state: WorkerState, count: int):
    return Tagged(raw_points=sample_rows(state, state.scores, int(count)))


# Step 4: residuals k(a, a) - ||proj of phi(a) on span(phi(P))||^2 (Algorithm 2, line 3)
@worker_step
def residual_step(state: WorkerState, P):
    """Keep P; compute each row's squared feature-space distance to span(phi(P))."""
    config = state.config
    kernel = Kernel.from_dict(config["kernel"])
    return _keep_residuals(state, kernel, P, whitening(kernel(P, P, dtype=np.float64)),
                           config["chunk_size"])


@worker_step
def ridge_residual_step(state: WorkerState, message):
    """Add the new landmarks to those kept; each row's ridge residual to span(phi(S)).

    ``message`` is ``Tagged(raw_points=new points, model={'ridge': mu, ...})``;
    the first round also carries ``'kernel'`` and ``'chunk_size'``, kept in
    ``state.config``. With S every landmark received so far, the residual is
    ``k(a,a) - k(a,S) (K_SS + mu I)^-1 k(S,a)``; with ``mu = 0`` it is
    :func:`residual_step`'s squared distance to span(phi(S)). Divided by the
    ridge lambda, it is Musco and Musco's (2017) estimate of the
    lambda-ridge leverage score of ``a`` from the sample S (their Algorithm 2,
    with ``mu = lambda |S| / n``, the ridge in S's coordinates).
    """
    new_points = message["raw_points"]
    state.config = config = {**getattr(state, "config", {}), **message["model"]}
    kept = getattr(state, "held_landmarks", None)
    S = new_points if kept is None else stack_rows([kept, new_points])
    kernel = Kernel.from_dict(config["kernel"])
    K_SS, ridge = kernel(S, S, dtype=np.float64), float(config["ridge"])
    factor = ridge_factor(K_SS, ridge)
    if factor is None:
        return _keep_residuals(state, kernel, S, ridge_whitening(K_SS, ridge),
                               config["chunk_size"])
    return _keep_residuals(state, kernel, S, factor.T, config["chunk_size"])


def _keep_residuals(state: WorkerState, kernel: Kernel, P, basis, chunk: int):
    """``state.residual = k(a,a) - ||k(a,P) basis||^2`` (0 for sampled rows); reply (sum, #>0).

    With the ridge factor ``G`` (``basis = G.T``) the residual is
    ``k(a,a) - ||G k(P,a)||^2`` (:func:`~kernelscale.linalg.projected_sq_norms`).

    The worker keeps P (``state.held_landmarks``): disLR's round sends only the
    landmarks it does not hold yet. The blocks are in the partition's precision
    (float32 partitions: float32 blocks and products, the residuals in float64).
    """
    state.held_landmarks = P
    X = state.data
    if is_device_array(X):
        residual, largest = _device_residuals(kernel, X, P, basis, chunk)
    else:
        residual = kernel.diag(X).astype(float)
        dtype = np.float32 if X.dtype == np.float32 and P.dtype == np.float32 else np.float64
        basis = np.asarray(basis, dtype=dtype)

        def residual_chunk(start, stop):
            block = kernel(X[start:stop], P, dtype=dtype)
            residual[start:stop] -= projected_sq_norms(block, basis)

        for _ in map_chunks(residual_chunk, X.shape[0], chunk):
            pass
        largest = np.abs(kernel.diag(X)).max(initial=0.0)
    # Round-off makes the residual of points in (or near) the span slightly negative;
    # what is below 1e-12 of the largest k(a, a) is round-off (relative: the data's
    # scale must not decide which points count as already spanned).
    residual[residual <= 1e-12 * float(largest)] = 0.0
    residual[state.sampled] = 0.0
    state.residual = residual
    return np.array([residual.sum(), np.count_nonzero(residual > 0)])


def _device_residuals(kernel: Kernel, X, P, basis, chunk: int) -> tuple[np.ndarray, float]:
    """``k(a,a) - ||k(a,P) basis||^2`` for a device partition, computed on its device
    (blocks and products in its precision, as on the host) and sent to the host once,
    and the largest ``|k(a, a)|``."""
    xp = namespace(X)
    work = xp.float32 if is_float32(X) and P.dtype == np.float32 else xp.float64
    P = to_device_of(P, X)
    basis = to_device_of(np.asarray(basis), X, work)
    sq = xp.empty(X.shape[0], dtype=xp.float64, device=device(X))

    def residual_chunk(start, stop):
        proj = kernel(rows(X, start, stop), P, chunk_size=chunk,  # the chunk is one block
                      dtype=np.float32 if work == xp.float32 else np.float64) @ basis
        sq[start:stop] = xp.astype(xp.sum(proj * proj, axis=1), xp.float64)

    for _ in map_chunks(residual_chunk, X.shape[0], chunk):
        pass
    diag = xp.astype(kernel.diag(X), xp.float64)
    return to_host(diag - sq), float(xp.max(xp.abs(diag))) if diag.shape[0] else 0.0


@worker_step
def adaptive_sample_step(state: WorkerState, count: int):
    return Tagged(raw_points=sample_rows(state, state.residual, int(count)))


@worker_step
def uniform_sample_step(state: WorkerState, count: int):
    """``count`` rows uniformly among the worker's unsampled rows."""
    return Tagged(raw_points=sample_rows(state, np.ones(state.data.shape[0]), int(count)))


@worker_step
def uniform_setup_step(state: WorkerState, own_seed: int):
    """Uniform baselines: a fresh sampler state (own seed, nothing sampled yet)."""
    state.rng = np.random.default_rng(own_seed)
    state.sampled = np.zeros(state.data.shape[0], dtype=bool)
    state.sent_copies = np.zeros(0)


def stack_rows(blocks):
    """Vertically stack dense or CSR row blocks."""
    if any(sp.issparse(b) for b in blocks):
        return sp.vstack([sp.csr_matrix(b) for b in blocks], format="csr")
    return np.vstack(blocks)
