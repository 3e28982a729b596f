"""Metrics: low-rank approximation error, subspace distances, kernel errors, clustering."""

from kernelscale.metrics.lowrank import (  # noqa: F401
    exact_kpca_reference,
    excess_energy_ratio,
    kernel_mean_norm_sq,
)
