"""Baselines of paper 003 (section 6.1, appendix G) and distributed spectral clustering (001, 6.6).

* CK k-means (centralised, exact): top-``s`` eigenpairs of the full kernel matrix,
  k-means on the rows of ``U_s Lambda_s^1/2``. Small data only (n x n kernel).
* SK k-means (centralised, Wang et al. 2019): Nystrom features from ``n_landmarks``
  uniformly sampled points (scikit-learn's :class:`~sklearn.kernel_approximation.Nystroem`),
  their rank-``s`` truncation, k-means.
* RFK k-means (distributed, Chitta et al. 2012): random Fourier features from a
  broadcast seed, then the coreset k-means on the feature rows (``D`` words per
  coreset point).
* CE PCA / distributed spectral clustering: disKPCA (:func:`kernelscale.horizontal.diskpca`),
  each worker projects its rows on the components, then the coreset k-means on the
  projections (``s`` words per coreset point).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernelscale.features import RandomFourierFeatures
from kernelscale.federated.fkkmeans import paper_gamma
from kernelscale.federated.kmeans import (
    first_round_requests,
    kmeans_from_first_round,
    kmeans_on_workers,
    local_coreset,
)
from kernelscale.horizontal import diskpca
from kernelscale.kernels import Kernel, make_kernel
from kernelscale.linalg import as_generator, top_eigh
from kernelscale.runtime import Cluster, shared_seed, validate_cluster
from kernelscale.runtime.steps import worker_step


def gamma_rule(X) -> float:
    """The paper's ``gamma = N^2 / (2 sum_ij ||x_i - x_j||^2)`` on one matrix (no pairs)."""
    X = np.asarray(X, dtype=np.float64)
    col = X.sum(axis=0)
    pair_sum = 2.0 * X.shape[0] * float(np.einsum("ij,ij->", X, X)) - 2.0 * float(col @ col)
    return float(X.shape[0] ** 2 / (2.0 * pair_sum))


def _kmeans(H, n_clusters, rng, n_init=10):
    from sklearn.cluster import KMeans  # slow import: on first use

    return KMeans(n_clusters, n_init=n_init, random_state=int(rng.integers(2**31))).fit(H)


def ck_kmeans(X, n_clusters: int, n_eigenvectors: int | None = None, gamma: float | None = None,
              random_state=None) -> np.ndarray:
    """CK k-means: exact top-``s`` eigenpairs of the RBF kernel matrix, then k-means.

    Builds the full n x n kernel: an exact reference for small data.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        All the data, in one place.
    n_clusters : int
        k.
    n_eigenvectors : int, optional
        s, the eigenvectors k-means runs on (default ``n_clusters``).
    gamma : float, optional
        RBF parameter; default paper 003's rule.
    random_state : int, Generator or None
        Seeds k-means.

    Returns
    -------
    labels : ndarray of shape (n_samples,)
        The cluster of each row.

    See Also
    --------
    sk_kmeans : The same with a Nystrom approximation of the kernel.
    FederatedKernelKMeans : The federated algorithm these baselines judge.
    """
    rng = as_generator(random_state)
    s = n_clusters if n_eigenvectors is None else n_eigenvectors
    gamma = gamma_rule(X) if gamma is None else gamma
    K = make_kernel("rbf", gamma=gamma)(X, X)
    w, U = top_eigh(K, s)
    H = U * np.sqrt(np.maximum(w, 0.0))
    return _kmeans(H, n_clusters, rng).labels_


def sk_kmeans(X, n_clusters: int, n_eigenvectors: int | None = None, n_landmarks: int = 200,
              gamma: float | None = None, random_state=None) -> np.ndarray:
    """SK k-means: Nystrom approximation of the kernel, rank-``s`` truncation, k-means.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        All the data, in one place.
    n_clusters : int
        k.
    n_eigenvectors : int, optional
        s, the rank kept (default ``n_clusters``).
    n_landmarks : int, default=200
        Nystrom landmarks.
    gamma : float, optional
        RBF parameter; default paper 003's rule.
    random_state : int, Generator or None
        Seeds the landmarks and k-means.

    Returns
    -------
    labels : ndarray of shape (n_samples,)
        The cluster of each row.

    See Also
    --------
    ck_kmeans : The exact kernel's version (small data).
    """
    from sklearn.kernel_approximation import Nystroem  # slow import: on first use
    from sklearn.utils.extmath import randomized_svd

    rng = as_generator(random_state)
    s = n_clusters if n_eigenvectors is None else n_eigenvectors
    gamma = gamma_rule(X) if gamma is None else gamma
    F = Nystroem(kernel="rbf", gamma=gamma, n_components=min(n_landmarks, X.shape[0]),
                 random_state=int(rng.integers(2**31))).fit_transform(X)
    U, sv, _ = randomized_svd(F, s, random_state=int(rng.integers(2**31)))
    return _kmeans(U * sv, n_clusters, rng).labels_


@worker_step(discloses="nothing")
def random_features_step(state, seed, gamma, n_random_features):
    """Worker step: keep the random Fourier features of the partition as ``state.embedding``."""
    rff = RandomFourierFeatures(state.data.shape[1], n_random_features, gamma, "rbf", seed)
    state.embedding = rff.transform(state.data)


@dataclass
class ClusteringResult:
    """Labels (worker order), centres in the clustered space, kernel parameter, extra model."""

    labels: np.ndarray | None
    centers: np.ndarray
    gamma: float | None = None
    model: object = None


def rfk_kmeans(cluster: Cluster, n_clusters: int, *, n_random_features: int = 800,
               coreset_size: int = 1000, gamma: float | None = None, n_refine: int = 10,
               random_state=None) -> ClusteringResult:
    """RFK k-means: random Fourier features on the workers, then the coreset k-means.

    Parameters
    ----------
    cluster : Cluster
        The clients, each holding its rows.
    n_clusters : int
        k.
    n_random_features : int, default=800
        Random Fourier features per point (drawn once, from a broadcast seed).
    coreset_size : int, default=1000
        Points of the distributed k-means coreset.
    gamma : float, optional
        RBF parameter; default paper 003's rule (:func:`paper_gamma`).
    n_refine : int, default=10
        Lloyd refinement rounds after the coreset solution.
    random_state : int, Generator or None
        Seeds the features and the coreset.

    Returns
    -------
    result : ClusteringResult
        The labels (in the workers' order), the centres in the random-feature
        space, and the ``gamma`` used.

    See Also
    --------
    fk_kmeans : Fresh features every iteration and a spectral step (paper 003).
    """
    rng = as_generator(random_state)
    cluster.reset()
    info = validate_cluster(cluster)
    with cluster.tolerating_lost():  # a lost client is left out, as in fk_kmeans
        gamma = paper_gamma(cluster, info.n_rows) if gamma is None else float(gamma)
        cluster.broadcast_map(random_features_step, shared_seed(rng), gamma,
                              int(n_random_features), round="rfk: features", kind="seed")
        km = kmeans_on_workers(cluster, n_clusters, coreset_size=coreset_size,
                               source="embedding", point_kind="sketch", n_refine=n_refine,
                               random_state=rng, n_rows=info.n_rows)
    return ClusteringResult(km.labels, km.centers, gamma)


@worker_step(discloses="nothing")
def project_step(state, kernel_params):
    """Worker step: project the rows on the disKPCA components (``state.embedding``)."""
    kernel = Kernel.from_dict(kernel_params)
    out = []
    for start in range(0, state.data.shape[0], 4096):
        block = kernel(state.data[start : start + 4096], state.landmarks)
        if state.center is not None:
            block = block - state.center
        out.append(block @ state.coef)
    state.embedding = np.vstack(out)


def _kpca_kmeans_disclosure(coef, center, kernel_params, *request) -> str:
    return "per-row" if request else "nothing"


@worker_step(discloses=_kpca_kmeans_disclosure)
def kpca_kmeans_step(state, coef, center, kernel_params, *request):
    """The disKPCA model (the paper's last broadcast), the rows' projections on it, and
    the k-means' first round on them (:func:`~kernelscale.federated.kmeans.local_coreset`
    of ``request``; nothing for a worker that sends none)."""
    state.coef, state.center = coef, center
    project_step(state, kernel_params)
    return local_coreset(state, *request) if request else None


SPECTRAL_PROTOCOLS = ("auto", "paper")


def distributed_spectral_clustering(
    cluster: Cluster,
    n_clusters: int,
    *,
    kernel: Kernel | None = None,
    n_components: int | None = None,
    coreset_size: int = 1000,
    n_refine: int = 10,
    protocol: str = "auto",
    random_state=None,
    **diskpca_params,
) -> ClusteringResult:
    """disKPCA, projection on the workers, coreset k-means (section 6.6 of 001; CE PCA of 003).

    Parameters
    ----------
    cluster : Cluster
    n_clusters : int
    kernel : Kernel or None
        ``None``: RBF with the gamma rule of paper 003 (from per-worker sums).
    n_components : int or None
        Rank of the disKPCA subspace (default ``n_clusters``).
    coreset_size, n_refine : int
        Of the distributed k-means.
    protocol : {'auto', 'paper'}
        ``'paper'``: disKPCA's rounds, the components to every worker, their
        projections, then the coreset k-means' two rounds. ``'auto'``: the same
        model in two rounds fewer; the components, the projections and the
        k-means' local solution and coreset in one message (the coreset's sizes
        fixed beforehand, in proportion to the workers' rows).
    random_state : int, Generator or None
    **diskpca_params
        Passed to :func:`kernelscale.horizontal.diskpca` (``n_landmarks``,
        ``n_random_features``, ``embedding_dim``, ...).

    Returns
    -------
    ClusteringResult
        ``model`` is the fitted :class:`~kernelscale.model.KernelPCAModel`.
    """
    rng = as_generator(random_state)
    gamma = None
    if kernel is None:
        cluster.reset()
        validate_cluster(cluster)
        # No minimum-rows guard here (unlike FK and RFK k-means): disKPCA below
        # uploads sampled raw rows by design, so a one-row client's column sum
        # reveals nothing its landmark upload would not.
        gamma = paper_gamma(cluster)
        kernel = make_kernel("rbf", gamma=gamma)
    if protocol not in SPECTRAL_PROTOCOLS:
        raise ValueError(f"protocol must be one of {SPECTRAL_PROTOCOLS}, got {protocol!r}.")
    k = n_clusters if n_components is None else n_components
    with cluster.tolerating_lost():  # a client lost from disKPCA's sampling on is left out
        # Steps 1-4 of disKPCA (Algorithm 4 of 001); the workers keep Y (and C).
        model = diskpca(cluster, kernel, n_components=k, random_state=rng,
                        send_model=protocol == "paper", **diskpca_params)
        # A lost client's rows get LOST_LABEL (their counts are the validation's).
        n_rows = cluster.rows_per_worker.astype(int)
        if protocol == "paper":
            cluster.broadcast_map(project_step, kernel.to_dict(), round="spectral: project",
                                  kind="model")
            km = kmeans_on_workers(cluster, n_clusters, coreset_size=coreset_size,
                                   source="embedding", point_kind="sketch",
                                   n_refine=n_refine, random_state=rng, n_rows=n_rows)
        else:
            requests, sizes, answers = first_round_requests(
                rng, n_rows, n_clusters, coreset_size, "embedding", "sketch")
            coef, center = model.coef, model.center
            replies = cluster.scatter_map(
                kpca_kmeans_step, [(coef, center, kernel.to_dict(), *r) for r in requests],
                round="spectral: components, projections and local coresets", kind="model")
            km = kmeans_from_first_round(cluster, replies, n_clusters, sizes=sizes,
                                         responders=answers, source="embedding",
                                         random_state=rng, n_refine=n_refine, n_rows=n_rows)
    return ClusteringResult(km.labels, km.centers, gamma, model)
