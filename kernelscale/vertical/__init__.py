"""Vertical partitions: parties hold different features of the same samples (paper 002)."""

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
    "VERTICAL_KERNELS",
    "VerticalInfo",
    "VerticalKPCAModel",
    "centre_kernel",
    "fuse_local_kernels",
    "one_shot_kpca",
    "validate_vertical",
    "vertical_transform",
]
