"""A word budget's fit in two steps: the ridge sampler's pilot, then the method it shows.

The rule that reads the pilot is :mod:`kernelscale.horizontal.pilot`; this
module runs it inside a fit (:func:`piloted_fit`), on top of the samplers,
the forecast and the methods it may switch to.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kernelscale.horizontal.baselines import batch_kpca, broadcast_landmark_model
from kernelscale.horizontal.budget import pilot_sizes, split_sizing
from kernelscale.horizontal.diskpca import check_kernel_input, diskpca
from kernelscale.horizontal.dislr import dislr
from kernelscale.horizontal.draws import (
    inclusion_weights,
    sample_distinct,
    stack_rows,
    uniform_sample,
    uniform_sample_step,
)
from kernelscale.horizontal.forecast import forecast_words
from kernelscale.horizontal.measured import measured_ridge
from kernelscale.horizontal.pilot import choose_after_pilot, diagonal_spread, flatness
from kernelscale.horizontal.samplers import ridge_schedule
from kernelscale.linalg import as_generator
from kernelscale.runtime import validate_cluster, worker_seeds

__all__ = ["piloted_fit"]


def piloted_fit(cluster, kernel, plan, *, messages: str = "gram", center: bool = False,
                chunk_size: int = 4096, n_leverage: int | None = None, random_state=None,
                redraw: bool = False, eigensolver: dict | None = None):
    """A budget plan's fit in two steps: the ridge sampler's pilot, then the method it shows.

    ``plan`` is a :class:`~kernelscale.horizontal.budget.BudgetPlan` whose
    forecast chose 'diskpca' (ridge sampler). Draws the pilot ('pilot sampling:
    seeds', 'pilot sampling'), measures its :func:`flatness`, picks the method
    (:func:`choose_after_pilot`) and goes on from the pilot: the ridge rounds
    and disLR, or the rest of a uniform sample ('uniform sampling') and disLR
    or batch KPCA. With ``redraw=False`` (a word budget) no sample draws again
    for copies of drawn points, so the ledger stays within the forecast;
    ``redraw=True`` (the default fit) draws again as the methods themselves do.
    ``eigensolver``: the master's eigensolver, for whichever method runs.

    Returns
    -------
    (KernelPCAModel, BudgetPlan)
        The model, and the plan of what ran (method, forecast, reason, pilot).
    """
    rng = as_generator(random_state)
    k = plan.sizing["n_components"]
    n_y = plan.candidates["diskpca"].n_landmarks
    cluster.reset()
    info = validate_cluster(cluster)
    check_kernel_input(kernel, info)
    cluster.tolerate_lost_from_here()  # with lost="drop", a worker lost from here is left out
    measured = bool(plan.sizing.get("measured"))
    n_pilot = ridge_schedule(kernel, k, n_y, n_leverage)[0]
    # Step 1: the uniform pilot, the ridge sampler's first round (its words count in B)
    arrivals: list = []  # the rows each worker sent, for uniform + batch's weights
    P, received = uniform_sample(cluster, info.n_rows, n_pilot, rng, "pilot sampling",
                                 redraw=redraw, arrivals=arrivals)
    K = kernel(P, P, dtype=np.float64)
    phi, spread = flatness(K, k), diagonal_spread(K)
    # Step 2: the method the pilot shows, sized to what is left of the budget
    uniform = pilot_sizes(plan, n_pilot)
    sizes = {"diskpca": n_y, **{m: f.n_landmarks if f else None for m, f in uniform.items()}}
    method, reason, ridge_scale = choose_after_pilot(phi, sizes, spread, n_pilot, k,
                                                     info.n_samples,
                                                     kernel.is_shift_invariant)
    pilot = {"n_pilot": n_pilot, "phi": phi, "diagonal_spread": spread,
             "forecast_method": plan.method}
    if method == "diskpca" and measured:
        model, measurement = measured_ridge(cluster, kernel, k, n_y, (P, received, info),
                                            center=center, chunk_size=chunk_size, rng=rng,
                                            redraw=redraw, ridge_scale=ridge_scale,
                                            eigensolver=eigensolver)
        model.info = {"method": "diskpca", "messages": messages, "sampler": "ridge",
                      "n_leverage": n_pilot, **measurement}
        args, sizing = split_sizing(plan)
        forecast = forecast_words("diskpca", *args, n_y, **sizing, n_pilot=n_pilot,
                                  ridge_scale=ridge_scale, round_shares=measurement["shares"])
        return model, replace(plan, forecast=forecast, reason=reason + _measured(measurement),
                              pilot={**pilot, **measurement})
    if method == "diskpca":
        model = diskpca(cluster, kernel, k, n_y, n_leverage, messages=messages, center=center,
                        chunk_size=chunk_size, random_state=rng, redraw=redraw,
                        pilot=(P, received, info), ridge_scale=ridge_scale,
                        eigensolver=eigensolver)
        if ridge_scale == 0:  # no uniform share: the forecast of the rounds that ran
            args, sizing = split_sizing(plan)
            plan = replace(plan, forecast=forecast_words("diskpca", *args, n_y, **sizing,
                                                         ridge_scale=0.0))
        return model, replace(plan, reason=reason, pilot=pilot)
    forecast = uniform[method]
    rows = np.asarray(info.n_rows, dtype=np.int64)
    # The rest of the uniform sample: the forecast's |Y| - |P| points (fewer when
    # copies of drawn points left P short; never more).
    new, _ = sample_distinct(cluster, P, P.shape[0] + forecast.n_landmarks - n_pilot, rows,
                             rows - received, uniform_sample_step, rng, "uniform sampling",
                             redraw=redraw, arrivals=arrivals)
    Y = stack_rows([P, new])
    if method == "uniform_dislr":
        model = dislr(cluster, Y, Y, kernel, k, info.n_samples, messages, center,
                      int(chunk_size), worker_seeds(rng, cluster.n_workers),
                      eigensolver=eigensolver)
        model.info |= {"method": "uniform_dislr", "messages": messages, "n_pilot": n_pilot}
    else:
        weights = inclusion_weights(cluster, Y, arrivals, info.n_samples,
                                    "batch KPCA: copies")
        model = batch_kpca(Y, kernel, k, center, weights, eigensolver)
        broadcast_landmark_model(cluster, model, "batch KPCA: landmarks and components")
        model.info |= {"method": "uniform_batch", "n_pilot": n_pilot}
    return model, replace(plan, method=method, forecast=forecast, reason=reason, pilot=pilot)


def _measured(measurement: dict) -> str:
    """What the measured rounds found, as the end of the plan's reason."""
    gain, shares = measurement["ridge_gain"], measurement["shares"]
    if gain is None:
        return ""
    how = {0.0: "all its points by the ridge residual", 1.0: "all its points uniformly"}.get(
        shares[-1], f"a share of {shares[-1]:g} of its points uniformly, as the sampler does")
    return (f"; round {len(shares)} drew {how}: round {len(shares) - 1}'s ridge points added "
            f"{gain:.2f}x the energy of its uniform ones over every row")
