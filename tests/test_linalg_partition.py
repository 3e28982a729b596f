"""linalg helpers (whitening, packing, eigensolvers) and the partitioners."""

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp

from kernelscale.kernels import make_kernel
from kernelscale.linalg import (
    as_generator,
    gram,
    pack_symmetric,
    pack_trapezoidal,
    thresholded_eigh,
    top_eigh,
    top_left_singular,
    triangular_whitening,
    unique_rows,
    unpack_symmetric,
    unpack_trapezoidal,
    whitening,
    whitening_from_rows,
)
from kernelscale.partition import (
    label_partition,
    make_partition,
    power_law_sizes,
    split,
)

SEEDS = [0, 1, 2, 3, 4]


def _range_projector(S, rtol=1e-10):
    w, V = thresholded_eigh(S, rtol)
    return V @ V.T, w.size


@pytest.mark.parametrize("seed", SEEDS)
def test_whitening_on_singular_kernel_matrix(seed):
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((12, 3))
    Y = np.vstack([Y, Y[:4], Y[2:3]])  # duplicated points: K_YY is singular
    K = make_kernel("rbf", gamma=0.5)(Y, Y)
    assert np.linalg.matrix_rank(K) == 12
    F = whitening(K)
    assert F.shape == (17, 12)
    np.testing.assert_allclose(F.T @ K @ F, np.eye(12), atol=1e-8)
    # F F^T is the pseudo-inverse of K on its range.
    np.testing.assert_allclose(K @ F @ F.T @ K, K, atol=1e-8)


def test_whitening_of_linear_kernel_with_low_rank():
    rng = np.random.default_rng(0)
    B = rng.standard_normal((20, 4))
    S = B @ B.T.copy()  # rank 4
    F = whitening(S)
    assert F.shape[1] == 4
    np.testing.assert_allclose(F.T @ S @ F, np.eye(4), atol=1e-8)
    Fr = whitening_from_rows(B.T.copy())  # (B^T)^T (B^T) = B B^T = S
    assert Fr.shape[1] == 4
    np.testing.assert_allclose((B.T @ Fr).T @ (B.T @ Fr), np.eye(4), atol=1e-8)
    assert whitening(np.zeros((3, 3))).shape == (3, 0)


@pytest.mark.parametrize("n", [1, 2, 7, 30])
def test_pack_unpack_roundtrip(n):
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    S = A + A.T
    packed = pack_symmetric(S)
    assert packed.size == n * (n + 1) // 2
    np.testing.assert_array_equal(unpack_symmetric(packed, n), S)


@pytest.mark.parametrize("rank", [12, 7, 1])
@pytest.mark.parametrize("seed", SEEDS)
def test_triangular_whitening_gives_the_whiteners_scores(seed, rank):
    """||R e||^2 = ||F^T e||^2 to round-off, at full rank and below (no inverse taken)."""
    rng = np.random.default_rng(seed)
    t = 12
    E = rng.standard_normal((200, rank)) @ rng.standard_normal((rank, t))  # rank <= t rows
    for F in (whitening(E.T @ E.copy()), whitening_from_rows(E)):
        R = triangular_whitening(F)
        assert R.shape == (F.shape[1], t) and F.shape[1] == rank
        np.testing.assert_array_equal(R, np.triu(R))  # upper trapezoidal
        packed = pack_trapezoidal(R)
        assert packed.size == rank * t - rank * (rank - 1) // 2
        np.testing.assert_array_equal(unpack_trapezoidal(packed, t), R)
        dense = np.sum((E @ F) ** 2, axis=1)
        triangular = np.sum((E @ unpack_trapezoidal(packed, t).T) ** 2, axis=1)
        np.testing.assert_allclose(triangular, dense, rtol=1e-9, atol=1e-12 * dense.max())
        # The scores of the rows of a rank-r matrix are its leverage scores: they sum to r.
        assert triangular.sum() == pytest.approx(rank, rel=1e-9)


def test_trapezoidal_packing_sizes_and_errors():
    t = 50
    assert pack_trapezoidal(np.triu(np.ones((t, t)))).size == t * (t + 1) // 2
    assert unpack_trapezoidal(np.zeros(0), t).shape == (0, t)
    assert triangular_whitening(np.zeros((t, 0))).shape == (0, t)
    with pytest.raises(ValueError, match="not an upper-trapezoidal factor"):
        unpack_trapezoidal(np.zeros(7), t)
    with pytest.raises(ValueError, match="at most as many rows"):
        pack_trapezoidal(np.ones((3, 2)))


@pytest.mark.parametrize("seed", SEEDS)
def test_top_eigh_matches_eigh(seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((25, 25))
    S = A @ A.T.copy()
    w_all, V_all = sla.eigh(S)
    w, V = top_eigh(S, 5)
    np.testing.assert_allclose(w, w_all[::-1][:5], rtol=1e-10)
    assert np.all(np.diff(w) <= 0)
    # Same vectors up to sign; the sign is fixed deterministically.
    np.testing.assert_allclose(np.abs(V.T @ V_all[:, ::-1][:, :5]), np.eye(5), atol=1e-8)
    np.testing.assert_array_equal(V, top_eigh(S.copy(), 5)[1])
    np.testing.assert_allclose(S @ V, V * w, atol=1e-8 * w[0])
    assert top_eigh(S, 100)[0].size == 25


def test_top_left_singular_matches_svd():
    rng = np.random.default_rng(0)
    B = rng.standard_normal((10, 40))
    s2, U = top_left_singular(B, 3)
    U_ref, s, _ = np.linalg.svd(B)
    np.testing.assert_allclose(s2, s[:3] ** 2, rtol=1e-10)
    np.testing.assert_allclose(np.abs(U.T @ U_ref[:, :3]), np.eye(3), atol=1e-8)


def test_thresholded_eigh_drops_tiny_directions():
    w, V = thresholded_eigh(np.diag([5.0, 1e-14, 2.0, 0.0]))
    np.testing.assert_allclose(w, [5.0, 2.0])
    assert V.shape == (4, 2)


def test_gram_chunked_dense_and_sparse():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((1000, 7))
    np.testing.assert_allclose(gram(A, chunk_size=97), A.T @ A.copy(), rtol=1e-10)
    As = sp.random(300, 9, density=0.2, format="csr", random_state=0)
    np.testing.assert_allclose(gram(As, chunk_size=50), (As.T @ As).toarray(), atol=1e-12)


def test_unique_rows_first_occurrences():
    Y = np.array([[1.0, 2], [3, 4], [1, 2], [5, 6], [3, 4]])
    np.testing.assert_array_equal(unique_rows(Y), [0, 1, 3])
    np.testing.assert_array_equal(unique_rows(sp.csr_matrix(Y)), [0, 1, 3])


def test_as_generator():
    assert as_generator(3).integers(1000) == as_generator(3).integers(1000)
    g = np.random.default_rng(1)
    assert as_generator(g) is g
    assert isinstance(as_generator(np.random.RandomState(0)), np.random.Generator)
    with pytest.raises(ValueError, match="random_state"):
        as_generator("seed")


# --- partitions ------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["power_law", "uniform", "label"])
@pytest.mark.parametrize("n, s", [(1000, 5), (7, 7), (50, 3)])
def test_partition_covers_every_row_once(method, n, s):
    labels = np.arange(n) % 4
    parts = make_partition(n, s, method, labels=labels, random_state=0)
    assert len(parts) == s
    assert all(p.size >= 1 for p in parts)
    assert sum(p.size for p in parts) == n
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(n))


@pytest.mark.parametrize("seed", SEEDS)
def test_power_law_is_skewed(seed):
    sizes = power_law_sizes(10_000, 5, random_state=seed)
    assert sizes.sum() == 10_000 and sizes.min() >= 1
    # Weights 1, 1/4, 1/9, 1/16, 1/25 over their sum (1.4636): the largest gets ~68%.
    expected = np.array([1, 1 / 4, 1 / 9, 1 / 16, 1 / 25]) / 1.463611
    np.testing.assert_allclose(np.sort(sizes)[::-1] / 10_000, expected, atol=1e-3)
    many = power_law_sizes(100, 20, random_state=seed)
    assert many.sum() == 100 and many.min() == 1


def test_label_partition_is_non_iid():
    labels = np.repeat(np.arange(10), 50)
    parts = label_partition(labels, 5, random_state=0)
    for p in parts:
        assert np.unique(labels[p]).size == 2  # each worker sees 2 of 10 classes
    uniform = make_partition(500, 5, "uniform", random_state=0)
    assert all(np.unique(labels[p]).size == 10 for p in uniform)


@pytest.mark.parametrize("method", ["power_law", "uniform", "label"])
def test_partition_is_deterministic(method):
    labels = np.arange(200) % 3
    a = make_partition(200, 4, method, labels=labels, random_state=11)
    b = make_partition(200, 4, method, labels=labels, random_state=11)
    c = make_partition(200, 4, method, labels=labels, random_state=12)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_partition_errors():
    with pytest.raises(ValueError, match="every worker needs at least one row"):
        make_partition(3, 4)
    with pytest.raises(ValueError, match="n_workers must be a positive integer"):
        make_partition(10, 0)
    with pytest.raises(ValueError, match="n_workers must be a positive integer"):
        make_partition(10, 2.5, "uniform")
    with pytest.raises(ValueError, match="needs the labels"):
        make_partition(10, 2, "label")
    with pytest.raises(ValueError, match="Unknown partition 'random'"):
        make_partition(10, 2, "random")


def test_split_dense_and_csr():
    X = np.arange(20.0).reshape(10, 2)
    parts = make_partition(10, 3, "uniform", random_state=0)
    blocks = split(X, parts)
    np.testing.assert_array_equal(np.vstack(blocks)[np.argsort(np.concatenate(parts))], X)
    sparse_blocks = split(sp.csr_matrix(X), parts)
    for dense, sparse in zip(blocks, sparse_blocks, strict=True):
        assert sp.issparse(sparse)
        np.testing.assert_array_equal(sparse.toarray(), dense)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_top_eigh_returns_k_pairs_on_a_flat_spectrum(seed):
    """LAPACK syevr drops eigenvalues of a near-identity matrix (scipy issue 13913):
    a centred RBF kernel with gamma=1e3 on 300 points came back with 4 of 10 pairs."""
    from kernelscale.linalg import top_eigh

    X = np.random.default_rng(seed).standard_normal((300, 5))
    K = make_kernel("rbf", gamma=1e3)(X, X)
    mean = K.mean(axis=0)
    K = K - mean[None, :] - mean[:, None] + mean.mean()
    w, V = top_eigh(K, 10)
    assert w.shape == (10,) and V.shape == (300, 10)
    np.testing.assert_allclose(w, 1.0, atol=1e-10)
    np.testing.assert_allclose(V.T @ V, np.eye(10), atol=1e-10)
    np.testing.assert_allclose(K @ V, V * w, atol=1e-10)
