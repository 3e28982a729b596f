"""Kernel approximation errors of paper 004 (section 3), computed blockwise.

A method approximates the kernel matrix ``G`` of n points by ``G' = Y Y^T`` where
``Y`` (n x r) are its features of the points (``Z W`` for SKPCA, ``Z`` for RNCA,
``K_XS K_SS^-1/2`` for Nystrom). The errors are

* kernel spectral error ``||G - G'||_2 / n`` (the worst case), by Lanczos
  (``scipy.sparse.linalg.eigsh``) on a ``LinearOperator`` whose matvec walks
  ``G`` in row blocks, so ``G`` is never held (memory O(chunk_size * n));
* kernel Frobenius error ``||G - G'||_F / n^2`` (the global error), summed over
  the same row blocks.

On small data (n <= ``dense_below``) the spectral error is computed from the
dense difference, which is exact and faster than repeating the matvecs.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg as sla
from scipy.sparse.linalg import LinearOperator, eigsh
from threadpoolctl import threadpool_limits

from kernelscale.kernels import Kernel

DEFAULT_CHUNK = 2048
DENSE_BELOW = 3000


def _features_array(X, features) -> np.ndarray:
    Y = features(X) if callable(features) else np.asarray(features, dtype=np.float64)
    if Y.ndim != 2 or Y.shape[0] != X.shape[0]:
        raise ValueError(
            f"features must have one row per point ({X.shape[0]}), got shape {Y.shape}."
        )
    return Y


def _difference_block(X, Y, kernel: Kernel, start: int, stop: int) -> np.ndarray:
    # (G - Y Y^T)[start:stop, :] on two distinct buffers (no SYRK, DESIGN.md hazards)
    return kernel(X[start:stop], X) - Y[start:stop] @ Y.T


def kernel_spectral_error(
    X,
    kernel: Kernel,
    features: np.ndarray | Callable,
    chunk_size: int = DEFAULT_CHUNK,
    dense_below: int = DENSE_BELOW,
    tol: float = 1e-6,
    random_state: int = 0,
) -> float:
    """``||G - Y Y^T||_2 / n`` with ``G`` the exact kernel matrix of ``X``.

    Parameters
    ----------
    X : array or CSR matrix of shape (n, d)
        The points (training data or a held-out sample).
    kernel : Kernel
        The exact kernel (:func:`kernelscale.kernels.make_kernel`).
    features : ndarray of shape (n, r) or callable
        The method's features of ``X`` (or a function computing them from ``X``).
    chunk_size : int
        Rows of ``G`` formed at a time.
    dense_below : int
        Up to this n the difference is formed densely and ``eigvalsh`` is used;
        above it, Lanczos on blockwise matvecs (``G`` is never held).
    tol : float
        Relative tolerance of the Lanczos iteration.
    random_state : int
        Seed of the Lanczos start vector (the result is deterministic).

    Returns
    -------
    float
    """
    n = X.shape[0]
    Y = _features_array(X, features)
    if n <= dense_below:
        D = np.vstack([_difference_block(X, Y, kernel, s, min(s + chunk_size, n))
                       for s in range(0, n, chunk_size)])
        with threadpool_limits(1, user_api="blas"):  # threaded LAPACK stalls under load
            eig = sla.eigvalsh((D + D.T) / 2.0)
        return float(np.max(np.abs(eig))) / n

    def matvec(v):
        v = np.asarray(v, dtype=np.float64).ravel()
        out = np.empty(n)
        for start in range(0, n, chunk_size):
            stop = min(start + chunk_size, n)
            out[start:stop] = kernel(X[start:stop], X) @ v
        return out - Y @ (Y.T @ v)

    operator = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    v0 = np.random.default_rng(random_state).standard_normal(n)
    top = eigsh(operator, k=1, which="LM", tol=tol, v0=v0, return_eigenvectors=False)
    return float(abs(top[0])) / n


def kernel_frobenius_error(
    X, kernel: Kernel, features: np.ndarray | Callable, chunk_size: int = DEFAULT_CHUNK
) -> float:
    """``||G - Y Y^T||_F / n^2``, summed over row blocks of ``G`` (never held).

    Parameters are those of :func:`kernel_spectral_error`.
    """
    n = X.shape[0]
    Y = _features_array(X, features)
    total = 0.0
    for start in range(0, n, chunk_size):
        D = _difference_block(X, Y, kernel, start, min(start + chunk_size, n))
        total += float(np.einsum("ij,ij->", D, D))
    return float(np.sqrt(total)) / n**2


def streaming_space_words(
    method: str,
    n_features: int,
    n_random_features: int | None = None,
    sketch_size: int | None = None,
    n_landmarks: int | None = None,
) -> int:
    """Space in words of 004 (section 3): what each streaming method holds.

    ``skpca``: ``m d + m l``; ``rnca``: ``m^2 + m d``; ``nystrom``: ``c^2 + c d``.

    Parameters
    ----------
    method : {'skpca', 'rnca', 'nystrom'}
        The streaming method.
    n_features : int
        d.
    n_random_features : int, optional
        m (``skpca``, ``rnca``).
    sketch_size : int, optional
        l, the Frequent Directions rows (``skpca``).
    n_landmarks : int, optional
        c (``nystrom``).

    Returns
    -------
    words : int
        The words the method holds, whatever the stream's length.

    Examples
    --------
    >>> streaming_space_words("skpca", n_features=10, n_random_features=100, sketch_size=20)
    3000
    """
    d = n_features
    if method == "skpca":
        return n_random_features * d + n_random_features * sketch_size
    if method == "rnca":
        return n_random_features**2 + n_random_features * d
    if method == "nystrom":
        return n_landmarks**2 + n_landmarks * d
    raise ValueError(f"Unknown method {method!r}; choose 'skpca', 'rnca' or 'nystrom'.")
