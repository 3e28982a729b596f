"""Fitted ``FederatedKernelKMeans`` and ``DistributedSpectralClustering`` in a model file.

Their state functions for :mod:`kernelscale.model_registry`: the server's model
(``model_``), the cluster centres, the training labels and the fit's trace.
"""

from __future__ import annotations

from kernelscale.federated.fkkmeans import FKKMeansModel
from kernelscale.model import model_from_arrays, model_to_arrays
from kernelscale.model_registry import to_json_value


def fk_kmeans_state(estimator) -> tuple[dict, dict]:
    """``(arrays, meta)`` of a fitted ``FederatedKernelKMeans``."""
    model = estimator.model_
    arrays = {f"projection.{t}": P for t, P in enumerate(model.projections)}
    arrays["eigenvalues"] = estimator.eigenvalues_
    if hasattr(estimator, "labels_"):  # not with aggregates_only: the clients keep them
        arrays["labels"] = estimator.labels_
    if model.centers is not None:
        arrays["centers"] = model.centers
    meta = {
        "model": {"n_features_in": int(model.n_features_in), "gamma": float(model.gamma),
                  "n_random_features": int(model.n_random_features),
                  "seeds": to_json_value(model.seeds), "etas": to_json_value(model.etas),
                  "n_iterations": len(model.projections)},
        "lost_workers": to_json_value(estimator.lost_workers_),
        "gamma": float(estimator.gamma_),
        "threshold": float(estimator.threshold_),
        "ranks": to_json_value(estimator.ranks_),
        "lanczos_steps": to_json_value(estimator.lanczos_steps_),
        "eigensolvers": to_json_value(estimator.eigensolvers_),
    }
    return arrays, meta


def restore_fk_kmeans(estimator, arrays: dict, meta: dict) -> None:
    """Set the fitted attributes of :func:`fk_kmeans_state`'s ``(arrays, meta)``."""
    described = meta["model"]
    estimator.model_ = FKKMeansModel(
        n_features_in=int(described["n_features_in"]), gamma=float(described["gamma"]),
        n_random_features=int(described["n_random_features"]),
        seeds=[int(s) for s in described["seeds"]], etas=[float(e) for e in described["etas"]],
        projections=[arrays[f"projection.{t}"] for t in range(described["n_iterations"])],
        centers=arrays.get("centers"))
    if "labels" in arrays:
        estimator.labels_ = arrays["labels"]
    estimator.lost_workers_ = list(meta["lost_workers"])
    estimator.cluster_centers_ = estimator.model_.centers
    estimator.gamma_ = float(meta["gamma"])
    estimator.threshold_ = float(meta["threshold"])
    estimator.eigenvalues_ = arrays["eigenvalues"]
    estimator.ranks_ = list(meta["ranks"])
    estimator.lanczos_steps_ = list(meta["lanczos_steps"])
    # files written before the pipelined protocol ran the paper's Lanczos
    estimator.eigensolvers_ = list(meta.get("eigensolvers", ["lanczos"] * len(estimator.ranks_)))
    estimator.n_iter_ = len(estimator.ranks_)


def spectral_state(estimator) -> tuple[dict, dict]:
    """``(arrays, meta)`` of a fitted ``DistributedSpectralClustering``."""
    arrays, model_meta = model_to_arrays(estimator.model_, prefix="model.")
    arrays.update(labels=estimator.labels_, centers=estimator.cluster_centers_)
    return arrays, {"model": model_meta,
                    "lost_workers": to_json_value(estimator.lost_workers_)}


def restore_spectral(estimator, arrays: dict, meta: dict) -> None:
    """Set the fitted attributes of :func:`spectral_state`'s ``(arrays, meta)``."""
    estimator.model_ = model_from_arrays(arrays, meta["model"], prefix="model.")
    estimator.kernel_ = estimator.model_.kernel
    estimator.labels_ = arrays["labels"]
    estimator.cluster_centers_ = arrays["centers"]
    estimator.lost_workers_ = list(meta["lost_workers"])
