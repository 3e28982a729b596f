"""FK k-means' DSPGD with CEM as paper 003 runs it (Algorithm 1), its worker steps and model.

The master function :func:`kernelscale.federated.fk.fk_kmeans` runs this DSPGD
(``protocol='paper'``) or the pipelined one (:mod:`kernelscale.federated.pipelined`),
then the distributed linear k-means.

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
from kernelscale.federated.lanczos import lanczos
from kernelscale.linalg import as_generator
from kernelscale.runtime import Cluster, Tagged, shared_seed
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
