"""Evaluating a fitted subspace on partitioned data, through the runtime.

Runs under the phase ``evaluate`` so it never inflates the algorithm's ``fit``
words. Each worker returns three numbers: its row count, ``sum k(a, a)`` and
``sum ||transform(a)||^2`` (the kernel trick: no feature vector is formed); for
a centred model also ``sum transform(a)`` (k more words), with which the master
recentres the error on the evaluated data's mean
(:mod:`kernelscale.metrics.lowrank`).
"""

from __future__ import annotations

import numpy as np

from kernelscale.kernels import make_kernel
from kernelscale.metrics.lowrank import error_from_sums, is_centred
from kernelscale.model import MODEL_TYPES
from kernelscale.model_registry import estimator_from_arrays, estimator_to_arrays
from kernelscale.runtime import Cluster, Tagged
from kernelscale.runtime.chunks import map_chunks
from kernelscale.runtime.steps import worker_step


class StreamingModel:
    """A fitted :class:`~kernelscale.streaming.StreamingKernelPCA` seen as a model.

    Its scores are the projections of a point's lifted features (random Fourier
    features for skpca/rnca, ``k(x, landmarks)`` whitened for nystrom) on the
    top ``n_components`` orthonormal directions, uncentred; ``diag`` is the
    kernel's ``k(x, x)``, as for :class:`~kernelscale.model.RandomFeaturePCAModel`.
    It travels to the workers as the arrays of its model file.
    """

    model_type = "streaming_kpca"

    def __init__(self, estimator):
        self.estimator = estimator
        self.kernel = make_kernel(estimator.kernel, gamma=estimator.gamma_)

    @property
    def n_components(self) -> int:
        return int(self.estimator.n_components)

    def transform(self, X) -> np.ndarray:
        return self.estimator.transform(X)

    def diag(self, X) -> np.ndarray:
        return self.kernel.diag(X)

    def to_arrays(self) -> tuple[dict, dict]:
        """The estimator as its model file holds it, without its ledger."""
        return estimator_to_arrays(self.estimator, ledger=False)

    @classmethod
    def from_arrays(cls, arrays: dict, meta: dict) -> StreamingModel:
        return cls(estimator_from_arrays(arrays, meta))


def _model_class(model_type: str):
    return StreamingModel if model_type == StreamingModel.model_type else MODEL_TYPES[model_type]


def evaluated_model(model):
    """``model`` as :func:`distributed_error` ships it: a fitted model (``KernelPCAModel``,
    ``RandomFeaturePCAModel``), an estimator's ``model_``, or a :class:`StreamingModel`."""
    from kernelscale.streaming.estimator import StreamingKernelPCA

    if isinstance(model, StreamingKernelPCA):
        if not hasattr(model, "sketcher_"):
            raise ValueError("This StreamingKernelPCA is not fitted yet; call fit or "
                             "partial_fit first.")
        return StreamingModel(model)
    model = getattr(model, "model_", model)  # a fitted DistributedKernelPCA and the like
    if getattr(model, "model_type", None) not in MODEL_TYPES or not hasattr(model, "to_arrays"):
        raise TypeError(
            "distributed_error measures a KernelPCAModel or RandomFeaturePCAModel (or an "
            "estimator's model_) and a fitted StreamingKernelPCA; got "
            f"{type(model).__name__}."
        )
    return model


@worker_step(discloses="aggregates")
def energy_step(state, message):
    """Worker: (n_i, sum k(a, a), sum ||transform(a)||^2[, sum transform(a)]), in chunks."""
    arrays, meta = message["model"]
    model = _model_class(meta["model_type"]).from_arrays(arrays, meta)
    X, chunk = state.data, message["scalars"]
    diag_sum = captured = 0.0
    projection_sum = np.zeros(model.n_components)

    def energy_chunk(start, stop):
        block = X[start:stop]
        projections = model.transform(block)
        return (float(model.diag(block).sum()), float(np.sum(projections**2)),
                projections.sum(axis=0))

    for *_, (chunk_diag, chunk_captured, chunk_sum) in map_chunks(energy_chunk, X.shape[0],
                                                                  chunk):
        diag_sum += chunk_diag
        captured += chunk_captured
        projection_sum += chunk_sum
    sums = np.array([X.shape[0], diag_sum, captured])
    return np.concatenate([sums, projection_sum]) if is_centred(model) else sums


def distributed_error(cluster: Cluster, model, center_norm_sq: float | None = None,
                      chunk_size: int = 4096) -> dict:
    """Low-rank approximation error of ``model`` on the cluster's data (phase ``evaluate``).

    Returns ``{'trace', 'captured', 'error', 'n_samples'}``, exactly
    :func:`kernelscale.metrics.lowrank.lowrank_error` of the stacked data. A
    centred model's error is centred on the evaluated data's own mean and needs
    ``center_norm_sq`` = ``||mu_X||^2`` of the evaluated data (see
    :func:`kernelscale.metrics.lowrank.kernel_mean_norm_sq`).

    ``model`` is a fitted model (``KernelPCAModel``, ``RandomFeaturePCAModel``), a
    fitted estimator with ``model_``, or a fitted ``StreamingKernelPCA`` (uncentred;
    see :class:`StreamingModel`); anything else is a ``TypeError``. The values
    are Python ``float`` (``n_samples`` an ``int``).

    Parameters
    ----------
    cluster : Cluster
        The workers holding the data to evaluate on.
    model : object
        The fitted model (see above).
    center_norm_sq : float, optional
        ``||mu_X||^2`` of the evaluated data; needed by a centred model.
    chunk_size : int, default=4096
        Rows a worker processes at once.

    Returns
    -------
    result : dict
        ``trace``, ``captured``, ``error`` and ``n_samples`` (see above).

    See Also
    --------
    kernelscale.metrics.lowrank_error : The same on data held in one place.
    """
    model = evaluated_model(model)
    if is_centred(model) and center_norm_sq is None:
        raise ValueError("A centred model's error needs ||mu||^2 (center_norm_sq) of the "
                         "evaluated data.")
    arrays, meta = model.to_arrays()
    meta = {**meta, "model_type": model.model_type}
    with cluster.phase("evaluate"):
        total = cluster.broadcast_map(energy_step,
                                      Tagged(model=(arrays, meta), scalars=int(chunk_size)),
                                      round="evaluate: energy", reply_kind="scalars",
                                      reduce="sum")
    n, diag_sum, captured = total[:3]
    projection_sum = total[3:] if total.size > 3 else None
    result = error_from_sums(model, diag_sum, captured, int(n), center_norm_sq,
                             projection_sum=projection_sum)
    result["n_samples"] = int(n)
    return result
