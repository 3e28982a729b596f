"""Tests of kernelscale.sketches: invariants, norm preservation, subspace embedding."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from kernelscale.sketches import (
    SRHT,
    ComposedSketch,
    CountSketch,
    GaussianSketch,
    fwht,
    intermediate_size,
    make_sketch,
)

NAMES = ["countsketch", "gaussian", "srht", "countsketch+gaussian"]
PARTIAL = ["countsketch", "gaussian", "countsketch+gaussian"]


def explicit(sketch) -> np.ndarray:
    """The n_out x n_in matrix of a sketch, through its own left()."""
    return sketch.left(np.eye(sketch.n_in))


def random_matrix(n: int, c: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, c))


# ---------------------------------------------------------------- invariants


def test_fwht_matches_hadamard_matrix():
    a = random_matrix(32, 3)
    np.testing.assert_allclose(fwht(a), scipy.linalg.hadamard(32) @ a, atol=1e-12)
    np.testing.assert_allclose(fwht(a[:, 0]), scipy.linalg.hadamard(32) @ a[:, 0], atol=1e-12)
    with pytest.raises(ValueError, match="power-of-2"):
        fwht(np.ones(12))


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_sketch_different_seed_different(name):
    M = random_matrix(50, 3)
    S = make_sketch(name, 50, 8, seed=11)
    assert (S.n_in, S.n_out, S.seed) == (50, 8, 11)
    out = S.left(M)
    assert out.shape == (8, 3)
    np.testing.assert_array_equal(out, make_sketch(name, 50, 8, seed=11).left(M))
    assert not np.allclose(out, make_sketch(name, 50, 8, seed=12).left(M))


@pytest.mark.parametrize("name", NAMES)
def test_left_right_sparse_and_vector_agree_with_explicit_matrix(name):
    S = make_sketch(name, 40, 6, seed=3)
    mat = explicit(S)
    M = sp.random(40, 5, density=0.3, format="csr", random_state=1)
    R = sp.random(7, 40, density=0.3, format="csr", random_state=2)
    np.testing.assert_allclose(S.left(M), mat @ M.toarray(), atol=1e-12)
    np.testing.assert_allclose(S.left(M.toarray()), mat @ M.toarray(), atol=1e-12)
    np.testing.assert_allclose(S.right(R), R.toarray() @ mat.T, atol=1e-12)
    np.testing.assert_allclose(S.right(R.toarray()), R.toarray() @ mat.T, atol=1e-12)
    x = random_matrix(40, 1)[:, 0]
    assert S.left(x).shape == (6,)
    np.testing.assert_allclose(S.left(x), mat @ x, atol=1e-12)
    np.testing.assert_allclose(S.right(x), mat @ x, atol=1e-12)


@pytest.mark.parametrize("name", PARTIAL)
def test_left_partial_chunks_sum_to_left(name):
    S = make_sketch(name, 37, 5, seed=8)
    M = sp.random(37, 4, density=0.5, format="csr", random_state=3)
    acc = sum(S.left_partial(M[a : a + 10], a) for a in range(0, 37, 10))
    np.testing.assert_allclose(S.finish(acc), S.left(M), atol=1e-12)
    dense = M.toarray()
    acc = sum(S.left_partial(dense[a : a + 6], a) for a in range(0, 37, 6))
    np.testing.assert_allclose(S.finish(acc), S.left(M), atol=1e-12)


def test_countsketch_structure():
    S = CountSketch(200, 16, seed=0)
    mat = explicit(S)
    assert S.hash_.shape == S.sign_.shape == (200,)
    # Exactly one +-1 per column, in row hash_[i].
    np.testing.assert_array_equal((mat != 0).sum(axis=0), np.ones(200))
    np.testing.assert_array_equal(mat[S.hash_, np.arange(200)], S.sign_)
    assert set(np.unique(S.sign_)) == {-1.0, 1.0}


def test_srht_rows_are_orthogonal_and_scaled():
    # Rows of P H D are orthogonal with squared norm N, so S S^T = (N / n_out) I
    # when n_in is already a power of 2.
    S = SRHT(64, 10, seed=1)
    mat = explicit(S)
    np.testing.assert_allclose(mat @ mat.T.copy(), 64 / 10 * np.eye(10), atol=1e-10)
    assert SRHT(100, 10, seed=1).n_padded == 128


def test_composed_is_product_of_stages():
    first, second = CountSketch(30, 12, seed=1), GaussianSketch(12, 4, seed=2)
    S = ComposedSketch(first, second)
    assert (S.n_in, S.n_out, S.seed, S.supports_partial) == (30, 4, None, True)
    np.testing.assert_allclose(explicit(S), explicit(second) @ explicit(first), atol=1e-12)
    assert not ComposedSketch(SRHT(30, 12, 0), second).supports_partial
    composed = make_sketch("countsketch+gaussian", 1000, 20, seed=0)
    assert composed.first.n_out == composed.second.n_in == intermediate_size(1000, 20) == 100
    assert intermediate_size(50, 20) == 50


def test_validation_errors():
    S = CountSketch(10, 4, seed=0)
    with pytest.raises(ValueError, match="n_in=10"):
        S.left(np.ones((9, 2)))
    with pytest.raises(ValueError, match="n_in=10"):
        S.right(np.ones((2, 9)))
    with pytest.raises(ValueError, match="outside"):
        S.left_partial(np.ones((3, 2)), 8)
    with pytest.raises(ValueError, match="outside"):
        S.left_partial(np.ones((3, 2)), -1)
    with pytest.raises(NotImplementedError, match="chunk"):
        SRHT(10, 4, seed=0).left_partial(np.ones((3, 2)), 0)
    with pytest.raises(ValueError, match="compose"):
        ComposedSketch(CountSketch(10, 5, 0), GaussianSketch(6, 2, 0))
    with pytest.raises(ValueError, match="Unknown sketch"):
        make_sketch("fjlt", 10, 4, 0)
    with pytest.raises(ValueError, match="n_out"):
        SRHT(10, 17, seed=0)
    for bad in (-1, 1.0, None, True):
        with pytest.raises(ValueError, match="seed"):
            make_sketch("gaussian", 10, 4, bad)
    with pytest.raises(ValueError, match="n_out"):
        GaussianSketch(10, 0, seed=0)


# -------------------------------------------------------------- statistics


@pytest.mark.parametrize("name", NAMES)
def test_norm_preserved_in_expectation(name):
    # ||Sx||^2 / ||x||^2 has mean 1 and variance <= 2 / n_out for CountSketch and
    # Gaussian; for SRHT, sampling n_out of N rows of y = HDx / sqrt(N) without
    # replacement gives variance <= (N / n_out) E sum y_i^4 <= 3 / n_out
    # (Khintchine: E y_i^4 <= 3 ||x||^4 / N^2); the composition here stays below
    # 2/16 + 2/64 + their product < 3/16. So over 300 seeds with n_out = 16 the
    # mean has sd <= sqrt(3 / 4800) = 0.025; the test allows about 6 sd.
    n_in, n_out, n_seeds = 100, 16, 300
    x = random_matrix(n_in, 1, seed=5)[:, 0] * np.linspace(0.1, 3.0, n_in)
    ratios = [
        np.sum(make_sketch(name, n_in, n_out, s).left(x) ** 2) / np.sum(x**2)
        for s in range(n_seeds)
    ]
    assert abs(np.mean(ratios) - 1.0) <= 5 * 0.03


@pytest.mark.parametrize(
    "name, n_out",
    [("countsketch", 1024), ("gaussian", 512), ("srht", 512), ("countsketch+gaussian", 512)],
)
def test_subspace_embedding(name, n_out):
    # eps-subspace embedding of a random 4-dim subspace U of R^4096: every
    # eigenvalue of (SU)^T (SU) in [1 - eps, 1 + eps], eps = 0.5.
    # CountSketch: E ||U^T S^T S U - I||_F^2 <= 2 d^2 / n_out = 1/32 (Clarkson &
    #   Woodruff 2013), so by Markov P(fail) <= 1/8 and typically ||.||_2 ~ 0.18.
    # Gaussian (also the last stage of the composition): singular values of SU in
    #   1 +- (sqrt(d / n_out) + 3 / sqrt(n_out)) = 1 +- 0.22 with prob >= 0.98
    #   (Davidson & Szarek), i.e. eigenvalues in [0.61, 1.49].
    # SRHT: n_out = 512 >> (d + log n) log d / eps^2 (Tropp 2011).
    d, n_in, eps = 4, 4096, 0.5
    U = np.linalg.qr(random_matrix(n_in, d, seed=9))[0]
    for seed in range(4):
        SU = make_sketch(name, n_in, n_out, seed).left(U)
        eig = np.linalg.eigvalsh(SU.T @ SU.copy())
        assert eig.min() >= 1 - eps and eig.max() <= 1 + eps


def test_embedding_error_shrinks_with_rows():
    # Gram deviation ~ sqrt(d / n_out): 16x the rows should cut it ~4x; ask 2x.
    d, n_in = 4, 2048
    U = np.linalg.qr(random_matrix(n_in, d, seed=2))[0]

    def deviation(n_out: int) -> float:
        devs = []
        for seed in range(4):
            SU = make_sketch("countsketch", n_in, n_out, seed).left(U)
            devs.append(np.linalg.norm(SU.T @ SU.copy() - np.eye(d), 2))
        return float(np.mean(devs))

    assert deviation(1024) <= 0.5 * deviation(64)


# ---------------------------------------------------------------- properties


@settings(max_examples=30, deadline=None)
@given(
    x=arrays(np.float64, 300, elements=st.floats(-1e3, 1e3)).filter(lambda v: np.sum(v**2) > 1e-6),
    name=st.sampled_from(NAMES),
    seed=st.integers(0, 2**32 - 1),
)
def test_mean_norm_over_seeds_within_bound(x, name, seed):
    # For any x: the mean of ||Sx||^2 / ||x||^2 over 32 independent sketches of
    # 128 rows has sd <= sqrt(3 / (128 * 32)) = 0.027 (variance bounds above; the
    # worst case for CountSketch, two equal entries colliding with probability
    # 1/128 per sketch, shifts the mean by 1/32 per collision). eps = 0.25 > 9 sd.
    seeds = [int(c.generate_state(1)[0]) for c in np.random.SeedSequence(seed).spawn(32)]
    ratios = [np.sum(make_sketch(name, 300, 128, s).left(x) ** 2) for s in seeds]
    assert abs(np.mean(ratios) / np.sum(x**2) - 1.0) <= 0.25


@settings(max_examples=30, deadline=None)
@given(
    x=arrays(np.float64, 200, elements=st.floats(-1e3, 1e3)).filter(lambda v: np.sum(v**2) > 1e-6),
    seed=st.integers(0, 2**32 - 1),
)
def test_gaussian_norm_within_bound_for_one_draw(x, seed):
    # ||Sx||^2 / ||x||^2 ~ chi^2_512 / 512 for every x: sd 0.0625, and
    # P(|ratio - 1| > 0.5) < 1e-10 (Laurent & Massart chi^2 tail).
    ratio = np.sum(GaussianSketch(200, 512, seed).left(x) ** 2) / np.sum(x**2)
    assert abs(ratio - 1.0) <= 0.5
