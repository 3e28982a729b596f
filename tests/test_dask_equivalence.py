"""Every distributed algorithm gives the same model and the same ledger on Dask.

Each master function runs twice with the same ``random_state``: on the
in-process ``LocalCluster`` and on a ``DaskCluster`` over a real
``distributed.LocalCluster`` of two worker processes (no mocks). The results
must agree to 1e-10 and the ledgers (every message: round, phase, direction,
kind, worker, words, bytes) must be exactly equal.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
import types

import numpy as np
import pytest
import scipy.sparse as sp

distributed = pytest.importorskip("distributed")

from kernelscale.backends.dask.cluster import DaskCluster  # noqa: E402
from kernelscale.backends.local import LocalCluster  # noqa: E402
from kernelscale.kernels import make_kernel  # noqa: E402

cloudpickle = pytest.importorskip("cloudpickle")
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # exit_process runs on a worker

TOL = 1e-10
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=":0"
    ) as cluster, distributed.Client(cluster) as client:
        yield client


def optional(module: str):
    """The algorithm's module, or skip while it is not in the library."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        pytest.skip(f"{module} is not available: {exc}")


def assert_same(a, b, where="result"):
    """Recursive comparison: arrays to 1e-10, everything else exactly."""
    if isinstance(a, np.random.Generator):
        assert a.bit_generator.state == b.bit_generator.state, where
    elif hasattr(a, "to_dict") and callable(a.to_dict):
        assert a.to_dict() == b.to_dict(), where
    elif sp.issparse(a):
        assert sp.issparse(b), where
        np.testing.assert_allclose(a.toarray(), b.toarray(), rtol=TOL, atol=TOL, err_msg=where)
    elif isinstance(a, (np.ndarray, float, np.floating)):
        np.testing.assert_allclose(a, b, rtol=TOL, atol=TOL, err_msg=where)
    elif isinstance(a, dict):
        assert a.keys() == b.keys(), where
        for key in a:
            assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, (type, types.FunctionType, types.MethodType)):
        assert a == b, where
    elif hasattr(a, "__dict__"):
        assert type(a) is type(b), where
        assert_same(vars(a), vars(b), where)
    else:
        assert a == b, where


def run_both(client, partitions, master, **kwargs):
    """Run ``master(cluster, **kwargs)`` in-process and on Dask; compare everything."""
    local = LocalCluster(partitions)
    expected = master(local, **kwargs)
    with DaskCluster.from_arrays(client, partitions, timeout=TIMEOUT) as remote:
        got = master(remote, **kwargs)
        assert_same(expected, got)
        assert remote.ledger == local.ledger
    assert local.ledger.total_words(phase=None) > 0
    return expected, local.ledger


def horizontal_data(sparse=False, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((3, 5)) * 3
    parts = []
    for n in (70, 50, 40):
        X = centres[rng.integers(3, size=n)] + rng.standard_normal((n, 5))
        if sparse:
            X[np.abs(X) < 0.8] = 0.0
            X = sp.csr_matrix(X)
        parts.append(X)
    return parts


def remote_horizontal_data(tmp_path):
    """horizontal_data() as arrays, as one .npy file per partition, and as a dask array."""
    da = pytest.importorskip("dask.array")
    parts = horizontal_data()
    paths = []
    for i, part in enumerate(parts):
        paths.append(str(tmp_path / f"part{i}.npy"))
        np.save(paths[-1], part)
    chunks = da.from_array(np.vstack(parts), chunks=(tuple(len(p) for p in parts), (5,)))
    return parts, paths, chunks


SMALL = {"n_components": 3, "n_landmarks": 25, "n_random_features": 80,
         "embedding_dim": 8, "row_sketch_dim": 16, "chunk_size": 32}


# ------------------------------------------------------------- horizontal (000/001)
@pytest.mark.parametrize(("messages", "sparse"), [("gram", False), ("sketch", True)])
def test_diskpca(client, messages, sparse):
    horizontal = optional("kernelscale.horizontal")
    kernel = make_kernel("rbf", gamma=0.1)
    model, ledger = run_both(client, horizontal_data(sparse), horizontal.diskpca, kernel=kernel,
                             messages=messages, center=not sparse, random_state=1, **SMALL)
    assert ledger.words_by_kind("fit").get("raw_points", 0) > 0


@pytest.mark.parametrize("method", ["uniform_dislr", "uniform_batch", "exact_kpca",
                                    "random_features_pca"])
def test_horizontal_baselines(client, method):
    horizontal = optional("kernelscale.horizontal")
    kernel = make_kernel("rbf", gamma=0.1)
    run_both(client, horizontal_data(), getattr(horizontal, method), kernel=kernel,
             random_state=2, **SMALL)


def test_distributed_error(client):
    horizontal = optional("kernelscale.horizontal")
    parts = horizontal_data()
    model = horizontal.diskpca(LocalCluster(parts), make_kernel("rbf", gamma=0.1),
                               random_state=0, **SMALL)
    _, ledger = run_both(client, parts, horizontal.distributed_error, model=model)
    assert ledger.total_words("evaluate") == ledger.total_words(phase=None) > 0


def test_estimator_on_dask(client):
    horizontal = optional("kernelscale.horizontal")
    parts = horizontal_data()
    # with the pre-image map learnt on every worker's rows (issue 44): its round on Dask too
    params = dict(kernel="rbf", gamma=0.1, random_state=3, fit_inverse_transform=True, **SMALL)
    local = horizontal.DistributedKernelPCA(**params).fit(parts)
    remote = horizontal.DistributedKernelPCA(**params, backend="dask", client=client).fit(parts)
    X = np.vstack(parts)
    np.testing.assert_allclose(local.transform(X), remote.transform(X), rtol=TOL, atol=TOL)
    np.testing.assert_allclose(local.inverse_transform(local.transform(X)),
                               remote.inverse_transform(remote.transform(X)), rtol=TOL, atol=TOL)
    assert local.communication_ == remote.communication_


def test_estimator_on_remote_data(client, tmp_path):
    """Loaders and a dask array: the data stays on the workers, same model and fit words."""
    horizontal = optional("kernelscale.horizontal")
    parts, paths, chunks = remote_horizontal_data(tmp_path)
    X = np.vstack(parts)
    params = dict(kernel="rbf", gamma=0.1, random_state=3, **SMALL)
    local = horizontal.DistributedKernelPCA(**params).fit(parts)
    for data in (paths, chunks):
        remote = horizontal.DistributedKernelPCA(**params, backend="dask", client=client,
                                                 retry_lost=True).fit(data)
        np.testing.assert_allclose(local.transform(X), remote.transform(X), rtol=TOL, atol=TOL)
        assert local.communication_.copy("fit") == remote.communication_.copy("fit")
        assert remote.n_features_in_ == 5


@pytest.mark.parametrize("kernel", ["cosine", np.dot])
def test_estimator_with_landmarks_and_a_direct_kernel_on_dask(client, kernel):
    """User landmarks travel in the model message; a callable by its import path."""
    horizontal = optional("kernelscale.horizontal")
    parts = horizontal_data()
    params = dict(kernel=kernel, method="uniform_dislr", landmarks=parts[0][:15],
                  n_components=3, random_state=3)
    local = horizontal.DistributedKernelPCA(**params).fit(parts)
    remote = horizontal.DistributedKernelPCA(**params, backend="dask", client=client).fit(parts)
    X = np.vstack(parts)
    np.testing.assert_allclose(local.transform(X), remote.transform(X), rtol=TOL, atol=TOL)
    assert local.communication_ == remote.communication_
    assert remote.communication_.total_words("fit", kind="raw_points") == 0


@pytest.mark.parametrize("method", ["uniform_batch", "exact"])
def test_a_lambda_kernel_fits_on_dask_with_the_master_only_methods(client, method):
    """README: a lambda works on Dask with 'uniform_batch' / 'exact', which evaluate the
    kernel at the master only (the workers used to resolve it when storing the model, and
    failed); 'uniform_dislr' refuses it up front and recommends exactly these two."""
    horizontal = optional("kernelscale.horizontal")
    parts = horizontal_data()
    kernel = lambda x, y: float(np.exp(-0.1 * np.sum((x - y) ** 2)))  # noqa: E731
    params = dict(kernel=kernel, method=method, n_landmarks=30, n_components=3,
                  random_state=3)
    local = horizontal.DistributedKernelPCA(**params).fit(parts)
    remote = horizontal.DistributedKernelPCA(**params, backend="dask", client=client).fit(parts)
    X = np.vstack(parts)[:40]
    np.testing.assert_allclose(local.transform(X), remote.transform(X), rtol=TOL, atol=TOL)
    assert local.communication_ == remote.communication_
    with pytest.raises(ValueError, match="method='uniform_batch' or 'exact'"):
        horizontal.DistributedKernelPCA(**{**params, "method": "uniform_dislr"},
                                        backend="dask", client=client).fit(parts)


async def exit_process():
    """Run with ``client.run`` on a worker: end its process at once."""
    os._exit(1)


class CrashingDaskCluster(DaskCluster):
    """Kills the process holding partition ``victim`` just before round ``crash_round``."""

    crash_round = "adaptive sampling: residuals"
    victim = 1

    def _run(self, step, per_worker_args, round, deliver):
        if round == self.crash_round and not getattr(self, "crashed", False):
            self.crashed = True
            address = self.addresses[self.victim]
            self.client.run(exit_process, workers=[address], wait=False)
            deadline = time.monotonic() + TIMEOUT  # until the scheduler saw it go
            while address in self.client.nthreads() and time.monotonic() < deadline:
                time.sleep(0.05)
        return super()._run(step, per_worker_args, round, deliver)


@pytest.mark.parametrize(("sampler", "crash_round", "replayed"), [
    ("paper", "adaptive sampling: residuals", "leverage scores: E_i^T E_i"),
    ("ridge", "ridge sampling 2: residuals", "pilot sampling"),
])
def test_diskpca_rebuilds_a_worker_lost_mid_fit(client, tmp_path, sampler, crash_round,
                                                replayed):
    horizontal = optional("kernelscale.horizontal")
    optional("kernelscale.datasets")
    parts = horizontal_data()
    loaders = []
    for i, part in enumerate(parts):
        np.save(tmp_path / f"part{i}.npy", part)
        loaders.append(str(tmp_path / f"part{i}.npy"))
    kwargs = dict(kernel=make_kernel("rbf", gamma=0.1), random_state=7, sampler=sampler,
                  **SMALL)
    local = LocalCluster(parts)
    expected = horizontal.diskpca(local, **kwargs)
    client.wait_for_workers(2, timeout=TIMEOUT)
    with CrashingDaskCluster.from_loaders(client, loaders, timeout=TIMEOUT,
                                          retry_lost=True) as remote:
        remote.crash_round = crash_round
        got = horizontal.diskpca(remote, **kwargs)
    assert remote.crashed
    assert_same(expected, got)
    for phase in ("setup", "fit"):
        assert remote.ledger.copy(phase) == local.ledger.copy(phase)
    # replayed: validation, the sampler's first rounds, then the crashed round again
    recovery = remote.ledger.words_by_round("recovery")
    assert list(recovery)[:2] == ["describe partitions", replayed]
    assert crash_round in recovery
    assert remote.ledger.words_by_kind("recovery").get("raw_points", 0) > 0  # landmarks again
    assert {m.worker for m in remote.ledger.rounds("recovery")} == {1}


# ---------------------------------------------------------------- vertical (002)
def vertical_data(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((60, 3)) @ rng.standard_normal((3, 9)) + 0.1 * rng.standard_normal(
        (60, 9)
    )
    return [X[:, :3], X[:, 3:5], X[:, 5:]]


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_vertical_one_shot(client, kernel):
    vertical = optional("kernelscale.vertical")
    run_both(client, vertical_data(), vertical.one_shot_kpca,
             kernel=make_kernel(kernel, gamma=0.2), n_components=3, n_local_components=5)


def test_vertical_transform(client):
    vertical = optional("kernelscale.vertical")
    kernel = make_kernel("rbf", gamma=0.2)
    blocks = vertical_data()
    model = vertical.one_shot_kpca(LocalCluster([b[:40] for b in blocks]), kernel,
                                   n_components=3, n_local_components=5)
    run_both(client, blocks, vertical.vertical_transform, model=model, chunk_size=8)


def test_vertical_dpca(client):
    dpca = optional("kernelscale.vertical.dpca")
    run_both(client, vertical_data(), dpca.dpca, n_components=2, n_inner=3, n_outer=3,
             random_state=4)


# --------------------------------------------------------------- federated (003)
def test_federated_kernel_kmeans(client):
    federated = optional("kernelscale.federated.fk")
    run_both(client, horizontal_data(), federated.fk_kmeans, n_clusters=3, n_random_features=20,
             max_iter=4, coreset_size=40, dropout=0.3, random_state=5)


def test_federated_dspgd_without_cem(client):
    plain = optional("kernelscale.federated.dspgd_plain")
    _, ledger = run_both(client, horizontal_data(), plain.dspgd_without_cem, n_clusters=3,
                         n_eigenvectors=3, gamma=0.05, n_random_features=10, max_iter=3,
                         chunk_size=32, random_state=11)
    assert ledger.total_words("fit") > 0


def test_federated_linear_kmeans(client):
    kmeans = optional("kernelscale.federated.kmeans")
    run_both(client, horizontal_data(), kmeans.distributed_kmeans, n_clusters=3,
             coreset_size=40, random_state=6)


def test_federated_baselines(client):
    baselines = optional("kernelscale.federated.baselines")
    run_both(client, horizontal_data(), baselines.rfk_kmeans, n_clusters=3,
             n_random_features=30, coreset_size=40, random_state=8)
    run_both(client, horizontal_data(), baselines.distributed_spectral_clustering,
             n_clusters=3, kernel=make_kernel("rbf", gamma=0.1), coreset_size=40,
             random_state=9, **SMALL)


# --------------------------------------------------------------- streaming (004)
@pytest.mark.parametrize("method", ["skpca", "rnca", "nystrom"])
def test_streaming_merge(client, method):
    streaming = optional("kernelscale.streaming.distributed")
    run_both(client, horizontal_data(), streaming.streaming_kpca_distributed, method=method,
             gamma=0.1, n_random_features=40, sketch_size=8, n_landmarks=12, chunk_size=16,
             random_state=10)


# --------------------------------------------------------------- the other estimators
def test_clustering_and_vertical_estimators_on_dask(client):
    """backend='dask' on every later estimator: same labels/embedding, same ledger."""
    from kernelscale import DistributedSpectralClustering, FederatedKernelKMeans, VerticalKernelPCA

    X = np.vstack(horizontal_data())
    cases = [
        (FederatedKernelKMeans, dict(n_clusters=3, n_random_features=20, max_iter=3,
                                     coreset_size=40, n_workers=3, random_state=5), X),
        (DistributedSpectralClustering, dict(n_clusters=3, gamma=0.1, coreset_size=40,
                                             n_workers=3, random_state=9, n_landmarks=25,
                                             n_random_features=80, embedding_dim=8,
                                             row_sketch_dim=16), X),
        (VerticalKernelPCA, dict(n_components=3, n_local_components=5, gamma=0.2,
                                 feature_blocks=3), np.hstack(vertical_data())),
    ]
    for estimator, params, data in cases:
        local = estimator(**params).fit(data)
        remote = estimator(**params, backend="dask", client=client).fit(data)
        where = estimator.__name__
        np.testing.assert_allclose(local.transform(data[:20]), remote.transform(data[:20]),
                                   rtol=TOL, atol=TOL, err_msg=where)
        if hasattr(local, "labels_"):
            np.testing.assert_array_equal(local.labels_, remote.labels_, err_msg=where)
        assert local.communication_ == remote.communication_, where


def without_estimator_describe(ledger, n_workers):
    """The ledger less the estimator's own 'describe partitions' round (loaders, dask arrays).

    With data that stays on the workers the estimator learns ``n_features`` through
    the runtime before the fit: one more setup round, ``4`` scalars per worker.
    """
    from kernelscale.runtime import Ledger

    messages = ledger.rounds(phase=None)
    extra = messages[:n_workers]
    assert {(m.round, m.phase, m.direction, m.words) for m in extra} == {
        ("describe partitions", "setup", "worker->master", 4)}
    rest = Ledger()
    rest.extend(messages[n_workers:])
    return rest


def test_clustering_estimators_on_remote_data(client, tmp_path):
    """Loaders and a dask array: same labels (partition order) and the same ledger."""
    from kernelscale import DistributedSpectralClustering, FederatedKernelKMeans

    parts, paths, chunks = remote_horizontal_data(tmp_path)
    X = np.vstack(parts)
    cases = [
        (FederatedKernelKMeans, dict(n_clusters=3, n_random_features=20, max_iter=3,
                                     coreset_size=40, random_state=5), (paths, chunks)),
        (DistributedSpectralClustering, dict(n_clusters=3, gamma=0.1, coreset_size=40,
                                             random_state=9, n_landmarks=25,
                                             n_random_features=80, embedding_dim=8,
                                             row_sketch_dim=16), (paths,)),
    ]
    for estimator, params, inputs in cases:
        local = estimator(**params).fit(parts)
        assert local.labels_.shape == (X.shape[0],) and local.n_features_in_ == 5
        for data in inputs:
            remote = estimator(**params, backend="dask", client=client, retry_lost=True,
                               timeout=TIMEOUT).fit(data)
            where = f"{estimator.__name__} on {type(data).__name__}"
            np.testing.assert_array_equal(local.labels_, remote.labels_, err_msg=where)
            np.testing.assert_allclose(local.transform(X[:20]), remote.transform(X[:20]),
                                       rtol=TOL, atol=TOL, err_msg=where)
            assert remote.n_features_in_ == 5, where
            assert without_estimator_describe(remote.communication_, len(parts)) == \
                local.communication_, where


def test_vertical_estimator_on_loaders(client, tmp_path):
    """Each party loads its block on its worker; transform reloads it there."""
    from kernelscale import VerticalKernelPCA

    blocks = vertical_data()
    paths = []
    for j, block in enumerate(blocks):
        paths.append(str(tmp_path / f"party{j}.npy"))
        np.save(paths[-1], block)
    params = dict(n_components=3, n_local_components=5, gamma=0.2)
    local = VerticalKernelPCA(**params).fit(blocks)
    remote = VerticalKernelPCA(**params, backend="dask", client=client, retry_lost=True,
                               timeout=TIMEOUT).fit(paths)
    assert remote.n_features_in_ == 9 and remote.X_fit_blocks_ == paths
    new = [b[:7] for b in blocks]
    expected, expected_ledger = local.distributed_transform(new)
    got, ledger = remote.distributed_transform(new)
    np.testing.assert_allclose(expected, got, rtol=TOL, atol=TOL)
    assert ledger == expected_ledger
    for phase in ("fit", "transform"):
        assert remote.communication_.copy(phase) == local.communication_.copy(phase)
    rounds = [m.round for m in remote.communication_.rounds("setup")]
    # once per party: the protocol reuses the estimator's validation (VerticalInfo)
    assert rounds.count("describe feature blocks") == len(blocks)
