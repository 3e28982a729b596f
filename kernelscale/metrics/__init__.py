"""Metrics: low-rank approximation error, subspace distances, kernel errors, clustering, timing."""

from kernelscale.metrics.clustering import kernel_kmeans_objective, nmi  # noqa: F401
from kernelscale.metrics.kernel_error import (  # noqa: F401
    kernel_frobenius_error,
    kernel_spectral_error,
    streaming_space_words,
)
from kernelscale.metrics.lowrank import (  # noqa: F401
    error_ratio,
    exact_kpca_reference,
    excess_energy_ratio,
    kernel_mean_norm_sq,
    lowrank_error,
)
from kernelscale.metrics.subspace import projector_error, sin_theta_distance  # noqa: F401
from kernelscale.metrics.timing import (  # noqa: F401
    TrainTiming,
    finalize_model,
    test_time_per_point,
    train_time,
)
