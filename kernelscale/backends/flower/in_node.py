"""kernelscale's ClientApp run inside the SuperNode's own process: :func:`run_pending_tasks`.

Flower 1.42's SuperNode hands every message to a ClientApp in another process,
through its Runtime API: the ClientApp side asks for a task, pulls the task's
input, the message and each of its objects, confirms it, pushes the reply and
each of its objects, then the task's output, each an HTTP request (14 for a
trivial message), and each request costs milliseconds of CPU on both sides. On
a 2-core machine holding a three-node federation, those requests and the polls
of three ClientApp processes took most of a core.

Here the node runs the ClientApp itself, right after its loop stored a message
(:func:`kernelscale.backends.flower.supernode.main` wraps the loop's pull):
the same steps on the node's own state and object store (claim the task, take
the message and the run's context, run the ClientApp, store the reply and its
objects, save the context, finish the task), with no request and no other
process. The node loop then pushes the reply to the SuperLink as it would have
pushed the ClientApp's. It runs kernelscale's ClientApp
(:data:`kernelscale.backends.flower.app.client_app`) only: a run whose app bundle
names another ClientApp gets an error reply, as does a step that raises (and
the node serves on). The worker state still travels in ``context.state``, kept
in the node's state between messages, as with Flower's process per message.
"""

from __future__ import annotations

import threading
import traceback
from contextlib import contextmanager

CLIENT_APP_REF = "kernelscale.backends.flower.app:client_app"
HEARTBEAT_SECONDS = 10.0  # the task's heartbeat while its step runs (Flower's patience: 60 s)


def app_reference(fab, cache: dict) -> str:
    """The ClientApp that the run's app bundle names (read once per bundle)."""
    if fab.hash_str not in cache:
        from flwr.common.config import get_fab_config

        config = get_fab_config(fab.content)
        cache[fab.hash_str] = str(config["tool"]["flwr"]["app"]["components"]["clientapp"])
    return cache[fab.hash_str]


def run_pending_tasks(state, store, client_app, fab_cache: dict) -> int:
    """Run every pending ClientApp task of the node's ``state``; the number run."""
    from flwr.common.constant import Status
    from flwr.supercore.constant import TaskType

    ran = 0
    for task in state.get_tasks(statuses=[Status.PENDING], order_by="pending_at"):
        if task.type == TaskType.CLIENT_APP and state.claim_task(task.task_id):
            try:
                run_task(state, store, task, client_app, fab_cache)
            except Exception:  # the reply could not be stored: that round times out on
                traceback.print_exc()  # the master, naming this node; serve the next
            ran += 1
    return ran


def _take_message(state, store, run_id: int):
    """The run's message, its content inflated from the object store and then deleted
    there (as the ClientApp's confirmation deletes it)."""
    from flwr.app import Message
    from flwr.supercore.inflatable.inflatable_object import iterate_object_tree
    from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents

    stored = state.get_messages_legacy(run_ids=[run_id], is_reply=False, limit=1)
    if not stored:
        raise RuntimeError(f"the node holds a task of run {run_id} but no message for it")
    message_id = stored[0].metadata.message_id
    state.record_message_processing_start(message_id=message_id)
    tree = store.get_object_tree(message_id)
    contents = {}
    for node in iterate_object_tree(tree):
        content = store.get(node.object_id)
        if not content:
            raise RuntimeError(f"object {node.object_id} of message {message_id} is not "
                               "stored on the node")
        contents[node.object_id] = content
    message = inflate_object_from_contents(message_id, contents)
    message.metadata.__dict__["_message_id"] = message_id
    store.delete(message_id)
    assert isinstance(message, Message)
    return message


def _heartbeat(state, task_id: int, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_SECONDS):
        state.acknowledge_task_heartbeat(task_id)


def run_task(state, store, task, client_app, fab_cache: dict) -> None:
    """One claimed task, as ``flwr-clientapp`` runs it, on the node's state directly."""
    with _task_identity(task.task_id, task.run_id, state.get_node_id()):
        _run_task(state, store, task, client_app, fab_cache)


@contextmanager
def _task_identity(task_id: int, run_id: int, node_id: int):
    """Flower's ``TaskIdentity`` (what a ``Message`` the ClientApp creates is stamped
    with) set to the task's while it runs, as ``flwr-clientapp`` sets it in its process;
    the node's own afterwards."""
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    TaskIdentity.task_id, TaskIdentity.run_id, TaskIdentity.node_id = task_id, run_id, node_id
    try:
        yield
    finally:
        TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


def _run_task(state, store, task, client_app, fab_cache: dict) -> None:
    from flwr.app import Error, Message
    from flwr.common.constant import ErrorCode, SubStatus
    from flwr.supernode.start_client_internal import _insert_message

    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(state, task.task_id, stop), daemon=True)
    message = context = reply = run = None
    status, details = SubStatus.FAILED, "the kernelscale ClientApp failed"
    try:
        if not state.activate_task(task_id=task.task_id):
            raise RuntimeError(f"task {task.task_id} could not be started")
        beat.start()
        run = state.get_run(task.run_id)
        context = state.get_run_series_context(run.series_id)
        reference = app_reference(state.get_fab(run.fab_hash), fab_cache)
        message = _take_message(state, store, task.run_id)
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
        stop.set()
        if beat.is_alive():
            beat.join()
        if reply is not None:
            state.record_message_processing_end(message_id=message.metadata.message_id)
            _insert_message(reply, state, store)
        finished = state.finish_task(task_id=task.task_id, sub_status=status, details=details)
        if finished and context is not None:  # as the node saves a task's pushed context
            state.set_run_series_context(run.series_id, context)


__all__ = ["CLIENT_APP_REF", "app_reference", "run_pending_tasks", "run_task"]
