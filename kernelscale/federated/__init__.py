"""Federated kernel k-means (paper 003), distributed coreset k-means and spectral clustering."""

from kernelscale.federated.baselines import (
    ck_kmeans,
    distributed_spectral_clustering,
    rfk_kmeans,
    sk_kmeans,
)
from kernelscale.federated.estimator import DistributedSpectralClustering, FederatedKernelKMeans
from kernelscale.federated.fkkmeans import FKKMeansModel, dspgd_cem, fk_kmeans, paper_gamma
from kernelscale.federated.kmeans import distributed_kmeans, kmeans_on_workers
from kernelscale.federated.lanczos import lanczos

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
