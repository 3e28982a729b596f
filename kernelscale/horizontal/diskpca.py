"""disKPCA: distributed kernel PCA over horizontal partitions (Algorithm 4 of paper 001).

Balcan, Liang, Song, Woodruff, Xie, "Communication Efficient Distributed Kernel
Principal Component Analysis" (KDD 2016). The master function :func:`diskpca`
follows the paper's four steps; the worker steps live in
:mod:`kernelscale.horizontal.sampling` and :mod:`kernelscale.horizontal.dislr`.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from kernelscale.horizontal.dislr import dislr
from kernelscale.horizontal.sampling import (
    adaptive_sample_step,
    allocate,
    distinct_rows,
    embed_step,
    leverage_sample_step,
    leverage_scores_step,
    residual_step,
    sample_distinct,
    stack_rows,
    uniform_sample_step,
)
from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel
from kernelscale.linalg import (
    as_generator,
    pack_trapezoidal,
    triangular_whitening,
    unpack_symmetric,
    whitening,
    whitening_from_rows,
)
from kernelscale.model import KernelPCAModel
from kernelscale.runtime import (
    Cluster,
    PartitionInfo,
    Tagged,
    shared_seed,
    validate_cluster,
    worker_seeds,
)

MESSAGES = ("gram", "sketch")


def default_n_leverage(n_components: int, n_landmarks: int) -> int:
    """Leverage-stage share of the landmark budget: ``ceil(2 k ln k)``, at least k.

    The paper samples O(k log k) points by leverage scores and O(k / eps) more
    adaptively (Algorithm 2 of 001); this rule takes the O(k log k) with
    constant 2 and caps it at half the budget, so the adaptive stage always
    gets at least half of ``n_landmarks``.
    """
    k = max(n_components, 2)
    return max(1, min(max(n_components, math.ceil(2 * k * math.log(k))), n_landmarks // 2))


def check_budgets(info: PartitionInfo, n_components: int, n_landmarks: int) -> int:
    """Validate the rank and the landmark budget against the data; returns the budget.

    A budget above the number of samples is capped with a warning.
    """
    n = info.n_samples
    if int(n_components) != n_components or n_components < 1:
        raise ValueError(f"n_components must be a positive integer, got {n_components!r}.")
    if n_components > n:
        raise ValueError(f"n_components={n_components} exceeds the number of samples ({n}).")
    if n_landmarks > n:
        warnings.warn(
            f"n_landmarks={n_landmarks} exceeds the {n} samples; using {n}.", stacklevel=3
        )
        n_landmarks = n
    if n_components > n_landmarks:
        raise ValueError(
            f"n_components={n_components} exceeds n_landmarks={n_landmarks}: a rank-k "
            "subspace needs at least k representative points."
        )
    return int(n_landmarks)


def check_kernel_input(kernel: Kernel, info: PartitionInfo) -> None:
    if info.is_sparse and not kernel.accepts_sparse:
        raise TypeError(
            f"The {kernel.name} kernel does not take sparse partitions; "
            "densify them or use the 'rbf' kernel."
        )


def diskpca(
    cluster: Cluster,
    kernel: Kernel,
    n_components: int = 10,
    n_landmarks: int = 400,
    n_leverage: int | None = None,
    embedding_dim: int = 50,
    row_sketch_dim: int = 250,
    n_random_features: int = 2000,
    messages: str = "gram",
    center: bool = False,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    random_state=None,
    embedding_dtype: str = "float64",
) -> KernelPCAModel:
    """Distributed kernel PCA (disKPCA, Algorithm 4 of paper 001).

    Parameters
    ----------
    cluster : Cluster
        The workers, each holding its partition of the rows.
    kernel : Kernel
    n_components : int
        Rank k of the subspace.
    n_landmarks : int
        |Y|, the exact number of representative points (fewer only when the
        data has fewer distinct points; capped at n with a warning). Y holds
        distinct points only. When the adaptive weights run out first (every
        unsampled point lies in span(phi(P)), e.g. a linear kernel on
        low-rank data, or the rest are copies of chosen points), the budget is
        filled uniformly from the unsampled distinct points (round 'adaptive
        sampling: uniform fill'; ``model.info['n_uniform_fill']``).
    n_leverage : int, optional
        |P|, the points sampled by leverage scores; the rest of the budget is
        sampled adaptively. Default :func:`default_n_leverage`.
    embedding_dim : int
        t, the dimension of the kernel subspace embedding (paper: 50).
    row_sketch_dim : int
        p, the rows of the sketch of E_i in ``messages='sketch'`` (paper: 250).
    n_random_features : int
        m, random features behind the embedding (paper: 2000).
    messages : {'gram', 'sketch'}
        'gram' sends the exact ``E_i^T E_i`` and ``k(Y,A_i) k(A_i,Y)``; 'sketch' the
        paper's ``E_i T_i`` and ``Pi_i T_i``.
    center : bool
        Centre the data in feature space (the paper does not).
    chunk_size : int
        Rows a worker processes at once.
    random_state : int, Generator or None
    embedding_dtype : {'float64', 'float32'}
        Precision of the random features behind the embedding E_i, used only
        to estimate leverage scores (sampling probabilities); 'float32' makes
        that stage several times faster. Everything after sampling is float64.

    Returns
    -------
    KernelPCAModel
    """
    if messages not in MESSAGES:
        raise ValueError(f"messages must be one of {MESSAGES}, got {messages!r}.")
    for name, value in (("embedding_dim", embedding_dim), ("row_sketch_dim", row_sketch_dim),
                        ("n_random_features", n_random_features), ("chunk_size", chunk_size)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if embedding_dtype not in ("float64", "float32"):
        raise ValueError(
            f"embedding_dtype must be 'float64' or 'float32', got {embedding_dtype!r}.")
    rng = as_generator(random_state)
    cluster.reset()
    info = validate_cluster(cluster)
    check_kernel_input(kernel, info)
    n_landmarks = check_budgets(info, n_components, n_landmarks)
    if n_leverage is None:
        n_leverage = default_n_leverage(n_components, n_landmarks)
    if not 0 <= n_leverage <= n_landmarks:
        raise ValueError(f"n_leverage must be in [0, n_landmarks], got {n_leverage!r}.")
    config = {"kernel": kernel.to_dict(), "n_random_features": int(n_random_features),
              "embedding_dim": int(embedding_dim), "row_sketch_dim": int(row_sketch_dim),
              "messages": messages, "chunk_size": int(chunk_size)}
    if embedding_dtype != "float64":  # the default adds no word to the ledger
        config["embedding_dtype"] = embedding_dtype

    # Step 1: kernel subspace embedding E_i (one shared feature map and sketch, from seeds)
    P, drawn = leverage_sample(cluster, config, n_leverage, rng)
    # Step 3 (Algorithm 2): adaptive sampling of Y~ by the residual to span(phi(P))
    Y, new_points, n_fill = adaptive_sample(cluster, P, n_landmarks,
                                         np.array(info.n_rows) - drawn, rng)
    # Step 4: disLR in span(phi(Y))
    model = dislr(cluster, Y, new_points, kernel, n_components, info.n_samples, messages,
                  center, int(chunk_size), worker_seeds(rng, cluster.n_workers))
    model.info = {"method": "diskpca", "messages": messages, "n_leverage": int(P.shape[0]),
                  "n_adaptive": int(new_points.shape[0]), "n_uniform_fill": n_fill}
    return model


def leverage_sample(cluster: Cluster, config: dict, n_leverage: int, rng):
    """Steps 1-3a: embedding, disLS (Algorithm 1 of 001) and leverage sampling of P.

    Returns P (distinct rows) and the rows asked of each worker.
    """
    s = cluster.n_workers
    feature_seed, sketch_seed = shared_seed(rng), shared_seed(rng)
    own = worker_seeds(rng, s)
    name = ("leverage scores: E_i^T E_i" if config["messages"] == "gram"
            else "leverage scores: T_i^T E_i (E_i where n_i <= p)")
    gram_mode = config["messages"] == "gram"
    replies = cluster.scatter_map(
        embed_step,
        [(Tagged(seed=(feature_seed, sketch_seed, own[i]), model=config),) for i in range(s)],
        round=name, reply_kind="sketch", reduce="sum" if gram_mode else None)
    # Step 2 (Algorithm 1, line 2): the master's triangular factor Z of the (sketched)
    # embedding, sent packed: t(t+1)/2 words at full rank (r t - r(r-1)/2 at rank r).
    t = config["embedding_dim"]
    if gram_mode:  # E^T E = sum_i E_i^T E_i
        whitener = whitening(unpack_symmetric(replies, t))
    else:
        whitener = whitening_from_rows(np.vstack(replies))
    factor = pack_trapezoidal(triangular_whitening(whitener))
    sums = cluster.broadcast_map(leverage_scores_step, factor,
                                 round="leverage scores: whitening", kind="model",
                                 reply_kind="scalars")
    weights, capacity = np.array([r[0] for r in sums]), np.array([int(r[1]) for r in sums])
    counts = allocate(n_leverage, weights, capacity, rng)
    replies = cluster.scatter_map(leverage_sample_step, [(int(c),) for c in counts],
                                  round="leverage sampling", kind="scalars",
                                  reply_kind="raw_points")
    P = stack_rows([r["raw_points"] for r in replies])
    return P[distinct_rows(P)], counts


def adaptive_sample(cluster: Cluster, P, n_landmarks: int, unsampled, rng):
    """Algorithm 2, lines 2-4: send P, sample Y~ by residual; Y = P + Y~ (distinct rows).

    ``unsampled`` bounds each worker's count of rows not drawn yet. When the
    residual weights run out before the budget (all remaining points in
    span(phi(P)), or copies of chosen ones), the rest is drawn uniformly from
    the unsampled rows. Returns (Y, Y~, points of Y~ from the uniform fill).
    """
    sums = cluster.broadcast_map(residual_step, P, round="adaptive sampling: residuals",
                                 kind="raw_points", reply_kind="scalars")
    weights, capacity = np.array([r[0] for r in sums]), np.array([int(r[1]) for r in sums])
    chosen, received = sample_distinct(cluster, P, n_landmarks, weights, capacity,
                                       adaptive_sample_step, rng, "adaptive sampling")
    n_fill = 0
    if P.shape[0] + chosen.shape[0] < n_landmarks:
        left = np.asarray(unsampled) - received  # an upper bound: copies are gone too
        fill, _ = sample_distinct(cluster, stack_rows([P, chosen]), n_landmarks, left, left,
                                  uniform_sample_step, rng, "adaptive sampling: uniform fill")
        n_fill = int(fill.shape[0])
        chosen = stack_rows([chosen, fill])
    return stack_rows([P, chosen]), chosen, n_fill
