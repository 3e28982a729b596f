"""DPCA: ADMM-based decentralised linear PCA over vertical partitions (baseline of paper 002).

The baseline of Figure 4 of paper 002 (Schizas and Aduroja, 2015, as in the
authors' reference code ``dpca/dpca.m``). Party ``j`` holds ``A_j`` (n x m_j), the
model is ``A_j^T ~ C_j^T Y`` with loadings ``C_j`` (k x m_j) local to party ``j`` and
scores ``Y`` (k x n) shared by all. Each party keeps its own copy ``Y_j`` and the
copies are tied to their neighbours' by consensus constraints ``Y_j = Y_i``:

* outer iteration (coordinate descent): ``C_j = (Y_j Y_j^T)^{-1} Y_j A_j`` (local);
* inner ADMM iterations, two communication rounds each, penalty ``c``:

  - dual update: ``V_j[i] += c/2 (Y_j - Y_i)`` for each neighbour ``i`` (needs the
    neighbours' scores);
  - primal update (needs the neighbours' multipliers ``V_i[j]``)::

        Y_j = (2 C_j C_j^T + 2 c |N_j| I)^{-1}
              (2 C_j A_j^T - sum_i (V_j[i] - V_i[j]) + c sum_i (Y_j + Y_i)).

Neighbourhoods include the party itself (``N_j`` of size 3, 5, 10 in the paper:
DPCA3, DPCA5, DPCA10). The estimated principal subspace is the row span of
``C = [C_1, ..., C_J]`` (k x M).

Runtime shape: the network is decentralised, the runtime is a star, so the master
*relays* neighbour messages: a party's upload is what it transmits once, its
download what it receives from its neighbours (one message per neighbour). The
initial scores ``Y = C0 X`` of the reference code need one summation round through
the master (random ``C0_j`` drawn locally from per-party seeds). The error per outer
iteration needs the loadings at the master: that gathering is counted under the
phase ``"evaluate"``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernelscale.linalg import as_generator
from kernelscale.metrics.subspace import projector_error
from kernelscale.runtime import Cluster, worker_seeds
from kernelscale.runtime.steps import worker_step
from kernelscale.vertical.oneshot import validate_vertical


@dataclass
class DPCAResult:
    """Output of :func:`dpca`.

    Attributes
    ----------
    loadings : ndarray of shape (n_features, n_components)
        ``C^T``; its column span is the estimated principal subspace.
    error_history : ndarray of shape (n_outer,) or None
        Projector error against ``reference`` after each outer iteration.
    neighbourhoods : list of ndarray
        The neighbourhood of each party (itself included).
    """

    loadings: np.ndarray
    error_history: np.ndarray | None
    neighbourhoods: list


def ring_neighbourhoods(n_parties: int, size: int) -> list[np.ndarray]:
    """Each party with its ``(size - 1) / 2`` nearest parties on each side of a ring.

    ``size >= n_parties`` connects everyone; otherwise ``size`` must be odd so that
    the neighbour relation is symmetric (as ADMM consensus needs). An even size such
    as the paper's 10 (DPCA10) is therefore valid only for ``n_parties <= size``,
    where it means full connection (paper 002 uses J = 10 parties, so DPCA10 is
    fully connected there); ``ring_neighbourhoods(20, 10)`` raises ``ValueError``.
    Use an odd size (9 or 11) or explicit neighbourhoods for more parties.

    Parameters
    ----------
    n_parties : int
        J, the parties on the ring.
    size : int
        Parties in each neighbourhood, the party itself included.

    Returns
    -------
    neighbourhoods : list of ndarray
        For each party, the indices of the parties it exchanges with.

    Examples
    --------
    >>> [n.tolist() for n in ring_neighbourhoods(5, 3)][:2]
    [[0, 1, 4], [0, 1, 2]]
    """
    if int(size) != size or size < 1:
        raise ValueError(f"The neighbourhood size must be a positive integer, got {size!r}.")
    if size >= n_parties:
        return [np.arange(n_parties) for _ in range(n_parties)]
    if size % 2 == 0:
        raise ValueError(
            f"An even ring neighbourhood size ({size}) works only with at most {size} "
            f"parties (then every party is a neighbour of every other), got {n_parties} "
            "parties: on a ring of more parties it is not symmetric. Use an odd size "
            f"(the party and (size - 1) / 2 on each side, e.g. {size - 1} or {size + 1}), "
            "or pass explicit symmetric neighbourhoods."
        )
    half = (size - 1) // 2
    return [
        np.sort(np.unique([(j + o) % n_parties for o in range(-half, half + 1)]))
        for j in range(n_parties)
    ]


# ----------------------------------------------------------------------------- worker steps


@worker_step(discloses="per-row")
def initial_partial_scores(state, seed: int, n_components: int, n_features_total: int):
    """Worker step: ``C0_j A_j^T`` with a random ``C0_j`` (the reference code's ``Y = C X``)."""
    rng = np.random.default_rng(seed)
    m_j = state.data.shape[1]
    scale = np.sqrt(n_features_total) + np.sqrt(n_components)  # ~ ||C0||_2 of a Gaussian k x M
    loadings = rng.standard_normal((n_components, m_j)) / scale
    return np.asarray((state.data @ loadings.T).T)


@worker_step(discloses="nothing")
def start_consensus(state, scores: np.ndarray, neighbours: np.ndarray):
    """Worker step: keep the initial scores, the neighbourhood, zero multipliers."""
    state.scores = scores.copy()
    state.neighbours = [int(i) for i in neighbours]
    state.multipliers = {i: np.zeros_like(scores) for i in state.neighbours}
    state.loadings = np.zeros((scores.shape[0], state.data.shape[1]))


@worker_step(discloses="nothing")
def update_loadings(state) -> None:
    """Worker step (outer iteration): ``C_j = (Y_j Y_j^T)^{-1} Y_j A_j``."""
    Y = state.scores
    state.loadings = np.linalg.solve(Y @ Y.T, np.asarray((state.data.T @ Y.T).T))


@worker_step(discloses="per-row")
def dual_update(state, neighbour_scores: dict, penalty: float) -> dict:
    """Worker step (ADMM round 1): ``V_j[i] += c/2 (Y_j - Y_i)``; send ``V_j[i]`` to ``i``."""
    state.neighbour_scores = neighbour_scores
    for i in state.neighbours:
        if i != state.worker:
            state.multipliers[i] = state.multipliers[i] + 0.5 * penalty * (
                state.scores - neighbour_scores[i]
            )
    return {i: state.multipliers[i] for i in state.neighbours if i != state.worker}


@worker_step(discloses="per-row")
def primal_update(state, neighbour_multipliers: dict, penalty: float) -> np.ndarray:
    """Worker step (ADMM round 2): the scores update of the module docstring; send ``Y_j``."""
    C, Y = state.loadings, state.scores
    k = Y.shape[0]
    rhs = 2.0 * np.asarray((state.data @ C.T).T) + 2.0 * penalty * Y  # the self term
    for i in state.neighbours:
        if i != state.worker:
            rhs -= state.multipliers[i] - neighbour_multipliers[i]
            rhs += penalty * (Y + state.neighbour_scores[i])
    system = 2.0 * C @ C.T + 2.0 * penalty * len(state.neighbours) * np.eye(k)
    state.scores = np.linalg.solve(system, rhs)
    return state.scores


@worker_step(discloses="aggregates")
def report_loadings(state) -> np.ndarray:
    """Worker step (evaluation only): the party's loadings ``C_j``."""
    return state.loadings


# ----------------------------------------------------------------------------- master side


def dpca(
    cluster: Cluster,
    n_components: int,
    neighbourhood_size: int | None = None,
    neighbourhoods: list | None = None,
    penalty: float = 4.0,
    n_inner: int = 12,
    n_outer: int = 20,
    reference: np.ndarray | None = None,
    random_state=None,
) -> DPCAResult:
    """ADMM-based decentralised PCA (the DPCA baseline of Figure 4 of paper 002).

    Parameters
    ----------
    cluster : Cluster
        One worker per party holding its ``n x m_j`` feature block.
    n_components : int
        Dimension ``k`` of the principal subspace.
    neighbourhood_size : int, optional
        Ring neighbourhoods of this size, the party included (3, 5, 10 in the paper,
        with J = 10 parties). A size ``>= J`` connects every party to every other; a
        smaller size must be odd (symmetric ring), so an even size such as 10 needs
        ``J <= 10`` and raises ``ValueError`` for more parties (see
        :func:`ring_neighbourhoods`). Default: every party is a neighbour of every other.
    neighbourhoods : list of index arrays, optional
        Explicit (symmetric) neighbourhoods instead of a ring.
    penalty : float
        The ADMM penalty ``c`` (4 in the paper).
    n_inner : int
        ADMM iterations per outer iteration (12 in the paper; two rounds each).
    n_outer : int
        Outer (coordinate descent) iterations.
    reference : ndarray of shape (n_features, k), optional
        The true principal subspace; when given, the projector error after each
        outer iteration is recorded (phase ``"evaluate"``).
    random_state : int, Generator or None

    Returns
    -------
    DPCAResult
    """
    rng = as_generator(random_state)
    cluster.reset()
    info = validate_vertical(cluster)
    J = info.n_parties
    if int(n_components) != n_components or not 1 <= n_components <= min(
        info.n_samples, info.n_features
    ):
        raise ValueError(
            f"n_components must be an integer in [1, min(n_samples, n_features)], "
            f"got {n_components!r}."
        )
    if not np.isfinite(penalty) or penalty <= 0:
        raise ValueError(f"penalty must be a positive number, got {penalty!r}.")
    if neighbourhoods is None:
        neighbourhoods = ring_neighbourhoods(
            J, J if neighbourhood_size is None else neighbourhood_size
        )
    neighbourhoods = _check_neighbourhoods(neighbourhoods, J)

    # Step 0: initial scores Y = C0 X, summed at the master (reference code's start).
    scores = cluster.scatter_map(
        initial_partial_scores,
        [(s, int(n_components), info.n_features) for s in worker_seeds(rng, J)],
        round="initial scores",
        kind="seed",
        reduce="sum",
    )
    cluster.scatter_map(
        start_consensus,
        [(scores, neighbourhoods[j]) for j in range(J)],
        round="initial scores",
        kind="model",
    )
    all_scores = [scores] * J
    history = []
    for _ in range(int(n_outer)):
        # Step 1: local loadings by least squares (no communication).
        cluster.broadcast_map(update_loadings, round="local loadings")
        for _ in range(int(n_inner)):
            # Step 2a: neighbours exchange scores; dual (multiplier) update.
            blocks = cluster.scatter_map(
                dual_update,
                [
                    ({int(i): all_scores[i] for i in neighbourhoods[j] if i != j}, penalty)
                    for j in range(J)
                ],
                round="ADMM dual update",
                kind="sketch",
            )
            # Step 2b: neighbours exchange multipliers; primal (scores) update.
            all_scores = cluster.scatter_map(
                primal_update,
                [
                    ({int(i): blocks[i][j] for i in neighbourhoods[j] if i != j}, penalty)
                    for j in range(J)
                ],
                round="ADMM primal update",
                kind="sketch",
            )
        if reference is not None:
            history.append(projector_error(reference, _gather_loadings(cluster)))
    loadings = _gather_loadings(cluster)
    return DPCAResult(
        loadings=loadings,
        error_history=np.array(history) if reference is not None else None,
        neighbourhoods=neighbourhoods,
    )


def _gather_loadings(cluster: Cluster) -> np.ndarray:
    with cluster.phase("evaluate"):
        parts = cluster.broadcast_map(report_loadings, round="gather loadings", reply_kind="model")
    return np.hstack(parts).T


def _check_neighbourhoods(neighbourhoods, n_parties: int) -> list[np.ndarray]:
    if len(neighbourhoods) != n_parties:
        raise ValueError(
            f"Give one neighbourhood per party ({n_parties}), got {len(neighbourhoods)}."
        )
    hoods = [np.unique(np.asarray(h, dtype=np.int64)) for h in neighbourhoods]
    for j, h in enumerate(hoods):
        if h.size and (h.min() < 0 or h.max() >= n_parties):
            raise ValueError(f"Neighbourhood {j} names a party outside 0..{n_parties - 1}.")
        if j not in h:
            hoods[j] = np.sort(np.append(h, j))
    for j, h in enumerate(hoods):
        for i in h:
            if j not in hoods[i]:
                raise ValueError(
                    f"Neighbourhoods are not symmetric: {i} is next to {j} "
                    f"but {j} is not next to {i}."
                )
    return hoods
