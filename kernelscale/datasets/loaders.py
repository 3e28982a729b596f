"""Loaders for on-disk data: ``.npy``, CSV/text, LIBSVM/svmlight and Parquet.

Every loader returns points as rows, in float64: a dense :class:`numpy.ndarray`
(``.npy``, CSV, Parquet) or a :class:`scipy.sparse.csr_matrix` with sorted
indices (LIBSVM). Problems with the input (missing or empty file, unknown
extension, a file not in its extension's format, a CSV first row mixing numbers
and text, ragged or non-numeric rows, malformed LIBSVM lines, NaN or inf values)
raise a :class:`FileNotFoundError` or :class:`ValueError` that names the file
and, where it is cheap to find, the offending line or row, before any further
work.

CSV/text files are UTF-8; a byte-order mark (as spreadsheets write) is skipped,
and gzip-compressed text is read as such, by its content (``.csv.gz``, the
bundled real data sets, or gzip bytes behind a ``.csv`` name).

:func:`iter_chunks` walks a file in row blocks with bounded memory, for
streaming algorithms; concatenating its blocks gives what :func:`load` gives.
"""

from __future__ import annotations

import gzip
import io
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

__all__ = [
    "HeaderGuessWarning",
    "load",
    "load_npy",
    "load_csv",
    "load_svmlight",
    "load_parquet",
    "iter_chunks",
    "load_digits_standardized",
]

PathLike = str | os.PathLike[str]

_NPY = (".npy",)
_CSV = (".csv", ".txt")
_SVM = (".svm", ".libsvm", ".svmlight")
_PARQUET = (".parquet",)
#: Text files may be gzip-compressed (``.csv.gz``): read through gzip, by content.
_GZIP_MAGIC = b"\x1f\x8b"
#: Rows checked at a time when scanning a memory-mapped array for NaN/inf.
_CHECK_ROWS = 65_536


# --------------------------------------------------------------------------- helpers
def _not_a_directory(p: Path) -> None:
    if p.is_dir():
        raise IsADirectoryError(
            f"{p} is a directory, not a data file; name one file in it (.npy, .csv/.txt, "
            "LIBSVM or .parquet)")


def _existing_file(path: PathLike) -> Path:
    """``path`` as a Path, if it names a regular, non-empty file."""
    p = Path(path)
    _not_a_directory(p)
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such file")
    if not p.is_file():
        raise FileNotFoundError(f"{p}: not a regular file")
    if p.stat().st_size == 0:
        raise ValueError(f"{p}: the file is empty (0 bytes); it holds no data")
    return p


def _check_chunk_size(chunk_size: int) -> int:
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer):
        raise TypeError(f"chunk_size must be a positive int, got {chunk_size!r}")
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, got {chunk_size}")
    return int(chunk_size)


def _check_finite_dense(X: np.ndarray, path: Path, first_row: int = 0, what: str = "row") -> None:
    """Raise if ``X`` holds NaN/inf, naming the first bad row (scans in row blocks)."""
    for start in range(0, X.shape[0], _CHECK_ROWS):
        block = np.asarray(X[start : start + _CHECK_ROWS])
        ok = np.isfinite(block)
        if not ok.all():
            r = start + int(np.flatnonzero(~ok.reshape(block.shape[0], -1).all(axis=1))[0])
            raise ValueError(f"{path}: NaN or inf value in {what} {first_row + r}")


def _check_finite_csr(X: sp.csr_matrix, path: Path, first_row: int = 0) -> None:
    bad = np.flatnonzero(~np.isfinite(X.data))
    if bad.size:
        r = int(np.searchsorted(X.indptr, bad[0], side="right") - 1)
        raise ValueError(f"{path}: NaN or inf value in row {first_row + r}")


def _check_finite_labels(y: np.ndarray, path: Path, first_row: int = 0) -> None:
    bad = np.flatnonzero(~np.isfinite(y))
    if bad.size:
        raise ValueError(f"{path}: NaN or inf label in row {first_row + int(bad[0])}")


def _first_bad_line(lines: Sequence[Any], parses: Callable[[Sequence[Any]], bool]) -> int | None:
    """Index of the first line whose prefix stops parsing (bisection), or None."""
    if parses(lines):
        return None
    lo, hi = 0, len(lines)  # lines[:lo] parses, lines[:hi] does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if parses(lines[:mid]):
            lo = mid
        else:
            hi = mid
    return hi - 1


def _is_data_line(line: str | bytes) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith(b"#" if isinstance(s, bytes) else "#")


# --------------------------------------------------------------------------- .npy
def _open_npy(p: Path, mmap: bool) -> np.ndarray:
    """np.load with the shape/dtype checks of :func:`load_npy` (no data pass)."""
    magic = np.lib.format.MAGIC_PREFIX
    with open(p, "rb") as f:
        if f.read(len(magic)) != magic:
            raise ValueError(f"{p}: not a .npy file (it does not start with NumPy's header)")
    try:
        X = np.load(p, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{p}: not a readable .npy array ({exc})") from exc
    if not isinstance(X, np.ndarray):
        raise ValueError(f"{p}: expected a single .npy array, got {type(X).__name__}")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"{p}: expected a real numeric array, got dtype {X.dtype}")
    if X.ndim != 2:
        raise ValueError(f"{p}: expected a 2-D array (n_samples, n_features), got shape {X.shape}")
    return X


def load_npy(path: PathLike, mmap: bool = True) -> np.ndarray:
    """Load a 2-D numeric ``.npy`` array.

    Parameters
    ----------
    path : str or path-like
        The ``.npy`` file.
    mmap : bool, default=True
        Memory-map the file read-only (``np.load(..., mmap_mode="r")``). A
        float64 file then stays on disk; another dtype is converted to float64
        in memory.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
        A read-only memmap when ``mmap`` and the file is already float64.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If the array is not 2-D, not real numeric, or holds NaN/inf.
    """
    p = _existing_file(path)
    X = _open_npy(p, mmap)
    _check_finite_dense(X, p)
    if X.dtype != np.float64:
        X = X.astype(np.float64)
    return X


def _iter_npy(p: Path, chunk_size: int) -> Iterator[tuple[np.ndarray, None]]:
    X = _open_npy(p, mmap=True)
    for start in range(0, X.shape[0], chunk_size):
        block = np.array(X[start : start + chunk_size], dtype=np.float64)
        _check_finite_dense(block, p, first_row=start)
        yield block, None


# --------------------------------------------------------------------------- CSV
def _is_gzip(p: Path) -> bool:
    with open(p, "rb") as f:
        return f.read(len(_GZIP_MAGIC)) == _GZIP_MAGIC


class _NamedText(io.TextIOWrapper):
    """A text file whose decoding errors name the file (``ValueError``, not a bare codec
    message) and whose UTF-8 byte-order mark, if any, is skipped."""

    def __init__(self, p: Path, raw):
        super().__init__(raw, encoding="utf-8-sig")
        self.path = p

    def _named(self, exc: UnicodeDecodeError) -> ValueError:
        return ValueError(f"{self.path}: not UTF-8 text (byte {exc.object[exc.start]:#04x} "
                          "cannot be decoded); CSV/text files must be UTF-8, plain or "
                          "gzip-compressed")

    def __iter__(self):
        return self

    def __next__(self) -> str:
        try:
            return super().__next__()
        except UnicodeDecodeError as exc:
            raise self._named(exc) from None

    def read(self, size: int = -1) -> str:
        try:
            return super().read(size)
        except UnicodeDecodeError as exc:
            raise self._named(exc) from None

    def readline(self, size: int = -1) -> str:
        try:
            return super().readline(size)
        except UnicodeDecodeError as exc:
            raise self._named(exc) from None


def _open_text(p: Path) -> io.TextIOWrapper:
    """A CSV/text file for reading: UTF-8 (a byte-order mark skipped), gunzipped when
    its bytes are gzip's whatever its name (``.csv.gz``)."""
    raw = gzip.open(p, "rb") if _is_gzip(p) else open(p, "rb")  # noqa: SIM115
    return _NamedText(p, raw)


def _split(line: str, delimiter: str | None) -> list[str]:
    return line.strip().split(delimiter)


def _is_number(field: str) -> bool:
    try:
        float(field)
    except ValueError:
        return False
    return True


def _header_option(header: bool | None, skip_header: bool | None) -> bool | None:
    """``header``, or its older name ``skip_header`` (conflicting values are an error)."""
    if skip_header is None:
        return header
    if header is not None and bool(header) != bool(skip_header):
        raise TypeError("give header= or its older name skip_header=, not both")
    return skip_header


class HeaderGuessWarning(UserWarning):
    """A CSV's first row was read as a header by the column-number rule of
    :func:`load_csv` (``header=None``); ``header=False`` reads it as data."""


def _column_numbers(fields: list[str]) -> bool:
    """Whether ``fields`` are the column numbers ``0, 1, ..., d-1`` (or ``1, ..., d``),
    written as plain integers, ``d >= 2``: the header pandas' ``to_csv(index=False)``
    writes for unnamed columns."""
    if len(fields) < 2 or not all(v.isdigit() for v in fields):
        return False
    start = int(fields[0])
    return start in (0, 1) and [int(v) for v in fields] == list(range(start, start + len(fields)))


def _written_as_decimals(fields: list[str]) -> bool:
    """Whether a row is finite numbers, some written with a decimal point or an exponent
    (``0.25``, ``1e-3``): not in the plain-integer form of a column-number header."""
    try:
        finite = all(np.isfinite(float(v)) for v in fields)
    except ValueError:
        return False
    return finite and any(c in v for v in fields for c in ".eE")


def _empty_field_advice(p: Path, lineno: int, fields: list[str], delimiter: str | None,
                        trailing: bool) -> str:
    """The error for a row with an empty field: a trailing delimiter (``trailing``: the
    row has one field more than the data, and it is empty) or a missing value."""
    if trailing:
        sep = "whitespace" if delimiter is None else repr(delimiter)
        return (f"{p}: line {lineno}: the row ends with a trailing {sep} (an empty last "
                f"field); remove the trailing delimiter from every line (e.g. sed "
                f"'s/{delimiter or ' '}$//' {p.name}) or fill in the last column")
    i = fields.index("") + 1
    return (f"{p}: line {lineno}: non-numeric value '' (field {i} of {len(fields)} is "
            "empty: a missing value); fill it in or drop the row")


def _header_lines(
    p: Path, delimiter: str | None, header: bool | None
) -> tuple[int, list[str] | None]:
    """Lines to skip before the data (0, or the header's line number) and the header's names.

    With ``header=None`` the first non-blank, non-comment line is a header when
    all of its fields are non-numeric, or when they are the column numbers
    0..d-1 (or 1..d) written as integers, as pandas writes them, and the next
    row is written as decimals -- a :class:`HeaderGuessWarning` says so;
    data when all are numbers, and an error (naming the line) when it mixes both.
    """
    with _open_text(p) as f:
        for lineno, line in enumerate(f, start=1):
            if not _is_data_line(line):
                continue
            fields = [v.strip() for v in _split(line, delimiter)]
            guessed = False
            if header is None:
                text = [v for v in fields if not _is_number(v)]
                if text and all(v == "" for v in text):
                    following = next((rest for rest in f if _is_data_line(rest)), "")
                    trailing = fields[-1] == "" and (not following.strip() or following.rstrip()
                                                     .endswith(delimiter or " "))
                    raise ValueError(_empty_field_advice(p, lineno, fields, delimiter, trailing))
                if len(text) not in (0, len(fields)):
                    raise ValueError(
                        f"{p}: line {lineno}: the first row mixes numbers and text "
                        f"({text[0]!r} is not a number); a header row must be all names "
                        "and a data row all numbers. To skip it as a header, pass "
                        "header=True."
                    )
                header = bool(text)
                if not header and _column_numbers(fields):
                    following = next((rest for rest in f if _is_data_line(rest)), None)
                    guessed = header = following is not None and _written_as_decimals(
                        [v.strip() for v in _split(following, delimiter)])
                    if not header:
                        return 0, None
            if not header:
                return 0, None
            if not guessed and not any(_is_data_line(rest) for rest in f):
                break
            if guessed:
                warnings.warn(
                    f"{p}: the first row '{','.join(fields)}' is read as a header, not "
                    "data: it holds the column numbers as integers (as pandas' to_csv "
                    "writes them) above rows of decimals; pass header=False to read it as "
                    "data",
                    HeaderGuessWarning, stacklevel=2)
            return lineno, [v.strip('"').strip("'") for v in fields]
    raise ValueError(f"{p}: file contains no data rows")


def _parse_csv_lines(lines: Sequence[str], delimiter: str | None) -> np.ndarray:
    return np.loadtxt(lines, delimiter=delimiter, ndmin=2, dtype=np.float64, comments="#")


def _csv_block_error(
    p: Path, lines: Sequence[str], first_lineno: int, delimiter: str | None, n_cols: int | None
) -> ValueError | None:
    """Locate the first bad line of a block; a ValueError naming it, or None."""

    def parses(sub: Sequence[str]) -> bool:
        if not any(_is_data_line(s) for s in sub):
            return True
        try:
            arr = _parse_csv_lines(sub, delimiter)
        except ValueError:
            return False
        return n_cols is None or arr.shape[1] == n_cols

    i = _first_bad_line(lines, parses)
    if i is None:
        return None
    line = lines[i].rstrip("\n")
    fields = _split(line, delimiter)
    fields = [v.strip() for v in fields]
    for v in fields:
        if v == "":
            expected = n_cols if n_cols is not None or i == 0 else \
                _parse_csv_lines(lines[:i], delimiter).shape[1]
            ends = all(s.rstrip().endswith(delimiter or " ") for s in lines if _is_data_line(s))
            trailing = fields[-1] == "" and (ends if expected is None
                                             else len(fields) == expected + 1)
            return ValueError(
                _empty_field_advice(p, first_lineno + i, fields, delimiter, trailing))
        try:
            float(v)
        except ValueError:
            return ValueError(f"{p}: line {first_lineno + i}: non-numeric value {v!r}")
    expected = n_cols
    if expected is None:
        expected = _parse_csv_lines(lines[:i], delimiter).shape[1]
    return ValueError(
        f"{p}: line {first_lineno + i}: ragged CSV, expected {expected} columns, got {len(fields)}"
    )


def _resolve_label_column(
    label_column: int | str | None, names: list[str] | None, n_cols: int, p: Path
) -> int | None:
    if label_column is None:
        return None
    if isinstance(label_column, str):
        if names is None or label_column not in names:
            raise ValueError(f"{p}: label column {label_column!r} not found in header {names}")
        return names.index(label_column)
    if not -n_cols <= label_column < n_cols:
        raise ValueError(f"{p}: label_column={label_column} out of range for {n_cols} columns")
    return label_column % n_cols


def _iter_csv(
    p: Path,
    chunk_size: int,
    delimiter: str | None = ",",
    header: bool | None = None,
    label_column: int | str | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
    header_line, names = _header_lines(p, delimiter, header)
    n_cols: int | None = None
    row = 0
    with _open_text(p) as f:
        lineno = header_line + 1
        for _ in islice(f, header_line):
            pass
        while lines := list(islice(f, chunk_size)):
            first = lineno
            lineno += len(lines)
            if not any(_is_data_line(s) for s in lines):
                continue
            try:
                block = _parse_csv_lines(lines, delimiter)
            except ValueError as exc:
                err = _csv_block_error(p, lines, first, delimiter, n_cols)
                raise (err or ValueError(f"{p}: lines {first}-{lineno - 1}: {exc}")) from exc
            if n_cols is None:
                n_cols = block.shape[1]
                col = _resolve_label_column(label_column, names, n_cols, p)
            elif block.shape[1] != n_cols:
                raise _csv_block_error(p, lines, first, delimiter, n_cols) or ValueError(
                    f"{p}: lines {first}-{lineno - 1}: expected {n_cols} columns"
                )
            if not np.isfinite(block).all():
                data_lines = [first + i for i, s in enumerate(lines) if _is_data_line(s)]
                r = int(np.flatnonzero(~np.isfinite(block).all(axis=1))[0])
                raise ValueError(
                    f"{p}: line {data_lines[r]}: NaN or inf value (data row {row + r})"
                )
            row += block.shape[0]
            if col is None:
                yield block, None
            else:
                yield np.delete(block, col, axis=1), block[:, col].copy()


def load_csv(
    path: PathLike,
    delimiter: str | None = ",",
    header: bool | None = None,
    label_column: int | str | None = None,
    skip_header: bool | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Load a numeric delimited text file (CSV, TSV, whitespace-separated).

    Blank lines and lines starting with ``#`` are skipped.

    Parameters
    ----------
    path : str or path-like
        The text file.
    delimiter : str or None, default=","
        Field separator; None splits on any whitespace.
    header : bool or None, default=None
        Whether the first non-blank, non-comment line is a header (skipped; its
        fields name the columns). None applies the rule: it is a header when
        all of its fields are non-numeric, data when all are numbers, and an
        error naming the line when it mixes both. One numeric first row is a
        header too: the column numbers ``0,1,...,d-1`` (or ``1,...,d``) written
        as integers, as pandas' ``to_csv(index=False)`` writes unnamed columns,
        above a row written as decimals (``0.25``, ``1e-3``: some field with a
        point or an exponent); a :class:`HeaderGuessWarning` then says so. True or
        False overrides the rule.
    label_column : int, str or None, default=None
        Column holding labels, by position (negative counts from the end) or by
        header name. It is removed from ``X`` and returned as ``y``.
    skip_header : bool or None, default=None
        The older name of ``header``.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), float64
        Only when ``label_column`` is given.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If the file is empty or has no data rows, a first row that mixes
        numbers and text (with ``header=None``), a non-numeric field or a row
        with a different number of columns (the message names the line), or
        NaN/inf.
    """
    p = _existing_file(path)
    header = _header_option(header, skip_header)
    header_line, names = _header_lines(p, delimiter, header)
    try:
        with _open_text(p) as f:
            data = np.loadtxt(f, delimiter=delimiter, skiprows=header_line, ndmin=2,
                              dtype=np.float64)
        col = _resolve_label_column(label_column, names, data.shape[1], p)
        ok = bool(np.isfinite(data).all())
    except ValueError:
        ok = False
        data = None
    if not ok:
        # Re-read in blocks: raises an error that names the offending line.
        for _ in _iter_csv(p, 1 << 16, delimiter, header_line > 0, label_column):
            pass
        if data is None:  # pragma: no cover - the block reader found no fault
            raise ValueError(f"{p}: could not parse as numeric CSV")
    if col is None:
        return data
    return np.delete(data, col, axis=1), data[:, col].copy()


# --------------------------------------------------------------------------- LIBSVM
def _parse_svm(
    data: bytes, n_features: int | None, zero_based: bool | str
) -> tuple[sp.csr_matrix, np.ndarray]:
    from sklearn.datasets import load_svmlight_file  # slow import: on first use
    X, y = load_svmlight_file(
        io.BytesIO(data), n_features=n_features, dtype=np.float64, zero_based=zero_based
    )
    return X, y


#: The largest feature index scikit-learn's LIBSVM reader takes (its indices are int32).
_SVM_MAX_INDEX = 2**31 - 1


def _index_overflow(line: bytes) -> str | None:
    """Why ``line``'s feature index overflowed the reader: beyond int64, or beyond the
    reader's 32-bit indices (which int64 holds); None when no index is out of range."""
    indices = []
    for token in line.split()[1:]:
        head = token.split(b":", 1)[0]
        if head.isdigit():
            indices.append(int(head))
    largest = max(indices, default=0)
    if largest > 2**63 - 1:
        return "a feature index beyond the int64 range"
    if largest > _SVM_MAX_INDEX:
        return (f"feature index {largest} is above {_SVM_MAX_INDEX:,}, the largest index "
                "scikit-learn's LIBSVM reader takes (32-bit column indices); renumber the "
                "features into fewer columns (e.g. hash them) first")
    return None


def _svm_block(
    p: Path, lines: list[bytes], first: int, n_features: int | None, zero_based: bool | str
) -> tuple[sp.csr_matrix, np.ndarray]:
    try:
        return _parse_svm(b"".join(lines), n_features, zero_based)
    except (ValueError, OverflowError) as exc:
        # OverflowError: scikit-learn's parser meets an index beyond its 32-bit range.
        why = "a feature index beyond the int64 range" if isinstance(exc, OverflowError) \
            else str(exc)

        def parses(sub: Sequence[bytes]) -> bool:
            try:
                _parse_svm(b"".join(sub), None, True)
            except (ValueError, OverflowError):
                return False
            return True

        i = _first_bad_line(lines, parses)
        if i is None:
            raise ValueError(f"{p}: {why}") from exc
        if isinstance(exc, OverflowError) or "too large" in str(exc):
            why = _index_overflow(lines[i]) or why
        line = lines[i].decode("utf-8", "replace").rstrip()
        if len(line) > 80:
            line = line[:77] + "..."
        raise ValueError(f"{p}: line {first + i}: malformed LIBSVM line {line!r} ({why})") from exc


def _svm_blocks(p: Path, chunk_size: int) -> Iterator[tuple[int, list[bytes]]]:
    with open(p, "rb") as f:
        lineno = 1
        while lines := list(islice(f, chunk_size)):
            yield lineno, lines
            lineno += len(lines)


def _scan_svm(p: Path, chunk_size: int, need_width: bool) -> tuple[int, bool]:
    """One pass over the file: (largest index + 1, whether some index is 0)."""
    width, zero = 0, False
    for first, lines in _svm_blocks(p, chunk_size):
        X, _ = _svm_block(p, lines, first, None, True)
        width = max(width, X.shape[1])
        zero = zero or bool(X.nnz and X.indices.min() == 0)
        if zero and not need_width:
            break
    return width, zero


def _iter_svmlight(
    p: Path, chunk_size: int, n_features: int | None = None, zero_based: bool | str = "auto"
) -> Iterator[tuple[sp.csr_matrix, np.ndarray]]:
    if n_features is None or zero_based == "auto":
        width, zero = _scan_svm(p, chunk_size, need_width=n_features is None)
        # scikit-learn's "auto": one-based unless some index is 0.
        zero_based = zero if zero_based == "auto" else zero_based
        if n_features is None:
            n_features = width if zero_based else max(width - 1, 0)
    row = 0
    for first, lines in _svm_blocks(p, chunk_size):
        try:
            X, y = _svm_block(p, lines, first, n_features, zero_based)
        except ValueError as exc:
            raise ValueError(f"{exc} (lines {first}-{first + len(lines) - 1})") from exc
        if X.shape[0] == 0:
            continue
        X.sort_indices()
        _check_finite_csr(X, p, row)
        _check_finite_labels(y, p, row)
        row += X.shape[0]
        yield X, y


def load_svmlight(
    path: PathLike, n_features: int | None = None, zero_based: bool | str = "auto"
) -> tuple[sp.csr_matrix, np.ndarray]:
    """Load a LIBSVM/svmlight file with :func:`sklearn.datasets.load_svmlight_file`.

    Parameters
    ----------
    path : str or path-like
        The file (``label index:value ...`` per line).
    n_features : int or None, default=None
        Number of columns; None infers it from the largest index.
    zero_based : bool or "auto", default="auto"
        Whether column indices start at 0 (scikit-learn's convention).

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features), float64
        With sorted indices.
    y : ndarray of shape (n_samples,), float64

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    ValueError
        If a line is malformed (the message names it), ``n_features`` is
        smaller than the largest index, or a value is NaN/inf.
    """
    p = _existing_file(path)
    try:
        from sklearn.datasets import load_svmlight_file  # slow import: on first use
        X, y = load_svmlight_file(
            str(p), n_features=n_features, dtype=np.float64, zero_based=zero_based
        )
    except (ValueError, OverflowError) as exc:  # OverflowError: an index beyond int64
        for first, lines in _svm_blocks(p, 1 << 16):  # name the offending line
            _svm_block(p, lines, first, None, True)
        raise ValueError(f"{p}: {exc}") from exc
    X.sort_indices()
    _check_finite_csr(X, p)
    _check_finite_labels(y, p)
    return X, y


# --------------------------------------------------------------------------- Parquet
def _import_pyarrow_parquet() -> Any:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError(
            "reading Parquet files needs pyarrow: pip install kernelscale[parquet]"
        ) from exc
    return pq


def _arrow_to_numpy(
    table: Any, names: Sequence[str] | None, p: Path, label_column: str | None, first_row: int
) -> tuple[np.ndarray, np.ndarray | None]:
    import pyarrow as pa

    names = table.column_names if names is None else names
    cols, y = [], None
    for name in names:
        col = table.column(name)
        t = col.type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)):
            raise ValueError(f"{p}: column {name!r} is not numeric (type {t})")
        if col.null_count:
            raise ValueError(f"{p}: column {name!r} has {col.null_count} missing values")
        arr = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
        if name == label_column:
            y = arr
        else:
            cols.append(arr)
    X = np.column_stack(cols) if cols else np.empty((table.num_rows, 0))
    _check_finite_dense(X, p, first_row)
    if y is not None:
        _check_finite_labels(y, p, first_row)
    return X, y


def _parquet_columns(
    pq: Any, p: Path, columns: Sequence[str] | None, label_column: str | None
) -> list[str] | None:
    try:
        names = pq.ParquetFile(p).schema_arrow.names
    except (ValueError, OSError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise ValueError(f"{p}: not a readable Parquet file ({exc})") from exc
    twice = next((name for name in names if names.count(name) > 1), None)
    if twice is not None:  # pyarrow then fails in its own internals
        raise ValueError(f"{p}: the column name {twice!r} appears {names.count(twice)} times; "
                         "columns are read by name, so each needs its own (rename them "
                         "where the file is written)")
    wanted = list(columns) if columns is not None else None
    if wanted is not None and label_column is not None and label_column not in wanted:
        wanted.append(label_column)
    for c in (wanted or []) + ([label_column] if label_column else []):
        if c not in names:
            raise ValueError(f"{p}: no column {c!r}; columns are {names}")
    return wanted


def load_parquet(
    path: PathLike, columns: Sequence[str] | None = None, label_column: str | None = None
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Load numeric columns of a Parquet file (needs the ``parquet`` extra: pyarrow).

    Parameters
    ----------
    path : str or path-like
        The Parquet file.
    columns : sequence of str or None, default=None
        Columns to read, in this order; None reads all.
    label_column : str or None, default=None
        Column returned as ``y`` and left out of ``X``.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    y : ndarray of shape (n_samples,), float64
        Only when ``label_column`` is given.

    Raises
    ------
    ImportError
        If pyarrow is not installed (``pip install kernelscale[parquet]``).
    FileNotFoundError
        If the file does not exist.
    ValueError
        If a column is missing, non-numeric, has nulls, or holds NaN/inf.
    """
    pq = _import_pyarrow_parquet()
    p = _existing_file(path)
    wanted = _parquet_columns(pq, p, columns, label_column)
    X, y = _arrow_to_numpy(pq.read_table(p, columns=wanted), wanted, p, label_column, 0)
    return X if label_column is None else (X, y)  # type: ignore[return-value]


def _iter_parquet(
    p: Path, chunk_size: int, columns: Sequence[str] | None = None, label_column: str | None = None
) -> Iterator[tuple[np.ndarray, np.ndarray | None]]:
    pq = _import_pyarrow_parquet()
    wanted = _parquet_columns(pq, p, columns, label_column)
    row = 0
    for batch in pq.ParquetFile(p).iter_batches(batch_size=chunk_size, columns=wanted):
        X, y = _arrow_to_numpy(batch, wanted, p, label_column, row)
        row += X.shape[0]
        yield X, y


# --------------------------------------------------------------------------- dispatch
def data_extension(path: PathLike) -> str:
    """The extension that says a file's format, lower case: ``.csv`` for ``x.csv`` and
    for ``x.csv.gz`` (CSV/text may be gzip-compressed), ``.gz`` for ``x.npy.gz``."""
    p = Path(path)
    ext = p.suffix.lower()
    if ext == ".gz" and Path(p.stem).suffix.lower() in _CSV:
        return Path(p.stem).suffix.lower()
    return ext


def _kind(p: Path) -> str:
    _not_a_directory(p)
    ext = data_extension(p)
    for kind, exts in (("npy", _NPY), ("csv", _CSV), ("svm", _SVM), ("parquet", _PARQUET)):
        if ext in exts:
            return kind
    known = ", ".join(_NPY + _CSV + _SVM + _PARQUET) + " (.csv.gz, .txt.gz: gzip-compressed)"
    raise ValueError(f"{p}: unknown file extension {ext!r}; expected one of {known}")


def _csv_kwargs(p: Path, kwargs: dict[str, Any]) -> dict[str, Any]:
    if "delimiter" not in kwargs and data_extension(p) == ".txt":
        # .txt: comma-separated if the first data line has a comma, else whitespace.
        with _open_text(p) as f:
            first = next((s for s in f if _is_data_line(s)), "")
        kwargs = {**kwargs, "delimiter": "," if "," in first else None}
    return kwargs


def load(path: PathLike, return_labels: bool = False, **kwargs: Any) -> Any:
    """Load a data file, choosing the loader from its extension.

    ``.npy`` -> :func:`load_npy`, ``.csv``/``.txt`` (plain or ``.gz``) ->
    :func:`load_csv` (a ``.txt`` file without commas is whitespace-separated),
    ``.svm``/``.libsvm``/``.svmlight`` -> :func:`load_svmlight`, ``.parquet``
    -> :func:`load_parquet`.

    Parameters
    ----------
    path : str or path-like
        The file.
    return_labels : bool, default=False
        Return ``(X, y)``; ``y`` is None where the file has no labels (``.npy``,
        or CSV/Parquet without ``label_column``).
    **kwargs
        Passed to the format's loader.

    Returns
    -------
    X : ndarray or scipy.sparse.csr_matrix of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,) or None
        Only when ``return_labels``.
    """
    p = Path(path)
    kind = _kind(p)
    _existing_file(p)
    y = None
    if kind == "npy":
        X = load_npy(p, **kwargs)
    elif kind == "csv":
        out = load_csv(p, **_csv_kwargs(p, kwargs))
        X, y = out if isinstance(out, tuple) else (out, None)
    elif kind == "svm":
        X, y = load_svmlight(p, **kwargs)
    else:
        out = load_parquet(p, **kwargs)
        X, y = out if isinstance(out, tuple) else (out, None)
    return (X, y) if return_labels else X


def iter_chunks(
    path: PathLike, chunk_size: int = 10_000, return_labels: bool = False, **kwargs: Any
) -> Iterator[Any]:
    """Yield a file's rows in blocks of at most ``chunk_size``, with bounded memory.

    ``.npy`` files are memory-mapped and sliced; CSV/text and LIBSVM files are
    read ``chunk_size`` lines at a time (blank and comment lines count towards
    a block, so a block may hold fewer rows; empty blocks are skipped); Parquet
    files are read in record batches. Concatenating the blocks gives what
    :func:`load` returns. Errors name the file and the line, as :func:`load`.

    LIBSVM: every block has the same number of columns. Unless ``n_features``
    is given (with an explicit ``zero_based``), the file is scanned once first
    for the largest column index (and whether indices start at 0), which costs
    a second parse but keeps memory to one block.

    Parameters
    ----------
    path : str or path-like
        The file; its extension chooses the format as in :func:`load`.
    chunk_size : int, default=10_000
        Most rows (lines) per block.
    return_labels : bool, default=False
        Yield ``(X_block, y_block)``, with ``y_block`` None where there are no
        labels.
    **kwargs
        Format options: ``delimiter``, ``header``, ``label_column`` (CSV);
        ``n_features``, ``zero_based`` (LIBSVM); ``columns``, ``label_column``
        (Parquet).

    Returns
    -------
    blocks : iterator
        Of ``X_block`` (ndarray or scipy.sparse.csr_matrix, float64), or of
        ``(X_block, y_block)`` pairs when ``return_labels``. The path, extension
        and ``chunk_size`` are checked at the call, before iteration.
    """
    chunk_size = _check_chunk_size(chunk_size)
    p = Path(path)
    kind = _kind(p)
    _existing_file(p)
    # Checks that need no pass over the data happen here, before iteration.
    if kind == "npy":
        _open_npy(p, mmap=True)
        blocks: Iterator[tuple[Any, Any]] = _iter_npy(p, chunk_size, **kwargs)
    elif kind == "csv":
        kwargs = _csv_kwargs(p, kwargs)
        kwargs["header"] = _header_option(kwargs.get("header"), kwargs.pop("skip_header", None))
        header_line, _ = _header_lines(p, kwargs.get("delimiter", ","), kwargs["header"])
        kwargs["header"] = header_line > 0  # resolved once: the rule's note is given once
        blocks = _iter_csv(p, chunk_size, **kwargs)
    elif kind == "svm":
        blocks = _iter_svmlight(p, chunk_size, **kwargs)
    else:
        _import_pyarrow_parquet()
        blocks = _iter_parquet(p, chunk_size, **kwargs)
    if return_labels:
        return blocks
    return (X for X, _ in blocks)


# --------------------------------------------------------------------------- demo data
def load_digits_standardized() -> tuple[np.ndarray, np.ndarray]:
    """Scikit-learn's bundled digits (1797 x 64), each feature standardised.

    Each column has zero mean and unit variance; the constant (all-zero) pixel
    columns stay at 0. Nothing is downloaded.

    Returns
    -------
    X : ndarray of shape (1797, 64), float64
    y : ndarray of shape (1797,), int
        The digit, 0 to 9.
    """
    from sklearn.datasets import load_digits
    from sklearn.preprocessing import scale

    X, y = load_digits(return_X_y=True)
    return scale(np.asarray(X, dtype=np.float64)), y
