"""Linear algebra helpers shared by the algorithms.

Everything here is small dense algebra at the master, or chunked products at a
worker. Large symmetric products are formed chunk by chunk from two distinct
buffers, because numpy's bundled OpenBLAS computes a large ``A.T @ A`` / ``A @ A.T``
(SYRK) wrongly on this platform (DESIGN.md, "Known hazards").
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

GRAM_CHUNK = 4096


def as_generator(random_state) -> np.random.Generator:
    """A numpy Generator from an int, a Generator, a legacy RandomState or None."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(2**31))
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return np.random.default_rng(random_state)
    raise ValueError(
        f"random_state must be an int, a numpy Generator or None, got {random_state!r}."
    )


def gram(A, chunk_size: int = GRAM_CHUNK) -> np.ndarray:
    """``A.T @ A`` accumulated over row chunks, each product on two distinct buffers."""
    out = np.zeros((A.shape[1], A.shape[1]), dtype=np.float64)
    for start in range(0, A.shape[0], chunk_size):
        block = A[start : start + chunk_size]
        if sp.issparse(block):
            block = block.toarray()
        out += block.T @ np.array(block, dtype=np.float64, copy=True)
    return out


def pack_symmetric(S: np.ndarray) -> np.ndarray:
    """The upper triangle of a symmetric matrix: n(n+1)/2 words on the wire."""
    return S[np.triu_indices(S.shape[0])]


def unpack_symmetric(packed: np.ndarray, n: int) -> np.ndarray:
    """Inverse of :func:`pack_symmetric`."""
    S = np.zeros((n, n))
    S[np.triu_indices(n)] = packed
    return S + np.triu(S, 1).T


def thresholded_eigh(S: np.ndarray, rtol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """Eigenpairs of a PSD matrix with eigenvalues above ``rtol * max``, descending."""
    w, V = sla.eigh((S + S.T) / 2.0)
    order = np.argsort(w)[::-1]
    w, V = w[order], V[:, order]
    keep = w > rtol * max(w[0], 0.0) if w.size and w[0] > 0 else np.zeros(w.size, bool)
    return w[keep], V[:, keep]


def whitening(S: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """``F`` with ``F.T @ S @ F = I`` on the numerical range of the PSD matrix ``S``.

    This is the stable factor used wherever the papers write ``R^-1`` of a
    Cholesky factor: for a kernel matrix ``K_YY`` the columns of ``phi(Y) F`` are
    an orthonormal basis of span(phi(Y)). Duplicated or nearly dependent points
    make ``K_YY`` singular; their directions fall below the relative threshold
    and are dropped instead of inverted.
    """
    w, V = thresholded_eigh(S, rtol)
    return V / np.sqrt(w)


def ridge_whitening(S: np.ndarray, ridge: float, rtol: float = 1e-10) -> np.ndarray:
    """``F`` with ``F @ F.T = (S + ridge I)^-1`` for a PSD ``S`` and ``ridge > 0``.

    Then ``||k(a, P) F||^2 = k(a, P) (K_PP + ridge I)^-1 k(P, a)``. With
    ``ridge = 0`` it is :func:`whitening` (the pseudo-inverse on the numerical
    range); with ``ridge > 0`` nothing is singular and every direction is kept.
    """
    if ridge < 0 or not np.isfinite(ridge):
        raise ValueError(f"ridge must be finite and >= 0, got {ridge!r}.")
    if ridge == 0:
        return whitening(S, rtol)
    w, V = sla.eigh((S + S.T) / 2.0)
    return V / np.sqrt(np.maximum(w, 0.0) + ridge)


def ridge_factor(S: np.ndarray, ridge: float) -> np.ndarray | None:
    """Lower-triangular ``G`` with ``G.T @ G = (S + ridge I)^-1``, or None.

    ``G = L^-1`` for the Cholesky factor ``L`` of ``S + ridge I``: the same
    residuals as :func:`ridge_whitening` (``||G k||^2 = ||F.T k||^2``) for a
    tenth of its cost: ``projected_sq_norms(block, G.T)``. None when
    ``ridge <= 0`` or ``S + ridge I`` is not numerically positive definite (use
    :func:`ridge_whitening` then).
    """
    if not ridge > 0 or not np.isfinite(ridge):
        return None
    n = S.shape[0]
    try:
        L = sla.cholesky((S + S.T) / 2.0 + ridge * np.eye(n), lower=True)
    except np.linalg.LinAlgError:
        return None
    return sla.solve_triangular(L, np.eye(n), lower=True)


def projected_sq_norms(block: np.ndarray, basis: np.ndarray) -> np.ndarray:
    """``||block[i] @ basis||^2`` for every row.

    A GEMM even when ``basis`` is triangular (:func:`ridge_factor`): numpy's
    matmul releases the GIL, so row chunks on a thread pool use every core,
    while SciPy's TRMM wrapper holds it and runs the chunks one at a time.
    """
    proj = block @ basis
    return np.einsum("ij,ij->i", proj, proj)


def whitening_from_rows(B: np.ndarray, rtol: float = 1e-10) -> np.ndarray:
    """``F`` with ``(B F).T (B F) = I``: the same as ``whitening(B.T @ B)`` without SYRK.

    Used for stacked sketches: the paper QR-factorises ``[E_1 T_1, ..., E_s T_s]``;
    the right singular vectors scaled by the inverse singular values give the
    same scores and tolerate rank deficiency.
    """
    _, s, Vt = sla.svd(B, full_matrices=False)
    keep = s > np.sqrt(rtol) * s[0] if s.size and s[0] > 0 else np.zeros(s.size, bool)
    return Vt[keep].T / s[keep]


def triangular_whitening(F: np.ndarray) -> np.ndarray:
    """An upper-trapezoidal ``R`` (r x t) with ``R.T @ R == F @ F.T`` for a whitener ``F`` (t x r).

    ``||R x||^2 = ||F.T x||^2`` for every ``x``: the scores a whitener gives, from
    a triangular factor. This is the paper's ``Z`` of Algorithm 1 (001), line 2,
    made tolerant of rank deficiency: with ``F`` from :func:`whitening` (or
    :func:`whitening_from_rows`), directions below the eigenvalue threshold are
    dropped instead of inverted, and ``R`` has one row per kept direction. It
    is the ``R`` of the QR factorisation of ``F.T``; on the wire it costs
    ``r t - r (r - 1) / 2`` words (:func:`pack_trapezoidal`), ``t (t + 1) / 2`` at
    full rank.
    """
    if F.shape[1] == 0:
        return np.zeros((0, F.shape[0]))
    return sla.qr(F.T, mode="r")[0]


def pack_trapezoidal(R: np.ndarray) -> np.ndarray:
    """The upper trapezoid of an r x t matrix (r <= t): ``r t - r (r - 1) / 2`` words."""
    r, t = R.shape
    if r > t:
        raise ValueError(f"An upper-trapezoidal factor has at most as many rows as columns, "
                         f"got {r} x {t}.")
    return R[np.triu_indices(r, m=t)]


def unpack_trapezoidal(packed: np.ndarray, n_columns: int) -> np.ndarray:
    """Inverse of :func:`pack_trapezoidal`; the number of rows follows from the length."""
    t, length = int(n_columns), int(np.asarray(packed).size)
    # r t - r (r - 1) / 2 = length  <=>  r^2 - (2 t + 1) r + 2 length = 0, r <= t
    r = int(round(((2 * t + 1) - np.sqrt((2 * t + 1) ** 2 - 8 * length)) / 2))
    if r < 0 or r > t or r * t - r * (r - 1) // 2 != length:
        raise ValueError(f"{length} words are not an upper-trapezoidal factor with "
                         f"{t} columns.")
    R = np.zeros((r, t), dtype=np.asarray(packed).dtype)
    R[np.triu_indices(r, m=t)] = packed
    return R


def top_eigh(S: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` eigenpairs of a symmetric matrix, descending, with fixed signs.

    Always ``min(k, n)`` pairs. LAPACK's ``syevr`` (scipy's default driver for a
    subset) can return fewer than asked when the top eigenvalues are nearly equal
    (scipy issue 13913: a kernel matrix close to the identity came back with 4 of
    10); the full decomposition (``syevd``) is then taken instead.
    """
    n = S.shape[0]
    k = min(k, n)
    S = (S + S.T) / 2.0
    w, V = sla.eigh(S, subset_by_index=[n - k, n - 1])
    if w.size < k:
        w, V = sla.eigh(S, driver="evd")
        w, V = w[n - k:], V[:, n - k:]
    return w[::-1], flip_signs(V[:, ::-1])


def top_left_singular(B: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top ``k`` left singular vectors and squared singular values of ``B``, signs fixed."""
    U, s, _ = sla.svd(B, full_matrices=False)
    k = min(k, U.shape[1])
    return s[:k] ** 2, flip_signs(U[:, :k])


def flip_signs(U: np.ndarray) -> np.ndarray:
    """Columns of ``U`` signed so that each one's largest entry in magnitude is positive.

    scikit-learn's ``svd_flip(U, V, u_based_decision=True)`` on ``U`` alone
    (without importing scikit-learn, seconds on a loaded machine).
    """
    U = np.array(U, copy=True)
    if U.size == 0:
        return U
    signs = np.sign(U[np.argmax(np.abs(U), axis=0), np.arange(U.shape[1])])
    U *= signs[np.newaxis, :]
    return U


def like_input(Z: np.ndarray, X) -> np.ndarray:
    """``Z`` in the floating dtype of the input ``X``, as scikit-learn's transformers do.

    float32 input gives float32 output (computed in float64 and rounded once);
    anything else gives float64.
    """
    dtype = np.float32 if getattr(X, "dtype", None) == np.float32 else np.float64
    return np.asarray(Z, dtype=dtype)


def preserved_dtypes(tags):
    """Declare in scikit-learn's tags that float32 and float64 input keep their dtype."""
    tags.transformer_tags.preserves_dtype = ["float64", "float32"]
    return tags


def unique_rows(Y, tol: float = 0.0) -> np.ndarray:
    """Indices of the first occurrence of each distinct row (dense or CSR)."""
    dense = Y.toarray() if sp.issparse(Y) else np.asarray(Y)
    _, first = np.unique(dense, axis=0, return_index=True)
    return np.sort(first)
