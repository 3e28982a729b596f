"""A fault injected in-process: a LocalCluster that loses one worker mid-fit (tests only)."""

from __future__ import annotations

from kernelscale.backends.local import LocalCluster

VICTIM = 1


class LosingCluster(LocalCluster):
    """A LocalCluster whose worker ``victim`` is lost from the ``nth`` round ``at`` on."""

    def __init__(self, partitions, at: str, nth: int = 1, victim: int = VICTIM,
                 lost: str = "drop"):
        super().__init__(partitions, n_jobs=1)
        self.at, self.nth, self.victim, self.lost = at, nth, victim, lost
        self.seen = 0
        self.lost_in: str | None = None

    def _run(self, step, per_worker_args, round, deliver):
        self.seen += round == self.at
        if self.seen < self.nth or round == "reset":
            return super()._run(step, per_worker_args, round, deliver)
        newly = {} if self.victim in self.lost_workers else {self.victim: "injected loss"}
        self.settle_lost(newly, round)
        if newly:
            self.lost_in = round

        def without_victim(worker, reply, seconds):
            deliver(worker, None if worker in self.lost_workers else reply, seconds)

        return super()._run(step, per_worker_args, round, without_victim)
