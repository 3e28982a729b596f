"""dtype preserved as in scikit-learn: float32 in, float32 out, for every estimator."""

import numpy as np
import pytest

from kernelscale.datasets import load_digits_standardized


@pytest.fixture(scope="module")
def parts():
    X, _ = load_digits_standardized()
    return [X[:300]]


TRANSFORMERS = [
    ("DistributedKernelPCA", dict(n_components=3, n_landmarks=30, fit_inverse_transform=True,
                                  random_state=0)),
    ("DistributedKernelPCA", dict(n_components=3, method="random_features",
                                  n_random_features=100, random_state=0)),
    ("FederatedKernelKMeans", dict(n_clusters=3, max_iter=3, random_state=0)),
    ("DistributedSpectralClustering", dict(n_clusters=3, n_landmarks=30, random_state=0)),
    ("VerticalKernelPCA", dict(n_components=3, n_local_components=8, feature_blocks=2)),
    ("StreamingKernelPCA", dict(n_components=3, n_random_features=100, sketch_size=10,
                                random_state=0)),
]


@pytest.mark.parametrize("name, params", TRANSFORMERS)
def test_float32_in_gives_float32_out(parts, name, params):
    """dtype preserved as in scikit-learn; the values are the float64 ones, rounded once."""
    import kernelscale

    X = np.vstack(parts)[:200]
    X32 = X.astype(np.float32)
    est = getattr(kernelscale, name)(**params).fit(X)
    Z64, Z32 = est.transform(X32.astype(np.float64)), est.transform(X32)
    assert Z64.dtype == np.float64 and Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, Z64, rtol=1e-5, atol=1e-5 * np.abs(Z64).max())
    fitted32 = getattr(kernelscale, name)(**params).fit_transform(X32)
    assert fitted32.dtype == np.float32
    if getattr(est, "fit_inverse_transform", False):
        assert est.inverse_transform(Z32).dtype == np.float32
        assert est.inverse_transform(Z64).dtype == np.float64
