"""Tests of the word-budget sweeps of the benchmark harness (kernelscale.bench.sweep)."""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest

from kernelscale.bench import (
    Experiment,
    Method,
    read_results,
    run_experiment,
    runner,
    write_summary,
)
from kernelscale.bench.plot import best_within
from kernelscale.bench.spec import word_methods
from kernelscale.bench.sweep import size_method, word_grid
from kernelscale.datasets import make_gaussian_mixture
from kernelscale.horizontal.forecast import forecast_words
from kernelscale.kernels import make_kernel
from kernelscale.partition import make_partition

SMALL = {"embedding_dim": 20, "row_sketch_dim": 40, "n_random_features": 200}
BUDGETS = (3_000, 10_000, 30_000)


def tiny(**overrides) -> Experiment:
    spec = dict(
        name="tiny_words", dataset=partial(make_gaussian_mixture, 240, 5, random_state=0),
        kernel={"name": "rbf", "sigma_scale": 0.5},
        methods=word_methods(**SMALL) + (Method("exact", "exact", budgeted=False),),
        word_budgets=BUDGETS, seeds=(0, 1), workers=(3,), n_components=3, reference=True)
    spec.update(overrides)
    return Experiment(**spec)


def test_word_grid():
    assert word_grid(4, 5, 2) == (10_000, 31_623, 100_000)
    assert word_grid(4, 6.5, 2)[-1] == 3_162_278
    assert len(word_grid(4, 6, 3)) == 7


@pytest.mark.parametrize("function, options", [
    ("diskpca", {"sampler": "ridge", "messages": "gram"}),
    ("diskpca", {"sampler": "paper", "messages": "sketch", **SMALL}),
    ("uniform_dislr", {"messages": "gram"}),
    ("uniform_batch", {}),
])
def test_size_method_is_the_largest_landmark_count_within_each_budget(function, options):
    n_rows = [len(i) for i in make_partition(500, 4, random_state=0)]
    kernel = make_kernel("rbf", gamma=0.5)
    sized = size_method(function, options, (50, 3_000, 10_000, 30_000, 10**8), n_rows, 5, 3,
                        kernel=kernel, center=False)
    assert sized and sized[0][0] > 50  # 50 words buy no 3 landmarks
    sizes = [ny for _, ny, _ in sized]
    assert sizes == sorted(set(sizes))  # increasing, no repeated |Y| (capped at n)
    for budget, ny, words in sized:
        assert words <= budget
        opts = {k: v for k, v in options.items() if k != "messages" or function != "uniform_batch"}
        assert forecast_words(function, n_rows, 5, 3, ny, kernel=kernel, **opts).words == words
        if ny < 500:
            more = forecast_words(function, n_rows, 5, 3, ny + 1, kernel=kernel, **opts).words
            assert more > budget
    assert sized[-1][1] == 500 or function != "uniform_batch"


def test_word_sweep_keeps_every_fit_within_its_budget(tmp_path):
    path = run_experiment(tiny(), tmp_path, quiet=True)
    rows = read_results(path)
    budgeted = [r for r in rows if r["max_words"]]
    assert {r["method"] for r in budgeted} == {m.label for m in word_methods()}
    for row in budgeted:
        assert row["fit_words"] <= float(row["max_words"])
        assert row["n_landmarks"] >= 3
    # every method reaches the largest budget's range, or all n = 240 points
    for label in ("diskpca ridge (gram)", "uniform + disLR", "uniform + batch"):
        top = max((r["fit_words"], r["n_landmarks"]) for r in budgeted if r["method"] == label)
        assert top[0] > BUDGETS[-2] or top[1] == 240
    exact = [r for r in rows if r["method"] == "exact"]
    assert len(exact) == 2 and all(abs(r["excess"]) < 1e-8 for r in exact)
    summary = write_summary(path).read_text()
    assert "## Best excess within B fit words" in summary and "word budget B" in summary


def test_best_within_takes_the_lowest_error_inside_the_budget():
    def row(method, budget, words, excess):
        return {"method": method, "max_words": str(budget), "fit_words": words,
                "excess": excess, "n_landmarks": 10.0, "objective": math.nan}

    rows = [row("a", 100, 90, 0.5), row("a", 100, 95, 0.7), row("a", 1000, 900, 0.2),
            row("b", 1000, 800, 0.4)]
    best = best_within(rows, (50, 100, 1000), "excess")
    assert 50 not in best["a"] and 100 not in best["b"]
    assert best["a"][100][:2] == (pytest.approx(0.6), pytest.approx(0.1))
    assert best["a"][1000][0] == pytest.approx(0.2) and best["b"][1000][0] == 0.4


def test_best_within_seconds_bounds_time_instead_of_words():
    """At equal seconds a method with more words but a faster fit can win."""
    rows = [{"method": m, "max_words": str(b), "fit_words": w, "seconds": t, "excess": e,
             "n_landmarks": 10.0, "objective": math.nan}
            for m, b, w, t, e in (("slow", 100, 90, 2.0, 0.1), ("slow", 1000, 900, 4.0, 0.05),
                                  ("fast", 1000, 950, 0.5, 0.3),
                                  ("fast", 10000, 9000, 1.5, 0.2))]
    by_words = best_within(rows, (100, 1000), "excess")
    by_time = best_within(rows, (1.0, 3.0), "excess", cost="seconds")
    assert by_words["slow"][100][0] == 0.1 and 100 not in by_words["fast"]
    assert 1.0 not in by_time["slow"] and by_time["fast"][1.0][0] == 0.3
    assert by_time["slow"][3.0][0] == 0.1 and by_time["fast"][3.0][0] == 0.2
    assert by_time["fast"][3.0][3] == 1.5  # the point's mean seconds


def test_cached_reference_and_exact_row_without_refit(tmp_path, monkeypatch):
    exp = tiny(methods=(Method("exact", "exact", budgeted=False),), seeds=(0,))
    X = exp.load_data()
    kernel = runner.resolve_kernel(exp.kernel, X)
    computed = runner.exact_reference(X, kernel, 3, False)
    np.savez(tmp_path / "ref_uncentred.npz", fingerprint=runner.fingerprint(X),
             **{k: v for k, v in computed.items() if k != "center_norm_sq"},
             center_norm_sq=0.0)
    cached = tiny(methods=exp.methods, seeds=(0,), reference=False,
                  reference_cache=str(tmp_path / "ref"))
    reference, source = runner.load_reference(cached, X, kernel)
    assert source.endswith("ref_uncentred.npz") and reference["opt"] == computed["opt"]
    other = tiny(reference_cache=str(tmp_path / "ref"),
                 dataset=partial(make_gaussian_mixture, 240, 5, random_state=1))
    assert runner.load_reference(other, other.load_data(), kernel)[1] == "computed"
    monkeypatch.setattr(runner, "DENSE_EIGH_MAX", 100)  # 240 rows: not refitted
    batch = word_methods()[4]
    cached = tiny(methods=(*exp.methods, batch), seeds=(0,), reference=False,
                  reference_cache=str(tmp_path / "ref"), word_budgets=(10**7,))
    row, every = read_results(run_experiment(cached, tmp_path / "out", quiet=True))
    n_rows = [len(i) for i in make_partition(240, 3, random_state=0)]
    assert row["error"] == pytest.approx(computed["opt"]) and math.isnan(row["seconds"])
    assert row["fit_words"] == forecast_words("exact", n_rows, 5, 3, kernel=kernel).words
    # uniform + batch of all 240 points is exact KPCA: its own words, the optimum
    assert every["method"] == batch.label and every["n_landmarks"] == 240
    assert every["error"] == pytest.approx(computed["opt"])
    assert every["fit_words"] == forecast_words("uniform_batch", n_rows, 5, 3, 240,
                                                kernel=kernel).words


def test_downstream_kmeans_counts_its_words_and_scores_the_labels(tmp_path):
    exp = tiny(dataset="digits", dataset_options={"n_samples": 300}, kernel={"name": "arccos"},
               methods=(word_methods()[0], word_methods()[4]), word_budgets=(30_000,),
               seeds=(0,), downstream="kmeans", coreset_size=100, n_components=4,
               reference=False)
    rows = read_results(run_experiment(exp, tmp_path, quiet=True))
    assert len(rows) == 2
    for row in rows:
        assert row["kmeans_words"] > 0
        assert row["total_words"] == row["fit_words"] + row["kmeans_words"]
        # feature-space objective: at least the residual off the components
        assert row["objective"] >= row["error"] / 300 - 1e-9
        assert 0 <= row["nmi"] <= 1
    assert "## Best objective within B total" in write_summary(tmp_path / "results.csv").read_text()
    with pytest.raises(ValueError, match="downstream"):
        tiny(downstream="spectral")
