"""Checks of the workers' partitions, run through the runtime before any algorithm.

The data may live on remote workers, so the checks are a worker step: each
worker converts its partition to a float matrix (dense or CSR), scans it for
NaN and inf in chunks, and reports its shape. The master turns any problem into
one clear error that names the partition. These messages are counted under the
phase ``setup``, apart from the algorithm's ``fit`` words.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from kernelscale.arrays import (
    as_float_device_matrix,
    count_nonfinite_on_device,
    is_device_array,
    magnitude_on_device,
)
from kernelscale.runtime.cluster import Cluster, WorkerState
from kernelscale.runtime.steps import worker_step

CHUNK_ROWS = 65536


@dataclass(frozen=True)
class PartitionInfo:
    """Shapes of the partitions, as the master knows them after validation."""

    n_rows: tuple[int, ...]
    n_features: int
    is_sparse: bool

    @property
    def n_samples(self) -> int:
        return int(sum(self.n_rows))

    @property
    def n_workers(self) -> int:
        return len(self.n_rows)


#: float64's range: squared norms above LARGEST overflow, below SMALLEST lose all precision.
LARGEST = float(np.finfo(np.float64).max)
SMALLEST = float(np.finfo(np.float64).tiny)


def magnitude(X) -> tuple[float, float]:
    """``(largest |value|, largest squared row norm)`` of a dense or CSR matrix.

    The squared norms are computed on the data divided by its largest value, so
    neither overflows nor underflows; the second number is then ``inf`` or ``0``
    exactly when ``||x||^2`` itself would be.
    """
    if is_device_array(X):
        return magnitude_on_device(X, CHUNK_ROWS)
    values = X.data if sp.issparse(X) else X
    if values.size == 0:
        return 0.0, 0.0
    largest = 0.0
    for start in range(0, values.shape[0], CHUNK_ROWS):
        chunk = np.abs(values[start : start + CHUNK_ROWS])
        largest = max(largest, float(np.max(chunk, initial=0.0)))
    if largest == 0.0 or not np.isfinite(largest):
        return largest, largest
    if sp.issparse(X):
        scaled = X.multiply(1.0 / largest).tocsr()
        sums = np.asarray(scaled.multiply(scaled).sum(axis=1)).ravel()
        top = float(sums.max(initial=0.0))
    else:
        top = 0.0
        for start in range(0, X.shape[0], CHUNK_ROWS):
            chunk = np.asarray(X[start : start + CHUNK_ROWS], dtype=np.float64) / largest
            top = max(top, float(np.einsum("ij,ij->i", chunk, chunk).max(initial=0.0)))
    with np.errstate(over="ignore", under="ignore"):
        return largest, float(np.float64(largest) ** 2 * top)


def magnitude_problem(largest: float, top_sq_norm: float) -> str | None:
    """What goes wrong with values of this :func:`magnitude`, or None (finite, not all 0).

    Kernels need squared distances ``||x - y||^2 <= 4 max ||x||^2`` and inner
    products: above float64's largest number they overflow (inf, then NaN); with
    every ``||x||^2`` below its smallest normal number they underflow (every
    point looks like every other).
    """
    if not np.isfinite(largest) or largest == 0.0:
        return None  # NaN/inf and all-zero data have their own messages
    if not 4.0 * top_sq_norm <= LARGEST:
        reach = ("exceeds float64's largest number" if not np.isfinite(top_sq_norm)
                 else f"reaches {top_sq_norm:.3g}, and 4 ||x||^2 exceeds float64's largest")
        return (f"values up to {largest:.3g} in absolute value overflow the squared distances "
                f"and inner products a kernel needs (||x||^2 {reach}, {LARGEST:.3g}); scale "
                f"the data first, e.g. standardise each column or divide by {largest:.3g}")
    if top_sq_norm < SMALLEST:
        return (f"values are all tiny (at most {largest:.3g} in absolute value): their squared "
                "distances and inner products underflow to 0 or lose their precision (below "
                f"{SMALLEST:.3g}, float64's smallest normal number), so every point looks the "
                f"same to a kernel; scale the data first, e.g. standardise each column or "
                f"multiply by {1 / largest:.3g}")
    return None


def check_magnitude(parts, names=None) -> None:
    """A ``ValueError`` naming the partition whose values overflow a kernel's squared
    distances, or when every partition's underflow (:func:`magnitude_problem`).

    ``parts``: float matrices (dense or CSR, already finite); ``names``: how the
    messages name them (default ``"Partition i"``, or ``"The data"`` for one).
    """
    if names is None:
        names = ["The data"] if len(parts) == 1 else [f"Partition {i}" for i in range(len(parts))]
    tiny = []
    for part, name in zip(parts, names, strict=True):
        largest, top = magnitude(part)
        problem = magnitude_problem(largest, top)
        if problem and "overflow" in problem.split(";")[0]:
            raise ValueError(f"{name}: {problem}.")
        if problem:
            tiny.append((name, problem))
        elif largest > 0:
            return  # some partition has values a kernel can tell apart
    if tiny:
        name, problem = tiny[0]
        raise ValueError(f"{name if len(parts) == 1 else 'Every partition'}: {problem}.")


def _check_columns(X, name: str) -> None:
    """A one-line error naming the non-numeric columns of a DataFrame (scikit-learn's says
    "could not convert string to float: 'Oslo'" without the column)."""
    dtypes = getattr(X, "dtypes", None)
    columns = getattr(X, "columns", None)
    if dtypes is None or columns is None or not hasattr(dtypes, "items"):
        return
    bad = [(column, dtype) for column, dtype in dtypes.items()
           if getattr(dtype, "kind", "O") not in "biuf"]
    if bad:
        listed = ", ".join(f"{column!r} ({dtype})" for column, dtype in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise ValueError(
            f"{name} has non-numeric column(s) {listed}{more}; kernel methods need numbers: "
            "drop them or encode them as numbers (e.g. one-hot) first.")


def check_real(X, name: str = "X") -> None:
    """Raise a one-line ``ValueError`` for input a kernel cannot take, before any work.

    Complex input (scikit-learn's message holds the array's whole text, thousands
    of lines for large data), a DataFrame column that is not numeric (named), a
    list of partitions mixing 2-D and other arrays (the partition named), and
    values whose squared distances overflow or underflow float64
    (:func:`check_magnitude`). ``X`` may be a list of partitions.
    """
    if isinstance(X, Iterator):  # scikit-learn's message: "float() argument must be..."
        raise TypeError(
            f"{name} is a {type(X).__name__}, which is read once and has no shape: pass an "
            "array, a CSR matrix or a list of partitions (np.vstack(list(...)) collects "
            "one), or feed a stream batch by batch to StreamingKernelPCA.partial_fit.")
    is_list = isinstance(X, (list, tuple))
    parts = X if is_list else [X]
    for part in parts:
        if is_device_array(part):  # checked on its device (as_float_matrix)
            continue
        dtype = getattr(part, "dtype", None)
        if dtype is not None and np.dtype(dtype).kind == "c":
            raise ValueError(
                f"Complex data not supported: {name} has dtype {np.dtype(dtype)}. Kernel PCA "
                f"here works on real numbers; pass {name}.real, or the real and imaginary "
                "parts as separate columns.")
    for i, part in enumerate(parts):
        _check_columns(part, f"Partition {i}" if is_list else name)
    arrays = [p for p in parts if sp.issparse(p) or hasattr(p, "ndim")]
    if is_list and arrays and any(not sp.issparse(p) and p.ndim != 2 for p in arrays):
        i, part = next((i, p) for i, p in enumerate(parts)
                       if hasattr(p, "ndim") and not sp.issparse(p) and p.ndim != 2)
        raise ValueError(
            f"Partition {i} has shape {tuple(part.shape)}: every partition must be 2-D "
            "(n_rows, n_features); one row is x.reshape(1, -1).")
    numeric = [p for p in arrays if (sp.issparse(p) and p.format in ("csr", "csc", "coo"))
               or (isinstance(p, np.ndarray) and p.dtype.kind in "biuf")]
    if numeric and len(numeric) == len(parts) and all(p.ndim == 2 for p in numeric):
        floats = [p.astype(np.float64) if p.dtype.kind in "biu" else p for p in numeric]
        if all(count_nonfinite(p) == 0 for p in floats):
            check_magnitude(floats, names=[f"Partition {i}" for i in range(len(parts))]
                            if is_list else [name])


def as_float_matrix(X):
    """A 2-D float64 (or float32) ndarray or CSR matrix, or a ValueError.

    A device array (:mod:`kernelscale.arrays`) stays on its device.

    Parameters
    ----------
    X : array-like, sparse matrix or device array
        A partition.

    Returns
    -------
    X : ndarray, scipy.sparse.csr_matrix or device array
        2-D, float32 kept, any other dtype converted to float64.
    """
    if is_device_array(X):
        return as_float_device_matrix(X)
    if sp.issparse(X):
        X = sp.csr_matrix(X)
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        return X
    X = np.asarray(X)
    if X.dtype.kind not in "biuf":
        raise ValueError(f"data must be numeric, got dtype {X.dtype}.")
    if X.ndim != 2:
        raise ValueError(f"data must be 2-D (n_samples, n_features), got shape {X.shape}.")
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    return X


def count_nonfinite(X) -> int:
    """Number of NaN or inf entries, scanned in row chunks (no full copy)."""
    if sp.issparse(X):
        return int(np.count_nonzero(~np.isfinite(X.data)))
    if is_device_array(X):
        return count_nonfinite_on_device(X, CHUNK_ROWS)
    bad = 0
    for start in range(0, X.shape[0], CHUNK_ROWS):
        bad += int(np.count_nonzero(~np.isfinite(X[start : start + CHUNK_ROWS])))
    return bad


#: Bits of ``describe_partition``'s third field: CSR, values that overflow a kernel's
#: squared distances, values that underflow them (:func:`magnitude_problem`).
SPARSE, OVERFLOW, UNDERFLOW = 1, 2, 4


@worker_step(discloses="aggregates")
def describe_partition(state: WorkerState):
    """Worker step: normalise the partition and report (rows, features, flags, bad)."""
    state.data = as_float_matrix(state.data)
    X = state.data
    bad = count_nonfinite(X)
    flags = SPARSE if sp.issparse(X) else 0
    if bad == 0:
        problem = magnitude_problem(*magnitude(X))
        if problem:
            flags |= OVERFLOW if "overflow" in problem.split(";")[0] else UNDERFLOW
    return np.array([X.shape[0], X.shape[1], flags, bad], dtype=np.int64)


def validate_cluster(cluster: Cluster) -> PartitionInfo:
    """Check every partition and return their shapes; raise ValueError on bad data.

    Parameters
    ----------
    cluster : Cluster
        The workers; each describes its partition (phase ``setup``).

    Returns
    -------
    info : PartitionInfo
        Rows per worker, the feature count, the nonzeros of sparse partitions.

    Raises
    ------
    ValueError
        If a partition is empty, holds NaN or inf, or the partitions disagree
        on the number of features.
    """
    with cluster.phase("setup"), cluster.needing_every_worker():
        replies = cluster.broadcast_map(
            describe_partition, round="describe partitions", reply_kind="scalars"
        )
    rows = [int(r[0]) for r in replies]
    features = [int(r[1]) for r in replies]
    for worker, reply in enumerate(replies):
        if reply[0] == 0:
            raise ValueError(f"Partition {worker} is empty: every worker needs at least one row.")
        if reply[3] > 0:
            raise ValueError(
                f"Partition {worker} holds {reply[3]} NaN or infinite values; "
                "remove or impute them first."
            )
    if len(set(features)) > 1:
        raise ValueError(
            f"Partitions have different numbers of features {features}; "
            "every worker must hold the same columns."
        )
    flags = [int(r[2]) for r in replies]
    for worker, flag in enumerate(flags):
        if flag & OVERFLOW:
            raise ValueError(f"Partition {worker}: its values overflow the squared distances "
                             "and inner products a kernel needs (beyond float64's largest "
                             "number); scale the data first, e.g. standardise each column.")
    if all(flag & UNDERFLOW for flag in flags):
        raise ValueError("Every partition's values are so tiny that their squared distances "
                         "underflow float64 (every point looks the same to a kernel); scale "
                         "the data first, e.g. standardise each column.")
    cluster.rows_per_worker = np.array(rows, dtype=float)  # for a lost worker's ratio estimate
    return PartitionInfo(
        n_rows=tuple(rows), n_features=features[0],
        is_sparse=any(bool(int(r[2]) & SPARSE) for r in replies)
    )
