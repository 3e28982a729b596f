"""The processes a :class:`~kernelscale.backends.flower.local.LocalFederation` started.

Their children (a SuperLink's SuperExec, the ServerApps, a node's ClientApp processes) found
and ended, and every running federation of this process stopped when the
process gets SIGTERM or SIGHUP (issue 47), as it is at the end of a ``with``
block or on SIGINT.
"""

from __future__ import annotations

import os
import signal
import time

#: The federations of this process that are running (stopped on SIGTERM and SIGHUP).
RUNNING: list = []
_PREVIOUS_HANDLERS: dict = {}


def stop_with_the_script(federation) -> None:
    """Stop ``federation`` when this process gets SIGTERM or SIGHUP (issue 47).

    A handler for each (installed once, from the main thread; where another thread
    starts the federation, the signals keep their handlers) stops every running
    federation, then gives the signal to the handler that was there before, or, for
    the default action, delivers it again: the process ends as it would have.
    """
    import threading

    if federation not in RUNNING:
        RUNNING.append(federation)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if sig is not None and sig not in _PREVIOUS_HANDLERS:
            _PREVIOUS_HANDLERS[sig] = signal.signal(sig, _on_signal)


def _on_signal(sig, frame) -> None:
    for federation in list(RUNNING):
        federation.stop()
    previous = _PREVIOUS_HANDLERS.get(sig, signal.SIG_DFL)
    if callable(previous):
        previous(sig, frame)
    elif previous != signal.SIG_IGN:  # the default action: end as the signal says
        signal.signal(sig, signal.SIG_DFL)
        _PREVIOUS_HANDLERS.pop(sig, None)
        os.kill(os.getpid(), sig)


def child_processes(pid: int) -> list:
    try:
        import psutil

        return psutil.Process(pid).children(recursive=True)
    except Exception:  # psutil missing or the process is gone
        return []


def end_processes(processes: list) -> None:
    """SIGTERM, then SIGKILL after 10 s, the given psutil processes (SuperExec, apps)."""
    if not processes:
        return
    import psutil

    for p in processes:
        try:
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    alive = wait_ended(processes, 10.0)
    for p in alive:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    wait_ended(alive, 5.0)


def wait_ended(processes: list, timeout: float) -> list:
    """Wait until the psutil ``processes`` have ended; those still running at ``timeout``.

    A zombie has ended: these are the children of a process that was stopped (a killed
    node's ClientApp process), and only the process that adopted them (init) can reap them, when
    it gets to it (``psutil.wait_procs`` waited for that, 1.5 s here).
    """
    import psutil

    def running(p) -> bool:
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + timeout
    while True:
        alive = [p for p in processes if running(p)]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.02)


__all__ = ["RUNNING", "child_processes", "end_processes", "stop_with_the_script", "wait_ended"]
