"""The input layer: what the user holds becomes the workers' partitions, in one place.

A user holds one of:

* a list of 2-D arrays or CSR matrices, one per worker (``"arrays"``);
* a list of loaders, each a path to a data file or a picklable callable that
  returns the partition (``"loaders"``): the partition is read where its
  worker runs, so on a remote engine the rows never pass through the client;
* a dask array (``"dask array"``): its row chunks are the partitions.

:func:`partition_kind` tells which (and refuses anything else with an error
that says what to give); :func:`in_process_partitions` turns any of them into
the partitions themselves for workers in this process; a remote backend ships
the arrays, the loaders or the chunks to its workers and runs
:func:`load_partition` there. One matrix to split is the estimators' business
(``kernelscale.cluster_factory.estimator_cluster``), as is scikit-learn's
validation; here nothing imports scikit-learn or an engine.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp

#: dtypes kept as they are by the estimators' input checks (anything else becomes float64)
FLOAT_DTYPES = [np.float64, np.float32]
INPUT_KINDS = ("arrays", "loaders", "dask array")


def is_loader(item) -> bool:
    """A path to a data file or a callable that returns a partition."""
    return isinstance(item, (str, os.PathLike)) or (
        callable(item) and not isinstance(item, np.ndarray) and not sp.issparse(item)
    )


def is_dask_array(data) -> bool:
    """A ``dask.array.Array`` (checked without importing dask)."""
    return type(data).__module__.startswith("dask.array") and hasattr(data, "to_delayed")


def is_loader_list(data) -> bool:
    """A non-empty list (or tuple) of loaders: the partitions stay where they are."""
    return isinstance(data, (list, tuple)) and len(data) > 0 and all(map(is_loader, data))


def is_partition_list(data) -> bool:
    """A list of 2-D arrays or sparse matrices (one per worker), not a nested list of numbers."""
    if not isinstance(data, (list, tuple)):
        return False
    if len(data) == 0:
        raise ValueError("Got an empty list of partitions.")
    return all(sp.issparse(p) or getattr(p, "ndim", None) == 2 for p in data)


def partition_kind(data) -> str:
    """Which of :data:`INPUT_KINDS` ``data`` is; a clear error for anything else.

    Raises
    ------
    TypeError
        ``data`` is one matrix (split it first), not a sequence, or mixes
        loaders and arrays.
    ValueError
        ``data`` is an empty list.
    """
    if is_dask_array(data):
        return "dask array"
    if isinstance(data, np.ndarray) or sp.issparse(data) or not isinstance(data, Sequence):
        raise TypeError(
            "data must be a list of partitions (arrays or CSR matrices), a list of "
            "loaders (paths or callables) or a dask array; split one array with "
            f"kernelscale.partition.make_partition first. Got {type(data).__name__}."
        )
    if len(data) == 0:
        raise ValueError("data holds no partitions.")
    loaders = [is_loader(item) for item in data]
    if any(loaders) and not all(loaders):
        raise TypeError("data mixes loaders and arrays; give one kind of partition.")
    return "loaders" if all(loaders) else "arrays"


def row_chunks(data) -> list:
    """The row chunks of a dask array as delayed objects (columns in one chunk)."""
    if data.ndim != 2:
        raise ValueError(f"A dask array of data must be 2-D, got {data.ndim}-D.")
    if len(data.chunks[1]) > 1:
        data = data.rechunk({1: -1})
    return list(data.to_delayed().ravel())


def load_partition(loader) -> Any:
    """Run a loader: a path (``kernelscale.datasets.load``) or a picklable callable."""
    if isinstance(loader, (str, os.PathLike)):
        from kernelscale.datasets import load

        return load(loader)
    if callable(loader):
        return loader()
    raise TypeError(
        f"A loader must be a file path or a callable returning the partition, "
        f"got {type(loader).__name__}."
    )


def in_process_partitions(data) -> list:
    """The partitions of ``data`` (any of :data:`INPUT_KINDS`) in this process.

    Loaders are run here and a dask array's chunks computed here (Dask's
    synchronous scheduler), one partition per worker.
    """
    kind = partition_kind(data)
    if kind == "dask array":
        return [chunk.compute(scheduler="sync") for chunk in row_chunks(data)]
    if kind == "loaders":
        return [load_partition(item) for item in data]
    return list(data)


__all__ = [
    "FLOAT_DTYPES",
    "INPUT_KINDS",
    "in_process_partitions",
    "is_dask_array",
    "is_loader",
    "is_loader_list",
    "is_partition_list",
    "load_partition",
    "partition_kind",
    "row_chunks",
]
