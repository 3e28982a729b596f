"""FK k-means in a handful of rounds: DSPGD's iterations pipelined, one round each.

The model is Algorithm 1 of paper 003 (:mod:`kernelscale.federated.fkkmeans`);
only the rounds change. Each DSPGD iteration of the paper takes a round for the
fresh seed, one per Lanczos step, and one for the update of ``B``; here an
iteration is one message, ``(seed_t, eta_t, P_{t-1})``: each client first
applies the previous iteration's update ``B_t = W_{t-1} P_{t-1}`` (steps 12-13),
then draws the fresh features and forms ``W_t[m]`` (steps 6-9), and replies
what the server's eigen-solver of ``W_t^T W_t`` (step 10) needs. Three solvers,
chosen per iteration (the server knows ``r_t``, so the words are known exactly
before the message is sent):

``"gram"``
    the client's ``W_t[m]^T W_t[m]`` itself, packed (``(D + r)(D + r + 1) / 2``
    words up), and the server solves the ``(D + r)`` eigenproblem of the sum:
    the exact eigenpairs, in the iteration's own round;
``"block"``
    block Krylov: the client replies ``W_t[m]^T W_t[m] Omega`` for a block
    ``Omega`` of ``b`` columns drawn from the seed (no words down), then a few
    rounds of ``b`` vectors each; Rayleigh-Ritz on the Krylov space, until the
    wanted Ritz pairs converge (DLA's criterion, to :data:`BLOCK_TOL`): fewer
    words than the Gram where ``D + r`` is large (above a thousand or so);
``"lanczos"``
    the paper's distributed Lanczos, one round per step, after the message.

``protocol="auto"`` (:func:`choose_solver`) takes the cheapest by words plus
``round_cost`` words per round, with Lanczos charged its fewest possible steps.
What the clients reveal is what the paper's rounds reveal at most: Theorem 4 of
003 says the server can recover ``W_t[m]^T W_t[m]`` from the Lanczos products;
the Gram message sends exactly that.

The last iteration's projection to ``H`` (step 17) travels with the first round of
the k-means (:func:`~kernelscale.federated.kmeans.first_round_requests`): the local
solution and its coreset, drawn with sizes fixed beforehand (one round instead of
two), or the local centres' sums and counts (``aggregates_only``).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla

from kernelscale.federated.fkkmeans import (
    DSPGDResult,
    FKKMeansModel,
    _h_projection,
    _responders,
    _w_chunks,
    gather_step,
    gram_matvec_step,
    lanczos_start,
    project_step,
)
from kernelscale.federated.kmeans import local_centres, local_coreset
from kernelscale.federated.lanczos import LanczosResult, _n_needed, lanczos
from kernelscale.linalg import as_generator, pack_symmetric, unpack_symmetric
from kernelscale.runtime import Cluster, Tagged, shared_seed
from kernelscale.runtime.steps import worker_step

SOLVERS = ("gram", "block", "lanczos")
#: Default cost of one round, in words (the whole federation's): a 50 ms round trip at
#: 128 Mbit/s carries 800 KB, 10^5 words of 8 bytes.
DEFAULT_ROUND_COST = 100_000
#: Block Krylov: columns beyond the pairs wanted; the relative residual its Ritz pairs
#: converge to (DLA's is 1e-8; at 1e-6 the embedding H agrees with the exact one to
#: about 1e-6, far below DSPGD's own noise); the products :func:`solver_costs` expects
#: (4-5 to 1e-6 on digits at D = 400 with 10 extra columns).
BLOCK_OVERSAMPLING = 10
BLOCK_TOL = 1e-6
BLOCK_ROUNDS = 5
#: Lanczos steps :func:`solver_costs` expects per pair wanted (digits: 30-35 steps for
#: 13-14 pairs).
LANCZOS_STEPS_PER_PAIR = 2
ITERATION_ROUND = "dspgd: iteration"
BLOCK_ROUND = "dspgd: block product"
H_ROUND = "fk: H and local coresets"
H_AGGREGATES_ROUND = "fk: H and local centres"


# ----------------------------------------------------------------------------------
# Worker steps.


def _iteration_disclosure(message) -> str:
    """The Gram and block products are sums over rows; a Lanczos iteration replies nothing."""
    return "nothing" if message["model"]["solver"] == "lanczos" else "aggregates"


@worker_step(discloses=_iteration_disclosure)
def pipelined_iteration_step(state, message):
    """One DSPGD iteration in one message: update ``B``, fresh features, the solver's reply.

    ``message`` is ``Tagged(seed=seed_t, scalars=eta_t or [eta_t, answers],
    model={"solver": ..., "update": P_{t-1} (from t = 2), "block": b (block
    solver), "setup": [gamma, D, chunk size] (t = 1)})``.
    """
    config = message["model"]
    if "setup" in config:  # t = 1: B_1 = 0 (steps 1 and 8 of Algorithm 1)
        gamma, D, chunk = config["setup"]
        state.fk_params = (float(gamma), int(D), int(chunk))
        state.B = np.zeros((state.data.shape[0], 0))
    if "update" in config:  # steps 12-13 of iteration t - 1: B_t = W_{t-1} P_{t-1}
        project_step(state, config["update"], "B")
    scalars = np.atleast_1d(message["scalars"])
    state.responds = bool(scalars[-1]) if scalars.size > 1 else True
    state.fk_iteration = (int(message["seed"]), float(scalars[0]))
    gram = 0.0
    for _, W in _w_chunks(state):  # steps 6-9: W_t[m], its Gram chunk by chunk
        gram = gram + W.T @ np.array(W, copy=True)
    state.W_gram = gram
    if not state.responds or config["solver"] == "lanczos":
        return None
    if config["solver"] == "gram":
        return pack_symmetric(gram)
    return gram @ start_block(int(message["seed"]), gram.shape[0], int(config["block"]))


@worker_step(discloses="aggregates")
def block_product_step(state, Q):
    """Worker step (one block Krylov round): ``W_t[m]^T W_t[m] Q``, ``b (D + r_t)`` words."""
    return state.W_gram @ Q if state.responds else None


def _h_disclosure(P, *request) -> str:
    if not request:
        return "nothing"
    return "aggregates" if len(request) == 3 else "per-row"


@worker_step(discloses=_h_disclosure)
def h_kmeans_step(state, P, *request):
    """Step 17, then the k-means' first round: ``H[m] = W_T[m] P`` kept as
    ``state.embedding``, then its local coreset (``request`` of 5) or local centres'
    sums and counts (``request`` of 3); nothing for a client that dropped out."""
    project_step(state, P, "embedding")
    if not request:
        return None
    if len(request) == 3:
        return local_centres(state, *request)
    return local_coreset(state, *request)


def start_block(seed: int, dim: int, width: int) -> np.ndarray:
    """The block Krylov start ``Omega`` (dim x width), rebuilt from the iteration's seed."""
    return np.random.default_rng([seed, 7]).standard_normal((dim, width))


# ----------------------------------------------------------------------------------
# The server's choice of solver, and the block Krylov solver.


def pairs_wanted(n_wanted: int, rank: int) -> int:
    """The Ritz pairs an iteration needs: those above ``eta_t lambda`` (about ``r_t``, the
    rank the last iteration kept) and the next one, and at least ``n_wanted``."""
    return max(n_wanted, rank + 2)


def block_width(dim: int, n_wanted: int, rank: int) -> int:
    """Columns of the block: the pairs wanted plus :data:`BLOCK_OVERSAMPLING`."""
    return min(dim, pairs_wanted(n_wanted, rank) + BLOCK_OVERSAMPLING)


def solver_costs(dim: int, n_wanted: int, rank: int, n_workers: int,
                 round_cost: float) -> dict[str, float]:
    """Words plus ``round_cost`` per round of each solver, beyond the iteration's message.

    Per client: the Gram ``dim (dim + 1) / 2`` words up, no extra round; block
    Krylov ``q`` products of ``b`` columns (``q`` = :data:`BLOCK_ROUNDS`), ``(2 q - 1)
    b dim`` words and ``q - 1`` extra rounds; Lanczos ``2 dim`` words and a round per
    step, :data:`LANCZOS_STEPS_PER_PAIR` steps per pair wanted.
    """
    b, pairs = block_width(dim, n_wanted, rank), pairs_wanted(n_wanted, rank)
    steps = min(dim, LANCZOS_STEPS_PER_PAIR * pairs + 2)
    return {
        "gram": n_workers * dim * (dim + 1) / 2,
        "block": n_workers * (2 * BLOCK_ROUNDS - 1) * b * dim + (BLOCK_ROUNDS - 1) * round_cost,
        "lanczos": n_workers * 2 * steps * dim + steps * round_cost,
    }


def choose_solver(protocol: str, dim: int, n_wanted: int, rank: int, n_workers: int,
                  round_cost: float) -> str:
    """``protocol`` itself, or for ``'auto'`` the cheapest of :func:`solver_costs`."""
    if protocol != "auto":
        return protocol
    costs = solver_costs(dim, n_wanted, rank, n_workers, round_cost)
    return min(SOLVERS, key=lambda name: (costs[name], SOLVERS.index(name)))


def _orthonormal(Z: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """An orthonormal basis of the columns of ``Z`` (numerically dependent ones dropped)."""
    if Z.shape[1] == 0:
        return Z
    U, s, _ = np.linalg.svd(Z, full_matrices=False)
    return U[:, s > rtol * max(s[0], np.finfo(float).tiny)]


def block_krylov(first_product, omega, product, *, n_wanted: int, threshold, tol: float,
                 max_rounds: int | None = None) -> LanczosResult:
    """Top eigenpairs of a symmetric PSD ``G`` from block products (block Lanczos).

    ``first_product`` is ``G omega`` (the iteration's reply); ``product(Q)`` runs one
    round and returns ``G Q``. Every product is kept, so the Rayleigh-Ritz step is
    on the whole Krylov space ``[Q_0, Q_1, ...]`` (``K^T G K`` exactly, from
    ``G K``); a new block is added until the Ritz pairs wanted (``n_wanted``, and
    every one above ``threshold`` and the next, as in
    :func:`~kernelscale.federated.lanczos.lanczos`) have residual
    ``||G v - theta v|| <= tol * theta_1``, the space is exhausted, or
    ``max_rounds`` products were taken. ``n_steps`` of the result counts the products.
    """
    dim = omega.shape[0]
    Q0, R = np.linalg.qr(omega)
    basis = [Q0]
    images = [sla.solve_triangular(R, first_product.T, trans="T", lower=False).T]
    rounds = 1
    while True:
        K, GK = np.hstack(basis), np.hstack(images)
        T = K.T @ GK
        theta, S = np.linalg.eigh((T + T.T) / 2.0)
        theta, S = theta[::-1], S[:, ::-1]
        wanted = _n_needed(theta, n_wanted, threshold)
        need = min(wanted, theta.size)
        residual = np.linalg.norm(GK @ S[:, :need] - K @ (S[:, :need] * theta[:need]), axis=0)
        scale = max(abs(theta[0]), np.finfo(float).tiny)
        done = wanted <= theta.size and bool(np.all(residual <= tol * scale))
        if done or K.shape[1] >= dim or (max_rounds is not None and rounds >= max_rounds):
            break
        Z = images[-1]
        for _ in range(2):  # orthogonal to the whole space so far, twice (as DLA)
            Z = Z - K @ (K.T @ Z)
        Q = _orthonormal(Z)
        if Q.shape[1] == 0:  # the Krylov space is invariant: its Ritz pairs are exact
            break
        basis.append(Q)
        images.append(np.asarray(product(Q), dtype=np.float64))
        rounds += 1
    keep = min(_n_needed(theta, n_wanted, threshold), theta.size)
    return LanczosResult(theta[:keep], K @ S[:, :keep], rounds)


# ----------------------------------------------------------------------------------
# The master loop.


def dspgd_pipelined(
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
    protocol: str = "auto",
    round_cost: float = DEFAULT_ROUND_COST,
    lanczos_tol: float = 1e-8,
    chunk_size: int = 4096,
    random_state=None,
    record_estimates: bool = False,
) -> tuple[DSPGDResult, np.ndarray]:
    """DSPGD with CEM (steps 4-18 of Algorithm 1 of 003), one round per iteration.

    Assumes a validated cluster with partitions of ``n_rows`` rows. ``protocol`` is
    ``'auto'``, ``'gram'``, ``'block'`` or ``'lanczos'`` (the solver, see the
    module docstring). Returns the trace and the projection ``P`` of step 17,
    which the clients have not applied yet: the caller sends it with its next
    round (``h_kmeans_step``).
    """
    rng = as_generator(random_state)
    info_rows = np.asarray(n_rows, dtype=np.float64)
    model = FKKMeansModel(int(n_features), gamma, n_random_features)
    threshold, rank, pending = None, 0, None
    ranks, steps, ups, totals, estimates, solvers = [], [], [], [], [], []
    for t in range(1, max_iter + 1):
        up0, tot0 = cluster.ledger.upload_words(), cluster.ledger.total_words()
        # Step 5: eta_t = 1/t; steps 6-9 on the clients, after step 13 of t - 1.
        eta, seed = 1.0 / t, shared_seed(rng)
        answers = _responders(rng, cluster.n_workers, dropout)
        last, dim = t == max_iter, n_random_features + rank
        n_wanted = min(dim, max(n_clusters + 2 if t == 1 else 1,
                                n_eigenvectors if last else 1))
        solver = choose_solver(protocol, dim, n_wanted, rank, cluster.n_workers, round_cost)
        config: dict = {"solver": solver}
        if t == 1:
            config["setup"] = [float(gamma), int(n_random_features), int(chunk_size)]
        if pending is not None:
            config["update"] = pending
        if solver == "block":
            config["block"] = block_width(dim, n_wanted, rank)
        flags = [np.array([eta, float(a)]) if dropout else eta for a in answers]
        reply = cluster.scatter_map(
            pipelined_iteration_step,
            [(Tagged(seed=seed, scalars=f, model=config),) for f in flags],
            round=ITERATION_ROUND, reduce="sum")
        scale = info_rows.sum() / info_rows[answers].sum()
        # Step 10: the eigenpairs of W_t^T W_t above eta_t lambda (and the next one).
        result = _solve(cluster, solver, reply, scale, seed, dim, n_wanted,
                        None if t == 1 else eta * threshold, lanczos_tol, config.get("block"))
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
        if last:  # step 17, sent with the k-means' first round
            pending = _h_projection(theta, V, n_eigenvectors, eta, threshold)
        else:  # steps 12-13, sent with the next iteration's message
            pending = V[:, keep] * np.sqrt((theta[keep] - eta * threshold) / theta[keep])
            rank = int(keep.sum())
        model.projections.append(pending)
        ranks.append(int(keep.sum()))
        steps.append(result.n_steps)
        solvers.append(solver)
        ups.append(cluster.ledger.upload_words() - up0)
        totals.append(cluster.ledger.total_words() - tot0)
    eig = np.maximum(theta[:n_eigenvectors], 0) + (1.0 - eta) * threshold
    trace = DSPGDResult(model, threshold, eig, ranks, steps, ups, totals, estimates, solvers)
    return trace, pending


def _solve(cluster, solver, reply, scale, seed, dim, n_wanted, threshold, tol, width):
    """Step 10 by ``solver``, from the iteration's summed reply."""
    if solver == "gram":
        G = scale * unpack_symmetric(reply, dim)
        theta, V = np.linalg.eigh((G + G.T) / 2.0)
        theta, V = theta[::-1], V[:, ::-1]
        keep = min(_n_needed(theta, n_wanted, threshold), dim)
        return LanczosResult(theta[:keep], V[:, :keep], 0)
    if solver == "block":
        def product(Q):
            return scale * cluster.broadcast_map(block_product_step, Q, round=BLOCK_ROUND,
                                                 reduce="sum")

        return block_krylov(scale * reply, start_block(seed, dim, width), product,
                            n_wanted=n_wanted, threshold=threshold, tol=max(tol, BLOCK_TOL),
                            max_rounds=math.ceil(dim / width) + 1)

    def matvec(c):
        return scale * cluster.broadcast_map(gram_matvec_step, c, round="dspgd: lanczos step",
                                             reduce="sum")

    return lanczos(matvec, dim, n_wanted=n_wanted, threshold=threshold, tol=tol,
                   random_state=lanczos_start(seed))


__all__ = ["DEFAULT_ROUND_COST", "SOLVERS", "block_krylov", "choose_solver",
           "dspgd_pipelined", "solver_costs"]
