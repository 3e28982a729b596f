"""Model files for every fitted estimator: save_model / load_model give back the same fit.

One format (an ``.npz`` of plain arrays with a JSON header, loaded with
``allow_pickle=False``) and one registry: each setting registers its
estimator's state functions, files of the earlier format still load, and a file
that cannot be loaded says why.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from kernelscale import (
    DistributedKernelPCA,
    DistributedSpectralClustering,
    FederatedKernelKMeans,
    KernelPCA,
    StreamingKernelPCA,
    VerticalKernelPCA,
    load_streaming_model,
    save_streaming_model,
)
from kernelscale.model import FORMAT_VERSION, is_model_file, load_model, save_model

SEEDS = [0, 1, 2]


def _data(seed: int, n: int = 80, d: int = 5):
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=3.0, size=(3, d))
    X = centres[rng.integers(3, size=n)] + rng.standard_normal((n, d))
    return X, rng.standard_normal((25, d)) * 2.0


ESTIMATORS = {
    "diskpca": lambda seed: DistributedKernelPCA(
        n_components=3, gamma=0.1, n_landmarks=25, n_workers=3, fit_inverse_transform=True,
        random_state=seed),
    "diskpca-random-features": lambda seed: DistributedKernelPCA(
        n_components=3, method="random_features", n_random_features=40, n_workers=3,
        center=False, random_state=seed),
    "kernel-pca": lambda seed: KernelPCA(n_components=3, kernel="rbf", gamma=0.1,
                                         fit_inverse_transform=True, random_state=seed),
    "vertical": lambda seed: VerticalKernelPCA(n_components=2, gamma=0.1, feature_blocks=2),
    "fk-kmeans": lambda seed: FederatedKernelKMeans(
        n_clusters=3, n_random_features=20, max_iter=4, coreset_size=40, n_workers=3,
        random_state=seed),
    "spectral": lambda seed: DistributedSpectralClustering(
        n_clusters=3, n_landmarks=25, coreset_size=40, n_workers=3, random_state=seed),
    "streaming": lambda seed: StreamingKernelPCA(
        n_components=2, n_random_features=40, sketch_size=8, random_state=seed),
}


def _assert_same(a, b, where: str) -> None:
    """``a`` and ``b`` hold the same values, through lists, dicts and objects' attributes."""
    assert type(a) is type(b), where
    if sp.issparse(a):
        assert a.shape == b.shape and (a != b).nnz == 0, where
    elif isinstance(a, np.ndarray):
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, np.random.Generator):
        assert a.bit_generator.state == b.bit_generator.state, where
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict) or hasattr(a, "__dict__"):
        a, b = (a, b) if isinstance(a, dict) else (vars(a), vars(b))
        assert sorted(a) == sorted(b), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}.{key}")
    else:
        assert a == b or (a != a and b != b), where  # NaN equals NaN here


def _assert_same_fitted_attributes(loaded, fitted) -> None:
    """Every fitted attribute (``name_``) comes back, equal; the ledger is checked apart
    and the budget planner's report is not kept."""
    def fitted_names(estimator):
        return sorted(n for n in vars(estimator) if n.endswith("_") and not n.startswith("__")
                      and n not in ("communication_", "budget_plan_"))

    names = fitted_names(fitted)
    assert fitted_names(loaded) == names
    for name in names:
        _assert_same(getattr(loaded, name), getattr(fitted, name), name)


def _same_ledger(a, b, sends: bool = True) -> None:
    assert a == b  # the same messages, in order
    assert a.times(phase=None) == b.times(phase=None)
    assert a.total_words(phase=None) == b.total_words(phase=None)
    assert (a.total_words(phase=None) > 0) == sends


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", sorted(ESTIMATORS))
def test_a_loaded_estimator_does_what_the_fitted_one_does(tmp_path, name, seed):
    X, X_new = _data(seed)
    fitted = ESTIMATORS[name](seed).fit(X)
    path = tmp_path / "model.npz"
    save_model(fitted, path)
    assert is_model_file(path)
    with np.load(path, allow_pickle=False) as saved:  # plain arrays and a JSON header
        header = json.loads(str(saved["__header__"]))
        assert all(saved[entry].dtype != object for entry in saved.files)
    assert header["format_version"] == FORMAT_VERSION
    assert header["estimator"] == type(fitted).__name__

    loaded = load_model(path, expected_type=type(fitted))
    assert type(loaded) is type(fitted)
    assert loaded.get_params() == fitted.get_params()
    assert loaded.n_features_in_ == fitted.n_features_in_
    np.testing.assert_allclose(loaded.transform(X_new), fitted.transform(X_new), rtol=0,
                               atol=1e-12)
    np.testing.assert_array_equal(loaded.get_feature_names_out(),
                                  fitted.get_feature_names_out())
    if hasattr(fitted, "predict"):
        np.testing.assert_array_equal(loaded.predict(X_new), fitted.predict(X_new))
        np.testing.assert_array_equal(loaded.labels_, fitted.labels_)
        np.testing.assert_array_equal(loaded.cluster_centers_, fitted.cluster_centers_)
    if getattr(fitted, "fit_inverse_transform", False):
        Z = fitted.transform(X_new)
        np.testing.assert_allclose(loaded.inverse_transform(Z), fitted.inverse_transform(Z),
                                   rtol=0, atol=1e-12)
    if hasattr(fitted, "communication_"):
        # an exact KernelPCA fit sends nothing (one place)
        _same_ledger(loaded.communication_, fitted.communication_,
                     sends=getattr(fitted, "method_", None) != "exact")
    if hasattr(fitted, "eigenvalues_"):
        np.testing.assert_array_equal(loaded.eigenvalues_, fitted.eigenvalues_)
    # after transform: a streaming sketch caches its decomposition on first use
    _assert_same_fitted_attributes(loaded, fitted)


def test_every_public_estimator_has_a_model_file():
    import kernelscale
    from kernelscale.model_registry import registered_model_types

    estimators = [name for name in kernelscale.__all__
                  if isinstance(getattr(kernelscale, name), type)
                  and hasattr(getattr(kernelscale, name), "get_params")]
    assert sorted(estimators) == sorted({type(make(0)).__name__
                                         for make in ESTIMATORS.values()})
    assert len(registered_model_types()) == len(estimators)


def test_sparse_landmarks_and_feature_names_are_kept(tmp_path):
    pd = pytest.importorskip("pandas")
    X, X_new = _data(4)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    est = DistributedKernelPCA(n_components=2, gamma=0.1, n_landmarks=20, n_workers=2,
                               random_state=0).fit(frame)
    save_model(est, tmp_path / "named.npz")
    loaded = load_model(tmp_path / "named.npz")
    _assert_same_fitted_attributes(loaded, est)  # feature_names_in_ included
    new_frame = pd.DataFrame(X_new, columns=frame.columns)
    np.testing.assert_allclose(loaded.transform(new_frame), est.transform(new_frame), atol=1e-12)

    X_sparse = sp.random(60, 30, density=0.2, format="csr", random_state=1)
    est = DistributedKernelPCA(n_components=2, kernel="linear", n_landmarks=20, n_workers=2,
                               random_state=1).fit(X_sparse)
    save_model(est, tmp_path / "sparse.npz")
    loaded = load_model(tmp_path / "sparse.npz")
    _assert_same_fitted_attributes(loaded, est)
    assert sp.issparse(loaded.landmarks_)
    np.testing.assert_allclose(loaded.transform(X_sparse), est.transform(X_sparse), atol=1e-12)


def test_parameters_that_a_file_cannot_hold_come_back_as_defaults(tmp_path):
    X, X_new = _data(5)
    est = DistributedKernelPCA(n_components=2, gamma=0.1, landmarks=X[:15], n_workers=2,
                               random_state=np.random.default_rng(5)).fit(X)
    save_model(est, tmp_path / "m.npz")
    with np.load(tmp_path / "m.npz", allow_pickle=False) as saved:
        header = json.loads(str(saved["__header__"]))
    assert sorted(header["dropped_params"]) == ["landmarks", "random_state"]
    loaded = load_model(tmp_path / "m.npz")
    assert loaded.landmarks is None and loaded.random_state is None
    np.testing.assert_allclose(loaded.transform(X_new), est.transform(X_new), atol=1e-12)


def test_vertical_training_blocks_as_paths(tmp_path):
    X, X_new = _data(6)
    paths = [tmp_path / "a.npy", tmp_path / "b.npy"]
    np.save(paths[0], X[:, :2])
    np.save(paths[1], X[:, 2:])
    est = VerticalKernelPCA(n_components=2, gamma=0.1).fit([str(p) for p in paths])
    save_model(est, tmp_path / "v.npz")
    loaded = load_model(tmp_path / "v.npz")
    assert [block.path for block in loaded.X_fit_blocks_] == [str(p) for p in paths]
    loaded.X_fit_blocks_ = [block.path for block in loaded.X_fit_blocks_]
    _assert_same_fitted_attributes(loaded, est)
    np.testing.assert_allclose(loaded.transform(X_new), est.transform(X_new), atol=1e-12)

    def load_a():
        return X[:, :2]

    est = VerticalKernelPCA(n_components=2, gamma=0.1).fit([load_a, str(paths[1])])
    with pytest.raises(ValueError, match="party 0 holds its training block through a "
                                         "callable loader"):
        save_model(est, tmp_path / "callable.npz")
    est.X_fit_blocks_[0] = X[:, :2].tolist()
    with pytest.raises(ValueError, match="party 0 holds its training block through a list"):
        save_model(est, tmp_path / "list.npz")
    assert not (tmp_path / "callable.npz").exists() and not (tmp_path / "list.npz").exists()


def test_a_model_file_never_holds_a_pickle(tmp_path):
    from kernelscale.model_format import write_model_file

    for bad in (np.array([{"a": 1}], dtype=object), sp.eye(3, format="csr")):
        with pytest.raises(TypeError, match="'x' is a .* of object"):
            write_model_file(tmp_path / "m.npz", {"model_type": "landmark_kpca"}, {"x": bad})
    assert not (tmp_path / "m.npz").exists()


def _legacy_streaming_file(estimator, path) -> None:
    """A streaming model as save_streaming_model wrote it before format version 2."""
    params = estimator.get_params()
    meta = {"model_type": "streaming_kpca", "format_version": 1, "estimator": params,
            "sketcher": estimator.sketcher_.params(),
            "n_features_in": int(estimator.n_features_in_)}
    np.savez(path, params=np.array(json.dumps(meta)), **estimator.sketcher_.to_arrays())


@pytest.mark.parametrize("method", ["skpca", "rnca", "nystrom"])
def test_files_of_the_first_format_still_load(tmp_path, method):
    X, X_new = _data(7)
    est = StreamingKernelPCA(n_components=2, n_random_features=30, sketch_size=8,
                             method=method, random_state=7).fit(X)
    _legacy_streaming_file(est, tmp_path / "stream.npz")
    assert is_model_file(tmp_path / "stream.npz")
    for loaded in (load_model(tmp_path / "stream.npz"),
                   load_streaming_model(tmp_path / "stream.npz")):
        np.testing.assert_array_equal(loaded.transform(X_new), est.transform(X_new))

    # A bare KernelPCAModel as kernelscale fit wrote it (format version 1).
    model = DistributedKernelPCA(n_components=2, gamma=0.1, n_landmarks=20, n_workers=2,
                                 random_state=7).fit(X).model_
    arrays, meta = model.to_arrays()
    header = {"format_version": 1, "model_type": model.model_type, **meta}
    np.savez(tmp_path / "v1.npz", __header__=np.array(json.dumps(header)), **arrays)
    np.testing.assert_array_equal(load_model(tmp_path / "v1.npz").transform(X_new),
                                  model.transform(X_new))
    # and save_model of a bare model still writes one
    save_model(model, tmp_path / "bare.npz")
    np.testing.assert_array_equal(load_model(tmp_path / "bare.npz").transform(X_new),
                                  model.transform(X_new))


@pytest.fixture(scope="module")
def saved_files(tmp_path_factory):
    """A model file of each estimator, fitted on the same data."""
    folder = tmp_path_factory.mktemp("models")
    X, _ = _data(8)
    files = {}
    for name in ("diskpca", "vertical", "fk-kmeans", "streaming"):
        files[name] = folder / f"{name}.npz"
        save_model(ESTIMATORS[name](8).fit(X), files[name])
    return files


def test_a_file_of_another_type_says_what_it_holds(saved_files):
    with pytest.raises(ValueError, match=r"diskpca.npz is a DistributedKernelPCA model file, "
                                         "not a StreamingKernelPCA one; load it with "
                                         "kernelscale.load_model"):
        load_streaming_model(saved_files["diskpca"])
    with pytest.raises(ValueError, match="is a VerticalKernelPCA model file, not a "
                                         "FederatedKernelKMeans one"):
        load_model(saved_files["vertical"], expected_type=FederatedKernelKMeans)
    with pytest.raises(ValueError, match="is a KernelPCAModel model file, not a "
                                         "StreamingKernelPCA one"):
        X, _ = _data(8)
        est = DistributedKernelPCA(n_components=2, n_landmarks=20, n_workers=2,
                                   random_state=0).fit(X)
        save_model(est.model_, saved_files["diskpca"].with_name("bare.npz"))
        load_streaming_model(saved_files["diskpca"].with_name("bare.npz"))


def test_save_streaming_model_of_another_estimator_names_the_cause(tmp_path):
    X, _ = _data(9)
    est = DistributedKernelPCA(n_components=2, n_landmarks=20, n_workers=2,
                               random_state=0).fit(X)
    with pytest.raises(TypeError, match="save_streaming_model saves a StreamingKernelPCA, not "
                                        "a DistributedKernelPCA; save any fitted estimator "
                                        "or model with kernelscale.save_model"):
        save_streaming_model(est, tmp_path / "m.npz")
    with pytest.raises(ValueError, match="This StreamingKernelPCA is not fitted yet"):
        save_streaming_model(StreamingKernelPCA(), tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


def _rewrite_header(path, out, **changes):
    with np.load(path, allow_pickle=False) as saved:
        arrays = {name: saved[name] for name in saved.files}
    header = {**json.loads(str(arrays.pop("__header__"))), **changes}
    np.savez(out, __header__=np.array(json.dumps(header)), **arrays)
    return out


def test_another_format_version_says_so(saved_files, tmp_path):
    newer = _rewrite_header(saved_files["fk-kmeans"], tmp_path / "newer.npz",
                            format_version=FORMAT_VERSION + 1)
    with pytest.raises(ValueError, match=rf"written by a newer kernelscale \(model file "
                                         rf"format {FORMAT_VERSION + 1}; .* reads formats 1 "
                                         rf"to {FORMAT_VERSION}\): upgrade kernelscale"):
        load_model(newer)
    for version in (0, "2", None):
        bad = _rewrite_header(saved_files["fk-kmeans"], tmp_path / "bad.npz",
                              format_version=version)
        with pytest.raises(ValueError, match="damaged header: format version"):
            load_model(bad)


def test_tampered_estimator_files_are_refused(saved_files, tmp_path):
    with np.load(saved_files["diskpca"], allow_pickle=False) as saved:
        params = json.loads(str(saved["__header__"]))["params"]
    unknown = _rewrite_header(saved_files["diskpca"], tmp_path / "unknown.npz",
                              params={**params, "n_wizards": 3})
    with pytest.raises(ValueError, match=r"holds a DistributedKernelPCA with parameters "
                                         r"\['n_wizards'\] that this kernelscale"):
        load_model(unknown)
    # Only public, registered estimators: a header cannot name other code.
    for estimator in ("LocalCluster", "os.system", "Pipeline"):
        evil = _rewrite_header(saved_files["diskpca"], tmp_path / "evil.npz",
                               model_type=estimator, estimator=estimator)
        with pytest.raises(ValueError, match="unknown type"):
            load_model(evil)
    invalid = _rewrite_header(saved_files["diskpca"], tmp_path / "invalid.npz",
                              params={**params, "n_components": -3})
    with pytest.raises(ValueError, match="damaged DistributedKernelPCA file.*n_components"):
        load_model(invalid)
    for model_type in (["distributed_kpca"], None, 3):
        odd = _rewrite_header(saved_files["diskpca"], tmp_path / "odd.npz",
                              model_type=model_type)
        with pytest.raises(ValueError, match="unknown type"):
            load_model(odd)
    broken = _rewrite_header(saved_files["vertical"], tmp_path / "broken.npz", state={})
    with pytest.raises(ValueError, match="is a damaged VerticalKernelPCA file"):
        load_model(broken)


def test_what_cannot_be_saved_says_why(tmp_path):
    X, _ = _data(10)
    with pytest.raises(ValueError, match="This FederatedKernelKMeans is not fitted yet"):
        save_model(FederatedKernelKMeans(), tmp_path / "m.npz")
    est = DistributedKernelPCA(n_components=2, kernel=lambda a, b: a @ b.T, n_landmarks=20,
                               method="uniform_dislr", n_workers=2, random_state=0).fit(X)
    with pytest.raises(ValueError, match="callable kernel cannot be saved"):
        save_model(est, tmp_path / "m.npz")
    with pytest.raises(ValueError, match="callable kernel cannot be saved"):
        save_model(est.model_, tmp_path / "m.npz")
    with pytest.raises(TypeError, match="dict cannot be saved as a kernelscale model file"):
        save_model({"coef": np.eye(2)}, tmp_path / "m.npz")
    assert not (tmp_path / "m.npz").exists()


def test_a_fresh_process_loads_every_estimator(saved_files):
    """load_model finds each estimator by its public name, with nothing imported before."""
    code = ("import sys\nfrom kernelscale.model import load_model\n"
            "print(' '.join(type(load_model(p)).__name__ for p in sys.argv[1:]))")
    names = [saved_files[name] for name in ("diskpca", "vertical", "fk-kmeans", "streaming")]
    out = subprocess.run([sys.executable, "-c", code, *map(str, names)], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["DistributedKernelPCA", "VerticalKernelPCA", "FederatedKernelKMeans",
                   "StreamingKernelPCA"]
