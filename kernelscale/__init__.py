"""kernelscale: kernel PCA and kernel clustering for data that cannot be brought to one place."""

from kernelscale.horizontal import DistributedKernelPCA
from kernelscale.kernels import make_kernel, median_heuristic
from kernelscale.model import load_model, save_model
from kernelscale.runtime import Ledger, LocalCluster

__version__ = "0.1.0"

__all__ = [
    "DistributedKernelPCA",
    "Ledger",
    "LocalCluster",
    "load_model",
    "make_kernel",
    "median_heuristic",
    "save_model",
]
