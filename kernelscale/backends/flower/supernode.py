"""``flower-supernode`` with a long-lived ClientApp process and short waits.

Where a round's time goes with the stock ``flower-supernode`` (Flower 1.42; the
measurements are in ``benchmarks/results/flower_rounds/``):

* every message starts a fresh ``flwr-clientapp`` process (Python, about 1.8 s
  of flwr imports, the app bundle unpacked, the ClientApp loaded), launched by
  the node's SuperExec, which looks for work every second;
* the SuperNode's loop sleeps a fixed 3 s whenever a poll of the SuperLink
  finds no message (``flwr/supernode/start_client_internal.py``), and 0.5 s at
  a time while it waits for the ClientApp's reply;
* a message is handed out before its content arrives, and the node then waits
  1 s before it asks for the content again (``PULL_INITIAL_BACKOFF``).

This launcher runs the same SuperNode, with the same arguments, but in Flower's
process isolation mode (``--isolation process``) with one long-lived
:mod:`~kernelscale.backends.flower.executor` process beside it (started here,
it exits with the node), with short waits (:class:`_Waits`): the node polls the
SuperLink every ``KERNELSCALE_SUPERNODE_IDLE_SECONDS`` (default 0.02 s) for
:data:`ACTIVE_SECONDS` after a message, every :data:`IDLE_POLL_SECONDS` when the
federation is idle (each poll is a request the SuperLink serves: three nodes
polling every 20 ms kept most of a core busy on a 2-core machine), looks for
its ClientApp's reply every :data:`REPLY_CHECK_SECONDS` (a look in its own
state, no request), hands a message's task to the ClientApp process only once
it holds the message's content (:class:`_ContentFirst`) and then wakes it up
through a pipe (it polls every 0.5 s otherwise: three ClientApp processes
polling every 20 ms were a third of a trivial round's HTTP requests), and waits
10 ms at first for a message's content.
:class:`~kernelscale.backends.flower.local.LocalFederation` starts its nodes
through it, and a deployment may too::

    python -m kernelscale.backends.flower.supernode --insecure --superlink 10.0.0.5:9093 \\
        --port 9094 --node-config 'partition-id=0 partition-path="/data/p0.npy"'

``--isolation subprocess`` given explicitly keeps Flower's process per message.
The executor uses the node's Runtime API as the node serves it (over TLS with
``--ssl-certfile``, verified with ``--ssl-ca-certfile``), and ends with the
node, however the node ends (SIGTERM, SIGKILL) and whatever signal
dispositions it was started with
(:func:`~kernelscale.backends.flower.executor.exit_with_parent`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
import warnings

IDLE_ENV = "KERNELSCALE_SUPERNODE_IDLE_SECONDS"
DEFAULT_IDLE_SECONDS = 0.02
FLOWER_WAITS = (3, 0.5)  # the fixed waits of Flower 1.42's SuperNode loop


#: After a message, the node polls the SuperLink at its short interval this long (a fit's
#: next round comes within the master's own work); then every IDLE_POLL_SECONDS.
ACTIVE_SECONDS = 5.0
IDLE_POLL_SECONDS = 0.2
#: How often the node looks in its own state for its ClientApp's reply (no request).
REPLY_CHECK_SECONDS = 0.005


class _Waits:
    """The ``time`` module as the SuperNode's loop sees it: its fixed waits shortened.

    Flower's loop sleeps 3 s after a poll of the SuperLink that found no message
    and 0.5 s at a time while its ClientApp works. Here the first becomes
    ``poll_seconds`` for ``active_seconds`` after the last message
    (:meth:`saw_message`) and ``idle_seconds`` after that; the second
    ``reply_seconds``.
    """

    def __init__(self, poll_seconds: float, idle_seconds: float = IDLE_POLL_SECONDS,
                 active_seconds: float = ACTIVE_SECONDS,
                 reply_seconds: float = REPLY_CHECK_SECONDS, clock=time):
        self.poll_seconds, self.idle_seconds = poll_seconds, max(idle_seconds, poll_seconds)
        self.active_seconds, self.reply_seconds = active_seconds, reply_seconds
        self._clock = clock
        self._active_until = clock.monotonic() + active_seconds  # a run may start at once

    def __getattr__(self, name):
        return getattr(self._clock, name)

    def saw_message(self) -> None:
        self._active_until = self._clock.monotonic() + self.active_seconds

    def sleep(self, seconds: float) -> None:
        if seconds == FLOWER_WAITS[0]:
            active = self._clock.monotonic() < self._active_until
            seconds = self.poll_seconds if active else self.idle_seconds
        elif seconds == FLOWER_WAITS[1]:
            seconds = self.reply_seconds
        self._clock.sleep(seconds)


class _ContentFirst:
    """Hand a message's task to the ClientApp process only once the node holds its content.

    Flower's node loop creates the task before it pulls the message's objects from
    the SuperLink, so the ClientApp process takes the task at once and asks its
    node for objects that are not there yet, again and again (each a request the
    node serves while it pulls them). Here a task created while the loop pulls a
    message stays unclaimable (``claim_task`` answers ``None``, as for a task taken
    already) until the pull returns.
    """

    def __init__(self):
        self._hidden: set = set()
        self._pulling = False
        self._lock = threading.Lock()
        self._states: list = []

    def watch(self, state) -> None:
        """Wrap ``state``'s ``create_task`` and ``claim_task`` (once per state)."""
        if any(state is seen for seen in self._states):
            return
        self._states.append(state)
        create, claim = state.create_task, state.claim_task

        def create_task(*args, **kwargs):
            task_id = create(*args, **kwargs)
            if self._pulling and task_id is not None:
                with self._lock:
                    self._hidden.add(task_id)
            return task_id

        def claim_task(task_id, *args, **kwargs):
            with self._lock:
                if task_id in self._hidden:
                    return None
            return claim(task_id, *args, **kwargs)

        state.create_task, state.claim_task = create_task, claim_task

    def pulling(self, state):
        """A context: tasks created inside it are hidden until it ends."""
        from contextlib import contextmanager

        @contextmanager
        def block():
            self.watch(state)
            self._pulling = True
            try:
                yield
            finally:
                self._pulling = False
                with self._lock:
                    self._hidden.clear()

        return block()


def _wrap_pull(module, waits: _Waits, content_first: _ContentFirst,
               wake_fd: int | None = None) -> None:
    """Around the node loop's pull of a message: its task hidden until the content is
    stored (``content_first``), then ``waits`` told and a byte written to ``wake_fd``
    (the ClientApp process waits on the pipe's other end instead of polling)."""
    pull = module._pull_and_store_message

    def pull_and_store(*args, **kwargs):
        state = kwargs.get("state")
        if state is None or not callable(getattr(state, "claim_task", None)):
            run_id = pull(*args, **kwargs)
        else:
            with content_first.pulling(state):
                run_id = pull(*args, **kwargs)
        if run_id is not None:
            waits.saw_message()
            if wake_fd is not None:
                try:
                    os.write(wake_fd, b"\0")
                except OSError:  # the pipe is full (it is awake) or the executor is gone
                    pass
        return run_id

    module._pull_and_store_message = pull_and_store


def _option(argv: list[str], name: str, default: str) -> str:
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return default


def _short_object_waits(module) -> None:
    """The node waits 10 ms, not Flower's 1 s, for a message whose content is on its way.

    The SuperLink hands a message to the node as soon as the ServerApp announced
    it, before its objects arrive; the node's ``pull_objects`` then waits 1 s,
    2 s... between tries (``PULL_INITIAL_BACKOFF``).
    """
    from functools import partial

    from flwr.supercore.inflatable.inflatable_utils import pull_objects

    from kernelscale.backends.flower.wire import OBJECT_BACKOFF_SECONDS

    if getattr(module, "pull_objects", None) is pull_objects:
        first, cap = OBJECT_BACKOFF_SECONDS
        module.pull_objects = partial(pull_objects, initial_backoff=first, backoff_cap=cap)


def _executor_supported() -> bool:
    """Does this Flower have the Runtime API that the long-lived ClientApp uses?"""
    try:
        from flwr.proto.runtime_pb2 import AcquireTaskRequest  # noqa: F401
        from flwr.supercore.runtime import RuntimeHttpClient  # noqa: F401
        from flwr.supernode.runtime.run_clientapp import push_message  # noqa: F401
    except ImportError:
        warnings.warn("This Flower version has no Runtime API for a long-lived ClientApp; "
                      "the SuperNode starts a ClientApp process per message.",
                      RuntimeWarning, stacklevel=2)
        return False
    return True


def main() -> int:
    from flwr.supercore.constant import SUPERNODE_UVICORN_DEFAULT_PORT, UVICORN_DEFAULT_HOST
    from flwr.supernode import start_client_internal
    from flwr.supernode.cli import flower_supernode

    idle = float(os.environ.get(IDLE_ENV, DEFAULT_IDLE_SECONDS))
    argv = sys.argv[1:]
    secret = _option(argv, "--superexec-auth-secret-file", "")
    if secret:  # the long-lived executor does not speak SuperExec authentication
        warnings.warn("--superexec-auth-secret-file: the SuperNode starts Flower's own "
                      "ClientApp process per message (no long-lived executor).",
                      RuntimeWarning, stacklevel=1)
    use_executor = _option(argv, "--isolation", "") == "" and not secret and _executor_supported()
    wake = os.pipe() if use_executor else None  # the node wakes its executor up
    if wake is not None:
        os.set_blocking(wake[1], False)
    _short_object_waits(start_client_internal)
    if (getattr(start_client_internal, "time", None) is time
            and callable(getattr(start_client_internal, "_pull_and_store_message", None))):
        waits = _Waits(idle)
        start_client_internal.time = waits
        _wrap_pull(start_client_internal, waits, _ContentFirst(),
                   None if wake is None else wake[1])
    else:  # another Flower layout: run it unchanged
        warnings.warn("This Flower version's SuperNode loop is not the one this launcher "
                      "knows; running it with its own waits.", RuntimeWarning, stacklevel=1)
    if use_executor:
        host = _option(argv, "--host", UVICORN_DEFAULT_HOST)
        port = _option(argv, "--port", str(SUPERNODE_UVICORN_DEFAULT_PORT))
        host = f"[{host}]" if ":" in host else host
        if host in ("0.0.0.0", "[::]"):
            host = "127.0.0.1"
        argv += ["--isolation", "process"]
        executor = subprocess.Popen(
            [sys.executable, "-m", "kernelscale.backends.flower.executor",
             "--runtime-api-address", f"{host}:{port}", "--poll-seconds", str(idle),
             "--parent-pid", str(os.getpid()), "--wake-fd", str(wake[0]),
             *_runtime_tls(argv)], pass_fds=(wake[0],))
        os.close(wake[0])
    else:
        executor = None
    sys.argv = ["flower-supernode", *argv]
    from kernelscale.backends.flower.connection import NodeErrors, explain_node_failure

    try:
        with NodeErrors() as errors:
            return flower_supernode()
    except SystemExit as exc:  # Flower's exit: say why a node could not join (issue 43)
        why = explain_node_failure(argv, errors.messages) if exc.code else ""
        if why:
            print(why, file=sys.stderr, flush=True)
        raise
    finally:  # the node ends (SIGTERM, an error): its executor with it
        if executor is not None and executor.poll() is None:
            executor.terminate()
            try:
                executor.wait(5)
            except subprocess.TimeoutExpired:
                executor.kill()
                executor.wait()


def _runtime_tls(argv: list[str]) -> list[str]:
    """The executor's TLS options for the node's Runtime API: the node serves it over TLS
    with ``--ssl-certfile``; ``--ssl-ca-certfile`` is the CA to verify it with."""
    if not _option(argv, "--ssl-certfile", ""):
        return []
    ca = _option(argv, "--ssl-ca-certfile", "")
    return ["--tls", *(["--root-certificates", ca] if ca else [])]


if __name__ == "__main__":
    sys.exit(main())
