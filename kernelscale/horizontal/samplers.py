"""disKPCA's two landmark samplers, the master's side (Algorithms 2 and 4 of paper 001).

* The ridge sampler (:func:`ridge_sample`, disKPCA's default): a uniform pilot P
  (:func:`default_pilot_size`), its ridge (:func:`pilot_ridge`, with
  :func:`ridge_outside_pilot` where the pilot's span misses energy), then the
  doubling rounds of :func:`ridge_schedule`, each drawing by the workers' ridge
  residuals (Musco and Musco, "Recursive Sampling for the Nystrom Method",
  NeurIPS 2017).
* The paper's sampler: the kernel subspace embedding and disLS
  (:func:`leverage_sample`, Algorithm 1), then adaptive sampling by the residual to
  span(phi(P)) (:func:`adaptive_sample`, Algorithm 2).

:func:`kernelscale.horizontal.diskpca.diskpca` runs one of them, then disLR. The
workers' steps live in :mod:`kernelscale.horizontal.sampling` and how rows are
drawn in :mod:`kernelscale.horizontal.draws`.
"""

from __future__ import annotations

import math

import numpy as np

from kernelscale.horizontal.draws import (
    allocate,
    distinct_rows,
    sample_distinct,
    stack_rows,
    uniform_sample,
    uniform_sample_step,
)
from kernelscale.horizontal.sampling import (
    adaptive_sample_step,
    defensive_share,
    defensive_split,
    embed_step,
    leverage_sample_step,
    leverage_scores_step,
    needs_ridge_floor,
    residual_step,
    ridge_residual_step,
)
from kernelscale.kernels import Kernel
from kernelscale.linalg import (
    pack_trapezoidal,
    triangular_whitening,
    unpack_symmetric,
    whitening,
    whitening_from_rows,
)
from kernelscale.runtime import Cluster, Tagged, shared_seed, worker_seeds
from kernelscale.runtime.cluster import one_blas_thread
from kernelscale.runtime.lost import answered


def pilot_ridge(kernel: Kernel, P, n_components: int, center: bool) -> float:
    """The ridge mu for :func:`ridge_residual_step` from a uniform pilot sample P.

    Musco and Musco (2017) sample by lambda-ridge leverage scores with
    ``lambda = (1/k) sum_{i>k} lambda_i(K)``, the optimal rank-k error over k.
    From a uniform P of m of the n points, ``(n/m) K_PP`` estimates the spectrum
    of K and the ridge in P's coordinates is ``mu = lambda m / n``, so
    ``mu = (1/k) sum_{i>k} lambda_i(K_PP)``: the tail of the pilot's own kernel
    matrix (centred when the fit is). No word is needed to estimate it.
    """
    K = kernel(P, P, dtype=np.float64)
    if center:
        mean = K.mean(axis=0)
        K = K - mean[None, :] - mean[:, None] + mean.mean()
    with one_blas_thread():  # small dense algebra: a second BLAS thread only waits
        w = np.maximum(np.linalg.eigvalsh((K + K.T) / 2.0), 0.0)[::-1]
    return float(w[n_components:].sum() / n_components)


def ridge_outside_pilot(cluster: Cluster, P, config: dict, n_components: int,
                        n_samples: int) -> float:
    """What the energy outside span(phi(P)) adds to :func:`pilot_ridge`'s mu.

    Round 'ridge sampling: pilot residuals' sends P and the settings; each
    worker keeps P as its first landmarks and returns its rows' total squared
    distance to span(phi(P)) (:func:`ridge_residual_step` with ridge 0). Their
    sum E is trace(K) minus the trace of P's Nystroem approximation, so
    Musco and Musco's lambda gains E / k, and mu = lambda m / n gains
    ``m E / (n k)`` (:func:`~kernelscale.horizontal.sampling.needs_ridge_floor`).
    The residuals are of the uncentred feature map, as the rounds' are.
    """
    sums = cluster.broadcast_map(ridge_residual_step,
                                 Tagged(raw_points=P, model={**config, "ridge": 0.0}),
                                 round="ridge sampling: pilot residuals", reply_kind="scalars")
    outside = float(sum(r[0] for r in answered(sums)))
    return P.shape[0] * outside / (n_samples * n_components)


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
        whitener = whitening_from_rows(np.vstack(answered(replies)))
    factor = pack_trapezoidal(triangular_whitening(whitener))
    sums = cluster.broadcast_map(leverage_scores_step, factor,
                                 round="leverage scores: whitening", kind="model",
                                 reply_kind="scalars")
    weights, capacity = residual_weights(sums)
    counts = allocate(n_leverage, weights, capacity, rng)
    replies = cluster.scatter_map(leverage_sample_step, [(int(c),) for c in counts],
                                  round="leverage sampling", kind="scalars",
                                  reply_kind="raw_points")
    P = stack_rows([r["raw_points"] for r in answered(replies)])
    return P[distinct_rows(P)], counts


def adaptive_sample(cluster: Cluster, P, n_landmarks: int, unsampled, rng,
                    redraw: bool = True):
    """Algorithm 2, lines 2-4: send P, sample Y~ by residual; Y = P + Y~ (distinct rows).

    ``unsampled`` bounds each worker's count of rows not drawn yet. When the
    residual weights run out before the budget (all remaining points in
    span(phi(P)), or copies of chosen ones), the rest is drawn uniformly from
    the unsampled rows. Returns (Y, Y~, points of Y~ from the uniform fill).
    """
    sums = cluster.broadcast_map(residual_step, P, round="adaptive sampling: residuals",
                                 kind="raw_points", reply_kind="scalars")
    chosen, n_fill, _ = draw_by_residuals(cluster, P, n_landmarks, sums, unsampled, rng,
                                          "adaptive sampling", redraw)
    return stack_rows([P, chosen]), chosen, n_fill


def draw_by_residuals(cluster: Cluster, kept, target: int, sums, unsampled, rng,
                      round_name: str, redraw: bool = True):
    """New distinct points by the workers' residual weights until ``kept`` holds ``target``.

    ``sums`` are the workers' (residual sum, rows of positive residual). When
    the weights run out first, the rest is drawn uniformly from the unsampled
    rows (round ``round_name + ': uniform fill'``), unless ``redraw`` is False,
    which keeps the shorter sample. Returns (the new points, how many of them
    came from the fill, the rows received from each worker).
    """
    weights, capacity = residual_weights(sums)
    chosen, received = sample_distinct(cluster, kept, target, weights, capacity,
                                       adaptive_sample_step, rng, round_name, redraw)
    n_fill = 0
    if redraw and kept.shape[0] + chosen.shape[0] < target:
        left = np.asarray(unsampled) - received  # an upper bound: copies are gone too
        fill, more = sample_distinct(cluster, stack_rows([kept, chosen]), target, left, left,
                                     uniform_sample_step, rng, f"{round_name}: uniform fill")
        n_fill, received = int(fill.shape[0]), received + more
        chosen = stack_rows([chosen, fill])
    return chosen, n_fill, received


def residual_weights(sums):
    """The workers' sampling weights and capacities from their ``(sum, rows)`` replies
    (none for a worker lost, whose reply is ``None``)."""
    weights = np.array([0.0 if r is None else r[0] for r in sums])
    capacity = np.array([0 if r is None else int(r[1]) for r in sums], dtype=np.int64)
    return weights, capacity


def ridge_schedule(kernel: Kernel, n_components: int, n_landmarks: int,
                   n_pilot: int | None = None) -> list[int]:
    """Landmark counts after each stage of the ridge sampler: ``[|P|, ..., |Y|]``.

    The uniform pilot P holds ``n_pilot`` points, by default
    :func:`default_pilot_size`; each ridge round then doubles the landmarks,
    as the recursive sampler of Musco and Musco (2017) does, up to |Y|. The
    schedule depends on the kernel's kind, k and |Y| only, so the number of
    rounds is known before the fit.
    """
    if n_pilot is None:
        n_pilot = default_pilot_size(kernel, n_components, n_landmarks)
    n_pilot = min(max(int(n_pilot), 1), n_landmarks)
    targets = [n_pilot]
    while targets[-1] < n_landmarks:
        targets.append(min(n_landmarks, 2 * targets[-1]))
    return targets


def default_pilot_size(kernel: Kernel, n_components: int, n_landmarks: int) -> int:
    """|P|, the ridge sampler's uniform pilot: ``ceil(|Y| / 4)`` or k, by the kernel's kind.

    * RBF and Laplacian kernels (k(a, a) = 1 for every point): ``ceil(|Y| / 4)``,
      at least k, then two ridge rounds. The pilot's tail beyond k sets the
      ridge (:func:`pilot_ridge`), and a word budget reads the pilot's
      flatness (:mod:`kernelscale.horizontal.pilot`).
    * Polynomial, linear and arc-cosine kernels, whose k(a, a) grows with the
      point's norm: k points. The energy sits with the points of large norm,
      which the residual rounds find and a uniform pilot mostly misses. A
      pilot of k points has no tail beyond k, so the ridge is 0 and each
      round draws by the plain residual to span(phi(S)), the adaptive
      sampling of paper 001's Algorithm 2, in doubling rounds. At equal words
      (``benchmarks/budget_pilot_size.py``: five real sets, B = 3 x 10^4 to
      10^6) its excess was 0.04-1.00x that of a |Y|/4 pilot with these
      kernels (median 0.79x, lower in 34 of 40 cells, within 1% in the rest), for
      about 1.5x the fit seconds (more rounds). With RBF kernels it was
      0.70-1.40x (median 1.00x; up to 1.40x on spam), so they keep
      |Y|/4, which the word budget's pilot rule also reads.
    """
    if kernel.is_shift_invariant:
        return max(n_components, math.ceil(n_landmarks / 4))
    return n_components


def ridge_sample(cluster: Cluster, kernel: Kernel, n_components: int, targets: list[int],
                 n_rows, center: bool, chunk_size: int, rng, ridge_scale: float = 1.0,
                 redraw: bool = True, pilot=None, record: list | None = None):
    """The 'ridge' sampler: a uniform pilot P, then rounds of ridge-leverage sampling.

    Round j sends the points drawn in round j - 1 (the workers keep all
    landmarks; P first) and the ridge ``mu_j = lambda |S_j| / n`` of the
    landmarks S_j so far, with lambda from the pilot (:func:`pilot_ridge`);
    each worker computes its rows' ridge residuals (:func:`ridge_residual_step`)
    and the master draws up to ``targets[j]`` landmarks by them. disLR then
    sends only the last round's points. Against uniform + disLR this costs,
    per worker, the kernel's parameters and the chunk size once (6 words for
    rbf, 5 for arc-cosine) and 4 words per round (the ridge, the two-number
    reply, the count): 14 words with two rounds (RBF). The residuals are those of
    the uncentred feature map, as in the paper; with ``center=True`` lambda
    comes from the centred pilot.

    ``pilot``: ``(P, rows drawn from each worker)`` when the pilot was drawn
    already (a word budget's, :mod:`kernelscale.horizontal.pilot`).
    ``redraw=False`` (a word budget): copies of drawn points (rows held by
    several workers) leave Y short, and no round makes up for them; each
    draws the points the schedule planned for it, which the forecast counted.
    ``record``: a list that gets, per ridge round, the landmarks before it,
    its ridge, the workers' total residual and the points drawn (for the
    sampling probabilities of :func:`kernelscale.horizontal.hybrid.ridge_batch`).

    Returns (Y, the last round's points, points from a uniform fill, mu of the pilot).
    """
    if pilot is None:
        pilot = uniform_sample(cluster, n_rows, targets[0], rng, "pilot sampling",
                               redraw=redraw)
    P, received = pilot
    ridge = pilot_ridge(kernel, P, n_components, center)
    Y, new_points, n_fill = P, P, 0
    config = {"kernel": kernel.to_dict(), "chunk_size": int(chunk_size)}
    if len(targets) > 1 and needs_ridge_floor(kernel, P.shape[0], n_components):
        ridge += ridge_outside_pilot(cluster, P, config, n_components, int(np.sum(n_rows)))
        new_points, config = P[:0], {}  # the workers hold P and the settings now
    per_landmark = ridge_scale * ridge / P.shape[0]  # lambda / n
    for j, target in enumerate(targets[1:], start=1):
        settings = {**config, "ridge": per_landmark * Y.shape[0]} if j == 1 else {
            "ridge": per_landmark * Y.shape[0]}
        sums = cluster.broadcast_map(ridge_residual_step,
                                     Tagged(raw_points=new_points, model=settings),
                                     round=f"ridge sampling {j}: residuals",
                                     reply_kind="scalars")
        share = defensive_share(kernel, P.shape[0], n_components, ridge_scale)
        # without redraw, copies of drawn points leave Y short, and no round makes up for
        # them: each draws its planned points only, which the forecast counted
        n_new = target - (Y.shape[0] if redraw else targets[j - 1])
        by_residual, by_uniform = defensive_split(n_new, share)
        new_points, filled, got = draw_by_residuals(cluster, Y, Y.shape[0] + by_residual, sums,
                                                    np.asarray(n_rows) - received, rng,
                                                    f"ridge sampling {j}", redraw)
        if by_uniform:  # the round's defensive share, uniform over the rows not sampled
            left = np.asarray(n_rows) - received - got
            kept = stack_rows([Y, new_points])
            more, extra = sample_distinct(cluster, kept, kept.shape[0] + by_uniform, left,
                                          left, uniform_sample_step, rng,
                                          f"ridge sampling {j}: uniform share", redraw)
            new_points, got = stack_rows([new_points, more]), got + extra
        if record is not None:
            record.append({"kept": Y, "ridge": settings["ridge"],
                           "total": float(sum(r[0] for r in answered(sums))),
                           "new": new_points})
        Y, n_fill, received = stack_rows([Y, new_points]), n_fill + filled, received + got
    return Y, new_points, n_fill, ridge
