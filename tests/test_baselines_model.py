"""Baselines of paper 001 with their ledgers, the fitted models, files, distributed error."""

import json

import numpy as np
import pytest
import scipy.sparse as sp

from kernelscale.backends.local import LocalCluster
from kernelscale.features import make_feature_map
from kernelscale.horizontal import (
    diskpca,
    distributed_error,
    exact_kpca,
    random_features_pca,
    uniform_batch,
    uniform_dislr,
)
from kernelscale.horizontal.baselines import batch_kpca
from kernelscale.kernels import make_kernel
from kernelscale.metrics.lowrank import (
    exact_kpca_reference,
    kernel_mean_norm_sq,
    lowrank_error,
)
from kernelscale.model import KernelPCAModel, RandomFeaturePCAModel, load_model
from kernelscale.partition import make_partition, split
from kernelscale.runtime import DOWN, UP

KERNEL = make_kernel("rbf", gamma=0.2)


def _parts(n=120, d=5, s=3, seed=0, method="power_law"):
    X = np.random.default_rng(seed).standard_normal((n, d))
    return X, split(X, make_partition(n, s, method, random_state=seed))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("center", [False, True])
def test_exact_kpca_equals_exact_reference(center, seed):
    X, parts = _parts(seed=seed)
    cluster = LocalCluster(parts)
    model = exact_kpca(cluster, KERNEL, n_components=4, center=center)
    ref = exact_kpca_reference(X, KERNEL, 4, center=center)
    np.testing.assert_allclose(model.eigenvalues, ref["eigenvalues"], rtol=1e-9)
    err = lowrank_error(model, X)["error"]
    assert err == pytest.approx(ref["opt"], rel=1e-9)
    # Its projections are the exact ones: sqrt(lambda) times the eigenvectors (up to sign).
    Z = model.transform(np.vstack(parts))
    order = np.concatenate([np.flatnonzero(np.all(X == row, axis=1)) for row in np.vstack(parts)])
    V = ref["eigenvectors"][order] * np.sqrt(ref["eigenvalues"])
    np.testing.assert_allclose(np.abs(Z), np.abs(V), atol=1e-7)
    # All n points up, then the model (the points, the n x k coefficients, the centre
    # when centred, and the rbf kernel's 5 parameters) back to each of the s = 3 workers.
    n, d, k, s = 120, 5, 4, 3
    assert cluster.ledger.words_by_round() == {
        "all data to master": {DOWN: 0, UP: n * d},
        "exact KPCA: landmarks and components": {DOWN: s * (n * (d + k + center) + 5),
                                                 UP: 0},
    }


@pytest.mark.parametrize("center", [False, True])
def test_uniform_batch_ledger_sends_the_sample_up_and_the_model_down(center):
    X, parts = _parts()
    cluster = LocalCluster(parts)
    model = uniform_batch(cluster, KERNEL, n_components=3, n_landmarks=30, center=center,
                          random_state=0)
    n_y, d, k, s = 30, 5, 3, 3
    assert model.landmarks.shape == (n_y, d)
    # Each sampled point's copies come up (one word each). The workers do not hold the
    # sample: the model round sends Y, C (and m) and the kernel's 5 parameters (the
    # workers were never told the kernel).
    model_words = s * (n_y * d + n_y * k + (n_y if center else 0) + 5)
    assert cluster.ledger.words_by_round() == {
        "uniform sampling": {DOWN: 2 * s, UP: n_y * d},  # a seed and a count each
        "batch KPCA: copies": {DOWN: 0, UP: n_y},
        "batch KPCA: landmarks and components": {DOWN: model_words, UP: 0},
    }
    assert cluster.ledger.words_by_kind() == {
        "seed": s, "scalars": s + n_y, "raw_points": n_y * d + s * n_y * d,
        "model": s * (n_y * (k + (1 if center else 0)) + 5)}
    # Every worker keeps the model it was sent.
    for state in cluster.states:
        np.testing.assert_array_equal(state.landmarks, model.landmarks)
        np.testing.assert_array_equal(state.coef, model.coef)
        assert (state.center is None) == (not center)
        assert state.kernel_params == KERNEL.to_dict()  # kept unresolved (a lambda)
    # Each landmark is a row of X.
    assert all(np.any(np.all(X == y, axis=1)) for y in model.landmarks)
    err, ref = lowrank_error(model, X)["error"], exact_kpca_reference(X, KERNEL, 3)
    assert ref["opt"] <= err < ref["trace"]


@pytest.mark.parametrize("center", [False, True])
def test_uniform_dislr_ledger(center):
    X, parts = _parts()
    cluster = LocalCluster(parts)
    model = uniform_dislr(cluster, KERNEL, n_components=3, n_landmarks=25, center=center,
                          random_state=1)
    n_y, s, d, k = 25, 3, 5, 3
    assert model.landmarks.shape == (n_y, d)
    extra = 1 if center else 0
    assert cluster.ledger.words_by_round() == {
        "uniform sampling": {DOWN: 2 * s, UP: n_y * d},  # a seed and a count each
        "disLR: k(Y,A_i) k(A_i,Y)": {DOWN: s * (n_y * d + 9 + 1),
                                     # + sum_a k(a, a): one word per worker
                                     UP: s * (n_y * (n_y + 1) // 2 + extra * n_y + 1)},
        "disLR: components": {DOWN: s * n_y * (k + extra), UP: 0},
    }
    assert cluster.ledger.upload_words(kind="raw_points") == n_y * d
    assert cluster.ledger.download_words(kind="raw_points") == s * n_y * d


@pytest.mark.parametrize("center", [False, True])
def test_random_features_pca_words_and_components(center):
    X, parts = _parts(n=200)
    m, s = 60, 3
    cluster = LocalCluster(parts)
    model = random_features_pca(cluster, KERNEL, n_components=4, n_random_features=m,
                                center=center, random_state=0)
    assert cluster.ledger.upload_words(kind="sketch") == s * m * (m + 1) // 2
    assert cluster.ledger.upload_words(kind="scalars") == (s * m if center else 0)
    assert cluster.ledger.upload_words() == s * m * (m + 1) // 2 + (s * m if center else 0)
    assert cluster.ledger.download_words(kind="seed") == s
    assert cluster.ledger.upload_words(kind="raw_points") == 0
    # The components (m x k, and the m-dimensional mean when centred) go back to each worker.
    assert cluster.ledger.round_words("random features: components") == (
        s * (m * 4 + (m if center else 0)))
    # The components are the top eigenvectors of the pooled Z^T Z.
    Z = make_feature_map(KERNEL, 5, m, model.feature_seed).transform(np.vstack(parts))
    if center:
        Z = Z - Z.mean(axis=0)
    w, V = np.linalg.eigh(Z.T @ Z.copy())
    np.testing.assert_allclose(model.eigenvalues, w[::-1][:4], rtol=1e-8)
    np.testing.assert_allclose(np.abs(model.components.T @ V[:, ::-1][:, :4]), np.eye(4),
                               atol=1e-6)


def test_landmark_transform_is_c_transpose_k():
    X, parts = _parts()
    model = diskpca(LocalCluster(parts), KERNEL, n_components=3, n_landmarks=20,
                    embedding_dim=10, n_random_features=100, random_state=0)
    K_xy = KERNEL(X, model.landmarks)
    np.testing.assert_allclose(model.transform(X, chunk_size=7), K_xy @ model.coef, atol=1e-12)
    # C^T K_YY C = I: the directions are orthonormal in feature space.
    C = model.coef
    np.testing.assert_allclose(C.T @ KERNEL(model.landmarks, model.landmarks) @ C, np.eye(3),
                               atol=1e-8)
    centred = KernelPCAModel(KERNEL, model.landmarks, C, model.eigenvalues,
                             center=np.full(20, 0.1))
    np.testing.assert_allclose(centred.transform(X), (K_xy - 0.1) @ C, atol=1e-12)


def _models():
    X, parts = _parts()
    dense = diskpca(LocalCluster(parts), KERNEL, n_components=3, n_landmarks=20,
                    embedding_dim=10, n_random_features=100, center=True, random_state=0)
    S = sp.random(90, 12, density=0.3, format="csr", random_state=0)
    sparse = uniform_dislr(LocalCluster(split(S, make_partition(90, 3, random_state=0))),
                           make_kernel("poly", gamma=1.0, degree=2), n_components=2,
                           n_landmarks=15, random_state=0)
    rf = random_features_pca(LocalCluster(parts), KERNEL, n_components=3, n_random_features=40,
                             center=True, random_state=0)
    return [(dense, X), (sparse, S), (rf, X)]


def test_save_load_roundtrip(tmp_path):
    for i, (model, X) in enumerate(_models()):
        path = tmp_path / f"model{i}.npz"
        model.save(path)
        with np.load(path, allow_pickle=False) as npz:  # never needs pickle
            assert "__header__" in npz.files
            header = json.loads(str(npz["__header__"]))
        assert header["model_type"] == model.model_type
        loaded = load_model(path)
        assert type(loaded) is type(model)
        assert loaded.kernel == model.kernel
        np.testing.assert_array_equal(loaded.transform(X), model.transform(X))
        if isinstance(model, KernelPCAModel):
            assert sp.issparse(loaded.landmarks) == sp.issparse(model.landmarks)
        else:
            assert isinstance(loaded, RandomFeaturePCAModel)
            assert loaded.feature_seed == model.feature_seed


def test_load_rejects_garbage_and_tampered_files(tmp_path):
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"this is not an npz archive")
    with pytest.raises(ValueError, match="not a kernelscale model file"):
        load_model(garbage)
    with pytest.raises(FileNotFoundError, match="No model file"):
        load_model(tmp_path / "missing.npz")
    no_header = tmp_path / "plain.npz"
    np.savez(no_header, coef=np.ones(3))
    with pytest.raises(ValueError, match="no kernelscale header"):
        load_model(no_header)
    pickled = tmp_path / "pickled.npz"
    np.savez(pickled, __header__=np.array("{}"), coef=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match="coef.npy holds object values; a model file holds "
                                         "arrays of numbers and text only"):
        load_model(pickled)

    model, _ = _models()[0]
    good = tmp_path / "good.npz"
    model.save(good)
    arrays = dict(np.load(good, allow_pickle=False))
    header = json.loads(str(arrays["__header__"]))

    def write(name, header, drop=None):
        path = tmp_path / name
        data = {k: v for k, v in arrays.items() if k != drop}
        data["__header__"] = np.array(header if isinstance(header, str) else json.dumps(header))
        np.savez(path, **data)
        return path

    with pytest.raises(ValueError, match="unknown type 'evil'"):
        load_model(write("type.npz", {**header, "model_type": "evil"}))
    with pytest.raises(ValueError, match="damaged header"):
        load_model(write("json.npz", "{not json"))
    with pytest.raises(ValueError, match="damaged landmark_kpca file.*kernel"):
        load_model(write("kernel.npz", {k: v for k, v in header.items() if k != "kernel"}))
    with pytest.raises(ValueError, match="damaged landmark_kpca file.*coef"):
        load_model(write("coef.npz", header, drop="coef"))
    with pytest.raises(ValueError, match="Unknown kernel"):
        load_model(write("bad.npz", {**header, "kernel": {**header["kernel"], "name": "evil"}}))


@pytest.mark.parametrize("which", [0, 1, 2], ids=["landmark-centred", "sparse", "rf-centred"])
def test_distributed_error_equals_lowrank_error(which):
    model, X = _models()[which]
    n = X.shape[0]
    parts = split(X, make_partition(n, 4, "uniform", random_state=3))
    cluster = LocalCluster(parts)
    centred = which != 1
    mu2 = kernel_mean_norm_sq(X, model.kernel) if centred else None
    result = distributed_error(cluster, model, mu2, chunk_size=11)
    expected = lowrank_error(model, X, mu2)
    for key in ("trace", "captured", "error"):
        assert result[key] == pytest.approx(expected[key], rel=1e-10)
    assert result["n_samples"] == n
    assert cluster.ledger.total_words("fit") == 0
    assert cluster.ledger.phases() == ["evaluate"]
    # n_i, sum k(a, a), sum ||t_a||^2, and for a centred model sum t_a (k words).
    assert cluster.ledger.upload_words("evaluate") == 4 * (3 + (model.n_components if centred
                                                                 else 0))
    if centred:
        with pytest.raises(ValueError, match="center_norm_sq"):
            distributed_error(LocalCluster(parts), model)


def test_evaluate_does_not_change_fit_words():
    X, parts = _parts()
    cluster = LocalCluster(parts)
    model = diskpca(cluster, KERNEL, n_components=3, n_landmarks=20, embedding_dim=10,
                    n_random_features=100, random_state=0)
    fit_words, fit_messages = cluster.ledger.total_words("fit"), cluster.ledger.rounds("fit")
    distributed_error(cluster, model)
    assert cluster.ledger.total_words("fit") == fit_words
    assert cluster.ledger.rounds("fit") == fit_messages
    assert cluster.ledger.total_words("evaluate") > 0
    assert {m.round for m in cluster.ledger.rounds("evaluate")} == {"evaluate: energy"}


def test_baselines_bad_input():
    X, parts = _parts(n=30)
    with pytest.raises(ValueError, match="n_components=31 exceeds"):
        exact_kpca(LocalCluster(parts), KERNEL, n_components=31)
    with pytest.raises(ValueError, match="n_components=5 exceeds n_landmarks=4"):
        uniform_batch(LocalCluster(parts), KERNEL, n_components=5, n_landmarks=4)
    with pytest.warns(UserWarning, match=r"\(8 features\) has numerical rank 8 < n_comp"):
        model = random_features_pca(LocalCluster(parts), KERNEL, n_components=9,
                                    n_random_features=8)
    assert model.components.shape == (8, 9) and not model.components[:, 8].any()
    with pytest.warns(UserWarning, match="n_landmarks=50 exceeds the 30 samples"):
        model = uniform_dislr(LocalCluster(parts), KERNEL, n_components=2, n_landmarks=50)
    assert model.landmarks.shape[0] == 30


def _explicit_features(kernel, *blocks):
    """Rows of an isometric explicit feature map of the stacked blocks (full kernel matrix)."""
    stacked = np.vstack(blocks)
    w, U = np.linalg.eigh(kernel(stacked, stacked))
    Phi = U * np.sqrt(np.clip(w, 0.0, None))
    return np.split(Phi, np.cumsum([b.shape[0] for b in blocks])[:-1])


def _brute_force_centred_error(Phi_eval, Phi_landmarks, coef):
    """sum_a ||(phi(a) - mu) - V V^T (phi(a) - mu)||^2 with V = phi(Y) C, mu the eval mean."""
    V = Phi_landmarks.T @ coef
    centred = Phi_eval - Phi_eval.mean(axis=0)
    residual = centred - centred @ V @ V.T
    return float(np.sum(residual**2))


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("kernel_name", ["linear", "rbf"])
@pytest.mark.parametrize("method", ["diskpca", "uniform_batch"])
def test_centred_error_on_shifted_held_out_data_matches_brute_force(kernel_name, method, seed):
    """A centred model on other data: centred on that data's mean, exactly, everywhere."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((120, 5)) * [3.0, 2.0, 1.0, 0.5, 0.2]
    Z = rng.standard_normal((80, 5)) + [4.0, -3.0, 2.0, 0.0, 1.0]  # held out, shifted
    kernel = make_kernel(kernel_name, gamma=0.1)
    parts = split(X, make_partition(120, 3, random_state=seed))
    fit = diskpca if method == "diskpca" else uniform_batch
    model = fit(LocalCluster(parts), kernel, n_components=3, n_landmarks=30, embedding_dim=10,
                n_random_features=100, center=True, random_state=seed)
    if kernel_name == "linear":  # phi(a) = a
        Phi_Z, Phi_Y = Z, model.landmarks
    else:
        Phi_Z, Phi_Y = _explicit_features(kernel, Z, model.landmarks)
    V = Phi_Y.T @ model.coef
    np.testing.assert_allclose(V.T @ V, np.eye(3), atol=1e-6)
    expected = _brute_force_centred_error(Phi_Z, Phi_Y, model.coef)
    mu2 = kernel_mean_norm_sq(Z, kernel)
    local = lowrank_error(model, Z)
    remote = distributed_error(LocalCluster(split(Z, make_partition(80, 4, random_state=1))),
                               model, mu2, chunk_size=13)
    for result in (local, remote):
        assert result["error"] == pytest.approx(expected, rel=1e-6)
        assert result["trace"] - result["error"] == pytest.approx(result["captured"])
    # Centred on Z's mean, no rank-3 subspace beats centred KPCA of Z itself.
    ref = exact_kpca_reference(Z, kernel, 3, center=True)
    assert local["trace"] == pytest.approx(ref["trace"], rel=1e-9)
    assert local["error"] >= ref["opt"] * (1 - 1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
@pytest.mark.parametrize("fit", [uniform_dislr, uniform_batch])
def test_uniform_baselines_sample_distinct_points(fit, seed):
    """Duplicated data: the uniform sample still holds exactly n_landmarks distinct points."""
    base = np.random.default_rng(seed).standard_normal((60, 5))
    X = np.vstack([base, base, base[:30]])  # 150 rows, 60 distinct
    parts = split(X, make_partition(150, 3, "uniform", random_state=seed))
    cluster = LocalCluster(parts)
    model = fit(cluster, KERNEL, n_components=3, n_landmarks=50, random_state=seed)
    assert model.landmarks.shape[0] == 50
    assert np.unique(model.landmarks, axis=0).shape[0] == 50
    # Every landmark is a data point; only what was sent is counted.
    assert all(np.any(np.all(base == y, axis=1)) for y in model.landmarks)
    assert np.all(np.isfinite(model.transform(X)))


@pytest.mark.parametrize("fit", [uniform_dislr, uniform_batch])
def test_uniform_baselines_with_fewer_distinct_points_than_budget(fit):
    base = np.random.default_rng(5).standard_normal((12, 5))
    X = np.repeat(base, 50, axis=0)  # 600 rows, 12 distinct
    parts = split(X, make_partition(600, 3, "uniform", random_state=0))
    cluster = LocalCluster(parts)
    model = fit(cluster, KERNEL, n_components=3, n_landmarks=40, random_state=0)
    assert model.landmarks.shape[0] == 12
    # A worker never sends two copies of a point: at most 12 rows from each.
    assert cluster.ledger.upload_words("fit", kind="raw_points") <= 3 * 12 * 5
    assert len(cluster.ledger.words_by_round("fit")) <= 2 + 2 * int(np.log2(600))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_distinct_sampling_on_duplicated_csr(seed):
    base = sp.random(40, 20, density=0.3, format="csr", random_state=seed)
    X = sp.vstack([base, base, base], format="csr")
    parts = split(X, make_partition(120, 3, "uniform", random_state=seed))
    for fit in (uniform_dislr, diskpca):
        cluster = LocalCluster(parts)
        model = fit(cluster, KERNEL, n_components=3, n_landmarks=35, embedding_dim=10,
                    n_random_features=100, random_state=seed)
        Y = model.landmarks
        assert sp.issparse(Y) and Y.shape[0] == 35
        assert np.unique(Y.toarray(), axis=0).shape[0] == 35


@pytest.mark.parametrize("sparse", [False, True])
def test_worker_never_sends_copies(sparse):
    from kernelscale.horizontal.draws import sample_rows
    from kernelscale.runtime import WorkerState

    base = np.random.default_rng(0).standard_normal((5, 4))
    X = np.repeat(base, 4, axis=0)  # 20 rows, 5 distinct
    state = WorkerState(sp.csr_matrix(X) if sparse else X, 0)
    state.rng, state.sampled = np.random.default_rng(1), np.zeros(20, dtype=bool)
    first = sample_rows(state, np.ones(20), 3)
    rest = sample_rows(state, np.ones(20), 10)  # only 2 distinct points left
    rows = np.vstack([r.toarray() if sparse else r for r in (first, rest)])
    assert rows.shape[0] == 5 and np.unique(rows, axis=0).shape[0] == 5
    assert state.sampled.all()


def test_metrics_reexports_and_error_ratio():
    import math

    from kernelscale import metrics

    assert metrics.lowrank_error is lowrank_error
    assert metrics.error_ratio(3.0, 2.0) == 1.5
    assert math.isnan(metrics.error_ratio(1e-13, -5e-14))  # rank <= k: opt is round-off
    assert math.isnan(metrics.error_ratio(0.0, 0.0))


def _duplicated(seed):
    """Rows with copies: 40 distinct points, some with up to 9 copies, each point's copies
    on one of 3 workers (the copies of a point sent are then all counted)."""
    rng = np.random.default_rng(seed)
    points = rng.normal(0.0, 1.0, (40, 5))
    copies = rng.integers(1, 10, size=40) * (rng.random(40) < 0.3) + 1
    parts = [np.repeat(points[w::3], copies[w::3], axis=0) for w in range(3)]
    parts = [p[rng.permutation(p.shape[0])] for p in parts]
    return np.vstack(parts), parts


def _signed(Z):
    return Z * np.sign(Z[np.abs(Z).argmax(axis=0), range(Z.shape[1])])


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_weighted_batch_kpca_is_the_kpca_of_the_rows_repeated(center, seed):
    """Integer weights w: the batch KPCA of the rows each repeated w times (the eigenvalues
    scaled by n / sum(w), the weights being scaled to mean 1)."""
    rng = np.random.default_rng(seed)
    S = rng.normal(0.0, 1.0, (25, 4))
    w = rng.integers(1, 6, size=25).astype(float)
    weighted = batch_kpca(S, KERNEL, 3, center, weights=w)
    repeated = batch_kpca(np.repeat(S, w.astype(int), axis=0), KERNEL, 3, center)
    np.testing.assert_allclose(weighted.eigenvalues * w.sum() / 25, repeated.eigenvalues,
                               rtol=1e-9)
    X = rng.normal(0.0, 1.0, (30, 4))
    np.testing.assert_allclose(_signed(weighted.transform(X)), _signed(repeated.transform(X)),
                               atol=1e-8)


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_uniform_batch_weights_each_point_by_its_copies(center, seed):
    """A sample of every distinct point (with each point's copies on one worker) consumes
    every row: its inclusion weights are the copies, so uniform + batch equals exact KPCA
    of all rows, copies included (unweighted, each duplicated point would count once)."""
    X, parts = _duplicated(seed)
    n_distinct = np.unique(X, axis=0).shape[0]
    model = uniform_batch(LocalCluster(parts), KERNEL, n_components=3, n_landmarks=n_distinct,
                          center=center, random_state=seed)
    exact = exact_kpca(LocalCluster(parts), KERNEL, n_components=3, center=center)
    np.testing.assert_allclose(model.eigenvalues * X.shape[0] / n_distinct, exact.eigenvalues,
                               rtol=1e-8)
    np.testing.assert_allclose(_signed(model.transform(X)), _signed(exact.transform(X)),
                               atol=1e-7)
    plain = batch_kpca(model.landmarks, KERNEL, 3, center)
    assert not np.allclose(plain.eigenvalues * X.shape[0] / n_distinct, exact.eigenvalues,
                           rtol=1e-3)
