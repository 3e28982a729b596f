"""A long-lived ClientApp process for a SuperNode in Flower's process isolation mode.

Flower 1.42's SuperNode runs every message in a fresh ``flwr-clientapp`` process
(started by its SuperExec, which polls for work every second): Python, flwr
(about 1.8 s of imports here, FastAPI and SQLAlchemy among them), the app bundle
unpacked into ``FLWR_HOME`` and the ClientApp loaded, for each message. Under
``--isolation process`` the SuperNode starts no SuperExec and waits for one
started beside it; this module is that process, kept alive: it imports flwr and
kernelscale once, asks the SuperNode's Runtime API for a task when its node
wakes it up (a byte on the pipe ``--wake-fd``, written by the launcher once the
node holds a message's content), or every :data:`WAKE_FALLBACK_SECONDS`; without
the pipe every ``poll_seconds`` (for :data:`ACTIVE_SECONDS` after a task, then
every :data:`IDLE_POLL_SECONDS`), and runs each task as ``flwr-clientapp`` would (pull
the message and the node's context, run the ClientApp, push the reply and the
context back), in this process, over one HTTP connection kept open (a task's
token changes per task, the connection does not: no new TLS handshake per
message).

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
import os
import signal
import threading
import time
import traceback

CLIENT_APP_REF = "kernelscale.backends.flower.app:client_app"
POLL_SECONDS = 0.02
#: After a task, look for the next one every poll_seconds this long (a fit's next round
#: comes within the master's own work), then every IDLE_POLL_SECONDS.
ACTIVE_SECONDS = 5.0
IDLE_POLL_SECONDS = 0.2
#: With a wake-up pipe, a poll still every this many seconds (a wake-up lost is late, not
#: missed).
WAKE_FALLBACK_SECONDS = 0.5
HEARTBEAT_SECONDS = 10.0  # a task's heartbeat while its step runs (Flower's patience: 60 s)


class TaskToken:
    """The Runtime API's task-token header, as Flower's ``RuntimeTokenHttpInterceptor``
    adds it, with the token changed per task (``token``) on one kept-open client."""

    def __init__(self):
        self.token = ""

    def intercept(self, context, call_next):
        from flwr.supercore.constant import TASK_TOKEN_HEADER
        from flwr.supercore.interceptors.http.utils import add_headers

        if not self.token:
            raise RuntimeError("a task request without a task token")
        add_headers(context.request, {TASK_TOKEN_HEADER: self.token})
        return call_next(context)


def _runtime_client(address: str, token: str | TaskToken | None = None,
                    root_certificates=None, tls: bool = False):
    """A Runtime API client: the SuperExec's (``token`` None), or a ClientApp task's
    (``token``: the task's token, or a :class:`TaskToken` set per task)."""
    from flwr.supercore.interceptors import (
        RuntimeTokenHttpInterceptor,
        RuntimeVersionHttpInterceptor,
    )
    from flwr.supercore.retry import make_simple_http_retry_invoker
    from flwr.supercore.runtime import RuntimeHttpClient

    interceptors = [RuntimeVersionHttpInterceptor(
        component_name="flwr-clientapp" if token else "SuperExec")]
    if isinstance(token, TaskToken):
        interceptors.append(token)
    elif token:
        interceptors.append(RuntimeTokenHttpInterceptor(token))
    return RuntimeHttpClient.from_server_address(
        server_address=address, insecure=not (tls or root_certificates),
        root_certificates=None if root_certificates is None else str(root_certificates),
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




def run_task(address: str, token: str, client_app, fab_cache: dict, *, client=None,
             task_token: TaskToken | None = None, **tls) -> None:
    """One task, as ``flwr-clientapp`` runs it, in this process (``tls``: the Runtime
    API's ``root_certificates`` / ``tls`` of :func:`_runtime_client`).

    ``client`` and ``task_token``: a task client kept open across tasks and its token
    (set here for this task); without them a client is opened for this task alone.
    """
    from flwr.app import Error, Message
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.supernode.runtime.run_clientapp import push_message, push_task_output

    own = client is None
    if own:
        client = _runtime_client(address, token, **tls)
    else:
        task_token.token = token
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
            try:
                push_task_output(client, context, status, details)
            finally:
                stop.set()
                beat.join()
                if own:
                    client.close()
                else:
                    task_token.token = ""


def exit_with_parent(parent_pid: int, check_seconds: float = 0.2) -> None:
    """End this process as soon as ``parent_pid`` (the SuperNode) is gone, whatever the
    signal dispositions it inherited.

    Flower's own monitor raises SIGINT, which does nothing in a process started
    with SIGINT ignored (a node started with ``&`` from a script, without job
    control). Here: SIGINT and SIGTERM get their default action back, Linux
    sends SIGKILL when the parent dies (``PR_SET_PDEATHSIG``), and a thread
    watches for the reparenting that follows a parent's death (on every
    platform), then ends the process with ``os._exit``.
    """
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the thread below does it
        pass

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(check_seconds)
        os._exit(0)

    if os.getppid() != parent_pid:  # it died before we got here
        os._exit(0)
    threading.Thread(target=watch, daemon=True, name="kernelscale-parent-watch").start()


def serve(address: str, poll_seconds: float = POLL_SECONDS, parent_pid: int | None = None,
          idle_seconds: float = IDLE_POLL_SECONDS, wake_fd: int | None = None, **tls):
    """Run the SuperNode's ClientApp tasks until the SuperNode (``parent_pid``) exits.

    Looks for a task whenever a byte arrives on ``wake_fd`` and every
    :data:`WAKE_FALLBACK_SECONDS`; without it every ``poll_seconds`` for
    :data:`ACTIVE_SECONDS` after the last task, then every ``idle_seconds``. Two
    Runtime API clients stay open throughout (the SuperExec's, to acquire tasks,
    and the tasks', whose token changes).
    """
    from flwr.proto.runtime_pb2 import AcquireTaskRequest
    from flwr.supercore.constant import TaskType

    from kernelscale.backends.flower.app import client_app

    client = _runtime_client(address, **tls)
    task_token = TaskToken()
    tasks = _runtime_client(address, task_token, **tls)
    request = AcquireTaskRequest(supported_task_types=[TaskType.CLIENT_APP])
    fab_cache: dict = {}
    idle_seconds = max(idle_seconds, poll_seconds)
    active_until = time.monotonic() + ACTIVE_SECONDS
    while True:
        try:
            task = client.AcquireTask(request)
        except Exception:  # the Runtime API is not up yet, or restarting
            time.sleep(max(poll_seconds, 0.2))
            continue
        if task.HasField("task") and task.token:
            try:
                run_task(address, task.token, client_app, fab_cache, client=tasks,
                         task_token=task_token, **tls)
            except Exception:  # a reply that could not be pushed: that round times out
                traceback.print_exc()  # on the master, naming this node; serve the next
            active_until = time.monotonic() + ACTIVE_SECONDS
        elif wake_fd is not None:
            wake_fd = _wait_for_wake_up(wake_fd, WAKE_FALLBACK_SECONDS)
        else:
            time.sleep(poll_seconds if time.monotonic() < active_until else idle_seconds)


def _wait_for_wake_up(fd: int, timeout: float) -> int | None:
    """Wait until ``fd`` has bytes (read them all) or ``timeout`` passes; ``None`` once
    the pipe is closed (the node has gone: poll from then on)."""
    import select

    ready, _, _ = select.select([fd], [], [], timeout)
    if ready and not os.read(fd, 4096):
        os.close(fd)
        return None
    return fd


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime-api-address", required=True,
                        help="host:port of the SuperNode's Runtime API (its --host/--port)")
    parser.add_argument("--poll-seconds", type=float, default=POLL_SECONDS)
    parser.add_argument("--wake-fd", type=int, default=None,
                        help="a pipe's read end: the node writes a byte when it holds a "
                        "message for a task (the launcher passes it)")
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="exit when this process (the SuperNode) exits")
    parser.add_argument("--root-certificates", default=None,
                        help="the CA certificate of the node's Runtime API (its "
                        "--ssl-ca-certfile, when it serves it with --ssl-certfile)")
    parser.add_argument("--tls", action="store_true",
                        help="the Runtime API is served over TLS (verified with the "
                        "system's CAs unless --root-certificates)")
    args = parser.parse_args(argv)
    if args.parent_pid is not None:
        exit_with_parent(args.parent_pid)
    serve(args.runtime_api_address, args.poll_seconds, args.parent_pid,
          wake_fd=args.wake_fd, root_certificates=args.root_certificates, tls=args.tls)


if __name__ == "__main__":
    main()
