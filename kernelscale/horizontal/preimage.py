"""The learnt pre-image map of kernel PCA (Bakir, Weston, Schoelkopf 2004), as scikit-learn's.

Kernel ridge regression from the scores back to input space: with ``S`` the
scores of the points ``Y`` and ``k`` the model's kernel (applied to scores),
``B = (k(S, S) + alpha I)^-1 Y`` and ``preimage(Z) = k(Z, S) B``. scikit-learn's
``KernelPCA`` learns it from all its training points; a distributed fit learns
it at the master from what it already holds, the landmarks and their scores,
so it costs no communication: the |Y| x |Y| kernel of the scores and one solve
(O(|Y|^2 k + |Y|^3 + |Y|^2 d) time, |Y|^2 + |Y| d floats).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel


def fit_preimage(kernel: Kernel, scores: np.ndarray, points, alpha: float,
                 chunk_size: int = DEFAULT_CHUNK_SIZE) -> np.ndarray:
    """``B = (k(S, S) + alpha I)^-1 Y``: the ridge coefficients (n_points, n_features)."""
    K = kernel(scores, scores, chunk_size=chunk_size)
    K.flat[:: K.shape[0] + 1] += alpha
    targets = points.toarray() if sp.issparse(points) else np.asarray(points, dtype=np.float64)
    try:
        return sla.solve(K, targets, assume_a="pos")
    except sla.LinAlgError:  # a kernel that is not positive definite (sigmoid)
        return sla.solve(K, targets, assume_a="sym")


def apply_preimage(kernel: Kernel, scores: np.ndarray, coef: np.ndarray, Z,
                   chunk_size: int = DEFAULT_CHUNK_SIZE) -> np.ndarray:
    """``k(Z, S) B``: points in input space for the scores ``Z``."""
    return kernel(Z, scores, chunk_size=chunk_size) @ coef
