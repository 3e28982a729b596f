"""DistributedKernelPCA as a drop-in for scikit-learn's KernelPCA (issue 33).

scikit-learn's own KernelPCA tests run in tests/test_sklearn_kernel_pca.py; here:
the fitted attributes against scikit-learn's on the same data, what an explicit
``n_landmarks`` / ``method`` means, and the refusals of what cannot work.
"""

import numpy as np
import pytest
from sklearn.decomposition import KernelPCA
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from threadpoolctl import threadpool_limits

from kernelscale import DistributedKernelPCA, median_heuristic
from kernelscale.datasets import load_digits_standardized
from kernelscale.horizontal.budget import WordBudgetError
from kernelscale.horizontal.forecast import forecast_words
from kernelscale.model import save_model


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """One BLAS thread for the master's small eigenproblems: on the shared 2-core machine,
    two threads made a 300 x 300 solve 20x slower (8 s against 0.4 s) under load."""
    with threadpool_limits(1):
        yield


SEEDS = [0, 1, 2]


def _data(seed, n=80, d=5):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal((20, d))


def _exact(**kwargs):
    return DistributedKernelPCA(method="exact", n_workers=1, **kwargs)


def _same_up_to_sign(A, B, atol):
    signs = np.sign(np.sum(A * B, axis=0))
    np.testing.assert_allclose(A * signs, B, atol=atol)


# ------------------------------------------------ 1. scikit-learn's names and meanings

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("solver", ["dense", "arpack", "randomized"])
def test_fitted_attributes_are_scikit_learns(solver, seed):
    """eigenvalues_, eigenvectors_, X_fit_, gamma_, X_transformed_fit_ and dual_coef_ hold
    scikit-learn's arrays (to 1e-8 relative; eigenvectors up to sign) for each solver."""
    X, X_new = _data(seed)
    params = dict(kernel="rbf", gamma=0.1, fit_inverse_transform=True, alpha=0.1,
                  eigen_solver=solver, random_state=seed)
    theirs = KernelPCA(6, **params).fit(X)
    ours = _exact(n_components=6, **params).fit(X)
    np.testing.assert_allclose(ours.eigenvalues_, theirs.eigenvalues_, rtol=1e-8)
    _same_up_to_sign(ours.eigenvectors_, theirs.eigenvectors_, atol=1e-6)
    np.testing.assert_array_equal(ours.X_fit_, X)  # one worker keeps X's order
    assert ours.gamma_ == theirs.gamma_ == 0.1
    _same_up_to_sign(ours.X_transformed_fit_, theirs.X_transformed_fit_, atol=1e-6)
    # dual_coef_ is the pre-image map (n_samples, n_features), as in scikit-learn
    assert ours.dual_coef_.shape == theirs.dual_coef_.shape == X.shape
    Z = theirs.transform(X_new)
    np.testing.assert_allclose(ours.inverse_transform(_signed_like(ours.transform(X_new), Z)),
                               theirs.inverse_transform(Z), atol=1e-6)
    # the projection coefficients have a name of their own
    assert ours.landmark_coef_.shape == (80, 6)
    np.testing.assert_allclose(ours.fit_transform(X), ours.transform(X), atol=1e-8)


def _signed_like(A, B):
    return A * np.sign(np.sum(A * B, axis=0))


@pytest.mark.parametrize("n_workers", [1, 3])
def test_exact_fit_transform_is_transform_in_the_rows_order(n_workers):
    """fit_transform takes the scores from the eigenvectors, in the order of X's rows."""
    X, _ = _data(2)
    est = DistributedKernelPCA(5, method="exact", n_workers=n_workers, random_state=0)
    np.testing.assert_allclose(est.fit_transform(X), est.transform(X), atol=1e-8)


def test_gamma_defaults_to_one_over_n_features():
    X, _ = _data(0, d=7)
    assert _exact(n_components=2).fit(X).gamma_ == pytest.approx(1 / 7)


def test_n_components_none_keeps_the_nonzero_components():
    """Linear kernel on rank-3 data: None keeps 3, as scikit-learn's KernelPCA()."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3)) @ rng.standard_normal((3, 6))
    ours = _exact(n_components=None, kernel="linear").fit(X)
    theirs = KernelPCA(kernel="linear").fit(X)
    assert ours.eigenvalues_.shape == theirs.eigenvalues_.shape == (3,)
    assert ours.transform(X).shape == (40, 3)
    removed = _exact(n_components=5, kernel="linear", remove_zero_eig=True).fit(X)
    assert removed.transform(X).shape == (40, 3)


def test_gridsearch_over_a_pipeline_with_our_estimator():
    """A user's GridSearchCV(Pipeline([... KernelPCA ...])) with ours substituted."""
    X, y = load_digits_standardized()
    X, y = X[:200], y[:200]
    pipe = Pipeline([("kpca", DistributedKernelPCA(10, kernel="rbf", method="exact",
                                                   n_workers=1)),
                     ("clf", LogisticRegression(max_iter=300))])
    search = GridSearchCV(pipe, {"kpca__gamma": [1e-3, 1e-2]}, cv=2).fit(X, y)
    assert search.best_score_ > 0.7


def test_precomputed_kernel_equals_the_kernel_itself(tmp_path):
    X, X_new = _data(1)
    est = _exact(n_components=4, kernel="rbf", gamma=0.2).fit(X)
    K, K_new = est.kernel_(X, X), est.kernel_(X_new, X)
    pre = _exact(n_components=4, kernel="precomputed").fit(K)
    _same_up_to_sign(pre.transform(K_new), est.transform(X_new), atol=1e-8)
    assert pre.communication_.total_words("fit") == 0 and pre.__sklearn_tags__(
    ).input_tags.pairwise
    with pytest.raises(ValueError, match="precomputed kernel matrix cannot be saved"):
        save_model(pre.model_, tmp_path / "model.npz")
    assert not (tmp_path / "model.npz").exists()
    with pytest.raises(ValueError, match="Cannot fit_inverse_transform with a precomputed"):
        _exact(kernel="precomputed", fit_inverse_transform=True).fit(K)


@pytest.mark.parametrize("method", ["diskpca", "uniform_dislr", "uniform_batch",
                                    "random_features"])
def test_distributed_methods_refuse_a_precomputed_kernel(method):
    K = np.eye(10)
    with pytest.raises(ValueError, match="method='exact' only.*distributed methods send"):
        DistributedKernelPCA(2, kernel="precomputed", method=method).fit(K)


def test_n_components_none_needs_the_exact_method():
    with pytest.raises(ValueError, match="n_components=None .* method='exact'"):
        DistributedKernelPCA(None, method="diskpca").fit(np.eye(20))


# ------------------------------------------------ 2. explicit means explicit

@pytest.fixture(scope="module")
def digits():
    X, _ = load_digits_standardized()
    return X, 1 / (2 * median_heuristic(X, 0.2, random_state=0) ** 2)  # a narrow RBF


def test_explicit_n_landmarks_is_the_number_used(digits):
    """The gallery's first fit: n_landmarks=200, method unset. It ran uniform + batch with
    430 landmarks before issue 33; now disKPCA with exactly 200, and it says why."""
    X, gamma = digits
    est = DistributedKernelPCA(10, gamma=gamma, n_landmarks=200, random_state=0).fit(X)
    assert est.method_ == "diskpca"
    assert est.landmarks_.shape[0] == 200
    assert est.communication_.upload_words("fit", kind="raw_points") == 200 * X.shape[1]
    assert "n_landmarks=200 was set" in est.budget_plan_.reason


def test_unset_n_landmarks_lets_the_pilot_choose(digits):
    """Left unset, the default's words (400 landmarks of disKPCA) are a budget within
    which the pilot chooses: on the narrow RBF, uniform + batch with more landmarks."""
    X, gamma = digits
    X = X[:900]
    est = DistributedKernelPCA(10, gamma=gamma, random_state=0).fit(X)
    default_words = forecast_words("diskpca", est.budget_plan_.sizing["n_rows"], X.shape[1],
                                   10, 400, kernel=est.kernel_, center=True).words
    assert est.budget_plan_.max_words == default_words
    assert est.method_ == est.budget_plan_.method == est.model_.info["method"]
    assert est.budget_plan_.pilot is not None and est.budget_plan_.reason


@pytest.mark.parametrize("method", [None, "uniform_dislr", "uniform_batch"])
def test_max_words_with_explicit_n_landmarks(digits, method):
    X, gamma = digits
    est = DistributedKernelPCA(10, gamma=gamma, n_landmarks=150, max_words=400_000,
                               method=method, random_state=0).fit(X)
    assert est.landmarks_.shape[0] == 150
    assert est.method_ == (method or "diskpca")
    assert est.communication_.total_words("fit") <= 400_000
    assert "|Y| = 150" in est.budget_plan_.reason


def test_explicit_n_landmarks_beyond_the_budget_is_an_error(digits):
    X, gamma = digits
    with pytest.raises(WordBudgetError, match="n_landmarks=300 does not fit in "
                                              "max_words=20,000"):
        DistributedKernelPCA(10, gamma=gamma, n_landmarks=300, max_words=20_000).fit(X)


def test_docstring_examples_run():
    """The Examples of DistributedKernelPCA's docstring are doctests."""
    import doctest

    import kernelscale.horizontal.estimator as module

    assert doctest.testmod(module).failed == 0


# ------------------------------------------------ the eigensolvers (kernelscale.linalg)

@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("solver", ["dense", "arpack", "randomized"])
def test_top_eigenpairs_on_a_known_spectrum(solver, seed):
    """A 60 x 60 matrix with eigenvalues 2^-i: every solver finds the top 5 (1e-8)."""
    from kernelscale.eigensolvers import top_eigenpairs

    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((60, 60)))
    spectrum = 2.0 ** -np.arange(60)
    S = (Q * spectrum) @ Q.T
    w, V = top_eigenpairs(S, 5, solver, random_state=seed)
    np.testing.assert_allclose(w, spectrum[:5], rtol=1e-8)
    _same_up_to_sign(V, Q[:, :5], atol=1e-6)


def test_psd_eigenvalues_zeroes_round_off_and_refuses_negative_ones():
    from kernelscale.eigensolvers import psd_eigenvalues

    np.testing.assert_array_equal(psd_eigenvalues(np.array([4.0, 1e-13, -1e-9])), [4, 0, 0])
    with pytest.raises(ValueError, match="significant negative eigenvalues"):
        psd_eigenvalues(np.array([4.0, 1.0, -1e-3]))


# ------------------------------------------------ issue 44: every parameter on every method

@pytest.mark.parametrize("method", ["diskpca", "uniform_dislr", "uniform_batch", "exact",
                                    "random_features"])
def test_eigen_solver_applies_to_every_method(method):
    """The master's eigenproblem of every method is solved by the named solver: the same
    eigenvalues (1e-8) from each, and its iterations in n_iter_ (1 for the dense solver,
    iterated_power for the randomized one, ARPACK's products with the matrix)."""
    X, _ = _data(0, n=300)
    common = dict(n_components=4, gamma=0.2, method=method, n_landmarks=250,
                  n_random_features=250, random_state=0, n_workers=3)
    fits = {solver: DistributedKernelPCA(eigen_solver=solver, iterated_power=5,
                                         **common).fit(X)
            for solver in ("dense", "arpack", "randomized")}
    for est in fits.values():
        np.testing.assert_allclose(est.eigenvalues_, fits["dense"].eigenvalues_, rtol=1e-8)
    assert fits["dense"].n_iter_ == 1 and fits["randomized"].n_iter_ == 5
    assert fits["arpack"].n_iter_ >= 4
    # 'auto' is scikit-learn's rule on the master's matrix: ARPACK for k < 10 above 200 rows
    auto = DistributedKernelPCA(**common).fit(X)
    assert auto.n_iter_ == fits["arpack"].n_iter_


@pytest.mark.parametrize("messages", ["gram", "sketch"])
def test_eigen_solver_on_the_sketched_dislr_message(messages):
    X, _ = _data(1, n=200)
    common = dict(n_components=3, gamma=0.2, method="uniform_dislr", n_landmarks=40,
                  messages=messages, random_state=0, n_workers=2)
    dense = DistributedKernelPCA(eigen_solver="dense", **common).fit(X)
    arpack = DistributedKernelPCA(eigen_solver="arpack", **common).fit(X)
    np.testing.assert_allclose(arpack.eigenvalues_, dense.eigenvalues_, rtol=1e-8)
    _same_up_to_sign(arpack.transform(X), dense.transform(X), atol=1e-6)


@pytest.mark.parametrize("method", [None, "diskpca", "uniform_dislr", "uniform_batch"])
def test_the_preimage_round_is_in_the_forecast(method):
    """A budgeted fit with fit_inverse_transform: its forecast, pre-image round included,
    is the ledger's count to the word, within the budget."""
    X, _ = _data(2, n=600, d=20)  # exact KPCA would send 87,025 words
    est = DistributedKernelPCA(4, gamma=0.05, method=method, max_words=80_000,
                               fit_inverse_transform=True, random_state=0).fit(X)
    assert est.method_ != "exact"
    forecast = est.budget_plan_.forecast
    assert "pre-image: sums over rows" in forecast.words_by_round()
    assert forecast.words_by_round() == est.communication_.words_by_round("fit")
    assert est.communication_.total_words("fit") == forecast.words <= 80_000
