"""The steps of a distributed kernel PCA fit, as :class:`DistributedKernelPCA` runs them.

1. :func:`fit_cluster` - the workers and their partitions, from what the user holds;
2. :func:`~kernelscale.horizontal.choice.choose_plan` - what to run, where the
   user left it to the library (a word budget, the default's pilot);
3. :func:`run_protocol` - the method's master function on the cluster
   (disKPCA, Algorithm 1 of paper 001, or a baseline);
4. :func:`describe_fit` - one INFO line: what ran, on what, for how many words.

Each step reads the estimator's parameters; the estimator's ``fit`` calls them
in this order (:mod:`kernelscale.horizontal.estimator`).
"""

from __future__ import annotations

import warnings

import numpy as np

from kernelscale.arrays import accept_device_input
from kernelscale.cluster_factory import estimator_cluster
from kernelscale.horizontal.baselines import exact_kpca
from kernelscale.horizontal.choice import draws_pilot, landmark_count
from kernelscale.horizontal.forecast import MIN_FIT_ROWS
from kernelscale.horizontal.landmarks import landmark_batch, landmark_dislr
from kernelscale.horizontal.params import METHODS
from kernelscale.horizontal.piloted import piloted_fit
from kernelscale.horizontal.sklearn_api import eigensolver_options
from kernelscale.partition import make_partition
from kernelscale.progress import get_logger
from kernelscale.runtime.validation import check_real

LOGGER = get_logger("horizontal")


def fit_cluster(est, X, y, rng):
    """Step 1: ``(cluster, info, rows)``: the workers holding ``X`` (split over
    ``est.n_workers`` when it is one matrix; ``rows`` are then X's rows in the
    workers' order, else None)."""
    def split_rows(n_samples):
        n_workers = est.n_workers
        if n_workers > n_samples:
            warnings.warn(f"n_workers={n_workers} exceeds the {n_samples} samples; "
                          f"using {n_samples} workers.", stacklevel=5)
            n_workers = n_samples
        if n_workers == 1 and est.method == "exact":  # X_fit_ in the order of X
            return [np.arange(n_samples)]
        return make_partition(n_samples, n_workers, est.partition, labels=y,
                              random_state=rng)

    X = accept_device_input(X)  # array API input: kept on its device under dispatch
    check_real(X)
    cluster, info, rows = estimator_cluster(est, X, split_rows, min_samples=MIN_FIT_ROWS,
                                            device_arrays=True)
    return cluster, info, None if rows is None else np.concatenate(rows)


def run_protocol(est, cluster, rng, info, plan):
    """Step 3: ``(model, plan)``: the method of ``est.method_`` on the cluster, or the
    pilot's choice (``plan`` then says what ran)."""
    eigensolver = eigensolver_options(est, rng)  # the master's, for every method
    if draws_pilot(est, plan):
        model, plan = piloted_fit(
            cluster, est.kernel_, plan, messages=est.messages, center=bool(est.center),
            chunk_size=est.chunk_size, n_leverage=est.n_leverage, random_state=rng,
            redraw=est.max_words is None, eigensolver=eigensolver)
        return model, plan
    n_components = est.n_components
    if n_components is None:  # 'exact' only: every non-zero component
        n_components = info.n_samples
    common = {"n_components": n_components, "messages": est.messages,
              "center": bool(est.center), "chunk_size": est.chunk_size,
              "random_state": rng, "eigensolver": eigensolver}
    if est.landmarks is not None:
        run = landmark_batch if est.method_ == "uniform_batch" else landmark_dislr
        return run(cluster, est.kernel_, est.landmarks, **common), plan
    if est.method_ == "exact":
        return exact_kpca(cluster, est.kernel_,
                          remove_zero_eig=est.remove_zero_eig or est.n_components is None,
                          **{**common, "n_components": est.n_components}), plan
    sizes = {"n_landmarks": landmark_count(est), "n_random_features": est.n_random_features}
    if plan is not None and est.max_words is not None:
        # the budget's sizes; no top-up draws beyond the forecast
        sizes = {"n_landmarks": max(plan.forecast.n_landmarks, 1),
                 "n_random_features": plan.forecast.n_random_features or
                 est.n_random_features, "redraw": False}
    model = METHODS[est.method_](
        cluster, est.kernel_, n_leverage=est.n_leverage, embedding_dim=est.embedding_dim,
        row_sketch_dim=est.row_sketch_dim, embedding_dtype=est.embedding_dtype,
        sampler=est.sampler, **sizes, **common)
    return model, plan


def describe_fit(est, info, plan, seconds: float) -> None:
    """Step 4: the fit's INFO line, with what was chosen and why."""
    choice = ""
    if plan is not None and plan.reason:
        setting = (f"after a pilot of {plan.pilot['n_pilot']} points, "
                   if plan.pilot is not None else "")
        choice = f"; {setting}{plan.method} with {plan.forecast.setting}: {plan.reason}"
    n_samples = info.n_samples if info is not None else est.X_fit_.shape[0]
    n_workers = info.n_workers if info is not None else 1
    LOGGER.info("%s: %d samples over %d workers, %s fit words, %.2f s%s",
                f"{type(est).__name__}({est.method_})", n_samples, n_workers,
                f"{est.communication_.total_words('fit'):,}", seconds, choice)
