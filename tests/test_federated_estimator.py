"""scikit-learn contract of FederatedKernelKMeans and DistributedSpectralClustering."""

import numpy as np
import pytest
from sklearn.datasets import make_blobs
from sklearn.metrics import normalized_mutual_info_score
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernelscale.federated import DistributedSpectralClustering, FederatedKernelKMeans

FAST_FK = FederatedKernelKMeans(3, n_random_features=8, max_iter=2, coreset_size=30, n_refine=1,
                                random_state=0)
FAST_SC = DistributedSpectralClustering(3, n_landmarks=20, n_random_features=30, embedding_dim=5,
                                        coreset_size=30, n_refine=1, random_state=0)


@parametrize_with_checks([FAST_FK, FAST_SC])
def test_sklearn_contract(estimator, check):
    check(estimator)


@pytest.mark.parametrize("seed", [0, 1])
def test_fit_predict_and_new_points(seed):
    X, y = make_blobs(400, n_features=4, centers=3, random_state=seed)
    fk = FederatedKernelKMeans(3, n_random_features=20, max_iter=6, random_state=seed).fit(X)
    assert normalized_mutual_info_score(y, fk.labels_) > 0.9
    np.testing.assert_array_equal(fk.predict(X), fk.labels_)
    assert fk.transform(X[:5]).shape == (5, 3)
    assert fk.communication_.total_words(kind="raw_points", phase=None) == 0
    assert fk.n_iter_ == 6 and len(fk.ranks_) == 6
    sc = DistributedSpectralClustering(3, n_landmarks=60, random_state=seed).fit(X)
    assert normalized_mutual_info_score(y, sc.labels_) > 0.9
    np.testing.assert_array_equal(sc.predict(X), sc.labels_)


def test_same_seed_same_fit():
    X, _ = make_blobs(200, n_features=3, centers=3, random_state=0)
    a = FederatedKernelKMeans(3, n_random_features=15, max_iter=4, random_state=5).fit(X)
    b = FederatedKernelKMeans(3, n_random_features=15, max_iter=4, random_state=5).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.communication_ == b.communication_


def test_label_partition_and_errors():
    X, y = make_blobs(120, n_features=3, centers=3, random_state=0)
    fk = FederatedKernelKMeans(3, n_random_features=15, max_iter=3, partition="label",
                               random_state=0).fit(X, y)
    assert fk.labels_.shape == (120,)
    with pytest.raises(ValueError, match="needs the labels"):
        FederatedKernelKMeans(3, partition="label").fit(X)
    with pytest.raises(ValueError, match="'partition' parameter .* str among .*'uniform'"):
        FederatedKernelKMeans(3, partition="bogus").fit(X)
    with pytest.raises(ValueError, match="n_clusters"):
        DistributedSpectralClustering(0).fit(X)
