"""What every Flower cluster shares: rounds as Messages to SuperNodes, whoever carries them.

:class:`FlowerRounds` is a :class:`~kernelscale.runtime.Cluster` whose workers
are Flower SuperNodes. It builds each round's Messages (the registered step's
name and its arguments as data), finds which node holds which partition
(:mod:`~kernelscale.backends.flower.hello`: the roster, the hello), reads the
replies, reports lost nodes to the runtime's policy (``lost="error"`` or
``"drop"``) and runs the summed rounds that should be secure through SecAgg+.
How the Messages reach the Grid is left to a subclass, three methods:

* ``_list_nodes()``: the node ids the Grid lists now;
* ``_round(round, messages, timeout, need, joined)``: push one Message per node,
  return ``{index: ("reply", RecordDict) | ("lost" | "error", reason)}``;
* ``_secure_sum(header, blobs)``: one SecAgg+ round,
  ``(header, sums, {node: masked arrays})``
  (:func:`~kernelscale.backends.flower.secagg.grid_secure_sum`).

:class:`~kernelscale.backends.flower.grid.GridCluster` calls the Grid itself,
inside a ServerApp (the fitting app of ``flwr run``);
:class:`~kernelscale.backends.flower.cluster.FlowerCluster` drives the rounds
from a Python process on the SuperLink's machine through a relay ServerApp.
Nothing here imports Flower until a round runs.
"""

from __future__ import annotations

import time

import numpy as np

from kernelscale.backends.flower.hello import PartitionNodes, check_data_key, wire_key
from kernelscale.runtime.cluster import Cluster, WorkerError
from kernelscale.runtime.ledger import DOWN, UP, Message
from kernelscale.runtime.lost import LOST_POLICIES, scale_reply
from kernelscale.runtime.steps import step_name


class FlowerRounds(PartitionNodes, Cluster):
    """The rounds of a cluster of SuperNodes (see the module docstring); abstract transport.

    Parameters are those of :class:`~kernelscale.backends.flower.cluster.FlowerCluster`
    that concern the rounds: ``n_workers``, ``data_key``, ``timeout``, ``lost`` and
    the ``secure_*`` options; and ``roster``, the operator's
    :class:`~kernelscale.backends.flower.operator_settings.Roster` (None: the nodes'
    own claims), and ``say``, a function that takes a line of progress while the
    cluster waits for its nodes.
    """

    show_progress = True
    where = "the SuperLink"  # how errors name the federation

    def __init__(self, n_workers: int, *, data_key: str = "partition-path",
                 timeout: float = 600.0, lost: str = "error", secure_rounds=None,
                 secure_range: float = 1e4, secure_levels: int = 2**24,
                 secure_threshold: float = 2 / 3, roster=None, say=None):
        if lost not in LOST_POLICIES:
            raise ValueError(f"lost must be one of {LOST_POLICIES}, got {lost!r}.")
        if not timeout > 0:
            raise ValueError("timeout must be a positive number of seconds.")
        if secure_rounds is not None and not 2**32 // int(secure_levels) >= n_workers:
            raise ValueError(f"secure_levels={secure_levels} leaves room for fewer than "
                             f"{n_workers} clients in SecAgg+'s 2**32 modulus.")
        if secure_rounds is not None and n_workers < 2:
            raise ValueError("A secure sum needs at least two clients.")
        super().__init__(n_workers)
        self.secure_rounds = (secure_rounds if secure_rounds in (None, "all")
                              else frozenset(secure_rounds))
        self.secure_range, self.secure_levels = float(secure_range), int(secure_levels)
        self.secure_threshold = float(secure_threshold)
        self.secure_views: dict = {}
        self.data_key = data_key
        self.timeout, self.lost = float(timeout), lost
        self.node_ids: list[int] = []
        self.node_policies: list[str] = []
        self.roster = roster
        self.say = _silent if say is None else say
        self._epoch = 0
        self._reduce = None
        self._reply_kind = "sketch"

    @property
    def data_key(self):
        """The node-config key of the data the steps run on: one key, or a tuple of keys
        whose files each node stacks row-wise."""
        return self._data_key

    @data_key.setter
    def data_key(self, value) -> None:
        self._data_key = check_data_key(value)

    # ------------------------------------------------------------------ transport
    def _list_nodes(self) -> list[int]:
        raise NotImplementedError

    def _round(self, round: str, messages: list, timeout: float, need: int = 0,
               joined: list | None = None) -> dict:
        raise NotImplementedError

    def _secure_sum(self, header: dict, blobs: list[bytes]):
        raise NotImplementedError

    # ------------------------------------------------------------------ nodes
    @staticmethod
    def _records(header: dict, args=None):
        from flwr.app import ConfigRecord, RecordDict

        from kernelscale.backends.flower.wire import HEADER, put_payload

        content = RecordDict({HEADER: ConfigRecord(header)})
        if args is not None:
            put_payload(content, "args", args)
        return content

    # ------------------------------------------------------------------ rounds
    def is_secure(self, round: str) -> bool:
        """Does the summed round ``round`` go through SecAgg+?"""
        return self.secure_rounds == "all" or (
            self.secure_rounds is not None and round in self.secure_rounds)

    def scatter_map(self, step, per_worker_args, round, kind="model", reply_kind="sketch",
                    reduce=None):
        if reduce == "sum" and self.is_secure(round):
            return self._secure_round(step, per_worker_args, round, kind)
        self._reduce, self._reply_kind = reduce, reply_kind
        try:
            return super().scatter_map(step, per_worker_args, round=round, kind=kind,
                                       reply_kind=reply_kind, reduce=reduce)
        finally:
            self._reduce, self._reply_kind = None, "sketch"

    def worker_name(self, worker: int) -> str:
        return f"node {self.node_ids[worker]}"

    def worker_host(self, worker: int) -> str:
        return f"Flower node {self.node_ids[worker]}"

    def reset(self) -> None:
        """Start a new protocol run on every node: the next message drops the old state."""
        self._epoch += 1
        self._start_protocol_run()
        self._idle_since = time.perf_counter()

    def _run(self, step, per_worker_args, round, deliver):
        from kernelscale.backends.flower.wire import get_payload

        name = step_name(step)  # refuses anything that is not a registered step
        live = [w for w in range(self.n_workers) if w not in self.lost_workers]
        messages = [(self.node_ids[w], self._records(
            {"op": "step", "step": name, "round": round, "epoch": self._epoch, "worker": w,
             "data-key": wire_key(self.data_key), "reply-kind": self._reply_kind},
            per_worker_args[w])) for w in live]
        events = self._round(round, messages, self.timeout)
        failures: dict[int, str] = {}
        lost: dict[int, str] = {}
        replies: dict[int, tuple] = {}
        for index, (event, value) in events.items():
            worker = live[index]
            if event == "reply" and "error" in value["kernelscale"]:
                failures[worker] = str(value["kernelscale"]["error"])
            elif event == "reply":
                reply = get_payload(value, "reply")
                replies[worker] = (reply, float(value["kernelscale"]["seconds"]))
            elif event == "error":
                failures[worker] = value
            else:
                lost[worker] = value
        if failures:
            worker = min(failures)
            raise WorkerError(worker, round, f"node {self.node_ids[worker]}: {failures[worker]}")
        self.settle_lost(lost, round)
        for worker in range(self.n_workers):
            reply, seconds = replies.get(worker, (None, 0.0))
            deliver(worker, reply, seconds)

    def _secure_round(self, step, per_worker_args, round, kind):
        """A summed round through SecAgg+: counts, times and returns only the sum."""
        from kernelscale.backends.flower.wire import to_bytes
        from kernelscale.runtime import codec

        name = step_name(step)
        if len(per_worker_args) != self.n_workers:
            raise ValueError(f"scatter_map got {len(per_worker_args)} argument tuples "
                             f"for {self.n_workers} workers.")
        live = [w for w in range(self.n_workers) if w not in self.lost_workers]
        if self.lost_workers and not self.tolerates_lost:
            worker = min(self.lost_workers)
            raise WorkerError(worker, round, f"node {self.node_ids[worker]} was lost earlier "
                              f"in the fit{self._no_drop_here()}")
        if len(live) < 2:
            worker = min(self.lost_workers)
            raise WorkerError(worker, round, f"a secure sum needs at least two clients and "
                              f"only {len(live)} is left: node {self.node_ids[worker]} was lost "
                              "earlier in the fit")
        start = time.perf_counter()
        master_seconds = start - self._idle_since
        for worker in live:
            for arg in per_worker_args[worker]:
                self.ledger.record(round, self._phase, DOWN, kind, worker, arg)
        contents = [self._records(
            {"op": "step", "step": name, "round": round, "epoch": self._epoch, "worker": w,
             "data-key": wire_key(self.data_key), "secure-range": self.secure_range},
            tuple(per_worker_args[w])) for w in live]
        threshold = max(2, round_half(self.secure_threshold * len(live)))
        header = {"op": "secure_sum", "round": round, "timeout": self.timeout,
                  "secure_range": self.secure_range, "secure_levels": self.secure_levels,
                  "threshold": threshold,
                  "messages": [[int(self.node_ids[w]), "train"] for w in live]}
        worker_of = {node: w for w, node in enumerate(self.node_ids)}
        try:
            reply, sums, masked = self._secure_sum(header, [to_bytes(c) for c in contents])
        finally:
            self._idle_since = time.perf_counter()
        view = {worker_of[int(node)]: arrays for node, arrays in sorted(masked.items())}
        self.secure_views[round] = view
        lost = {worker_of[int(n)]: f"at SecAgg+ stage '{stage}': {why}"
                for n, (stage, why) in reply["lost"].items()}
        errors = {worker_of[int(n)]: f"at SecAgg+ stage '{stage}': {why}"
                  for n, (stage, why) in reply["errors"].items()}
        if lost and (self.lost == "error" or not self.tolerates_lost
                     or reply["tree"] is None or errors):
            worker = min(lost)
            left = len(live) - len(lost)
            why = ""
            if left < threshold:
                why = (f"; SecAgg+ cannot finish without it: its reconstruction threshold "
                       f"needs {threshold} of the {len(live)} clients and {left} are left")
            elif not self.tolerates_lost:
                why = self._no_drop_here()
            elif errors:
                other = min(errors)
                why = f"; then node {self.node_ids[other]} failed {errors[other]}"
            raise WorkerError(worker, round, f"the secure sum failed: node "
                              f"{self.node_ids[worker]} was lost {lost[worker]}{why}")
        if errors:
            worker = min(errors)
            raise WorkerError(worker, round, f"the secure sum failed: node "
                              f"{self.node_ids[worker]} failed {errors[worker]}")
        answered = {worker_of[int(n)] for n in reply["answered"]}
        if reply["tree"] is None or not answered:
            missing = sorted(set(live) - answered) or live
            raise WorkerError(missing[0], round, "the secure sum failed: node "
                              f"{self.node_ids[missing[0]]} did not complete SecAgg+ "
                              f"({'; '.join(reply['failures']) or 'no reply'})")
        for worker in sorted(lost):
            self.drop_worker(worker, round, lost[worker])
        for stage, node, direction, kind_, words, nbytes in reply["transcript"]:
            # the masked uploads under the round, SecAgg+'s own messages under its stages
            name = round if kind_ == "secure_sum" else f"{round} (SecAgg+ {stage})"
            if words:
                self.ledger.extend([Message(
                    name, self._phase, DOWN if direction == "down" else UP, kind_,
                    worker_of[int(node)], int(words), int(nbytes))])
        seconds = self._idle_since - start
        worker_seconds = [reply["seconds"].get(str(n), 0.0) for n in self.node_ids]
        self.ledger.record_time(round, self._phase, master_seconds, seconds, worker_seconds)
        for listener in self._listeners:
            listener(round, self._phase, seconds)
        total = codec.decode(reply["tree"], sums)
        if len(answered) < self.n_workers:  # a ratio estimate, as in the clear rounds
            total = scale_reply(total, self.rescale_factor(answered))
        return total


def round_half(x: float) -> int:
    return int(np.floor(x + 0.5))


def _silent(text: str) -> None:
    return None


__all__ = ["FlowerRounds", "round_half"]
