"""What leaves a party's node, and which node holds which partition (issue 43), in-process.

* The protocol table (:data:`kernelscale.backends.flower.protocols.PROTOCOLS`) is what
  the estimators run: every protocol is run here as a Flower fit runs it, and its
  steps and their disclosures recorded (``protocol_recording``).
* The node's policy (``run_step`` on a real Flower ``Context``, the node config as a
  party writes it): rows refused by default and allowed with ``allow-rows=true``,
  per-row values refused under ``disclose="aggregates"``, other estimators' steps
  refused under ``estimators=...``, a reply of raw rows never returned; each refusal
  names the node, its partition, the step, the round and the key to change.
* The hello: two nodes claiming one partition refuse the run naming both (also when
  the second answers late); the operator's roster binds nodes to partitions.

The real processes (a federation that refuses DistributedKernelPCA and fits FK
k-means) are in ``tests/test_flower_deploy.py`` and ``tests/test_flower_netns.py``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the node's checks need flwr: pip install kernelscale[flower]")

from flwr.app import ConfigRecord, Context, RecordDict  # noqa: E402
from protocol_recording import FILES, SMALL, RecordingNodes, record  # noqa: E402

from kernelscale.backends.flower.node import hello, run_step  # noqa: E402
from kernelscale.backends.flower.operator_settings import Roster  # noqa: E402
from kernelscale.backends.flower.policy import NodePolicy, PolicyRefusal  # noqa: E402
from kernelscale.backends.flower.protocols import (  # noqa: E402
    PROTOCOLS,
    estimators_running,
    summed_rounds,
)
from kernelscale.backends.flower.rounds import FlowerRounds  # noqa: E402
from kernelscale.backends.flower.runconfig import estimator_class  # noqa: E402
from kernelscale.backends.flower.wire import HEADER, put_payload  # noqa: E402
from kernelscale.runtime.ledger import Tagged  # noqa: E402
from kernelscale.runtime.steps import ROWS, resolve_step, step_disclosure  # noqa: E402

SAMPLE = "kernelscale.horizontal.draws:uniform_sample_step"  # declares "rows"
DESCRIBE = "kernelscale.runtime.validation:describe_partition"  # "aggregates"
LABELS = "kernelscale.federated.kmeans:collect_labels_step"  # "per-row"


# ------------------------------------------------------------------ the protocol table

@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: f"{p.estimator}[{p.label}]")
def test_the_protocol_table_is_what_the_estimators_run(protocol):
    nodes = record(protocol)
    assert tuple(nodes.steps) == protocol.steps, (
        f"{protocol.estimator} ({protocol.label}) now runs {tuple(nodes.steps)!r}: update "
        "kernelscale/backends/flower/protocols.py")
    assert tuple(nodes.summed) == protocol.summed


@pytest.mark.parametrize("options", [{}, {"max_words": 20_000}])
def test_a_chosen_method_runs_only_steps_of_the_table(options):
    """method=None (the pilot may switch methods) sends nothing outside the table."""
    from kernelscale import DistributedKernelPCA

    nodes = RecordingNodes()
    small = {k: v for k, v in SMALL["DistributedKernelPCA"].items() if k != "n_landmarks"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # small data: capped landmarks
        DistributedKernelPCA(**small, **options, backend="flower", client=nodes).fit(None)
    table = {s for p in PROTOCOLS if p.estimator == "DistributedKernelPCA" for s in p.steps}
    assert nodes.steps and set(nodes.steps) <= table


def test_the_table_names_registered_steps_with_their_declared_disclosure():
    for protocol in PROTOCOLS:
        estimator_class(protocol.estimator)  # every estimator of the table runs on Flower
        for name, disclosure in protocol.steps:
            step = resolve_step(name)
            assert disclosure in ("nothing", "aggregates", "per-row", "rows")
            declared = step_disclosure(step) if not _depends_on_args(name) else disclosure
            assert declared == disclosure, name
    assert estimators_running(SAMPLE) == {"DistributedKernelPCA",
                                          "DistributedSpectralClustering"}
    assert "gamma: moments" in summed_rounds("FederatedKernelKMeans")


def _depends_on_args(name: str) -> bool:
    from kernelscale.runtime import steps

    return callable(steps._DISCLOSES[name])


# ------------------------------------------------------------------ the node's policy

def _context(node_config: dict, node_id: int = 41) -> Context:
    config = {"partition-id": 0, **node_config}
    return Context(run_id=1, node_id=node_id, node_config=config, state=RecordDict(),
                   run_config={})


def _message(step: str, args=(), round_name="r", reply_kind="sketch") -> tuple:
    content = RecordDict({HEADER: ConfigRecord({
        "op": "step", "step": step, "round": round_name, "epoch": 1, "worker": 0,
        "data-key": "partition-path", "reply-kind": reply_kind})})
    put_payload(content, "args", tuple(args))
    return content[HEADER], content


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "p0.npy"
    np.save(path, FILES["partition-path"][0])
    return str(path)


def test_the_default_policy_refuses_raw_rows_naming_node_step_round_and_key(data_file):
    context = _context({"partition-path": data_file})
    header, content = _message(SAMPLE, (3,), round_name="pilot sampling")
    with pytest.raises(PolicyRefusal) as refused:
        run_step(header, content, context)
    text = str(refused.value)
    for part in ("SuperNode 41 (partition-id 0)", "round 'pilot sampling'", SAMPLE,
                 "raw feature rows", "allow-rows=true"):
        assert part in text
    assert "kernelscale.state.tree" not in context.state  # nothing ran, nothing kept
    # per-row values and aggregates are answered by default
    rows = FILES["partition-path"][0].shape[0]
    reply, _ = run_step(*_message(DESCRIBE), context)
    assert int(reply[0]) == rows


def test_allow_rows_answers_raw_rows(data_file):
    context = _context({"partition-path": data_file, "allow-rows": True})
    run_step(*_message("kernelscale.horizontal.draws:uniform_setup_step", (5,)), context)
    header, content = _message(SAMPLE, (3,), reply_kind="raw_points")
    reply, _ = run_step(header, content, context)
    assert reply["raw_points"].shape == (3, 3)


def test_aggregates_only_refuses_per_row_values(data_file):
    context = _context({"partition-path": data_file, "disclose": "aggregates"})
    with pytest.raises(PolicyRefusal, match="one value per row.*disclose=\"per-row\""):
        run_step(*_message(LABELS), context)
    run_step(*_message(DESCRIBE), context)  # an aggregate is answered


def test_a_step_disclosing_by_its_arguments_is_judged_on_them(data_file):
    """The coreset step sends raw rows for source=None, an embedding's rows otherwise."""
    coreset = "kernelscale.federated.kmeans:coreset_step"
    context = _context({"partition-path": data_file})
    with pytest.raises(PolicyRefusal, match="raw feature rows"):
        run_step(*_message(coreset, (2, 1.0, 4, None, "sketch")), context)
    assert step_disclosure(coreset, (2, 1.0, 4, "embedding", "sketch")) == "per-row"


def test_an_estimator_restriction_refuses_the_steps_of_other_estimators(data_file):
    context = _context({"partition-path": data_file, "allow-rows": True,
                        "estimators": "FederatedKernelKMeans,VerticalKernelPCA"})
    with pytest.raises(PolicyRefusal, match="not in the protocols of FederatedKernelKMeans, "
                                            "VerticalKernelPCA.*DistributedKernelPCA"):
        run_step(*_message(SAMPLE, (3,)), context)
    run_step(*_message(DESCRIBE), context)  # FK k-means validates its partitions too


def test_a_reply_of_raw_rows_is_never_returned_under_a_no_rows_policy(data_file):
    """Defense in depth: whatever a step declared, the reply is checked before it leaves."""
    context = _context({"partition-path": data_file})
    with pytest.raises(PolicyRefusal, match="reply holding raw rows.*was not sent"):
        run_step(*_message(DESCRIBE, reply_kind="raw_points"), context)
    policy = NodePolicy()
    with pytest.raises(PolicyRefusal):
        policy.check_reply("s", Tagged(raw_points=np.ones((2, 3)), scalars=1), "sketch")
    policy.check_reply("s", Tagged(scalars=np.ones(2)), "sketch")
    NodePolicy(most=ROWS).check_reply("s", Tagged(raw_points=np.ones((2, 3))), "sketch")


@pytest.mark.parametrize("config, match", [
    ({"allow-rows": "true"}, "allow-rows='true': give true or false, unquoted"),
    ({"disclose": "rows"}, "raw rows are allowed with allow-rows=true only"),
    ({"disclose": "everything"}, "disclose='everything'"),
    ({"allow-rows": True, "disclose": "aggregates"}, "contradict"),
    ({"estimators": "FederatedKernelKMeans,KMeans"}, "KMeans is not an estimator that runs"),
    ({"estimators": 3}, "comma-separated list"),
])
def test_a_malformed_policy_is_refused_at_the_hello(config, match):
    with pytest.raises(ValueError, match=match):
        hello(_context({"partition-path": "x", **config}), "partition-path")


def test_the_hello_tells_the_partition_and_the_policy():
    said = hello(_context({"partition-path": "x", "disclose": "aggregates",
                           "estimators": "FederatedKernelKMeans"}), "partition-path")
    assert said["partition-id"] == 0
    assert said["policy"] == ('disclose="aggregates" (no raw rows), '
                              'estimators="FederatedKernelKMeans"')
    with pytest.raises(ValueError, match="no 'new-block-path'"):
        hello(_context({"partition-path": "x"}), ["partition-path", "new-block-path"])


# ------------------------------------------------------------------ partitions and nodes

class _Nodes(FlowerRounds):
    """Nodes that answer the hello in this process, through the node's own ``hello``;
    a round ends after ``need`` answers, as on the Grid, and the others answer the next."""

    def __init__(self, configs: dict, n_workers: int, **options):
        super().__init__(n_workers, **options)
        self.configs, self.asked = configs, []

    def _list_nodes(self):
        return list(self.configs)

    def _round(self, round, messages, timeout, need=0, joined=None):
        self.asked.append([node for node, _ in messages])
        events = {}
        for index, (node, content) in enumerate(messages):
            if need and len(events) == need:
                break
            context = _context(self.configs[node], node)
            header = hello(context, content[HEADER]["data-key"])
            events[index] = ("reply", RecordDict({HEADER: ConfigRecord(header)}))
        return events


def _claims(*partitions) -> dict:
    return {100 + i: {"partition-id": p, "partition-path": "x"}
            for i, p in enumerate(partitions)}


def _find(nodes: _Nodes) -> _Nodes:
    nodes._find_nodes(float("inf"))
    return nodes


def test_nodes_hold_the_partitions_they_claim():
    nodes = _find(_Nodes(_claims(2, 0, 1), 3))
    assert nodes.node_ids == [101, 102, 100]
    assert nodes.node_policies == ['disclose="per-row" (no raw rows), every estimator'] * 3


@pytest.mark.parametrize("partitions, both", [((0, 1, 1, 2), "101 and 102"),
                                               ((0, 1, 2, 1), "101 and 103")])
def test_two_nodes_claiming_one_partition_refuse_the_run_naming_both(partitions, both):
    """(0, 1, 2, 1): the second claim comes after every partition has a node; the nodes
    that had not answered get their second chance and it is seen."""
    with pytest.raises(ValueError, match=f"SuperNodes {both} both claim partition-id 1"):
        _find(_Nodes(_claims(*partitions), 3))


def test_the_roster_binds_nodes_and_refuses_another_claimant():
    roster = Roster({0: 100, 1: 101, 2: 102}, "the roster r.toml")
    # node 103 holds partition 9, which this run does not use: it is left out
    nodes = _find(_Nodes(_claims(0, 1, 2, 9), 3, roster=roster))
    assert nodes.node_ids == [100, 101, 102]
    assert nodes.asked == [[100, 101, 102], [103]]  # the rostered nodes first
    # node 103 claims partition 1 beside the rostered node 101: the run is refused
    with pytest.raises(ValueError, match="SuperNodes 101 and 103 both claim partition-id 1: "
                                         "the run is refused before any round.*the roster "
                                         "r.toml binds partition 1 to node 101"):
        _find(_Nodes(_claims(0, 1, 2, 1), 3, roster=roster))
    with pytest.raises(ValueError, match="SuperNode 101 holds partition-id 2 in its node "
                                         "config, but the roster r.toml binds it to "
                                         "partition 1"):
        _find(_Nodes(_claims(0, 2, 1), 3, roster=roster))
    with pytest.raises(ValueError, match="binds no node to partition\\(s\\) \\[3\\]"):
        _find(_Nodes(_claims(0, 1, 2, 3), 4, roster=roster))


def test_a_roster_file_is_read_and_checked(tmp_path):
    path = tmp_path / "roster.toml"
    path.write_text("[partitions]\n0 = 12345678901234567890\n1 = 7\n")
    roster = Roster.read(path)
    assert roster == {0: 12345678901234567890, 1: 7}
    assert Roster.read(_written(tmp_path, roster.to_toml())) == roster
    for text, match in [("[partitions]\n0 = 7\n1 = 7\n", "gives node 7 two partitions"),
                        ("[partitions]\na = 7\n", "'a = 7' is not"),
                        ("[partitions]\n0 = \"7\"\n", "is not"),
                        ("partitions = 3\n", "no \\[partitions\\] table"),
                        ("[partitions\n", "not valid TOML")]:
        with pytest.raises(ValueError, match=match):
            Roster.read(_written(tmp_path, text))
    with pytest.raises(ValueError, match="cannot be read"):
        Roster.read(tmp_path / "missing.toml")


def _written(folder, text: str):
    path = folder / "r.toml"
    path.write_text(text)
    return path
