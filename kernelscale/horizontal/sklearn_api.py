"""scikit-learn's ``KernelPCA`` API on the kernel PCA estimators.

What a user of ``sklearn.decomposition.KernelPCA`` brings: the eigensolver
parameters (``eigen_solver``, ``tol``, ``max_iter``, ``iterated_power``),
``remove_zero_eig``, ``n_components=None``, ``kernel='precomputed'`` and
``copy_X``, and the fitted attributes ``eigenvalues_``, ``eigenvectors_``,
``gamma_``, ``dual_coef_`` and ``X_fit_`` with scikit-learn's meanings. The
eigensolver parameters apply to the master's eigenproblem of every method
(:mod:`kernelscale.eigensolvers`); the precomputed kernel is the exact fit's
only ('exact': every point at the master).
"""

from __future__ import annotations

from dataclasses import dataclass
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils.validation import check_array

from kernelscale.constraints import Interval, StrOptions
from kernelscale.eigensolvers import EIGEN_SOLVERS
from kernelscale.horizontal.baselines import check_batch_size, kernel_matrix_kpca
from kernelscale.model import KernelPCAModel

#: ``n_landmarks=None`` without ``max_words``: the |Y| the fit chooses (its words
#: are the default fit's budget, within which the pilot may choose the method).
DEFAULT_N_LANDMARKS = 400

SKLEARN_PARAMETER_CONSTRAINTS: dict = {
    "eigen_solver": [StrOptions(set(EIGEN_SOLVERS))],
    "tol": [Interval(Real, 0, None, closed="left")],
    "max_iter": [Interval(Integral, 1, None, closed="left"), None],
    "iterated_power": [Interval(Integral, 0, None, closed="left"), StrOptions({"auto"})],
    "remove_zero_eig": ["boolean"],
    "copy_X": ["boolean"],
}


def eigensolver_options(estimator, rng) -> dict:
    """Keyword arguments of :func:`kernelscale.linalg.top_eigenpairs` from the parameters.

    An int or ``RandomState`` ``random_state`` goes to the eigensolver as it is, so
    ARPACK and the randomized solver draw what scikit-learn's ``KernelPCA`` draws
    for it (the same answer for the same ``random_state``); otherwise ``rng``.
    """
    state = estimator.random_state
    if not isinstance(state, (int, np.integer, np.random.RandomState)):
        state = rng
    return {"solver": estimator.eigen_solver, "tol": float(estimator.tol),
            "max_iter": estimator.max_iter, "iterated_power": estimator.iterated_power,
            "random_state": state}


@dataclass(frozen=True)
class PrecomputedKernel:
    """``kernel='precomputed'``: the rows given are already kernel values.

    ``kernel(K_rows, X_fit)`` returns ``K_rows`` (one column per training point):
    the landmark model of an exact fit on a kernel matrix then transforms new
    rows of kernel values ``k(x, X_fit)`` as any landmark model does.
    """

    name: str = "precomputed"
    gamma: None = None
    accepts_sparse = False
    has_feature_map = False

    def __call__(self, X, Y, chunk_size=None, dtype=None) -> np.ndarray:
        if X.shape[1] != Y.shape[0]:
            raise ValueError(
                f"With kernel='precomputed', X holds the kernel values against the "
                f"{Y.shape[0]} training points: it needs {Y.shape[0]} columns, not "
                f"{X.shape[1]}.")
        return np.array(X.toarray() if sp.issparse(X) else X, dtype=np.float64)

    def diag(self, X):
        raise ValueError("kernel='precomputed' holds no k(x, x) of new points; the "
                         "approximation error needs the kernel itself.")

    def to_dict(self) -> dict:
        raise ValueError("A model fitted on a precomputed kernel matrix cannot be saved: a "
                         "model file names its kernel, and this one is only the values "
                         "given to fit. Fit with the kernel itself (a name) to save the model.")


def check_precomputed(estimator, method: str | None) -> None:
    """Refuse, before any work, what a precomputed kernel matrix cannot do."""
    if estimator.fit_inverse_transform:
        raise ValueError("Cannot fit_inverse_transform with a precomputed kernel: the "
                         "pre-image map regresses the input points on their scores, and "
                         "a kernel matrix holds no input points.")
    if method not in (None, "exact"):
        raise ValueError(
            f"kernel='precomputed' works with method='exact' only, not {method!r}: the "
            "distributed methods send sampled points to the other workers and evaluate "
            "the kernel on them, which a matrix of kernel values computed elsewhere cannot "
            "do. Fit method='exact' on the kernel matrix, or give the data and the kernel "
            "(a name or a callable) to a distributed method.")
    for name in ("max_words", "landmarks"):
        if getattr(estimator, name) is not None:
            raise ValueError(f"kernel='precomputed' fits the exact kernel PCA of the given "
                             f"matrix at one place; {name}= does not apply to it.")


def validate_kernel_matrix(K, copy: bool) -> np.ndarray:
    """A square, finite, dense kernel matrix (copied when ``copy``)."""
    if isinstance(K, list) and K and not np.isscalar(K[0]) and (
            sp.issparse(K[0]) or getattr(K[0], "ndim", 1) == 2):
        raise ValueError("kernel='precomputed' takes one kernel matrix, not partitions: "
                         "the exact fit holds it at one place.")
    K = check_array(K, dtype=np.float64, copy=copy, ensure_min_samples=2)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"kernel='precomputed' fits on the n x n kernel matrix of the "
                         f"training points; got a {K.shape[0]} x {K.shape[1]} matrix.")
    check_batch_size(K.shape[0], "exact", "use a distributed method on the data itself")
    return K


def fit_precomputed(K: np.ndarray, n_components: int | None, center: bool,
                    eigensolver: dict, remove_zero_eig: bool) -> KernelPCAModel:
    """The exact kernel PCA of a precomputed kernel matrix, as a landmark model.

    Its landmarks are ``K`` itself (the training points, each as its row of
    kernel values), so ``model.transform(K_new)`` takes rows of ``k(x, X_fit)``.
    """
    model = kernel_matrix_kpca(np.array(K, dtype=np.float64, copy=True), K,
                               PrecomputedKernel(), n_components, center, eigensolver,
                               remove_zero_eig)
    model.info |= {"method": "exact", "kernel": "precomputed"}
    return model
