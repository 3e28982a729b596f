"""Metrics: low-rank approximation error, subspace distances, kernel errors, clustering, timing."""

from kernelscale.metrics.clustering import kernel_kmeans_objective, nmi
from kernelscale.metrics.kernel_error import (
    kernel_frobenius_error,
    kernel_spectral_error,
    streaming_space_words,
)
from kernelscale.metrics.lowrank import (
    error_ratio,
    exact_kpca_reference,
    excess_energy_ratio,
    kernel_mean_norm_sq,
    lowrank_error,
)
from kernelscale.metrics.subspace import projector_error, sin_theta_distance
from kernelscale.metrics.timing import (
    TrainTiming,
    finalize_model,
    test_time_per_point,
    train_time,
)

__all__ = [
    "TrainTiming",
    "error_ratio",
    "exact_kpca_reference",
    "excess_energy_ratio",
    "finalize_model",
    "kernel_frobenius_error",
    "kernel_kmeans_objective",
    "kernel_mean_norm_sq",
    "kernel_spectral_error",
    "lowrank_error",
    "nmi",
    "projector_error",
    "sin_theta_distance",
    "streaming_space_words",
    "test_time_per_point",
    "train_time",
]
