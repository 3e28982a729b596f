"""Kernel blocks on a device, through the array API.

A partition on a device (a CuPy array, a CUDA ``torch.Tensor``, ``array-api-strict``
in the tests; see :mod:`kernelscale.arrays`, which holds the array API helpers)
gets its kernel blocks and diagonals here, on its device and in its namespace:
:meth:`kernelscale.kernels.Kernel.__call__` and :meth:`~kernelscale.kernels.Kernel.diag`
dispatch to :func:`device_block` and :func:`device_diag` when ``X`` is a device
array. The formulas are those of the host path in :mod:`kernelscale.kernels`
(the same operations in the same order where the array API has them), so that
``array-api-strict`` reproduces the NumPy blocks. The kernels that scikit-learn
evaluates (chi2, additive_chi2, callables) have no device path.

This module reads the kernel's name and parameters only; it does not import
:mod:`kernelscale.kernels` (which imports it).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import scipy.sparse as sp

from kernelscale.arrays import device, is_device_array, namespace, rows, to_device_of

#: The kernels with a device path (the others are evaluated by scikit-learn on NumPy arrays).
DEVICE_KERNELS = ("rbf", "laplacian", "poly", "linear", "arccos", "sigmoid", "cosine")

#: J_n(0) of the arc-cosine kernel of order n (theta = 0 on the diagonal), on the host too.
ARCCOS_J0 = {0: np.pi, 1: np.pi, 2: 3.0 * np.pi}


class KernelParameters(Protocol):
    """What the device path reads of a :class:`kernelscale.kernels.Kernel`."""

    name: str
    gamma: float | None
    degree: int
    coef0: float
    order: int


def device_block(kernel: KernelParameters, X, Y, chunk_size: int, dtype):
    """``K[i, j] = k(X[i], Y[j])`` on X's device, walking X's rows in chunks.

    Parameters
    ----------
    kernel : Kernel
        A kernel of :func:`kernelscale.kernels.make_kernel` named in ``DEVICE_KERNELS``.
    X : array API array of shape (n_x, n_features)
        The rows, on their device.
    Y : array of shape (n_y, n_features)
        On X's device, or on the host (NumPy or CSR: it is moved to X's device).
    chunk_size : int
        Rows of X per block.
    dtype : float32, float64 or None
        The working precision (as :meth:`kernelscale.kernels.Kernel.__call__`).

    Returns
    -------
    K : array API array of shape (n_x, n_y)
        The kernel block, on X's device.
    """
    _require_device_path(kernel)
    xp = namespace(X)
    if sp.issparse(Y):
        Y = Y.toarray()
    if not is_device_array(Y):
        Y = to_device_of(np.asarray(Y), X)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X has {X.shape[1]} features but Y has {Y.shape[1]}; they must match.")
    both32 = X.dtype == xp.float32 and Y.dtype == xp.float32
    work = (xp.float32 if both32 else xp.float64) if dtype is None else (
        xp.float32 if np.dtype(dtype) == np.float32 else xp.float64)
    if kernel.name == "rbf" and work == xp.float32:
        # Shifted by Y's mean, as on the host (Kernel._caster).
        shift = xp.mean(xp.astype(Y, xp.float64), axis=0)
        cast = lambda R: xp.astype(xp.astype(R, xp.float64) - shift, xp.float32)  # noqa: E731
    else:
        cast = lambda R: R if R.dtype == work else xp.astype(R, work)  # noqa: E731
    Yw = cast(Y)
    y_sq = xp.sum(Yw * Yw, axis=1)
    if kernel.name == "rbf":
        disc = _discount(xp, work, Yw.shape[1])
        col = xp.reshape((-kernel.gamma * disc) * y_sq, (-1, 1))
        Y_aug = xp.concat([Yw, col, xp.ones_like(col)], axis=1)
        y_max = xp.max(y_sq) if y_sq.shape[0] else 0.0
        fmax = float(xp.finfo(work).max)

        def block_of(R):
            R = cast(R)
            x_sq = xp.sum(R * R, axis=1)
            if not R.shape[0]:
                return xp.empty((0, Yw.shape[0]), dtype=work, device=device(R))
            # One device-to-host scalar per chunk: the range check of Kernel.__call__.
            if 4.0 * kernel.gamma * float(xp.max(x_sq) + y_max) >= fmax:
                return _inner_block(kernel, xp, R, Yw, y_sq)
            x_col = xp.reshape((-kernel.gamma * disc) * x_sq, (-1, 1))
            X_aug = xp.concat([R * (2.0 * kernel.gamma), xp.ones_like(x_col), x_col], axis=1)
            exponent = X_aug @ Y_aug.T
            return xp.exp(xp.minimum(exponent, xp.zeros_like(exponent)))
    else:
        def block_of(R):
            return _inner_block(kernel, xp, cast(R), Yw, y_sq)
    if X.shape[0] <= chunk_size:
        return block_of(X)
    out = None
    for start in range(0, X.shape[0], chunk_size):
        stop = min(start + chunk_size, X.shape[0])
        block = block_of(rows(X, start, stop))
        if out is None:
            out = xp.empty((X.shape[0], Yw.shape[0]), dtype=block.dtype, device=device(X))
        out[start:stop, ...] = block
    return out


def _discount(xp, dtype, n_features: int) -> float:
    """``kernelscale.kernels._norm_discount`` for a device dtype."""
    eps = float(xp.finfo(dtype).eps)
    return float(1.0 - (2.0 * np.sqrt(n_features + 2.0) + 2.0) * eps)


def _inner_block(kernel: KernelParameters, xp, R, Y, y_sq):
    """The kernels built on inner products and distances (``Kernel._block`` on the host)."""
    if kernel.name == "laplacian":  # L1 distances, one feature at a time
        dist = xp.zeros((R.shape[0], Y.shape[0]), dtype=R.dtype, device=device(R))
        for f in range(R.shape[1]):
            dist = dist + xp.abs(R[:, f:f + 1] - xp.reshape(Y[:, f], (1, -1)))
        return xp.exp(-kernel.gamma * dist)
    inner = R @ Y.T
    if kernel.name == "linear":
        return inner
    if kernel.name == "poly":
        return (kernel.gamma * inner + kernel.coef0) ** kernel.degree
    if kernel.name == "sigmoid":
        return xp.tanh(kernel.gamma * inner + kernel.coef0)
    x_sq = xp.sum(R * R, axis=1)
    if kernel.name == "cosine":  # 0 for a zero row, as scikit-learn's cosine_similarity
        x_norm, y_norm = xp.sqrt(x_sq), xp.sqrt(y_sq)
        x_inv = xp.where(x_norm > 0, 1.0 / xp.where(x_norm > 0, x_norm, 1.0), 0.0)
        y_inv = xp.where(y_norm > 0, 1.0 / xp.where(y_norm > 0, y_norm, 1.0), 0.0)
        return inner * xp.reshape(x_inv, (-1, 1)) * xp.reshape(y_inv, (1, -1))
    if kernel.name == "rbf":
        disc = _discount(xp, R.dtype, R.shape[1])
        dist = (disc * xp.reshape(x_sq, (-1, 1)) + disc * xp.reshape(y_sq, (1, -1))
                - 2.0 * inner)
        gamma = min(kernel.gamma, float(xp.finfo(R.dtype).max))  # a huge gamma: exp(-inf) = 0
        return xp.exp(-gamma * xp.maximum(dist, xp.zeros_like(dist)))
    # arccos (Cho & Saul 2009), as kernelscale.kernels._arccos_block
    norms = xp.sqrt(xp.reshape(x_sq, (-1, 1)) * xp.reshape(y_sq, (1, -1)))
    positive = norms > 0
    cos = xp.where(positive, inner / xp.where(positive, norms, xp.ones_like(norms)), 1.0)
    cos = xp.clip(cos, -1.0, 1.0)
    theta = xp.acos(cos)
    sin = xp.sqrt(1.0 - cos**2)
    if kernel.order == 0:
        j = np.pi - theta
    elif kernel.order == 1:
        j = sin + (np.pi - theta) * cos
    else:
        j = 3.0 * sin * cos + (np.pi - theta) * (1.0 + 2.0 * cos**2)
    return norms**kernel.order * j / np.pi


def device_diag(kernel: KernelParameters, X):
    """:meth:`kernelscale.kernels.Kernel.diag` on X's device.

    Parameters
    ----------
    kernel : Kernel
        A kernel of :func:`kernelscale.kernels.make_kernel` named in ``DEVICE_KERNELS``.
    X : array API array of shape (n_samples, n_features)
        The rows, on their device.

    Returns
    -------
    diag : array API array of shape (n_samples,)
        ``k(x_i, x_i)``, on X's device.
    """
    _require_device_path(kernel)
    xp = namespace(X)
    work = X.dtype if X.dtype in (xp.float32, xp.float64) else xp.float64
    if kernel.name in ("rbf", "laplacian"):
        return xp.ones(X.shape[0], dtype=work, device=device(X))
    sq = xp.sum(X * X, axis=1)
    if kernel.name == "linear":
        return sq
    if kernel.name == "poly":
        return (kernel.gamma * sq + kernel.coef0) ** kernel.degree
    if kernel.name == "sigmoid":
        return xp.tanh(kernel.gamma * sq + kernel.coef0)
    if kernel.name == "cosine":
        return xp.astype(sq > 0, work)
    return sq**kernel.order * ARCCOS_J0[kernel.order] / np.pi


def _require_device_path(kernel: KernelParameters) -> None:
    """Refuse a kernel without a device path, saying what to do instead."""
    if kernel.name not in DEVICE_KERNELS:
        raise TypeError(
            f"The {kernel.name} kernel has no device path (scikit-learn evaluates it on "
            f"NumPy arrays); with partitions on a device use one of "
            f"{', '.join(DEVICE_KERNELS)}, or pass NumPy arrays.")
