"""Parallel in-process workers: the same model and ledger whatever ``n_jobs`` is."""

import numpy as np
import pytest

from kernelscale import make_kernel
from kernelscale.datasets import load_digits_standardized
from kernelscale.federated import fk_kmeans
from kernelscale.horizontal import (
    diskpca,
    distributed_error,
    random_features_pca,
    uniform_batch,
    uniform_dislr,
)
from kernelscale.partition import make_partition, split
from kernelscale.runtime import LocalCluster
from kernelscale.vertical.oneshot import one_shot_kpca


@pytest.fixture(scope="module")
def parts():
    X, _ = load_digits_standardized()
    X = X[:600]
    return split(X, make_partition(X.shape[0], 7, "power_law", random_state=0))


def _models(fit, parts, seed):
    out = []
    for n_jobs in (1, 2, -1):
        cluster = LocalCluster(parts, n_jobs=n_jobs)
        out.append((fit(cluster, seed), cluster))
    return out


HORIZONTAL = {
    "diskpca": lambda c, s: diskpca(c, make_kernel("rbf", gamma=0.02), 5, n_landmarks=60,
                                    center=True, random_state=s),
    "diskpca sketch": lambda c, s: diskpca(c, make_kernel("poly", gamma=0.02, degree=3), 5,
                                           n_landmarks=60, messages="sketch", random_state=s),
    "uniform_dislr": lambda c, s: uniform_dislr(c, make_kernel("rbf", gamma=0.02), 5,
                                                n_landmarks=60, random_state=s),
    "uniform_batch": lambda c, s: uniform_batch(c, make_kernel("rbf", gamma=0.02), 5,
                                                n_landmarks=60, random_state=s),
}


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("method", sorted(HORIZONTAL))
def test_horizontal_models_and_ledgers_do_not_depend_on_n_jobs(parts, method, seed):
    (reference, ref_cluster), *others = _models(HORIZONTAL[method], parts, seed)
    for model, cluster in others:
        np.testing.assert_array_equal(model.coef, reference.coef)
        np.testing.assert_array_equal(model.landmarks, reference.landmarks)
        assert cluster.ledger == ref_cluster.ledger
    # the error, through a summed round, is the same too
    errors = {distributed_error(c, m, 1.0)["error"] for m, c in [(reference, ref_cluster), *others]}
    assert len(errors) == 1


@pytest.mark.parametrize("seed", [0, 1])
def test_random_features_pca_does_not_depend_on_n_jobs(parts, seed):
    fit = lambda c, s: random_features_pca(c, make_kernel("rbf", gamma=0.02), 5,  # noqa: E731
                                           n_random_features=300, center=True, random_state=s)
    (reference, ref_cluster), *others = _models(fit, parts, seed)
    for model, cluster in others:
        np.testing.assert_array_equal(model.components, reference.components)
        assert cluster.ledger == ref_cluster.ledger


@pytest.mark.parametrize("seed", [0, 1])
def test_fk_kmeans_does_not_depend_on_n_jobs(parts, seed):
    fit = lambda c, s: fk_kmeans(c, 5, n_random_features=40, max_iter=4,  # noqa: E731
                                 coreset_size=200, n_refine=2, random_state=s)
    (reference, ref_cluster), *others = _models(fit, parts, seed)
    for result, cluster in others:
        np.testing.assert_array_equal(result.labels, reference.labels)
        np.testing.assert_array_equal(result.model.centers, reference.model.centers)
        assert cluster.ledger == ref_cluster.ledger


def test_vertical_one_shot_does_not_depend_on_n_jobs(parts):
    X = np.vstack(parts)[:300]
    blocks = [X[:, :20], X[:, 20:40], X[:, 40:]]
    fit = lambda c, s: one_shot_kpca(c, make_kernel("rbf", gamma=0.02), 3,  # noqa: E731
                                     n_local_components=10)
    (reference, ref_cluster), *others = _models(fit, blocks, 0)
    for model, cluster in others:
        np.testing.assert_array_equal(model.eigenvectors, reference.eigenvectors)
        assert cluster.ledger == ref_cluster.ledger
