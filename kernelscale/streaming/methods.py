"""The streaming methods by name: SKPCA, RNCA and streaming Nystrom (paper 004).

Apart from the estimator, so that the command line and the distributed
protocol's worker steps build a method without importing scikit-learn.
"""

from __future__ import annotations

from kernelscale.streaming.baselines import RNCA, StreamingNystrom
from kernelscale.streaming.skpca import SKPCA, StreamingMethod

__all__ = ["METHODS", "build_method"]

#: Each method's class by its name in ``StreamingKernelPCA(method=...)``.
METHODS = {"skpca": SKPCA, "rnca": RNCA, "nystrom": StreamingNystrom}


def build_method(
    method: str,
    n_features_in: int,
    kernel: str = "rbf",
    gamma: float | None = None,
    n_random_features: int = 500,
    sketch_size: int = 20,
    n_landmarks: int | None = None,
    shrink: str = "modified",
    seed: int = 0,
    chunk_size: int = 4096,
) -> StreamingMethod:
    """An empty streaming method by name (``gamma=None`` means ``1 / n_features_in``).

    Parameters
    ----------
    method : {'skpca', 'rnca', 'nystrom'}
        Which method.
    n_features_in : int
        d.
    kernel, gamma, n_random_features, sketch_size, n_landmarks, shrink
        As in :class:`StreamingKernelPCA`.
    seed : int, default=0
        Seeds the random features (skpca, rnca) or the reservoir (nystrom).
    chunk_size : int, default=4096
        Rows lifted at once.

    Returns
    -------
    method : StreamingMethod
        An :class:`SKPCA`, :class:`RNCA` or :class:`StreamingNystrom`, ready for
        ``partial_fit``.
    """
    if method not in METHODS:
        raise ValueError(f"Unknown method {method!r}; choose one of {sorted(METHODS)}.")
    if gamma is None:
        gamma = 1.0 / n_features_in
    if method == "skpca":
        return SKPCA(n_features_in, n_random_features, sketch_size, kernel, gamma, shrink,
                     seed, chunk_size)
    if method == "rnca":
        return RNCA(n_features_in, n_random_features, kernel, gamma, seed, chunk_size)
    c = n_random_features if n_landmarks is None else n_landmarks
    return StreamingNystrom(n_features_in, c, kernel, gamma, seed=seed, chunk_size=chunk_size)
