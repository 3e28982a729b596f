"""A fitted ``DistributedKernelPCA`` in a model file (:mod:`kernelscale.model_registry`).

The file keeps ``model_`` (a :class:`~kernelscale.model.KernelPCAModel` or
:class:`~kernelscale.model.RandomFeaturePCAModel`), ``method_`` and
``lost_workers_``; every other fitted attribute follows from ``model_`` and the
parameters, as ``fit`` derives it (``KernelPCABase._derive_fitted_attributes``,
which also recomputes the pre-image map at the master).
"""

from __future__ import annotations

from kernelscale.model import model_from_arrays, model_to_arrays


def diskpca_state(estimator) -> tuple[dict, dict]:
    """``(arrays, meta)`` of a fitted ``DistributedKernelPCA``."""
    arrays, model_meta = model_to_arrays(estimator.model_, prefix="model.")
    meta = {"model": model_meta, "method": estimator.method_,
            "lost_workers": [int(w) for w in getattr(estimator, "lost_workers_", [])]}
    return arrays, meta


def restore_diskpca(estimator, arrays: dict, meta: dict) -> None:
    """Set the fitted attributes of :func:`diskpca_state`'s ``(arrays, meta)``."""
    estimator.model_ = model_from_arrays(arrays, meta["model"], prefix="model.")
    estimator.method_ = meta["method"]
    estimator.lost_workers_ = list(meta["lost_workers"])
    estimator._derive_fitted_attributes()
