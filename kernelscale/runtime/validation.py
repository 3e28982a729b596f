"""Checks of the workers' partitions, run through the runtime before any algorithm.

The data may live on remote workers, so the checks are a worker step: each
worker converts its partition to a float matrix (dense or CSR), scans it for
NaN and inf in chunks, and reports its shape. The master turns any problem into
one clear error that names the partition. These messages are counted under the
phase ``setup``, apart from the algorithm's ``fit`` words.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

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


def check_real(X, name: str = "X") -> None:
    """Raise a one-line ``ValueError`` for complex input (scikit-learn's names the array:
    its whole text, thousands of lines for large data). ``X`` may be a list of partitions.
    """
    parts = X if isinstance(X, (list, tuple)) else [X]
    for part in parts:
        dtype = getattr(part, "dtype", None)
        if dtype is not None and np.dtype(dtype).kind == "c":
            raise ValueError(
                f"Complex data not supported: {name} has dtype {np.dtype(dtype)}. Kernel PCA "
                f"here works on real numbers; pass {name}.real, or the real and imaginary "
                "parts as separate columns.")


def as_float_matrix(X):
    """A 2-D float64 (or float32) ndarray or CSR matrix, or a ValueError.

    Parameters
    ----------
    X : array-like or sparse matrix
        A partition.

    Returns
    -------
    X : ndarray or scipy.sparse.csr_matrix
        2-D, float32 kept, any other dtype converted to float64.
    """
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
    bad = 0
    for start in range(0, X.shape[0], CHUNK_ROWS):
        bad += int(np.count_nonzero(~np.isfinite(X[start : start + CHUNK_ROWS])))
    return bad


@worker_step
def describe_partition(state: WorkerState):
    """Worker step: normalise the partition and report (rows, features, sparse, bad)."""
    state.data = as_float_matrix(state.data)
    X = state.data
    return np.array(
        [X.shape[0], X.shape[1], int(sp.issparse(X)), count_nonfinite(X)], dtype=np.int64
    )


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
    cluster.rows_per_worker = np.array(rows, dtype=float)  # for a lost worker's ratio estimate
    return PartitionInfo(
        n_rows=tuple(rows), n_features=features[0], is_sparse=any(bool(r[2]) for r in replies)
    )
