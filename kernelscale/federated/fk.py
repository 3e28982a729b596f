"""FK k-means (Algorithm 1 of paper 003): the master function, over either protocol.

:func:`fk_kmeans` runs DSPGD with the communication-efficient mechanism, then the
distributed coreset k-means on the rows of H: as the paper runs it
(``protocol='paper'``: :func:`kernelscale.federated.fkkmeans.dspgd_cem`, a round
per Lanczos step) or pipelined, one message per DSPGD iteration
(:func:`kernelscale.federated.pipelined.dspgd_pipelined`). The worker steps are
beside each protocol, in those two modules.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernelscale.federated.fkkmeans import (
    DEFAULT_CHUNK_SIZE,
    DSPGDResult,
    FKKMeansModel,
    _responders,
    dspgd_cem,
    paper_gamma,
)
from kernelscale.federated.kmeans import (
    first_round_requests,
    kmeans_from_first_round,
    kmeans_on_workers,
    local_centres_step,
)
from kernelscale.federated.pipelined import (
    DEFAULT_ROUND_COST,
    H_AGGREGATES_ROUND,
    H_ROUND,
    dspgd_pipelined,
    h_kmeans_step,
)
from kernelscale.linalg import as_generator
from kernelscale.runtime import Cluster, validate_cluster


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
