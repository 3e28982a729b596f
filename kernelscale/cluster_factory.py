"""The front door: turn what the user holds into a :class:`~kernelscale.runtime.Cluster`.

Estimators and the CLI call :func:`make_cluster` so that every algorithm runs
in-process, on Dask or on Flower with one argument::

    cluster = make_cluster(partitions, backend="dask", client=client)
    cluster = make_cluster(3, backend="flower", client="127.0.0.1:9093")  # 3 SuperNodes

The horizontal estimators (``DistributedKernelPCA``, ``FederatedKernelKMeans``,
``DistributedSpectralClustering``) build their cluster with
:func:`estimator_cluster`, so that all of them take the same inputs (one array
to split, a list of partitions, a list of loaders, a dask array) and the same
Dask options (``backend``, ``client``, ``retry_lost``, ``timeout``).

This module sits above the core (:mod:`kernelscale.runtime`, whose input layer
:mod:`kernelscale.runtime.inputs` tells the kinds of input apart) and the
backends (:mod:`kernelscale.backends`): it imports the in-process backend, and
Dask's and Flower's only when they are asked for, so no arrow runs back from the
core and neither optional engine is needed to import it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Integral

import scipy.sparse as sp

from kernelscale.arrays import device_partitions, is_device_input
from kernelscale.backends.local import LocalCluster
from kernelscale.constraints import POSITIVE_REAL, Interval, StrOptions
from kernelscale.memory import check_local_workers
from kernelscale.runtime.cluster import Cluster
from kernelscale.runtime.inputs import (
    FLOAT_DTYPES,
    in_process_partitions,
    is_dask_array,
    is_loader_list,
    is_partition_list,
    partition_kind,
)
from kernelscale.runtime.validation import PartitionInfo, validate_cluster

#: The values ``backend=`` accepts: in-process, Dask, Flower.
BACKENDS = ("local", "dask", "flower")


def make_cluster(
    data,
    backend: str = "local",
    client=None,
    *,
    workers: Sequence[str] | None = None,
    timeout: float = 600.0,
    retry_lost: bool = False,
    n_jobs: int | None = None,
) -> Cluster:
    """A cluster whose workers hold the partitions of ``data``.

    Parameters
    ----------
    data : list of arrays or CSR matrices, list of loaders, dask array, Cluster or int
        One partition per worker. With ``backend="flower"`` the partitions are
        on the SuperNodes (each reads the file named in its node config) and
        ``data`` is their number. A loader is a file path (.npy memory-mapped,
        .csv, LIBSVM, Parquet; read with ``kernelscale.datasets.load``) or a
        picklable callable returning the partition; on Dask it runs on the
        worker, so the data never passes through the client. A dask array's row
        chunks are the partitions. A ``Cluster`` is returned unchanged.
    backend : {"local", "dask", "flower"}, default="local"
        In-process workers, one Dask actor per partition, or one Flower
        SuperNode per partition (:class:`~kernelscale.backends.flower.cluster.FlowerCluster`).
    client : distributed.Client, str or dict, optional
        Required with ``backend="dask"`` (see
        :func:`~kernelscale.backends.dask.client.dask_client`); with
        ``backend="flower"``, the SuperLink's ``host:port`` (no TLS), the name of
        a connection of your Flower configuration, or a dict of
        :class:`~kernelscale.backends.flower.cluster.FlowerCluster` options such as
        ``{"superlink": "host:port", "root_certificates": "ca.crt"}``
        (:func:`~kernelscale.backends.flower.cluster.flower_cluster`).
    workers, timeout, retry_lost
        Options of :class:`~kernelscale.backends.dask.cluster.DaskCluster` (Dask only).
    n_jobs : int or None
        Threads of the in-process :class:`~kernelscale.backends.local.LocalCluster`
        (ignored on Dask, where each worker runs its own steps).

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
    if backend == "flower":
        from kernelscale.backends.flower.cluster import flower_cluster

        return flower_cluster(data, client, timeout=timeout)
    if backend == "dask" and client is None:
        raise ValueError(
            "backend='dask' needs client=distributed.Client(...) "
            "(kernelscale.backends.dask.dask_client builds one)."
        )
    kind = partition_kind(data)
    if backend == "local":
        if kind != "dask array":  # more in-process workers than run in reasonable time
            check_local_workers(len(data))
        return LocalCluster(in_process_partitions(data), n_jobs=n_jobs)
    from kernelscale.backends.dask.cluster import DaskCluster

    build = {"dask array": DaskCluster.from_dask_array, "loaders": DaskCluster.from_loaders,
             "arrays": DaskCluster.from_arrays}[kind]
    if kind != "dask array":
        data = list(data)
    return build(client, data, workers=workers, timeout=timeout, retry_lost=retry_lost)


#: ``_parameter_constraints`` of the estimators' cluster options (see :func:`cluster_options`).
CLUSTER_PARAMETER_CONSTRAINTS = {
    "backend": [StrOptions(set(BACKENDS))],
    "client": "no_validation",
    "retry_lost": ["boolean"],
    "timeout": [POSITIVE_REAL, None],
    # scikit-learn's n_jobs: a non-zero int (-1: every core) or None (1).
    "n_jobs": [Interval(Integral, None, -1, closed="right"),
               Interval(Integral, 1, None, closed="left"), None],
}


def cluster_options(estimator) -> dict:
    """``make_cluster`` options from an estimator's ``n_jobs`` (in-process) or
    ``retry_lost`` and ``timeout`` (Dask; ``timeout`` also on Flower), as checked by
    ``CLUSTER_PARAMETER_CONSTRAINTS`` when the fit starts.

    Parameters
    ----------
    estimator : object
        An estimator with ``backend`` and the cluster parameters.

    Returns
    -------
    options : dict
        Keyword arguments for :func:`make_cluster`.
    """
    timeout = getattr(estimator, "timeout", None)
    timeout = {} if timeout is None else {"timeout": float(timeout)}
    if estimator.backend == "flower":
        return timeout
    if estimator.backend != "dask":
        return {"n_jobs": getattr(estimator, "n_jobs", None)}
    return {"retry_lost": bool(getattr(estimator, "retry_lost", False)), **timeout}


def _set_n_features(estimator, n_features: int) -> None:
    estimator.n_features_in_ = int(n_features)
    if hasattr(estimator, "feature_names_in_"):  # from an earlier fit on a DataFrame
        del estimator.feature_names_in_


def _validated(estimator, cluster: Cluster) -> tuple:
    """``(cluster, info, None)`` once the workers described their partitions; closed on failure."""
    try:
        info = validate_cluster(cluster)
    except BaseException:
        cluster.close()
        raise
    _set_n_features(estimator, info.n_features)
    return cluster, info, None


def estimator_cluster(
    estimator,
    X,
    split_rows: Callable[[int], list] | None = None,
    *,
    min_samples: int = 1,
    device_arrays: bool = False,
) -> tuple[Cluster, PartitionInfo, list | None]:
    """The cluster behind a horizontal estimator's ``fit(X)``, from any input it accepts.

    Parameters
    ----------
    estimator : BaseEstimator
        Has ``backend`` and ``client``, optionally ``retry_lost`` and ``timeout``
        (used with ``backend="dask"`` only). Its ``n_features_in_`` is set.
    X : array or CSR matrix, list of them, list of loaders, dask array, or None
        * ``backend="flower"``: ``None`` (or the node-config key of the partition
          files, a str): ``estimator.n_workers`` SuperNodes of the SuperLink
          ``estimator.client`` hold the data (one extra validation round);
        * one matrix: validated with scikit-learn's ``validate_data`` and split
          by ``split_rows(n_samples)`` (a list of row-index arrays, one per worker);
        * a list of matrices: the workers' partitions, in the given order;
        * a list of loaders (paths or picklable callables, see :func:`make_cluster`)
          or a dask array (its row chunks): the data stays where it is (on the Dask
          workers); its shape is learnt through the runtime (``validate_cluster``,
          one extra ``describe partitions`` round in the phase ``setup``).
    split_rows : callable, optional
        Required when ``X`` is one matrix.
    min_samples : int, default=1
        ``ensure_min_samples`` for one matrix.
    device_arrays : bool, default=False
        Whether the estimator's steps run on array API partitions (a GPU array stays on
        its device, :mod:`kernelscale.arrays`); its ``fit`` has accepted them already
        (:func:`~kernelscale.arrays.accept_device_input`).

    Returns
    -------
    cluster : Cluster
        Close it after the fit.
    info : PartitionInfo
        Rows per partition and number of features.
    indices : list of ndarray or None
        Rows of ``X`` held by each worker when ``X`` was split; ``None`` otherwise
        (the rows are then in the concatenated order of the partitions).
    """
    from sklearn.utils.validation import check_array, validate_data

    options = cluster_options(estimator)
    backend, client = estimator.backend, estimator.client
    if backend == "flower":
        if X is not None and not isinstance(X, str):
            raise TypeError(
                "With backend='flower' the data stay on the SuperNodes: fit(None), or "
                "fit('<node-config key>') to name the key of their partition files, not "
                f"{type(X).__name__}.")
        from kernelscale.backends.flower.cluster import flower_cluster

        return _validated(estimator, flower_cluster(estimator.n_workers, client, X, **options))
    if is_dask_array(X) or is_loader_list(X):
        return _validated(estimator, make_cluster(X, backend, client, **options))
    indices = None
    if device_arrays and is_device_input(X):  # array API arrays: they stay on their device
        parts, indices = device_partitions(X, split_rows, min_samples)
        _set_n_features(estimator, parts[0].shape[1])
    elif is_partition_list(X):
        parts = [check_array(p, accept_sparse="csr", dtype=FLOAT_DTYPES, ensure_min_samples=0)
                 for p in X]
        features = sorted({p.shape[1] for p in parts})
        if len(features) > 1:
            raise ValueError(
                f"Partitions have different numbers of features {features}; "
                "every worker must hold the same columns."
            )
        _set_n_features(estimator, features[0])
    else:
        X = validate_data(estimator, X, accept_sparse="csr", dtype=FLOAT_DTYPES,
                          ensure_min_samples=min_samples)
        if split_rows is None:
            raise TypeError("estimator_cluster needs split_rows to split one matrix.")
        from kernelscale.partition import split

        indices = split_rows(X.shape[0])
        parts = split(X, indices)
    info = PartitionInfo(n_rows=tuple(int(p.shape[0]) for p in parts),
                         n_features=int(estimator.n_features_in_),
                         is_sparse=any(sp.issparse(p) for p in parts))
    return make_cluster(parts, backend, client, **options), info, indices


__all__ = [
    "BACKENDS",
    "cluster_options",
    "estimator_cluster",
    "make_cluster",
]
