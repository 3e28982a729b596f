"""DistributedKernelPCA: scikit-learn contract, equivalence with the protocol, bad input."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks
from threadpoolctl import threadpool_limits

from kernelscale.backends.local import LocalCluster
from kernelscale.horizontal import DistributedKernelPCA, KernelPCA, diskpca, random_features_pca
from kernelscale.kernels import KERNELS, make_kernel
from kernelscale.linalg import as_generator, unique_rows
from kernelscale.metrics.lowrank import exact_kpca_reference, lowrank_error
from kernelscale.partition import make_partition, split
from kernelscale.runtime import Ledger


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """One BLAS thread for the master's small eigenproblems: on the shared 2-core machine,
    two threads made a 300 x 300 solve 20x slower (8 s against 0.4 s) under load."""
    with threadpool_limits(1):
        yield


SMALL = {"n_landmarks": 20, "embedding_dim": 8, "row_sketch_dim": 20, "n_random_features": 40}


@parametrize_with_checks([
    # Default settings for every kernel (about 1-2 s of checks each).
    *[DistributedKernelPCA(kernel=kernel) for kernel in KERNELS],
    DistributedKernelPCA(kernel="linear", method="uniform_batch"),
    DistributedKernelPCA(kernel="linear", method="random_features"),
    DistributedKernelPCA(n_components=2, random_state=0, **SMALL),
    DistributedKernelPCA(n_components=2, center=False, random_state=0, **SMALL),  # the papers'
    DistributedKernelPCA(kernel="cosine", method="uniform_dislr"),
    DistributedKernelPCA(method="exact", fit_inverse_transform=True),
    DistributedKernelPCA(fit_inverse_transform=True, n_components=2, random_state=0, **SMALL),
    # scikit-learn's KernelPCA() (issue 33), and an exact fit on a precomputed kernel
    DistributedKernelPCA(None, kernel="linear", method="exact", n_workers=1),
    DistributedKernelPCA(2, kernel="precomputed", method="exact"),
    DistributedKernelPCA(n_components=2, method="uniform_batch", kernel="poly", random_state=0,
                         **SMALL),
    DistributedKernelPCA(n_components=2, method="random_features", messages="sketch",
                         center=True, random_state=0, **SMALL),
    # the drop-in (issue 44), as shipped and with the pre-image map
    KernelPCA(),
    KernelPCA(kernel="rbf", fit_inverse_transform=True),
])
def test_sklearn_compatible(estimator, check):
    """scikit-learn's checks, none exempt: ``n_iter_`` is the master's eigensolver's
    (check_transformer_n_iter), inverse_transform exists only with the pre-image map
    (check_array_api_input calls it where it exists)."""
    with warnings.catch_warnings():
        # The checks fit on ~20 samples: budgets above n are capped with a warning, and
        # k = 10 exceeds the rank of their (linear, few-feature) data: zero components.
        warnings.filterwarnings("ignore", message="n_landmarks=", category=UserWarning)
        warnings.filterwarnings("ignore", message="n_workers=", category=UserWarning)
        warnings.filterwarnings("ignore", message=".* numerical rank", category=UserWarning)
        check(estimator)


@pytest.mark.parametrize("kernel", KERNELS)
def test_sparse_tag_follows_the_kernel(kernel):
    tags = DistributedKernelPCA(kernel=kernel).__sklearn_tags__()
    assert tags.input_tags.sparse == (kernel != "laplacian")


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("method, messages", [
    ("diskpca", "gram"), ("diskpca", "sketch"), ("uniform_dislr", "gram"),
    ("uniform_batch", "gram"), ("exact", "gram"), ("random_features", "gram"),
])
def test_rank_below_n_components_warns_and_zero_pads(method, messages, seed):
    """Linear kernel on rank-3 data with k = 5: 3 real components, 2 zero ones."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((120, 3)) @ rng.standard_normal((3, 6))
    est = _estimator(n_components=5, kernel="linear", method=method, messages=messages,
                     random_state=seed)
    with pytest.warns(UserWarning, match=r"numerical rank 3 < n_components=5: components "
                                         r"4\.\.5 are zero"):
        Z = est.fit_transform(X)
    assert Z.shape == (120, 5)
    assert not Z[:, 3:].any() and np.all(est.eigenvalues_[3:] == 0)
    assert np.all(np.abs(Z[:, :3]).max(axis=0) > 1e-6)
    assert est.get_feature_names_out().size == 5
    # Three directions capture everything: the error is 0 (up to round-off).
    result = est.approximation_error(X, reference=False)
    assert abs(result["error"]) <= 1e-8 * result["trace"]


def _data(n=150, d=5, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d))


def _estimator(**kwargs):
    params = {"n_components": 3, "gamma": 0.2, "n_workers": 3, "random_state": 0, **SMALL}
    return DistributedKernelPCA(**{**params, **kwargs})


def test_fit_partitions_equals_protocol_on_cluster():
    X = _data()
    parts = split(X, make_partition(150, 3, random_state=5))
    est = _estimator(method="diskpca", messages="sketch",
                     center=False).fit(parts)  # the paper's (uncentred)
    cluster = LocalCluster(parts)
    model = diskpca(cluster, make_kernel("rbf", gamma=0.2), n_components=3, messages="sketch",
                    random_state=0, **SMALL)
    np.testing.assert_array_equal(est.landmarks_, model.landmarks)
    np.testing.assert_array_equal(est.landmark_coef_, model.coef)
    np.testing.assert_array_equal(est.eigenvalues_, model.eigenvalues)
    assert isinstance(est.communication_, Ledger)
    assert est.communication_ == cluster.ledger
    assert est.n_features_in_ == 5
    np.testing.assert_allclose(est.transform(X), model.transform(X))


def test_fit_x_splits_with_the_partitioner_then_runs_the_protocol():
    X = _data()
    est = _estimator(method="diskpca", partition="uniform", center=False,
                     random_state=7).fit(X)
    rng = as_generator(7)
    parts = split(X, make_partition(150, 3, "uniform", random_state=rng))
    cluster = LocalCluster(parts)
    model = diskpca(cluster, make_kernel("rbf", gamma=0.2), n_components=3, random_state=rng,
                    **SMALL)
    np.testing.assert_array_equal(est.landmark_coef_, model.coef)
    assert est.communication_ == cluster.ledger
    # transform(x) = C^T k(Y, x) for an uncentred fit.
    np.testing.assert_allclose(est.transform(X),
                               est.kernel_(X, est.landmarks_) @ est.landmark_coef_, atol=1e-12)
    assert est.get_feature_names_out().tolist() == [
        "distributedkernelpca0", "distributedkernelpca1", "distributedkernelpca2"]


def test_random_features_method_matches_protocol():
    X = _data()
    parts = split(X, make_partition(150, 3, random_state=1))
    est = _estimator(method="random_features", center=False).fit(parts)
    model = random_features_pca(LocalCluster(parts), make_kernel("rbf", gamma=0.2),
                                n_components=3, n_random_features=40, random_state=0)
    np.testing.assert_allclose(est.transform(X), model.transform(X))
    assert not hasattr(est, "landmarks_")


def test_label_partition_uses_y():
    X, y = _data(), np.repeat([0, 1, 2], 50)
    est = _estimator(partition="label").fit(X, y)
    assert est.communication_.total_words("fit") > 0
    with pytest.raises(ValueError, match="needs the labels"):
        _estimator(partition="label").fit(X)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nonfinite_input(bad):
    X = _data()
    X[3, 2] = bad
    with pytest.raises(ValueError, match="NaN|infinity"):
        _estimator().fit(X)
    parts = [X[:70], X[70:]]
    with pytest.raises(ValueError, match="NaN|infinity"):
        _estimator().fit(parts)


def test_empty_partition():
    X = _data()
    with pytest.raises(ValueError, match="Partition 1 is empty"):
        _estimator().fit([X[:70], X[:0], X[70:]])


def test_partitions_with_different_feature_counts():
    X = _data()
    with pytest.raises(ValueError, match="different numbers of features"):
        _estimator().fit([X[:70], X[70:, :4]])


def test_n_components_larger_than_n_landmarks_or_n():
    X = _data(n=30)
    with pytest.raises(ValueError, match="n_components=25 exceeds n_landmarks=20"):
        _estimator(n_components=25).fit(X)
    with pytest.raises(ValueError, match="n_components=31 exceeds the number of samples"):
        _estimator(n_components=31, n_landmarks=40).fit(X)


@pytest.mark.parametrize("method", ["diskpca", "uniform_dislr", "uniform_batch"])
def test_n_landmarks_larger_than_n_warns_and_caps(method):
    X = _data(n=40)
    with pytest.warns(UserWarning, match="n_landmarks=100 exceeds the 40 samples; using 40"):
        est = _estimator(method=method, n_landmarks=100).fit(X)
    assert est.landmarks_.shape[0] == 40


@pytest.mark.parametrize("kwargs, error, match", [
    ({"kernel": "cosne"}, ValueError, r"'kernel' parameter .* str among .*'cosine'.* or a "
                                      r"callable. Got 'cosne'"),
    ({"gamma": -1.0}, ValueError, r"'gamma' parameter .* range \[0.0, inf\) or None. Got -1.0"),
    ({"method": "magic"}, ValueError, "'method' parameter .* str among .*'diskpca'"),
    ({"messages": "full"}, ValueError, "'messages' parameter .* str among .*'gram'"),
    ({"partition": "random"}, ValueError, "'partition' parameter .* str among .*'power_law'"),
    ({"backend": "spark"}, ValueError, "'backend' parameter .* str among .*'dask'"),
])
def test_bad_parameters(kwargs, error, match):
    with pytest.raises(error, match=match):
        _estimator(**kwargs).fit(_data())


def test_sparse_input_with_laplacian():
    X = sp.random(60, 8, density=0.3, format="csr", random_state=0)
    with pytest.raises(TypeError, match="laplacian kernel does not take sparse"):
        _estimator(kernel="laplacian").fit(X)
    est = _estimator(kernel="rbf").fit(X)
    assert sp.issparse(est.landmarks_)
    np.testing.assert_allclose(est.transform(X), est.transform(X.toarray()), atol=1e-10)


def test_duplicate_points_work():
    base = _data(n=40)
    X = np.vstack([base, base[:20], base[:5]])
    est = _estimator(n_landmarks=30).fit(X)
    assert unique_rows(est.landmarks_).size == est.landmarks_.shape[0]
    assert np.all(np.isfinite(est.transform(X)))
    # All points as the budget: K_YY holds every distinct point once, the fit is exact.
    est = _estimator(n_landmarks=40, method="uniform_dislr").fit(base)
    ref = exact_kpca_reference(base, est.kernel_, 3, center=True)
    assert lowrank_error(est.model_, base)["error"] == pytest.approx(ref["opt"], rel=1e-8)


@pytest.mark.parametrize("center", [False, True])
def test_approximation_error(center):
    X = _data()
    est = _estimator(center=center).fit(X)
    result = est.approximation_error(X)
    assert set(result) == {"trace", "captured", "error", "n_samples", "opt", "ratio",
                           "excess_ratio"}
    expected = lowrank_error(est.model_, X)
    assert result["error"] == pytest.approx(expected["error"], rel=1e-10)
    ref = exact_kpca_reference(X, est.kernel_, 3, center=center)
    assert result["opt"] == pytest.approx(ref["opt"], rel=1e-10)
    assert result["ratio"] == pytest.approx(result["error"] / ref["opt"])
    assert 0 <= result["excess_ratio"] < 1
    assert result["n_samples"] == 150
    no_ref = est.approximation_error([X[:50], X[50:]], reference=False)
    assert set(no_ref) == {"trace", "captured", "error", "n_samples"}
    assert no_ref["error"] == pytest.approx(result["error"], rel=1e-10)
    # Evaluation runs on its own cluster: the fit ledger is unchanged.
    assert est.communication_.phases() == ["setup", "fit"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_embedding_dtype_float32_similar_error_same_words(seed):
    X = _data(n=300, d=6, seed=seed)
    fits = {dtype: _estimator(embedding_dtype=dtype, random_state=seed, sampler="paper").fit(X)
            for dtype in ("float64", "float32")}
    assert fits["float32"].get_params()["embedding_dtype"] == "float32"
    w64 = fits["float64"].communication_.total_words()
    # The option costs one config word per worker; every other message is the same size.
    assert fits["float32"].communication_.total_words() == w64 + 3
    assert fits["float32"].landmarks_.shape == fits["float64"].landmarks_.shape
    excess = {d: est.approximation_error(X)["excess_ratio"] for d, est in fits.items()}
    # float32 only perturbs the sampling probabilities: the fit is as good (bound: +0.1).
    assert excess["float32"] < excess["float64"] + 0.1
    assert excess["float32"] < 0.5


def test_embedding_dtype_is_validated():
    with pytest.raises(ValueError, match="'embedding_dtype' parameter .* str among"):
        _estimator(embedding_dtype="float16").fit(_data())


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_centred_approximation_error_on_shifted_data_is_explicit_linear_error(seed):
    """Linear kernel, center=True, held-out shifted data: the explicit-feature error."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((200, 6)) * [4.0, 3.0, 2.0, 1.0, 0.5, 0.1]
    Z = rng.standard_normal((100, 6)) * 2.0 + 5.0
    est = _estimator(kernel="linear", center=True, random_state=seed).fit(X)
    V = est.landmarks_.T @ est.landmark_coef_  # phi(a) = a, V = Y^T C
    centred = Z - Z.mean(axis=0)
    expected = float(np.sum((centred - centred @ V @ V.T) ** 2))
    result = est.approximation_error(Z)
    assert result["error"] == pytest.approx(expected, rel=1e-8)
    assert result["ratio"] >= 1 - 1e-9
    assert result["trace"] == pytest.approx(float(np.sum(centred**2)), rel=1e-10)


@pytest.mark.parametrize("method", ["exact", "diskpca", "uniform_dislr", "uniform_batch"])
def test_a_flat_spectrum_keeps_every_component(method):
    """K ~ I (gamma=1e3 on 300 points in 5-d): every one of the 10 components captures 1.

    'exact' used to warn "numerical rank 7 < 10" and zero three components.
    """
    X = np.random.default_rng(0).standard_normal((300, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "numerical rank" warning either
        est = DistributedKernelPCA(n_components=10, gamma=1e3, method=method, n_landmarks=50,
                                   random_state=0).fit(X)
    np.testing.assert_allclose(est.eigenvalues_, 1.0, rtol=1e-8)
    reference = exact_kpca_reference(X, est.kernel_, 10, center=True)
    np.testing.assert_allclose(reference["eigenvalues"], 1.0, rtol=1e-8)


@pytest.mark.parametrize("sampler", ["ridge", "paper"])
def test_landmark_sampling_does_not_depend_on_the_data_scale(sampler):
    """A linear kernel is homogeneous: scaling X by 1e-7 scales K by 1e-14 and must not
    change which landmarks are drawn (the residual floor was absolute, 1e-12)."""
    X = np.random.default_rng(0).standard_normal((2000, 60)) * np.linspace(1, 3, 60)
    fits = [DistributedKernelPCA(n_components=5, kernel="linear", sampler=sampler,
                                 n_landmarks=40, center=False, random_state=0).fit(X * scale)
            for scale in (1.0, 1e-7)]
    np.testing.assert_allclose(fits[1].model_.landmarks, fits[0].model_.landmarks * 1e-7)
    np.testing.assert_allclose(fits[1].eigenvalues_, fits[0].eigenvalues_ * 1e-14, rtol=1e-8)
