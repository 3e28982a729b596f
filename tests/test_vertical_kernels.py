"""The vertical one-shot KPCA with scikit-learn's sigmoid and chi2 kernels (issue 13, A.3)."""

import numpy as np
import pytest
from sklearn.decomposition import KernelPCA
from sklearn.metrics.pairwise import pairwise_kernels

from kernelscale import VerticalKernelPCA
from kernelscale.backends.local import LocalCluster
from kernelscale.kernels import make_kernel
from kernelscale.partition import feature_block_partition
from kernelscale.vertical import one_shot_kpca, vertical_transform

PARAMS = {"sigmoid": {"gamma": 0.02, "coef0": 0.5}, "chi2": {"gamma": 0.05}}


def _data(seed, n=50, d=9):
    rng = np.random.default_rng(seed)
    return np.abs(rng.normal(size=(n, 3)) @ rng.normal(size=(3, d))
                  + 0.3 * rng.normal(size=(n, d)))  # chi2 needs x >= 0


def _parties(X, blocks=3):
    return [X[:, cols] for cols in feature_block_partition(X.shape[1], blocks)]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("name", list(PARAMS))
def test_full_local_spectra_fuse_to_the_global_kernel(name, seed):
    """D = n: every party sends its whole local kernel, so K_hat is the global kernel and
    fit and out-of-sample projection are scikit-learn's KernelPCA (to round-off)."""
    X, new = _data(seed), _data(seed + 10)[:8]
    params = PARAMS[name]
    kernel = make_kernel(name, **params)
    model = one_shot_kpca(LocalCluster(_parties(X)), kernel, 3, X.shape[0],
                          keep_fused_kernel=True)
    K = pairwise_kernels(X, metric=name, filter_params=True, **params)
    np.testing.assert_allclose(model.fused_kernel, K, atol=1e-10)
    theirs = KernelPCA(3, kernel="precomputed", eigen_solver="dense").fit(K)
    np.testing.assert_allclose(model.eigenvalues, theirs.eigenvalues_, rtol=1e-8)
    stacked = [np.vstack([a, b]) for a, b in zip(_parties(X), _parties(new), strict=True)]
    Z = vertical_transform(LocalCluster(stacked), model, chunk_size=5)
    expected = theirs.transform(pairwise_kernels(new, X, metric=name, filter_params=True,
                                                 **params))
    signs = np.sign(np.sum(Z * expected, axis=0))
    np.testing.assert_allclose(Z * signs, expected, atol=1e-7 * np.abs(expected).max())


def test_estimator_takes_sigmoid_chi2_and_the_polynomial_alias():
    X = _data(0)
    for kernel, params in [("sigmoid", PARAMS["sigmoid"]), ("chi2", PARAMS["chi2"]),
                           ("polynomial", {"gamma": 0.1, "degree": 2})]:
        est = VerticalKernelPCA(2, n_local_components=50, kernel=kernel, feature_blocks=3,
                                **params).fit(X)
        assert est.transform(X[:4]).shape == (4, 2)
        assert "raw_points" not in est.communication_.words_by_kind(phase=None)
