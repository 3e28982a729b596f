"""A Flower federation on one machine: one SuperLink and one SuperNode per partition file.

For tests, demos and trying the Flower backend before deploying it. It runs the
commands of ``docs/flower.md``, secure ones with ``tls=True, node_auth=True``
(a throwaway CA, server certificate and node keys:
:mod:`~kernelscale.backends.flower.certificates`)::

    flower-superlink --ssl-ca-certfile ca.crt --ssl-certfile server.pem \\
        --ssl-keyfile server.key --enable-supernode-auth --port 9093 \\
        --disable-runtime-dependency-installation
    flwr supernode register node-0.pub kernelscale-local
    flower-supernode --root-certificates ca.crt --auth-supernode-private-key node-0 \\
        --superlink 127.0.0.1:9093 --port 9101 \\
        --node-config 'partition-id=0 partition-path="/data/p0.npy"'

(``--insecure`` instead of the certificates by default), each as a subprocess
with its own ``FLWR_HOME``, and stops all of them (and the processes they
started) on :meth:`LocalFederation.stop`, at the end of a ``with`` block, or
when the script that started them gets SIGTERM or SIGHUP. It also writes a
Flower configuration with one connection to itself
(:attr:`~LocalFederation.flwr_home`, :attr:`~LocalFederation.connection`), so
that ``flwr run`` reaches it as it would a real federation.

As the operator it sets the SuperLink's model folder (``workdir/models``,
``KERNELSCALE_FLOWER_MODELS``) and, with ``node_auth=True``, writes the roster of
its registered nodes (``workdir/roster.toml``, ``KERNELSCALE_FLOWER_ROSTER``:
each node's id, as ``flwr supernode register`` printed it, bound to the
``partition-id`` of its node config); without node authentication a node's id
changes at every start, so there is no roster and the nodes' own claims are used.

Each run's ServerApp is forked from a process that has already imported it
(:mod:`~kernelscale.backends.flower.warm_serverapp`; ``warm_serverapp=False``
starts Flower's own new process per run).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path

from kernelscale.backends.flower.connection import connection_toml, flower_env
from kernelscale.backends.flower.operator_settings import MODELS_ENV, ROSTER_ENV, Roster
from kernelscale.backends.flower.processes import (
    RUNNING,
    child_processes,
    end_processes,
    stop_with_the_script,
)
from kernelscale.backends.flower.supernode import IDLE_ENV

#: Flower's (private) settings of how many of a message's objects move at once.
CONCURRENT_OBJECTS_ENV = ("FLWR_PRIVATE_MAX_CONCURRENT_OBJ_PUSHES",
                          "FLWR_PRIVATE_MAX_CONCURRENT_OBJ_PULLS")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _command(name: str) -> str:
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def node_config_text(config: Mapping) -> str:
    """``--node-config`` text: strings quoted, booleans and numbers bare (TOML values)."""
    parts = []
    for key, value in config.items():
        if isinstance(value, bool):
            parts.append(f"{key}={str(value).lower()}")
        elif isinstance(value, str | os.PathLike):
            text = str(value).replace("\\", "\\\\").replace('"', '\\"')
            parts.append(f'{key}="{text}"')
        else:
            parts.append(f"{key}={value}")
    return " ".join(parts)


class LocalFederation:
    """One ``flower-superlink`` and one ``flower-supernode`` per node config, on 127.0.0.1.

    Parameters
    ----------
    node_configs : sequence of dict
        One dict per SuperNode, e.g. ``{"partition-id": 0, "partition-path": "p0.npy"}``.
    workdir : path, optional
        Where the logs and each process's ``FLWR_HOME`` go (default: a new
        temporary folder).
    task_poll_interval : float, default=0.5
        ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``: how often the SuperLink's
        SuperExec asks for work to launch (the ServerApp; Flower's default is 1 s).
        It is paid once per run, when the ServerApp starts, but each poll costs the
        SuperLink CPU during every round, so it is not set lower.
    node_idle_seconds : float or None, default=0.02
        The SuperNodes' waits (Flower 1.42 sleeps 3 s after a poll that found no
        message, 0.5 s at a time while the ClientApp works). With a number the
        nodes run through :mod:`kernelscale.backends.flower.supernode`: the same
        SuperNode with those waits shortened, running the ClientApp in its own
        process (:mod:`~kernelscale.backends.flower.in_node`) instead of one
        process per message. ``None`` runs the stock ``flower-supernode``.
    process_per_message : bool, default=False
        With ``node_idle_seconds``: keep Flower's ClientApp process per message
        (``--isolation subprocess``), only the waits shortened (for comparisons).
    tls : bool, default=False
        Serve the SuperLink over TLS with a throwaway CA (``workdir/keys``); the
        nodes and ``flwr`` verify it with :attr:`root_certificates`. Each node
        serves its Runtime API (to ClientApp processes) over TLS too.
    node_auth : bool, default=False
        SuperNode authentication: each node gets a key pair, its public key is
        registered (``flwr supernode register``) before it starts, and the
        SuperLink refuses any node whose key is not registered. The registered
        node ids and the nodes' ``partition-id`` make the operator's roster
        (:attr:`roster_file`).
    models : path, optional
        The operator's model folder, where runs write (default ``workdir/models``).
    warm_serverapp : bool, default=True
        Start each run's ServerApp forked from a process that has already imported
        Flower and kernelscale (:mod:`~kernelscale.backends.flower.warm_serverapp`),
        not as a new ``flwr-serverapp`` process that imports them (about 4 s of CPU
        a run). ``False`` runs the stock command.

    Attributes
    ----------
    address : str
        ``127.0.0.1:<port>`` of the SuperLink, for :class:`FlowerCluster`.
    root_certificates : Path or None
        The CA certificate that signed the SuperLink's (``tls=True``).
    flwr_home : Path
        A ``FLWR_HOME`` whose ``config.toml`` has one connection to this SuperLink,
        :attr:`connection`: ``FLWR_HOME=<flwr_home> flwr run DIR kernelscale-local``.
    connection : str
        ``"kernelscale-local"``.
    nodes : list of subprocess.Popen
    node_keys : list of Path
        Each node's private key (``node_auth=True``).
    node_ids : list of int
        Each node's Flower node id, as its registration printed it (``node_auth=True``).
    models : Path
        The operator's model folder (``KERNELSCALE_FLOWER_MODELS`` of the SuperLink).
    roster_file : Path or None
        The operator's roster (``KERNELSCALE_FLOWER_ROSTER``), with ``node_auth=True``.
    """

    def __init__(self, node_configs: Sequence[Mapping], workdir=None,
                 task_poll_interval: float = 0.5, node_idle_seconds: float | None = 0.02,
                 process_per_message: bool = False, tls: bool = False,
                 node_auth: bool = False, models=None, warm_serverapp: bool = True):
        self.node_configs = [dict(c) for c in node_configs]
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="kernelscale-federation-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        import kernelscale

        root = str(Path(kernelscale.__file__).resolve().parents[1])
        path = os.environ.get("PYTHONPATH", "")
        self.env = flower_env()
        # Flower starts its helpers by name (flower-superexec, flwr-clientapp,
        # flwr-serverapp): the ones beside this Python, not a version manager's shims.
        self.env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + self.env.get("PATH", "")
        # Every process imports this kernelscale (the app's components live in it).
        self.env["PYTHONPATH"] = root + (os.pathsep + path if path else "")
        self.env["FLWR_SUPEREXEC_TASK_POLL_INTERVAL"] = str(task_poll_interval)
        self.node_idle_seconds = node_idle_seconds
        self.process_per_message = bool(process_per_message)
        if node_idle_seconds is not None:
            self.env[IDLE_ENV] = str(float(node_idle_seconds))
            # A message's objects go up and down 2 at a time by default (Flower's
            # private setting); 8 at a time: a trivial round 0.373 s against 0.406 s in
            # benchmarks/results/flower_rounds, within the rounds' spread on 2 cores, more
            # where a message has more objects. A Flower without it ignores it.
            for name in CONCURRENT_OBJECTS_ENV:
                self.env.setdefault(name, "8")
        self.warm: subprocess.Popen | None = None
        self._warm_socket: Path | None = None
        if warm_serverapp:
            from kernelscale.backends.flower.warm_serverapp import write_stand_in

            # AF_UNIX paths are short (108 bytes): a private folder of its own under /tmp.
            self._warm_socket = Path(tempfile.mkdtemp(prefix="ks-warm-")) / "serverapp.sock"
            bin_dir = write_stand_in(self.workdir / "bin", self._warm_socket).parent
            self.env["PATH"] = str(bin_dir) + os.pathsep + self.env["PATH"]
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.superlink: subprocess.Popen | None = None
        self.nodes: list[subprocess.Popen] = []
        self.commands: list[list[str]] = []
        self._node_args: list[list[str]] = []
        self.tls, self.node_auth = bool(tls), bool(node_auth)
        self.keys = self.workdir / "keys"
        self.root_certificates: Path | None = None
        self._tls_files: dict = {}
        if self.tls:
            from kernelscale.backends.flower.certificates import make_tls_files

            self._tls_files = make_tls_files(self.keys)
            self.root_certificates = self._tls_files["ca"].resolve()
        self.node_keys: list[Path] = []
        self.node_ids: list[int] = []
        # The operator's settings, in the environment the SuperLink passes to its ServerApps.
        self.models = Path(models or self.workdir / "models").resolve()
        self.models.mkdir(parents=True, exist_ok=True)
        self.env[MODELS_ENV] = str(self.models)
        self.roster_file = (self.workdir / "roster.toml").resolve() if self.node_auth else None
        if self.roster_file is not None:
            self.env[ROSTER_ENV] = str(self.roster_file)
        else:
            self.env.pop(ROSTER_ENV, None)
        self.connection = "kernelscale-local"
        self.flwr_home = self.workdir / "flwr-home"
        self.flwr_home.mkdir(exist_ok=True)
        (self.flwr_home / "config.toml").write_text(connection_toml(
            self.connection, self.address, self.root_certificates, insecure=not self.tls))

    def _spawn(self, args: list[str], name: str, flower: bool = True) -> subprocess.Popen:
        home = self.workdir / f"home-{name}"
        home.mkdir(exist_ok=True)
        env = dict(self.env, FLWR_HOME=str(home))
        if flower:  # commands: the SuperLink's, then the nodes'
            self.commands.append(args)
        with open(self.workdir / f"{name}.log", "ab") as log:
            return subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)

    def _security_args(self) -> list[str]:
        """A node's TLS options: it verifies the SuperLink with the CA, and serves its own
        Runtime API (to ClientApp processes, where it starts any) over TLS with the same throwaway
        certificate (valid for 127.0.0.1)."""
        if not self.tls:
            return ["--insecure"]
        files = self._tls_files
        return ["--root-certificates", str(self.root_certificates),
                "--ssl-certfile", str(files["cert"]), "--ssl-keyfile", str(files["key"]),
                "--ssl-ca-certfile", str(files["ca"])]

    def flwr_env(self) -> dict:
        """Environment for ``flwr`` commands against this federation (its ``FLWR_HOME``)."""
        return dict(self.env, FLWR_HOME=str(self.flwr_home))

    def register(self, public_keys: Sequence, timeout: float = 60.0) -> list[int]:
        """``flwr supernode register`` each public key (in parallel); their node ids, or
        raise with the command's output."""
        processes = []
        for key in public_keys:
            log = self.workdir / f"register-{Path(key).stem}.log"
            with open(log, "wb") as out, open(log.with_suffix(".err"), "wb") as err:
                processes.append((log, subprocess.Popen(
                    [_command("flwr"), "supernode", "register", str(key), self.connection,
                     "--format", "json"], env=self.flwr_env(), stdout=out, stderr=err,
                    stdin=subprocess.DEVNULL)))
        ids = []
        for log, process in processes:
            try:
                code = process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
                code = "timeout"
            text = log.read_text(errors="replace")
            if code != 0:
                errors = log.with_suffix(".err").read_text(errors="replace")
                raise RuntimeError(f"flwr supernode register failed ({code}):\n"
                                   f"{(text + errors)[-2000:]}")
            ids.append(int(json.loads(text[text.index("\n{") + 1 if not text.startswith("{")
                                            else 0:])["node-id"]))
        return ids

    def write_roster(self) -> None:
        """Write the roster: each registered node bound to its config's ``partition-id``."""
        partitions = {int(config["partition-id"]): node
                      for config, node in zip(self.node_configs, self.node_ids, strict=True)
                      if node is not None and "partition-id" in config}
        self.roster_file.write_text(Roster(partitions, str(self.roster_file)).to_toml())

    def node_args(self, config: Mapping, private_key=None, extra=()) -> list[str]:
        """The command line of a SuperNode holding ``config`` (a new Runtime API port)."""
        launcher = ([_command("flower-supernode")] if self.node_idle_seconds is None
                    else [sys.executable, "-m", "kernelscale.backends.flower.supernode"])
        if self.node_idle_seconds is not None and self.process_per_message:
            launcher += ["--isolation", "subprocess"]
        auth = [] if private_key is None else ["--auth-supernode-private-key", str(private_key)]
        return [*launcher, *self._security_args(), *auth, "--superlink", self.address,
                "--port", str(free_port()), "--node-config", node_config_text(config), *extra]

    def start(self, timeout: float = 60.0) -> LocalFederation:
        """Start the SuperLink, wait until it answers, register the node keys, start the nodes."""
        stop_with_the_script(self)
        try:
            if self._warm_socket is not None:  # it imports while the SuperLink starts
                self.warm = self._spawn([sys.executable, "-m",
                                         "kernelscale.backends.flower.warm_serverapp", "serve",
                                         str(self._warm_socket)], "warm-serverapp",
                                        flower=False)
            tls = (["--ssl-ca-certfile", str(self._tls_files["ca"]), "--ssl-certfile",
                    str(self._tls_files["cert"]), "--ssl-keyfile", str(self._tls_files["key"])]
                   if self.tls else ["--insecure"])
            auth = ["--enable-supernode-auth"] if self.node_auth else []
            self.superlink = self._spawn(
                [_command("flower-superlink"), *tls, *auth, "--port", str(self.port),
                 "--disable-runtime-dependency-installation"], "superlink")
            self._wait_http(timeout)
            if self.node_auth:
                from kernelscale.backends.flower.certificates import make_node_key

                pairs = [make_node_key(self.keys, f"node-{i}")
                         for i in range(len(self.node_configs))]
                self.node_keys = [private for private, _ in pairs]
                self.node_ids = self.register([public for _, public in pairs], timeout)
                self.write_roster()
            for i, config in enumerate(self.node_configs):
                key = self.node_keys[i] if self.node_auth else None
                self._node_args.append(self.node_args(config, key))
                self.nodes.append(self._spawn(self._node_args[i], f"supernode-{i}"))
            self._wait_warm(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_for(self, ready, process: subprocess.Popen, log: str, what: str,
                  verb: str, timeout: float) -> None:
        """Poll ``ready()`` until it is true; raise if ``process`` exits first (with the tail
        of its log ``log``) or ``timeout`` seconds pass."""
        deadline = time.monotonic() + timeout
        while not ready():
            if process.poll() is not None:
                raise RuntimeError(f"{what} exited:\n{self.log(log)}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what} did not {verb} within {timeout:g} s.")
            time.sleep(0.05)

    def _wait_http(self, timeout: float) -> None:
        scheme, context = "http", None
        if self.tls:
            import ssl

            scheme, context = "https", ssl.create_default_context(
                cafile=str(self.root_certificates))

        def answers() -> bool:
            try:
                with urllib.request.urlopen(f"{scheme}://{self.address}/health", timeout=1,
                                            context=context):
                    return True
            except urllib.error.HTTPError:
                return True  # it answers
            except OSError:
                return False

        self._wait_for(answers, self.superlink, "superlink", "flower-superlink", "answer",
                       timeout)

    def _wait_warm(self, timeout: float) -> None:
        """Wait until the warm ServerApp process listens (a run started before would
        only be cold: its stand-in runs the stock command)."""
        if self.warm is not None:
            self._wait_for(self._warm_socket.exists, self.warm, "warm-serverapp",
                           "the warm ServerApp process", "listen", timeout)

    def log(self, name: str) -> str:
        """The tail of a process's log (``"superlink"`` or ``"supernode-<i>"``)."""
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop_node(self, index: int, sig: int = signal.SIGTERM) -> None:
        """Stop SuperNode ``index`` (SIGTERM: it leaves the federation; SIGKILL: it vanishes)."""
        process = self.nodes[index]
        children = child_processes(process.pid)
        if process.poll() is None:
            process.send_signal(sig)
        process.wait(30)
        end_processes(children)

    def add_node(self, config: Mapping, register: bool = True, extra=(),
                 roster: bool = False) -> subprocess.Popen:
        """Start one more SuperNode holding ``config`` (with ``node_auth``: a new key pair,
        registered only if ``register``, an unregistered node being refused by the
        SuperLink; bound to its partition in the roster only if ``roster``)."""
        index = len(self.nodes)
        key = node_id = None
        if self.node_auth:
            from kernelscale.backends.flower.certificates import make_node_key

            key, public = make_node_key(self.keys, f"node-{index}")
            if register:
                node_id = self.register([public])[0]
        self.node_configs.append(dict(config))
        self.node_keys.append(key)
        if self.node_auth:
            self.node_ids.append(node_id if roster else None)
            if roster:
                self.write_roster()
        self._node_args.append(self.node_args(config, key, extra))
        self.nodes.append(self._spawn(self._node_args[index], f"supernode-{index}"))
        return self.nodes[index]

    def restart_node(self, index: int) -> None:
        """Start SuperNode ``index`` again (after :meth:`stop_node`), with the same
        config and a new Runtime API port; the SuperLink gives it a new node id."""
        if self.nodes[index].poll() is None:
            raise RuntimeError(f"SuperNode {index} is running; stop it first.")
        args = list(self._node_args[index])
        args[args.index("--port") + 1] = str(free_port())
        self._node_args[index] = args
        self.nodes[index] = self._spawn(args, f"supernode-{index}")

    def stop(self) -> None:
        """Stop every process this federation started (and their children)."""
        if self in RUNNING:
            RUNNING.remove(self)
        processes = [p for p in [*self.nodes, self.superlink, self.warm] if p is not None]
        children = [c for p in processes for c in child_processes(p.pid)]
        for p in processes:
            if p.poll() is None:
                p.terminate()
        for p in processes:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        end_processes(children)
        if self._warm_socket is not None:
            shutil.rmtree(self._warm_socket.parent, ignore_errors=True)

    def __enter__(self) -> LocalFederation:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


__all__ = ["LocalFederation", "free_port", "node_config_text"]
