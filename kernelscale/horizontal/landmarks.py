"""Kernel PCA on landmarks the user gives: disLR or batch KPCA on Y, without sampling.

* :func:`landmark_dislr` - the best rank-k subspace of span(phi(Y)) for all the
  workers' data (disLR, Algorithm 3 of 001). Y is sent to every worker once,
  counted under the kind ``model``: these are the user's points, not the
  workers' data, so a fit sends no ``raw_points`` at all.
* :func:`landmark_batch` - exact kernel PCA of Y itself at the master (the
  'uniform_batch' baseline with Y in place of the uniform sample); the workers'
  data are validated but not used, and the fit sends nothing.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from kernelscale.horizontal.dislr import dislr
from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel
from kernelscale.linalg import as_generator
from kernelscale.model import KernelPCAModel
from kernelscale.runtime import Cluster, PartitionInfo, validate_cluster, worker_seeds
from kernelscale.runtime.validation import check_real

MESSAGES = ("gram", "sketch")


def check_landmarks(landmarks, n_features: int):
    """``landmarks`` as a float64 array or CSR matrix of ``n_features`` columns, or a ValueError.

    NaN or infinite values, a 1-D array, no rows and a feature count other than
    the data's are errors.
    """
    if landmarks is None:
        raise ValueError("landmarks must be an array (or CSR matrix) of points, got None.")
    from sklearn.utils.validation import check_array  # slow import: on first use
    check_real(landmarks, "landmarks")
    Y = check_array(landmarks, accept_sparse="csr", dtype=np.float64, input_name="landmarks")
    if Y.shape[1] != n_features:
        raise ValueError(
            f"landmarks have {Y.shape[1]} features but the data has {n_features}; "
            "give points of the same space."
        )
    return sp.csr_matrix(Y) if sp.issparse(Y) else Y


def _check_rank(info: PartitionInfo, n_components: int, n_landmarks: int) -> None:
    if int(n_components) != n_components or n_components < 1:
        raise ValueError(f"n_components must be a positive integer, got {n_components!r}.")
    if n_components > n_landmarks:
        raise ValueError(
            f"n_components={n_components} exceeds the {n_landmarks} landmarks: a rank-k "
            "subspace needs at least k landmarks."
        )
    if n_components > info.n_samples:
        raise ValueError(
            f"n_components={n_components} exceeds the number of samples ({info.n_samples})."
        )


def _prepare(cluster: Cluster, kernel: Kernel, landmarks, n_components: int):
    from kernelscale.horizontal.diskpca import check_kernel_input

    cluster.reset()
    info = validate_cluster(cluster)
    check_kernel_input(kernel, info)
    Y = check_landmarks(landmarks, info.n_features)
    if sp.issparse(Y) and not kernel.accepts_sparse:
        raise TypeError(f"The {kernel.name} kernel does not take sparse landmarks; "
                        "pass them as a dense array.")
    _check_rank(info, n_components, Y.shape[0])
    cluster.tolerate_lost_from_here()  # with lost="drop", a worker lost from here is left out
    return info, Y


def landmark_dislr(cluster: Cluster, kernel: Kernel, landmarks, n_components: int = 10,
                   messages: str = "gram", center: bool = False,
                   chunk_size: int = DEFAULT_CHUNK_SIZE, random_state=None,
                   eigensolver: dict | None = None, **_) -> KernelPCAModel:
    """disLR on the given landmarks: the best rank-k subspace of span(phi(Y)) for all data.

    Parameters
    ----------
    cluster : Cluster
    kernel : Kernel
        Any kernel: disLR evaluates it directly (no feature map needed).
    landmarks : array or CSR matrix of shape (n_landmarks, n_features)
        Y, sent to every worker (kind ``model``: |Y| d words per worker, dense,
        or 2 nnz for CSR).
    n_components : int
    messages : {'gram', 'sketch'}
        As in :func:`kernelscale.horizontal.diskpca`.
    center : bool
    chunk_size : int
    random_state : int, Generator or None
        Seeds the workers' sketches (``messages='sketch'``).
    eigensolver : dict, optional
        The master's eigensolver (:func:`kernelscale.eigensolvers.top_eigenpairs`'
        keyword arguments; default: LAPACK's dense solver).

    Returns
    -------
    KernelPCAModel
    """
    if messages not in MESSAGES:
        raise ValueError(f"messages must be one of {MESSAGES}, got {messages!r}.")
    from kernelscale.horizontal.diskpca import check_landmark_count

    rng = as_generator(random_state)
    info, Y = _prepare(cluster, kernel, landmarks, n_components)
    check_landmark_count(Y.shape[0], "uniform_dislr")
    model = dislr(cluster, Y, Y, kernel, n_components, info.n_samples, messages, center,
                  int(chunk_size), worker_seeds(rng, cluster.n_workers),
                  landmark_kind="model", eigensolver=eigensolver)
    model.info |= {"method": "landmarks_dislr", "messages": messages}
    return model


def landmark_batch(cluster: Cluster, kernel: Kernel, landmarks, n_components: int = 10,
                   center: bool = False, eigensolver: dict | None = None,
                   **_) -> KernelPCAModel:
    """Exact kernel PCA of the given landmarks at the master (no fit messages).

    The workers' partitions are validated (phase ``setup``) so that Y has their
    feature count; they take no part in the fit.

    Parameters
    ----------
    cluster : Cluster
        The workers (validated only).
    kernel : Kernel
        The kernel.
    landmarks : ndarray or CSR matrix of shape (n_landmarks, n_features)
        Y, the points whose kernel PCA is the model.
    n_components : int, default=10
        k.
    center : bool, default=False
        Centre Y in feature space.
    eigensolver : dict, optional
        The master's eigensolver (:func:`kernelscale.eigensolvers.top_eigenpairs`'
        keyword arguments; default: LAPACK's dense solver).

    Returns
    -------
    model : KernelPCAModel
        The kernel PCA of Y, projecting any point through ``k(Y, x)``.

    See Also
    --------
    landmark_dislr : The best subspace in span(phi(Y)) for all the data instead.
    """
    from kernelscale.horizontal.baselines import batch_kpca, check_batch_size

    _, Y = _prepare(cluster, kernel, landmarks, n_components)
    check_batch_size(Y.shape[0], "uniform_batch", "give fewer landmarks, or use "
                     "method='uniform_dislr' (disLR on the same landmarks)")
    model = batch_kpca(Y, kernel, n_components, center, eigensolver=eigensolver)
    model.info |= {"method": "landmarks_batch"}
    return model
