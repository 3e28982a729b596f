"""The protocol runtime: ledger counting rules, phases, worker errors, validation."""

import csv
import io

import numpy as np
import pytest
import scipy.sparse as sp

from kernelscale.backends.local import LocalCluster, effective_n_jobs
from kernelscale.runtime import (
    DOWN,
    UP,
    Ledger,
    Tagged,
    WorkerError,
    count_words,
    validate_cluster,
    worker_seeds,
)
from kernelscale.runtime.cluster import add_reply


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


# --- reductions, the thread pool, timings -----------------------------------------------------


def _random_reply(state, size):
    """A reply that depends on the worker's data: (d x size) block and its row count."""
    block = np.outer(state.data.sum(axis=0), np.arange(1.0, size + 1))
    return Tagged(sketch=block, scalars=[np.array([state.data.shape[0]]), None])


def _maybe_none(state):
    return None if state.worker % 2 else state.data.sum(axis=0)


@pytest.mark.parametrize("n_jobs", [1, 2, 3])
def test_sum_reduction_equals_the_sum_of_replies_and_counts_every_upload(n_jobs):
    sizes = (3, 5, 2, 7, 1)
    plain = _cluster(sizes)
    summed = LocalCluster([s.data for s in plain.states], n_jobs=n_jobs)
    replies = plain.broadcast_map(_random_reply, 6, round="r")
    total = summed.broadcast_map(_random_reply, 6, round="r", reduce="sum")
    np.testing.assert_allclose(total["sketch"], sum(r["sketch"] for r in replies), rtol=1e-14)
    assert total["scalars"][0][0] == sum(sizes) and total["scalars"][1] is None
    assert isinstance(total, Tagged)
    assert summed.ledger == plain.ledger  # every worker's upload, in worker order
    assert summed.ledger.upload_words() == len(sizes) * (4 * 6 + 1)
    # the first reply is copied, not aliased: the workers' replies are unchanged
    again = plain.broadcast_map(_random_reply, 6, round="r")
    np.testing.assert_array_equal(again[0]["sketch"], replies[0]["sketch"])
    summed.close()


def test_sum_reduction_skips_none_and_rejects_unknown_reductions():
    cluster = _cluster((3, 5, 2, 4))
    total = cluster.broadcast_map(_maybe_none, round="r", reduce="sum")
    expected = cluster.states[0].data.sum(axis=0) + cluster.states[2].data.sum(axis=0)
    np.testing.assert_allclose(total, expected)
    assert cluster.ledger.upload_words() == 2 * 4  # two workers answered None: no words
    with pytest.raises(ValueError, match="reduce must be one of"):
        cluster.broadcast_map(_maybe_none, round="r", reduce="mean")
    with pytest.raises(ValueError, match="shapes"):
        add_reply(np.ones(3), np.ones(4))


@pytest.mark.parametrize("n_jobs", [None, 1, 2, -1])
def test_thread_pool_gives_the_same_replies_and_ledger(n_jobs):
    reference = _cluster((3, 5, 2, 4, 6))
    parallel = LocalCluster([s.data for s in reference.states], n_jobs=n_jobs)
    for cluster in (reference, parallel):
        cluster.broadcast_map(_store, 5, round="store")
        cluster.scatter_map(_reply, [(np.ones(k),) for k in range(5)], round="s")
    replies = [c.broadcast_map(_random_reply, 3, round="r") for c in (reference, parallel)]
    for a, b in zip(*replies, strict=True):
        np.testing.assert_array_equal(a["sketch"], b["sketch"])
    assert parallel.ledger == reference.ledger
    parallel.close()


def test_effective_n_jobs_follows_scikit_learn():
    from joblib import cpu_count

    assert effective_n_jobs(None) == 1 and effective_n_jobs(3) == 3
    assert effective_n_jobs(-1) == cpu_count()
    assert effective_n_jobs(-2) == max(1, cpu_count() - 1)
    for bad in (0, 1.5, "2", True):
        with pytest.raises(ValueError, match="n_jobs"):
            effective_n_jobs(bad)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_the_lowest_failing_worker_is_named_with_threads(n_jobs):
    def fail_on_odd(state):
        if state.worker % 2:
            raise ValueError(f"odd {state.worker}")
        return 0

    cluster = LocalCluster([np.ones((2, 2))] * 6, n_jobs=n_jobs)
    with pytest.raises(WorkerError, match="worker 1 failed in round 'odd'") as info:
        cluster.broadcast_map(fail_on_odd, round="odd")
    assert isinstance(info.value.__cause__, ValueError)
    assert cluster.broadcast_map(_has_kept, round="after") == [0] * 6  # usable afterwards
    cluster.close()


def _packed_covariance(state, m):
    z = np.cos(np.outer(state.data[:, 0], np.arange(m)))
    return (z.T @ z)[np.triu_indices(m)]


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_master_memory_is_one_reply_with_a_thousand_workers(n_jobs):
    """A summed round over s = 1,000 workers holds O(one reply), not O(s replies)."""
    import tracemalloc

    s, m = 1000, 200
    reply_bytes = 8 * m * (m + 1) // 2  # 160 kB; all 1,000 replies would be 160 MB
    cluster = LocalCluster(list(np.random.default_rng(0).standard_normal((s, 1, 3))),
                           n_jobs=n_jobs)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        total = cluster.broadcast_map(_packed_covariance, m, round="covariance", reduce="sum")
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
        cluster.close()
    assert total.shape == (m * (m + 1) // 2,)
    assert cluster.ledger.upload_words() == s * m * (m + 1) // 2
    # The running sum, the replies in flight (at most 2 n_jobs), each running step's
    # temporaries (m x m and the triangle's indices: 5 replies' worth) and the ledger's
    # two small records per worker (about 0.3 MB): tens of replies, where keeping
    # every reply would take 1,000 (25 times the bound).
    assert peak < 40 * reply_bytes, peak / reply_bytes


def test_every_round_is_timed_and_summarised():
    cluster = _cluster((30, 50))
    cluster.broadcast_map(_reply, np.ones(10), round="first")
    with cluster.phase("evaluate"):
        cluster.broadcast_map(_random_reply, 3, round="second", reduce="sum")
    times = cluster.ledger.times(None)
    assert [(t.round, t.phase) for t in times] == [("first", "fit"), ("second", "evaluate")]
    for t in times:
        assert t.wall_seconds >= 0 and t.master_seconds >= 0
        assert 0 <= t.slowest_worker_seconds <= t.worker_seconds
    assert set(cluster.ledger.seconds_by_round("evaluate")) == {"second"}
    text = cluster.ledger.summary("fit")
    assert "slowest worker" in text and "first" in text.split("time (fit)")[1]
    assert "slowest worker" not in cluster.ledger.summary("fit", times=False)
    assert cluster.ledger.copy("evaluate").times("evaluate") == times[1:]
    assert cluster.ledger.total_seconds(None) == pytest.approx(
        sum(t.master_seconds + t.wall_seconds for t in times))


def test_listeners_hear_every_round():
    cluster = _cluster()
    heard = []
    cluster.add_listener(lambda round, phase, seconds: heard.append((round, phase)))
    cluster.broadcast_map(_reply, 1, round="a")
    with cluster.phase("evaluate"):
        cluster.broadcast_map(_reply, 1, round="b")
    assert heard == [("a", "fit"), ("b", "evaluate")]


def _chunk_sums(state, chunk_size):
    """A step that adds up its chunks' values in row order (map_chunks)."""
    from kernelscale.runtime.chunks import map_chunks

    X = state.data
    values = [v for *_, v in map_chunks(lambda a, b: np.cos(X[a:b]).sum(axis=0), X.shape[0],
                                        chunk_size)]
    starts = [a for a, *_ in map_chunks(lambda a, b: None, X.shape[0], chunk_size)]
    total = np.zeros(X.shape[1])
    for v in values:
        total += v
    return Tagged(sketch=total, scalars=np.array(starts))


@pytest.mark.parametrize("n_jobs", [2, 3])
def test_chunks_of_a_step_run_in_parallel_and_add_up_the_same(n_jobs):
    rng = np.random.default_rng(5)
    parts = [rng.standard_normal((n, 3)) for n in (1000, 7, 250)]
    serial = LocalCluster(parts).broadcast_map(_chunk_sums, 64, round="c")
    pooled = LocalCluster(parts, n_jobs=n_jobs)
    parallel = pooled.broadcast_map(_chunk_sums, 64, round="c")
    for a, b, X in zip(serial, parallel, parts, strict=True):
        np.testing.assert_array_equal(a["sketch"], b["sketch"])
        np.testing.assert_array_equal(b["scalars"], np.arange(0, X.shape[0], 64))
    pooled.close()


def test_a_failing_chunk_fails_the_step_with_the_worker_named():
    from kernelscale.runtime.chunks import map_chunks

    def step(state):
        def compute(start, stop):
            if start == 640:
                raise FloatingPointError("chunk at row 640")
            return stop - start
        return sum(v for *_, v in map_chunks(compute, state.data.shape[0], 64))

    cluster = LocalCluster([np.ones((100, 2)), np.ones((1000, 2))], n_jobs=2)
    with pytest.raises(WorkerError, match="worker 1 failed.*chunk at row 640"):
        cluster.broadcast_map(step, round="chunks")
    assert cluster.broadcast_map(_has_kept, round="after") == [0, 0]
    cluster.close()
