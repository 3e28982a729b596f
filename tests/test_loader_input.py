"""Loader input rules: empty or foreign files, and the CSV header rule (header=)."""

from __future__ import annotations

import numpy as np
import pytest

from kernelscale.datasets import iter_chunks, load, load_csv, load_npy


def _both(path, **kwargs):
    """What load and iter_chunks (stacked) read from ``path``."""
    return load(path, **kwargs), np.vstack(list(iter_chunks(path, chunk_size=2, **kwargs)))


@pytest.mark.parametrize("suffix", [".npy", ".csv", ".txt", ".svm", ".parquet"])
def test_empty_file_is_a_value_error_naming_it(tmp_path, suffix):
    path = tmp_path / f"empty{suffix}"
    path.write_bytes(b"")
    for read in (load, iter_chunks):
        with pytest.raises(ValueError, match=rf"empty{suffix}: the file is empty \(0 bytes\)"):
            read(path)


def test_npy_that_is_not_npy_or_is_truncated(tmp_path):
    junk = tmp_path / "junk.npy"
    junk.write_bytes(b"hello, not an array")
    with pytest.raises(ValueError, match="junk.npy: not a .npy file"):
        load_npy(junk)
    good = tmp_path / "good.npy"
    np.save(good, np.ones((100, 4)))
    cut = tmp_path / "cut.npy"
    cut.write_bytes(good.read_bytes()[:200])
    for mmap in (True, False):
        with pytest.raises(ValueError, match="cut.npy: not a readable .npy array"):
            load_npy(cut, mmap=mmap)


def test_parquet_that_is_not_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "junk.parquet"
    path.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="junk.parquet: not a readable Parquet file"):
        load(path)


@pytest.mark.parametrize("header", [None, True])
def test_csv_all_text_first_row_is_a_header(tmp_path, header):
    path = tmp_path / "x.csv"
    path.write_text("# a comment\nalpha, beta\n1,2\n3,4\n5,6\n")
    for X in _both(path, header=header):
        np.testing.assert_array_equal(X, [[1, 2], [3, 4], [5, 6]])
    X, y = load_csv(path, header=header, label_column="beta")
    np.testing.assert_array_equal(y, [2, 4, 6])


def test_csv_numeric_first_row_is_data_unless_header_true(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("1,2\n3,4\n5,6\n")
    for header in (None, False):
        for X in _both(path, header=header):
            np.testing.assert_array_equal(X, [[1, 2], [3, 4], [5, 6]])
    for X in _both(path, header=True):
        np.testing.assert_array_equal(X, [[3, 4], [5, 6]])


def test_csv_mixed_first_row_is_an_error_naming_the_line(tmp_path):
    """One text field among numbers is neither a header nor data: it used to be dropped."""
    path = tmp_path / "x.csv"
    path.write_text("\n# comment\n1,oops,3\n4,5,6\n7,8,9\n")
    for read in (load, load_csv, iter_chunks):
        with pytest.raises(ValueError, match=r"x.csv: line 3: the first row mixes numbers and "
                           r"text \('oops' is not a number\).*header=True"):
            read(path)
    for X in _both(path, header=True):  # the override: skipped as a header
        np.testing.assert_array_equal(X, [[4, 5, 6], [7, 8, 9]])
    with pytest.raises(ValueError, match=r"line 3: non-numeric value 'oops'"):
        load(path, header=False)


def test_csv_text_first_row_with_header_false_names_the_line(tmp_path):
    path = tmp_path / "x.txt"
    path.write_text("a b\n1 2\n")
    with pytest.raises(ValueError, match=r"x.txt: line 1: non-numeric value 'a'"):
        load(path, header=False)


def test_skip_header_is_the_older_name_of_header(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("1,2\n3,4\n")
    np.testing.assert_array_equal(load_csv(path, skip_header=True), [[3, 4]])
    np.testing.assert_array_equal(np.vstack(list(iter_chunks(path, skip_header=True))),
                                  [[3, 4]])
    with pytest.raises(TypeError, match="not both"):
        load_csv(path, header=False, skip_header=True)
