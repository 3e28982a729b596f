"""Federated kernel k-means: DSPGD with CEM, then distributed linear k-means (Algorithm 1 of 003).

In iteration ``t`` every client draws fresh random Fourier features ``A_t[m]``
from a seed the server broadcasts and forms
``W_t[m] = [sqrt(eta_t / D) A_t[m], sqrt(1 - eta_t) B_t[m]]`` (with our feature
map's ``sqrt(2/D)`` scaling this is ``[sqrt(eta_t) z_t(x), sqrt(1 - eta_t) b_t(x)]``).
The server runs the distributed Lanczos algorithm on
``W_t^T W_t = sum_m W_t[m]^T W_t[m]``, a ``(D + r_t)``-square matrix: one step
costs ``D + r_t`` words down and up per client, whatever the number of samples.
It broadcasts the eigenvectors ``v_i`` above ``eta_t lambda`` and each client
updates ``B_{t+1}[m] = W_t[m] v_i sqrt(lambda_i - eta_t lambda) / sqrt(lambda_i)``
(the soft-thresholded proximal step; ``u_i = W_t v_i / sqrt(lambda_i)``). After
``T`` iterations the clients form ``H[m]`` (step 17) and cluster its rows with
the coreset k-means of :mod:`kernelscale.federated.kmeans`. No client ever sends
a data row: the ledger holds seeds, scalars, Lanczos vectors and ``H``-space
coreset rows only.

The embedding of a point is a fixed function of the broadcast seeds and
projections, so the fitted :class:`FKKMeansModel` also embeds and labels new
points (the same recursion the clients ran on their rows).

Client dropout (future work in 003): with ``dropout=p`` a random fraction ``p``
of the clients (at least one answers) does not answer in iteration ``t``; the
server sums the Lanczos products of those that did and rescales them by
``N / N_answered`` (a ratio estimate of the full Gram matrix, since
``W_t^T W_t`` is a sum over rows). Every client still receives the broadcasts
and updates its ``B``. Dropped clients of the final k-means send no coreset.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from kernelscale.features import RandomFourierFeatures
from kernelscale.federated.kmeans import (
    first_round_requests,
    kmeans_from_first_round,
    kmeans_on_workers,
    local_centres_step,
)
from kernelscale.federated.lanczos import lanczos
from kernelscale.linalg import as_generator
from kernelscale.runtime import Cluster, Tagged, shared_seed, validate_cluster
from kernelscale.runtime.steps import worker_step

DEFAULT_CHUNK_SIZE = 4096


# ----------------------------------------------------------------------------------
# The kernel parameter (section 6.1 of 003) from per-worker sums.


@worker_step(discloses="aggregates")
def moment_step(state):
    """Worker step: ``(n_m, sum ||x||^2)`` and ``sum x``: ``d + 2`` words, no pairs."""
    X = state.data
    sq = float(X.multiply(X).sum()) if sp.issparse(X) else float(np.einsum("ij,ij->", X, X))
    col_sum = np.asarray(X.sum(axis=0)).ravel()
    return Tagged(scalars=np.array([X.shape[0], sq]), sketch=col_sum)


MIN_ROWS_FOR_GAMMA = 2
GAMMA_ROUND = "gamma: moments"


def paper_gamma(cluster: Cluster, n_rows=None, min_rows: int = MIN_ROWS_FOR_GAMMA) -> float:
    """``gamma = N^2 / (2 sum_ij ||x_i - x_j||^2)`` exactly, from per-worker sums.

    Uses ``sum_ij ||x_i - x_j||^2 = 2 N sum_i ||x_i||^2 - 2 ||sum_i x_i||^2``, so
    each worker sends ``d + 2`` words and no distance crosses the network.

    Privacy: each client uploads its row count, its sum of squared norms and its
    column sum; for a client holding one row, that column sum *is* its row. So
    when ``n_rows`` (rows per client) is given, a client with fewer than
    ``min_rows`` rows is refused with a ValueError before anything is sent,
    unless the cluster adds this round up securely (a
    :class:`~kernelscale.backends.flower.cluster.FlowerCluster` with ``secure_rounds``
    naming ``"gamma: moments"``, where the server learns only the totals).

    Parameters
    ----------
    cluster : Cluster
        The clients, each holding its rows.
    n_rows : sequence of int, optional
        Rows per client, to refuse a client too small to send its sums safely.
    min_rows : int
        The fewest rows a client may hold when the round is not secure.

    Returns
    -------
    gamma : float
        The RBF parameter of paper 003's rule.

    Raises
    ------
    ValueError
        A client below ``min_rows`` rows (see above), or all points identical.
    """
    is_secure = getattr(cluster, "is_secure", None)
    if n_rows is not None and not (is_secure is not None and is_secure(GAMMA_ROUND)):
        small = [i for i, n in enumerate(n_rows) if n < min_rows]
        if small:
            raise ValueError(
                f"Client(s) {small} hold fewer than {min_rows} rows: the paper's gamma rule "
                "would upload their column sums, i.e. their raw rows. Pass gamma= explicitly, "
                "give every client more rows, or sum this round securely (backend='flower' "
                "with secure_rounds=['gamma: moments'])."
            )
    moments = cluster.broadcast_map(moment_step, round=GAMMA_ROUND, reduce="sum")
    n, sq = moments["scalars"]
    total = moments["sketch"]
    pair_sum = 2.0 * n * sq - 2.0 * float(total @ total)
    if pair_sum <= 0:
        raise ValueError("All points are identical: the paper's gamma rule is undefined.")
    return float(n * n / (2.0 * pair_sum))


# ----------------------------------------------------------------------------------
# Worker steps of DSPGD with CEM.


@worker_step(discloses="nothing")
def setup_step(state, gamma, n_random_features, chunk_size):
    """Worker step: keep the kernel parameter, D and the chunk size; start with B_1 = 0."""
    state.fk_params = (gamma, n_random_features, chunk_size)
    state.B = np.zeros((state.data.shape[0], 0))


def _w_chunks(state):
    """The rows of ``W_t[m]`` chunk by chunk (features rebuilt from the seed)."""
    gamma, D, chunk = state.fk_params
    seed, eta = state.fk_iteration
    rff = RandomFourierFeatures(state.data.shape[1], D, gamma, "rbf", seed)
    for start in range(0, state.data.shape[0], chunk):
        z = rff.transform(state.data[start : start + chunk], chunk_size=chunk)
        b = state.B[start : start + chunk]
        yield start, np.hstack([np.sqrt(eta) * z, np.sqrt(1.0 - eta) * b])


@worker_step(discloses="nothing")
def iteration_step(state, message):
    """Worker steps 7-8: fresh features from the seed, local Gram ``W_t[m]^T W_t[m]``."""
    eta = float(np.atleast_1d(message["scalars"])[0])
    state.responds = bool(np.atleast_1d(message["scalars"])[-1]) if np.size(
        message["scalars"]
    ) > 1 else True
    state.fk_iteration = (int(message["seed"]), eta)
    gram = 0.0
    for _, W in _w_chunks(state):
        gram = gram + W.T @ np.array(W, copy=True)
    state.W_gram = gram


@worker_step(discloses="aggregates")
def gram_matvec_step(state, c):
    """Worker step (one DLA step): ``W_t[m]^T W_t[m] c_q``, ``D + r_t`` words."""
    return state.W_gram @ c if state.responds else None


@worker_step(discloses="nothing")
def project_step(state, projection, target):
    """Worker steps 12-13 / 17: ``state.<target> = W_t[m] @ projection``."""
    out = np.empty((state.data.shape[0], projection.shape[1]))
    for start, W in _w_chunks(state):
        out[start : start + W.shape[0]] = W @ projection
    setattr(state, target, out)


@worker_step(discloses="per-row")
def gather_step(state, projection):
    """Evaluation step: the rows ``W_t[m] @ projection`` (benchmarks on small data)."""
    return np.vstack([W @ projection for _, W in _w_chunks(state)])


# ----------------------------------------------------------------------------------
# The fitted embedding and the master loop.


@dataclass
class FKKMeansModel:
    """What the server knows after FK k-means: enough to embed and label new points.

    Attributes
    ----------
    n_features_in : int
    gamma : float
    n_random_features : int
    seeds : list of int
        Random feature seed of each iteration.
    etas : list of float
        Step sizes ``eta_t = 1/t``.
    projections : list of ndarray
        ``B_{t+1} = W_t @ projections[t-1]`` for ``t < T``; the last maps
        ``W_T`` to ``H``.
    centers : ndarray of shape (n_clusters, n_eigenvectors) or None
    """

    n_features_in: int
    gamma: float
    n_random_features: int
    seeds: list = field(default_factory=list)
    etas: list = field(default_factory=list)
    projections: list = field(default_factory=list)
    centers: np.ndarray | None = None

    def embed(self, X, chunk_size: int = DEFAULT_CHUNK_SIZE) -> np.ndarray:
        """Rows of ``H`` for new points: the clients' recursion replayed on ``X``."""
        X = X.tocsr() if sp.issparse(X) else np.asarray(X, dtype=np.float64)
        if X.shape[1] != self.n_features_in:
            raise ValueError(
                f"X has {X.shape[1]} features, the model was fitted on {self.n_features_in}."
            )
        b = np.zeros((X.shape[0], 0))
        for seed, eta, P in zip(self.seeds, self.etas, self.projections, strict=True):
            rff = RandomFourierFeatures(
                self.n_features_in, self.n_random_features, self.gamma, "rbf", seed
            )
            z = rff.transform(X, chunk_size=chunk_size)
            b = np.hstack([np.sqrt(eta) * z, np.sqrt(1.0 - eta) * b]) @ P
        return b

    def predict(self, X, chunk_size: int = DEFAULT_CHUNK_SIZE) -> np.ndarray:
        """Index of the nearest centre in ``H`` space."""
        H = self.embed(X, chunk_size)
        d2 = -2.0 * H @ self.centers.T + np.einsum("ij,ij->i", self.centers, self.centers)
        return np.argmin(d2, axis=1)


@dataclass
class DSPGDResult:
    """DSPGD with CEM: the model and a per-iteration trace.

    Attributes
    ----------
    model : FKKMeansModel
    threshold : float
        ``lambda``, the (k+2)-th eigenvalue of the first iteration.
    eigenvalues : ndarray of shape (n_eigenvectors,)
        ``lambda_i,T + (1 - eta_T) lambda``: the estimated top eigenvalues of K.
    ranks : list of int
        ``r_{t+1}``, the rank of ``Z_{t+1}``.
    lanczos_steps : list of int
    upload_words, total_words : list of int
        Words of each iteration (phase ``fit``).
    estimates : list of ndarray
        ``H_t`` (N x s) per iteration when ``record_estimates`` (phase ``evaluate``).
    solvers : list of str
        The eigen-solver of each iteration: ``'lanczos'`` (the paper's DLA), or
        ``'gram'`` / ``'block'`` of :mod:`kernelscale.federated.pipelined`;
        ``lanczos_steps`` then counts its products (0 for the Gram message).
    """

    model: FKKMeansModel
    threshold: float
    eigenvalues: np.ndarray
    ranks: list
    lanczos_steps: list
    upload_words: list
    total_words: list
    estimates: list
    solvers: list = field(default_factory=list)


def _responders(rng, n_workers, dropout):
    if dropout == 0:
        return np.ones(n_workers, bool)
    answers = rng.random(n_workers) >= dropout
    if not answers.any():
        answers[rng.integers(n_workers)] = True
    return answers


def lanczos_start(seed: int) -> np.random.Generator:
    """The generator of an iteration's Lanczos start vector, from the iteration's seed."""
    return np.random.default_rng([seed, 11])


def _h_projection(theta, V, n_eigenvectors, eta, threshold):
    """Step 17: ``H = W_T V_s diag(sqrt((theta + (1 - eta) lambda) / theta))``."""
    theta = np.maximum(theta[:n_eigenvectors], np.finfo(float).tiny)
    return V[:, :n_eigenvectors] * np.sqrt((theta + (1.0 - eta) * threshold) / theta)


def dspgd_cem(
    cluster: Cluster,
    n_clusters: int,
    n_eigenvectors: int,
    *,
    n_rows: tuple,
    n_features: int,
    gamma: float,
    n_random_features: int = 50,
    max_iter: int = 20,
    dropout: float = 0.0,
    lanczos_tol: float = 1e-8,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    random_state=None,
    record_estimates: bool = False,
) -> DSPGDResult:
    """DSPGD with the communication-efficient mechanism (steps 4-18 of Algorithm 1 of 003).

    Assumes a validated cluster with partitions of ``n_rows`` rows and
    ``n_features`` columns. Leaves ``H[m]`` in ``state.embedding`` on every worker.
    """
    rng = as_generator(random_state)
    info_rows = np.asarray(n_rows, dtype=np.float64)
    model = FKKMeansModel(int(n_features), gamma, n_random_features)
    cluster.broadcast_map(
        setup_step, gamma, n_random_features, chunk_size, round="dspgd: setup", kind="model"
    )
    threshold, rank = None, 0
    ranks, steps, ups, totals, estimates = [], [], [], [], []
    for t in range(1, max_iter + 1):
        up0, tot0 = cluster.ledger.upload_words(), cluster.ledger.total_words()
        # Step 5: eta_t = 1/t; steps 6-9: fresh random features from a broadcast seed.
        eta, seed = 1.0 / t, shared_seed(rng)
        answers = _responders(rng, cluster.n_workers, dropout)
        flags = [(eta, float(a)) if dropout else eta for a in answers]
        cluster.scatter_map(
            iteration_step,
            [(Tagged(seed=seed, scalars=np.array(f)),) for f in flags],
            round="dspgd: features",
        )
        scale = info_rows.sum() / info_rows[answers].sum()

        def matvec(c, scale=scale):
            # Clients that dropped out answer None, which adds nothing.
            return scale * cluster.broadcast_map(gram_matvec_step, c,
                                                 round="dspgd: lanczos step", reduce="sum")

        # Step 10: DLA on W_t^T W_t, size D + r_t. Its start vector c_1 comes from the
        # iteration's seed, so the master's stream (the seeds) is the pipelined protocol's.
        last = t == max_iter
        result = lanczos(
            matvec,
            n_random_features + rank,
            n_wanted=max(n_clusters + 2 if t == 1 else 1, n_eigenvectors if last else 1),
            threshold=None if t == 1 else eta * threshold,
            tol=lanczos_tol,
            random_state=lanczos_start(seed),
        )
        theta, V = result.eigenvalues, result.eigenvectors
        if t == 1:
            threshold = float(theta[n_clusters + 1])  # the (k+2)-th eigenvalue
        keep = theta > eta * threshold
        model.seeds.append(seed)
        model.etas.append(eta)
        if record_estimates:  # H_t, before the clients move on to B_{t+1}
            Ph = _h_projection(theta, V, n_eigenvectors, eta, threshold)
            with cluster.phase("evaluate"):
                parts = cluster.broadcast_map(gather_step, Ph, round="gather H_t")
            estimates.append(np.vstack(parts))
        if last:
            # Step 17: H[m] on every client.
            P = _h_projection(theta, V, n_eigenvectors, eta, threshold)
            cluster.broadcast_map(project_step, P, "embedding", round="fk: H", kind="model")
        else:
            # Steps 12-13: the soft-thresholded update of B.
            P = V[:, keep] * np.sqrt((theta[keep] - eta * threshold) / theta[keep])
            cluster.broadcast_map(project_step, P, "B", round="dspgd: update B", kind="model")
            rank = int(keep.sum())
        model.projections.append(P)
        ranks.append(int(keep.sum()))
        steps.append(result.n_steps)
        ups.append(cluster.ledger.upload_words() - up0)
        totals.append(cluster.ledger.total_words() - tot0)
    eig = np.maximum(theta[:n_eigenvectors], 0) + (1.0 - eta) * threshold
    return DSPGDResult(model, threshold, eig, ranks, steps, ups, totals, estimates,
                       ["lanczos"] * len(ranks))



@dataclass
class FKKMeansResult:
    """Output of :func:`fk_kmeans`.

    Attributes
    ----------
    labels : ndarray of shape (n_samples,) or None
        Cluster of each point, in worker order.
    model : FKKMeansModel
        Embedding recursion and centres (``model.predict`` labels new points).
    gamma : float
    dspgd : DSPGDResult
        Per-iteration trace (ranks, Lanczos steps, words).
    """

    labels: np.ndarray | None
    model: FKKMeansModel
    gamma: float
    dspgd: DSPGDResult


PROTOCOLS = ("auto", "gram", "block", "lanczos", "paper")


def check_fk_params(n_samples, n_clusters, n_eigenvectors, n_random_features, max_iter,
                    coreset_size, dropout, gamma, protocol="paper", round_cost=0.0):
    """ValueErrors for parameters FK k-means cannot run with."""
    for name, value in [("n_clusters", n_clusters), ("n_eigenvectors", n_eigenvectors),
                        ("n_random_features", n_random_features), ("max_iter", max_iter),
                        ("coreset_size", coreset_size)]:
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if n_clusters > n_samples:
        raise ValueError(f"n_clusters={n_clusters} exceeds the number of samples {n_samples}.")
    if n_random_features < max(n_clusters + 2, n_eigenvectors):
        raise ValueError(
            f"n_random_features={n_random_features} must be at least n_clusters + 2 = "
            f"{n_clusters + 2} and n_eigenvectors = {n_eigenvectors}: the threshold is the "
            "(k+2)-th eigenvalue of the first iteration."
        )
    if not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be in [0, 1), got {dropout!r}.")
    if gamma is not None and not (np.isfinite(gamma) and gamma > 0):
        raise ValueError(f"gamma must be a positive finite number or None, got {gamma!r}.")
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}.")
    if not (np.isfinite(round_cost) and round_cost >= 0):
        raise ValueError(f"round_cost must be a finite number >= 0, got {round_cost!r}.")


def fk_kmeans(
    cluster: Cluster,
    n_clusters: int,
    *,
    n_eigenvectors: int | None = None,
    n_random_features: int = 50,
    max_iter: int = 20,
    coreset_size: int = 1000,
    n_refine: int = 10,
    gamma: float | None = None,
    dropout: float = 0.0,
    protocol: str = "auto",
    round_cost: float | None = None,
    aggregates_only: bool = False,
    collect_labels: bool | None = None,
    partitions=None,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    random_state=None,
    record_estimates: bool = False,
) -> FKKMeansResult:
    """Federated kernel k-means (Algorithm 1 of 003) with the RBF kernel.

    Parameters
    ----------
    cluster : Cluster
        One client per worker.
    n_clusters : int
        ``k``.
    n_eigenvectors : int or None
        ``s``, columns of ``H`` (default ``k``).
    n_random_features : int
        ``D``, fresh random Fourier features per iteration.
    max_iter : int
        ``T``.
    coreset_size : int
        ``C`` of the distributed k-means.
    n_refine : int
        Lloyd refinement rounds of the coreset candidates on all points (0: the paper's protocol).
    gamma : float or None
        RBF parameter; ``None``: the paper's rule from per-worker sums (refused
        for clients of fewer than ``MIN_ROWS_FOR_GAMMA`` rows, whose sums would
        be their rows, unless the round is summed securely: see
        :func:`paper_gamma`).
    dropout : float
        Fraction of clients that do not answer a round (see the module docstring).
    protocol : {'auto', 'gram', 'block', 'lanczos', 'paper'}
        The rounds (the model is the same): ``'paper'`` runs Algorithm 1 as the
        paper does (a round for each seed, each Lanczos step and each update of
        ``B``; the coreset k-means in two rounds); the others pipeline each
        DSPGD iteration into one message and the k-means' first two rounds into
        one (:mod:`kernelscale.federated.pipelined`), with the eigen-solver
        named, or for ``'auto'`` the cheapest by words and ``round_cost``.
    round_cost : float or None
        What a round costs, in words (``None``:
        :data:`~kernelscale.federated.pipelined.DEFAULT_ROUND_COST`, a 50 ms round
        trip at 128 Mbit/s); ``protocol='auto'`` picks each iteration's solver
        by words plus ``round_cost`` per round.
    aggregates_only : bool
        Every reply of the fit is a sum over rows (or nothing): the k-means starts
        from the clients' local centres (sums and counts) and refines them with
        ``n_refine`` distributed Lloyd rounds (sums and counts); no coreset row
        and no label leaves a client, so ``labels`` is None (the clients keep
        theirs; ``model.predict`` labels points).
    collect_labels : bool or None
        Gather the labels at the master (phase ``collect``, not counted as fit);
        ``None``: unless ``aggregates_only``.
    partitions : PartitionInfo, optional
        The partitions' shapes, when the cluster was validated for this fit
        already (the estimators': no second ``describe partitions`` round);
        ``None`` resets and validates the cluster first.
    chunk_size : int
        Rows per chunk on the workers.
    random_state : int, Generator or None
    record_estimates : bool
        Gather ``H_t`` after every iteration under phase ``evaluate`` (small data).

    Returns
    -------
    FKKMeansResult

    Examples
    --------
    >>> import numpy as np
    >>> from kernelscale.backends.local import LocalCluster
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 0.3, (60, 2)), rng.normal(4, 0.3, (60, 2))])
    >>> cluster = LocalCluster([X[::3], X[1::3], X[2::3]])
    >>> result = fk_kmeans(cluster, 2, n_random_features=20, max_iter=5, random_state=0)
    >>> cluster.ledger.total_words(kind="raw_points")
    0
    >>> cluster.ledger.rounds_by_name()["dspgd: iteration"]  # one round per iteration
    5
    """
    from kernelscale.federated.pipelined import DEFAULT_ROUND_COST

    round_cost = DEFAULT_ROUND_COST if round_cost is None else float(round_cost)
    if partitions is None:
        cluster.reset()
        info = validate_cluster(cluster)
    else:
        info = partitions
        if cluster.rows_per_worker is None:  # for a lost client's ratio estimate
            cluster.rows_per_worker = np.asarray(info.n_rows, dtype=float)
    s = n_clusters if n_eigenvectors is None else n_eigenvectors
    check_fk_params(info.n_samples, n_clusters, s, n_random_features, max_iter,
                    coreset_size, dropout, gamma, protocol, round_cost)
    if collect_labels is None:
        collect_labels = not aggregates_only
    if aggregates_only and collect_labels:
        raise ValueError("aggregates_only keeps the labels on the clients: collect_labels "
                         "must be False.")
    rng = as_generator(random_state)
    options = dict(n_rows=info.n_rows, n_features=info.n_features,
                   n_random_features=int(n_random_features), max_iter=int(max_iter),
                   dropout=dropout, chunk_size=chunk_size, record_estimates=record_estimates)
    kmeans = dict(coreset_size=coreset_size, n_refine=n_refine, collect_labels=collect_labels,
                  aggregates_only=aggregates_only, n_rows=info.n_rows)
    # A client lost from here on (FlowerCluster(lost="drop")) is left out: the sums
    # are rescaled by N / N_answered and its rows are labelled LOST_LABEL.
    with cluster.tolerating_lost():
        # Kernel parameter by the rule of section 6.1 of 003.
        gamma = paper_gamma(cluster, info.n_rows) if gamma is None else float(gamma)
        if protocol == "paper":
            # Steps 4-18: DSPGD with CEM, leaving H[m] on each client.
            trace = dspgd_cem(cluster, int(n_clusters), int(s), gamma=gamma,
                              random_state=rng, **options)
            km = _paper_kmeans(cluster, int(n_clusters), rng, dropout, **kmeans)
        else:
            from kernelscale.federated.pipelined import dspgd_pipelined

            trace, P = dspgd_pipelined(cluster, int(n_clusters), int(s), gamma=gamma,
                                       protocol=protocol, round_cost=round_cost,
                                       lanczos_tol=1e-8, random_state=rng, **options)
            km = _pipelined_kmeans(cluster, int(n_clusters), P, rng, dropout, **kmeans)
    trace.model.centers = km.centers
    return FKKMeansResult(km.labels, trace.model, gamma, trace)


def _paper_kmeans(cluster, n_clusters, rng, dropout, *, coreset_size, n_refine,
                  collect_labels, aggregates_only, n_rows):
    """Step 19 after the paper's DSPGD (H on every client): the coreset k-means of
    Balcan et al. (2013), or with ``aggregates_only`` the local centres and Lloyd."""
    answers = _responders(rng, cluster.n_workers, dropout) if dropout else None
    if not aggregates_only:
        return kmeans_on_workers(
            cluster, n_clusters, coreset_size=coreset_size, source="embedding",
            point_kind="sketch", random_state=rng, n_refine=n_refine, responders=answers,
            collect_labels=collect_labels, n_rows=n_rows)
    requests, sizes, answers = first_round_requests(
        rng, n_rows, n_clusters, coreset_size, "embedding", "sketch", answers,
        aggregates_only=True)
    replies = cluster.scatter_map(local_centres_step, requests, round="kmeans: local centres",
                                  kind="seed")
    return kmeans_from_first_round(cluster, replies, n_clusters, sizes=sizes,
                                   responders=answers, source="embedding", random_state=rng,
                                   n_refine=n_refine, collect_labels=False,
                                   aggregates_only=True)


def _pipelined_kmeans(cluster, n_clusters, P, rng, dropout, *, coreset_size, n_refine,
                      collect_labels, aggregates_only, n_rows):
    """Step 17 (``H[m] = W_T[m] P``) and the k-means' first round in one message, then
    the rest of the k-means (:func:`~kernelscale.federated.kmeans.kmeans_from_first_round`)."""
    from kernelscale.federated.pipelined import H_AGGREGATES_ROUND, H_ROUND, h_kmeans_step

    answers = _responders(rng, cluster.n_workers, dropout) if dropout else None
    requests, sizes, answers = first_round_requests(
        rng, n_rows, n_clusters, coreset_size, "embedding", "sketch", answers,
        aggregates_only=aggregates_only)
    replies = cluster.scatter_map(
        h_kmeans_step, [(P, *request) for request in requests],
        round=H_AGGREGATES_ROUND if aggregates_only else H_ROUND, kind="model")
    return kmeans_from_first_round(cluster, replies, n_clusters, sizes=sizes,
                                   responders=answers, source="embedding", random_state=rng,
                                   n_refine=n_refine, collect_labels=collect_labels,
                                   n_rows=n_rows, aggregates_only=aggregates_only)
