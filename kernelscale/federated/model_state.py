"""Fitted ``FederatedKernelKMeans`` and ``DistributedSpectralClustering`` in a model file.

Their state functions for :mod:`kernelscale.model_registry`: the server's model
(``model_``), the cluster centres, the training labels and the fit's trace; and
what their files' arrays must be (:func:`fk_kmeans_layout`, :func:`spectral_layout`).
"""

from __future__ import annotations

from kernelscale.federated.fkkmeans import FKKMeansModel
from kernelscale.memory_plans import feature_map_bytes
from kernelscale.model import declare_model, model_from_arrays, model_to_arrays
from kernelscale.model_layout import INTS
from kernelscale.model_registry import register_layout, to_json_value


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


def _labels(layout, n_clusters) -> None:
    """``labels`` (one per training point) name a cluster, or -1 (a lost worker's)."""
    layout.array("labels", (None,), INTS)

    def check(arrays):
        labels = arrays["labels"]
        if labels.size and (labels.min() < -1 or labels.max() >= n_clusters):
            raise layout.error(f"member labels.npy holds labels outside -1 to "
                               f"{n_clusters - 1}")
    layout.check_values(check)


def _numbers(layout, values, name: str, count: int | None = None, kind="number") -> None:
    """A header's list of ``count`` numbers (``kind``: 'number', 'count' or 'seed')."""
    if not isinstance(values, list) or (count is not None and len(values) != count):
        raise layout.error(f"its header's {name} are {values!r}")
    for value in values:
        getattr(layout, kind)(value, name)


def fk_kmeans_layout(layout, state: dict, header: dict) -> None:
    """Check a ``FederatedKernelKMeans`` file's arrays against its header (see
    :mod:`kernelscale.model_layout`): each projection maps the previous iteration's
    columns and D random features, the centres the last one's."""
    described = state.get("model")
    if not isinstance(described, dict):
        raise layout.error("its header has no model")
    n_features = layout.count(described.get("n_features_in"), "n_features_in", 1)
    if n_features != header["n_features_in"]:
        raise layout.error(f"its model takes {n_features:,} features, its header says "
                           f"n_features_in = {header['n_features_in']:,}")
    layout.number(described.get("gamma"), "gamma", positive=True)
    n_random = layout.count(described.get("n_random_features"), "n_random_features", 1)
    n_iterations = layout.count(described.get("n_iterations"), "n_iterations", 1)
    _numbers(layout, described.get("seeds"), "seeds", n_iterations, kind="seed")
    _numbers(layout, described.get("etas"), "etas", n_iterations)
    columns = 0
    for t in range(n_iterations):
        columns = layout.array(f"projection.{t}", (n_random + columns, None)).shape[1]
    n_clusters = header["params"].get("n_clusters")
    layout.array("centers", (n_clusters, columns), optional=True)
    layout.array("eigenvalues", (None,))
    _labels(layout, n_clusters)
    for name in ("ranks", "lanczos_steps", "lost_workers"):
        _numbers(layout, state.get(name), name, kind="count")
    layout.number(state.get("gamma"), "gamma", positive=True)
    layout.number(state.get("threshold"), "threshold")
    layout.allocates("its random feature map", feature_map_bytes("rbf", n_features, n_random))


def spectral_layout(layout, state: dict, header: dict) -> None:
    """Check a ``DistributedSpectralClustering`` file's arrays against its header: its
    disKPCA model's, the centres in its components' space, one label per point."""
    n_features, k = declare_model(layout, state.get("model"), prefix="model.")
    if n_features != header["n_features_in"]:
        raise layout.error(f"its model takes {n_features:,} features, its header says "
                           f"n_features_in = {header['n_features_in']:,}")
    n_clusters = header["params"].get("n_clusters")
    layout.array("centers", (n_clusters, k))
    _labels(layout, n_clusters)
    _numbers(layout, state.get("lost_workers"), "lost_workers", kind="count")


register_layout("federated_kernel_kmeans", fk_kmeans_layout)
register_layout("distributed_spectral_clustering", spectral_layout)
