"""A fitted ``DistributedKernelPCA`` in a model file (:mod:`kernelscale.model_registry`).

The file keeps ``model_`` (a :class:`~kernelscale.model.KernelPCAModel` or
:class:`~kernelscale.model.RandomFeaturePCAModel`), ``method_``,
``lost_workers_`` and the pre-image map; every other fitted attribute follows
from ``model_`` (:func:`attributes_from_model`).
"""

from __future__ import annotations

from kernelscale.model import energy_shares, model_from_arrays, model_to_arrays

#: The pre-image map (``fit_inverse_transform=True``): arrays kept as they are.
INVERSE_TRANSFORM_ATTRIBUTES = ("X_transformed_fit_", "inverse_dual_coef_")


def attributes_from_model(estimator) -> None:
    """Set the fitted attributes that follow from ``estimator.model_``, as ``fit`` does."""
    model = estimator.model_
    estimator.kernel_ = model.kernel
    estimator.eigenvalues_ = model.eigenvalues
    estimator.explained_variance_ratio_ = energy_shares(model.eigenvalues, model.trace)
    if hasattr(model, "landmarks"):
        estimator.landmarks_ = model.landmarks
        estimator.dual_coef_ = model.coef
    estimator._n_features_out = model.n_components


def diskpca_state(estimator) -> tuple[dict, dict]:
    """``(arrays, meta)`` of a fitted ``DistributedKernelPCA``."""
    arrays, model_meta = model_to_arrays(estimator.model_, prefix="model.")
    for name in INVERSE_TRANSFORM_ATTRIBUTES:
        if hasattr(estimator, name):
            arrays[name] = getattr(estimator, name)
    meta = {"model": model_meta, "method": estimator.method_,
            "lost_workers": [int(w) for w in getattr(estimator, "lost_workers_", [])]}
    return arrays, meta


def restore_diskpca(estimator, arrays: dict, meta: dict) -> None:
    """Set the fitted attributes of :func:`diskpca_state`'s ``(arrays, meta)``."""
    estimator.model_ = model_from_arrays(arrays, meta["model"], prefix="model.")
    estimator.method_ = meta["method"]
    estimator.lost_workers_ = list(meta["lost_workers"])
    for name in INVERSE_TRANSFORM_ATTRIBUTES:
        if name in arrays:
            setattr(estimator, name, arrays[name])
    attributes_from_model(estimator)
