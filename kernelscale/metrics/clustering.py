"""Clustering metrics: NMI (scikit-learn's) and the kernel k-means objective in feature space."""

from __future__ import annotations

import numpy as np

from kernelscale.kernels import Kernel

__all__ = ["kernel_kmeans_objective", "nmi"]


def nmi(labels_true, labels_pred) -> float:
    """Normalized mutual information (Strehl & Ghosh 2002), scikit-learn's implementation.

    Parameters
    ----------
    labels_true : array-like of shape (n_samples,)
        The true classes.
    labels_pred : array-like of shape (n_samples,)
        The clusters found.

    Returns
    -------
    score : float
        1 for a perfect match, 0 for independent labellings.
    """
    from sklearn.metrics import normalized_mutual_info_score  # slow import: on first use
    return float(normalized_mutual_info_score(labels_true, labels_pred))


def kernel_kmeans_objective(X, labels, kernel: Kernel, chunk_size: int = 2048,
                            normalize: bool = True) -> float:
    """Kernel k-means cost ``sum_i ||phi(x_i) - mu_{c(i)}||^2`` through the kernel trick.

    ``||phi(x) - mu_c||^2 = k(x, x) - 2/|c| sum_{j in c} k(x, x_j)
    + 1/|c|^2 sum_{j, l in c} k(x_j, x_l)``: equation (1) of paper 003,
    ``Tr(K) - Tr(L^1/2 Y^T K Y L^1/2)``. Kernel blocks are formed ``chunk_size``
    rows at a time, so memory is ``O(chunk_size n)``, never ``n x n``.

    Parameters
    ----------
    X : array or CSR of shape (n_samples, n_features)
    labels : array of shape (n_samples,)
    kernel : Kernel
    chunk_size : int
    normalize : bool
        Divide by ``n_samples`` (the average distance to the centres, as in 001 6.6).

    Returns
    -------
    float
    """
    labels = np.asarray(labels)
    if labels.shape[0] != X.shape[0]:
        raise ValueError(f"labels has {labels.shape[0]} entries for {X.shape[0]} samples.")
    _, codes = np.unique(labels, return_inverse=True)
    n_clusters = int(codes.max()) + 1
    sizes = np.bincount(codes, minlength=n_clusters).astype(np.float64)
    onehot = np.zeros((X.shape[0], n_clusters))
    onehot[np.arange(X.shape[0]), codes] = 1.0
    # S[i, c] = sum_{j in c} k(x_i, x_j), accumulated over column chunks of K
    S = np.zeros((X.shape[0], n_clusters))
    for start in range(0, X.shape[0], chunk_size):
        stop = min(start + chunk_size, X.shape[0])
        S += kernel(X, X[start:stop]) @ onehot[start:stop]
    within = np.einsum("ic,ic->c", onehot, S)  # sum_{j,l in c} k(x_j, x_l)
    cost = float(kernel.diag(X).sum() - np.sum(within / sizes))
    return cost / X.shape[0] if normalize else cost
