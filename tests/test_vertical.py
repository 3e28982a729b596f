"""One-shot vertical kernel PCA (paper 002): exactness, Lemma 2, projection, ledger, DPCA."""

import warnings

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from sklearn.decomposition import KernelPCA
from sklearn.metrics.pairwise import laplacian_kernel

from kernelscale.backends.local import LocalCluster
from kernelscale.kernels import make_kernel
from kernelscale.metrics.subspace import (
    principal_angle_sines,
    projector_error,
    sin_theta_distance,
)
from kernelscale.partition import feature_block_partition
from kernelscale.vertical import centre_kernel, one_shot_kpca, vertical_transform
from kernelscale.vertical.dpca import dpca, ring_neighbourhoods

SEEDS = [0, 1, 2, 3]
KERNELS = {
    "linear": dict(),
    "rbf": dict(gamma=0.08),
    "laplacian": dict(gamma=0.05),
    "poly": dict(gamma=0.1, degree=3, coef0=1.0),
}


def data(seed, n=60, d=12):
    rng = np.random.default_rng(seed)
    # a few dominant directions plus noise, so local spectra decay
    return rng.normal(size=(n, 3)) @ rng.normal(size=(3, d)) + 0.3 * rng.normal(size=(n, d))


def parties(X, blocks):
    return [X[:, cols] for cols in feature_block_partition(X.shape[1], blocks)]


def exact_kernel(X, name):
    return make_kernel(name, **KERNELS[name])(X, X)


def exact_kpca(K, k, center=True):
    Kc = centre_kernel(K) if center else K
    w, V = sla.eigh(Kc)
    return w[::-1][:k], V[:, ::-1][:, :k]


# ----------------------------------------------------------------------------- partition


def test_feature_block_partition_even_uneven_explicit():
    assert [len(b) for b in feature_block_partition(10, 3)] == [4, 3, 3]
    assert [list(b) for b in feature_block_partition(5, [2, 3])] == [[0, 1], [2, 3, 4]]
    explicit = feature_block_partition(4, [np.array([3, 0]), np.array([2, 1])])
    assert [list(b) for b in explicit] == [[3, 0], [2, 1]]


@pytest.mark.parametrize(
    "blocks, match",
    [
        (5, "at least one feature"),
        ([2, 3], "sum to"),
        ([0, 4], "positive"),
        ([[0, 1], [1, 2, 3]], "exactly once"),
        ([[0, 1], []], "empty"),
        (0, "positive"),
    ],
)
def test_feature_block_partition_rejects_bad_blocks(blocks, match):
    with pytest.raises(ValueError, match=match):
        feature_block_partition(4, blocks)


# ----------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("name", list(KERNELS))
@pytest.mark.parametrize("seed", SEEDS[:2])
def test_one_party_is_exact_centralised_kpca(name, seed):
    X = data(seed)
    n, k = X.shape[0], 3
    model = one_shot_kpca(LocalCluster([X]), make_kernel(name, **KERNELS[name]), k, n)
    w, V = exact_kpca(exact_kernel(X, name), k)
    np.testing.assert_allclose(model.eigenvalues, w, rtol=1e-9, atol=1e-9 * w[0])
    assert sin_theta_distance(V, model.eigenvectors) < 1e-7


@pytest.mark.parametrize("seed", SEEDS)
def test_one_party_uncentred_exact_with_few_local_components(seed):
    # The top-k eigenpairs of the rank-D truncation are K's own when D >= k.
    X = data(seed)
    model = one_shot_kpca(LocalCluster([X]), make_kernel("rbf", gamma=0.08), 3, 4, center=False)
    w, V = exact_kpca(exact_kernel(X, "rbf"), 3, center=False)
    np.testing.assert_allclose(model.eigenvalues, w, rtol=1e-9)
    np.testing.assert_allclose(np.abs(model.eigenvectors.T @ V), np.eye(3), atol=1e-7)


def test_one_party_matches_sklearn_kernel_pca():
    X = data(7)
    kpca = KernelPCA(4, kernel="rbf", gamma=0.08).fit(X)
    model = one_shot_kpca(LocalCluster([X]), make_kernel("rbf", gamma=0.08), 4, X.shape[0])
    np.testing.assert_allclose(model.eigenvalues, kpca.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(
        np.abs(model.training_embedding()), np.abs(kpca.transform(X)), atol=1e-7
    )


@pytest.mark.parametrize("name", list(KERNELS))
@pytest.mark.parametrize("blocks", [2, 3, [1, 4, 7], 12])
def test_full_local_rank_gives_the_exact_fused_kernel(name, blocks):
    X = data(len(str(blocks)))
    n = X.shape[0]
    model = one_shot_kpca(
        LocalCluster(parties(X, blocks)),
        make_kernel(name, **KERNELS[name]),
        3,
        n,
        keep_fused_kernel=True,
    )
    K = exact_kernel(X, name)
    assert np.linalg.norm(model.fused_kernel - K) <= 1e-9 * np.linalg.norm(K)


# ----------------------------------------------------------------------------- Lemma 2 of 002


def local_eigenvalue(X_j, name, index):
    kernel = make_kernel("linear") if name == "linear" else make_kernel(name, **KERNELS[name])
    return np.sort(sla.eigvalsh(kernel(X_j, X_j)))[::-1][index]


@pytest.mark.parametrize("name, factor", [("linear", "T-D"), ("rbf", "T")])
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("J, D", [(2, 2), (3, 4), (6, 1)])
def test_lemma_2_fused_kernel_error_bound(name, factor, seed, J, D):
    X = data(seed, n=50, d=18)
    T = X.shape[0]
    blocks = parties(X, J)
    # Lemma 2 is about the uncentred K_hat, which centring does not change; center=False
    # keeps D <= n_components from warning (that warning is about the centred eigenvectors)
    model = one_shot_kpca(
        LocalCluster(blocks),
        make_kernel(name, **KERNELS[name]),
        2,
        D,
        center=False,
        keep_fused_kernel=True,
    )
    error = np.linalg.norm(exact_kernel(X, name) - model.fused_kernel)
    lam = max(local_eigenvalue(b, name, D) for b in blocks)  # lambda_{D+1}, 0-based index D
    bound = J * np.sqrt(T - D if factor == "T-D" else T) * lam
    assert error <= bound * (1 + 1e-9) + 1e-9
    assert error > 0  # truncation is not exact on these data: the bound is not vacuous


@pytest.mark.parametrize("seed", SEEDS)
def test_subspace_error_within_davis_kahan(seed):
    # Yu, Wang, Samworth (2015): ||sin Theta||_F <= 2 min(sqrt(k)||E||_2, ||E||_F) / gap.
    X, k = data(seed, n=60, d=15), 2
    model = one_shot_kpca(
        LocalCluster(parties(X, 3)),
        make_kernel("rbf", gamma=0.08),
        k,
        6,
        keep_fused_kernel=True,
    )
    Kc = centre_kernel(exact_kernel(X, "rbf"))
    E = Kc - centre_kernel(model.fused_kernel)
    w, V = sla.eigh(Kc)
    w, V = w[::-1], V[:, ::-1]
    bound = 2 * min(np.sqrt(k) * np.linalg.norm(E, 2), np.linalg.norm(E)) / (w[k - 1] - w[k])
    assert sin_theta_distance(V[:, :k], model.eigenvectors) <= bound


# ----------------------------------------------------------------------------- ledger


@pytest.mark.parametrize("blocks, D", [(3, 4), ([2, 3, 7], 5), (1, 3)])
def test_uploads_are_exactly_the_eigenpairs_and_no_raw_points(blocks, D):
    X = data(1)
    n, cluster = X.shape[0], LocalCluster(parties(X, blocks))
    model = one_shot_kpca(cluster, make_kernel("rbf", gamma=0.08), 2, D)
    J = cluster.n_workers
    assert cluster.ledger.upload_words(phase="fit") == J * D * (n + 1)
    assert [r for r in cluster.ledger.words_by_round("fit")] == ["local eigenpairs"]
    assert "raw_points" not in cluster.ledger.words_by_kind(phase=None)
    new = np.random.default_rng(3).normal(size=(5, X.shape[1]))
    tcluster = LocalCluster(
        [np.vstack([a, b]) for a, b in zip(parties(X, blocks), parties(new, blocks), strict=True)]
    )
    vertical_transform(tcluster, model)
    assert "raw_points" not in tcluster.ledger.words_by_kind(phase=None)
    assert tcluster.ledger.upload_words(phase="transform") == J * 5 * n


def test_linear_projection_sends_k_plus_one_words_per_sample():
    X, k = data(2), 3
    model = one_shot_kpca(LocalCluster(parties(X, 4)), make_kernel("linear"), k, 5)
    tcluster = LocalCluster([np.vstack([b, b[:7]]) for b in parties(X, 4)])
    vertical_transform(tcluster, model)
    assert tcluster.ledger.upload_words(phase="transform") == 4 * 7 * (k + 1)


# ----------------------------------------------------------------------------- projection


@pytest.mark.parametrize("name", list(KERNELS))
@pytest.mark.parametrize("seed", SEEDS[:2])
def test_projection_of_training_samples_matches_fitted_components(name, seed):
    X = data(seed)
    n, k, blocks = X.shape[0], 3, parties(X, 3)
    kernel = make_kernel(name, **KERNELS[name])
    exact = one_shot_kpca(LocalCluster(blocks), kernel, k, n)
    Z = vertical_transform(LocalCluster([np.vstack([b, b]) for b in blocks]), exact, chunk_size=17)
    np.testing.assert_allclose(Z, exact.training_embedding(), atol=1e-7 * np.abs(Z).max())
    # Truncated local spectra: column c moves by at most ||K - K_hat||_2 / sqrt(lambda_c).
    approx = one_shot_kpca(LocalCluster(blocks), kernel, k, 6, keep_fused_kernel=True)
    Z = vertical_transform(LocalCluster([np.vstack([b, b]) for b in blocks]), approx)
    gap = np.linalg.norm(exact_kernel(X, name) - approx.fused_kernel, 2)
    moved = np.linalg.norm(Z - approx.training_embedding(), axis=0)
    assert np.all(moved <= gap / np.sqrt(approx.eigenvalues) * (1 + 1e-9) + 1e-9)


@pytest.mark.parametrize("name", ["linear", "rbf", "poly", "laplacian"])
def test_out_of_sample_projection_matches_sklearn(name):
    X, new = data(4), data(5)[:9]
    params = KERNELS[name]
    if name == "laplacian":
        kpca = KernelPCA(3, kernel="precomputed").fit(laplacian_kernel(X, gamma=params["gamma"]))
        ref = kpca.transform(laplacian_kernel(new, X, gamma=params["gamma"]))
    else:
        kpca = KernelPCA(3, kernel=name, **params).fit(X)
        ref = kpca.transform(new)
    model = one_shot_kpca(LocalCluster(parties(X, 3)), make_kernel(name, **params), 3, X.shape[0])
    Z = vertical_transform(
        LocalCluster(
            [np.vstack([a, b]) for a, b in zip(parties(X, 3), parties(new, 3), strict=True)]
        ),
        model,
    )
    np.testing.assert_allclose(np.abs(Z), np.abs(ref), atol=1e-7 * np.abs(ref).max())


# ----------------------------------------------------------------------------- bad input


def test_bad_input_is_rejected_early():
    X = data(0)
    kernel = make_kernel("rbf", gamma=0.1)
    with pytest.raises(ValueError, match="different numbers of samples"):
        one_shot_kpca(LocalCluster([X[:, :3], X[:-1, 3:]]), kernel, 2)
    bad = X[:, :3].copy()
    bad[4, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        one_shot_kpca(LocalCluster([bad, X[:, 3:]]), kernel, 2)
    with pytest.raises(ValueError, match="empty"):
        one_shot_kpca(LocalCluster([X[:, :0], X]), kernel, 2)
    with pytest.raises(ValueError, match="n_components"):
        one_shot_kpca(LocalCluster([X]), kernel, X.shape[0] + 1)
    with pytest.raises(ValueError, match="n_local_components"):
        one_shot_kpca(LocalCluster([X]), kernel, 2, X.shape[0] + 1)
    with pytest.raises(ValueError, match="does not split"):
        one_shot_kpca(LocalCluster([X]), make_kernel("arccos"), 2)
    with pytest.raises(ValueError, match="dense"):
        one_shot_kpca(LocalCluster([sp.csr_matrix(X)]), make_kernel("laplacian", gamma=1.0), 2)
    model = one_shot_kpca(LocalCluster(parties(X, 2)), kernel, 2)
    with pytest.raises(ValueError, match="at least one new sample"):
        vertical_transform(LocalCluster(parties(X, 2)), model)
    with pytest.raises(ValueError, match="fitted on blocks"):
        vertical_transform(LocalCluster(parties(np.vstack([X, X]), 3)), model)


@pytest.mark.parametrize("name", ["rbf", "laplacian"])
@pytest.mark.parametrize("D", [1, 3])
def test_centred_fit_warns_when_d_does_not_exceed_n_components(name, D):
    X = data(0)
    kernel = make_kernel(name, **KERNELS[name])
    with pytest.warns(UserWarning, match="n_local_components > n_components"):
        one_shot_kpca(LocalCluster(parties(X, 3)), kernel, 3, D)


@pytest.mark.parametrize(
    "name, k, D, center",
    [
        ("rbf", 3, 4, True),  # D = k + 1
        ("rbf", 3, None, True),  # the default D = k + 1
        ("laplacian", 3, 4, True),
        ("rbf", 3, 3, False),  # no centring: nothing is removed
        ("linear", 3, 3, True),  # linear local kernels have no constant direction
        ("poly", 3, 3, True),
        ("rbf", 60, None, True),  # k = n: the default D = n is exact
        ("rbf", 3, 60, True),
    ],
)
def test_no_warning_when_d_is_large_enough_or_irrelevant(name, k, D, center):
    X = data(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        one_shot_kpca(
            LocalCluster(parties(X, 3)), make_kernel(name, **KERNELS[name]), k, D, center=center
        )


# ----------------------------------------------------------------------------- DPCA baseline


def paper_data(seed, M=120, T=40, beta=100.0):
    rng = np.random.default_rng(seed)
    spectrum = np.zeros(T)
    spectrum[:20] = 50.0
    spectrum[0], spectrum[1] = 5000.0, 5000.0 / beta
    U = np.linalg.qr(rng.normal(size=(M, T)))[0]
    V = np.linalg.qr(rng.normal(size=(T, T)))[0]
    return ((U * np.sqrt(spectrum)) @ V).T  # rows are the T samples


def test_ring_neighbourhoods():
    hoods = ring_neighbourhoods(6, 3)
    assert [list(h) for h in hoods[:2]] == [[0, 1, 5], [0, 1, 2]]
    assert all(len(h) == 6 for h in ring_neighbourhoods(6, 10))
    with pytest.raises(ValueError, match="odd"):
        ring_neighbourhoods(6, 4)


def test_even_neighbourhood_size_needs_at_most_that_many_parties():
    # DPCA10 of paper 002: size 10 is full connection for J <= 10, invalid beyond
    assert all(len(h) == 10 for h in ring_neighbourhoods(10, 10))
    assert all(len(h) == 11 for h in ring_neighbourhoods(11, 11))
    assert all(len(h) == 11 for h in ring_neighbourhoods(20, 11))
    for J in (11, 20):
        with pytest.raises(ValueError, match=f"at most 10 parties.*got {J} parties"):
            ring_neighbourhoods(J, 10)
    X = paper_data(0)
    with pytest.raises(ValueError, match="at most 10 parties"):
        dpca(LocalCluster(parties(X, 20)), 1, 10)


@pytest.mark.parametrize("J", [6, 10])
def test_dpca10_on_at_most_ten_parties(J):
    X = paper_data(0)
    truth = np.linalg.svd(X, full_matrices=False)[2][:1].T
    result = dpca(LocalCluster(parties(X, J)), 1, 10, n_outer=6, reference=truth, random_state=0)
    assert all(list(h) == list(range(J)) for h in result.neighbourhoods)
    assert result.error_history[-1] < 1e-4


@pytest.mark.parametrize("seed", SEEDS[:3])
@pytest.mark.parametrize("size", [3, 5])
def test_dpca_converges_to_the_principal_subspace(seed, size):
    X = paper_data(seed)
    truth = np.linalg.svd(X, full_matrices=False)[2][:1].T
    cluster = LocalCluster(parties(X, 6))
    result = dpca(cluster, 1, size, n_outer=8, reference=truth, random_state=seed)
    assert result.error_history.shape == (8,)
    assert result.error_history[-1] < 1e-4
    assert projector_error(truth, result.loadings) == pytest.approx(result.error_history[-1])
    # ledger: 12 inner iterations x 2 rounds; a dual round uploads one k x n block per neighbour
    n = X.shape[0]
    dual = cluster.ledger.round_words("ADMM dual update", direction="worker->master")
    assert dual == 8 * 12 * sum(len(h) - 1 for h in result.neighbourhoods) * n
    assert "raw_points" not in cluster.ledger.words_by_kind(phase=None)


def test_dpca_rejects_asymmetric_neighbourhoods():
    X = paper_data(0)
    with pytest.raises(ValueError, match="symmetric"):
        dpca(LocalCluster(parties(X, 3)), 1, neighbourhoods=[[0, 1], [1], [2]])


# ----------------------------------------------------------------------------- metrics


@pytest.mark.parametrize("seed", SEEDS)
def test_subspace_metrics(seed):
    rng = np.random.default_rng(seed)
    V = rng.normal(size=(20, 3))
    mixed = V @ rng.normal(size=(3, 3))  # same span, another basis
    assert sin_theta_distance(V, mixed) < 1e-7
    assert projector_error(V, mixed) < 1e-12
    W = rng.normal(size=(20, 3))
    sines = principal_angle_sines(V, W)
    assert sin_theta_distance(V, W, "spectral") == pytest.approx(sines.max())
    assert projector_error(V, W) == pytest.approx(2 * sin_theta_distance(V, W) ** 2)
    e = np.eye(4)
    assert sin_theta_distance(e[:, :2], e[:, 2:]) == pytest.approx(np.sqrt(2))
    with pytest.raises(ValueError, match="norm"):
        sin_theta_distance(V, W, "nuclear")
    with pytest.raises(ValueError, match="dimensions"):
        sin_theta_distance(V, W[:, :2])
