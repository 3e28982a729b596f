"""A long-lived ClientApp process for a SuperNode in Flower's process isolation mode.

Flower 1.42's SuperNode runs every message in a fresh ``flwr-clientapp`` process
(started by its SuperExec, which polls for work every second): Python, flwr
(about 1.8 s of imports here, FastAPI and SQLAlchemy among them), the app bundle
unpacked into ``FLWR_HOME`` and the ClientApp loaded, for each message. Under
``--isolation process`` the SuperNode starts no SuperExec and waits for one
started beside it; this module is that process, kept alive: it imports flwr and
kernelscale once, asks the SuperNode's Runtime API for a task every
``poll_seconds``, and runs each task as ``flwr-clientapp`` would (pull the
message and the node's context, run the ClientApp, push the reply and the
context back), in this process.

It runs kernelscale's own ClientApp
(:data:`kernelscale.backends.flower.app.client_app`) and nothing else: a run
whose app bundle names another ClientApp gets an error reply. The worker state
still travels in ``context.state``, as with Flower's own process per message,
so a node whose executor restarts loses nothing.
:mod:`~kernelscale.backends.flower.supernode` starts it next to the SuperNode::

    python -m kernelscale.backends.flower.executor --runtime-api-address 127.0.0.1:9094
"""

from __future__ import annotations

import argparse
import threading
import time
import traceback

CLIENT_APP_REF = "kernelscale.backends.flower.app:client_app"
POLL_SECONDS = 0.02
HEARTBEAT_SECONDS = 10.0  # a task's heartbeat while its step runs (Flower's patience: 60 s)


def _runtime_client(address: str, token: str | None = None):
    from flwr.supercore.interceptors import (
        RuntimeTokenHttpInterceptor,
        RuntimeVersionHttpInterceptor,
    )
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient

    interceptors = [RuntimeVersionHttpInterceptor(
        component_name="flwr-clientapp" if token else "SuperExec")]
    if token:
        interceptors.append(RuntimeTokenHttpInterceptor(token))
    return RuntimeHttpClient.from_server_address(
        server_address=address, insecure=True, root_certificates=None,
        interceptors=interceptors, retry_invoker=make_simple_http_retry_invoker())


def _app_reference(fab, cache: dict) -> str:
    """The ClientApp that the run's app bundle names (read once per bundle)."""
    if fab.hash_str not in cache:
        from flwr.common.config import get_fab_config

        config = get_fab_config(fab.content)
        cache[fab.hash_str] = str(config["tool"]["flwr"]["app"]["components"]["clientapp"])
    return cache[fab.hash_str]


def _heartbeat(client, stop: threading.Event) -> None:
    from flwr.proto.runtime_pb2 import SendTaskHeartbeatRequest

    while not stop.wait(HEARTBEAT_SECONDS):
        try:
            client.SendTaskHeartbeat(SendTaskHeartbeatRequest())
        except Exception:  # the task ends anyway; the SuperNode judges its patience
            pass


def pull_task_input(client):
    """``(message, context, run, fab)`` of the task, as Flower's ``pull_task_input``,
    with a short first wait for message objects still on their way to the node."""
    from flwr.app import Message
    from flwr.common.serde import context_from_proto, fab_from_proto, run_from_proto
    from flwr.proto.node_pb2 import Node
    from flwr.proto.runtime_pb2 import PullAppMessagesRequest, PullTaskInputRequest
    from flwr.supercore.inflatable.inflatable_protobuf_utils import (
        make_confirm_message_received_fn_protobuf,
        make_pull_object_fn_protobuf,
    )
    from flwr.supercore.inflatable.inflatable_utils import pull_and_inflate_object_from_tree
    from flwr.supercore.task_identity import TaskIdentity

    res = client.PullTaskInput(PullTaskInputRequest())
    TaskIdentity.task_id, TaskIdentity.run_id = res.task_id, res.run.run_id
    TaskIdentity.node_id = res.context.node_id
    context, run, fab = (context_from_proto(res.context), run_from_proto(res.run),
                         fab_from_proto(res.fab))
    pulled = client.PullMessages(PullAppMessagesRequest())
    if not pulled.messages_list:
        raise RuntimeError("the SuperNode's Runtime API handed out a task without a message")
    node, tree = Node(node_id=context.node_id), pulled.message_object_trees[0]
    from kernelscale.backends.flower.wire import OBJECT_BACKOFF_SECONDS

    first, cap = OBJECT_BACKOFF_SECONDS  # a task comes before its message's content
    message = pull_and_inflate_object_from_tree(
        tree, make_pull_object_fn_protobuf(client.PullObject, node, context.run_id),
        make_confirm_message_received_fn_protobuf(client.ConfirmMessageReceived, node,
                                                  context.run_id),
        return_type=Message, initial_backoff=first, backoff_cap=cap)
    message.metadata.__dict__["_message_id"] = tree.object_id
    return message, context, run, fab




def run_task(address: str, token: str, client_app, fab_cache: dict) -> None:
    """One task, as ``flwr-clientapp`` runs it, in this process."""
    from flwr.app import Error, Message
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.supernode.runtime.run_clientapp import push_message, push_task_output

    client = _runtime_client(address, token)
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(client, stop), daemon=True)
    beat.start()
    message = context = reply = None
    status, details = SubStatus.FAILED, "the kernelscale ClientApp failed"
    try:
        message, context, run, fab = pull_task_input(client)
        reference = _app_reference(fab, fab_cache)
        if reference != CLIENT_APP_REF:
            raise ValueError(f"this SuperNode runs kernelscale's ClientApp ({CLIENT_APP_REF}) "
                             f"only; run {run.run_id} asks for {reference!r}")
        reply = client_app(message=message, context=context)
        status, details = SubStatus.COMPLETED, ""
    except Exception as exc:
        details = f"{type(exc).__name__}: {exc}"
        traceback.print_exc()
        if message is not None:
            reply = Message(Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=details),
                            reply_to=message)
    finally:
        try:
            if reply is not None and context is not None:
                push_message(client, reply, context)
        finally:
            push_task_output(client, context, status, details)
            stop.set()
            beat.join()
            client.close()


def serve(address: str, poll_seconds: float = POLL_SECONDS, parent_pid: int | None = None):
    """Run the SuperNode's ClientApp tasks until the SuperNode (``parent_pid``) exits."""
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.app_utils import start_parent_process_monitor
    from flwr.supercore.constant import TaskType

    from kernelscale.backends.flower.app import client_app

    if parent_pid is not None:
        start_parent_process_monitor(parent_pid)
    client = _runtime_client(address)
    request = AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP])
    fab_cache: dict = {}
    while True:
        try:
            task = client.AcquireTask(request)
        except Exception:  # the Runtime API is not up yet, or restarting
            time.sleep(max(poll_seconds, 0.2))
            continue
        if task.HasField("task") and task.token:
            run_task(address, task.token, client_app, fab_cache)
        else:
            time.sleep(poll_seconds)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime-api-address", required=True,
                        help="host:port of the SuperNode's Runtime API (its --host/--port)")
    parser.add_argument("--poll-seconds", type=float, default=POLL_SECONDS)
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="exit when this process (the SuperNode) exits")
    args = parser.parse_args(argv)
    serve(args.runtime_api_address, args.poll_seconds, args.parent_pid)


if __name__ == "__main__":
    main()
