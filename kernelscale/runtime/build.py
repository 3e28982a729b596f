"""Turn what the user holds into a :class:`~kernelscale.runtime.Cluster`.

Estimators and the CLI call :func:`make_cluster` so that every algorithm runs
in-process or on Dask with one argument::

    cluster = make_cluster(partitions, backend="dask", client=client)

and :func:`dask_client` for the CLI's ``--scheduler`` / ``--dask-workers``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from kernelscale.runtime.cluster import Cluster, LocalCluster

BACKENDS = ("local", "dask")


def is_loader(item) -> bool:
    """A path to a data file or a callable that returns a partition."""
    return isinstance(item, (str, os.PathLike)) or (
        callable(item) and not isinstance(item, np.ndarray) and not sp.issparse(item)
    )


def is_dask_array(data) -> bool:
    """A ``dask.array.Array`` (checked without importing dask)."""
    return type(data).__module__.startswith("dask.array") and hasattr(data, "to_delayed")


def _row_chunks(data) -> list:
    """The row chunks of a dask array as delayed objects (columns in one chunk)."""
    if data.ndim != 2:
        raise ValueError(f"A dask array of data must be 2-D, got {data.ndim}-D.")
    if len(data.chunks[1]) > 1:
        data = data.rechunk({1: -1})
    return list(data.to_delayed().ravel())


def make_cluster(
    data,
    backend: str = "local",
    client=None,
    *,
    workers: Sequence[str] | None = None,
    timeout: float = 600.0,
    retry_lost: bool = False,
) -> Cluster:
    """A cluster whose workers hold the partitions of ``data``.

    Parameters
    ----------
    data : list of arrays or CSR matrices, list of loaders, dask array or Cluster
        One partition per worker. A loader is a file path (.npy memory-mapped,
        .csv, LIBSVM, Parquet; read with ``kernelscale.datasets.load``) or a
        picklable callable returning the partition; on Dask it runs on the
        worker, so the data never passes through the client. A dask array's row
        chunks are the partitions. A ``Cluster`` is returned unchanged.
    backend : {"local", "dask"}, default="local"
        In-process workers, or one Dask actor per partition.
    client : distributed.Client, optional
        Required with ``backend="dask"`` (see :func:`dask_client`).
    workers, timeout, retry_lost
        Options of :class:`~kernelscale.runtime.dask.DaskCluster` (Dask only).

    Returns
    -------
    Cluster

    Examples
    --------
    >>> import numpy as np
    >>> cluster = make_cluster([np.ones((3, 2)), np.zeros((4, 2))])
    >>> cluster.n_workers
    2
    """
    if backend not in BACKENDS:
        raise ValueError(f"Unknown backend {backend!r}; use one of {BACKENDS}.")
    if isinstance(data, Cluster):
        return data
    if backend == "dask" and client is None:
        raise ValueError(
            "backend='dask' needs client=distributed.Client(...) "
            "(kernelscale.runtime.dask_client builds one)."
        )
    if is_dask_array(data):
        if backend == "local":
            return LocalCluster([c.compute(scheduler="sync") for c in _row_chunks(data)])
        from kernelscale.runtime.dask import DaskCluster

        return DaskCluster.from_dask_array(
            client, data, workers=workers, timeout=timeout, retry_lost=retry_lost
        )
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
    if backend == "local":
        if all(loaders):
            from kernelscale.runtime.dask_actor import load_partition

            return LocalCluster([load_partition(item) for item in data])
        return LocalCluster(list(data))
    from kernelscale.runtime.dask import DaskCluster

    build = DaskCluster.from_loaders if all(loaders) else DaskCluster.from_arrays
    return build(client, list(data), workers=workers, timeout=timeout, retry_lost=retry_lost)


def dask_client(scheduler: str | None = None, n_workers: int | None = None):
    """A ``distributed.Client``: to ``scheduler``, or to a new local cluster.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler, e.g. ``"tcp://host:8786"`` (CLI ``--scheduler``).
    n_workers : int, optional
        Without ``scheduler``: start a local cluster of this many single-threaded
        worker processes (CLI ``--dask-workers``).

    Returns
    -------
    distributed.Client
        Close it when done (this also stops a local cluster it started), or
        use it as a context manager.
    """
    try:
        from distributed import Client
    except ImportError as exc:  # the optional extra
        raise ImportError(
            "The Dask backend needs dask[distributed]: pip install 'kernelscale[dask]'."
        ) from exc
    if scheduler is not None:
        return Client(scheduler)
    if n_workers is None or n_workers < 1:
        raise ValueError("Give a scheduler address or a positive number of Dask workers.")
    # The client owns this local cluster: closing the client stops its workers.
    return Client(
        n_workers=int(n_workers), threads_per_worker=1, processes=True, dashboard_address=":0"
    )

__all__ = ["BACKENDS", "dask_client", "is_dask_array", "is_loader", "make_cluster"]
