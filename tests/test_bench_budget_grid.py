"""What the benchmark scripts share (``kernelscale.bench.settings``; in
``benchmarks/budget_shared``: ``budget_grid``, ``pilot_variants``, ``constant_search``;
the streaming, vertical and sampler helpers of ``benchmarks/*_shared``), and the house
rule that benchmark scripts never import each other (what they share lives in
``kernelscale.bench``, or, when only benchmarks use it, in a ``benchmarks/*_shared``
package)."""

from __future__ import annotations

import ast
import doctest
import gzip
import importlib
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from kernelscale.bench import settings
from kernelscale.bench.settings import load_standardized, make_setting_kernel, references
from kernelscale.datasets import load_spam


def _shared(name: str):
    """A module of a ``benchmarks/*_shared`` package (the scripts' folder on the path only
    while it is imported)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


budget_grid = _shared("budget_shared.budget_grid")
constant_search = _shared("budget_shared.constant_search")
pilot_variants = _shared("budget_shared.pilot_variants")
streaming_sweep = _shared("streaming_shared.sweep")
vertical_blocks = _shared("vertical_shared.blocks")
sampler_report = _shared("sampler_shared.report")
vertical_real_report = _shared("vertical_shared.real_report")
Cache, largest_landmarks_within = budget_grid.Cache, budget_grid.largest_landmarks_within
PRIOR, distance, every_theta = (constant_search.PRIOR, constant_search.distance,
                                constant_search.every_theta)

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.parametrize("module", [settings, budget_grid, pilot_variants, constant_search,
                                    streaming_sweep, vertical_blocks, sampler_report,
                                    vertical_real_report])
def test_module_examples(module):
    assert doctest.testmod(module).failed == 0


def test_cache_round_trip(tmp_path):
    cache = Cache(tmp_path / "cache")
    rows = [{"dataset": "spam", "kernel": "poly", "centred": True, "budget": 10_000, "seed": 0,
             "method": "budget", "rule": "abc", "excess": 0.25},
            {"dataset": "spam", "kernel": "poly", "centred": True, "budget": 10_000, "seed": 1,
             "method": "exact", "excess": None},
            {"dataset": "spam", "kernel": "poly", "centred": False, "budget": 30_000, "seed": 0,
             "method": "exact", "rule": "", "excess": 0.0}]
    for row in rows:
        cache.add(row)
    centred = cache.load("spam", "poly", True)
    assert centred == {(10_000, 0, "budget", "abc"): rows[0], (10_000, 1, "exact", ""): rows[1]}
    assert cache.load("spam", "poly", False) == {(30_000, 0, "exact", ""): rows[2]}
    assert cache.load("letter", "poly", True) == {}
    # a second cache on the folder reads what the first wrote
    assert Cache(tmp_path / "cache").load("spam", "poly", True) == centred


def test_largest_within_is_the_largest_size_within_the_budget():
    def forecast(n_rows, d, k, n_y, kernel=None, center=True):
        return SimpleNamespace(words=d * n_y * n_y + 7 * n_y)

    n_rows, d = [300, 200], 3
    for budget in (0, 400, 5_000, 123_456, 10**7):
        brute = [n for n in range(budget_grid.K, sum(n_rows) + 1)
                 if forecast(n_rows, d, budget_grid.K, n).words <= budget]
        assert largest_landmarks_within(forecast, budget, n_rows, d, None) == (max(brute) if brute
                                                                      else None)


def test_distance_and_every_theta():
    thetas = every_theta()
    assert len({tuple(sorted(t.items())) for t in thetas}) == len(thetas) == 96_000
    assert sum(distance(t) == 0 for t in thetas) == 1 and PRIOR in thetas
    assert distance({**PRIOR, "RIDGE_FLOOR": True}) == 1.0  # a switch counts 1
    assert distance({**PRIOR, "MIN_BATCH_PILOT": 20}) == 1.0
    assert distance({**PRIOR, "PEAKED": math.inf}) == 1.0  # so does a PEAKED of never
    assert distance({**PRIOR, "FLAT": 0.5}) == pytest.approx((0.5 - 0.33) / 1.33)
    assert all(distance(t) >= 0 for t in thetas)


def test_load_standardized_reads_the_bundled_copies():
    X = load_standardized("spam")
    raw = load_spam()[0]
    assert X.shape == raw.shape
    np.testing.assert_allclose(X, (raw - raw.mean(axis=0)) / raw.std(axis=0), atol=1e-12)


def test_load_standardized_reads_a_csv_of_data_dir(tmp_path):
    rows = np.array([[1.0, 5.0, 2.0], [3.0, 5.0, 4.0], [8.0, 5.0, 0.0]])
    with gzip.open(tmp_path / "mine.csv.gz", "wt") as handle:
        handle.write("a,b,c,label\n")
        handle.writelines(",".join(map(str, r)) + ",x\n" for r in rows)
    X = load_standardized("mine", tmp_path)
    centred = rows - rows.mean(axis=0)
    np.testing.assert_allclose(X[:, [0, 2]], centred[:, [0, 2]] / rows[:, [0, 2]].std(axis=0))
    np.testing.assert_array_equal(X[:, 1], 0.0)  # a constant column is only centred
    with pytest.raises(SystemExit, match="mine2.csv.gz not found"):
        load_standardized("mine2", tmp_path)


@pytest.mark.parametrize("which", ["rbf0.2", "poly"])
def test_references_against_the_full_spectrum_and_their_cache(tmp_path, which):
    X = np.random.default_rng(3).standard_normal((60, 4))
    kernel = make_setting_kernel(X, which)
    refs = references("toy", which, X, kernel, tmp_path)
    Kmat = kernel(X, X)
    ones = np.full((60, 60), 1 / 60)
    Kc = Kmat - ones @ Kmat - Kmat @ ones + ones @ Kmat @ ones
    for centred, M in ((False, Kmat), (True, Kc)):
        w = np.linalg.eigvalsh(M)[::-1]
        assert refs[centred]["trace"] == pytest.approx(np.trace(M))
        assert refs[centred]["opt"] == pytest.approx(w[10:].sum(), rel=1e-8, abs=1e-8)
    assert refs[True]["center_norm_sq"] == pytest.approx(Kmat.mean())
    assert references("toy", which, X, kernel, tmp_path) == refs  # read back from the cache
    Y = X * 2.0  # other data: computed again, not read from the stale files
    assert references("toy", which, Y, kernel, tmp_path) != refs


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_benchmark_scripts_import_no_sibling_script():
    scripts = sorted(BENCHMARKS.glob("*.py"))
    names = {path.stem for path in scripts}
    for path in scripts:
        assert not _imported_modules(path) & names, path.name
        assert "sys.path.insert" not in path.read_text(), path.name


def _cell_rows(budgeted, best, other, key=("spam", "rbf0.2", True, 300_000)):
    rows = []
    for method, values in (("budget", budgeted), ("diskpca (ridge)", best),
                           ("uniform + disLR", other)):
        rows += [{"dataset": key[0], "kernel": key[1], "centred": key[2], "budget": key[3],
                  "seed": seed, "method": method, "chosen": "uniform + batch",
                  "n_landmarks": 100, "fit_words": key[3] - 1, "seconds": 0.1,
                  "excess": float(v)} for seed, v in enumerate(values)]
    return rows


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_undecided_cells_are_those_within_two_standard_errors_of_the_bar(seed):
    rng = np.random.default_rng(seed)
    best = 0.1 + 0.01 * rng.standard_normal(40)
    other = best + 0.05
    noise = 0.02 * rng.standard_normal(40)
    cases = {  # budgeted excess per seed -> undecided?
        "at the bar, noisy": (1.1 * best + noise - 0.5 * noise.mean(), True),
        "clearly within": (1.0 * best + 0.001 * rng.standard_normal(40), False),
        "clearly above": (1.3 * best + 0.001 * rng.standard_normal(40), False),
        "the best method's own fits": (best, False),
    }
    for name, (budgeted, expected) in cases.items():
        [cell] = budget_grid.cell_table(_cell_rows(budgeted, best, other))
        gap = budgeted - 1.1 * best
        margin = gap.mean() / (gap.std(ddof=1) / np.sqrt(gap.size))
        assert cell["undecided"] is expected, (name, margin)
        assert cell["best"] == "diskpca (ridge)"
        assert cell["ratio"] == pytest.approx(budgeted.mean() / best.mean())
