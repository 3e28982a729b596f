"""The distributed Lanczos algorithm (DLA) as a master loop (Algorithm 2 and appendix B of 003).

Only the product ``g = R c_q`` is distributed: the caller passes ``matvec``, which
runs one or two runtime rounds (with CEM, every worker returns
``W_t[m]^T W_t[m] c_q`` and the master sums them). Everything else (the
three-term recurrence, the full reorthogonalisation, the Rayleigh-Ritz step on
the tridiagonal ``T_q``) runs at the master, so the words of one step are those
of ``matvec`` alone.

Convergence (appendix B of 003): DLA stops when every Ritz value above a
threshold (``eta_t lambda``) has converged, rather than after a fixed number of
steps ``Q``. We also require the first Ritz value below the threshold to have
converged, so that no eigenvalue above it is missed, and at least ``n_wanted``
converged pairs. A Ritz pair ``(theta_i, C_q p_i)`` has residual
``|beta_q p_i[q]|``; it counts as converged below ``tol * theta_1``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from kernelscale.linalg import as_generator


@dataclass
class LanczosResult:
    """Ritz pairs of the symmetric operator, largest first.

    Attributes
    ----------
    eigenvalues : ndarray of shape (r,)
    eigenvectors : ndarray of shape (dim, r)
        Orthonormal columns ``C_q P_q``.
    n_steps : int
        Number of matrix-vector products (Lanczos steps ``q``).
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    n_steps: int


def _n_needed(theta, n_wanted, threshold):
    need = n_wanted
    if threshold is not None:
        need = max(need, int(np.count_nonzero(theta > threshold)) + 1)
    return need


def lanczos(
    matvec: Callable[[np.ndarray], np.ndarray],
    dim: int,
    *,
    n_wanted: int = 1,
    threshold: float | None = None,
    max_steps: int | None = None,
    tol: float = 1e-8,
    random_state=None,
) -> LanczosResult:
    """Top eigenpairs of a symmetric PSD operator known only through ``matvec``.

    Parameters
    ----------
    matvec : callable
        ``c -> R c`` for vectors of length ``dim`` (one distributed round).
    dim : int
        Size of ``R``.
    n_wanted : int
        Minimum number of converged Ritz pairs.
    threshold : float or None
        Also converge every Ritz value above it, and the next one.
    max_steps : int or None
        At most this many steps (default ``dim``: the Krylov space is exhausted).
    tol : float
        Relative residual tolerance.
    random_state : int, Generator or None
        Start vector ``c_1``.

    Returns
    -------
    LanczosResult
        The converged Ritz pairs, at least ``min(n_wanted, dim)`` of them.
    """
    if dim < 1:
        raise ValueError(f"dim must be positive, got {dim}.")
    max_steps = dim if max_steps is None else min(int(max_steps), dim)
    rng = as_generator(random_state)
    basis = np.zeros((dim, max_steps))
    alphas, betas = [], []
    c = rng.standard_normal(dim)
    c /= np.linalg.norm(c)
    c_prev, beta_prev = np.zeros(dim), 0.0
    theta, P = np.zeros(0), np.zeros((0, 0))
    for q in range(max_steps):
        basis[:, q] = c
        # Step 5 of Algorithm 2: g = R c_q (the only distributed operation).
        g = np.asarray(matvec(c), dtype=np.float64)
        alpha = float(c @ g)
        g = g - alpha * c - beta_prev * c_prev
        # Full reorthogonalisation, twice (equation (3) of 003).
        for _ in range(2):
            g -= basis[:, : q + 1] @ (basis[:, : q + 1].T @ g)
        beta = float(np.linalg.norm(g))
        alphas.append(alpha)
        # Steps 12-14: Rayleigh-Ritz on the tridiagonal T_q.
        theta, P = sla.eigh_tridiagonal(np.array(alphas), np.array(betas))
        theta, P = theta[::-1], P[:, ::-1]
        need = _n_needed(theta, n_wanted, threshold)
        scale = max(abs(theta[0]), np.finfo(float).tiny)
        converged = need <= q + 1 and np.all(np.abs(beta * P[-1, :need]) <= tol * scale)
        if converged or beta <= 1e-12 * scale or q + 1 == max_steps:
            break
        betas.append(beta)
        c_prev, c, beta_prev = c, g / beta, beta
    n_steps = len(alphas)
    keep = min(_n_needed(theta, n_wanted, threshold), n_steps)
    vectors = basis[:, :n_steps] @ P[:, :keep]
    return LanczosResult(theta[:keep], vectors, n_steps)
