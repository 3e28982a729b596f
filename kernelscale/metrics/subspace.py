"""Distances between subspaces: sin-theta distances and the projector error of paper 002.

Subspaces are given by basis matrices whose *columns* span them (``V`` of shape
``(d, k)``). Bases need not be orthonormal: each is orthonormalised first (an SVD
that drops directions below a relative tolerance), so ``U_hat`` may be any
estimate, as in paper 002's ``U_hat^T (U_hat U_hat^T)^{-1} U_hat``.
"""

from __future__ import annotations

import numpy as np


def orthonormal_basis(V, rtol: float = 1e-12) -> np.ndarray:
    """An orthonormal basis (d x r) of the column span of ``V`` (d x k)."""
    V = np.asarray(V, dtype=float)
    if V.ndim == 1:
        V = V[:, None]
    if V.ndim != 2 or V.shape[1] == 0:
        raise ValueError(f"A basis must be a 2-D array with at least one column, got {V.shape}.")
    if not np.all(np.isfinite(V)):
        raise ValueError("A basis holds NaN or infinite values.")
    U, s, _ = np.linalg.svd(V, full_matrices=False)
    if s.size == 0 or s[0] == 0:
        raise ValueError("A basis of zeros spans no subspace.")
    return U[:, s > rtol * s[0]]


def principal_angle_sines(V, V_hat) -> np.ndarray:
    """``sin(theta_i)`` of the principal angles between ``span(V)`` and ``span(V_hat)``.

    With ``alpha_i`` the singular values of ``Q^T Q_hat`` (orthonormal bases),
    ``sin theta_i = sqrt(1 - alpha_i^2)`` (eq. (11) of 002); descending.
    """
    Q, Q_hat = orthonormal_basis(V), orthonormal_basis(V_hat)
    if Q.shape[0] != Q_hat.shape[0]:
        raise ValueError(
            f"The bases live in different spaces: {Q.shape[0]} rows against {Q_hat.shape[0]}."
        )
    if Q.shape[1] != Q_hat.shape[1]:
        raise ValueError(
            f"The subspaces have different dimensions {Q.shape[1]} and {Q_hat.shape[1]}."
        )
    cosines = np.clip(np.linalg.svd(Q.T @ Q_hat, compute_uv=False), 0.0, 1.0)
    return np.sort(np.sqrt(1.0 - cosines**2))[::-1]


def sin_theta_distance(V, V_hat, norm: str = "fro") -> float:
    """``||sin Theta(V, V_hat)||`` in the Frobenius (``'fro'``) or spectral (``'spectral'``) norm.

    Parameters
    ----------
    V, V_hat : ndarray of shape (n, k)
        Bases of the two subspaces (orthonormalised here).
    norm : {'fro', 'spectral'}, default='fro'
        Which norm of the sines of the principal angles.

    Returns
    -------
    distance : float
        0 for the same subspace; at most ``sqrt(k)`` (Frobenius) or 1 (spectral).

    Examples
    --------
    >>> import numpy as np
    >>> round(sin_theta_distance(np.eye(3)[:, :1], np.array([[1.0], [1.0], [0.0]])), 6)
    0.707107
    """
    sines = principal_angle_sines(V, V_hat)
    if norm == "fro":
        return float(np.sqrt(np.sum(sines**2)))
    if norm == "spectral":
        return float(sines.max())
    raise ValueError(f"Unknown norm {norm!r}; choose 'fro' or 'spectral'.")


def projector_error(U, U_hat) -> float:
    """Paper 002's error ``||U_hat (U_hat^T U_hat)^{-1} U_hat^T - U U^T||_F^2`` (columns = basis).

    Computed from orthonormal bases without forming any d x d projector:
    ``||P_hat - P||_F^2 = r_hat + r - 2 ||Q^T Q_hat||_F^2``. For subspaces of the
    same dimension it equals ``2 ||sin Theta||_F^2``.

    Parameters
    ----------
    U, U_hat : ndarray of shape (n, r) and (n, r_hat)
        Bases of the two subspaces, one vector per column (orthonormalised here).

    Returns
    -------
    error : float
        0 for the same subspace.

    See Also
    --------
    sin_theta_distance : The principal-angle distance.
    """
    Q, Q_hat = orthonormal_basis(U), orthonormal_basis(U_hat)
    if Q.shape[0] != Q_hat.shape[0]:
        raise ValueError(
            f"The bases live in different spaces: {Q.shape[0]} rows against {Q_hat.shape[0]}."
        )
    overlap = float(np.sum((Q.T @ Q_hat) ** 2))
    return max(Q.shape[1] + Q_hat.shape[1] - 2.0 * overlap, 0.0)


__all__ = ["orthonormal_basis", "principal_angle_sines", "projector_error", "sin_theta_distance"]
