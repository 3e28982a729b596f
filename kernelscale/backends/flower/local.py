"""A Flower federation on one machine: one SuperLink and one SuperNode per partition file.

For tests, demos and trying the Flower backend before deploying it. It runs the
same commands as the README's "Federated deployment" section::

    flower-superlink --insecure --port 9093 --disable-runtime-dependency-installation
    flower-supernode --insecure --superlink 127.0.0.1:9093 --port 9101 \\
        --node-config 'partition-id=0 partition-path="/data/p0.npy"'

each as a subprocess with its own ``FLWR_HOME``, and stops all of them (and the
processes they started) on :meth:`LocalFederation.stop` or at the end of a
``with`` block.
"""

from __future__ import annotations

import os
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

from kernelscale.backends.flower.cluster import flower_env
from kernelscale.backends.flower.supernode import IDLE_ENV


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free now (the OS picks it)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _command(name: str) -> str:
    candidate = Path(sys.executable).parent / name
    return str(candidate) if candidate.exists() else name


def node_config_text(config: Mapping) -> str:
    """``--node-config`` text: strings quoted, numbers bare (TOML values)."""
    parts = []
    for key, value in config.items():
        if isinstance(value, str | os.PathLike):
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
    task_poll_interval : float, default=0.1
        ``FLWR_SUPEREXEC_TASK_POLL_INTERVAL``: how often the SuperLink's
        SuperExec asks for work to launch (the ServerApp; Flower's default is 1 s).
    node_idle_seconds : float or None, default=0.02
        The SuperNodes' waits (Flower 1.42 sleeps 3 s after a poll that found no
        message, 0.5 s at a time while the ClientApp works). With a number the
        nodes run through :mod:`kernelscale.backends.flower.supernode`: the same
        SuperNode with those waits shortened and one long-lived ClientApp
        process (:mod:`~kernelscale.backends.flower.executor`) instead of one
        process per message. ``None`` runs the stock ``flower-supernode``.
    process_per_message : bool, default=False
        With ``node_idle_seconds``: keep Flower's ClientApp process per message
        (``--isolation subprocess``), only the waits shortened (for comparisons).

    Attributes
    ----------
    address : str
        ``127.0.0.1:<port>`` of the SuperLink, for :class:`FlowerCluster`.
    nodes : list of subprocess.Popen
    """

    def __init__(self, node_configs: Sequence[Mapping], workdir=None,
                 task_poll_interval: float = 0.1, node_idle_seconds: float | None = 0.02,
                 process_per_message: bool = False):
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
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.superlink: subprocess.Popen | None = None
        self.nodes: list[subprocess.Popen] = []
        self.commands: list[list[str]] = []
        self._node_args: list[list[str]] = []

    def _spawn(self, args: list[str], name: str) -> subprocess.Popen:
        home = self.workdir / f"home-{name}"
        home.mkdir(exist_ok=True)
        env = dict(self.env, FLWR_HOME=str(home))
        self.commands.append(args)
        with open(self.workdir / f"{name}.log", "ab") as log:
            return subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)

    def start(self, timeout: float = 60.0) -> LocalFederation:
        """Start the SuperLink, wait until it answers, then start the SuperNodes."""
        try:
            self.superlink = self._spawn(
                [_command("flower-superlink"), "--insecure", "--port", str(self.port),
                 "--disable-runtime-dependency-installation"], "superlink")
            self._wait_http(timeout)
            for i, config in enumerate(self.node_configs):
                launcher = ([_command("flower-supernode")] if self.node_idle_seconds is None
                            else [sys.executable, "-m", "kernelscale.backends.flower.supernode"])
                if self.node_idle_seconds is not None and self.process_per_message:
                    launcher += ["--isolation", "subprocess"]
                self._node_args.append(
                    [*launcher, "--insecure", "--superlink", self.address,
                     "--port", str(free_port()), "--node-config", node_config_text(config)])
                self.nodes.append(self._spawn(self._node_args[i], f"supernode-{i}"))
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_http(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.superlink.poll() is not None:
                raise RuntimeError(f"flower-superlink exited:\n{self.log('superlink')}")
            try:
                with urllib.request.urlopen(f"http://{self.address}/health", timeout=1):
                    return
            except urllib.error.HTTPError:
                return  # it answers
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"flower-superlink did not answer within {timeout:g} s.")
            time.sleep(0.05)

    def log(self, name: str) -> str:
        """The tail of a process's log (``"superlink"`` or ``"supernode-<i>"``)."""
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop_node(self, index: int, sig: int = signal.SIGTERM) -> None:
        """Stop SuperNode ``index`` (SIGTERM: it leaves the federation; SIGKILL: it vanishes)."""
        process = self.nodes[index]
        children = _children(process.pid)
        if process.poll() is None:
            process.send_signal(sig)
        process.wait(30)
        _end(children)

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
        processes = [p for p in [*self.nodes, self.superlink] if p is not None]
        children = [c for p in processes for c in _children(p.pid)]
        for p in processes:
            if p.poll() is None:
                p.terminate()
        for p in processes:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        _end(children)

    def __enter__(self) -> LocalFederation:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _children(pid: int) -> list:
    try:
        import psutil

        return psutil.Process(pid).children(recursive=True)
    except Exception:  # psutil missing or the process is gone
        return []


def _end(processes: list) -> None:
    """SIGTERM, then SIGKILL after 10 s, the given psutil processes (SuperExec, apps)."""
    if not processes:
        return
    import psutil

    for p in processes:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(processes, timeout=10)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(alive, timeout=5)


__all__ = ["LocalFederation", "free_port", "node_config_text"]
