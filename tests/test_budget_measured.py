"""A word budget that measures: candidates' energy over every row from disLR's Gram, the
measured ridge rounds' forecast against the ledger, and what the measurement decides."""

import numpy as np
import pytest

from kernelscale import DistributedKernelPCA
from kernelscale.backends.local import LocalCluster
from kernelscale.horizontal.baselines import batch_kpca
from kernelscale.horizontal.dislr import dislr
from kernelscale.horizontal.forecast import forecast_words
from kernelscale.horizontal.measure import SpanGram, ridge_against_uniform
from kernelscale.kernels import make_kernel, median_heuristic
from kernelscale.metrics.lowrank import lowrank_error
from kernelscale.partition import make_partition, split


def _data(seed, n=600, d=4):
    return np.random.default_rng(seed).normal(size=(n, d))


def _span(X, S, kernel, center):
    KS = kernel(S, X)
    return SpanGram(S, kernel, KS @ KS.T, KS.sum(axis=1) if center else None, X.shape[0])


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("seed", [0, 1])
def test_span_energy_is_the_fitted_models_energy_over_every_row(center, seed):
    # disLR on a subset of S: the energy read from the Gram of S equals lowrank_error's of
    # the model itself on all the data, and no subspace of the span captures more
    X = _data(seed)
    kernel = make_kernel("rbf", sigma=median_heuristic(X, 0.5, random_state=0))
    rng = np.random.default_rng(seed)
    S = X[rng.choice(X.shape[0], 40, replace=False)]
    span = _span(X, S, kernel, center)
    idx = np.sort(rng.choice(40, 25, replace=False))
    parts = split(X, make_partition(X.shape[0], 3, "uniform", random_state=seed))
    model = dislr(LocalCluster(parts), S[idx], S[idx], kernel, 5, X.shape[0], "gram", center,
                  4096, [1, 2, 3])
    assert span.dislr(idx, 5) == pytest.approx(lowrank_error(model, X)["captured"], rel=1e-9)
    batch = batch_kpca(S[idx], kernel, 5, center)  # another subspace of the same span
    captured = span.captured(idx, batch.coef)
    assert captured == pytest.approx(lowrank_error(batch, X)["captured"], rel=1e-9)
    assert captured <= span.dislr(idx, 5) * (1 + 1e-12)  # disLR: the best in the span


def test_ridge_against_uniform_is_the_ratio_of_the_gains_over_every_row():
    X = _data(3)
    kernel = make_kernel("rbf", sigma=median_heuristic(X, 0.3, random_state=0))
    S = X[:60]
    span = _span(X, S, kernel, True)
    base, ridge, uniform = list(range(20)), list(range(20, 40)), list(range(40, 55))

    parts = split(X, make_partition(X.shape[0], 2, "uniform", random_state=0))

    def captured(idx):  # disLR's model on these landmarks, measured on every row
        fitted = dislr(LocalCluster(parts), S[idx], S[idx], kernel, 4, X.shape[0], "gram",
                       True, 4096, [1, 2])
        return lowrank_error(fitted, X)["captured"]

    before = captured(base)
    expected = (captured(base + ridge[:15]) - before) / (captured(base + uniform) - before)
    assert ridge_against_uniform(span, base, ridge, uniform, 4) == pytest.approx(expected,
                                                                                 rel=1e-8)


def _blob_and_isolated_points(seed, n=2000, d=8):
    """A Gaussian blob and 5% isolated points far out (RBF at 0.4 x the median distance:
    the pilots read 0.33 <= phi < 0.6, where the ridge rounds run and measure)."""
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(size=(n, d)), 6.0 * rng.normal(size=(n // 20, d))])
    return X, 1 / (2 * median_heuristic(X, 0.6, random_state=0) ** 2)


@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("budget", [50_000, 120_000])
@pytest.mark.parametrize("thresholds,round_two", [
    ((0.0, 0.0), "ridge sampling 2"),  # every measured round 2 by the ridge residual
    ((np.inf, np.inf), "ridge sampling 2: uniform share"),  # every one uniformly
], ids=["ridge", "uniform"])
def test_measured_rounds_forecast_the_ledger_to_the_word_round_by_round(
        center, budget, thresholds, round_two, monkeypatch):
    monkeypatch.setattr("kernelscale.horizontal.measured.UNIFORM_BELOW", thresholds[0])
    monkeypatch.setattr("kernelscale.horizontal.measured.RIDGE_FROM", thresholds[1])
    measured = 0
    for seed in range(2):
        X, gamma = _blob_and_isolated_points(seed)
        parts = split(X, make_partition(X.shape[0], 5, "power_law", random_state=seed))
        est = DistributedKernelPCA(10, gamma=gamma, max_words=budget, center=center,
                                   random_state=seed).fit(parts)
        plan, ledger = est.budget_plan_, est.communication_
        assert est.method_ == "diskpca" and "shares" in plan.pilot
        if plan.pilot["ridge_gain"] is not None:
            measured += 1
            rounds = ledger.words_by_round("fit")  # round 2 drew one way only
            assert round_two in rounds and len([r for r in rounds if r.startswith(
                "ridge sampling 2") and "residuals" not in r]) == 1
        assert plan.forecast.words_by_round() == ledger.words_by_round("fit")
        assert plan.forecast.words_by_kind() == ledger.words_by_kind("fit")
        assert ledger.total_words("fit") == plan.forecast.words <= budget
        # choosing costs a few words per worker (trace words, a second draw's counts)
        assert abs(plan.choosing_words) <= 10 * len(parts)
        # the plan before the fit (round 2's share unknown) bounds what ran
        n_rows = [p.shape[0] for p in parts]
        before = forecast_words("diskpca", n_rows, X.shape[1], 10, plan.n_landmarks,
                                kernel=est.kernel_, center=center, measured=True)
        assert plan.forecast.words <= before.words <= budget
        # disLR's Gram arrived in parts: the model is disLR's on the same landmarks
        direct = dislr(LocalCluster(parts), est.model_.landmarks, est.model_.landmarks,
                       est.kernel_, 10, X.shape[0], "gram", center, 4096, [0] * 5)
        np.testing.assert_allclose(est.model_.eigenvalues, direct.eigenvalues, rtol=1e-9)
    assert measured  # round 2 weighed the ridge points against the uniform ones
