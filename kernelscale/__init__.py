"""kernelscale: kernel PCA and kernel clustering for data that cannot be brought to one place.

The names below are imported on first use (PEP 562), so ``import kernelscale``
and a worker process that needs one module (a Flower ClientApp started for
every message, a Dask worker) do not load every subpackage and scikit-learn.
"""

from __future__ import annotations

from kernelscale._lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "DaskCluster": "kernelscale.backends.dask.cluster",
    "DistributedKernelPCA": "kernelscale.horizontal",
    "DistributedSpectralClustering": "kernelscale.federated",
    "FederatedKernelKMeans": "kernelscale.federated",
    "Ledger": "kernelscale.runtime",
    "FlowerCluster": "kernelscale.backends.flower.cluster",
    "KernelPCA": "kernelscale.horizontal",
    "LocalCluster": "kernelscale.backends.local",
    "StreamingKernelPCA": "kernelscale.streaming",
    "VerticalKernelPCA": "kernelscale.vertical",
    "load_model": "kernelscale.model",
    "load_streaming_model": "kernelscale.streaming",
    "make_cluster": "kernelscale.cluster_factory",
    "make_kernel": "kernelscale.kernels",
    "median_heuristic": "kernelscale.kernels",
    "save_model": "kernelscale.model",
    "save_streaming_model": "kernelscale.streaming",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
