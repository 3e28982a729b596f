"""Rounds on Flower's Grid, in the ServerApp's own process: :class:`GridCluster`.

A ServerApp receives a ``Grid`` (Flower's handle on the SuperLink's nodes). A
:class:`GridCluster` is a :class:`~kernelscale.runtime.Cluster` built on it: each
round pushes one Message per SuperNode and pulls the replies as they arrive,
in the same process, with no socket or file beside Flower's own channels. So a
master function runs unchanged inside a ServerApp; the fitting app
(:mod:`kernelscale.backends.flower.fitting`) does exactly that::

    @app.main()
    def main(grid, context):
        with GridCluster(grid, n_workers=3) as cluster:
            result = fk_kmeans(cluster, 10, random_state=0)

:func:`grid_round` is the one round on the Grid that both this cluster and the
relay of :class:`~kernelscale.backends.flower.cluster.FlowerCluster` run.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from kernelscale.backends.flower.rounds import FlowerRounds
from kernelscale.backends.flower.wire import LOST_CODES, NODE_CHECK_SECONDS, POLL_SECONDS


def _copy(content):
    from kernelscale.backends.flower.wire import from_bytes, to_bytes

    return from_bytes(to_bytes(content))


def grid_round(grid, request: dict, contents: list, emit: Callable) -> None:
    """Push one message per node, report every reply (or loss) with ``emit``, then ``done``.

    ``request``: ``round``, ``timeout``, ``messages`` (``[node, message type]`` per
    content), optionally ``need`` (replies that end the round early) and ``grow``
    (send the first message to nodes that join meanwhile). ``emit(event,
    content=None)`` gets ``{"event": "reply", "index": i}`` with the reply's
    RecordDict, ``{"event": "lost" | "error", "index": i, "reason": ...}``,
    ``{"event": "joined", "index": i, "node": n}`` and last ``{"event": "done",
    "missing": [...]}``.

    A node is lost when Flower answers with an error for it (node unavailable,
    message unavailable: the SuperNode left or stopped sending heartbeats) or
    when it leaves the Grid's node list; the round ends when every node has
    answered or is lost, or at the timeout (``missing``).
    """
    from flwr.app import Message

    timeout = float(request["timeout"])
    messages = [Message(content, dst_node_id=int(node), message_type=kind,
                        group_id=str(request["round"]), ttl=timeout + 60.0)
                for (node, kind), content in zip(request["messages"], contents, strict=True)]
    first = _copy(contents[0]) if request.get("grow") and contents else None
    ids = list(grid.push_messages(messages))
    index = {mid: i for i, mid in enumerate(ids) if mid}
    pending = dict(index)
    for i, mid in enumerate(ids):
        if not mid:
            emit({"event": "lost", "index": i, "reason": "the SuperLink refused the message"})
    need = int(request.get("need") or len(messages))
    answered = 0  # a node that is lost (Flower's error for a dead node) answers nothing
    deadline = time.monotonic() + timeout
    next_check = time.monotonic() + NODE_CHECK_SECONDS

    def waiting() -> bool:  # with grow, a node may still join after the others answered
        return bool(pending or first is not None) and answered < need

    while waiting() and time.monotonic() < deadline:
        for reply in grid.pull_messages(list(pending)) if pending else ():
            i = pending.pop(reply.metadata.reply_to_message_id, None)
            if i is None:
                continue
            if reply.has_error():
                code, reason = int(reply.error.code), str(reply.error.reason)
                event = "lost" if code in LOST_CODES else "error"
                answered += event == "error"
                emit({"event": event, "index": i, "reason": reason})
            else:
                answered += 1
                emit({"event": "reply", "index": i}, reply.content)
        if waiting() and time.monotonic() > next_check:
            alive = set(grid.get_node_ids())
            for mid, i in list(pending.items()):
                if messages[i].metadata.dst_node_id not in alive:
                    del pending[mid]
                    emit({"event": "lost", "index": i, "reason": "the node left the federation"})
            if first is not None:  # the same message to the nodes that joined meanwhile
                asked = {m.metadata.dst_node_id for m in messages}
                for node in sorted(alive - asked):
                    message = Message(_copy(first), dst_node_id=int(node),
                                      message_type=messages[0].metadata.message_type,
                                      group_id=str(request["round"]), ttl=timeout + 60.0)
                    mid = next(iter(grid.push_messages([message])), None)
                    messages.append(message)
                    emit({"event": "joined", "index": len(messages) - 1, "node": int(node)})
                    if mid:
                        pending[mid] = len(messages) - 1
                    else:
                        emit({"event": "lost", "index": len(messages) - 1,
                              "reason": "the SuperLink refused the message"})
            next_check = time.monotonic() + NODE_CHECK_SECONDS
        if waiting():
            time.sleep(POLL_SECONDS)
    emit({"event": "done", "missing": sorted(pending.values())})


def short_object_waits() -> None:
    """Let the Grid wait 10 ms, not Flower's 1 s, for a reply whose content is on its way.

    The SuperLink lists a reply as soon as the node announced it, before its
    objects arrive; ``HttpGrid.pull_messages`` then waits 1 s, 2 s... between
    tries (``PULL_INITIAL_BACKOFF``). Every round paid a second for it.
    """
    from functools import partial

    from kernelscale.backends.flower.wire import OBJECT_BACKOFF_SECONDS

    try:
        from flwr.supercore.inflatable.inflatable_utils import pull_objects
        from flwr.superlink.grid import http_grid
    except ImportError:  # another Flower layout: its own waits
        return
    if getattr(http_grid, "pull_objects", None) is pull_objects:
        first, cap = OBJECT_BACKOFF_SECONDS
        http_grid.pull_objects = partial(pull_objects, initial_backoff=first, backoff_cap=cap)


class GridCluster(FlowerRounds):
    """A cluster of SuperNodes driven from inside a ServerApp, through its ``Grid``.

    Parameters
    ----------
    grid : flwr.serverapp.Grid
        The Grid the ServerApp's ``main`` received.
    n_workers : int
        Number of partitions; the SuperNodes must carry ``partition-id`` 0 to
        ``n_workers - 1`` in their node config.
    start_timeout : float, default=180
        Seconds to wait for ``n_workers`` SuperNodes to be connected.
    data_key, timeout, lost, secure_rounds, secure_range, secure_levels, secure_threshold
        As in :class:`~kernelscale.backends.flower.cluster.FlowerCluster`.

    Notes
    -----
    Closing it (an estimator closes its cluster after the fit) sends nothing:
    the nodes' state ends with the run.
    """

    where = "the SuperLink of this run"

    def __init__(self, grid, n_workers: int, *, start_timeout: float = 180.0, **options):
        if not start_timeout > 0:
            raise ValueError("start_timeout must be a positive number of seconds.")
        super().__init__(n_workers, **options)
        self.grid = grid
        self._open = True
        short_object_waits()
        start = time.perf_counter()
        self._find_nodes(time.monotonic() + start_timeout)
        self.startup_seconds = time.perf_counter() - start

    def _check_open(self) -> None:
        if not self._open:
            raise RuntimeError("This GridCluster is closed; open a new one.")

    def _list_nodes(self) -> list[int]:
        self._check_open()
        return [int(n) for n in self.grid.get_node_ids()]

    def _round(self, round: str, messages: list, timeout: float, need: int = 0,
               joined: list | None = None) -> dict:
        from kernelscale.backends.flower.wire import QUERY

        self._check_open()
        events: dict = {}

        def emit(event: dict, content=None) -> None:
            kind = event["event"]
            if kind == "done":
                for i in event["missing"]:
                    events[i] = ("lost", f"no reply within the round timeout ({timeout:g} s)")
            elif kind == "joined":
                joined.append(int(event["node"]))
            elif kind == "reply":
                events[event["index"]] = ("reply", content)
            else:
                events[event["index"]] = (kind, event["reason"])

        request = {"round": round, "timeout": timeout, "need": need,
                   "grow": joined is not None,
                   "messages": [[int(node), QUERY] for node, _ in messages]}
        grid_round(self.grid, request, [content for _, content in messages], emit)
        return events

    def _secure_sum(self, header: dict, blobs: list[bytes]):
        from kernelscale.backends.flower.secagg import grid_secure_sum

        self._check_open()
        return grid_secure_sum(self.grid, header, blobs)

    def close(self) -> None:
        self._open = False


__all__ = ["GridCluster", "grid_round", "short_object_waits"]
