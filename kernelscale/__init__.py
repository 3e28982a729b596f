"""kernelscale: kernel PCA and kernel clustering for data that cannot be brought to one place."""

from kernelscale.federated import DistributedSpectralClustering, FederatedKernelKMeans
from kernelscale.horizontal import DistributedKernelPCA
from kernelscale.kernels import make_kernel, median_heuristic
from kernelscale.model import load_model, save_model
from kernelscale.runtime import DaskCluster, Ledger, LocalCluster, make_cluster
from kernelscale.streaming import StreamingKernelPCA, load_streaming_model, save_streaming_model
from kernelscale.vertical import VerticalKernelPCA

__version__ = "0.1.0"

__all__ = [
    "DaskCluster",
    "DistributedKernelPCA",
    "DistributedSpectralClustering",
    "FederatedKernelKMeans",
    "Ledger",
    "LocalCluster",
    "StreamingKernelPCA",
    "VerticalKernelPCA",
    "load_model",
    "load_streaming_model",
    "make_cluster",
    "make_kernel",
    "median_heuristic",
    "save_model",
    "save_streaming_model",
]
