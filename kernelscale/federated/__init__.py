"""Federated kernel k-means (paper 003), distributed coreset k-means and spectral clustering."""

from kernelscale._lazy import lazy_exports
from kernelscale.federated.baselines import (
    ck_kmeans,
    distributed_spectral_clustering,
    rfk_kmeans,
    sk_kmeans,
)
from kernelscale.federated.fk import fk_kmeans
from kernelscale.federated.fkkmeans import FKKMeansModel, dspgd_cem, paper_gamma
from kernelscale.federated.kmeans import distributed_kmeans, kmeans_on_workers
from kernelscale.federated.lanczos import lanczos

# The estimators (scikit-learn classes) load on first use.
__getattr__, __dir__ = lazy_exports(__name__, {
    "DistributedSpectralClustering": "kernelscale.federated.estimator",
    "FederatedKernelKMeans": "kernelscale.federated.estimator",
})

__all__ = [
    "DistributedSpectralClustering",
    "FKKMeansModel",
    "FederatedKernelKMeans",
    "ck_kmeans",
    "distributed_kmeans",
    "distributed_spectral_clustering",
    "dspgd_cem",
    "fk_kmeans",
    "kmeans_on_workers",
    "lanczos",
    "paper_gamma",
    "rfk_kmeans",
    "sk_kmeans",
]
