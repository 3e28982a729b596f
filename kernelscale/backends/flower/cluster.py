"""The Flower backend: every worker is a SuperNode, every round goes through a ServerApp's Grid.

:class:`FlowerCluster` implements the runtime's ``_run`` over Flower's Message
API, so the unchanged master functions (``diskpca``, ``fk_kmeans``,
``distributed_spectral_clustering``, ``one_shot_kpca``...) run on real
``flower-superlink`` / ``flower-supernode`` processes::

    with FlowerCluster("127.0.0.1:9093", n_workers=3) as cluster:
        result = fk_kmeans(cluster, 3, random_state=0)
    print(cluster.ledger.summary())

How a round travels. Opening a FlowerCluster submits a run (``flwr run``) of the
app of :mod:`kernelscale.backends.flower.app`. Its ServerApp connects back to this
process (an authenticated local socket, the key in a file only this user can
read) and relays each round: one ``query.kernelscale`` Message per SuperNode with
the step's *name* and its arguments as data, sent with the Grid's
``push_messages`` and collected with ``pull_messages`` as the replies come. The
master function itself runs here, so its result and its ledger are ordinary
Python objects; the ledger is the same as in-process for the same
``random_state``.

Which node is which worker. Each SuperNode names its partition in its node
config (``partition-id=0 partition-path="/data/p0.npy"``); worker ``i`` is the
node with ``partition-id=i``. A first ``hello`` message (one word per node, not
in the ledger) finds them.

Lost nodes. A SuperNode that stops (SIGTERM) leaves the federation at once; one
that is killed is reported by the SuperLink when its heartbeat is overdue (up to
about a minute with Flower's 30 s heartbeat), or by the round's ``timeout``,
whichever comes first. With ``lost="error"`` (the default) the round raises one
:class:`~kernelscale.runtime.WorkerError` naming the worker, its node and the
round. With ``lost="drop"`` the node is dropped for the rest of the fit as the
estimators' ``dropout=`` drops a client, inside the rounds of a protocol that
says it can go on without one (:meth:`~kernelscale.runtime.Cluster.tolerating_lost`:
FK and RFK k-means, the horizontal kernel PCAs, the spectral clustering): a
:class:`~kernelscale.runtime.LostWorkerWarning` names it and the round, it
answers ``None`` from then on, and a summed round (``reduce="sum"``, in the
clear or through SecAgg+) is rescaled by ``N / N_answered`` (rows of all
partitions over rows of those that answered, known from the validation round),
the ratio estimate of a sum over rows. The policy itself is the runtime's
(:mod:`kernelscale.runtime.lost`); this backend reports the lost nodes. A node
lost in any other round (the validation, the vertical KPCA) raises.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Listener
from pathlib import Path

import numpy as np

from kernelscale.runtime.cluster import Cluster, WorkerError
from kernelscale.runtime.ledger import DOWN, UP, Message
from kernelscale.runtime.lost import LOST_POLICIES, scale_reply
from kernelscale.runtime.steps import step_name

APP_TOML = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "kernelscale-flower"
version = "{version}"
description = "kernelscale protocols on Flower: a relay ServerApp and the worker ClientApp"
license = "BSD-3-Clause"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "kernelscale"

[tool.flwr.app.components]
serverapp = "kernelscale.backends.flower.app:server_app"
clientapp = "kernelscale.backends.flower.app:client_app"

[tool.flwr.app.config]
kernelscale-relay = ""
kernelscale-key-file = ""
"""


def flower_env(home: str | os.PathLike | None = None) -> dict:
    """Environment for Flower's commands: no telemetry, no update checks, ``FLWR_HOME``."""
    env = dict(os.environ, FLWR_TELEMETRY_ENABLED="0", FLWR_DISABLE_UPDATE_CHECK="1",
               PYTHONUNBUFFERED="1")
    if home is not None:
        env["FLWR_HOME"] = str(home)
    return env


class FlowerCluster(Cluster):
    """A :class:`~kernelscale.runtime.Cluster` whose workers are Flower SuperNodes.

    Parameters
    ----------
    superlink : str
        ``host:port`` of the SuperLink (its ``--port``; Fleet, Control and
        ServerApp APIs share it in flwr 1.41).
    n_workers : int
        Number of partitions; the SuperNodes must carry ``partition-id`` 0 to
        ``n_workers - 1`` in their node config.
    data_key : str, default="partition-path"
        The node-config key holding the file of the node's partition (read with
        ``kernelscale.datasets.load`` on the node). A node may hold several
        data sets under different keys (e.g. a vertical block).
    timeout : float, default=600
        Seconds a round may take before the nodes that did not answer are lost.
    lost : {"error", "drop"}, default="error"
        What a lost node does to the fit (see the module docstring).
    start_timeout : float, default=180
        Seconds to wait for the run to start and the nodes to connect.
    relay_host : str, default="127.0.0.1"
        Address of this process as seen from the SuperLink's machine (its
        ServerApp connects back to it).
    insecure : bool, default=True
        Talk to the SuperLink without TLS (Flower's ``insecure = true``).
    secure_rounds : None, "all" or iterable of str, default=None
        Summed rounds (``reduce="sum"``) to run through Flower's SecAgg+ so that
        the server learns only the sum: ``"all"`` of them, or those named. Their
        sums are approximate (see :mod:`kernelscale.backends.flower.secagg`) and
        their uploads are counted under the kinds ``secure_sum`` and ``secagg``.
    secure_range : float, default=1e4
        Every number of a secure reply must lie in ``[-secure_range, secure_range]``
        (a client whose reply does not fails the round).
    secure_levels : int, default=2**24
        Quantisation levels over that range: the sum is off by at most
        ``2 secure_range / secure_levels`` per client and entry. At most
        ``2**32 / secure_levels`` clients.
    secure_threshold : float, default=2/3
        SecAgg+'s reconstruction threshold, as a fraction of the clients.

    Attributes
    ----------
    node_ids : list of int
        The Flower node id of every worker.
    lost_workers : set of int
        Workers dropped with ``lost="drop"``.
    startup_seconds : float
        From ``flwr run`` to knowing every node.
    secure_views : dict
        ``{round: {worker: [masked arrays]}}`` of the last secure round of each
        name: what the server received (for checks that nothing is readable).
    show_progress : bool
        True: a round takes a message through the SuperLink and back, so the
        estimators show a progress bar in an interactive terminal even at
        ``verbose=0`` (:mod:`kernelscale.progress`).
    """

    show_progress = True

    def __init__(self, superlink: str, n_workers: int, *, data_key: str = "partition-path",
                 timeout: float = 600.0, lost: str = "error", start_timeout: float = 180.0,
                 relay_host: str = "127.0.0.1", insecure: bool = True,
                 secure_rounds=None, secure_range: float = 1e4, secure_levels: int = 2**24,
                 secure_threshold: float = 2 / 3):
        if lost not in LOST_POLICIES:
            raise ValueError(f"lost must be one of {LOST_POLICIES}, got {lost!r}.")
        if not timeout > 0 or not start_timeout > 0:
            raise ValueError("timeout and start_timeout must be positive numbers of seconds.")
        if importlib.util.find_spec("flwr") is None:
            raise ImportError("backend='flower' needs Flower: pip install 'kernelscale[flower]'.")
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
        self.superlink, self.data_key = str(superlink), str(data_key)
        self.timeout, self.lost = float(timeout), lost
        self.node_ids: list[int] = []
        self._epoch = 0
        self._reduce = None
        self._connection = None
        self._run_process: subprocess.Popen | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="kernelscale-flower-"))
        try:
            self._start(start_timeout, relay_host, insecure)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ start-up
    def _start(self, start_timeout: float, relay_host: str, insecure: bool) -> None:
        import kernelscale

        start = time.perf_counter()
        key = secrets.token_bytes(32)
        key_file = self._workdir / "relay.key"
        key_file.touch(mode=0o600)
        key_file.write_bytes(key)
        listener = Listener((relay_host, 0), authkey=key)
        app = self._workdir / "app"
        app.mkdir()
        (app / "pyproject.toml").write_text(APP_TOML.format(version=kernelscale.__version__))
        home = self._workdir / "flwr_home"
        home.mkdir()
        (home / "config.toml").write_text(
            '[superlink]\ndefault = "kernelscale"\n\n[superlink.kernelscale]\n'
            f'address = "{self.superlink}"\ninsecure = {str(bool(insecure)).lower()}\n')
        host, port = listener.address
        overrides = (f'kernelscale-relay="{host}:{port}" '
                     f'kernelscale-key-file="{key_file}"')
        accepted: dict = {}

        def accept():
            try:
                accepted["connection"] = listener.accept()
            except Exception as exc:  # closed on timeout, or a failed handshake
                accepted["error"] = exc

        waiter = threading.Thread(target=accept, daemon=True)
        waiter.start()
        log = open(self._workdir / "flwr-run.log", "wb")
        self._run_process = subprocess.Popen(
            [_flwr(), "run", str(app), "kernelscale", "--run-config", overrides],
            env=flower_env(home), stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + start_timeout
        try:
            while waiter.is_alive() and time.monotonic() < deadline:
                code = self._run_process.poll()
                if code not in (None, 0):
                    raise RuntimeError(f"`flwr run` failed (exit {code}):\n{self._run_log()}")
                waiter.join(0.05)
        finally:
            listener.close()
        if "connection" not in accepted:
            raise TimeoutError(
                f"The kernelscale ServerApp did not connect within {start_timeout:g} s "
                f"(is a SuperLink listening on {self.superlink}?).\n{self._run_log()}")
        self._connection = accepted["connection"]
        self._find_nodes(deadline)
        self.startup_seconds = time.perf_counter() - start

    def _run_log(self) -> str:
        path = self._workdir / "flwr-run.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def _find_nodes(self, deadline: float) -> None:
        """Wait for ``n_workers`` SuperNodes, then map partition ids to node ids (hello).

        A node killed recently is still listed until its heartbeat is overdue, so
        the hello ends as soon as ``n_workers`` nodes answered, and goes also to the
        nodes that join while it waits (a node started again).
        """
        while True:
            nodes = sorted(self._request({"op": "nodes"})["nodes"])
            if len(nodes) >= self.n_workers:
                break
            if time.monotonic() > deadline:
                raise TimeoutError(f"Only {len(nodes)} of {self.n_workers} SuperNodes connected "
                                   f"to {self.superlink}.")
            time.sleep(0.2)
        hello = self._records({"op": "hello", "data-key": self.data_key})
        events = self._round("hello", [(n, hello) for n in nodes],
                             max(1.0, deadline - time.monotonic()), need=self.n_workers,
                             joined=nodes)
        by_partition: dict[int, int] = {}
        for index, (event, content) in events.items():
            if event == "reply" and "error" in content["kernelscale"]:
                raise RuntimeError(f"SuperNode {nodes[index]} did not say hello: "
                                   f"{content['kernelscale']['error']}")
            if event == "reply":
                by_partition[int(content["kernelscale"]["partition-id"])] = nodes[index]
        missing = [i for i in range(self.n_workers) if i not in by_partition]
        if missing:
            raise ValueError(
                f"No SuperNode holds partition(s) {missing}; the nodes hold "
                f"{sorted(by_partition)}. Start each node with --node-config "
                f"'partition-id=<i> {self.data_key}=\"<file>\"'.")
        self.node_ids = [by_partition[i] for i in range(self.n_workers)]

    # ------------------------------------------------------------------ relay I/O
    def _request(self, header: dict, blobs=()) -> dict:
        self._check_open()
        self._connection.send_bytes(json.dumps(header).encode())
        for blob in blobs:
            self._connection.send_bytes(blob)
        return self._receive()

    def _receive(self) -> dict:
        try:
            if not self._connection.poll(self.timeout + 120.0):
                raise TimeoutError("The kernelscale ServerApp stopped answering.")
            reply = json.loads(self._connection.recv_bytes())
        except (EOFError, OSError) as exc:
            raise RuntimeError("The kernelscale ServerApp closed the connection (did the "
                               f"Flower run stop?).\n{self._run_log()}") from exc
        if reply.get("event") == "failed":
            raise RuntimeError(f"The kernelscale ServerApp failed: {reply['reason']}")
        return reply

    def _check_open(self) -> None:
        if self._connection is None:
            raise RuntimeError("This FlowerCluster is closed; open a new one.")

    @staticmethod
    def _records(header: dict, args=None):
        from flwr.app import ConfigRecord, RecordDict

        from kernelscale.backends.flower.wire import HEADER, put_payload

        content = RecordDict({HEADER: ConfigRecord(header)})
        if args is not None:
            put_payload(content, "args", args)
        return content

    def _round(self, round: str, messages: list, timeout: float, need: int = 0,
               joined: list | None = None) -> dict:
        """Relay one round: ``{index: ("reply", RecordDict) | ("lost"|"error", reason)}``.

        With ``joined`` (the list of the messages' nodes) the relay also sends the
        first message to nodes that join during the round, appended to ``joined``.
        """
        from kernelscale.backends.flower.wire import QUERY, from_bytes, to_bytes

        header = {"op": "round", "round": round, "timeout": timeout, "need": need,
                  "grow": joined is not None,
                  "messages": [[int(node), QUERY] for node, _ in messages]}
        self._check_open()
        self._connection.send_bytes(json.dumps(header).encode())
        for _, content in messages:
            self._connection.send_bytes(to_bytes(content))
        events: dict = {}
        while True:
            event = self._receive()
            kind = event["event"]
            if kind == "done":
                for index in event["missing"]:
                    events[index] = ("lost", f"no reply within the round timeout ({timeout:g} s)")
                return events
            if kind == "joined":
                joined.append(int(event["node"]))
            elif kind == "reply":
                events[event["index"]] = ("reply", from_bytes(self._connection.recv_bytes()))
            else:
                events[event["index"]] = (kind, event["reason"])

    # ------------------------------------------------------------------ rounds
    def is_secure(self, round: str) -> bool:
        """Does the summed round ``round`` go through SecAgg+?"""
        return self.secure_rounds == "all" or (
            self.secure_rounds is not None and round in self.secure_rounds)

    def scatter_map(self, step, per_worker_args, round, kind="model", reply_kind="sketch",
                    reduce=None):
        if reduce == "sum" and self.is_secure(round):
            return self._secure_round(step, per_worker_args, round, kind)
        self._reduce = reduce
        try:
            return super().scatter_map(step, per_worker_args, round=round, kind=kind,
                                       reply_kind=reply_kind, reduce=reduce)
        finally:
            self._reduce = None

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
             "data-key": self.data_key}, per_worker_args[w])) for w in live]
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
        from kernelscale.backends.flower.wire import from_npy, to_bytes
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
             "data-key": self.data_key, "secure-range": self.secure_range},
            tuple(per_worker_args[w])) for w in live]
        threshold = max(2, round_half(self.secure_threshold * len(live)))
        header = {"op": "secure_sum", "round": round, "timeout": self.timeout,
                  "secure_range": self.secure_range, "secure_levels": self.secure_levels,
                  "threshold": threshold,
                  "messages": [[int(self.node_ids[w]), "train"] for w in live]}
        try:
            reply = self._request(header, [to_bytes(c) for c in contents])
            worker_of = {node: w for w, node in enumerate(self.node_ids)}
            sums = [from_npy(self._connection.recv_bytes()) for _ in range(reply["n_sum"])]
            view = {}
            for node in sorted(int(n) for n in reply["masked"]):
                view[worker_of[node]] = [from_npy(self._connection.recv_bytes())
                                         for _ in range(reply["masked"][str(node)])]
        finally:
            self._idle_since = time.perf_counter()
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

    # ------------------------------------------------------------------ shutdown
    def close(self) -> None:
        """End the Flower run (the ServerApp returns) and remove the temporary files."""
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.send_bytes(json.dumps({"op": "close"}).encode())
            except OSError:
                pass
            connection.close()
        process, self._run_process = self._run_process, None
        if process is not None and process.poll() is None:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(self._workdir, ignore_errors=True)


def flower_cluster(data, client, data_key: str | None = None, timeout: float = 600.0):
    """A FlowerCluster on the SuperLink ``client`` with ``data`` SuperNodes (``make_cluster``).

    ``client`` may be a ready :class:`Cluster` (e.g. ``FlowerCluster(superlink,
    n_workers=3, secure_rounds="all", lost="drop")``): it is used as it is (its
    workers, ``timeout``, ``lost`` and secure rounds), ``data_key`` (``fit("key")``)
    set on it.
    """
    if isinstance(client, Cluster):
        if data_key is not None:
            if not hasattr(client, "data_key"):
                raise TypeError(
                    f"fit({data_key!r}) names the node-config key of the SuperNodes' "
                    f"partition files; the {type(client).__name__} given as client holds "
                    "its partitions: fit(None).")
            client.data_key = str(data_key)
        return client
    if not isinstance(client, str) or not client:
        raise ValueError("backend='flower' needs client='host:port' of the Flower SuperLink.")
    if isinstance(data, bool) or not isinstance(data, (int, np.integer)) or data < 1:
        raise TypeError(
            "With backend='flower' the partitions are on the SuperNodes (each reads the file "
            "named in its node config): give their number as data, not "
            f"{type(data).__name__}.")
    return FlowerCluster(client, int(data), data_key=data_key or "partition-path",
                         timeout=timeout)


def round_half(x: float) -> int:
    return int(np.floor(x + 0.5))


def _flwr() -> str:
    """The ``flwr`` command beside this Python, else on PATH."""
    candidate = Path(sys.executable).parent / "flwr"
    return str(candidate) if candidate.exists() else (shutil.which("flwr") or "flwr")


__all__ = ["FlowerCluster", "LOST_POLICIES", "flower_cluster", "flower_env"]
