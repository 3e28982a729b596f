"""The Flower app behind ``backend="flower"``: a relay ServerApp and the worker ClientApp.

Both are named in the app's ``pyproject.toml`` as
``kernelscale.backends.flower.app:server_app`` and ``...:client_app``, so the app
bundle (FAB) that Flower ships to the SuperLink and the SuperNodes holds no
code: every node runs the kernelscale installed in its own environment.

ClientApp (one SuperNode = one worker). A ``query.kernelscale`` message names a
registered worker step (:func:`kernelscale.runtime.steps.resolve_step`) and
carries its arguments in the wire format of :mod:`kernelscale.runtime.codec`;
nothing is unpickled. The node reads its partition from the file named in its
own node config (``--node-config 'partition-id=0 partition-path="/data/p0.npy"'``),
so no row passes through the server. Flower starts a fresh ``flwr-clientapp``
process for every message, so the worker's state between rounds (the
attributes the steps set on :class:`~kernelscale.runtime.WorkerState`) is kept,
encoded, in the ClientApp's ``context.state``, which stays on the SuperNode.

A ``train`` message is a secure round: SecAgg+ (``secaggplus_mod``) wraps the
same step so that the server receives only masked vectors
(:mod:`kernelscale.backends.flower.secagg`).

ServerApp (the relay). The master function runs in the user's process
(:class:`~kernelscale.backends.flower.cluster.FlowerCluster`); the ServerApp connects back
to it (address and key file in the run config) and turns each of its requests
into Flower Messages sent through the Grid, streaming the replies back as they
arrive. Records travel between the two as Flower's own protobuf encoding.
"""

from __future__ import annotations

import json
import time
import traceback
from multiprocessing.connection import Client

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.client.mod import secaggplus_mod
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from kernelscale.backends.flower.node import hello, run_step
from kernelscale.backends.flower.wire import (
    HEADER,
    LOST_CODES,
    NODE_CHECK_SECONDS,
    OBJECT_BACKOFF_SECONDS,
    POLL_SECONDS,
    from_bytes,
    put_payload,
    send,
    to_bytes,
)

# ----------------------------------------------------------------- the worker (ClientApp)

client_app = ClientApp()


@client_app.query("kernelscale")
def handle_query(message: Message, context: Context) -> Message:
    """Run one worker step (or answer the hello) on this node's partition."""
    header = message.content[HEADER]
    out = RecordDict()
    try:
        if header["op"] == "hello":
            out[HEADER] = ConfigRecord(hello(context, str(header["data-key"])))
        else:
            reply, seconds = run_step(header, message.content, context)
            out[HEADER] = ConfigRecord({"seconds": seconds})
            put_payload(out, "reply", reply)
    except Exception as exc:  # the server gets one line naming the failure
        out = RecordDict({HEADER: ConfigRecord({"error": f"{type(exc).__name__}: {exc}"})})
    return Message(out, reply_to=message)


@client_app.train(mods=[secaggplus_mod])
def handle_train(message: Message, context: Context) -> Message:
    """A secure round: our step inside SecAgg+'s collect stage (``secagg``)."""
    from kernelscale.backends.flower.secagg import handle_secure_train

    return handle_secure_train(message, context)


# ----------------------------------------------------------------- the relay (ServerApp)

server_app = ServerApp()


@server_app.main()
def relay(grid: Grid, context: Context) -> None:
    """Serve the FlowerCluster that started this run until it closes the connection."""
    _short_object_waits()
    config = context.run_config
    host, _, port = str(config["kernelscale-relay"]).rpartition(":")
    with open(str(config["kernelscale-key-file"]), "rb") as f:
        key = f.read()
    connection = Client((host, int(port)), authkey=key)
    try:
        while True:
            try:
                request = json.loads(connection.recv_bytes())
            except (EOFError, OSError):
                return
            op = request["op"]
            if op == "close":
                return
            try:
                if op == "nodes":
                    send(connection, {"nodes": [int(n) for n in grid.get_node_ids()]})
                elif op == "round":
                    blobs = [connection.recv_bytes() for _ in request["messages"]]
                    relay_round(grid, connection, request, blobs)
                elif op == "secure_sum":
                    from kernelscale.backends.flower.secagg import relay_secure_sum

                    blobs = [connection.recv_bytes() for _ in request["messages"]]
                    relay_secure_sum(grid, connection, request, blobs)
                else:
                    raise ValueError(f"unknown relay request {op!r}")
            except Exception as exc:  # the FlowerCluster raises it
                send(connection, {"event": "failed",
                                   "reason": f"{type(exc).__name__}: {exc}",
                                   "trace": traceback.format_exc(limit=5)})
    finally:
        connection.close()


def _short_object_waits() -> None:
    """Let the Grid wait 10 ms, not Flower's 1 s, for a reply whose content is on its way.

    The SuperLink lists a reply as soon as the node announced it, before its
    objects arrive; ``HttpGrid.pull_messages`` then waits 1 s, 2 s... between
    tries (``PULL_INITIAL_BACKOFF``). Every round paid a second for it.
    """
    from functools import partial

    try:
        from flwr.supercore.inflatable.inflatable_utils import pull_objects
        from flwr.superlink.grid import http_grid
    except ImportError:  # another Flower layout: its own waits
        return
    if getattr(http_grid, "pull_objects", None) is pull_objects:
        first, cap = OBJECT_BACKOFF_SECONDS
        http_grid.pull_objects = partial(pull_objects, initial_backoff=first, backoff_cap=cap)


def relay_round(grid: Grid, connection, request: dict, blobs: list[bytes]) -> None:
    """Push one message per node, stream every reply (or loss) back, then ``done``.

    A node is lost when Flower answers with an error for it (node unavailable,
    message unavailable: the SuperNode left or stopped sending heartbeats) or
    when it leaves the Grid's node list; the round ends when every node has
    answered or is lost, or at the timeout (``missing``).
    """
    timeout = float(request["timeout"])
    messages = [Message(from_bytes(blob), dst_node_id=int(node), message_type=kind,
                        group_id=str(request["round"]), ttl=timeout + 60.0)
                for (node, kind), blob in zip(request["messages"], blobs, strict=True)]
    ids = list(grid.push_messages(messages))
    index = {mid: i for i, mid in enumerate(ids) if mid}
    pending = dict(index)
    for i, mid in enumerate(ids):
        if not mid:
            send(connection, {"event": "lost", "index": i, "reason": "the SuperLink refused "
                               "the message"})
    need = int(request.get("need") or len(messages))  # replies that end the round early
    answered = 0
    deadline = time.monotonic() + timeout
    next_check = time.monotonic() + NODE_CHECK_SECONDS
    while pending and answered < need and time.monotonic() < deadline:
        for reply in grid.pull_messages(list(pending)):
            i = pending.pop(reply.metadata.reply_to_message_id, None)
            if i is None:
                continue
            answered += 1
            if reply.has_error():
                code, reason = int(reply.error.code), str(reply.error.reason)
                event = "lost" if code in LOST_CODES else "error"
                send(connection, {"event": event, "index": i, "reason": reason})
            else:
                send(connection, {"event": "reply", "index": i}, to_bytes(reply.content))
        if pending and time.monotonic() > next_check:
            alive = set(grid.get_node_ids())
            for mid, i in list(pending.items()):
                if messages[i].metadata.dst_node_id not in alive:
                    del pending[mid]
                    send(connection, {"event": "lost", "index": i,
                                       "reason": "the node left the federation"})
            if request.get("grow"):  # the same message to the nodes that joined meanwhile
                asked = {m.metadata.dst_node_id for m in messages}
                for node in sorted(alive - asked):
                    message = Message(from_bytes(blobs[0]), dst_node_id=int(node),
                                      message_type=messages[0].metadata.message_type,
                                      group_id=str(request["round"]), ttl=timeout + 60.0)
                    mid = next(iter(grid.push_messages([message])), None)
                    messages.append(message)
                    send(connection, {"event": "joined", "index": len(messages) - 1,
                                      "node": int(node)})
                    if mid:
                        pending[mid] = len(messages) - 1
                    else:
                        send(connection, {"event": "lost", "index": len(messages) - 1,
                                          "reason": "the SuperLink refused the message"})
            next_check = time.monotonic() + NODE_CHECK_SECONDS
        if pending and answered < need:
            time.sleep(POLL_SECONDS)
    send(connection, {"event": "done", "missing": sorted(pending.values())})


__all__ = ["client_app", "relay_round", "server_app"]
