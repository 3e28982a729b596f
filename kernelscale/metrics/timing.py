"""Wall-clock train time and test time per point of streaming estimators.

The two timing metrics of paper 004 (Figures 1-3): the time to build a model
from a stream fed in mini-batches, and the time to map one new point. They work
with anything that has ``partial_fit`` (train) and ``transform`` (test): the
:class:`~kernelscale.streaming.StreamingKernelPCA` estimator, the raw
:class:`~kernelscale.streaming.SKPCA`, :class:`~kernelscale.streaming.RNCA` and
:class:`~kernelscale.streaming.StreamingNystrom` objects, or scikit-learn's
incremental estimators.

Both use :func:`time.perf_counter`; on a shared machine, run them under one BLAS
thread (``threadpoolctl.threadpool_limits(1, user_api="blas")``) and compare
methods measured in the same run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from numbers import Integral
from typing import Any

__all__ = ["TrainTiming", "finalize_model", "test_time_per_point", "train_time"]


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)


def _n_rows(X) -> int:
    shape = getattr(X, "shape", None)
    if shape is None or len(shape) != 2:
        raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {shape}.")
    if shape[0] < 1:
        raise ValueError("X has no rows to time.")
    return int(shape[0])


def finalize_model(estimator) -> None:
    """Compute whatever a streaming model defers to the end of the stream.

    Calls ``estimator.eigen()`` when it exists (the raw SKPCA / RNCA / Nystrom
    objects: the SVD of the sketch or the eigendecomposition), otherwise reads
    ``estimator.components_`` when the estimator has one (``StreamingKernelPCA``
    computes it lazily on first read). Anything else is left as it is.

    Parameters
    ----------
    estimator : object
        A streaming method or estimator, fed its whole stream.

    Returns
    -------
    None
        The estimator is changed in place (its decomposition cached), so that a
        timing of the training includes the decomposition.
    """
    eigen = getattr(estimator, "eigen", None)
    if callable(eigen):
        eigen()
    elif hasattr(estimator, "components_"):
        estimator.components_  # noqa: B018 - the read is the point


@dataclass(frozen=True)
class TrainTiming:
    """Result of :func:`train_time`.

    Attributes
    ----------
    seconds : float
        Wall-clock seconds of the fastest repeat (feeding plus finalising).
    n_samples : int
        Rows fed per repeat.
    n_batches : int
        ``partial_fit`` calls per repeat.
    estimator : object
        The model trained by the last repeat.
    """

    seconds: float
    n_samples: int
    n_batches: int
    estimator: Any

    @property
    def points_per_second(self) -> float:
        return self.n_samples / self.seconds if self.seconds > 0 else float("inf")


def train_time(
    make_estimator: Callable[[], Any],
    X,
    batch_size: int = 1000,
    *,
    finalize: Callable[[Any], Any] | None = finalize_model,
    n_repeat: int = 1,
) -> TrainTiming:
    """Seconds to train a fresh estimator on ``X`` fed in mini-batches.

    Each repeat builds a new estimator with ``make_estimator()`` (not timed),
    then times ``partial_fit`` on consecutive blocks of ``batch_size`` rows and
    ``finalize(estimator)`` (by default :func:`finalize_model`: the final
    decomposition, so lazy and eager models are timed alike; ``None`` skips it).

    Parameters
    ----------
    make_estimator : callable
        No-argument factory returning an unfitted estimator with ``partial_fit``.
    X : array-like or sparse matrix of shape (n_samples, n_features)
    batch_size : int, default=1000
    finalize : callable or None, default=finalize_model
    n_repeat : int, default=1
        Repeats; the fastest is reported.

    Returns
    -------
    TrainTiming
        ``seconds``, ``n_samples``, ``n_batches`` and the trained ``estimator``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelscale.streaming import SKPCA
    >>> X = np.random.default_rng(0).standard_normal((500, 4))
    >>> t = train_time(lambda: SKPCA(4, n_random_features=50, sketch_size=6), X, 100)
    >>> t.n_batches, t.estimator.n_samples_seen, t.seconds > 0
    (5, 500, True)
    """
    n = _n_rows(X)
    batch_size = _positive_int(batch_size, "batch_size")
    n_repeat = _positive_int(n_repeat, "n_repeat")
    best, estimator = float("inf"), None
    for _ in range(n_repeat):
        estimator = make_estimator()
        start = time.perf_counter()
        for s in range(0, n, batch_size):
            estimator.partial_fit(X[s : s + batch_size])
        if finalize is not None:
            finalize(estimator)
        best = min(best, time.perf_counter() - start)
    return TrainTiming(best, n, -(-n // batch_size), estimator)


def test_time_per_point(
    estimator,
    X,
    *,
    max_points: int = 200,
    n_repeat: int = 1,
    transform_kwargs: dict | None = None,
    warmup: bool = True,
) -> float:
    """Seconds per point to map new points one at a time (a test-time query).

    Calls ``estimator.transform(X[i:i+1], **transform_kwargs)`` for each of the
    first ``max_points`` rows of ``X`` and returns the mean time per call (the
    fastest of ``n_repeat`` passes). With ``warmup``, one untimed call on the
    first row comes first, so deferred work (a lazy decomposition) is not
    counted as query time.

    Parameters
    ----------
    estimator : fitted object with ``transform``
    X : array-like or sparse matrix of shape (n_points, n_features)
    max_points : int, default=200
    n_repeat : int, default=1
    transform_kwargs : dict or None
        Extra arguments of ``transform`` (e.g. ``{"n_components": 10}`` for the
        raw SKPCA / RNCA / Nystrom objects).
    warmup : bool, default=True

    Returns
    -------
    float
        Seconds per point.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelscale.streaming import StreamingKernelPCA
    >>> X = np.random.default_rng(0).standard_normal((300, 4))
    >>> est = StreamingKernelPCA(n_components=2, n_random_features=50, random_state=0).fit(X)
    >>> test_time_per_point(est, X, max_points=20) > 0
    True
    """
    n = min(_n_rows(X), _positive_int(max_points, "max_points"))
    n_repeat = _positive_int(n_repeat, "n_repeat")
    kwargs = {} if transform_kwargs is None else dict(transform_kwargs)
    if warmup:
        estimator.transform(X[0:1], **kwargs)
    best = float("inf")
    for _ in range(n_repeat):
        start = time.perf_counter()
        for i in range(n):
            estimator.transform(X[i : i + 1], **kwargs)
        best = min(best, (time.perf_counter() - start) / n)
    return best


# Not a test, whatever its name: keep pytest from collecting it where it is imported.
test_time_per_point.__test__ = False
