"""The Flower apps of kernelscale: the worker ClientApp and two ServerApps.

* ``client_app``: the worker, on every SuperNode;
* ``fit_app``: a ServerApp that fits an estimator named in the run config on
  the Grid itself (:mod:`~kernelscale.backends.flower.fitting`): what
  ``flwr run`` of the app written by ``kernelscale flower-app DIR`` runs;
* ``server_app``: the relay behind :class:`~kernelscale.backends.flower.cluster.FlowerCluster`.

They are named in an app's ``pyproject.toml`` as
``kernelscale.backends.flower.app:fit_app`` (or ``:server_app``) and
``...:client_app``, so the app bundle (FAB) that Flower ships to the SuperLink
and the SuperNodes holds no code: every node runs the kernelscale installed in
its own environment.

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
(:class:`~kernelscale.backends.flower.cluster.FlowerCluster`, on the SuperLink's
machine); the ServerApp connects back to it over the loopback interface
(address and key file in the run config) and turns each of its requests into
Flower Messages sent through the Grid, streaming the replies back as they
arrive. Records travel between the two as Flower's own protobuf encoding.
"""

from __future__ import annotations

import json
import traceback
from multiprocessing.connection import Client

from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.client.mod import secaggplus_mod
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

from kernelscale.backends.flower.fitting import fit_app
from kernelscale.backends.flower.grid import grid_round, short_object_waits
from kernelscale.backends.flower.node import hello, run_step
from kernelscale.backends.flower.operator_settings import operator_roster
from kernelscale.backends.flower.wire import HEADER, from_bytes, put_payload, send, to_bytes

# ----------------------------------------------------------------- the worker (ClientApp)

client_app = ClientApp()


@client_app.query("kernelscale")
def handle_query(message: Message, context: Context) -> Message:
    """Run one worker step (or answer the hello) on this node's partition."""
    header = message.content[HEADER]
    out = RecordDict()
    try:
        if header["op"] == "hello":
            out[HEADER] = ConfigRecord(hello(context, header["data-key"]))
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
    short_object_waits()
    config = context.run_config
    if not str(config.get("kernelscale-relay", "")):
        raise ValueError("this ServerApp relays rounds for a FlowerCluster in a Python process "
                         "and was started without one; to fit with `flwr run`, run the app "
                         "that `kernelscale flower-app DIR` writes (its ServerApp is fit_app).")
    host, _, port = str(config["kernelscale-relay"]).rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1", "[::1]"):
        raise ValueError(f"the relay connects over the loopback interface only, not {host!r}: "
                         "it is not encrypted (docs/flower.md).")
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
                elif op == "roster":  # the operator's, from this process's environment
                    roster = operator_roster()
                    send(connection, {"roster": None if roster is None else
                                      {str(p): n for p, n in roster.items()},
                                      "source": getattr(roster, "source", "")})
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


def relay_round(grid: Grid, connection, request: dict, blobs: list[bytes]) -> None:
    """:func:`~kernelscale.backends.flower.grid.grid_round` for a FlowerCluster: every
    event as a relay message, a reply's content as Flower's protobuf bytes."""
    def emit(event: dict, content=None) -> None:
        send(connection, event, *([] if content is None else [to_bytes(content)]))

    grid_round(grid, request, [from_bytes(b) for b in blobs], emit)


__all__ = ["client_app", "fit_app", "relay_round", "server_app"]
