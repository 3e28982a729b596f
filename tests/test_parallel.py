"""Parallel in-process workers: the same model and ledger whatever ``n_jobs`` is."""

import numpy as np
import pytest

from kernelscale import make_kernel
from kernelscale.backends.local import LocalCluster
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


ESTIMATORS = [
    ("DistributedKernelPCA", dict(n_components=4, n_landmarks=40, random_state=0)),
    ("DistributedKernelPCA", dict(n_components=4, method="random_features",
                                  n_random_features=200, random_state=0)),
    ("FederatedKernelKMeans", dict(n_clusters=4, max_iter=3, random_state=0)),
    ("DistributedSpectralClustering", dict(n_clusters=4, n_landmarks=40, random_state=0)),
    ("VerticalKernelPCA", dict(n_components=3, n_local_components=8, feature_blocks=3)),
]


@pytest.mark.parametrize("name, params", ESTIMATORS)
def test_estimators_give_the_same_fit_for_any_n_jobs(parts, name, params):
    import kernelscale

    X = np.vstack(parts)[:300]
    fits = [getattr(kernelscale, name)(n_jobs=n_jobs, **params).fit(X) for n_jobs in (None, 2)]
    if hasattr(fits[0], "transform"):
        np.testing.assert_array_equal(fits[0].transform(X[:50]), fits[1].transform(X[:50]))
    else:
        np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
    assert fits[0].communication_ == fits[1].communication_


def test_a_bad_n_jobs_is_refused_before_any_work():
    from kernelscale import DistributedKernelPCA

    with pytest.raises(ValueError, match=r"'n_jobs' parameter .* range \(-inf, -1\], an int "
                                         r"in the range \[1, inf\) or None. Got 0"):
        DistributedKernelPCA(n_jobs=0).fit(np.ones((10, 3)))

