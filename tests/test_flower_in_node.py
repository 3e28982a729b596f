"""The ClientApp run inside the SuperNode (``kernelscale.backends.flower.in_node``), on
Flower's own node state and object store: a message stored as the node loop stores
it, its task run, the reply stored for the loop to push. No process, no network."""

from __future__ import annotations

import hashlib
import io
import zipfile

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import ConfigRecord, Context, Message, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.common.constant import Status, SubStatus  # noqa: E402
from flwr.supercore.constant import TaskType  # noqa: E402
from flwr.supercore.fab import Fab  # noqa: E402
from flwr.supercore.object_store import ObjectStoreFactory  # noqa: E402
from flwr.supercore.run import Run  # noqa: E402
from flwr.supernode.nodestate import NodeStateFactory  # noqa: E402
from flwr.supernode.start_client_internal import _insert_message  # noqa: E402

from kernelscale.backends.flower.cli import write_fit_app  # noqa: E402
from kernelscale.backends.flower.in_node import run_pending_tasks  # noqa: E402

NODE_ID, RUN_ID, SERIES_ID = 7, 11, 13


def _fab(tmp_path, client_app_ref: str | None = None) -> Fab:
    """The app bundle of ``kernelscale flower-app`` (its pyproject alone), optionally
    naming another ClientApp."""
    write_fit_app(tmp_path / "app")
    text = (tmp_path / "app" / "pyproject.toml").read_text()
    if client_app_ref is not None:
        text = text.replace("kernelscale.backends.flower.app:client_app", client_app_ref)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("pyproject.toml", text)
    content = buffer.getvalue()
    return Fab(hashlib.sha256(content).hexdigest(), content, {})


def _node(tmp_path, client_app_ref=None):
    """A node's state holding a run, its app bundle and the run's context."""
    state = NodeStateFactory(ObjectStoreFactory()).state()
    state.set_node_id(NODE_ID)
    fab = _fab(tmp_path, client_app_ref)
    run = Run.create_empty(RUN_ID)
    run.fab_hash, run.series_id = fab.hash_str, SERIES_ID
    state.store_run(run)
    state.store_fab(fab)
    context = Context(run_id=RUN_ID, node_id=NODE_ID, node_config={}, state=RecordDict(),
                      run_config={})
    state.set_run_series_context(SERIES_ID, context)
    return state, state.object_store, fab


@pytest.fixture(autouse=True)
def _serverapp_identity(monkeypatch):
    """The test plays the ServerApp's part too: its messages come from the SuperLink's
    node (0) of the run."""
    from flwr.supercore.task_identity import TaskIdentity

    for name, value in (("_task_id", 1), ("_run_id", RUN_ID), ("_node_id", 0)):
        monkeypatch.setattr(TaskIdentity, name, value)


def _deliver(state, store, fab, value: float) -> tuple[Message, int]:
    """A message from the ServerApp as the node loop leaves it: stored with its content,
    its task pending; and the task's id."""
    message = Message(RecordDict({"in": ConfigRecord({"value": value})}), dst_node_id=NODE_ID,
                      message_type="query.test")
    task_id = state.create_task(task_type=TaskType.CLIENT_APP, run_id=RUN_ID,
                                fab_hash=fab.hash_str)
    _insert_message(message, state, store)
    return message, task_id


def _doubling_app() -> ClientApp:
    """Doubles the value, counts its calls in the context's state; raises on a negative."""
    app = ClientApp()

    @app.query("test")
    def query(message: Message, context: Context) -> Message:
        value = float(message.content["in"]["value"])
        if value < 0:
            raise ValueError(f"a negative value: {value}")
        calls = context.state.get("calls", ConfigRecord({"n": 0}))["n"] + 1
        context.state["calls"] = ConfigRecord({"n": calls})
        return Message(RecordDict({"out": ConfigRecord({"value": 2 * value})}),
                       reply_to=message)

    return app


def _replies(state, store) -> list[Message]:
    from flwr.supercore.inflatable.inflatable_object import iterate_object_tree
    from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents

    replies = []
    for stored in state.get_messages_legacy(is_reply=True):
        mid = stored.metadata.message_id
        tree = store.get_object_tree(mid)
        contents = {t.object_id: store.get(t.object_id) for t in iterate_object_tree(tree)}
        replies.append(inflate_object_from_contents(mid, contents))
        state.delete_messages(message_ids=[mid, stored.metadata.reply_to_message_id])
    return replies


@pytest.mark.parametrize("values", [(1.5,), (0.25, 3.0, -1.0, 4.0)])
def test_each_task_runs_in_the_node_and_its_reply_waits_for_the_push(tmp_path, values):
    state, store, fab = _node(tmp_path)
    app, fab_cache, calls, task_ids = _doubling_app(), {}, 0, []
    for value in values:
        sent, task_id = _deliver(state, store, fab, value)
        task_ids.append(task_id)
        assert run_pending_tasks(state, store, app, fab_cache) == 1
        assert run_pending_tasks(state, store, app, fab_cache) == 0  # nothing left pending
        (reply,) = _replies(state, store)
        assert reply.metadata.reply_to_message_id == sent.metadata.message_id
        assert store.get(sent.metadata.message_id) is None  # taken, as a confirmation does
        if value < 0:  # the step raised: an error reply, and the node serves on
            assert reply.has_error() and "a negative value: -1.0" in reply.error.reason
            continue
        calls += 1
        np.testing.assert_equal(float(reply.content["out"]["value"]), 2 * value)
        context = state.get_run_series_context(SERIES_ID)
        assert context.state["calls"]["n"] == calls  # the worker state kept between tasks
    tasks = {t.task_id: t for t in state.get_tasks()}
    assert sorted(tasks) == sorted(task_ids)
    assert all(t.status.status == Status.FINISHED for t in tasks.values())
    failed = [tasks[i].status.sub_status == SubStatus.FAILED for i in task_ids]
    assert failed == [v < 0 for v in values]


def test_a_run_naming_another_client_app_gets_an_error_reply(tmp_path):
    state, store, fab = _node(tmp_path, client_app_ref="someone.else:app")
    _deliver(state, store, fab, 1.0)
    assert run_pending_tasks(state, store, _doubling_app(), {}) == 1
    (reply,) = _replies(state, store)
    assert reply.has_error()
    assert "runs kernelscale's ClientApp" in reply.error.reason
    assert "someone.else:app" in reply.error.reason
