"""``backend="flower"`` with ``client=`` a ready Cluster (no Flower processes).

The README's way to give an estimator the options of :class:`FlowerCluster`
(``secure_rounds=``, ``lost="drop"``) is ``client=FlowerCluster(...)``; the
estimators then fit on that cluster as it is. A ``LocalCluster`` of the same
partitions checks the plumbing: the same model and the same fit ledger as the
local backend, and the estimator's ``n_workers`` / ``timeout`` are not used.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import make_blobs

from kernelscale import DistributedKernelPCA
from kernelscale.backends.local import LocalCluster
from kernelscale.federated import FederatedKernelKMeans
from kernelscale.runtime import Cluster


@pytest.fixture(scope="module")
def parts():
    X, _ = make_blobs(240, n_features=4, centers=3, random_state=0)
    return [X[i::3] for i in range(3)]


class Counting(LocalCluster):
    """A LocalCluster that counts its rounds and its close()."""

    def __init__(self, parts):
        super().__init__(parts)
        self.calls, self.closed = 0, 0

    def _run(self, *args, **kwargs):
        self.calls += 1
        return super()._run(*args, **kwargs)

    def close(self):
        self.closed += 1
        super().close()


def _fit_ledger(ledger):
    return ledger.copy(phase="fit")


def test_diskpca_on_a_ready_cluster_is_the_local_fit(parts):
    options = dict(n_components=3, gamma=0.1, n_landmarks=40, random_state=0)
    local = DistributedKernelPCA(**options).fit(parts)
    cluster = Counting(parts)
    assert isinstance(cluster, Cluster)
    flower = DistributedKernelPCA(**options, backend="flower", client=cluster,
                                  n_workers=7, timeout=1).fit(None)
    assert cluster.calls > 0 and cluster.closed == 1  # fitted there, then closed
    assert flower.communication_ is cluster.ledger
    assert _fit_ledger(flower.communication_) == _fit_ledger(local.communication_)
    assert len(_fit_ledger(local.communication_)) > 0
    X = np.vstack(parts)
    np.testing.assert_allclose(flower.transform(X), local.transform(X), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(flower.eigenvalues_, local.eigenvalues_, rtol=1e-10)


def test_fk_kmeans_on_a_ready_cluster_is_the_local_fit(parts):
    options = dict(n_clusters=3, n_random_features=10, max_iter=2, coreset_size=30,
                   n_refine=1, gamma=0.1, random_state=0)
    local = FederatedKernelKMeans(**options).fit(parts)
    cluster = Counting(parts)
    flower = FederatedKernelKMeans(**options, backend="flower", client=cluster).fit(None)
    assert cluster.calls > 0 and cluster.closed == 1
    assert _fit_ledger(flower.communication_) == _fit_ledger(local.communication_)
    np.testing.assert_array_equal(flower.labels_, local.labels_)
    np.testing.assert_allclose(flower.cluster_centers_, local.cluster_centers_,
                               rtol=1e-10, atol=1e-10)


def test_a_data_key_needs_a_flower_cluster(parts):
    est = DistributedKernelPCA(n_components=2, gamma=0.1, backend="flower",
                               client=LocalCluster(parts))
    with pytest.raises(TypeError, match=r"fit\('block-path'\) names the node-config key"):
        est.fit("block-path")


def test_client_names_the_flower_connection_or_its_tls_options(monkeypatch, tmp_path):
    """client="host:port" (plain, localhost), a connection name (the user's Flower
    configuration) or a dict of FlowerCluster options (the CA certificate...)."""
    from kernelscale.backends.flower import cluster as flower

    made = []

    class Recording:
        def __init__(self, superlink, n_workers, **options):
            made.append((superlink, n_workers, options))

    monkeypatch.setattr(flower, "FlowerCluster", Recording)
    flower.flower_cluster(3, "127.0.0.1:9093", timeout=5.0)
    flower.flower_cluster(3, "my-federation", data_key="block-path")
    flower.flower_cluster(2, {"superlink": "10.0.0.5:9093", "root_certificates": "ca.crt",
                              "lost": "drop"})
    assert made == [
        ("127.0.0.1:9093", 3, {"timeout": 5.0, "data_key": "partition-path"}),
        (None, 3, {"connection": "my-federation", "timeout": 600.0, "data_key": "block-path"}),
        ("10.0.0.5:9093", 2, {"root_certificates": "ca.crt", "lost": "drop",
                              "timeout": 600.0, "data_key": "partition-path"})]
    with pytest.raises(ValueError, match="name of a connection"):
        flower.flower_cluster(3, 9093)


def test_contradictory_tls_options_are_refused_before_any_process(tmp_path):
    from kernelscale.backends.flower.cluster import FlowerCluster

    ca = tmp_path / "ca.crt"
    ca.write_text("not checked before use")
    with pytest.raises(ValueError, match="cannot be used with insecure=True"):
        FlowerCluster("127.0.0.1:1", 3, root_certificates=ca, insecure=True)
    with pytest.raises(ValueError, match="takes its TLS settings from your Flower"):
        FlowerCluster(None, 3, connection="mine", root_certificates=ca)
    with pytest.raises(ValueError, match="not both or neither"):
        FlowerCluster(None, 3)
    with pytest.raises(FileNotFoundError, match="root_certificates: no such file"):
        FlowerCluster("127.0.0.1:1", 3, root_certificates=tmp_path / "missing.crt")


def test_vertical_kpca_fits_and_transforms_on_the_nodes_blocks(tmp_path):
    """backend="flower": fit(key) on the blocks the nodes hold, transform(key) on the new
    samples' blocks, each node stacking its two files; the model file keeps the key, and
    the loaded model transforms through the nodes again (issue 43, item 6)."""
    from protocol_recording import FILES, NEW, RecordingNodes, X

    from kernelscale import VerticalKernelPCA
    from kernelscale.model import load_model, save_model
    from kernelscale.vertical.nodes import NodeBlock

    options = dict(n_components=2, gamma=0.5, n_local_components=4)
    local = VerticalKernelPCA(**options, feature_blocks=3).fit(X)
    nodes = RecordingNodes()
    flower = VerticalKernelPCA(**options, backend="flower", client=nodes).fit("block-path")
    assert flower.X_fit_blocks_ == [NodeBlock("block-path")] * 3
    assert _fit_ledger(flower.communication_) == _fit_ledger(local.communication_)
    expected = local.transform(NEW)
    np.testing.assert_allclose(flower.transform("new-block-path"), expected, atol=1e-10)
    assert nodes.data_key == ("block-path", "new-block-path")
    save_model(flower, tmp_path / "v.npz")
    loaded = load_model(tmp_path / "v.npz")
    assert loaded.X_fit_blocks_ == [NodeBlock("block-path")] * 3
    loaded.set_params(client=RecordingNodes(FILES))
    np.testing.assert_allclose(loaded.transform("new-block-path"), expected, atol=1e-10)
    with pytest.raises(TypeError, match=r"transform\('<node-config key"):
        loaded.transform(NEW)
    with pytest.raises(ValueError, match="feature_blocks=<number of SuperNodes>"):
        VerticalKernelPCA(backend="flower", client="127.0.0.1:1").fit("block-path")
    local.set_params(backend="flower", client=RecordingNodes(FILES))
    with pytest.raises(ValueError, match="not fitted on Flower SuperNodes"):
        local.transform("new-block-path")
