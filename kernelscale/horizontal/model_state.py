"""A fitted ``DistributedKernelPCA`` in a model file (:mod:`kernelscale.model_registry`).

The file keeps ``model_`` (a :class:`~kernelscale.model.KernelPCAModel` or
:class:`~kernelscale.model.RandomFeaturePCAModel`), ``method_``,
``lost_workers_`` and, for a distributed fit with ``fit_inverse_transform``, the
pre-image map it learnt on every worker's rows (``preimage.scores``,
``preimage.coef``); every other fitted attribute follows from ``model_`` and the
parameters, as ``fit`` derives it (``KernelPCABase._derive_fitted_attributes``,
which recomputes an exact fit's pre-image map at the master). :func:`diskpca_layout`
says what the file's arrays must be.
"""

from __future__ import annotations

from kernelscale.model import declare_model, model_from_arrays, model_to_arrays
from kernelscale.model_registry import register_layout


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


#: The methods a fitted DistributedKernelPCA may have run.
FITTED_METHODS = ("diskpca", "uniform_dislr", "uniform_batch", "exact", "random_features")


def diskpca_layout(layout, state: dict, header: dict) -> None:
    """Check a ``DistributedKernelPCA`` file's arrays against its header (see
    :mod:`kernelscale.model_layout`): its model's, with the estimator's features and
    components."""
    n_features, k = declare_model(layout, state.get("model"), prefix="model.")
    if n_features != header["n_features_in"]:
        raise layout.error(f"its model takes {n_features:,} features, its header says "
                           f"n_features_in = {header['n_features_in']:,}")
    n_components = header["params"].get("n_components")
    if n_components is not None and k != n_components:
        raise layout.error(f"its model has {k:,} components, its parameters say "
                           f"n_components = {n_components:,}")
    if state.get("method") not in FITTED_METHODS:
        raise layout.error(f"its header's method is {state.get('method')!r}, not one of "
                           f"{', '.join(FITTED_METHODS)}")
    lost = state.get("lost_workers")
    if not isinstance(lost, list) or not all(isinstance(w, int) and w >= 0 for w in lost):
        raise layout.error(f"its header's lost_workers are {lost!r}, not worker numbers")
    # the pre-image map learnt on every worker's rows: one centre per row of scores
    scores = layout.array("preimage.scores", (None, k), optional=True)
    if scores is not None:
        layout.array("preimage.coef", (scores.shape[0], n_features))


register_layout("distributed_kpca", diskpca_layout)
register_layout("kernel_pca", diskpca_layout)
