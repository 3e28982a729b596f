"""The warm ServerApp (``kernelscale.backends.flower.warm_serverapp``) against the stock
``flwr-serverapp``: the stand-in must behave as the command it stands in for (its
output, its exit status, the signals it is sent), with the ServerApp forked from the
warm process. The federations of ``test_flower.py`` and ``test_flower_deploy.py`` run
every ServerApp this way (``LocalFederation``'s default)."""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("flwr")
psutil = pytest.importorskip("psutil")

from kernelscale.backends.flower.warm_serverapp import COMMAND, write_stand_in  # noqa: E402

STOCK = str(Path(sys.executable).parent / COMMAND)
TIMEOUT = 60.0
# A Runtime API address where nothing listens: the ServerApp retries until stopped.
NOWHERE = ["--runtime-api-address", "127.0.0.1:1", "--token", "abc", "--insecure"]


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A warm process listening on a socket, and a stand-in pointing at it."""
    folder = tmp_path_factory.mktemp("warm")
    sock = folder / "s.sock"
    server = subprocess.Popen([sys.executable, "-m", "kernelscale.backends.flower.warm_serverapp",
                               "serve", str(sock)], stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not sock.exists():
            assert server.poll() is None, "the warm process exited"
            assert time.monotonic() < deadline, "the warm process did not listen"
            psutil.wait_procs([psutil.Process(server.pid)], timeout=0.05)
        yield server, write_stand_in(folder / "bin", sock)
    finally:
        for child in psutil.Process(server.pid).children(recursive=True):
            child.kill()
        server.terminate()
        server.wait(30)
    assert not sock.exists()  # it removes its socket when it ends


def _run(command, *args) -> subprocess.CompletedProcess:
    return subprocess.run([str(command), *args], capture_output=True, text=True,
                          timeout=TIMEOUT, stdin=subprocess.DEVNULL)


ARGS = {"--help": 0, "--no-such-option": 2}


@pytest.fixture(scope="module")
def stock():
    """What the stock command prints and returns for each of :data:`ARGS`."""
    return {args: _run(STOCK, args) for args in ARGS}


def _same(got, expected) -> bool:
    return (got.returncode, got.stdout, got.stderr) == \
        (expected.returncode, expected.stdout, expected.stderr)


def test_the_stand_in_prints_and_exits_as_the_stock_command(warm, stock):
    _, stand_in = warm
    for args, code in ARGS.items():
        got = _run(stand_in, args)
        assert _same(got, stock[args]) and got.returncode == code


def test_without_the_warm_process_the_stand_in_runs_the_stock_command(tmp_path, stock):
    stand_in = write_stand_in(tmp_path / "bin", tmp_path / "nobody-listens.sock")
    got = _run(stand_in, "--help")
    assert _same(got, stock["--help"]) and "usage: flwr-serverapp" in got.stdout


def _lines(stream) -> queue.Queue:
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in stream], daemon=True).start()
    return lines


def _wait_for(lines: queue.Queue, text: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    seen = []
    while not any(text in line for line in seen):
        assert time.monotonic() < deadline, f"no {text!r} in:\n{''.join(seen)}"
        try:
            seen.append(lines.get(timeout=1.0))
        except queue.Empty:
            pass


def _start(command) -> tuple[subprocess.Popen, queue.Queue]:
    process = subprocess.Popen([str(command), *NOWHERE], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
    return process, _lines(process.stdout)


def _end(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.kill()
        process.wait()
    process.stdout.close()


def test_the_serverapp_runs_in_the_warm_process_and_its_end_is_the_stand_ins(warm):
    server, stand_in = warm
    process, lines = _start(stand_in)
    try:
        _wait_for(lines, "Connection attempt failed")
        # The ServerApp is the warm process's grandchild (under its monitor), not the
        # stand-in's child: it imported nothing itself.
        forked = [p for p in psutil.Process(server.pid).children(recursive=True)
                  if p.ppid() != server.pid]
        assert len(forked) == 1 and not psutil.Process(process.pid).children()
        forked[0].kill()
        assert process.wait(TIMEOUT) == -signal.SIGKILL
    finally:
        _end(process)


def test_sigterm_stops_the_serverapp_as_it_stops_the_stock_one(warm):
    """Flower's handler answers SIGTERM: the task stops, and both exit alike."""
    _, stand_in = warm
    started = [_start(stand_in), _start(STOCK)]
    try:
        for process, lines in started:
            _wait_for(lines, "Connection attempt failed")
            process.send_signal(signal.SIGTERM)
        for _, lines in started:
            _wait_for(lines, "Task stopped by user")
        codes = [process.wait(TIMEOUT) for process, _ in started]
        assert codes[0] == codes[1] == 0
    finally:
        for process, _ in started:
            _end(process)
