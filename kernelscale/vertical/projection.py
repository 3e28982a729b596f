"""Out-of-sample projection as a distributed computation (equations (9), (10) of paper 002).

A new sample ``y`` is split over the parties like the training data: party ``j``
holds ``y_j``, its own features of ``y``. The projection on component ``c`` is
``sum_i V[i, c] k(x_i, y)`` (then centred and divided by ``sqrt(lambda_c)``, as
scikit-learn's ``KernelPCA.transform``):

* ``linear`` (eq. (9)): ``k(x_i, y) = sum_j <x_ij, y_j>``, so party ``j`` receives
  ``[V, 1]`` once and sends ``(V^T X_j^T y_j, 1^T X_j^T y_j)``, ``k + 1`` words per
  sample; the centre adds them up.
* ``rbf`` (eq. (10)) and ``laplacian``: party ``j`` sends its partial squared
  (respectively L1) distances ``||x_ij - y_j||`` to the ``n`` training samples, ``n``
  words per sample; the centre adds them and applies ``exp(-gamma .)``.
* ``poly``, ``sigmoid``: party ``j`` sends its partial inner products, the centre adds
  them and applies ``(gamma . + coef0) ** degree`` (``tanh(gamma . + coef0)``).
* ``chi2``: party ``j`` sends its partial additive chi2 sums
  ``-sum_f (x_f - y_f)^2 / (x_f + y_f)`` over its features, the centre adds them and
  applies ``exp(gamma .)``.

Runtime shape: the projection runs on a cluster whose party ``j`` holds its
features of the training samples (rows ``0 .. n-1``) followed by its features of
the new samples (rows ``n ..``): in a deployment the new rows arrive at each party
locally, so no input row is ever sent. The messages are counted under the phase
``"transform"`` (the validation of the blocks under ``"setup"``), and the new rows
are walked in chunks of ``chunk_size``, one round per chunk.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from kernelscale.kernels import DEFAULT_CHUNK_SIZE
from kernelscale.runtime import Cluster
from kernelscale.runtime.steps import worker_step
from kernelscale.vertical.oneshot import VerticalKPCAModel, validate_vertical


@worker_step(discloses="per-row")
def partial_linear_projection(state, n_fit: int, coefficients: np.ndarray, chunk_size: int):
    """Worker step (eq. (9) of 002): ``y_j^T X_j^T [V, 1]`` for every new sample ``y``."""
    train, new = state.data[:n_fit], state.data[n_fit:]
    weights = np.asarray(train.T @ coefficients)  # d_j x (k + 1)
    out = np.empty((new.shape[0], coefficients.shape[1]))
    for start in range(0, new.shape[0], chunk_size):
        out[start : start + chunk_size] = np.asarray(new[start : start + chunk_size] @ weights)
    return out


@worker_step(discloses="per-row")
def partial_kernel_statistic(state, n_fit: int, start: int, stop: int, statistic: str):
    """Worker step (eq. (10) of 002): partial distances or inner products, new x training."""
    train = state.data[:n_fit]
    new = state.data[n_fit + start : n_fit + stop]
    from sklearn.metrics.pairwise import (  # slow import: on first use
        additive_chi2_kernel,
        euclidean_distances,
        manhattan_distances,
    )

    if statistic == "sq_euclidean":
        return euclidean_distances(new, train, squared=True)
    if statistic == "manhattan":
        return manhattan_distances(new, train)
    if statistic == "additive_chi2":
        return additive_chi2_kernel(new, train)
    inner = new @ train.T
    return inner.toarray() if sp.issparse(inner) else np.asarray(inner)


STATISTIC = {"rbf": "sq_euclidean", "laplacian": "manhattan", "poly": "inner",
             "sigmoid": "inner", "chi2": "additive_chi2"}


def kernel_rows(kernel, total: np.ndarray) -> np.ndarray:
    """The kernel rows from the summed partial statistics (eq. (10) of 002 and its kin)."""
    if kernel.name == "poly":
        return (kernel.gamma * total + kernel.coef0) ** kernel.degree
    if kernel.name == "sigmoid":
        return np.tanh(kernel.gamma * total + kernel.coef0)
    if kernel.name == "chi2":
        return np.exp(kernel.gamma * total)
    return np.exp(-kernel.gamma * total)


def vertical_transform(
    cluster: Cluster, model: VerticalKPCAModel, chunk_size: int = DEFAULT_CHUNK_SIZE
) -> np.ndarray:
    """Project the new samples held by the parties on the fitted components.

    Parameters
    ----------
    cluster : Cluster
        Party ``j`` holds ``vstack([train_j, new_j])``: its features of the ``n``
        training samples, then of the new samples (same order on every party).
    model : VerticalKPCAModel
        The output of :func:`one_shot_kpca` on the training rows.
    chunk_size : int
        New samples per round (rbf, laplacian, poly).

    Returns
    -------
    ndarray of shape (n_new, n_components)
    """
    info = validate_vertical(cluster)
    n_fit = model.n_samples
    if info.block_sizes != tuple(model.block_sizes):
        raise ValueError(
            f"The parties hold blocks of {list(info.block_sizes)} features but the model "
            f"was fitted on blocks of {list(model.block_sizes)}."
        )
    n_new = info.n_samples - n_fit
    if n_new < 1:
        raise ValueError(
            f"The parties hold {info.n_samples} rows: the {n_fit} training rows must be "
            "followed by at least one new sample."
        )
    kernel = model.kernel
    with cluster.phase("transform"):
        if kernel.name == "linear":
            # Eq. (9): the parties project their own features, the centre adds up.
            coefficients = np.hstack([model.eigenvectors, np.full((n_fit, 1), 1.0 / n_fit)])
            total = cluster.broadcast_map(
                partial_linear_projection,
                n_fit,
                coefficients,
                int(chunk_size),
                round="partial projections",
                kind="model",
                reduce="sum",
            )
            product, row_means = total[:, :-1], total[:, -1]
            if model.center:
                product = model._centre_product(product, row_means)
            return product * model.inverse_sqrt_eigenvalues()
        # Eq. (10): partial distances (or inner products), summed, then the kernel.
        out = np.empty((n_new, model.n_components))
        for start in range(0, n_new, chunk_size):
            stop = min(start + chunk_size, n_new)
            total = cluster.broadcast_map(
                partial_kernel_statistic,
                n_fit,
                start,
                stop,
                STATISTIC[kernel.name],
                round=("partial inner products" if STATISTIC[kernel.name] == "inner"
                       else "partial distances"),
                kind="scalars",
                reduce="sum",
            )
            out[start:stop] = model.project_kernel_rows(kernel_rows(kernel, total))
        return out
