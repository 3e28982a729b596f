"""``flower-supernode`` that runs kernelscale's ClientApp in its own process, with short waits.

Where a round's time goes with the stock ``flower-supernode`` (Flower 1.42; the
measurements are in ``benchmarks/results/flower_rounds/``):

* every message starts a fresh ``flwr-clientapp`` process (Python, about 1.8 s
  of flwr imports, the app bundle unpacked, the ClientApp loaded), launched by
  the node's SuperExec, which looks for work every second; that process then
  talks to the node over its Runtime API, about 14 HTTP requests a message;
* the SuperNode's loop sleeps a fixed 3 s whenever a poll of the SuperLink
  finds no message (``flwr/supernode/start_client_internal.py``), and 0.5 s at
  a time while it waits for the ClientApp's reply;
* a message is handed out before its content arrives, and the node then waits
  1 s before it asks for the content again (``PULL_INITIAL_BACKOFF``).

This launcher runs the same SuperNode, with the same arguments, in Flower's
process isolation mode (``--isolation process``: the node starts no SuperExec),
and runs each message's task itself, in the node's loop, as soon as the
message and its content are stored (:mod:`~kernelscale.backends.flower.in_node`:
the node's own state, no request, no other process); the loop then pushes the
reply as usual. Its waits are short (:class:`_Waits`): the node polls the
SuperLink every ``KERNELSCALE_SUPERNODE_IDLE_SECONDS`` (default 0.02 s) for
:data:`ACTIVE_SECONDS` after a message and every :data:`IDLE_POLL_SECONDS` when
the federation is idle, and never sooner than
``KERNELSCALE_SUPERNODE_POLL_LATENCY_FACTOR`` (default
:data:`POLL_LATENCY_FACTOR`) times as long as its last empty poll took (each poll
is a request the SuperLink serves on one core: three nodes polling every 20 ms
kept most of a core busy on a 2-core machine, and ten made every round slower),
and it waits 10 ms at first for a message's content.
:class:`~kernelscale.backends.flower.local.LocalFederation` starts its nodes
through it, and a deployment may too::

    python -m kernelscale.backends.flower.supernode --insecure --superlink 10.0.0.5:9093 \\
        --port 9094 --node-config 'partition-id=0 partition-path="/data/p0.npy"'

``--isolation subprocess`` (or ``process``) given explicitly keeps Flower's own
ClientApp processes (a process per message, or one the operator starts).
"""

from __future__ import annotations

import os
import sys
import time
import warnings

IDLE_ENV = "KERNELSCALE_SUPERNODE_IDLE_SECONDS"
LATENCY_ENV = "KERNELSCALE_SUPERNODE_POLL_LATENCY_FACTOR"
DEFAULT_IDLE_SECONDS = 0.02
FLOWER_WAITS = (3, 0.5)  # the fixed waits of Flower 1.42's SuperNode loop


#: After a message, the node polls the SuperLink at its short interval this long (a fit's
#: next round comes within the master's own work); then every IDLE_POLL_SECONDS.
ACTIVE_SECONDS = 5.0
IDLE_POLL_SECONDS = 0.2
#: How often the node looks in its own state for its ClientApp's reply (no request).
REPLY_CHECK_SECONDS = 0.005
#: After a poll that found nothing, the node waits at least this many times as long as the
#: poll took. The SuperLink serves every poll on one core (milliseconds of CPU each), so
#: a busy SuperLink answers slowly and its nodes then poll less often: ten nodes polling
#: every 20 ms slowed every round (``benchmarks/results/flower_rounds/polls.md``).
POLL_LATENCY_FACTOR = 4.0


class _Waits:
    """The ``time`` module as the SuperNode's loop sees it: its fixed waits shortened.

    Flower's loop sleeps 3 s after a poll of the SuperLink that found no message
    and 0.5 s at a time while its ClientApp works. Here the first becomes
    ``poll_seconds`` for ``active_seconds`` after the last message
    (:meth:`saw_message`) and ``idle_seconds`` after that, or ``latency_factor``
    times as long as that poll took (:meth:`polled`) if longer; the second
    ``reply_seconds``.
    """

    def __init__(self, poll_seconds: float, idle_seconds: float = IDLE_POLL_SECONDS,
                 active_seconds: float = ACTIVE_SECONDS,
                 reply_seconds: float = REPLY_CHECK_SECONDS, clock=time,
                 latency_factor: float = POLL_LATENCY_FACTOR):
        self.poll_seconds, self.idle_seconds = poll_seconds, max(idle_seconds, poll_seconds)
        self.active_seconds, self.reply_seconds = active_seconds, reply_seconds
        self.latency_factor, self._last_poll = latency_factor, 0.0
        self._clock = clock
        self._active_until = clock.monotonic() + active_seconds  # a run may start at once

    def __getattr__(self, name):
        return getattr(self._clock, name)

    def saw_message(self) -> None:
        self._active_until = self._clock.monotonic() + self.active_seconds

    def polled(self, seconds: float) -> None:
        """A poll of the SuperLink that found no message took ``seconds``."""
        self._last_poll = seconds

    def sleep(self, seconds: float) -> None:
        if seconds == FLOWER_WAITS[0]:
            active = self._clock.monotonic() < self._active_until
            seconds = max(self.poll_seconds if active else self.idle_seconds,
                          self.latency_factor * self._last_poll)
        elif seconds == FLOWER_WAITS[1]:
            seconds = self.reply_seconds
        self._clock.sleep(seconds)


def _wrap_pull(module, waits: _Waits, run_here: bool) -> None:
    """Around the node loop's pull of a message: ``waits`` told, and with ``run_here`` the
    message's task run in this process (:func:`~kernelscale.backends.flower.in_node.
    run_pending_tasks`) before the loop goes on to push the reply."""
    pull = module._pull_and_store_message
    fab_cache: dict = {}

    def pull_and_store(*args, **kwargs):
        start = time.monotonic()
        run_id = pull(*args, **kwargs)
        if run_id is None:
            waits.polled(time.monotonic() - start)
        else:
            waits.saw_message()
            if run_here:
                from kernelscale.backends.flower.app import client_app
                from kernelscale.backends.flower.in_node import run_pending_tasks

                run_pending_tasks(kwargs["state"], kwargs["object_store"], client_app,
                                  fab_cache)
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


def _env_number(name: str, default: float) -> float:
    """The non-negative number in the environment variable ``name``, else ``default``."""
    text = os.environ.get(name, "").strip()
    try:
        value = float(text) if text else default
    except ValueError:
        value = -1.0
    if not value >= 0.0 or value == float("inf"):
        raise SystemExit(f"{name}={text!r}: give a number of 0 or more (default {default:g}).")
    return value


def main() -> int:
    from flwr.supernode import start_client_internal
    from flwr.supernode.cli import flower_supernode

    idle = _env_number(IDLE_ENV, DEFAULT_IDLE_SECONDS)
    argv = sys.argv[1:]
    run_here = _option(argv, "--isolation", "") == ""
    _short_object_waits(start_client_internal)
    if (getattr(start_client_internal, "time", None) is time
            and callable(getattr(start_client_internal, "_pull_and_store_message", None))):
        waits = _Waits(idle, latency_factor=_env_number(LATENCY_ENV, POLL_LATENCY_FACTOR))
        start_client_internal.time = waits
        _wrap_pull(start_client_internal, waits, run_here)
        if run_here:  # no SuperExec: this node runs its tasks itself
            argv += ["--isolation", "process"]
    else:  # another Flower layout: run it unchanged
        warnings.warn("This Flower version's SuperNode loop is not the one this launcher "
                      "knows; running it with its own waits and ClientApp processes.",
                      RuntimeWarning, stacklevel=1)
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


if __name__ == "__main__":
    sys.exit(main())
