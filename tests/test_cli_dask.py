"""The CLI's Dask flags: ``--dask-workers 2`` gives the in-process model and words.

Each test runs a subcommand twice through ``kernelscale.cli.main``: in-process,
then on a local Dask cluster of two worker processes that the CLI starts (and
stops) itself. The saved model or embedding agrees to 1e-10 and the printed
ledger is the same.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("distributed")

from kernelscale.cli import build_parser, main  # noqa: E402
from kernelscale.model import load_model  # noqa: E402

TOL = 1e-10


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    X = load_digits().data[:300]
    return (X - X.mean(axis=0)) / np.maximum(X.std(axis=0), 1e-12)


def run(argv, capsys):
    assert main(argv) == 0
    return capsys.readouterr()


def without_times(text: str) -> str:
    """The output without the ledger's time table (seconds differ from run to run)."""
    return re.sub(r"\ntime \(.*?\ntotal[^\n]*", "", text, flags=re.S)


def test_fit_on_dask_workers(digits, tmp_path, capsys):
    np.save(tmp_path / "X.npy", digits)
    argv = ["fit", "--data", str(tmp_path / "X.npy"), "--n-components", "3", "--workers", "3",
            "--landmarks", "40", "--seed", "1", "--verbose"]
    local = run([*argv, "--out", str(tmp_path / "local.npz")], capsys)
    remote = run([*argv, "--out", str(tmp_path / "dask.npz"), "--dask-workers", "2",
                  "--timeout", "120"], capsys)
    words = [re.search(r"; ([\d,]+) words in \d+ rounds;", out.out).group(1)
             for out in (local, remote)]
    assert words[0] == words[1] and int(words[0].replace(",", "")) > 0
    # the fit-phase summary (stderr, with --verbose): every round's words, by kind
    summary = without_times(local.err[local.err.index("communication (fit)"):]).strip()
    assert "by kind" in summary and summary in without_times(remote.err)
    assert "slowest worker" in local.err and "slowest worker" in remote.err
    a, b = load_model(tmp_path / "local.npz"), load_model(tmp_path / "dask.npz")
    np.testing.assert_allclose(a.transform(digits[:50]), b.transform(digits[:50]),
                               rtol=TOL, atol=TOL)


def test_vertical_on_dask_workers(digits, tmp_path, capsys):
    """Several files: each party reads its own file (on its Dask worker)."""
    paths = []
    for j, cols in enumerate((slice(0, 20), slice(20, 40), slice(40, 64))):
        paths.append(str(tmp_path / f"party{j}.npy"))
        np.save(paths[-1], digits[:, cols])
    argv = ["vertical", "--data", *paths, "--gamma", "0.005", "--n-components", "3",
            "--n-local-components", "8", "--verbose"]
    local = run([*argv, "--out", str(tmp_path / "local.npy")], capsys)
    remote = run([*argv, "--out", str(tmp_path / "dask.npy"), "--dask-workers", "2"], capsys)
    # ledger and eigenvalues
    assert "local eigenpairs" in local.out
    assert without_times(local.out).replace("local.npy", "dask.npy") == \
        without_times(remote.out)
    np.testing.assert_allclose(np.load(tmp_path / "local.npy"), np.load(tmp_path / "dask.npy"),
                               rtol=TOL, atol=TOL)


@pytest.mark.parametrize("command", ["fit", "demo", "vertical"])
def test_scheduler_and_dask_workers_exclude_each_other(command, capsys):
    parser = build_parser()
    args = parser.parse_args([command, "--data", "x.npy", "--out", "m.npz", "--timeout", "5"]
                             if command == "fit" else
                             [command, "--data", "x.npy"] if command == "vertical" else [command])
    assert args.scheduler is None and args.dask_workers is None
    assert args.timeout == (5.0 if command == "fit" else None)
    with pytest.raises(SystemExit):
        parser.parse_args([command, "--scheduler", "tcp://h:8786", "--dask-workers", "2"])
    assert "not allowed with argument" in capsys.readouterr().err


def _unused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("command", ["fit", "vertical"])
def test_unreachable_scheduler_is_one_line_within_the_timeout(command, tmp_path, capsys):
    """--timeout bounds connecting too (it used to wait Dask's 30 s default)."""
    np.save(tmp_path / "X.npy", np.ones((10, 3)))
    address = f"tcp://127.0.0.1:{_unused_port()}"
    argv = [command, "--data", str(tmp_path / "X.npy"), "--scheduler", address,
            "--timeout", "1"]
    if command == "fit":
        argv += ["--out", str(tmp_path / "m.npz")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"kernelscale: error: cannot connect to the Dask scheduler at "
                          f"{address}: it is not a reachable Dask scheduler within 1 s")
    assert "after 1 s" in err  # distributed's own reason: nothing listens there
    assert not (tmp_path / "m.npz").exists()


def test_bad_timeout_or_address(tmp_path, capsys):
    np.save(tmp_path / "X.npy", np.ones((10, 3)))
    argv = ["fit", "--data", str(tmp_path / "X.npy"), "--out", str(tmp_path / "m.npz")]
    assert main([*argv, "--scheduler", "tcp://127.0.0.1:1", "--timeout", "0"]) == 2
    assert capsys.readouterr().err.startswith(
        "kernelscale: error: argument --timeout: must be a positive number of seconds, got '0'")
    assert main([*argv, "--scheduler", "nohost", "--timeout", "1"]) == 2
    assert capsys.readouterr().err == (
        "kernelscale: error: cannot connect to the Dask scheduler at nohost: it is not a Dask "
        "scheduler address, such as tcp://host:8786 (missing port number in address "
        "'nohost'); check --scheduler (a Dask scheduler's address, tcp://host:8786)\n")
    assert main([*argv, "--scheduler", "foo://h:1", "--timeout", "1"]) == 2
    assert "foo://h:1: it is not a Dask scheduler address" in capsys.readouterr().err


class Listener:
    """A TCP listener on 127.0.0.1 that is no Dask scheduler, in a thread.

    It accepts each connection and sends ``reply`` (``b""``: nothing, it stays
    silent), then reads until the peer closes it (``closed`` counts those).
    Bounded: it stops at ``stop()`` or after 10 connections; every socket is closed.
    """

    def __init__(self, reply: bytes):
        import socket
        import threading

        self.reply, self.accepted, self.closed = reply, 0, 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(0.2)
        self.address = f"tcp://127.0.0.1:{self.server.getsockname()[1]}"
        self.stopping = threading.Event()
        self.all_closed = threading.Event()  # every accepted connection closed by its peer
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):

        conns = []
        try:
            while not self.stopping.is_set():
                if self.accepted < 10:
                    try:
                        conn, _ = self.server.accept()
                    except TimeoutError:
                        conn = None
                    if conn is not None:
                        self.accepted += 1
                        self.all_closed.clear()
                        conn.settimeout(0.2)
                        if self.reply:
                            conn.sendall(self.reply)
                        conns.append(conn)
                self._reap(conns)
        finally:
            for conn in conns:
                conn.close()
            self.server.close()

    def _reap(self, conns):
        """Read what the peers sent; count and drop the ones they closed."""

        for conn in list(conns):
            try:
                gone = conn.recv(65536) == b""
            except TimeoutError:
                gone = False
            except OSError:  # reset by the peer
                gone = True
            if gone:
                self.closed += 1
                conns.remove(conn)
                conn.close()
        if not conns:
            self.all_closed.set()

    def stop(self):
        """Stop, once the peers closed what they opened (or after 10 s), and close all."""
        self.all_closed.wait(10)
        self.stopping.set()
        self.thread.join(10)
        assert not self.thread.is_alive()


def run_bounded(argv, seconds=120):
    """``main(argv)`` in a thread; it must return within ``seconds`` (it used to hang)."""
    import threading

    result = {}
    thread = threading.Thread(target=lambda: result.setdefault("code", main(argv)), daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"kernelscale {argv[0]} did not return in {seconds} s"
    return result["code"]


def _argv(command, tmp_path, address, timeout="2"):
    np.save(tmp_path / "X.npy", np.ones((10, 3)))
    argv = [command, "--data", str(tmp_path / "X.npy"), "--scheduler", address,
            "--timeout", timeout]
    return [*argv, "--out", str(tmp_path / "m.npz")] if command == "fit" else argv


@pytest.mark.parametrize("command", ["fit", "vertical"])
def test_silent_listener_is_one_line_after_the_timeout(command, tmp_path, capsys):
    """A listener that accepts and never answers: Client(address, timeout=) waits forever."""
    listener = Listener(b"")
    try:
        assert run_bounded(_argv(command, tmp_path, listener.address, timeout="0.5")) == 2
    finally:
        listener.stop()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"kernelscale: error: cannot connect to the Dask scheduler at "
                          f"{listener.address}: it is not a reachable Dask scheduler within 0.5 s")
    assert listener.accepted >= 1
    assert not (tmp_path / "m.npz").exists()


@pytest.mark.parametrize("command", ["fit", "vertical"])
@pytest.mark.parametrize("reply", [b"SSH-2.0-OpenSSH\r\n",
                                   b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"])
def test_wrong_protocol_listener_is_one_line(command, reply, tmp_path, capsys):
    """Another protocol's greeting used to be read as a frame length (a 2.82 EiB
    allocation, a traceback and exit code 1)."""
    listener = Listener(reply)
    try:
        assert run_bounded(_argv(command, tmp_path, listener.address, timeout="30")) == 2
    finally:
        listener.stop()
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"kernelscale: error: cannot connect to the Dask scheduler at "
                          f"{listener.address}: it does not speak Dask's protocol")
    # the connection it opened is closed, not left to the listener
    assert listener.accepted >= 1 and listener.closed == listener.accepted
    assert not (tmp_path / "m.npz").exists()


def test_scheduler_flag_reaches_a_real_scheduler(digits, tmp_path, capsys):
    """The check before connecting lets a real scheduler through (and its words agree)."""
    from distributed import LocalCluster

    np.save(tmp_path / "X.npy", digits)
    argv = ["fit", "--data", str(tmp_path / "X.npy"), "--n-components", "2", "--workers", "2",
            "--landmarks", "30", "--seed", "1", "--quiet"]
    local = run([*argv, "--out", str(tmp_path / "local.npz")], capsys)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                      dashboard_address=":0") as cluster:
        remote = run([*argv, "--out", str(tmp_path / "dask.npz"), "--scheduler",
                      cluster.scheduler_address, "--timeout", "60"], capsys)
        # a worker's address answers in Dask's protocol, but it is not the scheduler
        worker = cluster.workers[0].address
        assert main([*argv, "--out", str(tmp_path / "w.npz"), "--scheduler", worker,
                     "--timeout", "30"]) == 2
        assert "it does not speak Dask's protocol (it answered as a Dask Worker, not the " \
               "scheduler)" in capsys.readouterr().err
    words = [re.search(r"; ([\d,]+) words in \d+ rounds;", out.out).group(1)
             for out in (local, remote)]
    assert words[0] == words[1]
