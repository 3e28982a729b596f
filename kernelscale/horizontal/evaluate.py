"""Evaluating a fitted subspace on partitioned data, through the runtime.

Runs under the phase ``evaluate`` so it never inflates the algorithm's ``fit``
words. Each worker returns three numbers: its row count, ``sum k(a, a)`` and
``sum ||transform(a)||^2`` (the kernel trick: no feature vector is formed).
"""

from __future__ import annotations

import numpy as np

from kernelscale.metrics.lowrank import error_from_sums
from kernelscale.model import MODEL_TYPES
from kernelscale.runtime import Cluster, Tagged


def energy_step(state, message):
    """Worker: (n_i, sum of k(a, a), sum of squared projections), in chunks."""
    arrays, meta = message["model"]
    model = MODEL_TYPES[meta["model_type"]].from_arrays(arrays, meta)
    X, chunk = state.data, message["scalars"]
    diag_sum = captured = 0.0
    for start in range(0, X.shape[0], chunk):
        block = X[start : start + chunk]
        diag_sum += float(model.diag(block).sum())
        captured += float(np.sum(model.transform(block) ** 2))
    return np.array([X.shape[0], diag_sum, captured])


def distributed_error(cluster: Cluster, model, center_norm_sq: float | None = None,
                      chunk_size: int = 4096) -> dict:
    """Low-rank approximation error of ``model`` on the cluster's data (phase ``evaluate``).

    Returns ``{'trace', 'captured', 'error', 'n_samples'}``. A centred model also
    needs ``center_norm_sq`` (``||mu||^2`` of its training data, see
    :func:`kernelscale.metrics.lowrank.kernel_mean_norm_sq`).
    """
    arrays, meta = model.to_arrays()
    meta = {**meta, "model_type": model.model_type}
    with cluster.phase("evaluate"):
        replies = cluster.broadcast_map(energy_step,
                                        Tagged(model=(arrays, meta), scalars=int(chunk_size)),
                                        round="evaluate: energy", reply_kind="scalars")
    n, diag_sum, captured = np.sum(replies, axis=0)
    result = error_from_sums(model, diag_sum, captured, int(n), center_norm_sq)
    result["n_samples"] = int(n)
    return result
