"""ServerApps started warm: forked from a process that has already imported them.

Flower's SuperExec starts every run's ServerApp as a new ``flwr-serverapp``
process, which imports Flower and then kernelscale, NumPy, SciPy and
scikit-learn before it asks for its run: about 4 s of CPU on the 2-core
development machine, paid by every ``flwr run`` (``python -X importtime``;
``benchmarks/results/flower_rounds``). This module keeps one process that has
imported all of that (:func:`serve`, listening on a Unix socket only its user
can open), and a stand-in ``flwr-serverapp`` (:func:`write_stand_in`) that the
SuperExec finds first on its ``PATH``. The stand-in imports nothing but the
standard library; it hands its arguments, environment, working folder and
standard streams to the warm process, which forks a monitor, which forks the
ServerApp and reports its process id and exit status back. The stand-in
passes SIGTERM, SIGINT and SIGHUP on to the ServerApp and ends as it ended
(its exit status, or the signal that ended it), so the SuperExec sees what it
would have seen. Where the warm process does not
answer, the stand-in runs the stock ``flwr-serverapp`` instead.

:class:`~kernelscale.backends.flower.local.LocalFederation` starts both
(``warm_serverapp=True``, the default). A deployment may do the same on the
operator's machine::

    python -m kernelscale.backends.flower.warm_serverapp serve /srv/kernelscale/warm.sock &
    python -m kernelscale.backends.flower.warm_serverapp stand-in /srv/kernelscale/bin \\
        /srv/kernelscale/warm.sock
    PATH=/srv/kernelscale/bin:$PATH flower-superexec ...

Forking after the imports is safe here because the warm process opens no
connection, reads no run and starts no thread of its own before it forks (the
BLAS library's idle workers are re-created in the child by the library's own
fork handlers, as with ``multiprocessing``); each ServerApp then runs as the
stock one would, from its own arguments and environment.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from pathlib import Path

#: What the warm process imports before it forks: Flower's ServerApp and kernelscale's.
PRELOAD = ("flwr.superlink.cli", "kernelscale.backends.flower.app",
           "kernelscale.backends.flower.fitting", "kernelscale.federated",
           "kernelscale.horizontal", "kernelscale.vertical", "sklearn.cluster")
#: The stand-in's command name: the one Flower's SuperExec starts a ServerApp with.
COMMAND = "flwr-serverapp"
_MAX_REQUEST = 1 << 22


def serve(socket_path: str | os.PathLike) -> None:
    """Import :data:`PRELOAD`, then fork a ServerApp for every stand-in that connects.

    Runs until SIGTERM or SIGINT. The socket is created with mode 0600 in a folder
    that must exist; a file already there is replaced.
    """
    import importlib
    import warnings

    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except ImportError as exc:  # a part not installed: its runs import it themselves
            warnings.warn(f"warm ServerApp: could not preload {name}: {exc}", RuntimeWarning,
                          stacklevel=1)
    path = Path(socket_path)
    path.unlink(missing_ok=True)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old_mask = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old_mask)
    listener.listen(16)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the monitors are reaped by the kernel
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        while True:
            connection, _ = listener.accept()
            if os.fork() == 0:
                listener.close()
                code = 1
                try:
                    code = _monitor(connection)
                finally:
                    os._exit(code)
            connection.close()
    finally:
        listener.close()
        path.unlink(missing_ok=True)


def _receive(connection: socket.socket) -> tuple[dict, list[int]]:
    data, fds, _, _ = socket.recv_fds(connection, _MAX_REQUEST, 3)
    while not data.endswith(b"\n"):
        more = connection.recv(_MAX_REQUEST)
        if not more:
            raise ConnectionError("the stand-in closed before its request ended")
        data += more
    if len(fds) != 3:
        raise ConnectionError(f"the stand-in sent {len(fds)} streams, not 3")
    return json.loads(data), fds


def _monitor(connection: socket.socket) -> int:
    """One stand-in's ServerApp: fork it, send its pid, wait for it, send its status."""
    for name in ("SIGCHLD", "SIGTERM"):
        signal.signal(getattr(signal, name), signal.SIG_DFL)
    request, fds = _receive(connection)
    child = os.fork()
    if child == 0:
        connection.close()
        os._exit(_run_serverapp(request, fds))
    for fd in fds:
        os.close(fd)
    print(f"kernelscale: warm ServerApp process {child} started", flush=True)
    connection.sendall(f"{child}\n".encode())
    _, status = os.waitpid(child, 0)
    connection.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
    return 0


def _run_serverapp(request: dict, fds: list[int]) -> int:
    """In the forked child: become the stand-in's process, then run ``flwr-serverapp``."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
            os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = list(request["argv"])
        from flwr.superlink.cli import flwr_serverapp

        try:
            result = flwr_serverapp()
            code = result if isinstance(result, int) else 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # the ServerApp's own failure: say it, as the stock one would
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    return code


# ----------------------------------------------------------------------------------
# The stand-in: only the standard library, so that it starts in milliseconds.


def stand_in(socket_path: str, stock: str, argv: list[str]) -> int:
    """Run ``flwr-serverapp argv`` in the warm process at ``socket_path`` (or ``stock``)."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(socket_path)
    except OSError:  # no warm process: the stock command, as if nothing stood in
        connection.close()
        os.execv(stock, [stock, *argv])
    request = json.dumps({"argv": [COMMAND, *argv], "env": dict(os.environ),
                          "cwd": os.getcwd()}).encode() + b"\n"
    socket.send_fds(connection, [request], [0, 1, 2])
    reader = connection.makefile("rb")
    line = reader.readline()
    if not line:
        print("kernelscale: the warm ServerApp process closed before it started the "
              "ServerApp", file=sys.stderr)
        return 1
    child = int(line)

    def forward(signum, _frame):
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    for name in ("SIGTERM", "SIGINT", "SIGHUP"):
        signal.signal(getattr(signal, name), forward)
    line = reader.readline()
    code = int(line) if line else 1
    if code < 0:  # ended by a signal: so does the stand-in, as the stock process would
        if -code != signal.SIGKILL:
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


def write_stand_in(folder: str | os.PathLike, socket_path: str | os.PathLike,
                   stock: str | None = None) -> Path:
    """Write the executable ``folder/flwr-serverapp`` that stands in for the stock one."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if stock is None:
        stock = str(Path(sys.executable).parent / COMMAND)
    script = folder / COMMAND
    script.write_text(
        f"#!{sys.executable} -S\n"
        "# kernelscale's stand-in for flwr-serverapp: see "
        "kernelscale/backends/flower/warm_serverapp.py\n"
        "import runpy, sys\n"
        f"module = runpy.run_path({str(Path(__file__).resolve())!r})\n"
        f"sys.exit(module['stand_in']({str(socket_path)!r}, {stock!r}, sys.argv[1:]))\n")
    script.chmod(0o755)
    return script


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kernelscale.backends.flower.warm_serverapp",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="import the ServerApp, then fork one per stand-in"
                   ).add_argument("socket")
    write = sub.add_parser("stand-in", help="write FOLDER/flwr-serverapp for a SuperExec's PATH")
    write.add_argument("folder")
    write.add_argument("socket")
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.socket)
    else:
        print(write_stand_in(args.folder, args.socket))
    return 0


if __name__ == "__main__":
    sys.exit(main())
