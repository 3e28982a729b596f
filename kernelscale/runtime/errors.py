"""What a protocol run raises, or warns of, when a worker fails or is lost."""

from __future__ import annotations


class WorkerError(RuntimeError):
    """A worker step failed: names the worker and the round.

    Attributes
    ----------
    worker : int
        Index of the failed worker (its partition).
    round : str
        Name of the protocol round.
    cause : str
        ``repr`` of the original exception (also chained as ``__cause__`` in-process).
    """

    def __init__(self, worker: int, round: str, cause: str):
        self.worker = worker
        self.round = round
        self.cause = cause
        super().__init__(f"worker {worker} failed in round {round!r}: {cause}")

    def __reduce__(self):
        return (type(self), (self.worker, self.round, self.cause))


class LostWorkerWarning(UserWarning):
    """A backend lost a worker and the protocol goes on without it.

    Raised as a warning (``warnings.warn``) by a cluster that drops lost
    workers (``FlowerCluster(lost="drop")``); the message names the worker,
    its node and the round. The worker answers ``None`` from then on; the
    cluster's ``lost_workers`` lists the workers dropped so far.
    """


__all__ = ["LostWorkerWarning", "WorkerError"]
