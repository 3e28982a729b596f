"""``kernelscale.KernelPCA`` against ``sklearn.decomposition.KernelPCA`` (issue 44).

The settings of scikit-learn's gallery examples that use KernelPCA, written here
in our own words (data, parameters, what is compared), each fitted by both
classes and compared array by array: scores up to a sign per component,
eigenvalues, the pre-image map and its reconstructions. Then what scikit-learn
cannot do: the exact fit refused before it allocates, and a distributed plan in
its place.
"""

import tracemalloc
import warnings

import numpy as np
import pytest
from sklearn import decomposition
from sklearn.datasets import load_digits, make_circles
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MinMaxScaler
from threadpoolctl import threadpool_limits

from kernelscale import DistributedKernelPCA, KernelPCA
from kernelscale.horizontal.exact_memory import MEMORY_LIMIT_ENV, ExactFitMemoryError


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """One BLAS thread, as in tests/test_sklearn_kernel_pca.py: the 1,000 x 1,000
    eigensolves ran 10x slower with two threads on the shared, loaded 2-core machine."""
    with threadpool_limits(1):
        yield


def _pair(**params):
    return KernelPCA(**params), decomposition.KernelPCA(**params)


def _same_up_to_sign(A, B, atol):
    signs = np.where(np.sum(A * B, axis=0) < 0, -1.0, 1.0)
    np.testing.assert_allclose(A * signs, B, atol=atol)


def _well_separated(eigenvalues, gap=1e-6):
    """Components whose eigenvalue is apart from its neighbours (their direction is
    determined; a near-tie's pair of directions is not) and above round-off."""
    w = np.asarray(eigenvalues)
    rel = np.abs(np.diff(w)) / w[0]
    apart = np.ones(w.size, bool)
    apart[:-1] &= rel > gap
    apart[1:] &= rel > gap
    return apart & (w > 1e-8 * w[0])


@pytest.fixture(scope="module")
def circles_split():
    """The current Kernel PCA example: 1,000 points on two circles, a stratified split."""
    X, y = make_circles(n_samples=1_000, factor=0.3, noise=0.05, random_state=0)
    X_train, X_test, _, _ = train_test_split(X, y, stratify=y, random_state=0)
    return X_train, X_test


def test_kernel_pca_example_every_component(circles_split):
    """n_components=None (every non-zero component), rbf gamma 10, the pre-image map with
    alpha 0.1: the same components, scores and reconstructions as scikit-learn's. Before
    issue 44 our reconstruction's RMSE on the test points was 0.160 against 0.108."""
    X_train, X_test = circles_split
    ours, theirs = _pair(n_components=None, kernel="rbf", gamma=10,
                         fit_inverse_transform=True, alpha=0.1)
    ours.fit(X_train)
    theirs.fit(X_train)
    assert ours.method_ == "exact" and ours.eigenvalues_.shape == theirs.eigenvalues_.shape
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-9,
                               atol=1e-12 * theirs.eigenvalues_[0])
    Z_ours, Z_theirs = ours.transform(X_test), theirs.transform(X_test)
    keep = _well_separated(theirs.eigenvalues_)
    assert keep[:2].all()  # the two components the example plots
    _same_up_to_sign(Z_ours[:, keep], Z_theirs[:, keep], atol=1e-7)
    back_ours, back_theirs = ours.inverse_transform(Z_ours), theirs.inverse_transform(Z_theirs)
    np.testing.assert_allclose(back_ours, back_theirs, atol=1e-8)
    rmse = np.sqrt(np.mean((back_ours - X_test) ** 2))
    assert rmse == pytest.approx(np.sqrt(np.mean((back_theirs - X_test) ** 2)), rel=1e-9)
    np.testing.assert_allclose(ours.dual_coef_, theirs.dual_coef_, atol=1e-6)


def test_first_kernel_pca_example_default_components():
    """The 2011 example: 400 points on two circles, KernelPCA(kernel='rbf',
    fit_inverse_transform=True, gamma=10) with the default n_components (every non-zero
    component): as many columns as scikit-learn's, and inverse_transform(fit_transform(X))
    is scikit-learn's reconstruction (it was about 0 before issue 44)."""
    X, _ = make_circles(n_samples=400, factor=0.3, noise=0.05, random_state=0)
    ours, theirs = _pair(kernel="rbf", fit_inverse_transform=True, gamma=10)
    Z_ours, Z_theirs = ours.fit_transform(X), theirs.fit_transform(X)
    assert Z_ours.shape == Z_theirs.shape and Z_ours.shape[1] > 200
    keep = _well_separated(theirs.eigenvalues_)
    _same_up_to_sign(Z_ours[:, keep], Z_theirs[:, keep], atol=1e-8)
    back_ours, back_theirs = ours.inverse_transform(Z_ours), theirs.inverse_transform(Z_theirs)
    np.testing.assert_allclose(back_ours, back_theirs, atol=1e-8)
    assert np.mean((back_ours - X) ** 2) < 0.1 * np.mean(X**2)  # not the collapse to 0
    np.testing.assert_allclose(np.abs(ours.X_transformed_fit_), np.abs(theirs.X_transformed_fit_),
                               atol=1e-8)


def test_digits_denoising_example():
    """The denoising example on scikit-learn's bundled digits (the example uses USPS from
    OpenML; no download here): pixels scaled to [0, 1], 1,000 training and 100 test images,
    Gaussian noise of scale 0.25, KernelPCA(400, rbf, gamma=1e-3, pre-image map with
    alpha=5e-3, random_state=42): the same denoised images as scikit-learn's."""
    X, y = load_digits(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    X_train, X_test, _, _ = train_test_split(X, y, stratify=y, random_state=0,
                                             train_size=1_000, test_size=100)
    rng = np.random.RandomState(0)
    X_test_noisy = X_test + rng.normal(scale=0.25, size=X_test.shape)
    X_train_noisy = X_train + rng.normal(scale=0.25, size=X_train.shape)
    ours, theirs = _pair(n_components=400, kernel="rbf", gamma=1e-3,
                         fit_inverse_transform=True, alpha=5e-3, random_state=42)
    ours.fit(X_train_noisy)
    theirs.fit(X_train_noisy)
    denoised_ours = ours.inverse_transform(ours.transform(X_test_noisy))
    denoised_theirs = theirs.inverse_transform(theirs.transform(X_test_noisy))
    np.testing.assert_allclose(denoised_ours, denoised_theirs, atol=1e-7)
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-8,
                               atol=1e-12 * theirs.eigenvalues_[0])


@pytest.mark.parametrize("n_components", [4, 40, 500])
def test_kernel_pca_approximation_example(n_components):
    """The approximation example at a quarter of its size: circles, rbf gamma 10, the
    pre-image map, n_components from a few to all the points (it used 4, 40 and 2,000 of
    2,000): fit_transform and the reconstructions are scikit-learn's."""
    X, _ = make_circles(n_samples=500, factor=0.3, noise=0.05, random_state=1)
    ours, theirs = _pair(n_components=n_components, kernel="rbf", fit_inverse_transform=True,
                         gamma=10)
    Z_ours, Z_theirs = ours.fit_transform(X), theirs.fit_transform(X)
    keep = _well_separated(theirs.eigenvalues_)
    _same_up_to_sign(Z_ours[:, keep], Z_theirs[:, keep], atol=1e-8)
    np.testing.assert_allclose(ours.inverse_transform(Z_ours), theirs.inverse_transform(Z_theirs),
                               atol=1e-8)


@pytest.mark.parametrize("n_components", [1, 6, 30])
def test_solvers_comparison_example(n_components):
    """The solvers benchmark's own checks, on ours: the linear kernel's projections of test
    points by ARPACK and the randomized solver equal the dense solver's (to 6 decimals, its
    assert_array_almost_equal), and the dense solver's equal scikit-learn's."""
    X, _ = make_circles(n_samples=600, factor=0.3, noise=0.05, random_state=0)
    X_train, X_test = X[:400], X[400:]
    dense = KernelPCA(n_components, eigen_solver="dense").fit(X_train).transform(X_test)
    for solver in ("arpack", "randomized"):
        other = KernelPCA(n_components, eigen_solver=solver).fit(X_train).transform(X_test)
        np.testing.assert_array_almost_equal(np.abs(other), np.abs(dense))
    theirs = decomposition.KernelPCA(n_components, eigen_solver="dense").fit(X_train)
    np.testing.assert_allclose(np.abs(dense), np.abs(theirs.transform(X_test)), atol=1e-10)


@pytest.mark.parametrize("solver", ["dense", "arpack", "randomized"])
def test_fitted_attributes_and_iterations(solver):
    X, _ = make_circles(n_samples=300, factor=0.3, noise=0.05, random_state=2)
    ours, theirs = _pair(n_components=5, kernel="rbf", gamma=2.0, eigen_solver=solver,
                         random_state=0, fit_inverse_transform=True)
    ours.fit(X)
    theirs.fit(X)
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-8)
    _same_up_to_sign(ours.eigenvectors_, theirs.eigenvectors_, atol=1e-6)
    assert ours.gamma_ == theirs.gamma_ and ours.X_fit_.shape == theirs.X_fit_.shape
    expected = {"dense": 1, "randomized": 7}  # 'auto' power iterations: k < n / 10
    if solver in expected:
        assert ours.n_iter_ == expected[solver]
    else:  # ARPACK's products with the matrix: at least one per Lanczos vector
        assert ours.n_iter_ >= 2 * 5
    assert ours.communication_.total_words() == 0  # one place: nothing sent


def test_kernel_params_reach_a_callable_kernel():
    def scaled_rbf(x, y, scale=1.0):
        return float(np.exp(-scale * np.sum((x - y) ** 2)))

    X, _ = make_circles(n_samples=80, factor=0.3, noise=0.05, random_state=3)
    ours, theirs = _pair(n_components=3, kernel=scaled_rbf, kernel_params={"scale": 4.0})
    _same_up_to_sign(ours.fit_transform(X), theirs.fit_transform(X), atol=1e-10)
    plain = KernelPCA(3, kernel="rbf", gamma=4.0).fit_transform(X)
    _same_up_to_sign(ours.fit_transform(X), plain, atol=1e-10)


def test_gamma_zero_is_allowed_as_in_scikit_learn():
    X, _ = make_circles(n_samples=50, random_state=0)
    ours, theirs = _pair(n_components=2, kernel="poly", gamma=0.0, degree=2)
    np.testing.assert_allclose(ours.fit(X).eigenvalues_, theirs.fit(X).eigenvalues_, atol=1e-12)
    DistributedKernelPCA(2, gamma=0.0, kernel="poly", method="uniform_dislr",
                         n_landmarks=20).fit(X)  # accepted, as scikit-learn accepts it


# ------------------------------------------------ beyond scikit-learn's memory

def _data(n=600, d=4, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d))


#: Rows where the exact fit (two 2,800 x 2,800 float64 copies: 120 MiB) exceeds
#: FALLBACK_LIMIT and a distributed plan (a worker thread, 64 MiB, and its |Y| x |Y|
#: matrices and blocks: 87 MiB; kernelscale.memory_plans) stays within it.
FALLBACK_ROWS, FALLBACK_LIMIT = 2_800, "100M"


def test_too_large_exact_fit_with_n_components_fits_a_distributed_plan(monkeypatch):
    """Above the memory available (here a 100 MiB limit, the exact fit needs 120 MiB),
    the fit says so and fits a distributed plan; its subspace is close to the exact one."""
    X = _data(n=FALLBACK_ROWS)
    exact = KernelPCA(5, kernel="rbf", gamma=0.3).fit(X)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, FALLBACK_LIMIT)
    with pytest.warns(UserWarning, match=r"exact fit of 2,800 points needs about 0\.1 GiB .* "
                                         r"more than the 0\.1 GiB available; fitted"):
        est = KernelPCA(5, kernel="rbf", gamma=0.3, random_state=0).fit(X)
    assert est.method_ != "exact" and not hasattr(est, "eigenvectors_")
    assert est.communication_.total_words("fit") > 0
    assert est.transform(X).shape == (FALLBACK_ROWS, 5)
    monkeypatch.delenv(MEMORY_LIMIT_ENV)  # the exact reference below needs the memory
    ratio = est.approximation_error(X)["ratio"]
    assert ratio == pytest.approx(exact.approximation_error(X)["ratio"], rel=0.05)


def test_distributed_plan_keeps_the_word_budget_and_learns_the_map(monkeypatch):
    X = _data(n=FALLBACK_ROWS, seed=1)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, FALLBACK_LIMIT)
    with pytest.warns(UserWarning, match="fitted"):
        est = KernelPCA(5, kernel="rbf", gamma=0.3, max_words=40_000, n_workers=3,
                        fit_inverse_transform=True, random_state=0).fit(X)
    assert est.communication_.total_words("fit") <= 40_000
    assert est.budget_plan_.max_words == 40_000
    back = est.inverse_transform(est.transform(X))
    assert np.mean((back - X) ** 2) < np.mean((X - X.mean(axis=0)) ** 2)


def test_every_component_above_the_memory_is_refused_before_allocating(monkeypatch):
    """n_components=None has no distributed plan: an error, raised before the n x n kernel
    matrix exists (the fit's peak traced memory stays far below its 72 MB)."""
    X = _data(n=3_000)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "16M")
    tracemalloc.start()
    try:
        with pytest.raises(ExactFitMemoryError, match=r"n_components=None keeps every "
                                                      r"component .* set n_components"):
            KernelPCA(kernel="rbf").fit(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 3_000**2 / 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # within the limit: no warning, the exact fit
        assert KernelPCA(2, kernel="rbf").fit(X[:500]).method_ == "exact"


def test_memory_limit_is_read_from_the_environment(monkeypatch):
    from kernelscale.horizontal.exact_memory import available_memory_bytes

    monkeypatch.setenv(MEMORY_LIMIT_ENV, "2.5G")
    assert available_memory_bytes() <= int(2.5 * 2**30)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "lots")
    with pytest.raises(ValueError, match="is not an amount of memory"):
        available_memory_bytes()
