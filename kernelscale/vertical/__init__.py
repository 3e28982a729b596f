"""Vertical partitions: parties hold different features of the same samples (paper 002)."""

from kernelscale._lazy import lazy_exports
from kernelscale.vertical.dpca import DPCAResult, dpca, ring_neighbourhoods
from kernelscale.vertical.oneshot import (
    VERTICAL_KERNELS,
    VerticalInfo,
    VerticalKPCAModel,
    centre_kernel,
    fuse_local_kernels,
    one_shot_kpca,
    validate_vertical,
)
from kernelscale.vertical.projection import vertical_transform

# The estimators (scikit-learn classes) load on first use.
__getattr__, __dir__ = lazy_exports(__name__, {
    "VerticalKernelPCA": "kernelscale.vertical.estimator",
})

__all__ = [
    "DPCAResult",
    "VerticalKernelPCA",
    "dpca",
    "ring_neighbourhoods",
    "VERTICAL_KERNELS",
    "VerticalInfo",
    "VerticalKPCAModel",
    "centre_kernel",
    "fuse_local_kernels",
    "one_shot_kpca",
    "validate_vertical",
    "vertical_transform",
]
