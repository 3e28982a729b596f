"""Kernels against scikit-learn's pairwise kernels, arc-cosine against Monte Carlo."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.spatial.distance import pdist
from sklearn.metrics.pairwise import (
    laplacian_kernel,
    linear_kernel,
    polynomial_kernel,
    rbf_kernel,
)

from kernelscale.kernels import Kernel, make_kernel, median_heuristic, row_sq_norms
from kernelscale.linalg import gram

SEEDS = [0, 1, 2]


def _data(seed, n=37, m=23, d=6):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)), rng.standard_normal((m, d))


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(
    "kernel, reference",
    [
        (make_kernel("rbf", gamma=0.3), lambda X, Y: rbf_kernel(X, Y, gamma=0.3)),
        (make_kernel("laplacian", gamma=0.2), lambda X, Y: laplacian_kernel(X, Y, gamma=0.2)),
        (make_kernel("poly", gamma=0.5, degree=4, coef0=2.0),
         lambda X, Y: polynomial_kernel(X, Y, degree=4, gamma=0.5, coef0=2.0)),
        (make_kernel("linear"), linear_kernel),
    ],
    ids=["rbf", "laplacian", "poly", "linear"],
)
def test_kernels_match_sklearn(kernel, reference, seed):
    X, Y = _data(seed)
    # A chunk size that does not divide n exercises the chunk boundaries.
    np.testing.assert_allclose(kernel(X, Y, chunk_size=5), reference(X, Y), rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(kernel(X, X), reference(X, X), rtol=1e-10, atol=1e-12)


def _arccos_monte_carlo(X, Y, order, n_draws=400_000, seed=0):
    # Cho & Saul (2009), eq. (1): k_n(x, y) = 2 E_w[H(w.x) H(w.y) (w.x)^n (w.y)^n], w ~ N(0, I).
    W = np.random.default_rng(seed).standard_normal((n_draws, X.shape[1]))
    A, B = W @ X.T, W @ Y.T
    fa = (A > 0) * A**order
    fb = (B > 0) * B**order
    return 2.0 * (fa.T @ fb) / n_draws


@pytest.mark.parametrize("order", [0, 1, 2])
def test_arccos_matches_monte_carlo(order):
    X, Y = _data(order, n=4, m=3, d=3)
    exact = make_kernel("arccos", order=order)(X, Y)
    mc = _arccos_monte_carlo(X, Y, order)
    scale = np.sqrt(np.outer(row_sq_norms(X), row_sq_norms(Y))) ** order
    # 400k draws: standard error well below 2% of the scale for these small orders.
    assert np.max(np.abs(exact - mc) / scale) < 0.05


def test_arccos_order0_closed_form_and_psd():
    X, _ = _data(5, n=30)
    K0 = make_kernel("arccos", order=0)(X, X)
    cos = (X @ X.T.copy()) / np.outer(np.linalg.norm(X, axis=1), np.linalg.norm(X, axis=1))
    np.testing.assert_allclose(K0, 1.0 - np.arccos(np.clip(cos, -1, 1)) / np.pi, atol=1e-7)
    for order in (0, 1, 2):
        K = make_kernel("arccos", order=order)(X, X)
        np.testing.assert_allclose(K, K.T, atol=1e-10)
        w = np.linalg.eigvalsh(K)
        assert w.min() > -1e-8 * w.max()


ALL_KERNELS = [
    make_kernel("rbf", gamma=0.3),
    make_kernel("laplacian", gamma=0.2),
    make_kernel("poly", gamma=0.5, degree=3, coef0=1.0),
    make_kernel("linear"),
    make_kernel("arccos", order=0),
    make_kernel("arccos", order=1),
    make_kernel("arccos", order=2),
]


@pytest.mark.parametrize("kernel", ALL_KERNELS, ids=lambda k: f"{k.name}{k.order}")
def test_diag_equals_block_diagonal(kernel):
    X, _ = _data(7)
    # arccos(cos) near cos = 1 turns rounding of cos into sqrt(eps) ~ 1e-8 in the block.
    atol = 1e-7 if kernel.name == "arccos" else 1e-12
    np.testing.assert_allclose(kernel.diag(X), np.diag(kernel(X, X)), rtol=1e-9, atol=atol)


@pytest.mark.parametrize("kernel", [k for k in ALL_KERNELS if k.accepts_sparse],
                         ids=lambda k: f"{k.name}{k.order}")
def test_csr_equals_dense(kernel):
    X = sp.random(30, 12, density=0.3, format="csr", random_state=1)
    Y = sp.random(9, 12, density=0.3, format="csr", random_state=2)
    dense = kernel(X.toarray(), Y.toarray())
    np.testing.assert_allclose(kernel(X, Y, chunk_size=7), dense, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(kernel(X, Y.toarray()), dense, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(kernel.diag(X), kernel.diag(X.toarray()), rtol=1e-12)


@pytest.mark.parametrize("name", ["rbf", "poly", "linear"])
def test_float32_blocks_match_float64(name):
    """dtype=float32 (or float32 input) computes in float32; RBF loses no digits to an offset."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 6)) + 100.0  # far from the origin
    Y = X[:40] + 0.1 * rng.standard_normal((40, 6))
    kernel = make_kernel(name, gamma=0.1 if name == "rbf" else 1e-4)
    exact = kernel(X, Y)
    for block in (kernel(X, Y, dtype=np.float32, chunk_size=64),
                  kernel(X.astype(np.float32), Y.astype(np.float32))):
        assert block.dtype == np.float32
        np.testing.assert_allclose(block, exact, rtol=1e-5, atol=1e-5 * np.abs(exact).max())
    assert kernel(X.astype(np.float32), Y, dtype=np.float64).dtype == np.float64


def test_laplacian_rejects_csr():
    kernel = make_kernel("laplacian", gamma=1.0)
    X = sp.random(5, 3, density=0.5, format="csr", random_state=0)
    with pytest.raises(TypeError, match="laplacian kernel does not take sparse"):
        kernel(X, X.toarray())
    with pytest.raises(TypeError, match="sparse"):
        kernel.diag(X)


def test_sigma_is_gamma_alternative():
    X, Y = _data(3)
    sigma = 1.7
    by_sigma = make_kernel("rbf", sigma=sigma)
    assert by_sigma.gamma == pytest.approx(1.0 / (2 * sigma**2))
    np.testing.assert_allclose(by_sigma(X, Y), rbf_kernel(X, Y, gamma=1 / (2 * sigma**2)))


def test_default_gamma_is_one_over_n_features_and_dict_roundtrip():
    k = make_kernel("poly", degree=2, n_features=8)
    assert k.gamma == pytest.approx(1 / 8)
    for kernel in ALL_KERNELS:
        assert Kernel.from_dict(kernel.to_dict()) == kernel


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"name": "cosne"}, "Unknown kernel 'cosne'"),
        ({"name": "precomputed"}, "Unknown kernel 'precomputed'"),
        ({"name": "sigmoid", "gamma": 1.0, "coef0": np.nan}, "coef0 must be a finite"),
        ({"name": "chi2", "gamma": -1.0}, "gamma must be a finite number >= 0"),
        ({"name": "callable"}, "needs its function"),
        ({"name": "rbf", "gamma": -1.0}, "gamma must be a finite number >= 0"),
        ({"name": "poly", "gamma": np.inf}, "gamma must be a finite number >= 0"),
        ({"name": "rbf", "gamma": 1.0, "sigma": 1.0}, "either gamma or sigma"),
        ({"name": "rbf", "sigma": -2.0}, "sigma must be a positive"),
        ({"name": "laplacian", "sigma": 1.0}, "sigma is the RBF bandwidth"),
        ({"name": "rbf"}, "needs gamma"),
        ({"name": "poly", "gamma": 1.0, "degree": 0}, "degree must be a positive integer"),
        ({"name": "poly", "gamma": 1.0, "coef0": -1.0}, "coef0"),
        ({"name": "arccos", "order": 3}, "order 0, 1 or 2"),
    ],
)
def test_make_kernel_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_kernel(**kwargs)


def test_feature_mismatch_is_an_error():
    with pytest.raises(ValueError, match="features"):
        make_kernel("linear")(np.ones((2, 3)), np.ones((2, 4)))


def test_median_heuristic_matches_pdist():
    X, _ = _data(4, n=120)
    sigma = median_heuristic(X, scale=0.2, n_subset=10_000, random_state=0)
    assert sigma == pytest.approx(0.2 * np.median(pdist(X)), rel=1e-10)
    # A subset estimate is deterministic for a seed and close to the full median.
    a = median_heuristic(X, scale=1.0, n_subset=60, random_state=1)
    assert a == median_heuristic(X, scale=1.0, n_subset=60, random_state=1)
    assert abs(a - np.median(pdist(X))) < 0.2 * np.median(pdist(X))
    sparse_sigma = median_heuristic(sp.csr_matrix(X), n_subset=10_000, random_state=0)
    assert sparse_sigma == pytest.approx(sigma, rel=1e-10)


def test_median_heuristic_errors():
    with pytest.raises(ValueError, match="at least 2 rows"):
        median_heuristic(np.ones((1, 3)))
    with pytest.raises(ValueError, match="identical"):
        median_heuristic(np.ones((5, 3)))
    with pytest.raises(ValueError, match="scale must be positive"):
        median_heuristic(np.eye(3), scale=0.0)


def test_large_gram_blocks_match_direct_dot_products():
    # DESIGN.md hazard: numpy's OpenBLAS SYRK breaks on A @ A.T / A.T @ A at 30,000 x 28.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30_000, 28))
    G = gram(X, chunk_size=30_000)  # one full-size product of X with itself
    direct = np.array([[np.dot(X[:, j], X[:, k]) for k in range(28)] for j in range(28)])
    np.testing.assert_allclose(G, direct, rtol=1e-10, atol=1e-8)
    # A kernel block of X against a view of itself (same buffer) over all 30,000 rows.
    Y = X[:200]
    K = make_kernel("linear")(X, Y, chunk_size=30_000)
    rows = rng.choice(30_000, size=300, replace=False)
    direct_rows = np.einsum("id,jd->ij", X[rows], Y)
    np.testing.assert_allclose(K[rows], direct_rows, rtol=1e-10, atol=1e-10)
    for i, j in zip(rows[:20], range(20), strict=True):
        assert K[i, j] == pytest.approx(np.dot(X[i], X[j]), rel=1e-10, abs=1e-10)
    # A square symmetric block of one buffer with itself, as kernel(X, X) is called.
    Z = X[:3_000]
    K2 = make_kernel("linear")(Z, Z, chunk_size=3_000)
    pairs = rng.integers(0, 3_000, size=(200, 2))
    expected = np.einsum("id,id->i", Z[pairs[:, 0]], Z[pairs[:, 1]])
    np.testing.assert_allclose(K2[pairs[:, 0], pairs[:, 1]], expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.diag(K2), row_sq_norms(Z), rtol=1e-12)


# ----------------------------------------------------------------- scikit-learn's other kernels

def _rbf_of_rows(x, y):
    """A callable kernel with an import path (module-level, importable)."""
    return float(np.exp(-0.5 * np.sum((x - y) ** 2)))


PAIRWISE = [
    make_kernel("sigmoid", gamma=0.2, coef0=0.5),
    make_kernel("cosine"),
    make_kernel("chi2", gamma=0.7),
    make_kernel("additive_chi2"),
    make_kernel("polynomial", gamma=0.5, degree=2, coef0=1.0),
]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kernel", PAIRWISE, ids=lambda k: k.name)
def test_pairwise_kernels_match_scikit_learn(kernel, seed):
    from sklearn.metrics.pairwise import pairwise_kernels

    X, Y = (np.abs(a) for a in _data(seed))  # the chi2 kernels need x >= 0
    params = {"gamma": kernel.gamma, "degree": kernel.degree, "coef0": kernel.coef0}
    expected = pairwise_kernels(X, Y, metric=kernel.name, filter_params=True, **params)
    np.testing.assert_allclose(kernel(X, Y, chunk_size=5), expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(kernel.diag(X), np.diag(kernel(X, X)), rtol=1e-9, atol=1e-12)
    assert Kernel.from_dict(kernel.to_dict()) == kernel
    assert kernel.has_feature_map == (kernel.name == "poly")


def test_polynomial_is_an_alias_of_poly():
    assert make_kernel("polynomial", gamma=0.5) == make_kernel("poly", gamma=0.5)


@pytest.mark.parametrize("name", ["sigmoid", "cosine"])
def test_pairwise_kernels_take_csr(name):
    X = sp.random(30, 12, density=0.3, format="csr", random_state=1)
    Y = sp.random(9, 12, density=0.3, format="csr", random_state=2)
    kernel = make_kernel(name, n_features=12)
    dense = kernel(X.toarray(), Y.toarray())
    np.testing.assert_allclose(kernel(X, Y, chunk_size=7), dense, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(kernel.diag(X), kernel.diag(X.toarray()), rtol=1e-12)


@pytest.mark.parametrize("name", ["chi2", "additive_chi2"])
def test_chi2_kernels_reject_csr(name):
    X = sp.random(5, 3, density=0.5, format="csr", random_state=0)
    with pytest.raises(TypeError, match="does not take sparse"):
        make_kernel(name, n_features=3)(X, X)


def test_callable_kernel_matches_scikit_learn_and_travels_by_import_path():
    from sklearn.metrics.pairwise import pairwise_kernels

    X, Y = _data(0)
    kernel = make_kernel(_rbf_of_rows)
    assert kernel.name == "callable" and not kernel.has_feature_map
    np.testing.assert_allclose(kernel(X, Y, chunk_size=4),
                               pairwise_kernels(X, Y, metric=_rbf_of_rows), rtol=1e-14)
    np.testing.assert_allclose(kernel.diag(X), np.ones(X.shape[0]))
    params = kernel.to_dict()
    assert params == {"name": "callable", "function": f"{__name__}:_rbf_of_rows"}
    assert Kernel.from_dict(params) == kernel


def test_callable_without_import_path_is_known_in_this_process_only():
    from kernelscale.callables import is_importable

    kernel = make_kernel(lambda x, y: float(np.dot(x, y)))
    params = kernel.to_dict()
    assert params["function"].startswith("@local:") and not is_importable(kernel.function)
    assert Kernel.from_dict(params) == kernel          # same process: resolved
    assert kernel.to_dict() == params                  # one token per function
    with pytest.raises(ValueError, match="exists only in the process"):
        Kernel.from_dict({"name": "callable", "function": "@local:999999"})
    with pytest.raises(ValueError, match="Cannot import the callable kernel"):
        Kernel.from_dict({"name": "callable", "function": "no_such_module:f"})


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("n_features", [1, 5, 50, 784])
def test_identical_rows_are_at_distance_exactly_zero(seed, dtype, n_features):
    """k(x, x) = 1 exactly for RBF and Laplacian, whatever gamma and the row norms.

    The augmented GEMM's ``||x||^2 + ||y||^2 - 2 <x, y>`` left identical rows at a
    tiny non-zero distance: with gamma=1e300 many diagonal entries were 0.
    """
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((200, n_features)) * rng.lognormal(0.0, 2.0, (200, 1))
         + rng.choice([0.0, 1e3])).astype(dtype)
    perm = rng.permutation(200)
    huge = 1e300 if dtype == np.float64 else 1e30
    for name, gamma in [("rbf", huge), ("rbf", 1e3), ("rbf", 0.1), ("laplacian", huge)]:
        kernel = make_kernel(name, gamma=gamma)
        assert np.all(np.diag(kernel(X, X)) == 1.0), (name, gamma)
        # Identical rows in two different buffers (landmarks drawn from the data).
        assert np.all(kernel(X, X[perm])[perm, np.arange(200)] == 1.0), (name, gamma)
        if kernel.accepts_sparse:
            block = kernel(sp.csr_matrix(X), X[perm])
            assert np.all(block[perm, np.arange(200)] == 1.0), (name, gamma, "csr")


def test_rbf_with_huge_gamma_is_finite_and_diagonal():
    """gamma ||x||^2 beyond the float range: no NaN from inf - inf, just the identity."""
    X = np.random.default_rng(0).standard_normal((50, 5)) * 1e6
    K = make_kernel("rbf", gamma=1e300)(X, X)
    np.testing.assert_array_equal(K, np.eye(50))
