"""DSPGD without CEM (section 4.1 of 003): Lanczos on the N x N matrix R_t, for comparison.

The server keeps ``Z_t = U_t diag(z_t) U_t^T`` (N x r_t) and runs the distributed
Lanczos algorithm on ``R_t = (1 - eta_t) Z_t + eta_t xi_t`` with
``xi_t = A_t A_t^T / D``. One step costs, per client, ``n_m`` words down (its part
of ``c_q``), ``D`` up (``A_t[m]^T c_q[m]``), ``D`` down (the sum) and ``n_m`` up
(``A_t[m] A_t^T c_q``): ``N + M D`` uploads, against ``M (D + r_t)`` with CEM
(Theorem 2 of 003). Used by the benchmark to measure that ratio and to check
that both versions follow the same recovery curve.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernelscale.features import RandomFourierFeatures
from kernelscale.federated.fkkmeans import DEFAULT_CHUNK_SIZE
from kernelscale.federated.lanczos import lanczos
from kernelscale.linalg import as_generator
from kernelscale.runtime import Cluster, Tagged, shared_seed, validate_cluster
from kernelscale.runtime.steps import worker_step


def _features(state):
    gamma, D, chunk, seed = state.plain_params
    rff = RandomFourierFeatures(state.data.shape[1], D, gamma, "rbf", seed)
    for start in range(0, state.data.shape[0], chunk):
        yield start, rff.transform(state.data[start : start + chunk], chunk_size=chunk)


@worker_step(discloses="nothing")
def plain_features_step(state, message, gamma, D, chunk_size):
    """Worker steps 6-9 without CEM: remember the seed of A_t (features rebuilt per step)."""
    state.plain_params = (gamma, D, chunk_size, int(message["seed"]))


@worker_step(discloses="per-row")
def at_c_step(state, c_part):
    """Worker: ``A_t[m]^T c_q[m]`` (D words)."""
    return sum(z.T @ c_part[start : start + z.shape[0]] for start, z in _features(state))


@worker_step(discloses="per-row")
def a_step(state, a):
    """Worker: ``A_t[m] (A_t^T c_q)`` (n_m words)."""
    return np.concatenate([z @ a for _, z in _features(state)])


@dataclass
class PlainDSPGDResult:
    """Per-iteration trace: ranks, Lanczos steps, words, and ``H_t`` (N x s) estimates."""

    threshold: float
    ranks: list
    lanczos_steps: list
    upload_words: list
    total_words: list
    estimates: list


def dspgd_without_cem(cluster: Cluster, n_clusters: int, n_eigenvectors: int, *, gamma: float,
                      n_random_features: int = 50, max_iter: int = 20,
                      lanczos_tol: float = 1e-8, chunk_size: int = DEFAULT_CHUNK_SIZE,
                      random_state=None) -> PlainDSPGDResult:
    """DSPGD of section 4.1 of 003 (no CEM); rows of ``H_t`` in worker order."""
    rng = as_generator(random_state)
    cluster.reset()
    info = validate_cluster(cluster)
    bounds = np.concatenate([[0], np.cumsum(info.n_rows)])
    U, z = np.zeros((info.n_samples, 0)), np.zeros(0)
    threshold = None
    ranks, steps, ups, totals, estimates = [], [], [], [], []
    for t in range(1, max_iter + 1):
        up0, tot0 = cluster.ledger.upload_words(), cluster.ledger.total_words()
        eta = 1.0 / t
        cluster.broadcast_map(plain_features_step, Tagged(seed=shared_seed(rng)), gamma,
                              n_random_features, chunk_size, round="plain: features")

        def matvec(c, eta=eta, U=U, z=z):
            parts = [(c[a:b],) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
            a_sum = cluster.scatter_map(at_c_step, parts, round="plain: A^T c", reduce="sum")
            local = cluster.broadcast_map(a_step, a_sum, round="plain: A A^T c")
            return eta * np.concatenate(local) + (1.0 - eta) * (U @ (z * (U.T @ c)))

        last = t == max_iter
        result = lanczos(matvec, info.n_samples,
                         n_wanted=max(n_clusters + 2 if t == 1 else 1,
                                      n_eigenvectors if last else 1),
                         threshold=None if t == 1 else eta * threshold, tol=lanczos_tol,
                         random_state=rng)
        theta, V = result.eigenvalues, result.eigenvectors
        if t == 1:
            threshold = float(theta[n_clusters + 1])
        keep = theta > eta * threshold
        U, z = V[:, keep], theta[keep] - eta * threshold
        s = min(n_eigenvectors, theta.size)
        estimates.append(V[:, :s] * np.sqrt(np.maximum(theta[:s], 0) + (1 - eta) * threshold))
        ranks.append(int(keep.sum()))
        steps.append(result.n_steps)
        ups.append(cluster.ledger.upload_words() - up0)
        totals.append(cluster.ledger.total_words() - tot0)
    return PlainDSPGDResult(threshold, ranks, steps, ups, totals, estimates)
