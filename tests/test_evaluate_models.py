"""distributed_error on every kind of fitted model, and plain Python floats out."""

from __future__ import annotations

import numpy as np
import pytest

from kernelscale import DistributedKernelPCA, StreamingKernelPCA
from kernelscale.backends.local import LocalCluster
from kernelscale.horizontal.evaluate import distributed_error
from kernelscale.metrics.lowrank import lowrank_error


def _data(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((90, 5))


@pytest.mark.parametrize("method", ["skpca", "rnca", "nystrom"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_streaming_model_error_matches_its_definition(method, seed):
    """err = sum k(a, a) - sum ||transform(a)||^2 of the estimator, over the workers' rows."""
    X = _data(seed)
    est = StreamingKernelPCA(n_components=3, gamma=0.1, n_random_features=60, sketch_size=10,
                             method=method, random_state=seed).fit(X)
    cluster = LocalCluster([X[:20], X[20:55], X[55:]])
    result = distributed_error(cluster, est)
    captured = float(np.sum(est.transform(X) ** 2))
    assert result["n_samples"] == 90
    np.testing.assert_allclose(result["trace"], 90.0, rtol=1e-12)  # rbf: k(a, a) = 1
    np.testing.assert_allclose(result["captured"], captured, rtol=1e-10)
    np.testing.assert_allclose(result["error"], 90.0 - captured, rtol=1e-10)
    if method == "nystrom":  # orthonormal directions in the kernel's own feature space
        assert 0 < result["captured"] <= result["trace"] * (1 + 1e-9)
    # the same as the in-memory measure, and only the model travels (phase evaluate)
    from kernelscale.horizontal.evaluate import StreamingModel

    np.testing.assert_allclose(lowrank_error(StreamingModel(est), X)["error"],
                               result["error"], rtol=1e-10)
    assert cluster.ledger.total_words("fit") == 0
    assert cluster.ledger.total_words("evaluate") > 0


def test_distributed_error_rejects_what_it_cannot_measure():
    X = _data(0)
    cluster = LocalCluster([X])
    with pytest.raises(TypeError, match="distributed_error measures a KernelPCAModel or "
                       "RandomFeaturePCAModel .* and a fitted StreamingKernelPCA; got dict"):
        distributed_error(cluster, {"components": np.eye(2)})
    with pytest.raises(ValueError, match="StreamingKernelPCA is not fitted"):
        distributed_error(cluster, StreamingKernelPCA())


def test_an_estimator_is_measured_by_its_model():
    X = _data(3)
    est = DistributedKernelPCA(n_components=2, gamma=0.1, n_landmarks=30, center=False,
                               random_state=0).fit(X)
    by_model = distributed_error(LocalCluster([X[:40], X[40:]]), est.model_)
    by_estimator = distributed_error(LocalCluster([X[:40], X[40:]]), est)
    assert by_model == by_estimator


@pytest.mark.parametrize("center", [False, True])
def test_approximation_error_returns_python_floats(center):
    X = _data(4)
    est = DistributedKernelPCA(n_components=2, gamma=0.1, n_landmarks=30, center=center,
                               random_state=0).fit(X)
    result = est.approximation_error(X)
    assert set(result) == {"trace", "captured", "error", "n_samples", "opt", "ratio",
                           "excess_ratio"}
    for key, value in result.items():
        assert type(value) is (int if key == "n_samples" else float), (key, type(value))
    streaming = StreamingKernelPCA(n_components=2, gamma=0.1, random_state=0).fit(X)
    for key, value in distributed_error(LocalCluster([X]), streaming).items():
        assert type(value) is (int if key == "n_samples" else float), (key, type(value))
