"""Vertical partitions: parties hold different features of the same samples (paper 002)."""

from kernelscale.vertical.dpca import DPCAResult, dpca, ring_neighbourhoods
from kernelscale.vertical.estimator import VerticalKernelPCA
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
