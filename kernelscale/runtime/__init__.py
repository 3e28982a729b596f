"""The protocol runtime: clusters of workers and the ledger that counts their messages.

Backends: :class:`LocalCluster` (in-process), :class:`DaskCluster` and
:class:`FlowerCluster` (Flower SuperNodes; needs ``kernelscale[flower]``).
"""

from kernelscale.runtime.build import BACKENDS, dask_client, make_cluster
from kernelscale.runtime.cluster import (
    Cluster,
    LocalCluster,
    WorkerError,
    WorkerState,
    shared_seed,
    worker_seeds,
)
from kernelscale.runtime.dask import DaskCluster
from kernelscale.runtime.flower import FlowerCluster
from kernelscale.runtime.ledger import DOWN, KINDS, UP, Ledger, Message, Tagged, count_words
from kernelscale.runtime.validation import PartitionInfo, as_float_matrix, validate_cluster

__all__ = [
    "BACKENDS",
    "DaskCluster",
    "FlowerCluster",
    "dask_client",
    "make_cluster",
    "DOWN",
    "KINDS",
    "UP",
    "Cluster",
    "Ledger",
    "LocalCluster",
    "Message",
    "PartitionInfo",
    "Tagged",
    "WorkerError",
    "WorkerState",
    "as_float_matrix",
    "count_words",
    "shared_seed",
    "validate_cluster",
    "worker_seeds",
]
