"""The protocol runtime: ledger counting rules, phases, worker errors, validation."""

import csv
import io

import numpy as np
import pytest
import scipy.sparse as sp

from kernelscale.runtime import (
    DOWN,
    UP,
    Ledger,
    LocalCluster,
    Tagged,
    WorkerError,
    count_words,
    validate_cluster,
    worker_seeds,
)


def _echo_rows(state, payload):
    return state.data.shape[0]


def _reply(state, payload):
    return payload


def _tagged_reply(state):
    return Tagged(raw_points=state.data[:2], scalars=[1.0, 2.0, 3.0])


def _fail_on_worker_one(state):
    if state.worker == 1:
        raise ZeroDivisionError("boom at one")
    return 0


def _store(state, value):
    state.kept = value


def _has_kept(state):
    return int(hasattr(state, "kept"))


def _cluster(sizes=(3, 5, 2), d=4, seed=0):
    rng = np.random.default_rng(seed)
    return LocalCluster([rng.standard_normal((n, d)) for n in sizes])


# --- counting rules -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "payload, words",
    [
        (np.zeros((4, 7)), 28),
        (np.zeros(0), 0),
        (3, 1),
        (2.5, 1),
        (np.float64(1.0), 1),
        ("name", 1),
        (None, 0),
        ((np.ones(3), 1, None), 4),
        ([np.ones((2, 2)), {"a": np.ones(5), "b": 7}], 10),
    ],
)
def test_count_words_rules(payload, words):
    assert count_words(payload) == words


def test_csr_costs_twice_its_nnz():
    M = sp.random(50, 40, density=0.1, format="csr", random_state=0)
    assert count_words(M) == 2 * M.nnz
    assert count_words(M) != M.shape[0] * M.shape[1]


def test_count_words_rejects_unknown_objects():
    with pytest.raises(TypeError, match="Cannot count"):
        count_words(object())


def test_broadcast_costs_s_times_and_replies_per_worker():
    cluster = _cluster()
    arg = np.ones((3, 4))
    replies = cluster.broadcast_map(_echo_rows, arg, round="r", kind="model",
                                    reply_kind="scalars")
    assert replies == [3, 5, 2]
    ledger = cluster.ledger
    assert ledger.download_words() == 3 * 12
    assert ledger.upload_words() == 3  # one int per worker
    assert ledger.total_words() == 39
    down = [m for m in ledger.rounds() if m.direction == DOWN]
    assert sorted(m.worker for m in down) == [0, 1, 2]
    assert all(m.words == 12 and m.kind == "model" for m in down)
    assert all(m.kind == "scalars" for m in ledger.rounds() if m.direction == UP)


def test_scatter_map_counts_each_worker_its_own_args():
    cluster = _cluster()
    args = [(np.ones(k),) for k in (1, 2, 3)]
    cluster.scatter_map(_reply, args, round="s", kind="seed", reply_kind="sketch")
    by_worker = {(m.worker, m.direction): m.words for m in cluster.ledger.rounds()}
    for w, k in enumerate((1, 2, 3)):
        assert by_worker[(w, DOWN)] == k
        assert by_worker[(w, UP)] == k
    assert cluster.ledger.words_by_kind(direction=DOWN) == {"seed": 6}
    assert cluster.ledger.words_by_kind(direction=UP) == {"sketch": 6}
    with pytest.raises(ValueError, match="2 argument tuples"):
        cluster.scatter_map(_reply, args[:2], round="s")


def test_tagged_parts_are_counted_by_kind():
    cluster = _cluster()
    replies = cluster.broadcast_map(_tagged_reply, round="t", reply_kind="sketch")
    assert set(replies[0]) == {"raw_points", "scalars"}
    kinds = cluster.ledger.words_by_kind(direction=UP)
    assert kinds == {"raw_points": 3 * 2 * 4, "scalars": 3 * 3}
    assert "sketch" not in kinds
    with pytest.raises(ValueError, match="Unknown message kinds"):
        Tagged(bogus=1)


def test_phases_are_separate_and_upload_differs_from_total():
    cluster = _cluster()
    cluster.broadcast_map(_reply, np.ones(10), round="fit round")
    with cluster.phase("evaluate"):
        assert cluster.current_phase == "evaluate"
        cluster.broadcast_map(_reply, np.ones(4), round="eval round")
    assert cluster.current_phase == "fit"
    ledger = cluster.ledger
    assert ledger.total_words("fit") == 60
    assert ledger.upload_words("fit") == 30
    assert ledger.total_words("evaluate") == 24
    assert ledger.upload_words("evaluate") == 12
    assert ledger.total_words(None) == 84
    assert ledger.phases() == ["fit", "evaluate"]
    assert {m.round for m in ledger.rounds("evaluate")} == {"eval round"}
    assert ledger.round_words("fit round", direction=UP) == 30
    assert ledger.words_by_round() == {"fit round": {DOWN: 30, UP: 30}}


def test_summary_mentions_rounds_and_csv_has_one_row_per_message():
    cluster = _cluster()
    cluster.broadcast_map(_reply, np.ones(10), round="leverage scores")
    cluster.broadcast_map(_tagged_reply, round="sampling")
    text = cluster.ledger.summary()
    assert "leverage scores" in text and "sampling" in text
    assert "raw_points" in text
    assert f"{cluster.ledger.total_words():,}" in text
    rows = list(csv.DictReader(io.StringIO(cluster.ledger.to_csv())))
    assert len(rows) == len(cluster.ledger) == 3 + 3 + 6
    assert {"round", "phase", "direction", "kind", "worker", "words"} <= set(rows[0])
    assert sum(int(r["words"]) for r in rows) == cluster.ledger.total_words(None)


def test_ledger_equality_and_record_errors():
    a, b = Ledger(), Ledger()
    a.record("r", "fit", UP, "sketch", 0, np.ones(3))
    b.record("r", "fit", UP, "sketch", 0, np.ones(3))
    assert a == b
    b.record("r", "fit", UP, "sketch", 1, np.ones(1))
    assert a != b
    assert a.copy() == a
    with pytest.raises(ValueError, match="direction"):
        a.record("r", "fit", "sideways", "sketch", 0, 1)
    with pytest.raises(ValueError, match="Unknown message kind"):
        a.record("r", "fit", UP, "gossip", 0, 1)


# --- errors, state, seeds --------------------------------------------------------------------


def test_worker_error_names_worker_and_round_and_chains_cause():
    cluster = _cluster()
    with pytest.raises(WorkerError) as info:
        cluster.broadcast_map(_fail_on_worker_one, round="the round")
    err = info.value
    assert err.worker == 1 and err.round == "the round"
    assert "worker 1" in str(err) and "'the round'" in str(err)
    assert "ZeroDivisionError" in str(err) and "boom at one" in str(err)
    assert isinstance(err.__cause__, ZeroDivisionError)


def test_reset_drops_worker_state_but_keeps_data():
    cluster = _cluster()
    cluster.broadcast_map(_store, 5, round="store")
    assert cluster.broadcast_map(_has_kept, round="check") == [1, 1, 1]
    before = len(cluster.ledger)
    cluster.reset()
    assert len(cluster.ledger) == before  # reset sends no counted messages
    assert cluster.broadcast_map(_has_kept, round="check") == [0, 0, 0]
    assert [s.data.shape[0] for s in cluster.states] == [3, 5, 2]


def test_worker_seeds_reproducible_and_distinct():
    a = worker_seeds(np.random.default_rng(3), 4)
    b = worker_seeds(np.random.default_rng(3), 4)
    assert a == b and len(set(a)) == 4


# --- validate_cluster -------------------------------------------------------------------------


def test_validate_cluster_reports_shapes_in_setup_phase():
    parts = [np.ones((3, 2), dtype=np.int64), sp.random(4, 2, density=0.5, format="coo")]
    cluster = LocalCluster(parts)
    info = validate_cluster(cluster)
    assert info.n_rows == (3, 4) and info.n_samples == 7 and info.n_workers == 2
    assert info.n_features == 2 and info.is_sparse
    assert cluster.ledger.total_words("fit") == 0
    assert cluster.ledger.total_words("setup") > 0
    assert cluster.states[0].data.dtype == np.float64
    assert sp.isspmatrix_csr(cluster.states[1].data) or cluster.states[1].data.format == "csr"


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_validate_cluster_rejects_nonfinite(bad):
    X = np.ones((4, 3))
    X[2, 1] = bad
    with pytest.raises(ValueError, match=r"Partition 1 holds 1 NaN or infinite"):
        validate_cluster(LocalCluster([np.ones((2, 3)), X]))


def test_validate_cluster_rejects_nonfinite_sparse():
    X = sp.csr_matrix(np.array([[0.0, np.nan], [1.0, 0.0]]))
    with pytest.raises(ValueError, match="Partition 0 holds 1 NaN"):
        validate_cluster(LocalCluster([X]))


def test_validate_cluster_rejects_empty_partition():
    with pytest.raises(ValueError, match="Partition 1 is empty"):
        validate_cluster(LocalCluster([np.ones((2, 3)), np.ones((0, 3))]))


def test_validate_cluster_rejects_mismatched_features():
    with pytest.raises(ValueError, match=r"different numbers of features \[3, 4\]"):
        validate_cluster(LocalCluster([np.ones((2, 3)), np.ones((2, 4))]))


def test_validate_cluster_rejects_non_numeric_and_1d():
    # The check runs on the worker, so it surfaces as a WorkerError naming it.
    with pytest.raises(WorkerError, match="worker 0.*numeric"):
        validate_cluster(LocalCluster([np.array([["a", "b"]])]))
    with pytest.raises(WorkerError, match="2-D"):
        validate_cluster(LocalCluster([np.ones(3)]))


def test_cluster_needs_a_worker():
    with pytest.raises(ValueError, match="at least one worker"):
        LocalCluster([])
