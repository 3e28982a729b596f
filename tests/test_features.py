"""Tests of kernelscale.features: invariants, convergence to the exact kernel, properties."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelscale.features import (
    ArcCosineFeatures,
    IdentityFeatures,
    RandomFourierFeatures,
    TensorSketch,
    make_feature_map,
)
from kernelscale.kernels import make_kernel

D = 5
SEEDS = range(5)

# Kernels used in the statistical checks, each with a constant C such that, for
# rows on the unit sphere, every Gram entry's error has standard deviation at
# most sigma = C_0 / sqrt(m); the test bound is C = 5 C_0 (5 sigma: with
# 20 x 21 / 2 entries and 5 seeds the normal-tail chance of a false failure is
# about 1e-3 even before the fixed seeds make the test deterministic).
#   RFF: each term 2 cos(w.x + b) cos(w.y + b) = cos(w.(x-y)) + cos(w.(x+y) + 2b)
#        has second moment <= 1 + 1/2, so C_0 = sqrt(1.5).
#   TensorSketch, degree q: Var <= (3^q - 1) k(x,x) k(y,y) / m (Pham & Pagh 2013,
#        Lemma 2 type bound), and k(x,x) = (gamma + coef0)^q = 1 here.
#   Arc-cosine, order n: each term 2 step step (w.x)^n (w.y)^n has second moment
#        <= 4 E[step(g) g^(4n)] = 2 (4n - 1)!! for unit x, y (Cauchy-Schwarz).
KERNEL_CASES = [
    (make_kernel("rbf", gamma=0.5), 5 * np.sqrt(1.5)),
    (make_kernel("laplacian", gamma=0.3), 5 * np.sqrt(1.5)),
    (make_kernel("poly", gamma=0.5, coef0=0.5, degree=2), 5 * np.sqrt(8.0)),
    (make_kernel("poly", gamma=0.5, coef0=0.5, degree=3), 5 * np.sqrt(26.0)),
    (make_kernel("arccos", order=0), 5 * np.sqrt(2.0)),
    (make_kernel("arccos", order=1), 5 * np.sqrt(6.0)),
    (make_kernel("arccos", order=2), 5 * np.sqrt(210.0)),
]
KERNEL_IDS = ["rbf", "laplacian", "poly2", "poly3", "arccos0", "arccos1", "arccos2"]


def unit_rows(n: int = 20, d: int = D, seed: int = 0) -> np.ndarray:
    X = np.random.default_rng(seed).standard_normal((n, d))
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def sparse_rows(n: int = 30, d: int = D, seed: int = 1) -> sp.csr_matrix:
    return sp.random(n, d, density=0.4, format="csr", random_state=seed) * 3.0


MAPS = {
    "rff-rbf": lambda seed: RandomFourierFeatures(D, 64, gamma=0.5, kernel="rbf", seed=seed),
    "rff-laplacian": lambda seed: RandomFourierFeatures(D, 64, 0.3, "laplacian", seed),
    "tensorsketch": lambda seed: TensorSketch(D, 64, degree=3, gamma=0.5, coef0=1.0, seed=seed),
    "tensorsketch-deg1": lambda seed: TensorSketch(D, 16, degree=1, seed=seed),
    "arccos0": lambda seed: ArcCosineFeatures(D, 64, order=0, seed=seed),
    "arccos2": lambda seed: ArcCosineFeatures(D, 64, order=2, seed=seed),
}


# ---------------------------------------------------------------- invariants


@pytest.mark.parametrize("name", list(MAPS))
def test_same_seed_same_map_different_seed_different(name):
    X = unit_rows()
    Z = MAPS[name](3)(X)
    assert Z.shape == (20, MAPS[name](3).n_components)
    np.testing.assert_array_equal(Z, MAPS[name](3)(X))
    assert not np.allclose(Z, MAPS[name](4)(X))


@pytest.mark.parametrize("name", list(MAPS))
def test_chunked_and_sparse_match_dense(name):
    fmap = MAPS[name](7)
    X = sparse_rows()
    ref = fmap.transform(X.toarray())
    np.testing.assert_allclose(fmap.transform(X.toarray(), chunk_size=7), ref, atol=1e-12)
    np.testing.assert_allclose(fmap.transform(X, chunk_size=4), ref, atol=1e-12)
    np.testing.assert_allclose(fmap(X.tocoo()), ref, atol=1e-12)


def test_sparse_input_is_densified_one_chunk_at_a_time(monkeypatch):
    calls = []
    original = sp.csr_matrix.toarray

    def spy(self, *args, **kwargs):
        calls.append(self.shape[0])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(sp.csr_matrix, "toarray", spy)
    X = sp.csr_matrix(sparse_rows())
    IdentityFeatures(D).transform(X, chunk_size=8)
    assert calls and max(calls) <= 8


def test_dtype_and_integer_input():
    fmap = RandomFourierFeatures(D, 32, gamma=1.0, seed=0)
    X = np.arange(3 * D).reshape(3, D)
    Z32 = fmap.transform(X, dtype=np.float32)
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, fmap.transform(X.astype(float)), atol=1e-6)


def test_identity_and_attributes():
    X = sparse_rows()
    fmap = IdentityFeatures(D)
    assert (fmap.n_features_in, fmap.n_components, fmap.seed) == (D, D, None)
    np.testing.assert_array_equal(fmap(X, chunk_size=3), X.toarray())
    rff = RandomFourierFeatures(D, 10, gamma=1.0, seed=5)
    assert (rff.n_features_in, rff.n_components, rff.seed) == (D, 10, 5)


def test_make_feature_map_picks_the_map():
    cases = {
        "rbf": (make_kernel("rbf", gamma=1.0), RandomFourierFeatures),
        "laplacian": (make_kernel("laplacian", gamma=1.0), RandomFourierFeatures),
        "poly": (make_kernel("poly", gamma=1.0, degree=2, coef0=0.0), TensorSketch),
        "arccos": (make_kernel("arccos", order=2), ArcCosineFeatures),
        "linear": (make_kernel("linear"), IdentityFeatures),
    }
    for kernel, cls in cases.values():
        fmap = make_feature_map(kernel, D, 40, seed=2)
        assert type(fmap) is cls
        assert fmap.n_components == (D if cls is IdentityFeatures else 40)
    assert make_feature_map(cases["laplacian"][0], D, 40, 2).kernel == "laplacian"
    assert make_feature_map(cases["poly"][0], D, 40, 2).degree == 2
    assert make_feature_map(cases["arccos"][0], D, 40, 2).order == 2


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: RandomFourierFeatures(D, 0, gamma=1.0, seed=0), "n_components"),
        (lambda: RandomFourierFeatures(D, 8, gamma=1.0, seed=1.5), "seed"),
        (lambda: RandomFourierFeatures(D, 8, gamma=1.0, seed=-1), "seed"),
        (lambda: RandomFourierFeatures(D, 8, gamma=-1.0, seed=0), "gamma"),
        (lambda: RandomFourierFeatures(D, 8, gamma=1.0, kernel="poly", seed=0), "rbf"),
        (lambda: TensorSketch(D, 8, degree=0, seed=0), "degree"),
        (lambda: TensorSketch(D, 8, coef0=-1.0, seed=0), "coef0"),
        (lambda: ArcCosineFeatures(D, 8, order=3, seed=0), "order"),
        (lambda: IdentityFeatures(0), "n_features_in"),
        (lambda: make_feature_map(make_kernel("rbf", gamma=1.0), D, 8, seed="a"), "seed"),
    ],
)
def test_bad_parameters_raise(build, match):
    with pytest.raises(ValueError, match=match):
        build()


def test_bad_input_raises():
    fmap = ArcCosineFeatures(D, 8, order=1, seed=0)
    with pytest.raises(ValueError, match="n_features_in=5"):
        fmap(np.ones((3, D + 1)))
    with pytest.raises(ValueError, match="2-D"):
        fmap(np.ones(D))
    with pytest.raises(ValueError, match="chunk_size"):
        fmap(np.ones((3, D)), chunk_size=0)
    with pytest.raises(TypeError, match="Kernel"):
        make_feature_map("rbf", D, 8, 0)


# ------------------------------------------------- convergence to the kernel


def _gram(kernel, m: int, seed: int, X: np.ndarray) -> np.ndarray:
    Z = make_feature_map(kernel, X.shape[1], m, seed)(X)
    return Z @ Z.T


def _max_error(kernel, m: int, seed: int, X: np.ndarray) -> float:
    return float(np.abs(_gram(kernel, m, seed, X) - kernel(X, X)).max())


@pytest.mark.parametrize("kernel, C", KERNEL_CASES, ids=KERNEL_IDS)
def test_gram_error_within_bound_and_shrinks_with_m(kernel, C):
    X = unit_rows()
    small, large = 512, 16 * 512
    err_small = [_max_error(kernel, small, s, X) for s in SEEDS]
    err_large = [_max_error(kernel, large, s, X) for s in SEEDS]
    assert max(err_small) <= C / np.sqrt(small)
    assert max(err_large) <= C / np.sqrt(large)
    # Error ~ 1/sqrt(m): 16x the features should cut it about 4x; ask for 2x.
    assert np.mean(err_large) <= 0.5 * np.mean(err_small)


@pytest.mark.parametrize("kernel, C", KERNEL_CASES[:4], ids=KERNEL_IDS[:4])
def test_gram_is_unbiased_over_seeds(kernel, C):
    # The mean of 40 independent Gram estimates has error sd <= C_0 / sqrt(40 m).
    X = unit_rows(n=8, seed=3)
    m, n_seeds = 128, 40
    mean = np.mean([_gram(kernel, m, s, X) for s in range(n_seeds)], axis=0)
    assert np.abs(mean - kernel(X, X)).max() <= C / np.sqrt(m * n_seeds)


def test_tensorsketch_on_sparse_matches_kernel():
    kernel = make_kernel("poly", gamma=0.5, coef0=0.5, degree=2)
    X = sparse_rows(n=12, seed=4)
    X = sp.csr_matrix(X.multiply(1.0 / np.sqrt(X.multiply(X).sum(axis=1) + 1e-12)))
    Z = make_feature_map(kernel, D, 8192, seed=0)(X)
    assert np.abs(Z @ Z.T - kernel(X, X)).max() <= 5 * np.sqrt(8.0 / 8192)


# ---------------------------------------------------------------- properties


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    chunk_size=st.integers(1, 40),
    name=st.sampled_from(sorted(MAPS)),
)
def test_transform_is_independent_of_chunking(seed, chunk_size, name):
    fmap = MAPS[name](seed)
    X = sparse_rows(n=33)
    np.testing.assert_allclose(
        fmap(X, chunk_size=chunk_size), fmap(X.toarray(), chunk_size=1000), atol=1e-12
    )


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), gamma=st.floats(0.01, 10.0))
def test_rff_diagonal_mean_is_one(seed, gamma):
    # ||z(x)||^2 = 1 + (1/m) sum cos(2 w.x + 2 b): mean of m terms bounded by 1 with
    # uniform phases, sd <= 1 / sqrt(2 m); 6 sd bound (k(x, x) = 1).
    m = 2048
    Z = RandomFourierFeatures(D, m, gamma=gamma, seed=seed)(unit_rows(n=6))
    assert np.abs((Z**2).sum(axis=1) - 1.0).max() <= 6.0 / np.sqrt(2 * m)
