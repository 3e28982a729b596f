"""The two hybrids of the word budget (measured in benchmarks/budget_hybrids.py, not used)."""

import numpy as np
import pytest

from kernelscale.backends.local import LocalCluster
from kernelscale.horizontal.evaluate import distributed_error
from kernelscale.horizontal.hybrid import (
    batch_refine,
    forecast_batch_refine,
    forecast_ridge_batch,
    ridge_batch,
)
from kernelscale.horizontal.landmarks import landmark_dislr
from kernelscale.kernels import make_kernel
from kernelscale.metrics.lowrank import exact_kpca_reference, kernel_mean_norm_sq
from kernelscale.partition import make_partition, split

D = 6


def _parts(seed, n=300):
    X = np.random.default_rng(seed).normal(size=(n, D))
    return X, split(X, make_partition(n, 4, "power_law", random_state=seed))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("center", [True, False])
def test_hybrid_forecasts_equal_the_ledger(seed, center):
    X, parts = _parts(seed)
    n_rows = [p.shape[0] for p in parts]
    for kernel in (make_kernel("rbf", gamma=0.3), make_kernel("arccos", order=2)):
        for fit, forecast in ((batch_refine, forecast_batch_refine),
                              (ridge_batch, forecast_ridge_batch)):
            cluster = LocalCluster(parts)
            fit(cluster, kernel, 3, n_landmarks=25 + 10 * seed, center=center,
                random_state=seed, redraw=False)
            expected = forecast(n_rows, D, 3, 25 + 10 * seed, kernel=kernel, center=center)
            assert cluster.ledger.words_by_round("fit") == expected.words_by_round()


def test_batch_refine_with_a_full_basis_is_dislr_on_the_sample():
    # Uncentred, r = |S|: the refinement chooses among all of span(phi(S)), as disLR on S.
    X, parts = _parts(3)
    kernel = make_kernel("rbf", gamma=0.3)
    model = batch_refine(LocalCluster(parts), kernel, 3, n_landmarks=30, n_basis=30,
                         random_state=0)
    reference = landmark_dislr(LocalCluster(parts), kernel, model.landmarks, 3)
    mine = distributed_error(LocalCluster(parts), model, None)["error"]
    theirs = distributed_error(LocalCluster(parts), reference, None)["error"]
    assert mine == pytest.approx(theirs, rel=1e-7)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_centred_refinement_lies_between_disLR_and_the_batch_it_refines(seed):
    # The basis holds the batch's own top k (so never worse than it) inside span(phi(S))
    # (so never better than disLR on S).
    from kernelscale.horizontal.baselines import batch_kpca

    X, parts = _parts(seed)
    kernel = make_kernel("rbf", gamma=0.3)
    model = batch_refine(LocalCluster(parts), kernel, 3, n_landmarks=40, center=True,
                         random_state=seed)
    norm = kernel_mean_norm_sq(X, kernel)

    def error(m):
        return distributed_error(LocalCluster(parts), m, norm)["error"]

    dislr = landmark_dislr(LocalCluster(parts), kernel, model.landmarks, 3, center=True)
    batch = batch_kpca(model.landmarks, kernel, 3, True)
    assert error(dislr) * (1 - 1e-9) <= error(model) <= error(batch) * (1 + 1e-9)


@pytest.mark.parametrize("center", [True, False])
def test_ridge_batch_components_are_orthonormal_and_beat_nothing_at_random(center):
    X, parts = _parts(4)
    kernel = make_kernel("rbf", gamma=0.3)
    model = ridge_batch(LocalCluster(parts), kernel, 3, n_landmarks=60, center=center,
                        random_state=1)
    K = kernel(model.landmarks, model.landmarks)
    if center:
        m = model.center
        d = np.linalg.lstsq(K, m, rcond=None)[0]  # m = K d
        K = K - m[None, :] - m[:, None] + d @ m
    C = model.coef
    np.testing.assert_allclose(C.T @ K @ C, np.eye(3), atol=1e-7)
    ref = exact_kpca_reference(X, kernel, 3, center)
    err = distributed_error(LocalCluster(parts), model,
                            kernel_mean_norm_sq(X, kernel) if center else None)["error"]
    assert ref["opt"] <= err < ref["trace"]
