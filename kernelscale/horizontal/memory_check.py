"""A ``DistributedKernelPCA`` fit's memory, checked against the machine's before any round.

:func:`check_fit_memory` runs at the fit's front door, once the plan is known
(the method and |Y| or m that ``n_landmarks``, ``n_random_features``, the
default's words or a word budget chose): it estimates what the plan holds at its
peak (:func:`kernelscale.memory.horizontal_need`; with the default's pilot, also
the uniform methods the pilot may switch to) and refuses it, before anything is
sent, when it exceeds the memory available, saying what fits: the largest
``n_landmarks``, ``n_random_features`` or ``max_words`` within it. (Above
20,000 landmarks or points, the fixed limit of the master functions speaks.)
"""

from __future__ import annotations

from kernelscale.backends.local import effective_n_jobs
from kernelscale.horizontal.choice import draws_pilot, landmark_count
from kernelscale.memory import MemoryNeed, available_memory, check_memory, largest_within
from kernelscale.memory_plans import horizontal_need
from kernelscale.metrics.lowrank import EXACT_REFERENCE_MAX_SAMPLES


def _need_of(estimator, info, method: str, n_landmarks: int,
             n_random_features: int) -> MemoryNeed:
    kernel = estimator.kernel_
    in_process = estimator.backend == "local"
    return horizontal_need(
        method, info.n_rows, info.n_features, n_landmarks=n_landmarks,
        n_random_features=n_random_features, kernel=kernel.name, degree=kernel.degree,
        embedding_dim=estimator.embedding_dim, sampler=estimator.sampler,
        messages=estimator.messages, chunk_size=estimator.chunk_size,
        n_jobs=effective_n_jobs(estimator.n_jobs) if in_process else 1,
        in_process=in_process)


def _plans(estimator, info, plan) -> list[tuple[str, int, int]]:
    """``(method, |Y|, m)`` of the fit, and of what its pilot may switch to."""
    method, n = estimator.method_, info.n_samples
    m = estimator.n_random_features
    if estimator.landmarks is not None:
        landmarks = estimator.landmarks  # an array or a CSR matrix (no len)
        n_given = landmarks.shape[0] if hasattr(landmarks, "shape") else len(landmarks)
        return [(method, int(n_given), m)]
    if method == "exact":
        return [(method, n, m)]
    if plan is not None:
        m = plan.forecast.n_random_features or m
        plans = [(plan.method, plan.forecast.n_landmarks, m)]
        if draws_pilot(estimator, plan):
            plans += [(name, forecast.n_landmarks, m) for name, forecast in
                      plan.candidates.items()
                      if name in ("uniform_dislr", "uniform_batch") and forecast is not None]
        return plans
    return [(method, min(landmark_count(estimator), n), m)]


def check_fit_memory(estimator, info, plan) -> None:
    """Refuse a fit whose plan needs more memory than there is, before any round.

    Parameters
    ----------
    estimator : DistributedKernelPCA
        With ``method_`` and ``kernel_`` set.
    info : PartitionInfo
        The workers' rows and the features.
    plan : BudgetPlan or None
        What the fit chose (None: its parameters say it all).

    Raises
    ------
    kernelscale.memory.MemoryLimitError
        What the plan needs, what is available, and what fits.
    """
    plans = [p for p in _plans(estimator, info, plan)
             if p[1] <= EXACT_REFERENCE_MAX_SAMPLES or p[0] == "random_features"]
    if not plans:  # beyond the master functions' own limit, which says so
        return
    needs = [(_need_of(estimator, info, *p), p) for p in plans]
    need, (method, n_landmarks, m) = max(needs, key=lambda pair: pair[0].total)
    available = available_memory()
    if (method, n_landmarks, m) != plans[0]:
        need.what += " (which the pilot may choose)"
    check_memory(need, lambda: _what_fits(estimator, info, plan, method, n_landmarks, m,
                                          available), available)


def _what_fits(estimator, info, plan, method: str, n_landmarks: int, m: int,
               available: int) -> str:
    """The largest setting within ``available``, in the parameter the user set."""
    if method == "exact":
        fits = largest_within(lambda n: _need_of(estimator, _Rows(info, n), method, n, m)
                              .total, 2, info.n_samples, available)
        return (f"the exact fit holds all n x n kernel values at the master: "
                f"{'no' if fits is None else f'at most {fits:,}'} points fit in this memory; "
                "use method='diskpca' or 'uniform_batch', which hold |Y| x |Y| matrices")
    if method == "random_features":
        fits = largest_within(lambda v: _need_of(estimator, info, method, n_landmarks, v)
                              .total, 1, m, available)
        return ("even one random feature does not fit" if fits is None
                else f"the largest n_random_features that fits is {fits:,}")
    fits = largest_within(lambda v: _need_of(estimator, info, method, v, m).total, 1,
                          n_landmarks, available)
    if fits is None:
        return "even one landmark does not fit: free memory, or use backend='dask'"
    if plan is not None and estimator.max_words is not None:
        from kernelscale.horizontal.budget import split_sizing
        from kernelscale.horizontal.forecast import forecast_words

        args, sizing = split_sizing(plan)
        words = forecast_words(method, *args, **{**sizing, "n_landmarks": fits}).words
        return (f"the largest max_words that fits is about {words:,} ({method} with |Y| = "
                f"{fits:,})")
    return f"the largest n_landmarks that fits is {fits:,}"


class _Rows:
    """A :class:`PartitionInfo` of ``n`` rows spread as ``info``'s (for 'what fits')."""

    def __init__(self, info, n: int):
        scale = n / max(info.n_samples, 1)
        self.n_rows = tuple(max(int(r * scale), 1) for r in info.n_rows)
        self.n_features, self.n_samples = info.n_features, n
