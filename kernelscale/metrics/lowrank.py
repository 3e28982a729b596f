"""Low-rank approximation error in the kernel feature space and its exact optimum.

For a rank-k subspace ``V`` of the feature space, the error of the papers is
``err = sum_a ||phi(a) - V V^T phi(a)||^2 = trace - captured`` with
``trace = sum_a k(a, a)`` and ``captured = sum_a ||V^T phi(a)||^2``. The optimum
``opt`` is the sum of all but the top k eigenvalues of the kernel matrix.

Centred models. The error of a centred model on data ``X`` (training data or
not) is that of its subspace ``V`` on ``X`` centred on its own feature-space
mean ``mu_X``::

    err = sum_a ||(phi(a) - mu_X) - V V^T (phi(a) - mu_X)||^2,
    trace = sum_a k(a, a) - n ||mu_X||^2,
    captured = sum_a ||V^T (phi(a) - mu_X)||^2 = sum_a ||t_a||^2 - n ||t_bar||^2,

where ``t_a = transform(a) = V^T (phi(a) - mu_train)`` and ``t_bar`` is their mean
over ``X`` (the shift ``V^T (mu_X - mu_train)`` cancels). This is what centred
kernel PCA of ``X`` minimises, so ``err >= opt`` of
``exact_kpca_reference(X, kernel, k, center=True)`` on any ``X``; on the
training data ``mu_X = mu_train`` and it is the model's reconstruction error.
(The reconstruction error through the training mean would need ``k(a, x)``
against every training point, which a model does not keep.) It needs
``||mu_X||^2`` of the evaluated data and the sum of the projections ``t_a``.

Two ratios are reported: the paper's ``err / opt`` and the excess-energy ratio
``(err - opt) / (trace - opt)``, the share of the best capturable energy that
the subspace misses. With a narrow RBF bandwidth the spectrum is flat, ``opt``
is close to ``trace`` and ``err / opt`` sits near 1.0 for every method; the
excess ratio still tells them apart.
"""

from __future__ import annotations

import numpy as np

from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel
from kernelscale.linalg import top_eigh
from kernelscale.memory import MemoryNeed, check_memory
from kernelscale.memory_plans import DECOMPOSITION_COPIES

EXACT_REFERENCE_MAX_SAMPLES = 20_000


def kernel_mean_norm_sq(X, kernel: Kernel, chunk_size: int = DEFAULT_CHUNK_SIZE) -> float:
    """``||mu||^2 = (1/n^2) sum_ij k(x_i, x_j)``, blockwise (O(n^2) time, O(n chunk) memory).

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        The points.
    kernel : Kernel
        The kernel.
    chunk_size : int, default=4096
        Rows per kernel block.

    Returns
    -------
    norm_sq : float
        The squared norm of the points' mean in feature space.
    """
    total = 0.0
    for start in range(0, X.shape[0], chunk_size):
        total += float(kernel(X[start : start + chunk_size], X).sum())
    return total / X.shape[0] ** 2


def exact_kpca_reference(X, kernel: Kernel, n_components: int, center: bool = False) -> dict:
    """Exact kernel PCA on the full kernel matrix (small data only).

    Parameters
    ----------
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        All the data, in one place (the kernel matrix is n x n).
    kernel : Kernel
        From :func:`~kernelscale.make_kernel`, or an estimator's ``kernel_``.
    n_components : int
        k.
    center : bool, default=False
        Centre the kernel matrix, as a centred model does.

    Returns
    -------
    dict with ``trace``, ``opt`` (the best rank-k error), ``eigenvalues`` (top k,
    descending), ``eigenvectors`` (n x k, unit norm) and ``n_samples``.
    """
    n = X.shape[0]
    if n > EXACT_REFERENCE_MAX_SAMPLES:
        raise ValueError(
            f"The exact reference needs the {n} x {n} kernel matrix; it is limited to "
            f"{EXACT_REFERENCE_MAX_SAMPLES} rows. Evaluate on a sample."
        )
    if n_components > n:
        raise ValueError(f"n_components={n_components} exceeds the {n} samples.")
    check_memory(MemoryNeed(f"the exact reference on {n:,} points", [(
        f"the {n:,} x {n:,} kernel matrix, centred and decomposed",
        DECOMPOSITION_COPIES * 8 * n * n)]), "evaluate on a sample (reference=False skips it)",
        note=False)
    K = kernel(X, X)
    if center:
        row_mean = K.mean(axis=0)
        K = K - row_mean[None, :] - row_mean[:, None] + row_mean.mean()
    K = (K + K.T) / 2.0
    trace = float(np.trace(K))
    w, V = top_eigh(K, n_components)
    return {
        "trace": trace,
        "opt": trace - float(w.sum()),
        "eigenvalues": w,
        "eigenvectors": V,
        "n_samples": n,
    }


def lowrank_error(model, X, center_norm_sq: float | None = None) -> dict:
    """Error of a fitted model on in-memory data ``X`` (no runtime; for small data).

    For a centred model the error is centred on ``X``'s own mean (module
    docstring); ``center_norm_sq = ||mu_X||^2`` of ``X`` may be passed when
    known (see :func:`kernel_mean_norm_sq`) and is computed from ``X`` otherwise.

    Parameters
    ----------
    model : object
        A fitted model (an estimator's ``model_``), a fitted estimator with
        ``model_``, or a fitted ``StreamingKernelPCA``.
    X : ndarray or CSR matrix of shape (n_samples, n_features)
        The points to measure the error on.
    center_norm_sq : float, optional
        ``||mu_X||^2``, for a centred model.

    Returns
    -------
    result : dict
        ``trace`` (the total energy), ``captured`` (the energy in the model's
        subspace), ``error`` (``trace - captured``) and ``n_samples``.

    See Also
    --------
    kernelscale.horizontal.distributed_error : The same through the workers.
    excess_energy_ratio : Compares ``error`` with the optimum.
    """
    diag_sum = float(model.diag(X).sum())
    projections = model.transform(X)
    captured = float(np.sum(projections**2))
    return error_from_sums(model, diag_sum, captured, X.shape[0], center_norm_sq, X,
                           projections.sum(axis=0))


def is_centred(model) -> bool:
    """Whether ``model`` subtracts a training mean (landmark ``center`` or feature ``mean``)."""
    return getattr(model, "center", None) is not None or getattr(model, "mean", None) is not None


def error_from_sums(model, diag_sum, captured, n, center_norm_sq=None, X=None,
                    projection_sum=None) -> dict:
    """Assemble ``{'trace', 'captured', 'error'}`` from the protocol's sums.

    ``diag_sum = sum_a k(a, a)``, ``captured = sum_a ||transform(a)||^2``. A centred
    model also needs ``center_norm_sq = ||mu_X||^2`` of the evaluated data (or
    ``X`` to compute it) and ``projection_sum = sum_a transform(a)``, which
    recentre both terms on the evaluated data's mean (module docstring). The
    values are Python ``float``.
    """
    trace = diag_sum
    if is_centred(model):
        if center_norm_sq is None:
            if X is None:
                raise ValueError("A centred model's error needs ||mu||^2 (center_norm_sq) "
                                 "of the evaluated data.")
            center_norm_sq = kernel_mean_norm_sq(X, model.kernel)
        if projection_sum is None:
            raise ValueError("A centred model's error needs the sum of the projections "
                             "(projection_sum).")
        trace -= n * center_norm_sq
        projection_sum = np.asarray(projection_sum, dtype=float)
        captured -= float(projection_sum @ projection_sum) / n
    trace, captured = float(trace), float(captured)  # Python floats, not numpy scalars
    return {"trace": trace, "captured": captured, "error": trace - captured}


def error_ratio(error: float, opt: float) -> float:
    """The paper's ``err / opt``; NaN when ``opt <= 0`` (data of rank <= k: no ratio).

    Parameters
    ----------
    error : float
        A method's low-rank error ``sum_a ||phi(a) - Pi phi(a)||^2``.
    opt : float
        The same for exact kernel PCA (:func:`exact_kpca_reference`).

    Returns
    -------
    ratio : float
        At least 1 on the training data; 1 is the optimum.

    See Also
    --------
    excess_energy_ratio : The measure the docs judge by (ratios hide differences).
    """
    return error / opt if opt > 0 else float("nan")


def excess_energy_ratio(error: float, opt: float, trace: float) -> float:
    """``(err - opt) / (trace - opt)``: 0 for the optimum, 1 for the empty subspace.

    The share of the energy that the best rank-k subspace captures which a method
    misses. Raw error ratios are close to 1 for every method (opt is most of the
    error), so this is the measure to compare methods by.

    Parameters
    ----------
    error : float
        A method's low-rank error.
    opt : float
        The best rank-k error (exact kernel PCA).
    trace : float
        The total energy ``sum_a k(a, a)`` (centred when the model is).

    Returns
    -------
    excess : float
        0 for exact kernel PCA, 1 for a subspace that captures nothing.

    See Also
    --------
    error_ratio : The papers' ``err / opt``.
    exact_kpca_reference : Computes ``opt`` and ``trace`` on small data.

    Examples
    --------
    >>> excess_energy_ratio(error=95.0, opt=90.0, trace=100.0)
    0.5
    """
    denom = trace - opt
    if denom <= 0:
        raise ValueError("trace - opt must be positive (is the kernel matrix zero?).")
    return (error - opt) / denom
