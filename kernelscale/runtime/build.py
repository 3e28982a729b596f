"""Turn what the user holds into a :class:`~kernelscale.runtime.Cluster`.

Estimators and the CLI call :func:`make_cluster` so that every algorithm runs
in-process, on Dask or on Flower with one argument::

    cluster = make_cluster(partitions, backend="dask", client=client)
    cluster = make_cluster(3, backend="flower", client="127.0.0.1:9093")  # 3 SuperNodes

The horizontal estimators (``DistributedKernelPCA``, ``FederatedKernelKMeans``,
``DistributedSpectralClustering``) build their cluster with
:func:`estimator_cluster`, so that all of them take the same inputs (one array
to split, a list of partitions, a list of loaders, a dask array) and the same
Dask options (``backend``, ``client``, ``retry_lost``, ``timeout``). The CLI
uses :func:`add_dask_args` and :func:`dask_client` for ``--scheduler`` /
``--dask-workers`` / ``--timeout``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Sequence

import numpy as np
import scipy.sparse as sp

from kernelscale.runtime.cluster import Cluster, LocalCluster, effective_n_jobs
from kernelscale.runtime.validation import PartitionInfo, validate_cluster

#: The values ``backend=`` accepts: in-process, Dask, Flower.
BACKENDS = ("local", "dask", "flower")
FLOAT_DTYPES = [np.float64, np.float32]


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
        SuperNode per partition (:class:`~kernelscale.runtime.flower.FlowerCluster`).
    client : distributed.Client or str, optional
        Required with ``backend="dask"`` (see :func:`dask_client`); with
        ``backend="flower"``, the SuperLink's ``host:port``.
    workers, timeout, retry_lost
        Options of :class:`~kernelscale.runtime.dask.DaskCluster` (Dask only).
    n_jobs : int or None
        Threads of the in-process :class:`~kernelscale.runtime.LocalCluster`
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
        return _flower_cluster(data, client, timeout=timeout)
    if backend == "dask" and client is None:
        raise ValueError(
            "backend='dask' needs client=distributed.Client(...) "
            "(kernelscale.runtime.dask_client builds one)."
        )
    if is_dask_array(data):
        if backend == "local":
            return LocalCluster([c.compute(scheduler="sync") for c in _row_chunks(data)],
                                n_jobs=n_jobs)
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

            return LocalCluster([load_partition(item) for item in data], n_jobs=n_jobs)
        return LocalCluster(list(data), n_jobs=n_jobs)
    from kernelscale.runtime.dask import DaskCluster

    build = DaskCluster.from_loaders if all(loaders) else DaskCluster.from_arrays
    return build(client, list(data), workers=workers, timeout=timeout, retry_lost=retry_lost)


def _flower_cluster(data, client, data_key: str | None = None, timeout: float = 600.0):
    """A FlowerCluster on the SuperLink ``client`` with ``data`` SuperNodes.

    ``client`` may be a ready :class:`Cluster` (e.g. ``FlowerCluster(superlink,
    n_workers=3, secure_rounds="all", lost="drop")``): it is used as it is (its
    workers, ``timeout``, ``lost`` and secure rounds), ``data_key`` (``fit("key")``)
    set on it.
    """
    if isinstance(client, Cluster):
        if data_key is not None:
            if not hasattr(client, "data_key"):
                raise TypeError(
                    f"fit({data_key!r}) names the node-config key of the SuperNodes' "
                    f"partition files; the {type(client).__name__} given as client holds "
                    "its partitions: fit(None).")
            client.data_key = str(data_key)
        return client
    if not isinstance(client, str) or not client:
        raise ValueError("backend='flower' needs client='host:port' of the Flower SuperLink.")
    if isinstance(data, bool) or not isinstance(data, (int, np.integer)) or data < 1:
        raise TypeError(
            "With backend='flower' the partitions are on the SuperNodes (each reads the file "
            "named in its node config): give their number as data, not "
            f"{type(data).__name__}.")
    from kernelscale.runtime.flower import FlowerCluster

    return FlowerCluster(client, int(data), data_key=data_key or "partition-path",
                         timeout=timeout)


def cluster_options(estimator) -> dict:
    """``make_cluster`` options from an estimator's ``n_jobs`` (in-process) or
    ``retry_lost`` and ``timeout`` (Dask; ``timeout`` also on Flower)."""
    if estimator.backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {estimator.backend!r}.")
    if estimator.backend == "flower":
        timeout = getattr(estimator, "timeout", None)
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
        return {} if timeout is None else {"timeout": float(timeout)}
    if estimator.backend != "dask":
        n_jobs = getattr(estimator, "n_jobs", None)
        effective_n_jobs(n_jobs)  # a bad value fails before any work
        return {"n_jobs": n_jobs}
    options = {"retry_lost": bool(getattr(estimator, "retry_lost", False))}
    timeout = getattr(estimator, "timeout", None)
    if timeout is not None:
        if not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
        options["timeout"] = float(timeout)
    return options


def _set_n_features(estimator, n_features: int) -> None:
    estimator.n_features_in_ = int(n_features)
    if hasattr(estimator, "feature_names_in_"):  # from an earlier fit on a DataFrame
        del estimator.feature_names_in_


def estimator_cluster(
    estimator,
    X,
    split_rows: Callable[[int], list] | None = None,
    *,
    min_samples: int = 1,
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
        cluster = _flower_cluster(estimator.n_workers, client, X, **options)
        try:
            info = validate_cluster(cluster)
        except BaseException:
            cluster.close()
            raise
        _set_n_features(estimator, info.n_features)
        return cluster, info, None
    if is_dask_array(X) or is_loader_list(X):
        cluster = make_cluster(X, backend, client, **options)
        try:
            info = validate_cluster(cluster)
        except BaseException:
            cluster.close()
            raise
        _set_n_features(estimator, info.n_features)
        return cluster, info, None
    indices = None
    if is_partition_list(X):
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


def _positive_seconds(text: str) -> float:
    """argparse type of ``--timeout``: a finite number of seconds above 0."""
    import argparse

    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def add_dask_args(parser) -> None:
    """Add ``--scheduler`` / ``--dask-workers`` (exclusive), ``--timeout`` and ``--jobs``.

    The ``kernelscale`` command opens the client they ask for (``args.client``,
    ``None`` for in-process) around every subcommand.
    """
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--scheduler", help="run on an existing Dask cluster (tcp://host:8786)")
    group.add_argument("--dask-workers", type=int,
                       help="start a local Dask cluster of N single-threaded worker processes")
    parser.add_argument("--timeout", type=_positive_seconds, default=None,
                        help="Dask only: seconds to connect to --scheduler (default 30) and "
                        "that a round may take before it fails (default 600)")
    parser.add_argument("--jobs", type=int, default=-1,
                        help="in-process threads, as scikit-learn's n_jobs (default -1: every "
                        "core; 1: one thread); ignored on Dask")


@contextlib.contextmanager
def cli_client(args):
    """The Dask client asked for by ``--scheduler`` / ``--dask-workers`` (``None``: in-process).

    A context manager: a local cluster started for ``--dask-workers`` stops at exit.
    ``--timeout`` also bounds connecting to ``--scheduler`` (a hard deadline, see
    :func:`dask_client`); a scheduler that cannot be reached in time, or a listener
    that does not speak Dask's protocol, is an ``OSError`` naming the address.
    """
    scheduler, n_workers = getattr(args, "scheduler", None), getattr(args, "dask_workers", None)
    if scheduler is None and n_workers is None:
        yield None
        return
    timeout = getattr(args, "timeout", None)
    try:
        client = dask_client(scheduler, n_workers, timeout=timeout)
    except (OSError, ValueError) as exc:  # unreachable, silent, not Dask, or not an address
        if scheduler is None:
            raise
        reason = str(exc)
        if reason.startswith(f"{scheduler} "):  # dask_client's own errors name the address
            reason = f"it {reason[len(scheduler) + 1:]}"
        advice = ("check --scheduler (a Dask scheduler's address, tcp://host:8786)"
                  if isinstance(exc, (NotDaskError, ValueError)) else
                  "check --scheduler, or give it longer with --timeout")
        raise OSError(f"cannot connect to the Dask scheduler at {scheduler}: {reason}; "
                      f"{advice}") from exc
    with client:
        yield client


class _NotDask(Exception):
    """The peer answered, but not as a Dask scheduler does."""


class NotDaskError(OSError):
    """``--scheduler`` names a listener that answers, but not in Dask's protocol."""


async def _identify(address: str, timeout: float) -> None:
    """Connect to ``address``, ask for its identity, and check it is a Dask scheduler.

    At most ``timeout`` seconds and a half (``asyncio.wait_for``); the connection is closed
    whatever happens.
    """
    import asyncio

    from distributed.comm import connect
    from distributed.security import Security

    # As distributed.Client connects: TLS settings from Dask's configuration.
    connection_args = Security().get_connection_args("client")
    comm = None

    async def ask() -> None:
        nonlocal comm
        comm = await connect(address, timeout=timeout, **connection_args)
        await comm.write({"op": "identity", "reply": True})
        reply = await comm.read()
        kind = reply.get("type") if isinstance(reply, dict) else None
        if kind != "Scheduler":
            raise _NotDask(f"it answered as a Dask {kind}, not the scheduler" if kind
                           else "its reply is not a Dask scheduler's identity")

    try:
        # A half second's grace lets distributed's own connect timeout speak first
        # (its message says why: refused, no such host).
        await asyncio.wait_for(ask(), timeout + 0.5)
    finally:
        if comm is not None:
            comm.abort()


def _probe_scheduler(address: str, timeout: float) -> None:
    """Check within about ``timeout`` seconds that ``address`` is a Dask scheduler.

    Runs :func:`_identify` on an event loop of its own in a daemon thread, and
    gives up when the thread has not finished shortly after the deadline (a
    peer that never answers cannot hold the caller). Raises an ``OSError``
    naming ``address``: not reachable within ``timeout`` seconds (refused,
    silent, no such host) or not speaking Dask's protocol.
    """
    import asyncio
    import threading

    from distributed.comm import registry
    from distributed.comm.addressing import parse_address, parse_host_port

    try:  # what connect() checks before it opens anything (a mistake, not the peer's)
        scheme, location = parse_address(address)
        registry.get_backend(scheme)
        if scheme in ("tcp", "tls"):
            parse_host_port(location)
    except ValueError as exc:
        raise ValueError(f"{address} is not a Dask scheduler address, such as "
                         f"tcp://host:8786 ({exc})") from exc
    outcome: dict = {}

    def run() -> None:
        try:
            asyncio.run(_identify(address, timeout))
        except BaseException as exc:  # noqa: BLE001 - reported to the caller below
            outcome["error"] = exc
        else:
            outcome["ok"] = True

    thread = threading.Thread(target=run, name="kernelscale-dask-probe", daemon=True)
    thread.start()
    thread.join(timeout + 2.5)
    error = outcome.get("error")
    if outcome.get("ok"):
        return
    silent = (f"{address} is not a reachable Dask scheduler within {timeout:g} s "
              "(no Dask answer in that time)")
    if thread.is_alive() or isinstance(error, (asyncio.TimeoutError, TimeoutError)):
        raise OSError(silent) from error
    if isinstance(error, OSError):  # refused or no such host: distributed's own message
        raise OSError(f"{address} is not a reachable Dask scheduler within {timeout:g} s "
                      f"({error})") from error
    detail = str(error) if isinstance(error, _NotDask) else "its reply is not a Dask message"
    raise NotDaskError(f"{address} does not speak Dask's protocol ({detail})") from error


#: glibc's allocator settings for the worker processes of :func:`dask_client`'s local
#: cluster, set before they start (Dask's ``distributed.nanny.pre-spawn-environ``).
#: Dask sets ``MALLOC_TRIM_THRESHOLD_=65536``, which also fixes the mmap threshold at
#: 128 KiB: every kernel block (a 4096 x 400 chunk is 13 MiB) is then mapped, zero-filled
#: page by page and unmapped again, and a fit on 2 workers took 1.3x as long as in-process
#: (``benchmarks/dask_overhead.py``). These are glibc's own dynamic limits at their
#: maximum. For workers started by ``dask worker``, export the same two variables
#: before starting them.
WORKER_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": 32 * 2**20, "MALLOC_TRIM_THRESHOLD_": 64 * 2**20}


def dask_client(scheduler: str | None = None, n_workers: int | None = None,
                timeout: float | None = None):
    """A ``distributed.Client``: to ``scheduler``, or to a new local cluster.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler, e.g. ``"tcp://host:8786"`` (CLI ``--scheduler``).
    n_workers : int, optional
        Without ``scheduler``: start a local cluster of this many single-threaded
        worker processes (CLI ``--dask-workers``). Their allocator keeps freed
        blocks up to 32 MiB for reuse (:data:`WORKER_MALLOC_ENV`) where Dask's
        default returns every block over 64 KiB to the system at once, which
        made each kernel block a fresh page-faulted mapping (1.3x slower fits).
    timeout : float, optional
        Seconds to wait for the connection to ``scheduler`` (CLI ``--timeout``);
        default: Dask's ``distributed.comm.timeouts.connect`` (30 s). A hard
        deadline: no listener, or one that accepts and never answers, is an
        ``OSError`` after about this long; one that answers in another protocol is
        a :class:`NotDaskError` (an ``OSError``) at once; a malformed address a
        ``ValueError``.

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
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
        if timeout is None:
            import dask
            from dask.utils import parse_timedelta

            timeout = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
        # distributed.Client(address, timeout=) alone waits forever on a listener that
        # accepts and stays silent, and fails with a MemoryError on one that answers
        # in another protocol: ask the scheduler who it is first, under a hard deadline.
        _probe_scheduler(scheduler, float(timeout))
        try:
            return Client(scheduler, timeout=timeout)
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure to connect is the address's
            raise OSError(f"{scheduler} answered, but connecting a Dask client failed "
                          f"({type(exc).__name__}: {exc})") from exc
    if n_workers is None or n_workers < 1:
        raise ValueError("Give a scheduler address or a positive number of Dask workers.")
    # The client owns this local cluster: closing the client stops its workers.
    with _worker_malloc_environ():
        return Client(n_workers=int(n_workers), threads_per_worker=1, processes=True,
                      dashboard_address=":0")


@contextlib.contextmanager
def _worker_malloc_environ():
    """:data:`WORKER_MALLOC_ENV` for the worker processes started inside, whatever is set.

    Dask's nanny takes a variable from ``os.environ`` before its config, and
    leaves its own values there (a plain Dask cluster started earlier in this
    process leaves ``MALLOC_TRIM_THRESHOLD_=65536``): both are set for the
    spawn, and the environment is put back afterwards.
    """
    import dask

    saved = {name: os.environ.get(name) for name in WORKER_MALLOC_ENV}
    os.environ.update({name: str(value) for name, value in WORKER_MALLOC_ENV.items()})
    try:
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{name}": value
                              for name, value in WORKER_MALLOC_ENV.items()}):
            yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

__all__ = [
    "BACKENDS",
    "NotDaskError",
    "WORKER_MALLOC_ENV",
    "add_dask_args",
    "cli_client",
    "dask_client",
    "cluster_options",
    "estimator_cluster",
    "is_dask_array",
    "is_loader",
    "is_loader_list",
    "is_partition_list",
    "make_cluster",
]
