"""StreamingKernelPCA: scikit-learn contract, batch-split invariance, model file, CLI."""

import argparse
import json
import warnings
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file
from sklearn.exceptions import NotFittedError
from sklearn.utils.estimator_checks import parametrize_with_checks
from sklearn.utils.validation import check_is_fitted
from threadpoolctl import threadpool_limits

from kernelscale import cli
from kernelscale.streaming import StreamingKernelPCA, load_streaming_model, save_streaming_model
from kernelscale.streaming.cli import add_subcommand
from kernelscale.streaming.estimator import METHODS


@pytest.fixture(autouse=True)
def one_blas_thread():
    with threadpool_limits(1, user_api="blas"):
        yield


@parametrize_with_checks(
    [
        StreamingKernelPCA(n_random_features=50, sketch_size=6, random_state=0),
        StreamingKernelPCA(method="rnca", n_random_features=30, random_state=0),
        StreamingKernelPCA(method="nystrom", n_random_features=20, random_state=0),
    ]
)
def test_sklearn_contract(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(3).standard_normal((900, 6))


@pytest.mark.parametrize("method", ["skpca", "rnca", "nystrom"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_any_batch_split_gives_the_fit_result(data, method, seed):
    params = dict(n_components=3, method=method, n_random_features=120, sketch_size=10,
                  random_state=seed)
    fitted = StreamingKernelPCA(batch_size=256, **params).fit(data)
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.choice(np.arange(1, len(data)), size=12, replace=False))
    streamed = StreamingKernelPCA(**params)
    for block in np.split(data, cuts):
        streamed.partial_fit(block)
    assert streamed.n_samples_seen_ == fitted.n_samples_seen_ == len(data)
    np.testing.assert_allclose(streamed.transform(data), fitted.transform(data),
                               rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(streamed.eigenvalues_, fitted.eigenvalues_, rtol=1e-9)
    lifted = fitted.sketcher_._lift(data[:50])
    np.testing.assert_allclose(lifted @ fitted.components_.T, fitted.transform(data[:50]),
                               atol=1e-10)


@pytest.fixture
def count_decompositions(monkeypatch):
    """Counts the decompositions (SVD of the sketch, eigh of m x m or c x c) by method."""
    calls = {name: 0 for name in METHODS}
    for name, cls in METHODS.items():
        def counted(self, _original=cls._decompose, _name=name):
            calls[_name] += 1
            return _original(self)
        monkeypatch.setattr(cls, "_decompose", counted)
    return calls


@pytest.mark.parametrize("method", ["skpca", "rnca", "nystrom"])
def test_partial_fit_defers_the_decomposition(data, method, count_decompositions):
    est = StreamingKernelPCA(n_components=3, method=method, n_random_features=100,
                             sketch_size=10, random_state=0)
    assert not hasattr(est, "components_") and not hasattr(est, "eigenvalues_")
    for block in np.array_split(data, 10):
        est.partial_fit(block)
    # Ten batches and no decomposition yet: partial_fit only feeds the sketch.
    assert count_decompositions[method] == 0
    check_is_fitted(est)
    assert est.n_samples_seen_ == len(data) and est.space_words_ > 0 and est.gamma_ > 0
    scores = est.transform(data[:20])
    assert count_decompositions[method] == 1
    values, components = est.eigenvalues_, est.components_
    est.transform(data[20:40])
    assert count_decompositions[method] == 1  # cached until the next partial_fit
    np.testing.assert_allclose(est.sketcher_._lift(data[:20]) @ components.T, scores,
                               atol=1e-10)
    est.partial_fit(data[:5])
    assert count_decompositions[method] == 1
    assert not np.array_equal(est.eigenvalues_, values)  # recomputed on read after new rows
    assert count_decompositions[method] == 2
    # fit decomposes exactly once, at the end.
    StreamingKernelPCA(n_components=3, method=method, n_random_features=100, sketch_size=10,
                       batch_size=100, random_state=0).fit(data)
    assert count_decompositions[method] == 3


def test_unfitted_and_loaded_models(tmp_path, data, count_decompositions):
    est = StreamingKernelPCA(n_components=2, n_random_features=60, random_state=1)
    with pytest.raises(NotFittedError):
        est.components_  # noqa: B018
    with pytest.raises(NotFittedError):
        check_is_fitted(est)
    est.partial_fit(data)
    save_streaming_model(est, tmp_path / "m.npz")  # saving needs no decomposition
    assert count_decompositions["skpca"] == 0
    loaded = load_streaming_model(tmp_path / "m.npz")
    check_is_fitted(loaded)
    assert count_decompositions["skpca"] == 0
    np.testing.assert_allclose(loaded.components_, est.components_, atol=1e-12)
    np.testing.assert_array_equal(loaded.transform(data), est.transform(data))


def test_warns_when_the_sketch_holds_fewer_directions_than_n_components(data):
    # l = 6, modified shrink: each shrink keeps 6//2 - 1 = 2 directions and frees 4 rows,
    # so after 6 + 4j rows the stream ends right after a shrink with 2 directions.
    X = data[:10]
    est = StreamingKernelPCA(n_components=4, n_random_features=50, sketch_size=6,
                             random_state=0)
    with pytest.warns(UserWarning, match=r"only 2 non-zero direction.*n_components=4") as rec:
        est.fit(X)
    message = str(rec[0].message)
    assert "sketch_size to at least 2*n_components + 2 = 10" in message
    assert "shrink='classic'" in message
    assert np.all(est.eigenvalues_[2:] == 0) and np.all(est.transform(X)[:, 2:] == 0)
    # Streaming: the warning comes with the lazy decomposition, not with partial_fit.
    streamed = StreamingKernelPCA(n_components=4, n_random_features=50, sketch_size=6,
                                  random_state=0)
    with pytest.warns(UserWarning, match=r"n_components=4 is not below sketch_size/2 = 3"):
        streamed.partial_fit(X[:4])  # k >= l/2 is said at the start (issue 34)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for block in np.array_split(X[4:], 3):
            streamed.partial_fit(block)
    with pytest.warns(UserWarning, match="only 2 non-zero"):
        streamed.transform(X)
    # Enough directions: no warning (classic shrink keeps l - 1 = 5; or l >= 2k + 2).
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        StreamingKernelPCA(n_components=4, n_random_features=50, sketch_size=6,
                           shrink="classic", random_state=0).fit(X).transform(X)
        StreamingKernelPCA(n_components=4, n_random_features=50, sketch_size=10,
                           random_state=0).fit(data).transform(X)
    # Other methods warn too when the points seen span too few directions.
    with pytest.warns(UserWarning, match="only 2 non-zero.*point"):
        StreamingKernelPCA(n_components=3, method="nystrom", random_state=0).fit(data[:2])


def test_sparse_input_matches_dense(data):
    est = StreamingKernelPCA(n_components=2, n_random_features=80, random_state=0)
    dense = est.fit(data).transform(data[:20])
    sparse = est.fit(sp.csr_matrix(data)).transform(sp.csr_matrix(data[:20]))
    np.testing.assert_allclose(dense, sparse, atol=1e-10)


def test_estimator_rejects_bad_parameters(data):
    # n_components above the most directions the method can ever hold is an error up
    # front; below it but above what the sketch ends up holding is a warning (above).
    with pytest.raises(ValueError, match="exceeds sketch_size"):
        StreamingKernelPCA(n_components=12, sketch_size=10).fit(data)
    with pytest.raises(ValueError, match="'method' parameter .* str among .*'skpca'"):
        StreamingKernelPCA(method="kpca").fit(data)
    with pytest.raises(ValueError, match="gamma"):
        StreamingKernelPCA(gamma=0.0).fit(data)
    with pytest.raises(ValueError, match="shift-invariant"):
        StreamingKernelPCA(kernel="poly").fit(data)
    est = StreamingKernelPCA(random_state=0).partial_fit(data[:10])
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(data[:10, :4])
    with pytest.raises(ValueError, match="NaN"):
        StreamingKernelPCA().fit(np.full((5, 3), np.nan))


@pytest.mark.parametrize("method", ["skpca", "rnca", "nystrom"])
def test_model_file_roundtrip_without_pickle(tmp_path, data, method):
    est = StreamingKernelPCA(n_components=3, method=method, n_random_features=60,
                             random_state=4).fit(data[:500])
    path = tmp_path / "model.npz"
    save_streaming_model(est, path)
    with np.load(path, allow_pickle=False) as saved:
        meta = json.loads(str(saved["__header__"]))
        assert all(saved[name].dtype != object for name in saved.files)
    assert meta["model_type"] == "streaming_kpca"
    assert meta["estimator"] == "StreamingKernelPCA"
    loaded = load_streaming_model(path)
    np.testing.assert_array_equal(loaded.transform(data), est.transform(data))
    # A loaded model keeps streaming exactly as the original would.
    est.partial_fit(data[500:])
    loaded.partial_fit(data[500:])
    np.testing.assert_allclose(loaded.transform(data), est.transform(data), atol=1e-12)


def test_load_rejects_other_files(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, params=np.array(json.dumps({"model_type": "no_such_model"})))
    with pytest.raises(ValueError, match="unknown type 'no_such_model'"):
        load_streaming_model(path)
    from kernelscale import KernelPCA, save_model

    save_model(KernelPCA(2).fit(np.random.default_rng(0).standard_normal((20, 3))),
               tmp_path / "kpca.npz")
    with pytest.raises(ValueError, match="is a KernelPCA model file, not a StreamingKernelPCA"):
        load_streaming_model(tmp_path / "kpca.npz")
    with zipfile.ZipFile(tmp_path / "empty.npz", "w"):
        pass
    with pytest.raises(ValueError, match="no kernelscale header"):
        load_streaming_model(tmp_path / "empty.npz")


def parse(argv):
    parser = argparse.ArgumentParser(prog="kernelscale")
    add_subcommand(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(argv)


def test_cli_stream_writes_a_loadable_model(tmp_path, data, capsys):
    np.save(tmp_path / "data.npy", data)
    out = tmp_path / "model.npz"
    args = parse(["stream", "--data", str(tmp_path / "data.npy"), "--out", str(out),
                  "--n-components", "3", "--n-random-features", "100", "--sketch-size", "8",
                  "--chunk-size", "128", "--gamma", "0.2"])
    assert args.func(args) == 0
    assert "points/s" not in capsys.readouterr().err  # not a terminal: no bar (issue 34)
    model = load_streaming_model(out)
    assert model.n_samples_seen_ == len(data)
    direct = StreamingKernelPCA(n_components=3, gamma=0.2, n_random_features=100,
                                sketch_size=8, random_state=0).fit(data)
    np.testing.assert_allclose(model.transform(data), direct.transform(data), atol=1e-9)
    # The same rows from a CSV file give the same model.
    np.savetxt(tmp_path / "data.csv", data, delimiter=",")
    args = parse(["stream", "--data", str(tmp_path / "data.csv"), "--out", str(out),
                  "--n-components", "3", "--n-random-features", "100", "--sketch-size", "8",
                  "--chunk-size", "100", "--gamma", "0.2", "--quiet"])
    assert args.func(args) == 0
    np.testing.assert_allclose(load_streaming_model(out).transform(data),
                               direct.transform(data), atol=1e-9)
    # And from a LIBSVM file (read as CSR chunks).
    dump_svmlight_file(data, np.zeros(len(data)), str(tmp_path / "data.svm"), zero_based=True)
    args = parse(["stream", "--data", str(tmp_path / "data.svm"), "--out", str(out),
                  "--n-components", "3", "--n-random-features", "100", "--sketch-size", "8",
                  "--chunk-size", "256", "--gamma", "0.2", "--quiet"])
    assert args.func(args) == 0
    svm_model = load_streaming_model(out)
    assert svm_model.n_samples_seen_ == len(data)
    np.testing.assert_allclose(svm_model.transform(data), direct.transform(data), atol=1e-9)
    np.testing.assert_allclose(svm_model.eigenvalues_, direct.eigenvalues_, rtol=1e-9)


def test_cli_transform_reads_a_stream_model(tmp_path, data, capsys):
    np.save(tmp_path / "data.npy", data)
    model = tmp_path / "stream.npz"
    assert cli.main(["stream", "--data", str(tmp_path / "data.npy"), "--out", str(model),
                     "--n-components", "4", "--n-random-features", "80", "--sketch-size",
                     "12", "--method", "skpca", "--quiet"]) == 0
    out = tmp_path / "scores.npy"
    assert cli.main(["transform", "--model", str(model), "--data", str(tmp_path / "data.npy"),
                     "--out", str(out)]) == 0
    scores = np.load(out)
    assert scores.shape == (len(data), 4)
    np.testing.assert_array_equal(scores, load_streaming_model(model).transform(data))
    # A data file with the wrong number of features: one line, exit code 2.
    capsys.readouterr()
    np.save(tmp_path / "narrow.npy", data[:, :4])
    assert cli.main(["transform", "--model", str(model), "--data",
                     str(tmp_path / "narrow.npy"), "--out", str(tmp_path / "bad.npy")]) == 2
    err = capsys.readouterr().err
    assert "4 features" in err and "expects 6" in err and "Traceback" not in err
    assert not (tmp_path / "bad.npy").exists()


def test_cli_user_mistakes_exit_2(tmp_path, data, capsys):
    np.save(tmp_path / "data.npy", data)
    missing = parse(["stream", "--data", str(tmp_path / "nope.npy"), "--out", "m.npz"])
    assert missing.func(missing) == 2
    too_many = parse(["stream", "--data", str(tmp_path / "data.npy"), "--out",
                      str(tmp_path / "m.npz"), "--n-components", "30", "--quiet"])
    assert too_many.func(too_many) == 2
    err = capsys.readouterr().err
    assert "nope.npy" in err and "exceeds --sketch-size" in err
    assert "Traceback" not in err


def test_cli_stream_warns_when_the_sketch_is_too_small(tmp_path, data, capsys):
    np.save(tmp_path / "data.npy", data[:10])
    args = parse(["stream", "--data", str(tmp_path / "data.npy"), "--out",
                  str(tmp_path / "m.npz"), "--n-components", "4", "--sketch-size", "6",
                  "--n-random-features", "50", "--quiet"])
    assert args.func(args) == 0
    err = capsys.readouterr().err
    assert "kernelscale: warning: The skpca sketch holds only 2" in err
    assert "2 * --n-components + 2 = 10" in err
