"""The protocol runtime (the core): clusters of workers and the ledger that counts their messages.

The engines that run a :class:`Cluster` live in :mod:`kernelscale.backends`
(in-process, Dask, Flower); :func:`kernelscale.make_cluster` picks one. This
package imports none of them.
"""

from kernelscale.runtime.cluster import (
    Cluster,
    LostWorkerWarning,
    WorkerError,
    WorkerState,
    shared_seed,
    worker_seeds,
)
from kernelscale.runtime.ledger import DOWN, KINDS, UP, Ledger, Message, Tagged, count_words
from kernelscale.runtime.lost import LOST_POLICIES
from kernelscale.runtime.validation import PartitionInfo, as_float_matrix, validate_cluster

__all__ = [
    "DOWN",
    "KINDS",
    "LOST_POLICIES",
    "UP",
    "Cluster",
    "Ledger",
    "LostWorkerWarning",
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
