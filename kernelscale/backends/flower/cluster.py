"""The Flower backend: every worker is a SuperNode, every round goes through a ServerApp's Grid.

:class:`FlowerCluster` implements the runtime's ``_run`` over Flower's Message
API, so the unchanged master functions (``diskpca``, ``fk_kmeans``,
``distributed_spectral_clustering``, ``one_shot_kpca``...) run on real
``flower-superlink`` / ``flower-supernode`` processes::

    with FlowerCluster("127.0.0.1:9093", n_workers=3) as cluster:
        result = fk_kmeans(cluster, 3, random_state=0)
    print(cluster.ledger.summary())

A same-machine convenience. The way a Flower user fits is ``flwr run`` of the
fitting ServerApp (:mod:`kernelscale.backends.flower.fitting`), from anywhere,
over the user's own TLS connection: the master function then runs inside the
ServerApp. A FlowerCluster instead drives the rounds from this Python process,
which must run on the SuperLink's machine: opening it submits a run
(``flwr run``, over TLS when given the CA certificate or a named connection) of
the relay app of :mod:`kernelscale.backends.flower.app`, whose ServerApp
connects back to this process over the loopback interface only (an
authenticated but unencrypted local socket, the key in a file only this user
can read) and relays each round: one ``query.kernelscale`` Message per SuperNode with
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
whichever comes first. A run that fails before its ServerApp connects (a wrong
certificate, an unreachable SuperLink) is reported at once with the run's own
output. With ``lost="error"`` (the default) the round raises one
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
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from multiprocessing.connection import Listener
from pathlib import Path

import numpy as np

from kernelscale.backends.flower.connection import (
    check_tls_options,
    connection_toml,
    flower_env,
    flwr_command,
    named_connection,
    probe_superlink,
    unreachable,
)
from kernelscale.backends.flower.rounds import FlowerRounds, round_half
from kernelscale.backends.flower.runconfig import app_pyproject
from kernelscale.runtime.cluster import Cluster
from kernelscale.runtime.lost import LOST_POLICIES

RELAY_HOST = "127.0.0.1"  # the relay listens on the loopback interface only


class FlowerCluster(FlowerRounds):
    """A :class:`~kernelscale.runtime.Cluster` whose workers are Flower SuperNodes.

    Parameters
    ----------
    superlink : str or None
        ``host:port`` of the SuperLink (its ``--port``: Fleet, Control and
        ServerApp APIs share it since flwr 1.41); ``None`` with ``connection``.
    n_workers : int
        Number of partitions; the SuperNodes must carry ``partition-id`` 0 to
        ``n_workers - 1`` in their node config.
    root_certificates : path, optional
        The CA certificate (PEM) that signed the SuperLink's TLS certificate
        (Flower's ``root-certificates``): the run is submitted over TLS.
    insecure : bool or None, default=None
        Talk to the SuperLink without TLS. ``None``: TLS when
        ``root_certificates`` is given, plain text otherwise (a SuperLink
        started with ``--insecure``, on localhost only). ``False`` without
        ``root_certificates`` verifies with the system's CA bundle.
    connection : str, optional
        The name of a SuperLink connection in your Flower configuration
        (``$FLWR_HOME/config.toml``, ``~/.flwr`` by default), with its address and
        TLS settings, instead of ``superlink``.
    data_key : str or tuple of str, default="partition-path"
        The node-config key holding the file of the node's partition (read with
        ``kernelscale.datasets.load`` on the node). A node may hold several
        data sets under different keys (e.g. a vertical block); a tuple of keys
        stacks their files row-wise (a vertical party's training block, then its
        new samples).
    timeout : float, default=600
        Seconds a round may take before the nodes that did not answer are lost.
    lost : {"error", "drop"}, default="error"
        What a lost node does to the fit (see the module docstring).
    start_timeout : float, default=180
        Seconds to wait for the run to start and the nodes to connect.
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

    Notes
    -----
    The relay between the run's ServerApp and this process listens on
    127.0.0.1 and is not encrypted: this process must run on the SuperLink's
    machine, as the user who can read its temporary key file. From anywhere
    else, fit with ``flwr run`` of the fitting app (``docs/flower.md``).
    """

    def __init__(self, superlink: str | None, n_workers: int, *, root_certificates=None,
                 insecure: bool | None = None, connection: str | None = None,
                 data_key: str = "partition-path", timeout: float = 600.0,
                 lost: str = "error", start_timeout: float = 180.0, secure_rounds=None,
                 secure_range: float = 1e4, secure_levels: int = 2**24,
                 secure_threshold: float = 2 / 3):
        if lost not in LOST_POLICIES:
            raise ValueError(f"lost must be one of {LOST_POLICIES}, got {lost!r}.")
        if not timeout > 0 or not start_timeout > 0:
            raise ValueError("timeout and start_timeout must be positive numbers of seconds.")
        insecure = check_tls_options(superlink, connection, root_certificates, insecure)
        if importlib.util.find_spec("flwr") is None:
            raise ImportError("backend='flower' needs Flower: pip install 'kernelscale[flower]'.")
        super().__init__(n_workers, data_key=data_key, timeout=timeout, lost=lost,
                         secure_rounds=secure_rounds, secure_range=secure_range,
                         secure_levels=secure_levels, secure_threshold=secure_threshold)
        self.superlink, self.connection = superlink, connection
        self.root_certificates, self.insecure = root_certificates, insecure
        self.where = str(superlink) if connection is None else f"connection {connection!r}"
        self._connection = None
        self._run_process: subprocess.Popen | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="kernelscale-flower-"))
        try:
            self._start(start_timeout)
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ start-up
    def _flower_home(self) -> tuple[dict, str]:
        """The environment and the connection name for ``flwr run``."""
        if self.connection is not None:  # the user's own configuration
            return flower_env(), self.connection
        home = self._workdir / "flwr_home"
        home.mkdir()
        (home / "config.toml").write_text(connection_toml(
            "kernelscale", self.superlink, self.root_certificates, self.insecure))
        return flower_env(home), "kernelscale"

    def _start(self, start_timeout: float) -> None:
        start = time.perf_counter()
        # A SuperLink that cannot be used is named at once, not after flwr run's retries.
        address, root, insecure = self.superlink, self.root_certificates, self.insecure
        if self.connection is not None:
            address, root, insecure = named_connection(self.connection)
        cause = unreachable(address, root, insecure)
        if cause:
            raise RuntimeError(f"The SuperLink of {self.where} cannot be used: {cause}.")
        key = secrets.token_bytes(32)
        key_file = self._workdir / "relay.key"
        key_file.touch(mode=0o600)
        key_file.write_bytes(key)
        listener = Listener((RELAY_HOST, 0), authkey=key)
        app = self._workdir / "app"
        app.mkdir()
        (app / "pyproject.toml").write_text(app_pyproject(
            "kernelscale-flower",
            "kernelscale protocols on Flower: a relay ServerApp and the worker ClientApp",
            "server_app", {"kernelscale-relay": "", "kernelscale-key-file": ""}))
        env, connection = self._flower_home()
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
        # --stream: the command lives as long as the run, so a run that fails before its
        # ServerApp connects ends it, with the run's own log, and we say so at once.
        with open(self._workdir / "flwr-run.log", "wb") as log:
            self._run_process = subprocess.Popen(
                [flwr_command(), "run", str(app), connection, "--run-config", overrides,
                 "--stream"], env=env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + start_timeout
        try:
            while waiter.is_alive() and time.monotonic() < deadline:
                code = self._run_process.poll()
                if code is not None:
                    raise RuntimeError(f"`flwr run` on {self.where} failed before the kernelscale "
                                       f"ServerApp connected (exit {code}){self._diagnosis()}:"
                                       f"\n{self._run_log()}")
                waiter.join(0.05)
        finally:
            listener.close()
        if "connection" not in accepted:
            raise TimeoutError(
                f"The kernelscale ServerApp did not connect within {start_timeout:g} s "
                f"(is a SuperLink listening on {self.where}?).\n{self._run_log()}")
        self._connection = accepted["connection"]
        self.roster = self._operator_roster()
        self._find_nodes(deadline)
        self.startup_seconds = time.perf_counter() - start

    def _diagnosis(self) -> str:
        """Why the SuperLink could not be reached, when Flower only says "unavailable"."""
        if "unavailable" not in self._run_log():
            return ""
        address, root, insecure = self.superlink, self.root_certificates, self.insecure
        if self.connection is not None:
            address, root, insecure = named_connection(self.connection)
        if not address:
            return ""
        return "; " + probe_superlink(address, root, insecure)

    def _run_log(self) -> str:
        path = self._workdir / "flwr-run.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    # ------------------------------------------------------------------ relay I/O
    def _operator_roster(self):
        """The operator's roster as the relay ServerApp (on the SuperLink's side) reads it."""
        from kernelscale.backends.flower.operator_settings import Roster

        reply = self._request({"op": "roster"})
        if reply["roster"] is None:
            return None
        return Roster({int(p): int(n) for p, n in reply["roster"].items()},
                      source=str(reply["source"]))

    def _list_nodes(self) -> list[int]:
        return list(self._request({"op": "nodes"})["nodes"])

    def _request(self, header: dict, blobs=()) -> dict:
        self._check_open()
        self._connection.send_bytes(json.dumps(header).encode())
        for blob in blobs:
            self._connection.send_bytes(blob)
        return self._receive()

    def _receive(self, timeout: float | None = None) -> dict:
        """The relay's next message; ``timeout``: the round's (default: ``self.timeout``)."""
        try:
            wait = self.timeout if timeout is None else timeout
            if not self._connection.poll(wait + 120.0):
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
            event = self._receive(timeout)
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

    def _secure_sum(self, header: dict, blobs: list[bytes]):
        from kernelscale.backends.flower.wire import from_npy

        reply = self._request(header, blobs)
        sums = [from_npy(self._connection.recv_bytes()) for _ in range(reply["n_sum"])]
        masked = {}
        for node in sorted(int(n) for n in reply["masked"]):
            masked[node] = [from_npy(self._connection.recv_bytes())
                            for _ in range(reply["masked"][str(node)])]
        return reply, sums, masked

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



def flower_cluster(data, client, data_key=None, timeout: float = 600.0):
    """A FlowerCluster with ``data`` SuperNodes, reached as ``client`` says (``make_cluster``).

    ``client`` is one of:

    * ``"host:port"``: the SuperLink's address, without TLS (a SuperLink started
      with ``--insecure``, on localhost);
    * ``"<name>"`` (no colon): a connection of your Flower configuration
      (``$FLWR_HOME/config.toml``), with its address and TLS settings;
    * a dict of :class:`FlowerCluster` options, e.g. ``{"superlink":
      "10.0.0.5:9093", "root_certificates": "ca.crt", "lost": "drop"}``;
    * a ready :class:`Cluster` (e.g. ``FlowerCluster(superlink, n_workers=3,
      secure_rounds="all", lost="drop")``): used as it is (its workers,
      ``timeout``, ``lost`` and secure rounds), ``data_key`` (``fit("key")``) set
      on it.
    """
    if isinstance(client, Cluster):
        if data_key is not None:
            if not hasattr(client, "data_key"):
                raise TypeError(
                    f"fit({data_key!r}) names the node-config key of the SuperNodes' "
                    f"partition files; the {type(client).__name__} given as client holds "
                    "its partitions: fit(None).")
            client.data_key = data_key
        return client
    if isinstance(client, str) and client:
        options = ({"superlink": client} if ":" in client
                   else {"superlink": None, "connection": client})
    elif isinstance(client, dict):
        options = {"superlink": None, **client}
    else:
        raise ValueError("backend='flower' needs client='host:port' of the Flower SuperLink, "
                         "the name of a connection in your Flower configuration, a dict of "
                         "FlowerCluster options or a FlowerCluster.")
    if isinstance(data, bool) or not isinstance(data, (int, np.integer)) or data < 1:
        raise TypeError(
            "With backend='flower' the partitions are on the SuperNodes (each reads the file "
            "named in its node config): give their number as data, not "
            f"{type(data).__name__}.")
    options.setdefault("timeout", timeout)
    options.setdefault("data_key", data_key or "partition-path")
    if data_key is not None:
        options["data_key"] = data_key
    return FlowerCluster(options.pop("superlink"), int(data), **options)


__all__ = ["FlowerCluster", "LOST_POLICIES", "connection_toml", "flower_cluster", "flower_env",
           "flwr_command", "probe_superlink", "round_half"]
