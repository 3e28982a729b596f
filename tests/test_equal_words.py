"""Tests of kernelscale.bench.equal_words (comparisons at equal words)."""

from __future__ import annotations

import math

import pytest

from kernelscale.bench.equal_words import (
    Setting,
    best_within,
    ci95_halfwidth,
    fmt,
    mean_std,
    summarize,
    words_to_reach,
)


def rows_of(values_by_param, words_by_param):
    return [dict(param=p, seed=s, words=words_by_param[p] + s, value=v)
            for p, vs in values_by_param.items() for s, v in enumerate(vs)]


def test_mean_std_is_the_sample_std():
    mean, std = mean_std([0.2, 0.4, 0.9])
    assert mean == pytest.approx(0.5)
    assert std == pytest.approx(math.sqrt(((0.3**2) + (0.1**2) + (0.4**2)) / 2))
    assert mean_std([3.0]) == (3.0, 0.0)
    with pytest.raises(ValueError, match="at least one"):
        mean_std([])


def test_summarize_groups_by_param_and_sorts_by_words():
    rows = rows_of({400: [1.0, 3.0], 50: [5.0, 7.0], 100: [2.0, 2.0]},
                   {400: 1000, 50: 100, 100: 300})
    out = summarize(rows, "value")
    assert [s.param for s in out] == [50, 100, 400]
    assert out[0] == Setting(50, 100.5, 6.0, math.sqrt(2.0), 2)
    assert out[2].words == pytest.approx(1000.5) and out[2].mean == 2.0


def test_best_within_a_budget_error_and_score():
    errors = [Setting("a", 10, 5.0, 0, 1), Setting("b", 20, 3.0, 0, 1),
              Setting("c", 30, 4.0, 0, 1), Setting("d", 40, 1.0, 0, 1)]
    assert best_within(errors, 5) is None
    assert best_within(errors, 10).param == "a"
    assert best_within(errors, 35).param == "b"  # c costs more and is worse
    assert best_within(errors, 40).param == "d"
    assert best_within(errors, 35, higher_is_better=True).param == "a"


def test_words_to_reach_takes_the_cheapest_setting_that_reaches():
    scores = [Setting(1, 10, 0.50, 0, 1), Setting(2, 20, 0.70, 0, 1),
              Setting(3, 30, 0.65, 0, 1), Setting(4, 40, 0.80, 0, 1)]
    assert words_to_reach(scores, 0.6, higher_is_better=True).param == 2
    assert words_to_reach(scores, 0.75, higher_is_better=True).param == 4
    assert words_to_reach(scores, 0.9, higher_is_better=True) is None
    assert words_to_reach(scores, 0.6).param == 1  # an error: <= target


def test_fmt():
    assert fmt(None) == "-"
    cell = fmt(Setting(800, 841385.4, 0.6771, 0.0191, 5), "D")
    assert cell == "0.677 ± 0.019 (D = 800, 841,385 w)"
    assert fmt(Setting(800, 1.0, 0.5, 0.25, 5), spec=".2f", words=False) == "0.50 ± 0.25"
    assert fmt(Setting(1, 1.0, 2e-5, 1e-6, 5), spec=".1e", words=False) == "2.0e-05 ± 1.0e-06"


def test_module_examples():
    import doctest

    import kernelscale.bench.equal_words as module

    assert doctest.testmod(module).failed == 0


def test_budget_grid_covers_every_setting():
    from kernelscale.bench.equal_words import budget_grid

    a = [Setting(1, 12_000.0, 0, 0, 1), Setting(2, 4_100_000.0, 0, 0, 1)]
    b = [Setting(1, 30_000.0, 0, 0, 1), Setting(2, 200_000.0, 0, 0, 1)]
    grid = budget_grid({"a": a, "b": b})
    assert grid[0] == pytest.approx(10**4.5)  # the first budget where both have a setting
    assert grid[-1] == pytest.approx(10**7) and grid[-2] < 4_100_000  # the largest counts
    assert all(y / x == pytest.approx(10**0.5) for x, y in zip(grid, grid[1:], strict=False))
    assert budget_grid({"a": [Setting(1, 1000.0, 0, 0, 1)]}) == [pytest.approx(1000.0)]
    with pytest.raises(ValueError, match="at least one setting"):
        budget_grid({"a": a, "b": []})


def test_ci95_is_students_t_interval_of_the_mean():
    from scipy import stats

    values = [0.61, 0.64, 0.60, 0.66, 0.62]
    mean, std = mean_std(values)
    low, high = stats.t.interval(0.95, len(values) - 1, loc=mean, scale=stats.sem(values))
    assert ci95_halfwidth(std, len(values)) == pytest.approx((high - low) / 2)
    assert Setting("T", 1.0, mean, std, len(values)).ci95 == pytest.approx((high - low) / 2)
    assert ci95_halfwidth(0.3, 1) == 0.0
