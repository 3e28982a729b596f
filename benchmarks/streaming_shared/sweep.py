"""The streaming benchmarks' sweep: SKPCA, RNCA and streaming Nystrom against the sample size.

Shared by ``benchmarks/streaming.py`` (paper 004's RandomNoisy and digits) and
``benchmarks/streaming_real.py`` (the UCI sets). Every method is fed
mini-batches of :data:`BATCH` rows; train time includes the final
eigendecomposition (RNCA, Nystrom) or SVD of the sketch (SKPCA).

>>> list(configs([10, 50], [5, 20]))
[('rnca', 10, None), ('nystrom', 10, None), ('skpca', 10, 5), ('rnca', 50, None), \
('nystrom', 50, None), ('skpca', 50, 5), ('skpca', 50, 20)]
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from kernelscale.kernels import make_kernel, median_heuristic
from kernelscale.metrics import (
    kernel_frobenius_error,
    kernel_spectral_error,
    test_time_per_point,
    train_time,
)
from kernelscale.streaming import RNCA, SKPCA, StreamingNystrom

__all__ = ["BATCH", "K_TEST", "SKETCH_MARKERS", "build_model", "configs", "curve_style",
           "seconds_per_query", "sweep", "timed_train"]

#: The mini-batch every method is fed.
BATCH = 1000
#: The components a test-time query is transformed to (at most).
K_TEST = 10


def build_model(method: str, d: int, size: int, l: int | None, gamma: float, seed: int):
    """An unfitted streaming model: ``'skpca'`` (sketch size ``l``), ``'rnca'`` or
    ``'nystrom'``, of ``size`` random features or samples, RBF kernel of ``gamma``."""
    if method == "skpca":
        return SKPCA(d, size, l, gamma=gamma, seed=seed)
    if method == "rnca":
        return RNCA(d, size, gamma=gamma, seed=seed)
    return StreamingNystrom(d, size, gamma=gamma, seed=seed)


def timed_train(method: str, d: int, size: int, l: int | None, gamma: float, seed: int,
                X: np.ndarray) -> tuple:
    """Train time (partial_fit in batches of BATCH, then the final decomposition) and model."""
    timing = train_time(lambda: build_model(method, d, size, l, gamma, seed), X, BATCH)
    return timing.seconds, timing.estimator


def seconds_per_query(model, X_test: np.ndarray) -> float:
    """Seconds per point, one point at a time as a test-time query (200 points)."""
    k = min(K_TEST, model.eigen()[1].shape[1])
    return test_time_per_point(model, X_test, max_points=200,
                               transform_kwargs={"n_components": k})


def configs(sizes: Iterable[int], ls: Iterable[int]) -> Iterator[tuple]:
    """(method, sample size, sketch size or None): RNCA and Nystrom at every size, SKPCA
    at every sketch size below it."""
    for size in sizes:
        yield "rnca", size, None
        yield "nystrom", size, None
        for l in ls:
            if l < size:
                yield "skpca", size, l


def sweep(name: str, X_train: np.ndarray, X_test: np.ndarray, sizes: Iterable[int],
          ls: Iterable[int], n_eval: int, seed: int = 0) -> list[dict]:
    """Error, space and times against the sample size (Figures 1-3 of 004).

    RBF kernel at the median distance; the kernel spectral and Frobenius errors
    over ``n_eval`` training points, the test time over ``X_test``. One row per
    configuration (:func:`configs`).
    """
    sigma = median_heuristic(X_train, scale=1.0, random_state=seed)
    gamma = 1.0 / (2 * sigma**2)
    kernel = make_kernel("rbf", gamma=gamma)
    X_eval = X_train[np.random.default_rng(seed).choice(len(X_train), n_eval, replace=False)]
    rows = []
    for method, size, l in configs(sizes, ls):
        train_s, model = timed_train(method, X_train.shape[1], size, l, gamma, seed, X_train)
        Y = model.features(X_eval)
        rows.append({
            "dataset": name, "method": method, "sample_size": size, "sketch_size": l or "",
            "label": f"SKPCA l={l}" if l else method.upper().replace("NYSTROM", "Nystrom"),
            "space_words": model.space_words, "train_s": train_s,
            "test_s_per_point": seconds_per_query(model, X_test),
            "spectral_error": kernel_spectral_error(X_eval, kernel, Y),
            "frobenius_error": kernel_frobenius_error(X_eval, kernel, Y),
            "n_train": len(X_train), "d": X_train.shape[1], "gamma": gamma,
        })
        print(f"  {name} {rows[-1]['label']:>12} m={size:5d} train {train_s:7.2f}s "
              f"spec {rows[-1]['spectral_error']:.4f}", flush=True)
    return rows


#: SKPCA's sketch sizes l: one marker each, so that neighbouring sizes stay apart in grey
#: print and where colours are close.
SKETCH_MARKERS = "v^<>Dph*"


def curve_style(label: str, sketch_sizes) -> dict:
    """Matplotlib style of a streaming method's curve, the same in every streaming figure.

    Nystrom: black circles, RNCA: green squares, both solid; SKPCA dashed, one colour per
    sketch size l from dark purple (small l) to yellow (large l) of the plasma map, and one
    marker per l.

    Parameters
    ----------
    label : str
        ``'Nystrom'``, ``'RNCA'`` or ``'SKPCA l=<l>'``.
    sketch_sizes : sequence of int
        Every sketch size l of the figure, in order.
    """
    if label == "Nystrom":
        return {"color": "black", "marker": "o", "linestyle": "-", "lw": 1.8}
    if label == "RNCA":
        return {"color": "tab:green", "marker": "s", "linestyle": "-", "lw": 1.8}
    from matplotlib import colormaps

    index = list(sketch_sizes).index(int(label.split("=")[1]))
    shade = colormaps["plasma"](0.88 * index / max(1, len(sketch_sizes) - 1))
    return {"color": shade, "marker": SKETCH_MARKERS[index % len(SKETCH_MARKERS)],
            "linestyle": "--", "lw": 1.2}

