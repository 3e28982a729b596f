"""The Dask backend on a real ``distributed.LocalCluster`` of two worker processes.

The same protocol gives the same replies and exactly the same ledger on
``DaskCluster`` as on ``LocalCluster``; a failing step and a dying worker
surface as one ``WorkerError`` naming the partition and the round; with
``retry_lost`` a lost partition is rebuilt and the fit's words are unchanged.
"""

from __future__ import annotations

import functools
import os
import sys
import threading

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import BaseEstimator

distributed = pytest.importorskip("distributed")
cloudpickle = pytest.importorskip("cloudpickle")

from kernelscale.backends.dask.client import WORKER_MALLOC_ENV, dask_client  # noqa: E402
from kernelscale.backends.dask.cluster import DaskCluster  # noqa: E402
from kernelscale.backends.local import LocalCluster  # noqa: E402
from kernelscale.cluster_factory import make_cluster  # noqa: E402
from kernelscale.runtime import (  # noqa: E402
    Tagged,
    WorkerError,
    validate_cluster,
    worker_seeds,
)

# The steps below live in this test module: ship them to the workers by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

TIMEOUT = 30.0  # a round that outlives this fails: nothing in these tests hangs


@pytest.fixture(scope="module")
def dask_cluster():
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    ) as cluster:
        yield cluster


@pytest.fixture
def client(dask_cluster):
    with distributed.Client(dask_cluster) as client:
        client.wait_for_workers(2, timeout=60)  # a killed worker's nanny restarts it
        yield client


# ------------------------------------------------------------------ worker steps
def embed(state, seed):
    """Keep a seeded random projection of the partition; reply with its Gram matrix."""
    rng = np.random.default_rng(seed)
    X = state.data
    state.embedding = np.asarray(X @ rng.standard_normal((X.shape[1], 3)))
    return state.embedding.T @ state.embedding


def project(state, direction):
    """Use the kept embedding: counts and a projection, tagged by kind."""
    scores = state.embedding @ direction
    return Tagged(scalars=np.array([scores.size, scores.max()]), sketch=scores[:2])


def first_rows(state, k):
    """Send k raw rows (CSR rows stay CSR)."""
    return state.data[:k]


def fail_on(state, worker):
    if state.worker == worker:
        raise ValueError(f"bad thing on partition {state.worker}")
    return 0


def exit_once(state, worker, marker):
    """Kill this worker's process the first time (the marker file remembers)."""
    if state.worker == worker and not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return state.worker


def make_partition(i, n_rows=6, n_features=4, sparse=False):
    rng = np.random.default_rng(100 + i)
    X = rng.standard_normal((n_rows + i, n_features))
    if sparse:
        X[X < 0.3] = 0.0
        return sp.csr_matrix(X)
    return X


def protocol(cluster, random_state=0, crash=None):
    """A small master function: rounds with state kept between them."""
    rng = np.random.default_rng(random_state)
    cluster.reset()
    info = validate_cluster(cluster)
    seeds = worker_seeds(rng, cluster.n_workers)
    grams = cluster.scatter_map(embed, [(s,) for s in seeds], round="embed", kind="seed")
    if crash is not None:
        cluster.broadcast_map(exit_once, *crash, round="crash", kind="scalars")
    direction = np.linalg.eigh(sum(grams))[1][:, -1]
    tagged = cluster.broadcast_map(project, direction, round="project")
    rows = cluster.broadcast_map(first_rows, 2, round="sample", kind="scalars",
                                 reply_kind="raw_points")
    with cluster.phase("evaluate"):
        again = cluster.broadcast_map(project, -direction, round="project")
    return info, grams, tagged, rows, again


def assert_same_replies(a, b):
    info_a, *rest_a = a
    info_b, *rest_b = b
    assert info_a == info_b
    for xs, ys in zip(rest_a, rest_b, strict=True):
        for x, y in zip(xs, ys, strict=True):
            if isinstance(x, dict):
                assert type(x) is type(y) and x.keys() == y.keys()
                for key in x:
                    np.testing.assert_array_equal(x[key], y[key])
            elif sp.issparse(x):
                assert sp.issparse(y) and (x != y).nnz == 0
            else:
                np.testing.assert_array_equal(x, y)


# ------------------------------------------------------------------------ tests
@pytest.mark.parametrize("sparse", [False, True])
def test_same_replies_and_same_ledger_as_in_process(client, sparse):
    partitions = [make_partition(i, sparse=sparse) for i in range(3)]
    local = LocalCluster(partitions)
    with DaskCluster.from_arrays(client, partitions, timeout=TIMEOUT) as remote:
        for seed in (0, 1):
            assert_same_replies(protocol(local, seed), protocol(remote, seed))
            assert remote.ledger == local.ledger
    assert local.ledger.total_words("evaluate") > 0
    assert local.ledger.words_by_kind()["raw_points"] > 0


def test_summed_rounds_and_timings_on_dask(client):
    partitions = [make_partition(i) for i in range(3)]
    local = LocalCluster(partitions, n_jobs=2)
    with DaskCluster.from_arrays(client, partitions, timeout=TIMEOUT) as remote:
        totals = [c.scatter_map(embed, [(7,), (8,), (9,)], round="embed", reduce="sum")
                  for c in (local, remote)]
        np.testing.assert_allclose(totals[0], totals[1], rtol=1e-12)
        assert remote.ledger == local.ledger
        (timing,) = remote.ledger.times()
        assert timing.round == "embed" and 0 <= timing.slowest_worker_seconds <= timing.wall_seconds
    local.close()


def test_loaders_run_on_the_workers(client, tmp_path):
    np.save(tmp_path / "p0.npy", make_partition(0))
    loaders = [str(tmp_path / "p0.npy"), functools.partial(make_partition, 1)]
    local = LocalCluster([make_partition(0), make_partition(1)])
    with DaskCluster.from_loaders(client, loaders, timeout=TIMEOUT) as remote:
        assert_same_replies(protocol(local), protocol(remote))
        assert remote.ledger == local.ledger


def unsendable_reply(state):
    return {"lock": threading.Lock()}


def test_unsendable_reply_fails_at_once(client):
    with DaskCluster.from_arrays(client, [make_partition(0)], timeout=TIMEOUT) as remote:
        with pytest.raises(WorkerError, match="Cannot count the words of a lock") as error:
            remote.broadcast_map(unsendable_reply, round="bad reply")
    assert (error.value.worker, error.value.round) == (0, "bad reply")


def test_loader_error_names_the_partition(client, tmp_path):
    np.save(tmp_path / "p0.npy", make_partition(0))
    loaders = [str(tmp_path / "p0.npy"), str(tmp_path / "missing.npy")]
    with pytest.raises(WorkerError, match="missing.npy") as error:
        DaskCluster.from_loaders(client, loaders, timeout=TIMEOUT)
    assert (error.value.worker, error.value.round) == (1, "place partition")


def test_step_exception_names_worker_and_round(client):
    partitions = [make_partition(i) for i in range(3)]
    with pytest.raises(WorkerError) as in_process:
        LocalCluster(partitions).broadcast_map(fail_on, 1, round="check")
    with DaskCluster.from_arrays(client, partitions, timeout=TIMEOUT) as remote:
        with pytest.raises(WorkerError) as on_dask:
            remote.broadcast_map(fail_on, 1, round="check")
        # the cluster is still usable after a step error
        assert remote.broadcast_map(fail_on, 5, round="check again") == [0, 0, 0]
    with pytest.raises(RuntimeError, match="closed"):
        remote.broadcast_map(fail_on, 5, round="after close")
    assert (on_dask.value.worker, on_dask.value.round) == (1, "check")
    assert on_dask.value.cause == in_process.value.cause == "ValueError: bad thing on partition 1"


def test_worker_killed_mid_fit_raises_worker_error(client, tmp_path):
    partitions = [make_partition(i) for i in range(2)]
    with DaskCluster.from_arrays(client, partitions, timeout=TIMEOUT) as remote:
        with pytest.raises(WorkerError) as error:
            protocol(remote, crash=(1, str(tmp_path / "crashed")))
        assert (error.value.worker, error.value.round) == (1, "crash")
        assert "holding partition 1 was lost" in error.value.cause
        # Later rounds fail the same way instead of waiting on the dead worker.
        with pytest.raises(WorkerError, match="was lost") as later:
            remote.broadcast_map(first_rows, 1, round="after")
        assert later.value.worker == 1


@pytest.mark.parametrize("source", ["loaders", "arrays", "dask array"])
def test_retry_lost_rebuilds_the_partition(client, tmp_path, source):
    partitions = [make_partition(i) for i in range(3)]
    local = LocalCluster(partitions)
    marker = str(tmp_path / "crashed")
    # In-process nobody exits (no worker 99); same words and bytes as (1, marker).
    expected = protocol(local, 3, crash=(99, marker))
    if source == "loaders":
        loaders = [functools.partial(make_partition, i) for i in range(3)]
        remote = DaskCluster.from_loaders(client, loaders, timeout=TIMEOUT, retry_lost=True)
    elif source == "arrays":
        remote = DaskCluster.from_arrays(client, partitions, timeout=TIMEOUT, retry_lost=True)
    else:  # the chunk's graph is computed again on the new worker
        da = pytest.importorskip("dask.array")
        X = da.from_array(np.vstack(partitions), chunks=((6, 7, 8), (4,)))
        remote = make_cluster(X, "dask", client, timeout=TIMEOUT, retry_lost=True)
    with remote:
        got = protocol(remote, 3, crash=(1, marker))
        assert os.path.exists(marker)  # worker 1 really died once
        assert_same_replies(expected, got)
        assert remote.ledger.copy("fit") == local.ledger.copy("fit")
        assert remote.ledger.copy("evaluate") == local.ledger.copy("evaluate")
        recovery = remote.ledger.words_by_round("recovery")
        # the replay resends the seed of "embed", returns its Gram matrix again,
        # and the crashed round is sent again
        assert {"describe partitions", "embed", "crash"} <= set(recovery)
        assert remote.ledger.total_words("recovery") > 0
        raw = remote.ledger.words_by_kind("recovery").get("raw_points", 0)
        assert (raw > 0) == (source == "arrays")


def worker_address():
    return distributed.get_worker().address


def test_partitions_go_to_the_workers_asked_for(client):
    # A worker that has just run a task: after the kill tests above, the scheduler may
    # still list the killed worker's old address beside its restarted one.
    address = client.submit(worker_address, pure=False).result(timeout=TIMEOUT)
    parts = [make_partition(i) for i in range(3)]
    with DaskCluster.from_arrays(client, parts, workers=[address], timeout=TIMEOUT) as remote:
        assert remote.addresses == [address] * 3
        assert remote.broadcast_map(first_rows, 1, round="r")[2].shape == (1, 4)


def test_make_cluster(client):
    partitions = [make_partition(i) for i in range(2)]
    local = make_cluster(partitions)
    assert isinstance(local, LocalCluster) and make_cluster(local) is local
    loaded = make_cluster([functools.partial(make_partition, i) for i in range(2)])
    np.testing.assert_array_equal(loaded.states[1].data, partitions[1])
    with make_cluster(partitions, backend="dask", client=client, timeout=TIMEOUT) as remote:
        assert isinstance(remote, DaskCluster)
        assert_same_replies(protocol(local), protocol(remote))
        assert remote.ledger == local.ledger


def test_make_cluster_from_dask_array(client):
    da = pytest.importorskip("dask.array")
    X = np.vstack([make_partition(i) for i in range(3)])
    chunks = ((6, 7, 8), (2, 2))
    local = make_cluster(da.from_array(X, chunks=chunks))
    assert [s.data.shape for s in local.states] == [(6, 4), (7, 4), (8, 4)]
    remote = make_cluster(da.from_array(X, chunks=chunks), backend="dask", client=client)
    with remote:
        assert_same_replies(protocol(local), protocol(remote))
        assert remote.ledger == local.ledger


def test_dask_client_connects_to_a_scheduler(client):
    with dask_client(scheduler=client.scheduler.address) as other:
        assert sorted(other.nthreads()) == sorted(client.nthreads())
    with pytest.raises(ValueError, match="scheduler address or a positive number"):
        dask_client()


def malloc_environ():
    return {name: os.environ.get(name) for name in WORKER_MALLOC_ENV}


def test_local_dask_workers_keep_freed_blocks_for_reuse(monkeypatch):
    """dask_client's own workers get glibc limits that keep a kernel block's memory.

    Even where this process's environment already holds Dask's
    ``MALLOC_TRIM_THRESHOLD_=65536`` (a plain Dask cluster started earlier leaves it).
    """
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    before = malloc_environ()
    with dask_client(n_workers=1) as own:
        seen = list(own.run(malloc_environ).values())
    assert seen == [{name: str(value) for name, value in WORKER_MALLOC_ENV.items()}]
    assert malloc_environ() == before


def test_bad_input_is_refused_early(client):
    X = make_partition(0)
    with pytest.raises(ValueError, match="Unknown backend"):
        make_cluster([X], backend="spark")
    with pytest.raises(ValueError, match="needs client"):
        make_cluster([X], backend="dask")
    with pytest.raises(TypeError, match="list of partitions"):
        make_cluster(X)
    with pytest.raises(TypeError, match="mixes loaders and arrays"):
        make_cluster([X, "part.npy"])
    with pytest.raises(ValueError, match="no partitions"):
        make_cluster([])
    with pytest.raises(TypeError, match="loader must be"):
        DaskCluster.from_loaders(client, [X])
    with pytest.raises(ValueError, match="Unknown Dask workers"):
        DaskCluster.from_arrays(client, [X], workers=["tcp://nowhere:1"])
    with pytest.raises(ValueError, match="timeout must be positive"):
        DaskCluster.from_arrays(client, [X], timeout=0)
    bad = X.copy()
    bad[0, 0] = np.nan
    with DaskCluster.from_arrays(client, [X, bad], timeout=TIMEOUT) as remote:
        with pytest.raises(ValueError, match="Partition 1 holds 1 NaN"):
            validate_cluster(remote)


class _Estimator(BaseEstimator):
    """The attributes ``estimator_cluster`` reads from an estimator."""

    def __init__(self, **params):
        self.backend, self.client = params.pop("backend", "local"), params.pop("client", None)
        vars(self).update(params)


def test_estimator_cluster_takes_every_input(client, tmp_path):
    """One matrix (split), partitions, loaders and a dask array; Dask options reach the cluster."""
    from kernelscale.cluster_factory import estimator_cluster

    da = pytest.importorskip("dask.array")
    parts = [make_partition(i) for i in range(3)]
    paths = []
    for i, part in enumerate(parts):
        paths.append(str(tmp_path / f"p{i}.npy"))
        np.save(paths[-1], part)
    X = np.vstack(parts)
    halves = lambda n: [np.arange(0, n, 2), np.arange(1, n, 2)]  # noqa: E731
    for data, rows, indices in [
        (X, (11, 10), halves(21)),
        (parts, (6, 7, 8), None),
        (paths, (6, 7, 8), None),
        (da.from_array(X, chunks=((6, 15), (2, 2))), (6, 15), None),
    ]:
        est = _Estimator(backend="dask", client=client, retry_lost=True, timeout=TIMEOUT)
        cluster, info, got = estimator_cluster(est, data, halves)
        with cluster:
            assert isinstance(cluster, DaskCluster)
            assert cluster.retry_lost and cluster.timeout == TIMEOUT
            assert info.n_rows == rows and info.n_features == est.n_features_in_ == 4
            assert validate_cluster(cluster).n_rows == rows
        if indices is None:
            assert got is None
        else:
            assert [list(i) for i in got] == [list(i) for i in indices]
    local, _, _ = estimator_cluster(_Estimator(retry_lost=True, timeout=1.0), paths)
    assert isinstance(local, LocalCluster)  # the Dask options are ignored in-process
    # The estimators check each option alone (``_parameter_constraints``); below them,
    # the backends refuse bad values too.
    with pytest.raises(ValueError, match="timeout must be positive"):
        estimator_cluster(_Estimator(backend="dask", client=client, timeout=0), parts)
    with pytest.raises(ValueError, match="Unknown backend 'spark'"):
        estimator_cluster(_Estimator(backend="spark"), parts)
    with pytest.raises(ValueError, match="different numbers of features"):
        estimator_cluster(_Estimator(), [parts[0], parts[1][:, :3]])


def test_device_partitions_on_dask_workers(client, monkeypatch):
    """array-api-strict partitions on a non-host device (a stand-in for CuPy): the actors
    compute on them and send host arrays; the fit equals the in-process NumPy fit."""
    xp = pytest.importorskip("array_api_strict")
    import sklearn

    from kernelscale.horizontal.estimator import DistributedKernelPCA

    rng = np.random.default_rng(0)
    parts = [rng.standard_normal((n, 4)) for n in (50, 70)]
    options = {"n_components": 3, "n_landmarks": 24, "gamma": 0.5, "random_state": 2,
               "method": "diskpca"}
    host = DistributedKernelPCA(**options).fit(parts)
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")
    with sklearn.config_context(array_api_dispatch=True):
        on_dask = DistributedKernelPCA(backend="dask", client=client, **options).fit(
            [xp.asarray(p, device=xp.Device("device1")) for p in parts])
    assert on_dask.communication_ == host.communication_
    np.testing.assert_allclose(on_dask.landmark_coef_, host.landmark_coef_, rtol=0, atol=1e-12)
