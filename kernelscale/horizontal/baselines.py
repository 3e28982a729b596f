"""Baselines of paper 001, section 6, in the same runtime and with their ledgers.

* :func:`uniform_dislr` - uniformly sampled landmarks, then disLR.
* :func:`uniform_batch` - a uniform sample sent to the master, batch KPCA there.
* :func:`exact_kpca` - every point sent to the master, exact KPCA (small data).
* :func:`random_features_pca` - random features, then distributed linear PCA:
  each worker sends ``Z_i^T Z_i`` (Lopez-Paz et al.; section 2 of 001).

Every method ends, as disKPCA does (Algorithm 3 of 001, line 2), by sending its
model to the workers, so that each can project its own rows; the ledger counts
that broadcast under the fit. disLR's workers already hold the landmarks and
get the coefficients only; the batch methods' workers get the landmarks
(``raw_points``) and the coefficients (``model``); random features' workers
rebuild the feature map from its seed and get the components.
"""

from __future__ import annotations

import numpy as np

from kernelscale.arrays import describe, is_device_array, to_host
from kernelscale.eigensolvers import psd_eigenvalues, top_eigenpairs
from kernelscale.features import feature_map_size, make_feature_map
from kernelscale.horizontal.diskpca import (
    check_budgets,
    check_kernel_input,
    check_landmark_count,
    refuse_square_matrices,
)
from kernelscale.horizontal.dislr import cap_at_rank, dislr
from kernelscale.horizontal.draws import inclusion_weights, stack_rows, uniform_sample
from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel
from kernelscale.linalg import as_generator, gram, pack_symmetric, unpack_symmetric
from kernelscale.metrics.lowrank import EXACT_REFERENCE_MAX_SAMPLES
from kernelscale.model import KernelPCAModel, RandomFeaturePCAModel
from kernelscale.runtime import (
    Cluster,
    Tagged,
    shared_seed,
    validate_cluster,
    worker_seeds,
)
from kernelscale.runtime.chunks import map_chunks
from kernelscale.runtime.lost import answered
from kernelscale.runtime.steps import worker_step


def _prepare(cluster, kernel, n_components, n_landmarks, random_state):
    rng = as_generator(random_state)
    cluster.reset()
    info = validate_cluster(cluster)
    check_kernel_input(kernel, info)
    cluster.tolerate_lost_from_here()  # with lost="drop", a worker lost from here is left out
    return rng, info, check_budgets(info, n_components, n_landmarks)


def check_batch_size(n_points: int, method: str, instead: str) -> None:
    """Refuse, before any round, a batch KPCA whose n x n kernel matrix would not fit.

    The master of 'exact' and 'uniform_batch' holds the kernel matrix of its points
    (8 n^2 bytes) and a few copies of it while it is centred and decomposed; above
    :data:`EXACT_REFERENCE_MAX_SAMPLES` points that is GiBs, and a traceback half-way.
    """
    refuse_square_matrices(n_points, lambda gib: (
        f"method={method!r} builds the {n_points:,} x {n_points:,} kernel matrix at the "
        f"master: {gib:.1f} GiB, and a few copies of it while it is centred and "
        f"decomposed. It is limited to {EXACT_REFERENCE_MAX_SAMPLES:,} points; {instead}."))


def uniform_dislr(cluster: Cluster, kernel: Kernel, n_components: int = 10,
                  n_landmarks: int = 400, messages: str = "gram", center: bool = False,
                  chunk_size: int = DEFAULT_CHUNK_SIZE, random_state=None,
                  redraw: bool = True, eigensolver: dict | None = None,
                  **_) -> KernelPCAModel:
    """Uniform + disLR: ``n_landmarks`` distinct uniform points, then Algorithm 3 of 001.

    Rounds: the uniform sample (seeds, then the points to the master), disLR
    (Y to every worker with the config, ``k(Y,A_i) k(A_i,Y)`` up) and the
    coefficients back. ``redraw`` as in :func:`kernelscale.horizontal.diskpca.diskpca`.

    Parameters
    ----------
    cluster : Cluster
        The workers, each holding its partition of the rows.
    kernel : Kernel
        From :func:`~kernelscale.make_kernel`.
    n_components : int
        Rank k of the subspace.
    n_landmarks : int
        |Y|, the number of distinct points sampled uniformly.
    messages : {'gram', 'sketch'}
        As in :func:`~kernelscale.horizontal.diskpca`.
    center : bool
        Centre the data in feature space.
    chunk_size : int
        Rows a worker processes at once.
    random_state : int, Generator or None
        Seeds the sample.
    redraw : bool
        Draw again when copies leave the sample short.
    eigensolver : dict, optional
        The master's eigensolver (:func:`kernelscale.eigensolvers.top_eigenpairs`'
        keyword arguments; default: LAPACK's dense solver).

    Returns
    -------
    model : KernelPCAModel
        The fitted model (``transform`` projects new rows); the cluster's ledger
        holds the fit's messages.

    See Also
    --------
    diskpca : The same disLR step after chosen landmarks.
    uniform_batch : The sample's kernel PCA at the master instead.
    """
    rng, info, n_landmarks = _prepare(cluster, kernel, n_components, n_landmarks, random_state)
    check_landmark_count(n_landmarks, "uniform_dislr")
    Y, _ = uniform_sample(cluster, info.n_rows, n_landmarks, rng, "uniform sampling",
                          redraw=redraw)
    model = dislr(cluster, Y, Y, kernel, n_components, info.n_samples, messages, center,
                  int(chunk_size), worker_seeds(rng, cluster.n_workers),
                  eigensolver=eigensolver)
    model.info |= {"method": "uniform_dislr", "messages": messages}
    return model


def _numerical_range(w: np.ndarray, V: np.ndarray, rtol: float = 1e-12):
    """The eigenpairs with eigenvalue above ``rtol`` times the largest (none if it is <= 0)."""
    keep = w > rtol * w[0] if w.size and w[0] > 0 else np.zeros(w.size, dtype=bool)
    return w[keep], V[:, keep]


def batch_kpca(X, kernel: Kernel, n_components: int, center: bool,
               weights: np.ndarray | None = None,
               eigensolver: dict | None = None) -> KernelPCAModel:
    """Exact kernel PCA of the rows of ``X`` as a landmark model (``C = V Lambda^-1/2``).

    ``weights`` (one per row, e.g. :func:`kernelscale.horizontal.draws.inclusion_weights`)
    make it the kernel PCA of the weighted points: of ``D^1/2 K D^1/2`` with
    ``D = diag(weights)`` scaled to mean 1, centred by the weighted mean.
    Components beyond the kernel matrix's numerical rank are zero (with a
    ``UserWarning``; see :func:`kernelscale.horizontal.dislr.cap_at_rank`).
    ``eigensolver``: :func:`kernelscale.eigensolvers.top_eigenpairs`' keyword
    arguments (default: LAPACK's dense solver); its iterations are
    ``model.info['n_iter']``.
    """
    K = kernel(X, X)
    n = K.shape[0]
    share = (np.full(n, 1.0 / n) if weights is None
             else np.asarray(weights, dtype=float) / np.sum(weights))
    mean = None
    if center:
        mean = K @ share  # <mu, phi(x_j)>, mu the (weighted) mean in feature space
        K = K - mean[None, :] - mean[:, None] + share @ mean
    root = np.sqrt(share * n)  # 1 without weights
    if weights is not None:
        K = root[:, None] * K * root[None, :]
    trace = float(np.trace(K))  # the (centred) energy of X, for the shares of energy
    w, V, n_iter = top_eigenpairs((K + K.T) / 2.0, n_components, **(eigensolver or {}),
                                  return_n_iter=True)
    w, V = _numerical_range(w, V)
    coef, w = cap_at_rank(root[:, None] * V / np.sqrt(w), w, n_components,
                          "The kernel matrix", stacklevel=4)
    if center:
        # Centring the coefficients: V^T (phi(a) - mu) with V = (phi(X) - mu 1^T) C and
        # mu = phi(X) p equals C'^T (k(X, a) - m) with C' = (I - p 1^T) C.
        coef = coef - np.outer(share, coef.sum(axis=0))
    return KernelPCAModel(kernel=kernel, landmarks=X, coef=coef, eigenvalues=w, center=mean,
                          trace=trace, info={"n_iter": n_iter})


def uniform_batch(cluster: Cluster, kernel: Kernel, n_components: int = 10,
                  n_landmarks: int = 400, center: bool = False, random_state=None,
                  redraw: bool = True, eigensolver: dict | None = None,
                  **_) -> KernelPCAModel:
    """Uniform + batch KPCA: the master runs exact KPCA on ``n_landmarks`` distinct points.

    Rounds: the uniform sample (seeds, then the points to the master), the
    copies of each sampled point in its worker's partition (round 'batch KPCA:
    copies', one word per point received), and the model to the workers (round
    'batch KPCA: landmarks and components': the sample, which the workers do
    not hold, and the coefficients). The sample holds distinct points, so each
    is weighted by its copies over its chance to be sampled
    (:func:`~kernelscale.horizontal.draws.inclusion_weights`): without the
    weights a point with 69 copies (spam) counts once, and the batch KPCA of a
    sample of 1,332 of spam's 4,601 rows has 4x the excess
    (``benchmarks/results/budget/pilot_signals.md``). ``redraw`` as in
    :func:`kernelscale.horizontal.diskpca.diskpca`.

    Parameters
    ----------
    cluster : Cluster
        The workers, each holding its partition of the rows.
    kernel : Kernel
        From :func:`~kernelscale.make_kernel`.
    n_components : int
        Rank k of the subspace.
    n_landmarks : int
        |Y|, the number of distinct points sampled uniformly.
    center : bool
        Centre the data in feature space.
    random_state : int, Generator or None
        Seeds the sample.
    redraw : bool
        Draw again when copies leave the sample short.
    eigensolver : dict, optional
        The master's eigensolver for the sample's kernel matrix
        (:func:`kernelscale.eigensolvers.top_eigenpairs`' keyword arguments;
        default: LAPACK's dense solver).

    Returns
    -------
    model : KernelPCAModel
        The fitted model (``transform`` projects new rows); the cluster's ledger
        holds the fit's messages.

    See Also
    --------
    uniform_dislr : The same sample, components from every row.
    exact_kpca : Every row to the master.
    """
    rng, info, n_landmarks = _prepare(cluster, kernel, n_components, n_landmarks, random_state)
    check_batch_size(n_landmarks, "uniform_batch",
                     f"lower n_landmarks to at most {EXACT_REFERENCE_MAX_SAMPLES:,}, or use "
                     "method='uniform_dislr' or 'diskpca'")
    arrivals: list = []
    S, _ = uniform_sample(cluster, info.n_rows, n_landmarks, rng, "uniform sampling",
                          redraw=redraw, arrivals=arrivals)
    weights = inclusion_weights(cluster, S, arrivals, info.n_samples, "batch KPCA: copies")
    model = batch_kpca(S, kernel, n_components, center, weights, eigensolver)
    broadcast_landmark_model(cluster, model, "batch KPCA: landmarks and components")
    model.info |= {"method": "uniform_batch"}
    return model


@worker_step(discloses="nothing")
def store_landmark_model_step(state, message):
    """Keep a landmark model whose landmarks the worker does not hold: Y, C, m and the kernel.

    The kernel is kept as its parameters (``Kernel.to_dict``), not resolved: the
    batch methods evaluate it at the master only, so a callable that only the
    master's process knows (a lambda) must not fail the fit on a Dask worker.
    """
    state.landmarks = message["raw_points"]
    state.coef, state.center, state.kernel_params = message["model"]


def broadcast_landmark_model(cluster: Cluster, model: KernelPCAModel, round: str) -> None:
    """Send Y (``raw_points``), C, the centre m and the kernel (``model``) to every worker.

    The workers of the batch methods were never told the kernel, so its
    parameters travel with the model (``count_words(kernel.to_dict())``: 5
    words, 4 for arc-cosine, whose gamma is None). In all
    ``s (|Y| d + |Y| k + 5)`` words for dense Y and an rbf kernel (``2 nnz(Y)``
    in place of ``|Y| d`` for CSR), plus ``s |Y|`` when centred.
    """
    cluster.broadcast_map(
        store_landmark_model_step,
        Tagged(raw_points=model.landmarks,
               model=[model.coef, model.center, model.kernel.to_dict()]),
        round=round, reply_kind="model")


@worker_step(discloses="rows")
def _send_all_step(state):
    return Tagged(raw_points=to_host(state.data))  # a device partition: copied to the host


def exact_kpca(cluster: Cluster, kernel: Kernel, n_components: int | None = 10,
               center: bool = False, eigensolver: dict | None = None,
               remove_zero_eig: bool = False, **_) -> KernelPCAModel:
    """Exact KPCA: every worker sends its data to the master (small data only).

    The master then runs :func:`kernel_matrix_kpca` on the n x n kernel matrix
    (scikit-learn's ``KernelPCA`` step by step, with ``eigensolver`` and
    ``remove_zero_eig``; ``n_components=None`` keeps every non-zero component),
    and the model goes back to every worker (round 'exact KPCA: landmarks and
    components': all n points and the n x k coefficients), as for every method.

    Parameters
    ----------
    cluster : Cluster
        The workers, each holding its partition of the rows.
    kernel : Kernel
        From :func:`~kernelscale.make_kernel`.
    n_components : int
        Rank k of the subspace.
    center : bool
        Centre the data in feature space.

    Returns
    -------
    model : KernelPCAModel
        The fitted model (``transform`` projects new rows); the cluster's ledger
        holds the fit's messages.

    See Also
    --------
    uniform_batch : A uniform sample to the master instead of every row.
    """
    cluster.reset()
    info = validate_cluster(cluster)
    check_kernel_input(kernel, info)
    check_budgets(info, n_components or 1, info.n_samples)
    check_batch_size(info.n_samples, "exact", "use method='diskpca'")
    cluster.tolerate_lost_from_here()
    replies = cluster.broadcast_map(_send_all_step, round="all data to master",
                                    reply_kind="raw_points")
    # A worker lost here (lost="drop") sends nothing: exact KPCA of the others' rows.
    X = stack_rows([r["raw_points"] for r in answered(replies)])
    model = kernel_matrix_kpca(kernel(X, X), X, kernel, n_components, center,
                               eigensolver, remove_zero_eig)
    broadcast_landmark_model(cluster, model, "exact KPCA: landmarks and components")
    model.info |= {"method": "exact"}
    return model


def kernel_matrix_kpca(K: np.ndarray, X, kernel: Kernel, n_components: int | None,
                       center: bool, eigensolver: dict | None = None,
                       remove_zero_eig: bool = False, warn_rank: bool = True) -> KernelPCAModel:
    """Exact kernel PCA of the kernel matrix ``K = k(X, X)``, as scikit-learn's ``KernelPCA``.

    Centring (``center=True``) subtracts the column means and the row means and
    adds the overall mean (scikit-learn's ``KernelCenterer``; for a
    non-symmetric precomputed ``K`` this is what makes it symmetric). The top
    ``n_components`` eigenpairs come from :func:`kernelscale.linalg.top_eigenpairs`
    (``eigensolver``: its keyword arguments ``solver``, ``tol``, ``max_iter``,
    ``iterated_power``, ``random_state``); eigenvalues that are round-off of
    zero become 0 and a significantly negative one is an error
    (:func:`kernelscale.linalg.psd_eigenvalues`). Components of eigenvalue 0
    have zero coefficients; they are dropped with ``remove_zero_eig=True`` or
    ``n_components=None`` (every non-zero component), and otherwise kept with
    a ``UserWarning`` (without it when ``warn_rank`` is False: scikit-learn's
    ``KernelPCA`` keeps them silently). ``K`` is centred in place.
    """
    n = K.shape[0]
    mean = None
    if center:
        mean = K.mean(axis=0)  # <mu, phi(x_j)>; the column means of a non-symmetric K
        row_means = K.mean(axis=1)
        K -= mean[None, :]
        K -= row_means[:, None]
        K += mean.mean()
    trace = float(np.trace(K))
    k = n if n_components is None else min(int(n_components), n)
    w, V, n_iter = top_eigenpairs(K, k, **(eigensolver or {}), return_n_iter=True)
    w = psd_eigenvalues(w)
    order = np.argsort(w, kind="stable")[::-1]
    w, V = w[order], V[:, order]
    nonzero = w > 0
    if remove_zero_eig or n_components is None:
        w, V = w[nonzero], V[:, nonzero]
        coef = V / np.sqrt(w)
    elif warn_rank:
        coef, kept = cap_at_rank(V[:, nonzero] / np.sqrt(w[nonzero]), w[nonzero], k,
                                 "The kernel matrix", stacklevel=4)
        w = kept
    else:  # the same zero columns for eigenvalue 0, without the warning
        coef = np.zeros_like(V)
        coef[:, nonzero] = V[:, nonzero] / np.sqrt(w[nonzero])
    if center:
        # transform(a) = C^T (k(X, a) - m) leaves out the row mean of k(X, a), which the
        # centred kernel of a new point subtracts (scikit-learn's KernelCenterer): C^T 1 is
        # 0 in exact arithmetic, but not for the eigenvectors of tiny eigenvalues, which
        # LAPACK mixes with the null vector 1 (n_components=None keeps them). C' = C - 1 c^T
        # with c = C^T 1 / n makes C'^T (k(X, a) - m) the centred kernel's projection.
        coef = coef - coef.mean(axis=0)[None, :]
    return KernelPCAModel(kernel=kernel, landmarks=X, coef=coef, eigenvalues=w, center=mean,
                          trace=trace, info={"n_iter": n_iter})


@worker_step(discloses="aggregates")
def random_features_step(state, message):
    """Worker: ``Z_i^T Z_i`` (packed) and, for centring, the column sums of ``Z_i``."""
    config = message["model"]
    if is_device_array(state.data):
        raise TypeError(
            f"method='random_features' has no device path (its random feature maps run on "
            f"NumPy), and this worker's partition is {describe(state.data)}. Use a landmark "
            "method ('diskpca', 'uniform_dislr', 'uniform_batch', 'exact'), whose kernel "
            "blocks run on the device, or pass NumPy partitions.")
    kernel = Kernel.from_dict(config["kernel"])
    fmap = make_feature_map(kernel, state.data.shape[1], config["n_random_features"],
                            message["seed"])
    chunk = config["chunk_size"]
    m = fmap.n_components
    cov, sums = np.zeros((m, m)), np.zeros(m)

    def features_chunk(start, stop):
        Z = fmap.transform(state.data[start:stop], chunk_size=chunk)
        return gram(Z), Z.sum(axis=0)

    for *_, (chunk_cov, chunk_sums) in map_chunks(features_chunk, state.data.shape[0], chunk):
        cov += chunk_cov
        sums += chunk_sums
    return Tagged(sketch=pack_symmetric(cov), scalars=sums if config["center"] else None)


@worker_step(discloses="nothing")
def store_components_step(state, components, mean):
    """Keep the random-feature components (the workers rebuild the map from its seed)."""
    state.components = components
    state.mean = mean


def random_features_pca(cluster: Cluster, kernel: Kernel, n_components: int = 10,
                        n_random_features: int = 2000, center: bool = False,
                        chunk_size: int = DEFAULT_CHUNK_SIZE, random_state=None,
                        eigensolver: dict | None = None, **_) -> RandomFeaturePCAModel:
    """Random features + distributed linear PCA (each worker sends ``Z_i^T Z_i``).

    When the features' covariance has rank below ``n_components`` (e.g. the
    linear kernel's map has m = d features), the last components are zero,
    with a ``UserWarning``. The components (m x k, and the feature mean when
    centred) go back to the workers in the round 'random features: components'.

    Parameters
    ----------
    cluster : Cluster
        The workers, each holding its partition of the rows.
    kernel : Kernel
        From :func:`~kernelscale.make_kernel`.
    n_components : int
        Rank k of the subspace.
    n_random_features : int
        m, the random features per point.
    center : bool
        Centre the data in feature space.
    chunk_size : int
        Rows a worker processes at once.
    random_state : int, Generator or None
        Seeds the feature map (one word, broadcast).
    eigensolver : dict, optional
        The master's eigensolver for the m x m covariance
        (:func:`kernelscale.eigensolvers.top_eigenpairs`' keyword arguments;
        default: LAPACK's dense solver).

    Returns
    -------
    model : RandomFeaturePCAModel
        The fitted model (``transform`` projects new rows); the cluster's ledger
        holds the fit's messages.

    See Also
    --------
    diskpca : Kernel PCA through landmarks instead of a feature map.
    """
    rng = as_generator(random_state)
    cluster.reset()
    info = validate_cluster(cluster)
    check_kernel_input(kernel, info)
    check_budgets(info, n_components, info.n_samples)
    cluster.tolerate_lost_from_here()
    seed = shared_seed(rng)
    config = {"kernel": kernel.to_dict(), "n_random_features": int(n_random_features),
              "chunk_size": int(chunk_size), "center": bool(center)}
    total = cluster.broadcast_map(random_features_step, Tagged(seed=seed, model=config),
                                  round="random features: Z_i^T Z_i", reduce="sum")
    m = feature_map_size(kernel, info.n_features, n_random_features)
    cov = unpack_symmetric(total["sketch"], m)
    mean = None
    if center:
        mean = total["scalars"] / info.n_samples
        cov -= info.n_samples * np.outer(mean, mean)
    trace = float(np.trace(cov))  # the (centred) energy in the random feature space
    w, V, n_iter = top_eigenpairs((cov + cov.T) / 2.0, n_components, **(eigensolver or {}),
                                  return_n_iter=True)
    w, V = _numerical_range(w, V)
    # Rank below k (e.g. the linear kernel's m = d features): zero components beyond it.
    V, w = cap_at_rank(V, w, n_components, f"The random feature space ({m} features)")
    cluster.broadcast_map(store_components_step, V, mean, round="random features: components",
                          kind="model", reply_kind="model")
    return RandomFeaturePCAModel(kernel=kernel, n_features_in=info.n_features,
                                 n_random_features=int(n_random_features), feature_seed=seed,
                                 components=V, eigenvalues=w, mean=mean,
                                 info={"method": "random_features", "n_iter": n_iter},
                                 trace=trace)
