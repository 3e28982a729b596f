"""StreamingKernelPCA: scikit-learn contract, batch-split invariance, model file, CLI."""

import argparse
import json
import zipfile

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.utils.estimator_checks import parametrize_with_checks
from threadpoolctl import threadpool_limits

from kernelscale.streaming import StreamingKernelPCA, load_streaming_model, save_streaming_model
from kernelscale.streaming.cli import add_subcommand


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


def test_sparse_input_matches_dense(data):
    est = StreamingKernelPCA(n_components=2, n_random_features=80, random_state=0)
    dense = est.fit(data).transform(data[:20])
    sparse = est.fit(sp.csr_matrix(data)).transform(sp.csr_matrix(data[:20]))
    np.testing.assert_allclose(dense, sparse, atol=1e-10)


def test_estimator_rejects_bad_parameters(data):
    with pytest.raises(ValueError, match="exceeds sketch_size"):
        StreamingKernelPCA(n_components=12, sketch_size=10).fit(data)
    with pytest.raises(ValueError, match="Unknown method"):
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
        meta = json.loads(str(saved["params"]))
        assert all(saved[name].dtype != object for name in saved.files)
    assert meta["model_type"] == "streaming_kpca"
    loaded = load_streaming_model(path)
    np.testing.assert_array_equal(loaded.transform(data), est.transform(data))
    # A loaded model keeps streaming exactly as the original would.
    est.partial_fit(data[500:])
    loaded.partial_fit(data[500:])
    np.testing.assert_allclose(loaded.transform(data), est.transform(data), atol=1e-12)


def test_load_rejects_other_files(tmp_path):
    path = tmp_path / "other.npz"
    np.savez(path, params=np.array(json.dumps({"model_type": "kernel_pca"})))
    with pytest.raises(ValueError, match="not 'streaming_kpca'"):
        load_streaming_model(path)
    with zipfile.ZipFile(tmp_path / "empty.npz", "w"):
        pass
    with pytest.raises(ValueError, match="no 'params'"):
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
    assert "points/s" in capsys.readouterr().err
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


def test_cli_user_mistakes_exit_2(tmp_path, data, capsys):
    np.save(tmp_path / "data.npy", data)
    missing = parse(["stream", "--data", str(tmp_path / "nope.npy"), "--out", "m.npz"])
    assert missing.func(missing) == 2
    too_many = parse(["stream", "--data", str(tmp_path / "data.npy"), "--out",
                      str(tmp_path / "m.npz"), "--n-components", "30", "--quiet"])
    assert too_many.func(too_many) == 2
    err = capsys.readouterr().err
    assert "nope.npy" in err and "exceeds sketch_size" in err
    assert "Traceback" not in err
