"""What an estimator runs on a federation, recorded in-process (for the protocol table's tests).

:class:`RecordingNodes` stands in for a federation's SuperNodes in this process:
each party holds files under node-config keys (``partition-path``,
``block-path``, ``new-block-path``), ``data_key`` picks (or stacks, for a tuple)
them as a SuperNode does, and every round records the steps it sends with
what they disclose for their arguments, and the names of the summed rounds.
An estimator fitted with ``backend="flower", client=RecordingNodes(...)`` runs
exactly the rounds of a Flower fit (``fit(None)``'s validation round included).
"""

from __future__ import annotations

import warnings

import numpy as np

from kernelscale.backends.flower.hello import check_data_key
from kernelscale.backends.flower.protocols import Protocol
from kernelscale.backends.flower.runconfig import estimator_class
from kernelscale.backends.local import LocalCluster
from kernelscale.runtime.cluster import WorkerState
from kernelscale.runtime.steps import step_disclosure, step_name


def _data():
    rng = np.random.default_rng(7)
    X = np.vstack([rng.normal(0.0, 0.3, (30, 3)), rng.normal(2.0, 0.3, (30, 3))])
    return X[rng.permutation(X.shape[0])]


X = _data()
NEW = X[:5] + 0.01
FILES = {
    "partition-path": [X[i::3] for i in range(3)],  # horizontal: three clients
    "block-path": [X[:, j:j + 1] for j in range(3)],  # vertical: three parties
    "new-block-path": [NEW[:, j:j + 1] for j in range(3)],
}
#: Small sizes, so that each protocol runs in a few milliseconds.
SMALL = {
    "DistributedKernelPCA": dict(n_components=2, gamma=0.5, n_landmarks=10, embedding_dim=5,
                                 row_sketch_dim=6, n_random_features=20, random_state=0),
    "FederatedKernelKMeans": dict(n_clusters=2, n_random_features=6, max_iter=1,
                                  coreset_size=20, random_state=0),
    "DistributedSpectralClustering": dict(n_clusters=2, n_landmarks=10, n_random_features=20,
                                          embedding_dim=5, row_sketch_dim=6, coreset_size=20,
                                          random_state=0),
    "VerticalKernelPCA": dict(n_components=2, gamma=0.5),
}


class RecordingNodes(LocalCluster):
    """Three parties in this process holding :data:`FILES` under node-config keys."""

    def __init__(self, files: dict = FILES):
        self.files = files
        super().__init__(files["partition-path"])
        self._data_key = "partition-path"
        self.steps: list[tuple[str, str]] = []
        self.summed: list[str] = []

    @property
    def data_key(self):
        return self._data_key

    @data_key.setter
    def data_key(self, value) -> None:
        keys = check_data_key(value)
        keys = (keys,) if isinstance(keys, str) else keys
        self._data_key = value
        self.states = [WorkerState(np.vstack([self.files[k][i] for k in keys]), i)
                       for i in range(self.n_workers)]

    def scatter_map(self, step, per_worker_args, round, kind="model", reply_kind="sketch",
                    reduce=None):
        for args in per_worker_args:
            item = (step_name(step), step_disclosure(step, tuple(args)))
            if item not in self.steps:
                self.steps.append(item)
        if reduce == "sum" and round not in self.summed:
            self.summed.append(round)
        return super().scatter_map(step, per_worker_args, round=round, kind=kind,
                                   reply_kind=reply_kind, reduce=reduce)


def record(protocol: Protocol) -> RecordingNodes:
    """Run ``protocol`` as a Flower fit (or a fit, then the transform) in this process."""
    nodes = RecordingNodes()
    cls = estimator_class(protocol.estimator)
    options = {**SMALL[protocol.estimator], **dict(protocol.options)}
    estimator = cls(**options, backend="flower", client=nodes)
    vertical = protocol.estimator == "VerticalKernelPCA"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small data: capped landmarks, rank warnings
        estimator.fit("block-path" if vertical else None)
        if protocol.call == "transform":
            nodes.steps, nodes.summed = [], []
            estimator.transform("new-block-path")
    return nodes
