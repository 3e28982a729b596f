"""Streaming kernel PCA (paper 004): Frequent Directions, SKPCA, baselines, metrics, merge."""

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st
from threadpoolctl import threadpool_limits

from kernelscale.backends.local import LocalCluster
from kernelscale.kernels import make_kernel
from kernelscale.metrics import TrainTiming, test_time_per_point, train_time
from kernelscale.metrics.kernel_error import (
    kernel_frobenius_error,
    kernel_spectral_error,
    streaming_space_words,
)
from kernelscale.partition import make_partition, split
from kernelscale.streaming import (
    RNCA,
    SKPCA,
    FrequentDirections,
    StreamingNystrom,
    streaming_kpca_distributed,
)


@pytest.fixture(autouse=True)
def one_blas_thread():
    # The exact references (dense norms, eigh) are small; threaded BLAS stalls under load.
    with threadpool_limits(1, user_api="blas"):
        yield


def decaying_matrix(n, m, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, m)) * (0.8 ** np.arange(m))


def fd_error(A, fd):
    B = fd.sketch
    return np.linalg.norm(A.T @ A.copy() - B.T @ B.copy(), 2)


def fd_bounds(A, index):
    s2 = np.linalg.svd(A, compute_uv=False) ** 2
    return [s2[k:].sum() / (index - k) for k in range(index)]


# ----------------------------------------------------------------- Frequent Directions
@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 200),
    m=st.integers(1, 25),
    sketch_size=st.integers(2, 16),
    shrink=st.sampled_from(["modified", "classic"]),
    seed=st.integers(0, 2**31),
)
def test_fd_bound_holds_for_every_k(n, m, sketch_size, shrink, seed):
    A = decaying_matrix(n, m, seed)
    fd = FrequentDirections(sketch_size, m, shrink).update(A)
    err = fd_error(A, fd)
    index = sketch_size // 2 if shrink == "modified" else sketch_size
    tol = 1e-9 * max(1.0, np.sum(A * A))
    for k, bound in enumerate(fd_bounds(A, index)):
        assert err <= bound + tol, (k, err, bound)
    # The certified bound (total shrinkage) sits between the error and the k = 0 bound.
    assert err <= fd.shrinkage + tol
    assert fd.shrinkage <= fd_bounds(A, index)[0] + tol


@pytest.mark.parametrize("shrink", ["modified", "classic"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fd_any_batch_split_gives_the_same_sketch(shrink, seed):
    A = decaying_matrix(700, 30, seed)
    whole = FrequentDirections(10, 30, shrink).update(A)
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(1, 700), size=25, replace=False))
    pieces = FrequentDirections(10, 30, shrink)
    for block in np.split(A, cuts):
        pieces.update(block)
    single_rows = FrequentDirections(10, 30, shrink)
    for row in A[:200]:
        single_rows.update(row)
    np.testing.assert_array_equal(whole.sketch, pieces.sketch)
    assert whole.shrinkage == pieces.shrinkage
    np.testing.assert_array_equal(
        FrequentDirections(10, 30, shrink).update(A[:200]).sketch, single_rows.sketch
    )


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 300),
    m=st.integers(1, 20),
    sketch_size=st.integers(2, 12),
    n_parts=st.integers(2, 5),
    shrink=st.sampled_from(["modified", "classic"]),
    seed=st.integers(0, 2**31),
)
def test_fd_merge_keeps_the_bound_for_the_union(n, m, sketch_size, n_parts, shrink, seed):
    A = decaying_matrix(n, m, seed)
    cuts = np.sort(np.random.default_rng(seed).integers(0, n + 1, size=n_parts - 1))
    sketches = [FrequentDirections(sketch_size, m, shrink).update(p) for p in np.split(A, cuts)]
    merged = sketches[0]
    for other in sketches[1:]:
        merged.merge(other)
    assert merged.n_rows_seen == n
    err = fd_error(A, merged)
    tol = 1e-9 * max(1.0, np.sum(A * A))
    index = sketch_size // 2 if shrink == "modified" else sketch_size
    for bound in fd_bounds(A, index):
        assert err <= bound + tol
    assert err <= merged.shrinkage + tol


@pytest.mark.parametrize("sketch_size", [5, 6, 7, 9])
def test_fd_modified_shrink_uses_floor_of_half_for_odd_l(sketch_size):
    # The paper's shrink subtracts the (l//2)-th squared singular value (l//2 rounds
    # down for odd l), so each shrink keeps at most l//2 - 1 directions.
    A = decaying_matrix(sketch_size, 12, seed=sketch_size)  # exactly one shrink
    fd = FrequentDirections(sketch_size, 12, "modified").update(A)
    assert fd.filled_rows.shape[0] == sketch_size // 2 - 1
    lam = np.sort(np.linalg.svd(A, compute_uv=False) ** 2)[::-1]
    assert fd.shrinkage == pytest.approx(lam[sketch_size // 2 - 1], rel=1e-10)


def test_fd_sketch_size_does_not_grow_with_rows():
    fd = FrequentDirections(12, 40)
    fd.update(decaying_matrix(50, 40, 0))
    size, nbytes = fd.size_words, fd.sketch.nbytes
    for seed in range(5):
        fd.update(decaying_matrix(3000, 40, seed))
    assert (fd.size_words, fd.sketch.nbytes) == (size, nbytes) == (12 * 40, 12 * 40 * 8)
    assert fd.n_rows_seen == 15050


def test_fd_bad_input():
    with pytest.raises(ValueError, match="at least 2"):
        FrequentDirections(1, 5)
    with pytest.raises(ValueError, match="Unknown shrink"):
        FrequentDirections(4, 5, shrink="fast")
    fd = FrequentDirections(4, 5)
    with pytest.raises(ValueError, match=r"shape \(n_rows, 5\)"):
        fd.update(np.ones((3, 6)))
    with pytest.raises(ValueError, match="NaN"):
        fd.update(np.full((2, 5), np.nan))
    with pytest.raises(ValueError, match="Cannot merge"):
        fd.merge(FrequentDirections(6, 5))
    with pytest.raises(ValueError, match="Cannot merge"):
        fd.merge(FrequentDirections(4, 5, shrink="classic"))


# ----------------------------------------------------------------- SKPCA
@pytest.fixture(scope="module")
def small_data():
    rng = np.random.default_rng(7)
    centers = rng.standard_normal((3, 5)) * 3
    return centers[rng.integers(0, 3, 400)] + 0.5 * rng.standard_normal((400, 5))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_skpca_lemma_2_2_bound(small_data, seed):
    # ||Z Z^T - Z W W^T Z^T||_2 <= shrinkage <= ||Z||_F^2 / (l/2) (Lemma 2.2 of 004)
    sk = SKPCA(5, n_random_features=150, sketch_size=12, gamma=0.1, seed=seed)
    sk.partial_fit(small_data)
    Z = sk.feature_map.transform(small_data)
    _, W = sk.eigen()
    ZW = Z @ W
    gap = np.linalg.norm(Z @ Z.T.copy() - ZW @ ZW.T.copy(), 2)
    assert gap <= sk.error_bound + 1e-9
    assert sk.error_bound <= np.sum(Z * Z) / 6 + 1e-9


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_skpca_top_components_match_exact_kernel_pca(small_data, seed):
    kernel = make_kernel("rbf", gamma=0.1)
    G = kernel(small_data, small_data)
    w, U = sla.eigh(G)
    w, U = w[::-1], U[:, ::-1]
    sk = SKPCA(5, n_random_features=2000, sketch_size=30, gamma=0.1, seed=seed)
    sk.partial_fit(small_data)
    scores = sk.transform(small_data, 3)
    # Weyl: sigma_i(B)^2 is within ||G - Z Z^T||_2 + ||Z^T Z - B^T B||_2 of lambda_i(G).
    Z = sk.feature_map.transform(small_data)
    err = kernel_spectral_error(small_data, kernel, Z) * len(small_data) + sk.error_bound
    values, _ = sk.eigen()
    assert np.all(np.abs(values[:3] - w[:3]) <= err + 1e-8)
    # The top direction (eigengap well above the error) is recovered.
    cos = abs(scores[:, 0] @ U[:, 0]) / np.linalg.norm(scores[:, 0])
    assert cos > 0.99


def test_spectral_error_falls_as_m_and_l_grow(small_data):
    kernel = make_kernel("rbf", gamma=0.1)

    def mean_error(m, l):
        errs = []
        for seed in range(3):
            sk = SKPCA(5, n_random_features=m, sketch_size=l, gamma=0.1, seed=seed)
            sk.partial_fit(small_data)
            errs.append(kernel_spectral_error(small_data, kernel, sk.features))
        return np.mean(errs)

    by_m = [mean_error(m, 30) for m in (30, 150, 800)]
    by_l = [mean_error(800, l) for l in (4, 10, 30)]
    assert by_m[0] > by_m[1] > by_m[2]
    assert by_l[0] > by_l[1] > by_l[2]


@pytest.mark.parametrize("method", ["skpca", "rnca", "nystrom"])
def test_method_memory_does_not_grow_with_rows(method):
    rng = np.random.default_rng(0)
    make = {
        "skpca": lambda: SKPCA(4, 64, 8, gamma=0.5),
        "rnca": lambda: RNCA(4, 64, gamma=0.5),
        "nystrom": lambda: StreamingNystrom(4, 64, gamma=0.5),
    }[method]
    small, large = make().partial_fit(rng.standard_normal((100, 4))), make()
    for _ in range(4):
        large.partial_fit(rng.standard_normal((5000, 4)))
    held = {"skpca": lambda s: s.sketch.sketch.nbytes, "rnca": lambda s: s.covariance.nbytes,
            "nystrom": lambda s: s.reservoir.nbytes}[method]
    assert held(small) == held(large)
    assert small.space_words == large.space_words
    assert large.n_samples_seen == 20000


# ----------------------------------------------------------------- baselines
def test_rnca_matches_exact_pca_of_features(small_data):
    rn = RNCA(5, n_random_features=80, gamma=0.1, seed=3)
    for block in np.array_split(small_data, 7):
        rn.partial_fit(block)
    Z = rn.feature_map.transform(small_data)
    np.testing.assert_allclose(rn.covariance, Z.T @ Z.copy(), atol=1e-10)
    Y = rn.features(small_data)
    np.testing.assert_allclose(Y @ Y.T, Z @ Z.T.copy(), atol=1e-9)


def test_nystrom_is_exact_when_the_reservoir_holds_everything(small_data):
    kernel = make_kernel("rbf", gamma=0.1)
    ny = StreamingNystrom(5, n_landmarks=500, gamma=0.1).partial_fit(small_data)
    assert kernel_spectral_error(small_data, kernel, ny.features) < 1e-8


def test_reservoir_is_uniform_and_split_invariant():
    X = np.arange(10.0)[:, None]
    counts = np.zeros(10)
    for seed in range(1500):
        ny = StreamingNystrom(1, n_landmarks=3, gamma=1.0, seed=seed)
        for block in np.array_split(X, 1 + seed % 4):
            ny.partial_fit(block)
        counts[ny.landmarks[:, 0].astype(int)] += 1
        if seed < 20:
            whole = StreamingNystrom(1, n_landmarks=3, gamma=1.0, seed=seed).partial_fit(X)
            np.testing.assert_array_equal(whole.landmarks, ny.landmarks)
    np.testing.assert_allclose(counts / 1500, 0.3, atol=0.05)


def test_merge_checks_parameters(small_data):
    a = SKPCA(5, 50, 6, gamma=0.1, seed=1).partial_fit(small_data)
    with pytest.raises(ValueError, match="seed"):
        a.merge(SKPCA(5, 50, 6, gamma=0.1, seed=2))
    with pytest.raises(ValueError, match="gamma"):
        a.merge(SKPCA(5, 50, 6, gamma=0.2, seed=1))
    with pytest.raises(TypeError, match="RNCA"):
        a.merge(RNCA(5, 50, gamma=0.1, seed=1))
    rn = RNCA(5, 50, gamma=0.1, seed=1).partial_fit(small_data[:150])
    rn.merge(RNCA(5, 50, gamma=0.1, seed=1).partial_fit(small_data[150:]))
    whole = RNCA(5, 50, gamma=0.1, seed=1).partial_fit(small_data)
    np.testing.assert_allclose(rn.covariance, whole.covariance, atol=1e-10)


def test_methods_reject_bad_input(small_data):
    with pytest.raises(ValueError, match="shift-invariant"):
        SKPCA(5, kernel="poly")
    with pytest.raises(ValueError, match="gamma"):
        SKPCA(5, gamma=-1.0)
    with pytest.raises(ValueError, match="Unknown kernel"):
        StreamingNystrom(5, kernel="gauss")
    with pytest.raises(ValueError, match="features"):
        RNCA(5, 10).partial_fit(np.ones((3, 4)))
    with pytest.raises(ValueError, match="NaN"):
        SKPCA(5, 10, 4).partial_fit(np.full((3, 5), np.inf))
    with pytest.raises(ValueError, match="no points"):
        SKPCA(5, 10, 4).transform(small_data, 2)


# ----------------------------------------------------------------- metrics
def test_kernel_errors_lanczos_and_blockwise_match_dense(small_data):
    kernel = make_kernel("rbf", gamma=0.1)
    Y = SKPCA(5, 100, 10, gamma=0.1).partial_fit(small_data).features(small_data)
    D = kernel(small_data, small_data) - Y @ Y.T
    n = len(small_data)
    exact_spec = np.max(np.abs(np.linalg.eigvalsh(D))) / n
    lanczos = kernel_spectral_error(small_data, kernel, Y, chunk_size=64, dense_below=10)
    assert lanczos == pytest.approx(exact_spec, rel=1e-6)
    assert kernel_spectral_error(small_data, kernel, Y) == pytest.approx(exact_spec, rel=1e-10)
    frob = kernel_frobenius_error(small_data, kernel, Y, chunk_size=64)
    assert frob == pytest.approx(np.linalg.norm(D) / n**2, rel=1e-10)
    with pytest.raises(ValueError, match="one row per point"):
        kernel_frobenius_error(small_data, kernel, Y[:-1])


def test_space_words_follow_paper_004():
    assert streaming_space_words("skpca", 28, n_random_features=100, sketch_size=10) == 3800
    assert streaming_space_words("rnca", 28, n_random_features=100) == 12800
    assert streaming_space_words("nystrom", 28, n_landmarks=100) == 12800
    assert SKPCA(28, 100, 10).space_words == 3800
    with pytest.raises(ValueError, match="Unknown method"):
        streaming_space_words("kpca", 28)


# ----------------------------------------------------------------- distributed
@pytest.mark.parametrize("seed", [0, 1])
def test_distributed_skpca_one_round_bounded_words_and_union_bound(small_data, seed):
    parts = split(small_data, make_partition(len(small_data), 4, random_state=seed))
    cluster = LocalCluster(parts)
    l, m = 10, 60
    sk = streaming_kpca_distributed(cluster, n_random_features=m, sketch_size=l, gamma=0.1,
                                    random_state=seed)
    ledger = cluster.ledger
    assert {msg.round for msg in ledger.rounds("fit")} == {"sketch partitions"}
    kinds = ledger.words_by_kind()
    assert "raw_points" not in kinds
    assert kinds["sketch"] <= 4 * l * m and kinds["scalars"] == 4 * 3
    assert sk.n_samples_seen == len(small_data)
    Z = sk.feature_map.transform(small_data)
    B = sk.sketch.sketch
    err = np.linalg.norm(Z.T @ Z.copy() - B.T @ B.copy(), 2)
    assert err <= sk.error_bound + 1e-9 <= np.sum(Z * Z) / (l // 2) + 1e-9
    again = streaming_kpca_distributed(LocalCluster(parts), n_random_features=m, sketch_size=l,
                                       gamma=0.1, random_state=seed)
    np.testing.assert_array_equal(again.sketch.sketch, B)


@pytest.mark.parametrize("method", ["rnca", "nystrom"])
def test_distributed_baselines(small_data, method):
    parts = split(small_data, make_partition(len(small_data), 3, random_state=0))
    cluster = LocalCluster(parts)
    merged = streaming_kpca_distributed(cluster, method=method, n_random_features=40,
                                        gamma=0.1, random_state=0)
    assert merged.n_samples_seen == len(small_data)
    if method == "rnca":
        Z = merged.feature_map.transform(small_data)
        np.testing.assert_allclose(merged.covariance, Z.T @ Z.copy(), atol=1e-9)
        assert cluster.ledger.words_by_kind()["sketch"] == 3 * 40 * 41 // 2
    else:
        assert merged.landmarks.shape == (40, 5)
        rows = {tuple(r) for r in small_data}
        assert all(tuple(r) in rows for r in merged.landmarks)
    with pytest.raises(ValueError, match="Unknown method"):
        streaming_kpca_distributed(cluster, method="exact")


# ----------------------------------------------------------------- timing metrics
class CountingModel:
    """Wraps a streaming method and counts the calls the timers make."""

    def __init__(self, model):
        self.model, self.fed, self.eigen_calls, self.queries = model, [], 0, 0

    def partial_fit(self, X):
        self.fed.append(X.shape[0])
        self.model.partial_fit(X)
        return self

    def eigen(self):
        self.eigen_calls += 1
        return self.model.eigen()

    def transform(self, X, n_components):
        self.queries += 1
        return self.model.transform(X, n_components)


def test_train_time_feeds_every_batch_and_finalizes(small_data):
    made = []

    def factory():
        made.append(CountingModel(SKPCA(small_data.shape[1], 60, 8, gamma=0.1)))
        return made[-1]

    timing = train_time(factory, small_data, batch_size=64, n_repeat=2)
    assert isinstance(timing, TrainTiming)
    assert len(made) == 2 and timing.estimator is made[-1]  # a fresh model per repeat
    n = len(small_data)
    assert timing.n_samples == n and timing.n_batches == -(-n // 64)
    for model in made:
        assert sum(model.fed) == n and max(model.fed) == 64 and len(model.fed) == timing.n_batches
        assert model.eigen_calls == 1  # the final decomposition is part of the train time
    assert timing.estimator.model.n_samples_seen == n
    assert timing.seconds > 0 and timing.points_per_second > 0
    unfinished = train_time(factory, small_data, 100, finalize=None)
    assert unfinished.estimator.eigen_calls == 0


def test_train_time_finalizes_a_lazy_estimator(small_data):
    from kernelscale.streaming import StreamingKernelPCA

    timing = train_time(lambda: StreamingKernelPCA(n_random_features=40, random_state=0),
                        small_data, 50)
    # components_ was read inside the timed region, so the sketcher holds the decomposition.
    assert timing.estimator.sketcher_._eigen is not None
    assert timing.estimator.n_samples_seen_ == len(small_data)


def test_test_time_per_point_queries_one_point_at_a_time(small_data):
    model = CountingModel(RNCA(small_data.shape[1], 50, gamma=0.1).partial_fit(small_data))
    seconds = test_time_per_point(model, small_data, max_points=30, n_repeat=2,
                                  transform_kwargs={"n_components": 3})
    assert isinstance(seconds, float) and seconds > 0
    assert model.queries == 1 + 2 * 30  # warm-up, then 30 single-point queries per repeat
    few = CountingModel(model.model)
    test_time_per_point(few, small_data[:5], max_points=200, warmup=False,
                        transform_kwargs={"n_components": 3})
    assert few.queries == 5


def test_timing_rejects_bad_arguments(small_data):
    make = lambda: SKPCA(small_data.shape[1], 20, 4)  # noqa: E731
    with pytest.raises(ValueError, match="batch_size"):
        train_time(make, small_data, batch_size=0)
    with pytest.raises(ValueError, match="no rows"):
        train_time(make, small_data[:0])
    with pytest.raises(ValueError, match="max_points"):
        test_time_per_point(make().partial_fit(small_data), small_data, max_points=0)
    with pytest.raises(ValueError, match="2-D"):
        test_time_per_point(make(), small_data[0])
