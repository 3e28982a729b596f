"""Distributed linear k-means with coresets (Balcan, Ehrlich, Liang 2013).

Both papers cluster their distributed embeddings with this protocol (paper 003,
Algorithm 1 step 19; paper 001, section 6.6):

1. every worker finds a constant-factor local solution ``B_i`` (k-means++ then
   Lloyd, scikit-learn's :class:`~sklearn.cluster.KMeans`) and reports its cost;
2. worker ``i`` samples ``t_i = C cost_i / sum_j cost_j`` of its points with
   probability proportional to the sensitivity bound
   ``m_p = d(p, B_i)^2 + cost(P_b, B_i) / |P_b|`` (the squared distance of ``p``
   to its nearest local centre ``b`` plus the mean squared distance of ``b``'s
   cluster ``P_b``), each with weight ``sum_j cost_j / (C m_p)``, where
   ``cost_i = sum_{p on worker i} m_p`` (twice the local k-means cost); every
   local centre carries the rest of the weight of its points,
   ``|P_b| - sum_{q in S, q in P_b} w_q``;
3. the master runs weighted k-means on the union of the coresets and broadcasts
   the centres; the workers label their points.

The coreset costs ``C`` rows plus ``k`` local centres per worker, whatever the
number of points. Coreset weights of local centres can be negative in the
paper's construction; scikit-learn's weighted k-means needs non-negative
weights, so they are clipped at zero (this only happens when a local cluster
drew more sampled weight than it has points).

Workers cluster either their partition (``source=None``) or an embedding that an
earlier round stored on their state (``source="embedding"``): FK k-means clusters
the rows of ``H``, RFK k-means its random features, CE PCA its projections.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from kernelscale.linalg import as_generator
from kernelscale.runtime import Cluster, Tagged, validate_cluster, worker_seeds
from kernelscale.runtime.cluster import one_openmp_thread
from kernelscale.runtime.steps import worker_step

POINT_KINDS = ("raw_points", "sketch")
LOST_LABEL = -1  # the label of the rows of a client lost during the fit


@dataclass
class DistributedKMeansResult:
    """Output of the coreset k-means protocol.

    Attributes
    ----------
    centers : ndarray of shape (n_clusters, n_dims)
        Cluster centres, in the space of the clustered rows.
    labels : ndarray of shape (n_samples,) or None
        Labels in worker order (partition 0 first), when collected.
    coreset_sizes : ndarray of shape (n_workers,)
        Points sampled by each worker (0 for a worker that did not answer).
    responders : ndarray of bool, shape (n_workers,)
        Workers whose coreset reached the master.
    """

    centers: np.ndarray
    labels: np.ndarray | None
    coreset_sizes: np.ndarray
    responders: np.ndarray


def _rows(state, source):
    X = state.data if source is None else getattr(state, source)
    return X.toarray() if sp.issparse(X) else np.asarray(X, dtype=np.float64)


def _sq_dist_to_centers(X, centers):
    """Squared distance of each row to its nearest centre, and that centre's index."""
    d2 = (
        np.einsum("ij,ij->i", X, X)[:, None]
        - 2.0 * X @ centers.T
        + np.einsum("ij,ij->i", centers, centers)[None, :]
    )
    nearest = np.argmin(d2, axis=1)
    return np.maximum(d2[np.arange(X.shape[0]), nearest], 0.0), nearest


def _local_solution(state, n_clusters, source, seed):
    """Local k-means++ / Lloyd solution of the rows; keeps ``state.kmeans_local``.

    Returns the sensitivity bounds ``m`` (the cost is their sum).
    """
    from sklearn.cluster import KMeans  # slow import: on first use
    from sklearn.exceptions import ConvergenceWarning

    X = _rows(state, source)
    k_local = min(n_clusters, X.shape[0])
    with warnings.catch_warnings(), one_openmp_thread():
        warnings.simplefilter("ignore", ConvergenceWarning)
        km = KMeans(n_clusters=k_local, n_init=1, random_state=seed % 2**32).fit(X)
    centers = km.cluster_centers_
    d2, nearest = _sq_dist_to_centers(X, centers)
    # Sensitivity bound m_p = cost(p, B_i) + cost(P_b, B_i) / |P_b| (Balcan et al. 2013,
    # after Feldman & Langberg): it caps every weight at the average cost of a cluster.
    counts = np.bincount(nearest, minlength=centers.shape[0])
    mean_cost = np.bincount(nearest, weights=d2, minlength=centers.shape[0]) / np.maximum(
        counts, 1
    )
    m = d2 + mean_cost[nearest]
    state.kmeans_local = (centers, m, nearest, seed)
    return m


@worker_step(discloses="aggregates")
def local_solution_step(state, n_clusters, source, seed, responds=True):
    """Worker step 1: local k-means++ / Lloyd solution; reply its cost (1 word)."""
    m = _local_solution(state, n_clusters, source, seed)
    return float(m.sum()) if responds else None


def _coreset_disclosure(*request) -> str:
    """Sampled rows of the data itself (``source=None``) or of an embedding of it."""
    if not request:
        return "nothing"
    return "rows" if request[3] is None else "per-row"


@worker_step(discloses=_coreset_disclosure)
def coreset_step(state, *request):
    """Worker step 2: sample ``n_sampled`` points in proportion to ``m_p``, weight them.

    ``request`` is ``(n_sampled, total_cost, coreset_size, source, point_kind)``;
    a worker that dropped out gets no request and sends nothing.
    """
    if not request:
        return None
    n_sampled, total_cost, coreset_size, source, point_kind = request
    return _coreset_sample(state, source, n_sampled, total_cost / coreset_size, point_kind)


def _coreset_sample(state, source, n_sampled: int, scale: float, point_kind: str) -> Tagged:
    """``n_sampled`` rows drawn in proportion to ``m_p``, weighted ``scale / m_p``, and the
    local centres weighted with the rest of their points' weight (step 2)."""
    X = _rows(state, source)
    centers, m, nearest, seed = state.kmeans_local
    rng = np.random.default_rng([seed, 1])
    counts = np.bincount(nearest, minlength=centers.shape[0]).astype(np.float64)
    if n_sampled > 0 and m.sum() > 0:
        picked = rng.choice(X.shape[0], size=n_sampled, replace=True, p=m / m.sum())
        weights = scale / m[picked]
        counts -= np.bincount(nearest[picked], weights=weights, minlength=centers.shape[0])
        sample = X[picked]
    else:
        weights, sample = np.zeros(0), np.zeros((0, X.shape[1]))
    center_weights = np.maximum(counts, 0.0)
    return Tagged(
        **{point_kind: sample},
        model=centers,
        scalars=np.concatenate([weights, center_weights]),
    )


def local_coreset(state, n_clusters, source, seed, n_sampled, point_kind) -> Tagged:
    """Steps 1 and 2 in one round: the local solution, then ``n_sampled`` points.

    Balcan et al. (2013) give worker i ``t_i = C cost_i / sum_j cost_j`` points,
    which needs every worker's cost first (a round). Here the master fixes
    ``t_i`` beforehand (in proportion to the worker's rows) and each point
    drawn with probability ``m_p / cost_i`` weighs ``cost_i / (t_i m_p)``, the
    same importance weight when ``t_i`` is cost-proportional: a stratified
    sample of the same sensitivities, unbiased for every clustering's cost,
    whose variance grows where a worker's cost per row is far above the
    others'.
    """
    m = _local_solution(state, n_clusters, source, seed)
    scale = float(m.sum()) / n_sampled if n_sampled > 0 else 0.0
    return _coreset_sample(state, source, int(n_sampled), scale, point_kind)


def _local_coreset_disclosure(*request) -> str:
    return "nothing" if not request else ("rows" if request[1] is None else "per-row")


@worker_step(discloses=_local_coreset_disclosure)
def local_coreset_step(state, *request):
    """Worker steps 1-2 in one round (:func:`local_coreset`).

    ``request`` is ``(n_clusters, source, seed, n_sampled, point_kind)``; empty for
    a worker that dropped out (it sends nothing).
    """
    return local_coreset(state, *request) if request else None


def local_centres(state, n_clusters, source, seed) -> Tagged:
    """The local k-means solution as aggregates: each centre's sum of rows and count.

    An initialisation that discloses sums over rows only: the master's k-means
    of these weighted centres starts the distributed Lloyd rounds. (A local
    cluster of one row is that row: the sums disclose what per-centre Lloyd
    sums disclose.)
    """
    X = _rows(state, source)
    _local_solution(state, n_clusters, source, seed)
    centers, _, nearest, _ = state.kmeans_local
    counts = np.bincount(nearest, minlength=centers.shape[0]).astype(np.float64)
    sums = np.zeros_like(centers)
    np.add.at(sums, nearest, X)
    return Tagged(sketch=sums, scalars=counts)


@worker_step(discloses="aggregates")
def local_centres_step(state, *request):
    """Worker step: :func:`local_centres` of ``(n_clusters, source, seed)``; nothing for a
    worker that dropped out (no request)."""
    return local_centres(state, *request) if request else None


@worker_step(discloses="nothing")
def assign_step(state, centers, source):
    """Worker step 3: label the rows by the nearest broadcast centre (kept locally)."""
    _, state.kmeans_labels = _sq_dist_to_centers(_rows(state, source), centers)
    return None


@worker_step(discloses="aggregates")
def lloyd_step(state, *request):
    """Worker step of a Lloyd refinement of several candidate solutions at once.

    ``centers`` has shape (n_candidates, k, dim); the reply holds per-centre sums
    and counts and the cost of each candidate: ``n_candidates (k (dim + 1) + 1)`` words.
    """
    if not request:
        return None
    centers, source = request
    X = _rows(state, source)
    sums, counts, costs = np.zeros_like(centers), np.zeros(centers.shape[:2]), []
    for j, C in enumerate(centers):
        d2, nearest = _sq_dist_to_centers(X, C)
        np.add.at(sums[j], nearest, X)
        counts[j] = np.bincount(nearest, minlength=C.shape[0])
        costs.append(d2.sum())
    return Tagged(sketch=sums, scalars=[counts, np.array(costs)])


@worker_step(discloses="per-row")
def collect_labels_step(state):
    """Worker step: hand the labels to the caller (counted in phase ``collect``)."""
    return state.kmeans_labels


def _split_sizes(costs, coreset_size):
    """Largest-remainder split of ``coreset_size`` in proportion to ``costs``."""
    total = costs.sum()
    if total <= 0:
        return np.zeros(costs.size, dtype=np.int64)
    raw = coreset_size * costs / total
    sizes = np.floor(raw).astype(np.int64)
    sizes[np.argsort(raw - sizes)[::-1][: coreset_size - sizes.sum()]] += 1
    return sizes


def kmeans_on_workers(
    cluster: Cluster,
    n_clusters: int,
    *,
    coreset_size: int = 1000,
    source: str | None = None,
    point_kind: str = "raw_points",
    random_state=None,
    n_init: int = 10,
    n_refine: int = 0,
    responders: np.ndarray | None = None,
    collect_labels: bool = True,
    n_rows=None,
) -> DistributedKMeansResult:
    """The coreset k-means protocol on rows the workers already hold (no reset).

    Parameters
    ----------
    cluster : Cluster
        Workers whose state holds the rows (``state.data`` or ``state.<source>``).
    n_clusters : int
    coreset_size : int
        Number of sampled points ``C`` over all workers.
    source : str or None
        Attribute of the worker state holding the rows; ``None``: the partition.
    point_kind : {'raw_points', 'sketch'}
        Message kind of the sampled rows (input rows, or derived embeddings).
    random_state : int, Generator or None
    n_init : int
        k-means++ restarts of the master's weighted k-means.
    n_refine : int
        Lloyd steps over all points for each of the ``n_init`` coreset solutions,
        keeping the cheapest on all points (0: the paper's protocol). Each costs
        ``n_init (k (dim + 1) + 1)`` words per worker.
    responders : bool array of shape (n_workers,) or None
        Workers that answer (client dropout); the others still receive the
        centres and label their points. ``None``: everyone answers.
    collect_labels : bool
        Gather the labels to the master under phase ``collect``.
    n_rows : sequence of int, optional
        Rows per worker: the rows of a worker the backend lost (it answers
        ``None``, see :meth:`~kernelscale.runtime.Cluster.tolerating_lost`) get
        the label ``LOST_LABEL`` (-1). Without it a lost worker's labels raise.

    Returns
    -------
    DistributedKMeansResult
    """
    if point_kind not in POINT_KINDS:
        raise ValueError(f"point_kind must be one of {POINT_KINDS}, got {point_kind!r}.")
    if int(coreset_size) != coreset_size or coreset_size < 1:
        raise ValueError(f"coreset_size must be a positive integer, got {coreset_size!r}.")
    rng = as_generator(random_state)
    s = cluster.n_workers
    dropout = responders is not None
    responders = np.ones(s, bool) if responders is None else np.asarray(responders, bool)
    seeds = worker_seeds(rng, s)
    # Step 1: local constant-factor solutions and their costs (Balcan et al. 2013).
    # Under simulated dropout each worker is told whether it answers (1 word).
    replies = cluster.scatter_map(
        local_solution_step,
        [(n_clusters, source, seeds[i]) + ((bool(responders[i]),) if dropout else ())
         for i in range(s)],
        round="kmeans: local solutions",
        kind="seed",
        reply_kind="scalars",
    )
    costs = np.array([0.0 if r is None else r for r in replies])
    # Step 2: cost-proportional coreset sizes; sampled points and weighted local centres.
    # Only the workers that answered step 1 are asked.
    sizes = _split_sizes(costs, int(coreset_size))
    total = float(costs.sum())
    coresets = cluster.scatter_map(
        coreset_step,
        [
            (int(sizes[i]), total, int(coreset_size), source, point_kind) if responders[i] else ()
            for i in range(s)
        ],
        round="kmeans: coresets",
        kind="scalars",
    )
    points = np.vstack([np.vstack([c[point_kind], c["model"]]) for c in coresets if c])
    weights = np.concatenate([c["scalars"] for c in coresets if c])
    # Step 3: weighted k-means on the union at the master, centres to every worker.
    centers, labels = _finish(cluster, points, weights, n_clusters, source=source, rng=rng,
                              n_init=n_init, n_refine=n_refine, responders=responders,
                              collect_labels=collect_labels, n_rows=n_rows)
    return DistributedKMeansResult(centers, labels, sizes, responders)


def _finish(cluster, points, weights, n_clusters, *, source, rng, n_init, n_refine,
            responders, collect_labels, n_rows):
    """Step 3: weighted k-means of ``points`` at the master, the Lloyd refinements, the
    centres to every worker (which label their rows) and, if asked, the labels back."""
    from sklearn.cluster import KMeans  # slow import: on first use
    from sklearn.exceptions import ConvergenceWarning

    n_fit = min(n_clusters, int(np.count_nonzero(weights > 0)))
    seeds = rng.integers(2**31, size=n_init)
    with warnings.catch_warnings(), one_openmp_thread():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if n_refine == 0:
            km = KMeans(n_clusters=n_fit, n_init=n_init, random_state=int(seeds[0]))
            centers = km.fit(points, sample_weight=weights).cluster_centers_
        else:
            candidates = np.stack([
                KMeans(n_clusters=n_fit, n_init=1, random_state=int(seed))
                .fit(points, sample_weight=weights).cluster_centers_
                for seed in seeds
            ])
    if n_refine > 0:
        centers = _refine(cluster, candidates, n_refine, source, responders)
    cluster.broadcast_map(assign_step, centers, source, round="kmeans: centres", kind="model")
    labels = None
    if collect_labels:
        with cluster.phase("collect"):
            parts = cluster.broadcast_map(
                collect_labels_step, round="kmeans: labels", reply_kind="scalars"
            )
        labels = _labels_of(parts, n_rows)
    return centers, labels


def first_round_requests(rng, n_rows, n_clusters: int, coreset_size: int, source,
                         point_kind: str, responders=None, aggregates_only: bool = False):
    """Each worker's request of the one-round k-means: ``(n_clusters, source, seed,
    n_sampled, point_kind)`` for :func:`local_coreset`, or ``(n_clusters, source, seed)``
    for :func:`local_centres` (``aggregates_only``); ``()`` for a worker that dropped out.

    The coreset's ``C`` points are split in proportion to the workers' rows (largest
    remainder), as the costs are not known before the round.
    """
    if point_kind not in POINT_KINDS:
        raise ValueError(f"point_kind must be one of {POINT_KINDS}, got {point_kind!r}.")
    if int(coreset_size) != coreset_size or coreset_size < 1:
        raise ValueError(f"coreset_size must be a positive integer, got {coreset_size!r}.")
    s = len(n_rows)
    responders = np.ones(s, bool) if responders is None else np.asarray(responders, bool)
    seeds = worker_seeds(rng, s)
    sizes = _split_sizes(np.where(responders, np.asarray(n_rows, float), 0.0),
                         int(coreset_size))
    requests = []
    for i in range(s):
        if not responders[i]:
            requests.append(())
        elif aggregates_only:
            requests.append((int(n_clusters), source, seeds[i]))
        else:
            requests.append((int(n_clusters), source, seeds[i], int(sizes[i]), point_kind))
    return requests, (np.zeros(s, np.int64) if aggregates_only else sizes), responders


def kmeans_from_first_round(cluster, replies, n_clusters: int, *, sizes, responders,
                            source, point_kind: str = "sketch", random_state=None,
                            n_init: int = 10, n_refine: int = 0,
                            collect_labels: bool = True, n_rows=None,
                            aggregates_only: bool = False) -> DistributedKMeansResult:
    """The k-means after its first round (:func:`first_round_requests`), whose replies
    the caller gathered, possibly in the same round as an earlier step of its own.

    With ``aggregates_only`` the replies are :func:`local_centres` (sums and
    counts): the master clusters the local centres weighted by their counts,
    and the Lloyd rounds refine that on all rows; no row and no label leaves a
    worker (``collect_labels`` must then be False). Otherwise they are
    :func:`local_coreset` replies, and the rest is step 3 of the protocol.
    """
    if aggregates_only and collect_labels:
        raise ValueError("aggregates_only keeps the labels at the workers: collect_labels "
                         "must be False.")
    rng = as_generator(random_state)
    answered = [r for r in replies if r]
    if aggregates_only:
        sums = np.vstack([r["sketch"] for r in answered])
        counts = np.concatenate([np.asarray(r["scalars"], float) for r in answered])
        filled = counts > 0
        points, weights = sums[filled] / counts[filled][:, None], counts[filled]
    else:
        points = np.vstack([np.vstack([r[point_kind], r["model"]]) for r in answered])
        weights = np.concatenate([r["scalars"] for r in answered])
    centers, labels = _finish(cluster, points, weights, int(n_clusters), source=source,
                              rng=rng, n_init=n_init, n_refine=n_refine,
                              responders=responders, collect_labels=collect_labels,
                              n_rows=n_rows)
    return DistributedKMeansResult(centers, labels, np.asarray(sizes), responders)


def _labels_of(parts, n_rows) -> np.ndarray:
    """The workers' labels in worker order; ``LOST_LABEL`` for the rows of a lost worker."""
    from kernelscale.runtime import WorkerError

    out = []
    for worker, part in enumerate(parts):
        if part is None:
            if n_rows is None:
                raise WorkerError(worker, "kmeans: labels", "lost, and its number of rows "
                                  "is unknown here (pass n_rows)")
            part = np.full(int(n_rows[worker]), LOST_LABEL, dtype=np.int64)
        out.append(np.asarray(part))
    return np.concatenate(out)


def _refine(cluster, candidates, n_refine, source, responders):
    """Lloyd steps on all points for every coreset candidate; keep the cheapest on all points.

    Not in the paper: the coreset solutions of the ``n_init`` restarts are refined
    together, ``n_refine`` rounds of ``n_init (k (dim + 1) + 1)`` words per worker,
    and the candidate with the lowest cost on all points wins (as scikit-learn's
    ``n_init`` picks the lowest inertia).
    """
    for _ in range(n_refine):
        # Workers that dropped out answer None, which adds nothing.
        total = cluster.scatter_map(
            lloyd_step,
            [(candidates, source) if answer else () for answer in responders],
            round="kmeans: Lloyd refinement",
            reduce="sum",
        )
        sums = total["sketch"]
        counts, costs = total["scalars"]
        moved = counts > 0
        candidates = candidates.copy()
        candidates[moved] = sums[moved] / counts[moved][:, None]
    # the costs are those of the candidates sent in the last round
    return candidates[int(np.argmin(costs))]


def distributed_kmeans(
    cluster: Cluster,
    n_clusters: int,
    *,
    coreset_size: int = 1000,
    random_state=None,
    n_init: int = 10,
    n_refine: int = 0,
    collect_labels: bool = True,
) -> DistributedKMeansResult:
    """Distributed linear k-means of the workers' partitions (Balcan et al. 2013).

    Resets the cluster, validates the partitions, then runs
    :func:`kmeans_on_workers` on the raw rows: the sampled coreset points travel
    as ``raw_points``.

    Parameters
    ----------
    cluster : Cluster
        The workers, each holding its rows.
    n_clusters : int
        k.
    coreset_size : int, default=1000
        Coreset points over all workers, shared in proportion to each worker's
        local k-means cost.
    random_state : int, Generator or None
        Seeds the local solutions, the coreset and the master's k-means.
    n_init : int, default=10
        Restarts of the weighted k-means at the master.
    n_refine : int, default=0
        Lloyd rounds through the workers after the coreset solution.
    collect_labels : bool, default=True
        Gather every row's label at the master (phase ``collect``).

    Returns
    -------
    result : DistributedKMeansResult
        The centres, the labels (when collected), each worker's coreset size and
        which workers answered.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelscale.backends.local import LocalCluster
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 0.1, (50, 2)), rng.normal(5, 0.1, (50, 2))])
    >>> result = distributed_kmeans(LocalCluster([X[::2], X[1::2]]), 2, random_state=0)
    >>> sorted(np.round(result.centers[:, 0]).astype(int).tolist())
    [0, 5]
    """
    if int(n_clusters) != n_clusters or n_clusters < 1:
        raise ValueError(f"n_clusters must be a positive integer, got {n_clusters!r}.")
    cluster.reset()
    info = validate_cluster(cluster)
    if n_clusters > info.n_samples:
        raise ValueError(
            f"n_clusters={n_clusters} is larger than the number of samples {info.n_samples}."
        )
    return kmeans_on_workers(
        cluster,
        int(n_clusters),
        coreset_size=coreset_size,
        random_state=random_state,
        n_init=n_init,
        n_refine=n_refine,
        collect_labels=collect_labels,
    )
