"""Checks between ``DistributedKernelPCA``'s parameters, before any work starts.

Each parameter alone is checked by scikit-learn's ``_parameter_constraints``;
what depends on two of them (a kernel against a method, landmarks against a
budget) is checked here, with a message that says what to use instead.
"""

from __future__ import annotations

from kernelscale.callables import is_importable
from kernelscale.horizontal.baselines import (
    exact_kpca,
    random_features_pca,
    uniform_batch,
    uniform_dislr,
)
from kernelscale.horizontal.diskpca import diskpca
from kernelscale.horizontal.sklearn_api import check_precomputed
from kernelscale.kernels import KERNELS, kernel_name

METHODS = {
    "diskpca": diskpca,
    "uniform_dislr": uniform_dislr,
    "uniform_batch": uniform_batch,
    "exact": exact_kpca,
    "random_features": random_features_pca,
}
#: Methods that need a random feature map of the kernel (``KERNELS`` have one).
FEATURE_MAP_METHODS = ("diskpca", "random_features")
#: Methods that evaluate the kernel directly, so any kernel (or callable) works.
DIRECT_KERNEL_METHODS = ("uniform_dislr", "uniform_batch", "exact")
#: Methods that take ``landmarks=`` (disLR or batch KPCA on them, without sampling).
LANDMARK_METHODS = ("diskpca", "uniform_dislr", "uniform_batch")
#: Methods whose model holds landmarks, whose scores are the pre-image map's centres.
INVERSE_METHODS = ("diskpca", "uniform_dislr", "uniform_batch", "exact")


def _quoted(names) -> str:
    return ", ".join(repr(n) for n in names)


def check_parameters(estimator) -> None:
    """Raise a ``ValueError`` for parameters that cannot work together."""
    if estimator.kernel == "precomputed":
        check_precomputed(estimator, estimator.method)
        return
    if estimator.n_components is None and estimator.method != "exact":
        raise ValueError(
            "n_components=None keeps every component of non-zero eigenvalue of the "
            "exact kernel matrix: it needs method='exact' (or kernel='precomputed'). "
            f"The distributed methods (method={estimator.method!r}) size their messages "
            "by k: give n_components as an int.")
    method = estimator.method or "diskpca"
    name = kernel_name(estimator.kernel)
    uses_landmarks = estimator.landmarks is not None
    if estimator.max_words is not None:
        if uses_landmarks:
            raise ValueError("max_words chooses the landmarks within the budget; give "
                             "either max_words or landmarks, not both.")
        if estimator.method is None:
            method = "uniform_dislr"  # the plan needs no feature map from the kernel
    if uses_landmarks and method not in LANDMARK_METHODS:
        raise ValueError(
            f"method={method!r} takes no landmarks; landmarks= works with the "
            f"methods {_quoted(LANDMARK_METHODS)}."
        )
    needs_map = method in FEATURE_MAP_METHODS and not (
        uses_landmarks and method == "diskpca")
    if needs_map and name not in KERNELS:
        kernel = "a callable kernel" if name == "callable" else f"kernel={estimator.kernel!r}"
        raise ValueError(
            f"method={method!r} needs a random feature map of the kernel, which "
            f"{kernel} does not have (only {_quoted(KERNELS)} do). Use one of the "
            f"methods that evaluate the kernel directly: {_quoted(DIRECT_KERNEL_METHODS)}."
        )
    if (name == "callable" and estimator.backend == "dask" and not is_importable(estimator.kernel)
            and method not in ("uniform_batch", "exact")):
        raise ValueError(
            f"method={method!r} evaluates the kernel on the Dask workers, which "
            "receive a callable kernel by its import path (module:qualname); this one "
            "(a lambda, a local function or one of __main__) has none. Define it at "
            "module level in a module the workers can import, use backend='local', or "
            "method='uniform_batch' or 'exact' (the kernel runs at the master only)."
        )
    if estimator.fit_inverse_transform:
        if method not in INVERSE_METHODS:
            raise ValueError(
                f"fit_inverse_transform=True learns the pre-image map with the "
                f"landmarks' scores as its centres; method={method!r} has no landmarks. "
                f"Use one of {_quoted(INVERSE_METHODS)}."
            )
        if name in ("chi2", "additive_chi2"):
            raise ValueError(
                f"fit_inverse_transform=True evaluates the kernel on the scores, which "
                f"can be negative; the {name} kernel takes non-negative inputs only."
            )
