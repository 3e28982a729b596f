"""disKPCA: distributed kernel PCA over horizontal partitions (Algorithm 4 of paper 001).

Balcan, Liang, Song, Woodruff, Xie, "Communication Efficient Distributed Kernel
Principal Component Analysis" (KDD 2016). The master function :func:`diskpca`
samples the landmarks Y, then runs disLR (Algorithm 3) on them. Two samplers:

* ``'ridge'`` (default): a uniform pilot, then rounds of ridge-leverage
  sampling (:func:`ridge_sample`; Musco and Musco, "Recursive Sampling for the
  Nystrom Method", NeurIPS 2017). Rounds, with s workers, d features and the
  schedule ``[|P|, ..., |Y|]`` of :func:`ridge_schedule`: 'pilot sampling:
  seeds' (s words), 'pilot sampling' (s counts, |P| d up), then per ridge
  round j 'ridge sampling j: residuals' (the previous round's points to every
  worker, the ridge, the kernel and chunk size in round 1; 2 words up per
  worker) and 'ridge sampling j' (s counts, the new points up).
* ``'paper'``: Algorithm 2 of 001: the kernel subspace embedding and disLS
  (:func:`leverage_sample`; the Gram or sketch of E_i up, the packed
  triangular factor down), leverage sampling of P, P to every worker and
  adaptive sampling by the residual to span(phi(P)) (:func:`adaptive_sample`).

Both end with disLR's rounds (the points the workers do not hold yet and the
k(Y,A_i) message) and the coefficients sent back. Nothing is skipped: every
point, factor, count and seed goes through the runtime. The number of rounds
depends only on (k, |Y|) and the sampler, except the top-up rounds when copies
of drawn points (duplicated data) leave a sample short, and the 'uniform fill'
round when the sampling weights run out. The samplers' master side lives in
:mod:`kernelscale.horizontal.samplers`, their worker steps in
:mod:`kernelscale.horizontal.sampling`, how rows are drawn in
:mod:`kernelscale.horizontal.draws`, and disLR in :mod:`kernelscale.horizontal.dislr`.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from kernelscale.horizontal.dislr import dislr
from kernelscale.horizontal.samplers import (
    adaptive_sample,
    leverage_sample,
    ridge_sample,
    ridge_schedule,
)
from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel
from kernelscale.linalg import (
    as_generator,
)
from kernelscale.metrics.lowrank import EXACT_REFERENCE_MAX_SAMPLES
from kernelscale.model import KernelPCAModel
from kernelscale.runtime import (
    Cluster,
    PartitionInfo,
    validate_cluster,
    worker_seeds,
)

MESSAGES = ("gram", "sketch")
SAMPLERS = ("ridge", "paper")


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


def refuse_square_matrices(n: int, message) -> None:
    """Raise ``ValueError(message(gib))`` when n x n float64 matrices (``gib`` GiB each)
    exceed :data:`~kernelscale.metrics.lowrank.EXACT_REFERENCE_MAX_SAMPLES` rows."""
    if n > EXACT_REFERENCE_MAX_SAMPLES:
        raise ValueError(message(8.0 * n**2 / 2**30))


def check_landmark_count(n_landmarks: int, method: str) -> None:
    """Refuse, before any round, a |Y| whose |Y| x |Y| matrices would not fit.

    disLR's master holds ``k(Y, Y)``, its whitening and the summed Gram (8 |Y|^2
    bytes each) and every worker accumulates its own |Y| x |Y| Gram; above
    :data:`~kernelscale.metrics.lowrank.EXACT_REFERENCE_MAX_SAMPLES` landmarks
    that is GiBs per copy, and a traceback half-way.
    """
    refuse_square_matrices(n_landmarks, lambda gib: (
        f"method={method!r} with n_landmarks={n_landmarks:,}: disLR holds "
        f"{n_landmarks:,} x {n_landmarks:,} matrices at the master and on every worker "
        f"({gib:.1f} GiB each, and a few copies while they are decomposed). It is limited "
        f"to {EXACT_REFERENCE_MAX_SAMPLES:,} landmarks; lower n_landmarks (a few thousand "
        "landmarks already give disLR a large span)."))


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
    sampler: str = "ridge",
    redraw: bool = True,
    pilot=None,
    ridge_scale: float = 1.0,
    send_model: bool = True,
    eigensolver: dict | None = None,
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
        |P|, the first stage's points: the uniform pilot of the ridge sampler
        (default :func:`default_pilot_size`: ``ceil(|Y| / 4)``, at least k, for
        RBF and Laplacian kernels, k for the others) or the
        points sampled by leverage scores of the paper's (default
        :func:`default_n_leverage`). The rest of the budget is sampled adaptively.
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
        (The kernel blocks follow the partitions: float32 partitions give
        float32 blocks, with the Gram and the residuals summed in float64.)
    sampler : {'ridge', 'paper'}
        How Y is drawn. 'ridge' (default): a uniform pilot P, then rounds that
        double the landmarks by their ridge residual (:func:`ridge_sample`),
        Musco and Musco's (2017) estimate of ridge leverage scores: two rounds
        after a pilot of |Y|/4 with RBF and Laplacian kernels; with the others a
        pilot of k points, whose ridge is 0, and log2(|Y|/k) rounds by the plain
        residual (:func:`default_pilot_size`). It needs no embedding
        (``embedding_dim``, ``row_sketch_dim``, ``n_random_features`` and
        ``embedding_dtype`` are then unused) and sends, per worker, the kernel's
        parameters once and 4 words per round more than uniform + disLR (14
        words with two rounds and RBF). 'paper': Algorithm 2 of 001, P by the
        leverage scores of the embedding, then Y~ by the residual to
        span(phi(P)). On real data the paper's sampler loses to uniform sampling
        at equal words where the energy is spread (benchmarks/sampler.py).
    redraw : bool
        Draw again when copies of drawn points on other workers leave a sample
        short (top-up rounds), and fill uniformly when the sampling weights run
        out. False keeps the shorter Y instead, so the fit sends at most the
        words of :func:`kernelscale.horizontal.forecast.forecast_words` (what a
        word budget runs).
    pilot : tuple, optional
        ``(P, rows drawn from each worker, PartitionInfo)``: the ridge sampler's
        uniform pilot, already drawn on this validated cluster (a word budget's
        pilot, :mod:`kernelscale.horizontal.pilot`); the fit goes on from it and
        keeps the cluster's ledger. Only with ``sampler='ridge'``.
    ridge_scale : float
        Multiplies the ridge the ridge sampler takes from its pilot
        (:func:`pilot_ridge`); 0 draws every round by the plain residual. A word
        budget sets 0 where its pilot's energy is concentrated
        (:mod:`kernelscale.horizontal.pilot`). ``model.info['ridge']`` is the
        ridge used.
    send_model : bool
        End with the paper's broadcast of the coefficients to every worker
        ('disLR: components'); False leaves it to the caller's next round (the
        spectral clustering sends them with its projections).
    eigensolver : dict, optional
        The master's eigensolver for disLR's |Y| x |Y| problem: keyword arguments
        of :func:`kernelscale.eigensolvers.top_eigenpairs` (default: LAPACK's
        dense solver); its iterations are ``model.info['n_iter']``.

    Returns
    -------
    KernelPCAModel
    """
    if messages not in MESSAGES:
        raise ValueError(f"messages must be one of {MESSAGES}, got {messages!r}.")
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}.")
    for name, value in (("embedding_dim", embedding_dim), ("row_sketch_dim", row_sketch_dim),
                        ("n_random_features", n_random_features), ("chunk_size", chunk_size)):
        if int(value) != value or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    if embedding_dtype not in ("float64", "float32"):
        raise ValueError(
            f"embedding_dtype must be 'float64' or 'float32', got {embedding_dtype!r}.")
    rng = as_generator(random_state)
    if pilot is not None and sampler != "ridge":
        raise ValueError("pilot= continues the ridge sampler; sampler='paper' draws no pilot.")
    if not (np.isfinite(ridge_scale) and ridge_scale >= 0):
        raise ValueError(f"ridge_scale must be a finite number >= 0, got {ridge_scale!r}.")
    if pilot is None:
        cluster.reset()
        info = validate_cluster(cluster)
        check_kernel_input(kernel, info)
    else:  # validated when the pilot was drawn
        *pilot, info = pilot
    cluster.tolerate_lost_from_here()  # with lost="drop", a worker lost from here is left out
    n_landmarks = check_budgets(info, n_components, n_landmarks)
    check_landmark_count(n_landmarks, "diskpca")
    low = 0 if sampler == "paper" else 1  # the ridge sampler's pilot needs a point
    if n_leverage is not None and not (
            int(n_leverage) == n_leverage and low <= n_leverage <= n_landmarks):
        raise ValueError(f"n_leverage must be an integer in [{low}, n_landmarks], got "
                         f"{n_leverage!r}.")
    n_rows = np.array(info.n_rows)

    if sampler == "paper":
        config = {"kernel": kernel.to_dict(), "n_random_features": int(n_random_features),
                  "embedding_dim": int(embedding_dim), "row_sketch_dim": int(row_sketch_dim),
                  "messages": messages, "chunk_size": int(chunk_size)}
        if embedding_dtype != "float64":  # the default adds no word to the ledger
            config["embedding_dtype"] = embedding_dtype
        if n_leverage is None:
            n_leverage = default_n_leverage(n_components, n_landmarks)
        # Steps 1-3a: kernel subspace embedding E_i, disLS, P by leverage scores
        P, drawn = leverage_sample(cluster, config, int(n_leverage), rng)
        # Step 3b (Algorithm 2): adaptive sampling of Y~ by the residual to span(phi(P)).
        # Copies of a drawn point (identical rows) left P short; without redraw Y~ does
        # not make up for them, or the fit would send more points than forecast.
        target = n_landmarks if redraw else n_landmarks - (int(drawn.sum()) - P.shape[0])
        Y, new_points, n_fill = adaptive_sample(cluster, P, target, n_rows - drawn, rng,
                                                redraw)
        ridge, n_first = 0.0, P.shape[0]
    else:
        # A uniform pilot P, then ridge-leverage rounds that double the landmarks
        targets = ridge_schedule(kernel, n_components, n_landmarks, n_leverage)
        Y, new_points, n_fill, ridge = ridge_sample(cluster, kernel, n_components, targets,
                                                    n_rows, center, int(chunk_size), rng,
                                                    ridge_scale, redraw=redraw, pilot=pilot)
        ridge, n_first = ridge * ridge_scale, targets[0]
    # Step 4: disLR in span(phi(Y))
    model = dislr(cluster, Y, new_points, kernel, n_components, info.n_samples, messages,
                  center, int(chunk_size), worker_seeds(rng, cluster.n_workers),
                  send_model=send_model, eigensolver=eigensolver)
    model.info |= {"method": "diskpca", "messages": messages, "sampler": sampler,
                  "n_leverage": int(n_first), "n_adaptive": int(Y.shape[0] - n_first),
                  "n_uniform_fill": n_fill, "ridge": ridge}
    return model
