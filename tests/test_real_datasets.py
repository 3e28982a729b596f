"""Tests for the bundled UCI sets, the data-set registry and the offline LIBSVM cache.

Nothing here touches the network: the LIBSVM tests write small files into a
temporary ``data_home`` and make every download attempt raise.
"""

from __future__ import annotations

import bz2
import io
import json
import string
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from kernelscale.bench import Experiment, Method, run_experiment
from kernelscale.datasets import (
    DATASETS,
    LIBSVM_SETS,
    fetch_libsvm,
    libsvm_path,
    load_dataset,
    load_digits_standardized,
    load_dna,
    load_income,
    load_insurance,
    load_letter,
    load_musk,
    load_satellite,
    load_shuttle,
    load_spam,
    make_gaussian_mixture,
    subsample,
)
from kernelscale.datasets import libsvm as libsvm_module

# name: (loader, n_samples, n_features, class names)
REAL = {
    "letter": (load_letter, 20_000, 16, set(string.ascii_uppercase)),
    "satellite": (load_satellite, 6_435, 36, {
        "cotton crop", "damp grey soil", "grey soil", "red soil", "vegetation stubble",
        "very damp grey soil"}),
    "spam": (load_spam, 4_601, 57, {"spam", "nonspam"}),
    "insurance": (load_insurance, 9_822, 85, {"insurance", "noinsurance"}),
    "musk": (load_musk, 476, 166, {"musk", "nonmusk"}),
    "income": (load_income, 6_876, 43, {
        "-10.000)", "[10.000-15.000)", "[15.000-20.000)", "[20.000-25.000)", "[25.000-30.000)",
        "[30.000-40.000)", "[40.000-50.000)", "[50.000-75.000)", "[75.000-"}),
    "shuttle": (load_shuttle, 14_500, 9, {
        "Rad.Flow", "Fpv.Close", "Fpv.Open", "High", "Bypass", "Bpv.Close", "Bpv.Open"}),
    "dna": (load_dna, 3_186, 180, {"ei", "ie", "n"}),
}


@pytest.fixture(scope="module")
def real_data():
    return {name: loader() for name, (loader, *_rest) in REAL.items()}


# --------------------------------------------------------------------------- bundled sets
@pytest.mark.parametrize("name", list(REAL))
def test_shape_dtype_classes_and_finite(real_data, name):
    _, n, d, classes = REAL[name]
    X, y = real_data[name]
    assert isinstance(X, np.ndarray) and X.dtype == np.float64 and X.shape == (n, d)
    assert y.shape == (n,) and y.dtype.kind == "U"
    assert set(np.unique(y)) == classes
    assert np.isfinite(X).all()


@pytest.mark.parametrize("name", list(REAL))
def test_same_result_on_two_calls(real_data, name):
    X, y = REAL[name][0]()
    assert np.array_equal(X, real_data[name][0]) and np.array_equal(y, real_data[name][1])
    assert X is not real_data[name][0]  # a fresh array each call, nothing shared


def test_values_are_the_uci_values(real_data):
    X, y = real_data["letter"]
    # First row of the UCI file letter-recognition.data: T,2,8,3,5,1,8,13,0,6,6,10,8,0,8,0,8
    assert y[0] == "T"
    assert X[0].tolist() == [2, 8, 3, 5, 1, 8, 13, 0, 6, 6, 10, 8, 0, 8, 0, 8]
    assert X.min() == 0 and X.max() == 15 and np.array_equal(X, np.round(X))
    # Spambase's capital_run_length_total reaches 15,841: not rescaled.
    assert real_data["spam"][0][:, -1].max() == 15_841
    assert np.bincount(np.unique(real_data["spam"][1], return_inverse=True)[1]).tolist() == [
        2788, 1813]
    # Insurance (CoIL 2000, paper 001's Table 1): 586 caravan-policy holders of 9,822;
    # integer level codes; customer subtype STYPE has 41 levels, 39 of them occur.
    X, y = real_data["insurance"]
    assert (y == "insurance").sum() == 586
    assert X[0, :5].tolist() == [14, 1, 3, 1, 5]
    assert np.array_equal(X, np.round(X)) and X.min() == 0
    assert np.unique(X[:, 0]).size == 39 and X[:, 0].max() <= 40


def test_kernlab_sets_keep_their_values_and_coding(real_data):
    # musk: kernlab's first row (a musk conformation), integer distances, unscaled.
    X, y = real_data["musk"]
    assert X[0, :6].tolist() == [42, -198, -109, -75, -117, 11] and y[0] == "musk"
    assert (y == "musk").sum() == 207 and X.min() == -348 and X.max() == 336
    # income: 5 ordered level codes from 0, then 38 one-hot columns of 8 nominal answers
    # (each row has exactly one 1 per answer), rows with a missing answer left out.
    X, y = real_data["income"]
    assert X[0].tolist()[:5] == [4, 4, 4, 4, 2] and y[0] == "[75.000-"
    assert X[:, :5].min() == 0 and X[:, :5].max() == 9
    onehot = X[:, 5:]
    assert set(np.unique(onehot)) == {0.0, 1.0}
    blocks = np.cumsum([0, 2, 5, 9, 3, 3, 5, 8, 3])
    for lo, hi in zip(blocks[:-1], blocks[1:], strict=True):
        assert (onehot[:, lo:hi].sum(axis=1) == 1).all()
    assert onehot[:, blocks[6] + 3].sum() == 12  # East Indian: a rare class


def test_mlbench_sets_keep_their_values(real_data):
    # shuttle: UCI's test file shuttle.tst, first row "55 0 81 0 -6 11 25 88 64 4" (class 4,
    # High), and its class counts; integer readings, far-out values kept.
    X, y = real_data["shuttle"]
    assert X[0].tolist() == [55, 0, 81, 0, -6, 11, 25, 88, 64] and y[0] == "High"
    names, counts = np.unique(y, return_counts=True)
    assert dict(zip(names.tolist(), counts.tolist(), strict=True)) == {
        "Rad.Flow": 11_478, "High": 2_155, "Bypass": 809, "Fpv.Open": 39, "Fpv.Close": 13,
        "Bpv.Close": 4, "Bpv.Open": 2}
    assert np.array_equal(X, np.round(X)) and X[:, 5].min() == -26_739
    # dna: 180 binary indicators, 3 per nucleotide of the window, at most one of them 1;
    # 3,001 distinct rows.
    X, y = real_data["dna"]
    assert set(np.unique(X)) == {0.0, 1.0}
    assert X.reshape(-1, 60, 3).sum(axis=2).max() == 1
    assert np.unique(X, axis=0).shape[0] == 3_001
    assert (y == "n").sum() == 1_654 and y[0] == "n"


def test_standardize(real_data):
    X, y = load_spam(standardize=True)
    np.testing.assert_allclose(X.mean(axis=0), 0, atol=1e-12)
    np.testing.assert_allclose(X.std(axis=0), 1, rtol=1e-12)
    assert np.array_equal(y, real_data["spam"][1])


def test_files_are_declared_package_data():
    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text())
    declared = config["tool"]["setuptools"]["package-data"]["kernelscale.datasets"]
    assert "data/*.csv.gz" in declared
    data = root / "kernelscale" / "datasets" / "data"
    assert {p.name for p in data.glob("*.csv.gz")} == {f"{n}.csv.gz" for n in REAL}
    assert (data / "README.md").is_file()


# --------------------------------------------------------------------------- registry
def test_registry_names():
    assert DATASETS[:11] == ("digits", "letter", "satellite", "spam", "insurance", "musk",
                             "income", "shuttle", "dna", "gaussian_mixture", "sparse_bow")
    assert set(DATASETS[11:]) == set(LIBSVM_SETS)


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError, match="Unknown data set 'lettter'") as info:
        load_dataset("lettter")
    for name in DATASETS:
        assert name in str(info.value)


def test_unknown_option_lists_the_valid_ones():
    with pytest.raises(ValueError, match="sigma.*'spam'.*n_samples, random_state, standardize"):
        load_dataset("spam", sigma=1.0)
    with pytest.raises(ValueError, match="standardize.*'digits'"):
        load_dataset("digits", standardize=True)


@pytest.mark.parametrize("name", list(REAL))
def test_dispatcher_gives_the_loaders_data(real_data, name):
    X, y = load_dataset(name)
    assert np.array_equal(X, real_data[name][0]) and np.array_equal(y, real_data[name][1])


def test_dispatcher_digits_and_generators():
    X, y = load_dataset("digits")
    X0, y0 = load_digits_standardized()
    assert np.array_equal(X, X0) and np.array_equal(y, y0)
    X, y = load_dataset("gaussian_mixture", n_samples=300)
    X0, y0 = make_gaussian_mixture(300, 28, random_state=0, return_labels=True)
    assert np.array_equal(X, X0) and np.array_equal(y, y0)
    X, y = load_dataset("sparse_bow", n_samples=40, n_features=500, nnz_per_row=10)
    assert sp.issparse(X) and X.shape == (40, 500) and y is None


def test_subset_is_seeded_ordered_rows(real_data):
    X_full, y_full = real_data["satellite"]
    X, y = load_dataset("satellite", n_samples=500, random_state=3)
    X2, y2 = load_dataset("satellite", n_samples=500, random_state=3)
    X3, _ = load_dataset("satellite", n_samples=500, random_state=4)
    assert X.shape == (500, 36) and y.shape == (500,)
    assert np.array_equal(X, X2) and np.array_equal(y, y2) and not np.array_equal(X, X3)
    # The rows are rows of the full set, in the file's order.
    index = {tuple(row): i for i, row in enumerate(X_full)}
    rows = [index[tuple(row)] for row in X]
    assert rows == sorted(rows) and np.array_equal(y, y_full[rows])


def test_subset_errors():
    with pytest.raises(ValueError, match="between 1 and 4601"):
        load_dataset("spam", n_samples=5000)
    with pytest.raises(TypeError, match="n_samples"):
        subsample(np.zeros((3, 2)), None, 1.5)


# --------------------------------------------------------------------------- LIBSVM cache
@pytest.fixture
def offline(monkeypatch):
    """Any download attempt fails the test."""

    def refuse(*args, **kwargs):
        raise AssertionError("a test tried to download")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    monkeypatch.setattr(libsvm_module, "_download", refuse)


def _svmlight_bytes(n_samples: int, n_features: int, seed: int = 0) -> tuple[bytes, sp.csr_matrix,
                                                                               np.ndarray]:
    rng = np.random.default_rng(seed)
    X = sp.random(n_samples, n_features, density=0.2, random_state=seed, format="csr")
    X.data = np.round(X.data, 3)  # exact in the text file
    y = rng.integers(1, 3, size=n_samples).astype(np.float64)
    buffer = io.BytesIO()
    dump_svmlight_file(X, y, buffer, zero_based=False)
    return buffer.getvalue(), X, y


def test_reads_a_cached_file_offline(tmp_path, offline):
    raw, X0, y0 = _svmlight_bytes(30, 100)  # fewer columns used than mushrooms' 112
    path = tmp_path / "libsvm" / "mushrooms"
    assert libsvm_path("mushrooms", tmp_path) == path
    path.parent.mkdir()
    path.write_bytes(raw)
    X, y = fetch_libsvm("mushrooms", data_home=tmp_path)  # download_if_missing=True: unused
    assert sp.issparse(X) and X.dtype == np.float64 and X.shape == (30, 112)
    assert np.array_equal(X[:, :100].toarray(), X0.toarray()) and X[:, 100:].nnz == 0
    assert np.array_equal(y, y0)
    # The same through the registry, with a subset.
    Xs, ys = load_dataset("mushrooms", data_home=tmp_path, n_samples=10)
    assert Xs.shape == (10, 112) and ys.shape == (10,)


def test_reads_a_cached_bz2_file_offline(tmp_path, offline):
    raw, X0, y0 = _svmlight_bytes(25, 54, seed=1)
    path = libsvm_path("covtype", tmp_path)
    assert path.name == "covtype.bz2"
    path.parent.mkdir()
    path.write_bytes(bz2.compress(raw))
    X, y = fetch_libsvm("covtype", data_home=tmp_path, download_if_missing=False)
    assert np.array_equal(X.toarray(), X0.toarray()) and np.array_equal(y, y0)


def test_missing_file_without_downloads_names_file_and_url(tmp_path, offline):
    path = libsvm_path("a9a", tmp_path)
    with pytest.raises(FileNotFoundError) as info:
        fetch_libsvm("a9a", data_home=tmp_path, download_if_missing=False)
    message = str(info.value)
    assert str(path) in message and LIBSVM_SETS["a9a"].url in message
    assert "download_if_missing=False" in message and "curl -o" in message
    with pytest.raises(FileNotFoundError, match="cpusmall"):
        load_dataset("cpusmall", data_home=tmp_path, download_if_missing=False)
    assert not path.parent.exists()  # nothing created


def test_download_fills_the_cache_once(tmp_path, monkeypatch):
    raw, X0, _ = _svmlight_bytes(20, 12, seed=2)
    urls = []

    def fake_urlopen(url, timeout):
        urls.append(url)
        return io.BytesIO(raw)

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    X, _ = fetch_libsvm("cpusmall", data_home=tmp_path)
    X2, _ = fetch_libsvm("cpusmall", data_home=tmp_path)  # from the cache
    assert urls == [LIBSVM_SETS["cpusmall"].url]
    assert np.array_equal(X.toarray(), X0.toarray()) and np.array_equal(X2.toarray(), X.toarray())
    assert sorted(p.name for p in (tmp_path / "libsvm").iterdir()) == ["cpusmall"]


def test_failed_download_leaves_no_file(tmp_path, monkeypatch):
    def unreachable(url, timeout):
        raise urllib.error.URLError("no network")

    monkeypatch.setattr(urllib.request, "urlopen", unreachable)
    with pytest.raises(OSError, match="could not download .*binary/mushrooms"):
        fetch_libsvm("mushrooms", data_home=tmp_path)
    assert list((tmp_path / "libsvm").iterdir()) == []


def test_unknown_libsvm_name():
    with pytest.raises(ValueError, match="mushrooms, a9a, cpusmall, covtype, mnist"):
        fetch_libsvm("higgs")


# --------------------------------------------------------------------------- benchmarks
def test_an_experiment_names_a_real_set(tmp_path):
    exp = Experiment(
        name="spam_tiny", dataset="spam", kernel={"name": "rbf", "sigma_scale": 0.5},
        methods=(Method("uniform + batch", "uniform_batch"),), budgets=(20,), seeds=(0,),
        workers=(3,), n_components=3, dataset_options={"standardize": True},
        quick={"dataset_options": {"n_samples": 200}})
    quick = exp.quick_version()
    assert quick.dataset_options == {"standardize": True, "n_samples": 200}
    X, y = quick.load_data(return_labels=True)
    assert X.shape == (200, 57) and set(y) <= {"spam", "nonspam"}
    run_experiment(quick, tmp_path, quiet=True)
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["dataset"] == "spam" and meta["n_samples"] == 200 and meta["n_features"] == 57


def test_experiment_rejects_an_unknown_data_set():
    with pytest.raises(ValueError, match="Unknown data set 'spm'.*letter, satellite, spam"):
        Experiment(name="x", dataset="spm", kernel={"name": "linear"}, methods=())
