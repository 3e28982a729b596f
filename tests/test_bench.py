"""Tests of the benchmark harness (kernelscale.bench) on tiny specs."""

from __future__ import annotations

import argparse
import csv
import math
from functools import partial

import numpy as np
import pytest

from kernelscale.bench import (
    COLUMNS,
    EXPERIMENTS,
    Experiment,
    Method,
    check_gram_entries,
    diskpca_methods,
    exact_reference,
    get_experiment,
    read_results,
    run_experiment,
    write_rows,
    write_summary,
)
from kernelscale.bench import cli as bench_cli
from kernelscale.datasets import make_gaussian_mixture
from kernelscale.kernels import make_kernel
from kernelscale.metrics.lowrank import exact_kpca_reference

SMALL = {"embedding_dim": 20, "row_sketch_dim": 40, "n_random_features": 200}


def tiny(n=200, **overrides) -> Experiment:
    spec = dict(
        name="tiny", dataset=partial(make_gaussian_mixture, n, 5, random_state=0),
        kernel={"name": "rbf", "sigma_scale": 0.5},
        methods=diskpca_methods(**SMALL) + (Method("exact", "exact", budgeted=False),),
        budgets=(20, 40), seeds=(0, 1), workers=(3,), n_components=3, reference=True)
    spec.update(overrides)
    return Experiment(**spec)


def test_csv_rows_and_columns(tmp_path):
    path = run_experiment(tiny(), tmp_path, quiet=True)
    with path.open() as handle:
        reader = csv.DictReader(handle)
        assert tuple(reader.fieldnames) == COLUMNS
        rows = list(reader)
    # 4 budgeted methods x 2 budgets x 2 seeds + exact x 2 seeds
    assert len(rows) == 4 * 2 * 2 + 2
    rows = read_results(path)
    for row in rows:
        assert row["fit_words"] > 0 and row["seconds"] > 0 and row["peak_mib"] > 0
        assert row["excess"] >= -1e-8
        assert row["ratio"] >= 1 - 1e-8
    exact = [r for r in rows if r["method"] == "exact"]
    assert all(abs(r["excess"]) < 1e-8 for r in exact)
    # words grow with the budget for the gram variant of disKPCA
    gram = {int(r["budget"]): r["fit_words"] for r in rows
            if r["method"] == "diskpca (gram)" and r["seed"] == "0"}
    assert gram[40] > gram[20]
    summary = write_summary(path).read_text()
    assert "diskpca (sketch)" in summary and "| exact |" in summary


def test_write_rows_keeps_the_first_rows_column_order(tmp_path):
    rows = [{"method": "a", "budget": 50, "error": 1.5},
            {"method": "b", "budget": 100, "error": 0.25}]
    write_rows(tmp_path / "rows.csv", rows)
    with open(tmp_path / "rows.csv", newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == ["method", "budget", "error"]
        assert [dict(r) for r in reader] == [{k: str(v) for k, v in r.items()} for r in rows]


def test_reference_matches_metrics_module():
    X = make_gaussian_mixture(400, 4, random_state=1)
    kernel = make_kernel("rbf", gamma=0.3)
    for center in (False, True):
        ours = exact_reference(X, kernel, 4, center)
        theirs = exact_kpca_reference(X, kernel, 4, center)
        assert math.isclose(ours["opt"], theirs["opt"], rel_tol=1e-9)
        assert math.isclose(ours["trace"], theirs["trace"], rel_tol=1e-9)


def test_large_gram_block_equals_direct_dot_products():
    # DESIGN.md hazard: a wrong BLAS symmetric product must never reach a result.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((4000, 200))
    K = make_kernel("linear")(X, X)
    check_gram_entries(X, K, n_checks=500)
    K[1000:3000, 2000:] += 1e-3  # a wrong block, as the hazard produces
    with pytest.raises(AssertionError, match="hazard"):
        check_gram_entries(X, K, n_checks=500)


def test_sklearn_and_centred_run(tmp_path):
    exp = tiny(n=200, methods=(Method("sklearn", "sklearn_kpca", budgeted=False),
                               Method("diskpca", "diskpca", SMALL)),
               budgets=(30,), seeds=(0,), center=True)
    rows = read_results(run_experiment(exp, tmp_path, quiet=True))
    assert {r["method"] for r in rows} == {"sklearn", "diskpca"}
    for row in rows:
        assert -1e-6 <= row["excess"] <= 1


def test_plot_step(tmp_path):
    pytest.importorskip("matplotlib")
    from kernelscale.bench import plot_results

    path = run_experiment(tiny(methods=diskpca_methods(**SMALL)[2:], workers=(2, 3), seeds=(0,)),
                          tmp_path, quiet=True)
    paths = plot_results(path)
    assert all(p.exists() and p.stat().st_size > 0 for p in paths)


def test_registry_and_quick_versions():
    assert {"diskpca_digits_rbf", "diskpca_gmm_rbf", "diskpca_bow_poly", "diskpca_letter_poly",
            "diskpca_spam_arccos", "diskpca_kmeans_satellite_rbf",
            "diskpca_workers"} <= set(EXPERIMENTS)
    for name, exp in EXPERIMENTS.items():
        assert exp.name == name
        quick = get_experiment(name, quick=True)
        if exp.word_budgets:
            assert 0 < len(quick.word_budgets) <= len(exp.word_budgets)
            assert len(quick.seeds) <= len(exp.seeds)
        else:
            assert len(quick.seeds) * len(quick.budgets) <= len(exp.seeds) * len(exp.budgets)
    for which in ("poly", "rbf"):  # paper 001's own set, as its Table 1: 5 workers
        exp = EXPERIMENTS[f"diskpca_insurance_{which}"]
        assert exp.dataset == "insurance" and exp.workers == (5,)
        assert exp.reference_cache.startswith("benchmarks/results/diskpca_insurance/refs/")
    with pytest.raises(ValueError, match="Unknown experiment"):
        get_experiment("nope")
    with pytest.raises(ValueError, match="Unknown method"):
        Method("x", "nope")


def _parse(argv):
    parser = argparse.ArgumentParser()
    bench_cli.add_subcommand(parser.add_subparsers(dest="command"))
    return parser.parse_args(argv)


def test_cli(tmp_path, capsys, monkeypatch):
    assert bench_cli.run(_parse(["bench", "nope"])) == 2
    assert "Unknown experiment" in capsys.readouterr().err
    assert bench_cli.run(_parse(["bench", "list"])) == 0
    assert "diskpca_gmm_rbf" in capsys.readouterr().out
    assert bench_cli.run(_parse(["bench", "diskpca_digits_rbf", "--plot-only",
                                 "--out", str(tmp_path)])) == 2
    monkeypatch.setitem(EXPERIMENTS, "tiny", tiny(budgets=(20,), seeds=(0,)))
    assert bench_cli.run(_parse(["bench", "tiny", "--out", str(tmp_path), "--quiet"])) == 0
    assert (tmp_path / "tiny" / "results.csv").exists()
    assert (tmp_path / "tiny" / "summary.md").exists()


def test_float32_embedding_option():
    from kernelscale.backends.local import LocalCluster
    from kernelscale.features import RandomFourierFeatures
    from kernelscale.horizontal import diskpca
    from kernelscale.partition import make_partition, split

    X = make_gaussian_mixture(600, 6, random_state=2)
    fmap = RandomFourierFeatures(6, 300, gamma=0.2, seed=3)
    z64, z32 = fmap.transform(X), fmap.transform(X, dtype=np.float32)
    assert z32.dtype == np.float32
    assert np.abs(z64 - z32).max() < 1e-5
    kernel = make_kernel("rbf", gamma=0.2)
    reference = exact_reference(X, kernel, 3, False)
    parts = split(X, make_partition(600, 4, random_state=0))
    excess, words = {}, {}
    for dtype in ("float64", "float32"):
        cluster = LocalCluster(parts)
        model = diskpca(cluster, kernel, 3, 40, random_state=0, embedding_dtype=dtype,
                        sampler="paper", **SMALL)
        words[dtype] = cluster.ledger.total_words()
        from kernelscale.horizontal import distributed_error
        err = distributed_error(cluster, model)["error"]
        excess[dtype] = (err - reference["opt"]) / (reference["trace"] - reference["opt"])
    assert words["float32"] == words["float64"] + 4  # the option itself: one word per worker
    assert excess["float32"] < 0.5 and excess["float64"] < 0.5
    with pytest.raises(ValueError, match="embedding_dtype"):
        diskpca(LocalCluster(parts), kernel, 3, 40, embedding_dtype="float16", sampler="paper")
