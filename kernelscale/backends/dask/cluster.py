"""The Dask backend: every partition lives in a Dask Actor pinned to one worker.

Only the protocol's messages (the steps' arguments and replies, counted by the
base :class:`~kernelscale.runtime.Cluster`) cross the network; a partition
either is scattered once from the client (:meth:`DaskCluster.from_arrays`) or
is loaded by its actor on its own worker (:meth:`DaskCluster.from_loaders`), so
with loaders the data never passes through the client.

Failures. Every round waits with a deadline (``timeout``) and checks every few
tenths of a second that the workers holding the pending partitions are still
alive, so a worker that dies surfaces within seconds as one
:class:`~kernelscale.runtime.WorkerError` naming the partition and the round.
With ``retry_lost=True`` a lost partition is rebuilt instead: a new actor on a
live worker reloads the partition from its source, the steps recorded since the
last ``reset`` are replayed (steps are deterministic given their arguments),
and the round is repeated on it. The replayed traffic is counted in the ledger
under the phase ``"recovery"``; the ``"fit"`` words are those of a run without
the failure.

``dask[distributed]`` is an optional dependency: this module never imports it
(the caller's client brings it), so ``import kernelscale`` does not need it.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kernelscale.backends.dask.actor import PartitionActor, settle
from kernelscale.runtime.cluster import Cluster, WorkerError, _reset_state
from kernelscale.runtime.ledger import DOWN, UP
from kernelscale.runtime.validation import describe_partition

POLL_SECONDS = 0.25


class _WorkerGone(Exception):
    """The Dask worker chosen for a partition left before the partition was placed."""


@dataclass
class _Source:
    """Where a partition comes from, so that it can be placed again after a loss."""

    kind: str  # "array" (held by the client), "loader" or "future" (a persisted dask chunk)
    value: Any


@dataclass
class _Call:
    """One recorded round, replayed to rebuild a lost partition's state."""

    step: Callable
    per_worker_args: list
    round: str
    kind: str
    reply_kind: str


class DaskCluster(Cluster):
    """A :class:`~kernelscale.runtime.Cluster` on a ``distributed.Client``.

    Build it with :meth:`from_arrays` or :meth:`from_loaders` (or
    :func:`kernelscale.make_cluster`).

    Parameters
    ----------
    client : distributed.Client
        A synchronous client connected to the scheduler.
    sources : list of _Source
        One source per partition.
    workers : sequence of str, optional
        Worker addresses to place the partitions on, partition ``i`` on
        ``workers[i % len(workers)]``; default: every worker, sorted by address.
    timeout : float, default=600
        Seconds a round (or the placement of a partition) may take before it
        fails with a :class:`WorkerError`.
    retry_lost : bool, default=False
        Rebuild a partition whose worker died (see the module docstring)
        instead of raising. The rounds are recorded for a replay only then, so
        set it before the protocol starts (``cluster.reset()``).
    max_recoveries : int, default=3
        How many partitions may be rebuilt during one round before giving up.
    """

    def __init__(
        self,
        client,
        sources: Sequence[_Source],
        *,
        workers: Sequence[str] | None = None,
        timeout: float = 600.0,
        retry_lost: bool = False,
        max_recoveries: int = 3,
    ):
        if getattr(client, "asynchronous", False):
            raise TypeError("DaskCluster needs a synchronous distributed.Client.")
        if timeout <= 0:
            raise ValueError(f"timeout must be positive, got {timeout}.")
        super().__init__(len(sources))
        self.client = client
        self.timeout = float(timeout)
        self.retry_lost = bool(retry_lost)
        self.max_recoveries = int(max_recoveries)
        self._sources = list(sources)
        self._history: list[_Call] = []
        self._data_normalised = False
        self._dead: set[str] = set()
        self._kinds: tuple[str, str] | None = None
        self._token = uuid.uuid4().hex[:8]
        self._actors: list = [None] * self.n_workers
        self._actor_futures: list = [None] * self.n_workers
        self.addresses: list[str] = [""] * self.n_workers
        live = sorted(self._live_workers())
        if not live:
            raise ValueError("The Dask cluster has no workers.")
        if workers is not None:
            unknown = sorted(set(workers) - set(live))
            if unknown or not workers:
                raise ValueError(f"Unknown Dask workers {unknown}; the cluster has {live}.")
            live = list(workers)
        for i in range(self.n_workers):
            self._place_somewhere(i, live[i % len(live)])

    # ------------------------------------------------------------------ builders
    @classmethod
    def from_arrays(cls, client, partitions: Sequence, **options) -> DaskCluster:
        """Scatter partitions held by the client, one per worker.

        Parameters
        ----------
        client : distributed.Client
        partitions : sequence of arrays or CSR matrices
            Partition ``i`` is sent once to its worker and stays there.
        **options
            ``workers``, ``timeout``, ``retry_lost``, ``max_recoveries``.
        """
        return cls(client, [_Source("array", p) for p in partitions], **options)

    @classmethod
    def from_loaders(cls, client, loaders: Sequence, **options) -> DaskCluster:
        """Have every actor load its own partition on its worker.

        Parameters
        ----------
        client : distributed.Client
        loaders : sequence of paths or picklable callables
            A path (.npy, memory-mapped; .csv; LIBSVM; Parquet) is read with
            ``kernelscale.datasets.load`` on the worker; a callable is called
            there with no arguments. The data never passes through the client.
        **options
            ``workers``, ``timeout``, ``retry_lost``, ``max_recoveries``.
        """
        for loader in loaders:
            if not (isinstance(loader, (str, os.PathLike)) or callable(loader)):
                raise TypeError(
                    f"A loader must be a file path or a callable, got {type(loader).__name__}."
                )
        return cls(client, [_Source("loader", x) for x in loaders], **options)

    @classmethod
    def from_dask_array(cls, client, data, **options) -> DaskCluster:
        """One partition per row chunk of a dask array, each held where it was computed.

        The array is persisted on the cluster (columns in one chunk) and every
        actor is placed on the worker that holds its chunk, so no row moves. A
        chunk lost with its worker is recomputed by Dask from its graph.
        """
        if data.ndim != 2:
            raise ValueError(f"A dask array of data must be 2-D, got {data.ndim}-D.")
        if len(data.chunks[1]) > 1:
            data = data.rechunk({1: -1})
        data = client.persist(data)
        by_key = {f.key: f for f in client.futures_of(data)}
        futures = [by_key[row[0]] for row in data.__dask_keys__()]
        timeout = options.get("timeout", 600.0)
        client.wait_for_workers(1, timeout=timeout)
        from distributed import wait

        wait(futures, timeout=timeout)
        who_has = client.who_has(futures)
        if options.get("workers") is None:
            options["workers"] = [sorted(who_has[f.key])[0] for f in futures]
        return cls(client, [_Source("future", f) for f in futures], **options)

    # ---------------------------------------------------------------- placement
    def _live_workers(self) -> dict:
        return self.client.nthreads()

    def _place_somewhere(self, worker: int, preferred: str) -> None:
        """Place partition ``worker`` on ``preferred``, or on another live worker if it died."""
        candidates = [preferred] + sorted(set(self._live_workers()) - {preferred})
        for address in candidates:
            if address in self._dead:
                continue
            try:
                self._place(worker, address)
                return
            except _WorkerGone:
                self._dead.add(address)
        raise WorkerError(worker, "place partition", "no live Dask worker to hold it")

    def _place(self, worker: int, address: str) -> None:
        """Create the actor of partition ``worker`` on the Dask worker ``address``."""
        source = self._sources[worker]
        where = {"workers": [address], "allow_other_workers": False}
        try:
            if source.kind == "array":
                (payload,) = self.client.scatter([source.value], workers=[address], hash=False)
            elif source.kind == "future":  # Dask moves (or recomputes) the chunk
                payload = source.value
            else:
                payload = source.value
        except (OSError, KeyError) as exc:  # the worker left before the data reached it
            raise _WorkerGone(address) from exc
        kind = "loader" if source.kind == "loader" else "array"
        key = f"kernelscale-partition-{worker}-{self._token}-{uuid.uuid4().hex[:6]}"
        future = self.client.submit(
            PartitionActor, kind, payload, worker, actor=True, key=key, pure=False, **where
        )
        deadline = time.monotonic() + self.timeout
        while True:  # wait for the actor, watching that its worker is still there
            try:
                actor = future.result(timeout=POLL_SECONDS)
                break
            except Exception:
                if future.status in ("error", "cancelled"):
                    cause = (future.exception(timeout=self.timeout)
                             if future.status == "error" else RuntimeError("cancelled"))
                    future.release()
                    raise WorkerError(
                        worker, "place partition", f"{type(cause).__name__}: {cause}"
                    ) from cause
                if future.done():  # finished just after the poll timed out
                    continue
                if address not in self._live_workers():
                    future.release()
                    raise _WorkerGone(address) from None
                if time.monotonic() > deadline:
                    future.release()
                    raise WorkerError(
                        worker, "place partition", f"TimeoutError: not placed in {self.timeout:g} s"
                    ) from None
        if source.kind == "array":
            payload.release()  # the actor holds the data now
        if self._actor_futures[worker] is not None:
            self._actor_futures[worker].release()
        self._actors[worker], self._actor_futures[worker] = actor, future
        self.addresses[worker] = address

    # -------------------------------------------------------------------- rounds
    def scatter_map(self, step, per_worker_args, round, kind="model", reply_kind="sketch",
                    reduce=None):
        # Same counting as the base class; the kinds are kept for a replay.
        self._kinds = (kind, reply_kind)
        try:
            return super().scatter_map(
                step, per_worker_args, round=round, kind=kind, reply_kind=reply_kind,
                reduce=reduce,
            )
        finally:
            self._kinds = None

    def _run(self, step, per_worker_args, round, deliver):
        if any(actor is None for actor in self._actors):
            raise RuntimeError("This DaskCluster is closed; build a new one.")
        if step is _reset_state:
            self._history.clear()
        workers = list(range(self.n_workers))
        replies, errors, lost = self._call(step, per_worker_args, round, workers)
        recoveries = 0
        while lost and not errors:
            if not self.retry_lost or recoveries + len(lost) > self.max_recoveries:
                worker = min(lost)
                raise WorkerError(worker, round, lost[worker])
            for worker in sorted(lost):
                self._recover(worker)
                recoveries += 1
            retry, errors, lost = self._call(step, per_worker_args, round, sorted(lost), True)
            replies.update(retry)
        if errors:
            worker = min(errors)
            raise WorkerError(worker, round, errors[worker])
        if self.retry_lost:  # what a rebuilt partition replays
            kind, reply_kind = self._kinds or ("model", "sketch")
            self._history.append(_Call(step, per_worker_args, round, kind, reply_kind))
        if step is describe_partition:
            self._data_normalised = True
        for worker in range(self.n_workers):
            deliver(worker, *replies.pop(worker))

    def _call(self, step, per_worker_args, round, workers, recovery=False):
        """Run one round on ``workers``: ({worker: (reply, seconds)}, step errors, lost workers).

        With ``recovery``, the arguments are counted again under phase ``"recovery"``.
        """
        if recovery:
            self._record(round, DOWN, [(w, per_worker_args[w]) for w in workers])
        futures = {}
        lost: dict[int, str] = {}
        for w in workers:
            try:
                futures[w] = self._actors[w].run_timed(step, *per_worker_args[w])
            except Exception as exc:  # the actor proxy refuses calls once its worker is gone
                lost[w] = self._lost_message(w, exc)
        replies: dict[int, Any] = {}
        errors: dict[int, str] = {}
        deadline = time.monotonic() + self.timeout
        pending = dict(futures)
        while pending:
            # One trip to the client's event loop collects every reply that is ready.
            settled = self.client.sync(settle, pending, POLL_SECONDS)
            for worker, (ok, value) in settled.items():
                del pending[worker]
                if ok:
                    replies[worker] = value
                elif self._is_lost(worker, value):
                    lost[worker] = self._lost_message(worker, value)
                else:
                    errors[worker] = f"{type(value).__name__}: {value}"
            if not pending:
                break
            alive = self._live_workers()
            for w in [w for w in pending if self.addresses[w] not in alive]:
                del pending[w]
                lost[w] = self._lost_message(w, None)
            if pending and time.monotonic() > deadline:
                w = min(pending)
                errors[w] = f"TimeoutError: no reply within {self.timeout:g} s"
                break
        return replies, errors, lost

    def _is_lost(self, worker: int, exc: Exception) -> bool:
        """Did the call fail because the worker died (rather than the step)?"""
        address = self.addresses[worker]
        if "Unable to contact Actor's worker" not in str(exc):
            return address not in self._live_workers()
        # A broken connection: lost once the scheduler drops the worker (within seconds).
        deadline = time.monotonic() + 5.0
        while address in self._live_workers():
            if time.monotonic() > deadline:
                return False
            time.sleep(POLL_SECONDS)
        return True

    def _lost_message(self, worker: int, exc) -> str:
        detail = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
        address = self.addresses[worker]
        return f"the Dask worker {address} holding partition {worker} was lost{detail}"

    def _record(self, round, direction, items, kind=None):
        """Count messages of a recovery (never under the current phase)."""
        kinds = self._kinds or ("model", "sketch")
        kind = kind or (kinds[0] if direction == DOWN else kinds[1])
        for w, payload in items:
            for arg in payload if direction == DOWN else (payload,):
                self.ledger.record(round, "recovery", direction, kind, w, arg)

    # ------------------------------------------------------------------ recovery
    def _recover(self, worker: int) -> None:
        """Place partition ``worker`` on a live worker and replay its recorded rounds."""
        self._dead.add(self.addresses[worker])
        alive = [a for a in self._live_workers() if a not in self._dead]
        deadline = time.monotonic() + min(self.timeout, 30.0)
        while not alive and time.monotonic() < deadline:  # a nanny may be restarting one
            time.sleep(POLL_SECONDS)
            alive = [a for a in self._live_workers() if a not in self._dead]
        if not alive:
            raise WorkerError(worker, "recovery", "no live Dask worker left to rebuild on")
        load = {a: sum(addr == a for addr in self.addresses) for a in alive}
        self._place_somewhere(worker, min(sorted(alive), key=load.__getitem__))
        source = self._sources[worker]
        if source.kind == "array":  # the client sends the partition again
            self._record("reload partition", DOWN, [(worker, (source.value,))], "raw_points")
        calls = list(self._history)
        if self._data_normalised and not any(c.step is describe_partition for c in calls):
            calls.insert(0, _Call(describe_partition, [()] * self.n_workers,
                                  "describe partitions", "model", "scalars"))
        for call in calls:
            args = call.per_worker_args[worker]
            self._record(call.round, DOWN, [(worker, args)], call.kind)
            try:
                reply = self._actors[worker].run(call.step, *args).result(timeout=self.timeout)
            except Exception as exc:
                raise WorkerError(
                    worker, call.round, f"replay failed: {type(exc).__name__}: {exc}"
                ) from exc
            self._record(call.round, UP, [(worker, reply)], call.reply_kind)

    # ------------------------------------------------------------------- cleanup
    def close(self) -> None:
        """Release the actors (the client stays open: it belongs to the caller)."""
        for future in self._actor_futures:
            if future is not None:
                try:
                    future.release()
                except Exception:  # the client may already be closed
                    pass
        self._actors = [None] * self.n_workers
        self._actor_futures = [None] * self.n_workers
        self._history.clear()


__all__ = ["DaskCluster", "PartitionActor"]
