"""Distributed coreset k-means (Balcan, Ehrlich, Liang 2013) on the runtime."""

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.metrics import normalized_mutual_info_score

from kernelscale.backends.local import LocalCluster
from kernelscale.federated.kmeans import distributed_kmeans, kmeans_on_workers
from kernelscale.partition import make_partition, split
from kernelscale.runtime import validate_cluster


def _blobs(n, seed, n_workers=4):
    X, y = make_blobs(n, centers=4, cluster_std=1.0, random_state=seed)
    idx = make_partition(n, n_workers, "power_law", random_state=seed)
    return LocalCluster(split(X, idx)), X[np.concatenate(idx)], y[np.concatenate(idx)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_central_kmeans_on_blobs(seed):
    cluster, X, y = _blobs(1200, seed)
    result = distributed_kmeans(cluster, 4, coreset_size=200, random_state=seed)
    central = KMeans(4, n_init=10, random_state=seed).fit(X)
    nmi_central = normalized_mutual_info_score(y, central.labels_)
    assert normalized_mutual_info_score(y, result.labels) >= nmi_central - 0.02
    # the coreset solution's cost is within 10% of the central one
    d2 = ((X[:, None, :] - result.centers[None]) ** 2).sum(-1).min(1).sum()
    assert d2 <= 1.1 * central.inertia_


def test_words_do_not_depend_on_n_and_count_the_coreset():
    words = []
    for n in (800, 1600):
        cluster, X, _ = _blobs(n, 0)
        distributed_kmeans(cluster, 4, coreset_size=150, random_state=0)
        ledger = cluster.ledger
        words.append(ledger.total_words())
        # exactly C sampled rows of d = 2 words travel as raw points
        assert ledger.upload_words(kind="raw_points") == 150 * X.shape[1]
        # labels go back only in the 'collect' phase, one word per point
        assert ledger.upload_words(phase="collect") == n
    assert words[0] == words[1]


def test_same_seed_same_result_and_ledger():
    a, _, _ = _blobs(600, 3)
    b, _, _ = _blobs(600, 3)
    ra = distributed_kmeans(a, 4, coreset_size=100, random_state=7)
    rb = distributed_kmeans(b, 4, coreset_size=100, random_state=7)
    np.testing.assert_array_equal(ra.labels, rb.labels)
    assert a.ledger == b.ledger


def test_refinement_and_responders():
    cluster, X, y = _blobs(900, 1)
    validate_cluster(cluster)
    responders = np.array([True, False, True, True])
    result = kmeans_on_workers(cluster, 4, coreset_size=100, random_state=0, n_refine=3,
                               responders=responders)
    assert result.labels.shape == (900,)
    assert result.coreset_sizes[1] == 0
    assert normalized_mutual_info_score(y, result.labels) > 0.8
    silent = [m for m in cluster.ledger.rounds("fit") if m.worker == 1 and m.direction
              == "worker->master"]
    assert silent == []


@pytest.mark.parametrize(
    "kwargs, message",
    [({"n_clusters": 0}, "n_clusters"), ({"n_clusters": 500}, "larger than"),
     ({"n_clusters": 2, "coreset_size": 0}, "coreset_size")],
)
def test_bad_parameters(kwargs, message):
    cluster, _, _ = _blobs(100, 0)
    with pytest.raises(ValueError, match=message):
        distributed_kmeans(cluster, **kwargs)


def test_bad_data_and_point_kind():
    X = np.ones((10, 2))
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        distributed_kmeans(LocalCluster([X, np.ones((5, 2))]), 2)
    cluster, _, _ = _blobs(100, 0)
    validate_cluster(cluster)
    with pytest.raises(ValueError, match="point_kind"):
        kmeans_on_workers(cluster, 2, point_kind="model")
