"""Tests for kernelscale.datasets: loaders (round trips, errors, chunks) and generators."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import dump_svmlight_file

from kernelscale.datasets import (
    BLOCK_ROWS,
    PAPER_002_SPECTRUM,
    iter_chunks,
    iter_gaussian_mixture,
    load,
    load_csv,
    load_digits_standardized,
    load_npy,
    load_parquet,
    load_svmlight,
    make_gaussian_mixture,
    make_low_rank_linear,
    make_random_noisy,
    make_sparse_bow,
)


@pytest.fixture
def data() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(53, 4))


def _write(path, text: str):
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("mmap", [True, False])
def test_npy_round_trip(tmp_path, data, mmap):
    p = tmp_path / "x.npy"
    np.save(p, data)
    X = load_npy(p, mmap=mmap)
    assert X.dtype == np.float64
    np.testing.assert_array_equal(X, data)
    np.testing.assert_array_equal(load(p), data)


def test_npy_converts_ints_to_float64(tmp_path):
    p = tmp_path / "x.npy"
    np.save(p, np.arange(6, dtype=np.int32).reshape(3, 2))
    X = load_npy(p)
    assert X.dtype == np.float64 and X.shape == (3, 2)


@pytest.mark.parametrize("header", [False, True])
def test_csv_round_trip(tmp_path, data, header):
    p = tmp_path / "x.csv"
    np.savetxt(p, data, delimiter=",", header="a,b,c,d" if header else "", comments="")
    np.testing.assert_allclose(load_csv(p), data, rtol=1e-15)
    np.testing.assert_allclose(load(p), data, rtol=1e-15)


def test_csv_label_column_and_explicit_header(tmp_path, data):
    p = tmp_path / "x.csv"
    np.savetxt(p, data, delimiter=",", header="a,b,c,label", comments="")
    for col in (-1, 3, "label"):
        X, y = load_csv(p, label_column=col)
        np.testing.assert_allclose(X, data[:, :3], rtol=1e-15)
        np.testing.assert_allclose(y, data[:, 3], rtol=1e-15)
    X, y = load(p, return_labels=True, label_column="label")
    assert X.shape == (53, 3) and y.shape == (53,)
    # A numeric first line can be skipped on request; and kept.
    q = _write(tmp_path / "n.csv", "1,2\n3,4\n5,6\n")
    np.testing.assert_array_equal(load_csv(q, skip_header=True), [[3, 4], [5, 6]])
    np.testing.assert_array_equal(load_csv(q, skip_header=False), [[1, 2], [3, 4], [5, 6]])


def test_txt_whitespace_and_comments(tmp_path):
    p = _write(tmp_path / "x.txt", "# comment\n1 2 3\n\n4 5 6\n")
    np.testing.assert_array_equal(load(p), [[1, 2, 3], [4, 5, 6]])
    X, y = load(p, return_labels=True)
    assert y is None and X.shape == (2, 3)


def test_svmlight_round_trip(tmp_path):
    rng = np.random.default_rng(1)
    dense = rng.normal(size=(40, 9)) * (rng.random((40, 9)) < 0.3)
    labels = rng.integers(0, 3, size=40).astype(float)
    for zero_based in (True, False):
        p = tmp_path / f"x{zero_based}.svm"
        dump_svmlight_file(sp.csr_matrix(dense), labels, str(p), zero_based=zero_based)
        X, y = load_svmlight(p, n_features=9)
        assert sp.issparse(X) and X.format == "csr" and X.has_sorted_indices
        assert X.dtype == np.float64
        np.testing.assert_allclose(X.toarray(), dense, rtol=1e-15)
        np.testing.assert_array_equal(y, labels)
        X2, y2 = load(p, return_labels=True, n_features=9)
        np.testing.assert_allclose(X2.toarray(), dense, rtol=1e-15)


def test_parquet_import_error(tmp_path, monkeypatch):
    p = _write(tmp_path / "x.parquet", "not really parquet")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ImportError, match=r"pip install kernelscale\[parquet\]"):
        load_parquet(p)
    with pytest.raises(ImportError, match=r"kernelscale\[parquet\]"):
        load(p)


def test_parquet_round_trip(tmp_path, data):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    p = tmp_path / "x.parquet"
    table = pa.table({f"c{j}": data[:, j] for j in range(4)} | {"y": np.arange(53)})
    pq.write_table(table, p)
    X, y = load_parquet(p, label_column="y")
    np.testing.assert_array_equal(X, data)
    np.testing.assert_array_equal(y, np.arange(53))
    np.testing.assert_array_equal(load_parquet(p, columns=["c2", "c0"]), data[:, [2, 0]])
    blocks = list(iter_chunks(p, 10, label_column="y"))
    np.testing.assert_array_equal(np.vstack(blocks), data)


# --------------------------------------------------------------------------- errors
def test_missing_file_and_unknown_extension(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.npy"):
        load(tmp_path / "nope.npy")
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        load_csv(tmp_path / "nope.csv")
    p = _write(tmp_path / "x.xyz", "1,2\n")
    with pytest.raises(ValueError, match=r"x\.xyz.*unknown file extension '\.xyz'.*\.npy"):
        load(p)
    with pytest.raises(ValueError, match="unknown file extension"):
        next(iter_chunks(p, 10))


def test_npy_errors(tmp_path):
    p = tmp_path / "x.npy"
    np.save(p, np.zeros(5))
    with pytest.raises(ValueError, match=r"x\.npy.*2-D.*\(5,\)"):
        load_npy(p)
    np.save(p, np.array([["a", "b"]]))
    with pytest.raises(ValueError, match="real numeric"):
        load_npy(p)
    bad = np.zeros((10, 3))
    bad[7, 1] = np.nan
    np.save(p, bad)
    with pytest.raises(ValueError, match=r"x\.npy: NaN or inf value in row 7"):
        load_npy(p)
    with pytest.raises(ValueError, match="row 7"):
        list(iter_chunks(p, 3))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a,b\n1,2\n3,4\n5\n", r"bad\.csv: line 4: ragged CSV, expected 2 columns, got 1"),
        ("1,2\n3,x\n", r"bad\.csv: line 2: non-numeric value 'x'"),
        ("1,2\n3,\n", r"bad\.csv: line 2: non-numeric value ''"),
        ("1,2\n# c\n3,inf\n", r"bad\.csv: line 3: NaN or inf value \(data row 1\)"),
        ("1,2\n3,nan\n", r"line 2: NaN or inf"),
        ("", r"bad\.csv: the file is empty \(0 bytes\)"),
        ("\n# c\n", r"bad\.csv: file contains no data rows"),
        ("a,b\n", r"no data rows"),
    ],
)
def test_csv_errors(tmp_path, text, message):
    p = _write(tmp_path / "bad.csv", text)
    with pytest.raises(ValueError, match=message):
        load_csv(p)
    with pytest.raises(ValueError, match=message):
        list(iter_chunks(p, 2))


def test_csv_ragged_across_chunks_and_bad_label(tmp_path):
    p = _write(tmp_path / "r.csv", "1,2\n3,4\n5,6\n7,8,9\n")
    with pytest.raises(ValueError, match=r"line 4: ragged CSV, expected 2 columns, got 3"):
        list(iter_chunks(p, 3))
    q = _write(tmp_path / "l.csv", "a,b\n1,2\n")
    with pytest.raises(ValueError, match="label column 'c' not found"):
        load_csv(q, label_column="c")
    with pytest.raises(ValueError, match="label_column=5 out of range"):
        load_csv(q, label_column=5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1 1:2 3:4\n0 2:x\n", r"bad\.svm: line 2: malformed LIBSVM line '0 2:x'"),
        ("1 1:2\n1 2:1\n1 3:1\nfoo\n", r"line 4: malformed LIBSVM line 'foo'"),
        ("1 1:2 3 4\n", r"line 1: malformed"),
        ("1 3:2 1:4\n", r"line 1: malformed.*sorted"),
        ("1 1:2\n0 1:nan\n", r"bad\.svm: NaN or inf value in row 1"),
    ],
)
def test_svmlight_errors(tmp_path, text, message):
    p = _write(tmp_path / "bad.svm", text)
    with pytest.raises(ValueError, match=message):
        load_svmlight(p)
    with pytest.raises(ValueError, match=message):
        list(iter_chunks(p, 2))


def test_svmlight_n_features_too_small(tmp_path):
    p = _write(tmp_path / "x.svm", "1 0:1 5:2\n")
    with pytest.raises(ValueError, match=r"x\.svm.*n_features was set to 3"):
        load_svmlight(p, n_features=3)


def test_bad_chunk_size(tmp_path, data):
    p = tmp_path / "x.npy"
    np.save(p, data)
    with pytest.raises(ValueError, match="chunk_size"):
        iter_chunks(p, 0)  # raised at the call, not at the first block
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        iter_chunks(tmp_path / "nope.csv", 10)
    with pytest.raises(ValueError, match="n_clusters"):
        iter_gaussian_mixture(10, n_clusters=0)


# --------------------------------------------------------------------------- chunks
@pytest.mark.parametrize("chunk_size", [1, 7, 53, 1000])
def test_iter_chunks_dense_matches_load(tmp_path, data, chunk_size):
    np.save(tmp_path / "x.npy", data)
    np.savetxt(tmp_path / "x.csv", data, delimiter=",", header="a,b,c,d", comments="")
    for name in ("x.npy", "x.csv"):
        blocks = list(iter_chunks(tmp_path / name, chunk_size))
        assert all(b.shape[0] <= chunk_size and b.dtype == np.float64 for b in blocks)
        np.testing.assert_array_equal(np.vstack(blocks), load(tmp_path / name))
    pairs = list(iter_chunks(tmp_path / "x.csv", chunk_size, True, label_column=0))
    np.testing.assert_array_equal(np.concatenate([y for _, y in pairs]), data[:, 0])


@pytest.mark.parametrize("zero_based", [True, False])
@pytest.mark.parametrize("chunk_size", [1, 6, 100])
def test_iter_chunks_svmlight_matches_load(tmp_path, zero_based, chunk_size):
    rng = np.random.default_rng(2)
    dense = rng.random((30, 12)) * (rng.random((30, 12)) < 0.2)
    dense[:, -1] = 0.0
    dense[-1, -2] = 1.0  # the widest column appears only in the last row
    p = tmp_path / "x.libsvm"
    dump_svmlight_file(dense, np.arange(30), str(p), zero_based=zero_based)
    X, y = load(p, return_labels=True)
    pairs = list(iter_chunks(p, chunk_size, return_labels=True))
    assert {b.shape[1] for b, _ in pairs} == {X.shape[1]}
    np.testing.assert_array_equal(sp.vstack([b for b, _ in pairs]).toarray(), X.toarray())
    np.testing.assert_array_equal(np.concatenate([c for _, c in pairs]), y)
    # Known width: no scan, fixed n_features in every block.
    blocks = list(iter_chunks(p, chunk_size, n_features=12, zero_based=zero_based))
    np.testing.assert_allclose(sp.vstack(blocks).toarray(), dense, rtol=1e-15)


def test_digits_standardized():
    X, y = load_digits_standardized()
    assert X.shape == (1797, 64) and y.shape == (1797,) and X.dtype == np.float64
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-12)
    std = X.std(axis=0)
    constant = std == 0
    assert 0 < constant.sum() < 64
    np.testing.assert_allclose(std[~constant], 1.0)
    assert np.all(X[:, constant] == 0)


# --------------------------------------------------------------------------- generators
def test_gaussian_mixture_shapes_determinism_chunks():
    n = BLOCK_ROWS + 1234
    X, y = make_gaussian_mixture(n, random_state=3, return_labels=True)
    assert X.shape == (n, 28) and X.dtype == np.float64 and np.isfinite(X).all()
    for chunk_size in (1000, BLOCK_ROWS, 10**6):
        np.testing.assert_array_equal(
            make_gaussian_mixture(n, random_state=3, chunk_size=chunk_size), X
        )
    chunks = list(iter_gaussian_mixture(n, random_state=3, chunk_size=999))
    assert [len(c) for c in chunks[:-1]] == [999] * (len(chunks) - 1)
    np.testing.assert_array_equal(np.vstack(chunks), X)
    assert not np.array_equal(make_gaussian_mixture(n, random_state=4), X)
    same = make_gaussian_mixture(n, random_state=np.random.default_rng(3))
    np.testing.assert_array_equal(
        same, make_gaussian_mixture(n, random_state=np.random.default_rng(3))
    )
    X32 = make_gaussian_mixture(500, n_features=18, random_state=3, dtype=np.float32)
    assert X32.dtype == np.float32 and X32.shape == (500, 18)


def test_gaussian_mixture_uneven_anisotropic():
    X, y = make_gaussian_mixture(
        20_000, n_features=5, n_clusters=10, random_state=0, return_labels=True
    )
    sizes = np.sort(np.bincount(y, minlength=10))
    expected = np.sort(1 / np.arange(1, 11)) / np.sum(1 / np.arange(1, 11))
    np.testing.assert_allclose(sizes / 20_000, expected, atol=0.01)
    ev = np.linalg.eigvalsh(np.cov(X[y == y[0]].T))
    assert ev[-1] / ev[0] > 3  # anisotropic covariance


def test_generators_reject_bad_arguments():
    with pytest.raises(ValueError, match="n_samples"):
        make_gaussian_mixture(0)
    with pytest.raises(TypeError, match="random_state"):
        make_gaussian_mixture(10, random_state="seed")
    with pytest.raises(ValueError, match="nnz_per_row"):
        make_sparse_bow(10, n_features=50, nnz_per_row=50)
    with pytest.raises(ValueError, match="rank=60"):
        make_random_noisy(10, 50, rank=60)
    with pytest.raises(ValueError, match="rank 50, more than"):
        make_low_rank_linear(30, 100)
    with pytest.raises(ValueError, match="non-negative"):
        make_low_rank_linear(30, 100, spectrum=[1.0, -1.0])


def test_sparse_bow_nnz_and_zipf():
    X = make_sparse_bow(3000, n_features=5000, nnz_per_row=40, random_state=0)
    assert sp.issparse(X) and X.format == "csr" and X.has_sorted_indices
    assert X.shape == (3000, 5000) and X.dtype == np.float64
    nnz = np.diff(X.indptr)
    assert abs(nnz.mean() - 40) < 1.0
    np.testing.assert_allclose(sp.linalg.norm(X, axis=1), 1.0)
    # Document frequencies are Zipf-skewed: a few terms in most documents, a long tail.
    df = np.sort(np.bincount(X.indices, minlength=5000))[::-1]
    assert df[0] > 0.9 * 3000 and df[0] > 50 * df[999]
    slope = np.polyfit(np.log(np.arange(100, 1000)), np.log(df[99:999]), 1)[0]
    assert -1.4 < slope < -0.8  # about -zipf_exponent in the tail of rarely repeated terms
    counts = make_sparse_bow(3000, n_features=5000, nnz_per_row=40, normalize=False, random_state=0)
    assert np.array_equal(counts.indices, X.indices)
    assert counts.data.min() >= 1 and np.all(counts.data == np.round(counts.data))
    assert counts.data.max() > 10
    np.testing.assert_array_equal(
        make_sparse_bow(100, n_features=500, nnz_per_row=5, random_state=7).toarray(),
        make_sparse_bow(100, n_features=500, nnz_per_row=5, random_state=7).toarray(),
    )


def test_random_noisy_spectrum():
    n, d, s = 2000, 120, 20
    A = make_random_noisy(n, d, rank=s, zeta=np.inf, random_state=0)
    np.testing.assert_array_equal(A, make_random_noisy(n, d, rank=s, zeta=np.inf, random_state=0))
    sv = np.linalg.svd(A, compute_uv=False)
    assert sv[s] < 1e-10 * sv[0]  # exactly rank s without noise
    # Signal singular values ~ sqrt(n) * D_ii, D_ii = 1 - (i - 1) / d.
    np.testing.assert_allclose(sv[:s] / np.sqrt(n), 1 - np.arange(s) / d, atol=0.1)
    noisy = make_random_noisy(n, d, rank=s, zeta=10.0, random_state=0)
    sv = np.linalg.svd(noisy, compute_uv=False)
    noise_edge = (np.sqrt(n) + np.sqrt(d)) / 10
    assert sv[s - 1] > 3 * noise_edge and sv[s] < 1.1 * noise_edge
    assert make_random_noisy(10, 60, random_state=1).shape == (10, 60)  # paper default s=50


def test_low_rank_linear_spectrum():
    X = make_low_rank_linear(100, 300, random_state=0)
    assert X.shape == (100, 300)
    ev = np.linalg.svd(X, compute_uv=False) ** 2
    np.testing.assert_allclose(ev[:50], PAPER_002_SPECTRUM, rtol=1e-9)
    assert ev[50] < 1e-9 * ev[0]
    assert PAPER_002_SPECTRUM[:3].tolist() == [5000, 2500, 1125] and len(PAPER_002_SPECTRUM) == 50
    Y = make_low_rank_linear(60, 40, spectrum=[5000, 50, 50], random_state=5)
    np.testing.assert_allclose(np.linalg.svd(Y, compute_uv=False)[:3] ** 2, [5000, 50, 50])
    np.testing.assert_array_equal(Y, make_low_rank_linear(60, 40, [5000, 50, 50], random_state=5))
