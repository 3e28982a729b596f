"""Workers lost mid-fit: the policy every backend applies (``lost="error"`` or ``"drop"``).

A backend that notices a lost worker (a Flower SuperNode that left or stopped
answering) hands it to :meth:`LostWorkers.settle_lost`. With ``lost="error"``,
or in a round that needs every reply, that raises one
:class:`~kernelscale.runtime.WorkerError` naming the worker and the round. With
``lost="drop"``, in the rounds a protocol marks as able to go on without it
(:meth:`LostWorkers.tolerating_lost` around them, or
:meth:`LostWorkers.tolerate_lost_from_here` after the validation round), the
worker is dropped for the rest of the fit: a :class:`LostWorkerWarning` names
it, it answers ``None`` from then on, nothing more is sent to it (or
counted), and every summed round is rescaled by
``N / N_answered`` (rows of all partitions over rows of those that answered,
known from the validation round): the ratio estimate of a sum over rows.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from contextlib import contextmanager

import numpy as np

from kernelscale.runtime.errors import LostWorkerWarning, WorkerError
from kernelscale.runtime.ledger import Tagged

#: What a lost worker does to a fit: ``"error"`` raises, ``"drop"`` goes on without it.
LOST_POLICIES = ("error", "drop")


def scale_reply(value, factor: float):
    """``factor * value`` for a summed reply (arrays, numbers, dicts, ``Tagged``, lists;
    a ``None`` part stays ``None``)."""
    if value is None:
        return None
    if isinstance(value, Tagged):
        return Tagged(**{k: scale_reply(v, factor) for k, v in value.items()})
    if isinstance(value, Mapping):
        return {k: scale_reply(v, factor) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(scale_reply(v, factor) for v in value)
    return value * factor


class LostWorkers:
    """The lost-worker bookkeeping of a :class:`~kernelscale.runtime.Cluster`.

    Attributes
    ----------
    lost : {"error", "drop"}
        The policy (``"error"`` unless the backend offers ``"drop"``).
    lost_workers : set of int
        Workers dropped so far in this protocol run (cleared by ``reset``).
    rows_per_worker : ndarray or None
        Rows of each partition, from the validation round; the ratio estimate
        of a summed round without some workers needs them.
    """

    lost: str = "error"

    def _init_lost(self) -> None:
        self.lost_workers: set[int] = set()
        self.rows_per_worker: np.ndarray | None = None
        self._tolerant = 0
        self._run_tolerant = False

    def _start_protocol_run(self) -> None:
        """A new protocol run (``reset``): every worker again, no tolerance yet."""
        self.lost_workers.clear()
        self._run_tolerant = False

    @property
    def tolerates_lost(self) -> bool:
        """May the current round go on without a lost worker (:meth:`tolerating_lost`,
        :meth:`tolerate_lost_from_here`)?"""
        return self._tolerant > 0 or (self._run_tolerant and self._tolerant >= 0)

    def tolerate_lost_from_here(self) -> None:
        """The rest of this protocol run (until ``reset``) may go on without a lost worker.

        A master function calls it after its validation round, when every later
        round takes a missing (``None``) reply: disKPCA, the other horizontal
        kernel PCAs and the word budget's pilot do.
        """
        self._run_tolerant = True

    @contextmanager
    def tolerating_lost(self):
        """Rounds inside the block may go on without a worker the backend lost.

        A protocol that takes a missing (``None``) reply in every round of the
        block says so with it (FK and RFK k-means, the spectral clustering). A backend that can
        drop lost workers (``FlowerCluster(lost="drop")``) drops them only
        there, and raises :class:`WorkerError` for a worker lost in any other
        round.
        """
        self._tolerant += 1
        try:
            yield self
        finally:
            self._tolerant -= 1

    @contextmanager
    def needing_every_worker(self):
        """Rounds inside the block need every worker, even inside :meth:`tolerating_lost`
        (the validation round: the row counts of every partition)."""
        saved, self._tolerant = self._tolerant, -1
        try:
            yield self
        finally:
            self._tolerant = saved

    def worker_name(self, worker: int) -> str:
        """How a lost-worker error names the worker (a backend may name its host)."""
        return f"worker {worker}"

    def worker_host(self, worker: int) -> str:
        """The worker's host for a :class:`LostWorkerWarning` ("" if none to name)."""
        return ""

    def settle_lost(self, lost: dict[int, str], round: str) -> None:
        """Apply the policy to the workers lost in ``round`` (``{worker: reason}``).

        Raises :class:`WorkerError` (the lowest such worker) unless every one
        may be dropped; otherwise drops them, with a :class:`LostWorkerWarning`.
        Also raises when a worker dropped earlier would be needed in a round
        outside :meth:`tolerating_lost`.
        """
        if lost and (self.lost == "error" or not self.tolerates_lost):
            worker = min(lost)
            raise WorkerError(worker, round, f"{self.worker_name(worker)} lost: "
                              f"{lost[worker]}{self._no_drop_here()}")
        if self.lost_workers and not self.tolerates_lost:
            worker = min(self.lost_workers)
            raise WorkerError(worker, round, f"{self.worker_name(worker)} was lost earlier "
                              f"in the fit{self._no_drop_here()}")
        if len(self.lost_workers | set(lost)) == self.n_workers:
            worker = min(lost)
            raise WorkerError(worker, round, f"{self.worker_name(worker)} lost: "
                              f"{lost[worker]}; no worker is left to go on with")
        for worker in sorted(lost):
            self.drop_worker(worker, round, lost[worker])

    def drop_worker(self, worker: int, round: str, reason: str) -> None:
        """Go on without ``worker``: it answers ``None`` from now on (with a warning)."""
        self.lost_workers.add(worker)
        host = self.worker_host(worker)
        warnings.warn(LostWorkerWarning(
            f"worker {worker}{host and f' ({host})'} was lost in round {round!r} "
            f"({reason}); the fit goes on without its rows (lost='drop'): the model "
            "comes from the other workers, and its rows get the label -1 where labels "
            "are collected"), stacklevel=6)

    def _no_drop_here(self) -> str:
        if self.lost != "drop":
            return ""
        return ("; lost='drop' cannot leave it out here: this round needs every worker's "
                "reply (the validation round, and the vertical kernel PCA, where a party "
                "holds a block of every sample's features)")

    def rescale_factor(self, answered=None) -> float:
        """``N / N_answered``: rows of all partitions over rows of those that answered
        (default: those not lost)."""
        if answered is None:
            answered = [w for w in range(self.n_workers) if w not in self.lost_workers]
        answered = sorted(answered)
        if self.rows_per_worker is None:
            return self.n_workers / len(answered)
        rows = self.rows_per_worker
        return float(rows.sum() / rows[answered].sum())


def answered(replies) -> list:
    """The replies of the workers that answered (a lost worker's reply is ``None``)."""
    return [r for r in replies if r is not None]


__all__ = ["LOST_POLICIES", "LostWorkers", "answered", "scale_reply"]
