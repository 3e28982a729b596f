"""What every Flower cluster shares: rounds as Messages to SuperNodes, whoever carries them.

:class:`FlowerRounds` is a :class:`~kernelscale.runtime.Cluster` whose workers
are Flower SuperNodes. It builds each round's Messages (the registered step's
name and its arguments as data), finds which node holds which partition
(``hello``), reads the replies, reports lost nodes to the runtime's policy
(``lost="error"`` or ``"drop"``) and runs the summed rounds that should be
secure through SecAgg+. How the Messages reach the Grid is left to a subclass,
three methods:

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

from kernelscale.backends.flower.operator_settings import ROSTER_ENV
from kernelscale.runtime.cluster import Cluster, WorkerError
from kernelscale.runtime.ledger import DOWN, UP, Message
from kernelscale.runtime.lost import LOST_POLICIES, scale_reply
from kernelscale.runtime.steps import step_name

#: Seconds the hello waits at least for the nodes that had not answered once every
#: partition has a node (a second claim on a partition must not go unseen).
HELLO_GRACE_SECONDS = 2.0
WAITING_SAY_SECONDS = 10.0  # how often a run waiting for its nodes says which are missing


class FlowerRounds(Cluster):
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
    def find_nodes(self, timeout: float = 180.0) -> None:
        """Find again which SuperNode holds which partition (``node_ids``).

        A SuperNode started again after it stopped or was killed gets a new node id
        from the SuperLink, so the rounds of this cluster no longer reach it; call
        this before the next fit.

        Parameters
        ----------
        timeout : float, default=180
            Seconds to wait until a node holds every partition (a node started
            again may still be connecting); then ``TimeoutError`` (too few nodes)
            or ``ValueError`` naming the partitions that no node holds.
        """
        self._find_nodes(time.monotonic() + float(timeout))

    def _find_nodes(self, deadline: float) -> None:
        """Map partition ids to node ids (``node_ids``): the operator's roster, else the
        nodes' own claims (hello); two nodes claiming one partition refuse the run.

        With a roster (``self.roster``, ``{partition: node}``) the rostered nodes of
        partitions 0 to ``n_workers - 1`` are asked first, once all of them are
        connected, and each must say it holds its rostered partition; only they are
        used. Without one, the first nodes to answer for every partition are. Either
        way the other connected nodes (a node killed recently is still listed until its
        heartbeat is overdue, and answers nothing) then get a short hello (twice as long
        as the first took, at least :data:`HELLO_GRACE_SECONDS`): one that claims a
        partition of the run, beside the node that holds it, refuses the run naming both,
        never silently replaces it.
        """
        wanted = self._rostered_nodes()
        listed = self._wait_for_nodes(deadline, wanted)
        hello = self._records({"op": "hello", "data-key": _wire_key(self.data_key)})
        nodes = sorted(wanted.values()) if wanted is not None else listed
        start = time.monotonic()
        events = self._round("hello", [(n, hello) for n in nodes],
                             max(1.0, deadline - time.monotonic()),
                             need=len(nodes) if wanted is not None else self.n_workers,
                             joined=None if wanted is not None else nodes)
        claims = self._claims(nodes, events)
        others = [n for n in (listed if wanted is not None else nodes) if n not in claims
                  and (wanted is None or n not in wanted.values())]
        if others:  # as long as twice the first hello took: a slow machine is slow for all
            grace = max(HELLO_GRACE_SECONDS, 2.0 * (time.monotonic() - start))
            late = self._round("hello", [(n, hello) for n in others],
                               min(grace, max(0.1, deadline - time.monotonic())))
            claims.update(self._claims(others, late, strict=wanted is None))
        self.node_ids, self.node_policies = self._assign(claims, wanted)

    def _rostered_nodes(self) -> dict | None:
        """``{partition: node}`` of the roster for partitions 0..n_workers-1 (None: no roster)."""
        if self.roster is None:
            return None
        missing = [p for p in range(self.n_workers) if p not in self.roster]
        if missing:
            raise ValueError(f"{self.roster.source} binds no node to partition(s) {missing}; "
                             f"this run needs partitions 0 to {self.n_workers - 1}.")
        return {p: int(self.roster[p]) for p in range(self.n_workers)}

    def _wait_for_nodes(self, deadline: float, wanted: dict | None) -> list[int]:
        """The listed nodes, once ``n_workers`` of them (the rostered ones) are connected;
        says every 10 s which are missing."""
        next_say = time.monotonic() + WAITING_SAY_SECONDS
        while True:
            nodes = sorted(self._list_nodes())
            if wanted is None:
                if len(nodes) >= self.n_workers:
                    return nodes
                missing = f"{self.n_workers - len(nodes)} more"
            else:
                absent = {p: n for p, n in wanted.items() if n not in nodes}
                if not absent:
                    return nodes
                missing = ", ".join(f"node {n} (partition {p})" for p, n in absent.items())
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Only {len(nodes)} SuperNodes are connected to {self.where} and this run "
                    f"needs {missing}: is every party's node running, with its key "
                    "registered (flwr supernode register)? start-timeout sets this wait.")
            if time.monotonic() > next_say:
                self.say(f"kernelscale: waiting for SuperNodes: {missing} "
                         f"({max(0.0, deadline - time.monotonic()):.0f} s left)")
                next_say = time.monotonic() + WAITING_SAY_SECONDS
            time.sleep(0.2)

    @staticmethod
    def _claims(nodes: list[int], events: dict, strict: bool = True) -> dict:
        """``{node: (partition id, policy)}`` of the nodes that answered the hello; a node
        that answered with an error fails the run (``strict``) or is left out."""
        claims = {}
        for index, (event, content) in sorted(events.items()):
            failed = (content if event == "error" else content["kernelscale"].get("error")
                      if event == "reply" else None)
            if failed is not None:
                if strict:
                    raise RuntimeError(f"SuperNode {nodes[index]} did not say hello: {failed}")
                continue
            if event == "reply":
                header = content["kernelscale"]
                claims[nodes[index]] = (int(header["partition-id"]),
                                        str(header.get("policy", "")))
        return claims

    def _assign(self, claims: dict, wanted: dict | None) -> tuple[list[int], list[str]]:
        """Node ids and policies of partitions 0..n_workers-1 from the nodes' claims."""
        if wanted is not None:
            for partition, node in wanted.items():
                if node in claims and claims[node][0] != partition:
                    raise ValueError(
                        f"SuperNode {node} holds partition-id {claims[node][0]} in its node "
                        f"config, but {self.roster.source} binds it to partition {partition}; "
                        "the operator's roster and the party's node config must agree.")
        by_partition: dict[int, list[int]] = {}
        for node, (partition, _) in sorted(claims.items(), key=lambda c: (
                wanted is None or c[0] not in wanted.values(), c[0])):
            if partition < self.n_workers:  # the rostered node first, then any other
                by_partition.setdefault(partition, []).append(node)
        doubled = {p: n for p, n in by_partition.items() if len(n) > 1}
        if doubled:
            partition, both = min(doubled.items())
            how = (f"{self.roster.source} binds partition {partition} to node {both[0]}; "
                   "the operator unregisters the other (flwr supernode unregister) or stops it"
                   if wanted is not None else
                   f"the operator binds each node to its partition with a roster ({ROSTER_ENV}, "
                   "docs/flower.md), or stops the node that should not be there")
            raise ValueError(
                f"SuperNodes {' and '.join(map(str, both))} both claim partition-id "
                f"{partition}: the run is refused before any round, since either could hold "
                f"another party's rows; {how}.")
        missing = [i for i in range(self.n_workers) if i not in by_partition]
        if missing:
            raise ValueError(
                f"No SuperNode holds partition(s) {missing}; the nodes hold "
                f"{sorted(by_partition)}. Start each node with --node-config "
                f"'partition-id=<i> {_wire_key(self.data_key)}=\"<file>\"'.")
        nodes = [by_partition[i][0] for i in range(self.n_workers)]
        return nodes, [claims[n][1] for n in nodes]

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
             "data-key": _wire_key(self.data_key), "reply-kind": self._reply_kind},
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
             "data-key": _wire_key(self.data_key), "secure-range": self.secure_range},
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


def check_data_key(value):
    """A node-config key (str), or a tuple of them (files stacked row-wise on the node)."""
    if isinstance(value, str) and value:
        return value
    if (isinstance(value, (tuple, list)) and value
            and all(isinstance(k, str) and k for k in value)):
        return tuple(value) if len(value) > 1 else value[0]
    raise ValueError(f"data_key must be a node-config key (a non-empty str) or a tuple of "
                     f"them, not {value!r}.")


def _wire_key(data_key):
    """The data key as a message header holds it (a list for several keys)."""
    return list(data_key) if isinstance(data_key, tuple) else data_key


def _silent(text: str) -> None:
    return None


__all__ = ["FlowerRounds", "HELLO_GRACE_SECONDS", "check_data_key", "round_half"]
