"""The protocols on real Flower processes: one SuperLink and three SuperNodes on 127.0.0.1.

Every master function runs unchanged on a :class:`FlowerCluster` and on the
in-process ``LocalCluster`` with the same ``random_state``: the models agree to
1e-10 and the ledgers are equal message for message. Each SuperNode reads its
own partition file (named in its node config); the rows never pass through the
server. The processes start once for the module and are stopped by the fixture's
finaliser, whatever happens; the tests that kill a node run last, and start the node
again and wait until the module's cluster has found it. The nodes run through the kernelscale
launcher (the ClientApp run inside each node, short waits), so a round costs
a fraction of a second on a quiet machine; the data and the protocol settings
are small all the same.
"""

from __future__ import annotations

import signal

import numpy as np
import pytest

pytest.importorskip("flwr", reason="backend='flower' needs flwr: pip install kernelscale[flower]")

from flower_federation import running_federation  # noqa: E402

from kernelscale.backends.flower.cluster import FlowerCluster  # noqa: E402
from kernelscale.backends.local import LocalCluster  # noqa: E402
from kernelscale.federated.baselines import distributed_spectral_clustering  # noqa: E402
from kernelscale.federated.fk import fk_kmeans  # noqa: E402
from kernelscale.federated.fkkmeans import moment_step, paper_gamma  # noqa: E402
from kernelscale.kernels import make_kernel  # noqa: E402
from kernelscale.runtime import Ledger, WorkerError  # noqa: E402
from kernelscale.runtime.validation import describe_partition  # noqa: E402
from kernelscale.vertical.oneshot import one_shot_kpca  # noqa: E402

TOL = 1e-10
TIMEOUT = 120.0
FK = dict(n_random_features=6, max_iter=1, coreset_size=20, n_refine=0)
# The kill tests stop a node after the first DSPGD iteration; the second notices it.
FK_KILL = dict(FK, max_iter=2)
STOP_ROUND = "dspgd: iteration"


def _data():
    rng = np.random.default_rng(14)
    X = np.vstack([rng.normal(0.0, 0.3, (20, 3)), rng.normal(2.5, 0.3, (19, 3))])
    truth = np.repeat([0, 1], [20, 19])
    order = rng.permutation(X.shape[0])
    return X[order], truth[order]


X, TRUTH = _data()
ROWS = [X[0::3], X[1::3], X[2::3]]  # horizontal: three clients
BLOCKS = [X[:, :1], X[:, 1:2], X[:, 2:]]  # vertical: three parties, same samples
GAMMA = paper_gamma(LocalCluster(ROWS))
SECURE_RANGE = 1e3


@pytest.fixture(scope="module")
def federation(tmp_path_factory):
    # disKPCA sends sampled raw rows: these parties allow them (the default refuses them)
    with running_federation(tmp_path_factory.mktemp("flower"), ROWS, BLOCKS,
                            policy={"allow-rows": True}) as federation:
        yield federation


@pytest.fixture(scope="module")
def cluster(federation):
    # The paper's gamma round goes through SecAgg+ (test_secure_sum_...); the other
    # tests give gamma, so that their ledgers are those of the in-process run.
    with FlowerCluster(federation.address, 3, timeout=TIMEOUT,
                       secure_rounds=["gamma: moments"], secure_range=SECURE_RANGE) as cluster:
        yield cluster


def _fresh(cluster, data_key="partition-path"):
    cluster.ledger = Ledger()
    cluster.data_key = data_key
    return cluster


def test_bad_flower_inputs_fail_before_any_process_starts():
    from kernelscale import FederatedKernelKMeans, make_cluster

    with pytest.raises(TypeError, match="give their number"):
        make_cluster(ROWS, backend="flower", client="127.0.0.1:1")
    with pytest.raises(ValueError, match="client='host:port'"):
        make_cluster(3, backend="flower")
    with pytest.raises(TypeError, match=r"fit\(None\)"):
        FederatedKernelKMeans(backend="flower", client="127.0.0.1:1").fit(X)
    with pytest.raises(ValueError, match="lost must be one of"):
        FlowerCluster("127.0.0.1:1", 3, lost="ignore")


def test_nodes_are_the_partitions(cluster):
    assert len(set(cluster.node_ids)) == 3
    replies = _fresh(cluster).broadcast_map(describe_partition, round="describe",
                                            reply_kind="scalars")
    assert [int(r[0]) for r in replies] == [p.shape[0] for p in ROWS]


def test_fk_kmeans_same_model_and_ledger(cluster):
    local = LocalCluster(ROWS)
    expected = fk_kmeans(local, 2, gamma=GAMMA, random_state=3, **FK)
    got = fk_kmeans(_fresh(cluster), 2, gamma=GAMMA, random_state=3, **FK)
    assert cluster.ledger == local.ledger
    assert cluster.ledger.total_words(kind="raw_points") == 0
    assert got.gamma == pytest.approx(expected.gamma, rel=TOL)
    np.testing.assert_allclose(got.model.centers, expected.model.centers, atol=TOL)
    for a, b in zip(got.model.projections, expected.model.projections, strict=True):
        np.testing.assert_allclose(a, b, atol=TOL)
    np.testing.assert_array_equal(got.labels, expected.labels)


def test_spectral_clustering_and_its_diskpca_same_model_and_ledger(cluster):
    """Distributed spectral clustering runs disKPCA (here with the paper's sketched messages,
    rounds that are not sums) and then the coreset k-means: both models and the ledger."""
    params = dict(kernel=make_kernel("rbf", gamma=0.5), n_landmarks=8, n_random_features=20,
                  embedding_dim=6, row_sketch_dim=8, messages="sketch", coreset_size=20,
                  n_refine=0, random_state=5)
    local = LocalCluster(ROWS)
    expected = distributed_spectral_clustering(local, 2, **params)
    got = distributed_spectral_clustering(_fresh(cluster), 2, **params)
    assert cluster.ledger == local.ledger
    assert any(m.round.startswith("disLR") for m in cluster.ledger.rounds())
    for name in ("landmarks", "coef", "eigenvalues"):  # the disKPCA model
        np.testing.assert_allclose(getattr(got.model, name), getattr(expected.model, name),
                                   atol=TOL)
    np.testing.assert_allclose(got.centers, expected.centers, atol=TOL)
    np.testing.assert_array_equal(got.labels, expected.labels)


def test_vertical_one_shot_kpca_same_model_and_ledger(cluster):
    kernel = make_kernel("rbf", gamma=0.5)
    local = LocalCluster(BLOCKS)
    expected = one_shot_kpca(local, kernel, 2)
    try:
        got = one_shot_kpca(_fresh(cluster, "block-path"), kernel, 2)
    finally:
        cluster.data_key = "partition-path"
    assert cluster.ledger == local.ledger
    assert cluster.ledger.total_words(kind="raw_points") == 0
    np.testing.assert_allclose(got.eigenvalues, expected.eigenvalues, atol=TOL)
    np.testing.assert_allclose(np.abs(got.eigenvectors), np.abs(expected.eigenvectors),
                               atol=TOL)


def test_a_failing_step_names_the_worker_and_the_round(cluster):
    with pytest.raises(WorkerError, match="worker 0 failed in round 'bad call'.*TypeError"):
        _fresh(cluster).broadcast_map(describe_partition, 1, round="bad call")
    with pytest.raises(ValueError, match="not a registered worker step"):
        cluster.broadcast_map(np.sum, round="not a step")
    # the nodes run the ClientApp in their own process: the step that raised did not
    # take them down, the next round is answered
    rows = _fresh(cluster).broadcast_map(describe_partition, round="after the error",
                                         reply_kind="scalars")
    assert [int(r[0]) for r in rows] == [p.shape[0] for p in ROWS]


def test_secure_sum_hides_every_client_and_gives_the_sum(cluster):
    """The gamma moments through SecAgg+: the server's messages reveal no client's sums."""
    cluster = _fresh(cluster)
    cluster.reset()
    rows = tuple(p.shape[0] for p in ROWS)
    # One-row clients would be refused in the clear; summed securely they are not.
    assert cluster.is_secure("gamma: moments")
    gamma = paper_gamma(cluster, n_rows=(1,) + rows[1:])
    assert gamma == pytest.approx(GAMMA, rel=1e-4)
    kinds = cluster.ledger.words_by_kind(direction="worker->master")
    assert set(kinds) == {"secure_sum", "secagg"}  # no clear upload
    assert cluster.ledger.upload_words(kind="secure_sum") == 3 * (1 + 2 + 3)
    assert any("SecAgg+" in m.round for m in cluster.ledger.rounds())
    # What the server received from each client, read as SecAgg+ would read a single one.
    step = 2 * SECURE_RANGE / cluster.secure_levels
    view = cluster.secure_views["gamma: moments"]
    assert sorted(view) == [0, 1, 2]
    for worker, masked in view.items():
        reply = moment_step(type("State", (), {"data": ROWS[worker]})())
        truth = [np.asarray(reply["scalars"]), np.asarray(reply["sketch"])]
        assert [m.shape for m in masked[1:]] == [t.shape for t in truth]
        for m, t in zip(masked[1:], truth, strict=True):
            read = m.astype(np.float64) * step - SECURE_RANGE
            assert np.all(np.abs(read - t) > 4 * step)  # masked: no coordinate readable
        weight = masked[0].astype(np.int64)  # the client's weight factor, masked too
        assert np.all(np.abs(weight - cluster.secure_levels) > 4)


# The tests below stop SuperNode 2 mid-fit; it starts again once the fit has noticed (or
# when the test ends: the `killable` fixture). The estimator tests fit on a FlowerCluster
# of their own (an estimator closes the cluster it fitted on; opening one also waits for
# the restarted node); the others on the module's cluster, with the options of the test
# set on it (`lost`, `secure_rounds`: read at every round) and restored afterwards, once
# the cluster has found the restarted node, which has a new node id
# (FlowerCluster.find_nodes waits for its answer, with a deadline).

AFTER_KILL_TIMEOUT = 3.0  # the one round that notices a SIGKILL waits this for it
KILLED = 2


class _StopAt:
    """A listener on ``cluster``'s rounds that stops SuperNode KILLED after the ``nth``
    round ``round_name``. A SIGKILLed node sends no goodbye: the next round notices it at
    its timeout, AFTER_KILL_TIMEOUT (rounds take well under a second); the rounds after
    that one have the cluster's own timeout again, and the node is started again."""

    def __init__(self, federation, cluster, round_name: str, nth: int = 1,
                 sig=signal.SIGKILL):
        self.federation, self.cluster = federation, cluster
        self.round_name, self.nth, self.sig = round_name, nth, sig
        self.seen, self.timeout, self.active = 0, None, True

    def __call__(self, round, phase, seconds):
        if not self.active:
            return
        if self.timeout is not None:  # the round that noticed the stop has ended
            self.cluster.timeout, self.active = self.timeout, False
            # Start the node again now: it boots while this fit goes on without it (it has
            # a new node id, which this fit does not know), so the next test need not wait.
            self.federation.restart_node(KILLED)
        elif round == self.round_name:
            self.seen += 1
            if self.seen == self.nth:
                self.federation.stop_node(KILLED, self.sig)
                self.timeout, self.cluster.timeout = self.cluster.timeout, AFTER_KILL_TIMEOUT


class _Killable:
    def __init__(self, federation, cluster, found: dict):
        self.federation, self.module_cluster, self.found = federation, cluster, found
        self.opened, self.listeners, self.saved = [], [], {}

    def open(self, **options) -> FlowerCluster:
        """A FlowerCluster of its own on the module's federation."""
        cluster = FlowerCluster(self.federation.address, 3, timeout=TIMEOUT, **options)
        self.opened.append(cluster)
        return cluster

    def module(self, **options) -> FlowerCluster:
        """The module's cluster (a fresh ledger), knowing the node KILLED that runs now,
        with ``options`` until the test ends."""
        cluster = self.module_cluster
        node = self.federation.nodes[KILLED]
        if self.found["process"] is not node:  # started again since the cluster looked
            old = cluster.node_ids[KILLED]
            cluster.find_nodes(timeout=TIMEOUT)
            assert cluster.node_ids[KILLED] != old
            self.found["process"] = node
        cluster = _fresh(cluster)
        for name, value in options.items():
            self.saved.setdefault(name, getattr(cluster, name))
            setattr(cluster, name, value)
        return cluster

    def stop_at(self, cluster, round_name: str, sig=signal.SIGKILL) -> None:
        """Stop SuperNode KILLED after the first round ``round_name`` of ``cluster``."""
        self.listeners.append(_StopAt(self.federation, cluster, round_name, 1, sig))
        cluster.add_listener(self.listeners[-1])

    def restore(self) -> None:
        for listener in self.listeners:
            listener.active = False
        for cluster in self.opened:
            cluster.close()
        cluster = self.module_cluster
        for name, value in self.saved.items():
            setattr(cluster, name, value)
        cluster.timeout, cluster.data_key = TIMEOUT, "partition-path"
        if self.federation.nodes[KILLED].poll() is not None:
            self.federation.restart_node(KILLED)


@pytest.fixture(scope="module")
def found(federation):
    """The node process KILLED that the module's cluster last found."""
    return {"process": federation.nodes[KILLED]}


@pytest.fixture
def killable(federation, cluster, found):
    """A :class:`_Killable`: SuperNode KILLED runs again, and the module's cluster has its
    options back, when the test ends."""
    killable = _Killable(federation, cluster, found)
    try:
        yield killable
    finally:
        killable.restore()


def _fit_without_node_two(killable, cluster, round_name):
    from kernelscale.federated import FederatedKernelKMeans
    from kernelscale.runtime import LostWorkerWarning

    killable.stop_at(cluster, round_name)
    fk = FederatedKernelKMeans(2, gamma=GAMMA, random_state=3, backend="flower",
                               client=cluster, **FK_KILL)
    with pytest.warns(LostWorkerWarning, match=rf"worker {KILLED} \(Flower node \d+\) was lost "
                                               rf"in round '{STOP_ROUND}'") as caught:
        fk.fit(None)
    assert len([w for w in caught if issubclass(w.category, LostWorkerWarning)]) == 1
    return fk


def _check_fit_without_node_two(fk):
    # labels_: partitions in order; the lost client's rows are -1, the others labelled
    rows = [p.shape[0] for p in ROWS]
    assert fk.lost_workers_ == [KILLED]
    lost = np.zeros(sum(rows), bool)
    lost[sum(rows[:KILLED]):sum(rows[:KILLED + 1])] = True
    assert np.all(fk.labels_[lost] == -1) and np.all(fk.labels_[~lost] >= 0)
    # nothing was sent to it after the round it was lost in
    up = [m for m in fk.communication_.rounds() if m.direction == "worker->master"]
    assert not any(m.worker == KILLED for m in up if m.round.startswith("kmeans"))
    # the model from the two clients left still finds the two blobs in every row
    truth = np.concatenate([TRUTH[0::3], TRUTH[1::3], TRUTH[2::3]])
    agreement = np.mean(fk.predict(np.vstack(ROWS)) == truth)
    assert max(agreement, 1 - agreement) >= 0.9
    np.testing.assert_array_equal(fk.labels_[~lost], fk.predict(np.vstack(ROWS[:KILLED]
                                                                          + ROWS[KILLED + 1:])))


def _fit_until_node_two_is_lost(killable, secure: bool):
    """lost="error": FK k-means until the round after SuperNode KILLED was killed."""
    cluster = killable.module(lost="error", secure_rounds="all" if secure else None)
    killable.stop_at(cluster, STOP_ROUND)
    node = cluster.node_ids[KILLED]
    match = (rf"worker {KILLED} failed in round '{STOP_ROUND}': "
             + (rf"the secure sum failed: node {node} was lost at SecAgg\+ stage"
                if secure else rf"node {node} lost: (no reply within|.*Node Unavailable)"))
    with pytest.raises(WorkerError, match=match):
        fk_kmeans(cluster, 2, gamma=GAMMA, random_state=3, **FK_KILL)


# The kill tests alternate between the module's cluster and a cluster of their own, so
# that the node started again after a test that ends with the kill (lost="error") boots
# while the next test opens its cluster.

def test_a_node_killed_mid_fit_gives_one_worker_error_naming_it(killable):
    """lost="error": SIGKILL (no goodbye) mid-fit surfaces at the round's timeout as one
    WorkerError naming the killed worker and its node."""
    _fit_until_node_two_is_lost(killable, secure=False)


def test_a_node_killed_mid_fit_is_dropped_and_the_fit_completes(killable):
    """lost="drop": SIGKILL during DSPGD; the estimator finishes on the two others."""
    cluster = killable.open(lost="drop")
    fk = _fit_without_node_two(killable, cluster, STOP_ROUND)
    _check_fit_without_node_two(fk)
    assert fk.communication_.total_words(kind="raw_points") == 0


def test_a_node_killed_mid_secure_sums_gives_one_worker_error_naming_it(killable):
    """lost="error" with every sum through SecAgg+: the same, the node lost at a SecAgg+
    stage."""
    _fit_until_node_two_is_lost(killable, secure=True)


def test_a_node_killed_mid_fit_with_secure_sums_is_dropped(killable):
    """lost="drop" with every sum through SecAgg+: the node killed between two secure
    DSPGD iterations is left out of the next SecAgg+ round (Flower alone fails there with a
    KeyError in secaggplus_mod on the other nodes) and the fit completes."""
    cluster = killable.open(lost="drop", secure_rounds="all", secure_range=SECURE_RANGE)
    fk = _fit_without_node_two(killable, cluster, STOP_ROUND)
    _check_fit_without_node_two(fk)
    kinds = fk.communication_.words_by_kind(direction="worker->master")
    assert "secure_sum" in kinds


def test_a_node_that_leaves_mid_diskpca_is_dropped_and_the_fit_completes(killable):
    """lost="drop" under disKPCA: node 2 stops (SIGTERM, so no round timeout to wait; a
    SIGKILL ends in the same drop, as the FK tests above show) after the first ridge
    round's residuals. disKPCA finishes on the two others, with the model and the ledger
    of the in-process run that loses worker 2 in the same round
    (tests/test_lost_workers.py checks those in-process runs against exact references).
    Then a protocol that needs every client, the vertical one-shot KPCA (a party's
    features), gets one WorkerError naming the stopped node and why it is not dropped."""
    from losing import LosingCluster

    from kernelscale.horizontal import diskpca
    from kernelscale.runtime import LostWorkerWarning

    cluster = killable.module(lost="drop")
    node = cluster.node_ids[KILLED]
    killable.stop_at(cluster, "ridge sampling 1: residuals", signal.SIGTERM)
    kernel = make_kernel("rbf", gamma=0.5)
    local = LosingCluster(ROWS, "ridge sampling 1", victim=KILLED)
    with pytest.warns(LostWorkerWarning):
        expected = diskpca(local, kernel, 2, n_landmarks=8, center=True, random_state=4)
    with pytest.warns(LostWorkerWarning, match=rf"worker {KILLED} \(Flower node {node}\) was "
                                               r"lost in round 'ridge sampling 1'"):
        got = diskpca(cluster, kernel, 2, n_landmarks=8, center=True, random_state=4)
    assert cluster.lost_workers == {KILLED}
    for name in ("landmarks", "coef", "eigenvalues", "center"):
        np.testing.assert_allclose(getattr(got, name), getattr(expected, name), atol=TOL)
    assert cluster.ledger.rounds("fit") == local.ledger.rounds("fit")

    cluster.data_key = "block-path"
    with pytest.raises(WorkerError, match=rf"worker {KILLED} failed .*node {node} lost.*"
                                          "cannot leave it out here"):
        one_shot_kpca(cluster, make_kernel("rbf", gamma=0.5), 2)
