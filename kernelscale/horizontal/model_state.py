"""A fitted ``DistributedKernelPCA`` in a model file (:mod:`kernelscale.model_registry`).

The file keeps ``model_`` (a :class:`~kernelscale.model.KernelPCAModel` or
:class:`~kernelscale.model.RandomFeaturePCAModel`), ``method_``,
``lost_workers_`` and, for a distributed fit with ``fit_inverse_transform``, the
pre-image map it learnt on every worker's rows (``preimage.scores``,
``preimage.coef``); every other fitted attribute follows from ``model_`` and the
parameters, as ``fit`` derives it (``KernelPCABase._derive_fitted_attributes``,
which recomputes an exact fit's pre-image map at the master).
"""

from __future__ import annotations

from kernelscale.model import model_from_arrays, model_to_arrays


def diskpca_state(estimator) -> tuple[dict, dict]:
    """``(arrays, meta)`` of a fitted ``DistributedKernelPCA``."""
    arrays, model_meta = model_to_arrays(estimator.model_, prefix="model.")
    if hasattr(estimator, "dual_coef_") and estimator.method_ != "exact":
        # learnt on every worker's rows: the file keeps it (an exact fit's is recomputed)
        arrays.update({"preimage.scores": estimator.X_transformed_fit_,
                       "preimage.coef": estimator.dual_coef_})
    meta = {"model": model_meta, "method": estimator.method_,
            "lost_workers": [int(w) for w in getattr(estimator, "lost_workers_", [])]}
    return arrays, meta


def restore_diskpca(estimator, arrays: dict, meta: dict) -> None:
    """Set the fitted attributes of :func:`diskpca_state`'s ``(arrays, meta)``."""
    estimator.model_ = model_from_arrays(arrays, meta["model"], prefix="model.")
    estimator.method_ = meta["method"]
    estimator.lost_workers_ = list(meta["lost_workers"])
    preimage = None
    if "preimage.scores" in arrays:
        preimage = (arrays["preimage.scores"], arrays["preimage.coef"])
    estimator._derive_fitted_attributes(preimage)
