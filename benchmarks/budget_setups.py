"""The word budget held out: sets and set-ups that no rule or constant was chosen on.

``benchmarks/budget.py`` judges ``DistributedKernelPCA(max_words=B)`` on nine sets
in one set-up (k = 10, power-law workers, centred; uncentred on two sets), and the
planner's rules were chosen there. This script judges it on data sets left out of
all tuning (``benchmarks/data``: many rows and few columns, mixed numeric and
ordinal columns, dozens of skewed continuous measurements; 2,500 rows or fewer each,
for the exact references) in set-ups that vary what the grid holds fixed
(:data:`SETUPS`): centred and uncentred, uniform and power-law partitions, 5 to 50
workers, k from 5 to 50; kernels RBF at 0.1, 0.2 and 1.0 x the median distance; B =
10^4 to 10^6 words. In each cell, as in the grid, the budgeted fit against every
method the planner weighs, sized to the same B (disKPCA with the ridge sampler,
uniform + disLR, uniform + batch, exact where all the data fits), by the mean excess
(err - opt) / (trace - opt) against the exact rank-k optimum; the bar is 1.15x the
best method's (a best below 1e-6 counts as met), and no ledger may exceed B.

Every fit is cached, one JSON line per (set, kernel, set-up, B, seed, method) in
``results/budget/setups/cache/`` (a budgeted fit's key holds the rule's
fingerprint: a new rule re-runs only the budgeted fits); the exact spectra (top 50
eigenvalues, both centrings) in ``results/budget/setups/refs/``. Seeds run one
after the other over the whole grid, so a run cut short keeps whole seeds.

    nice -n 19 python benchmarks/budget_setups.py --seeds 3 --part sized   # the methods
    nice -n 19 python benchmarks/budget_setups.py --seeds 3                # and the budget
    python benchmarks/budget_setups.py --seeds 0 --undecided-seeds 10      # undecided cells
    python benchmarks/budget_setups.py --summary-only

Writes ``benchmarks/results/budget/setups/{results.csv, summary.md}``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import NamedTuple

from budget_shared.budget_grid import (
    AT_OPTIMUM,
    BUDGETS,
    METHODS,
    Cache,
    cell_table,
    method_tag,
    one_fit,
    rule_fingerprint,
    sampler_fingerprint,
)

from kernelscale.bench import write_rows
from kernelscale.bench.scripts import verdict
from kernelscale.bench.settings import (
    KERNEL_LABELS,
    load_standardized,
    make_setting_kernel,
    spectrum_references,
)
from kernelscale.horizontal.budget import WordBudgetError, plan_budget
from kernelscale.partition import make_partition, split

OUT = Path(__file__).parent / "results" / "budget" / "setups"
DATA = Path(__file__).parent / "data"
#: The held-out sets (``benchmarks/data/README.md``), none of them seen by any tuning.
DATASETS = ("cpssw8", "diamonds", "cells")
#: The RBF kernels, narrow and wide. The polynomial kernel is left out: there the
#: pilot rule keeps the ridge sampler by its diagonal, whatever the data, and the
#: budgeted fit is the sized ridge fit draw for draw (``benchmarks/budget.py``).
KERNELS = ("rbf0.1", "rbf0.2", "rbf1.0")
#: The methods sized to B: the planner's candidates (the paper's sampler, slow with
#: 50 workers' embeddings, is the grid's only extra and never its best here).
SIZED = {m: METHODS[m] for m in ("diskpca (ridge)", "uniform + disLR", "uniform + batch",
                                 "exact")}
#: The bar held out: the budgeted fit's mean excess within this factor of the best's.
HELD_OUT = 1.15
FIELDS = ("dataset", "kernel", "setup", "budget")
COLUMNS = ("dataset", "kernel", "setup", "budget", "seed", "method", "chosen",
           "n_landmarks", "fit_words", "choosing_words", "seconds", "error", "excess",
           "reason")


class Setup(NamedTuple):
    """How the data are spread and what is asked of the fit."""

    centred: bool
    partition: str
    workers: int
    k: int

    def describe(self) -> str:
        return (f"{'centred' if self.centred else 'uncentred'}, {self.workers} "
                f"{self.partition.replace('_', '-')} workers, k = {self.k}")


#: The set-ups, each away from the grid's (centred, power-law, 10 workers, k = 10) in
#: several ways at once: centred and uncentred, uniform and power-law partitions, 5, 20
#: and 50 workers, k = 5, 20, 50.
SETUPS = {
    "u-uni5-k5": Setup(False, "uniform", 5, 5),
    "c-pl50-k20": Setup(True, "power_law", 50, 20),
    "u-pl20-k50": Setup(False, "power_law", 20, 50),
}


def jobs(args):
    """``(seed, data, kernel, set-up, budgets)`` over the arguments' grid, seed by seed."""
    for seed in args.seeds:
        for dataset in args.datasets:
            for which in args.kernels:
                for name in args.setups:
                    yield seed, dataset, which, name, args.budgets


def undecided_jobs(rows: list[dict], n_seeds: int):
    """The jobs that bring every undecided cell to seeds 0..n_seeds-1."""
    cells = [c["key"] for c in cell_table(rows, FIELDS, HELD_OUT) if c["undecided"]]
    for seed in range(n_seeds):
        for dataset, which, name, budget in cells:
            yield seed, dataset, which, name, [budget]


def _reference(spectrum: dict, k: int) -> dict:
    """The rank-k optimum of one centring's spectrum, as :func:`one_fit` reads it."""
    return {"trace": spectrum["trace"], "opt": spectrum["trace"] - float(spectrum["top"][:k].sum()),
            "center_norm_sq": spectrum["center_norm_sq"]}


def run(jobs, part: str, cache: Cache) -> None:
    """The sized methods and the budgeted fit of each job's cells (cached fits skipped)."""
    rule, sampler = rule_fingerprint(), sampler_fingerprint()
    data, kernels, refs = {}, {}, {}
    for seed, dataset, which, name, budgets in jobs:
        setup = SETUPS[name]
        if dataset not in data:
            data[dataset] = load_standardized(dataset, DATA)
        X = data[dataset]
        if (dataset, which) not in kernels:
            kernels[dataset, which] = make_setting_kernel(X, which)
            refs[dataset, which] = spectrum_references(dataset, which, X,
                                                       kernels[dataset, which], OUT / "refs")
        kernel = kernels[dataset, which]
        ref = _reference(refs[dataset, which][setup.centred], setup.k)
        done = cache.load(dataset, which, setup.centred, name)
        parts = split(X, make_partition(X.shape[0], setup.workers, setup.partition,
                                        random_state=seed))
        todo = []
        for budget in budgets:
            if part in ("all", "sized"):
                todo += [(budget, m, method_tag(m, rule, sampler), options)
                         for m, options in SIZED.items()]
            if part in ("all", "budget"):
                todo.append((budget, "budget", rule, {}))
        start, count = time.perf_counter(), 0
        for budget, method, tag, options in todo:
            if (budget, seed, method, tag) in done:
                continue
            result = (stand_in(done, parts, kernel, budget, seed, setup) if method == "budget"
                      else None)
            if result is None:
                result = one_fit(parts, kernel, ref, budget, seed, setup.centred, options,
                                 n_components=setup.k)
            count += 1
            cache.add({"dataset": dataset, "kernel": which, "centred": setup.centred,
                       "setup": name, "budget": budget, "seed": seed, "method": method,
                       "rule": tag,
                       **(result or {"chosen": "-", "n_landmarks": 0, "fit_words": 0,
                                     "seconds": 0.0, "error": None, "excess": None,
                                     "reason": "over budget"})})
        if count:
            print(f"seed {seed} {dataset} {which} {name}: {count} fits, "
                  f"{time.perf_counter() - start:.0f} s", flush=True)


def stand_in(done: dict, parts, kernel, budget: int, seed: int, setup: Setup) -> dict | None:
    """The sized fit that the budgeted fit is, draw for draw, where there is one; else None.

    Where the budget's forecast picks exact KPCA or uniform + batch at its largest size
    before any pilot, ``DistributedKernelPCA(k, max_words=B)`` runs that method as
    ``method=m, max_words=B`` does, with the same seed: the same fit, so the cached
    sized fit stands in for it (these are the costliest fits of the grid: an n x n
    eigenproblem with few workers and a large B).
    """
    try:
        plan = plan_budget(budget, [p.shape[0] for p in parts], parts[0].shape[1], setup.k,
                           kernel=kernel, center=setup.centred, measured=True)
    except WordBudgetError:
        return None
    label = {"exact": "exact", "uniform_batch": "uniform + batch"}.get(plan.method)
    sized = done.get((budget, seed, label, ""))
    if label is None or plan.forecast is not plan.candidates[plan.method] or sized is None \
            or sized["excess"] is None:
        return None
    return {k: sized[k] for k in ("chosen", "n_landmarks", "fit_words", "seconds", "error",
                                  "excess")} | {"reason": f"{plan.reason} (the sized fit)"}


def collect(cache: Cache, datasets, rule: str, sampler: str) -> list[dict]:
    """The cached rows of the current rule (budgeted fits), sampler and every sized method."""
    rows = []
    for dataset in datasets:
        for which in KERNELS:
            for name, setup in SETUPS.items():
                fits = cache.load(dataset, which, setup.centred, name)
                for (_, _, method, tag), r in sorted(fits.items(), key=lambda kv: str(kv[0])):
                    if r["error"] is None or tag != method_tag(method, rule, sampler):
                        continue
                    rows.append({c: r.get(c, "") for c in COLUMNS})
    return rows


def _g(value: float) -> str:
    return f"{value:.3g}"


def _noise(cell: dict) -> bool:
    """Whether a cell's gap to the best method is within 2 standard errors of the means'
    difference (the budgeted fit and the best method are different random draws)."""
    return cell["mean"]["budget"] - cell["mean"][cell["best"]] <= 2 * cell["noise"]


SHORT = {"diskpca (ridge)": "R", "uniform + disLR": "U", "uniform + batch": "B", "exact": "E"}


def _cell_text(c: dict) -> str:
    picks = "".join(SHORT.get(m, "?") for m, _ in sorted(c["chosen"].items(),
                                                           key=lambda kv: -kv[1]))
    if c["mean"][c["best"]] < AT_OPTIMUM:
        return f"opt {picks}"
    return f"{c['ratio']:.2f}{'' if c['met'] else '*'} {picks}"


def write_summary(table: list[dict], rows: list[dict], out: Path) -> None:
    missed = [c for c in table if not c["met"]]
    n_over = sum(len(c["over"]) for c in table)
    n_fits = sum(len(c["seeds"]) for c in table)
    seeds = defaultdict(int)
    for c in table:
        seeds[len(c["seeds"])] += 1
    budget_rows = [r for r in rows if r["method"] == "budget"]
    choosing = [r["choosing_words"] / r["budget"] for r in budget_rows
                if isinstance(r.get("choosing_words"), int | float)]
    lines = [
        "# The word budget held out: sets and set-ups no rule was chosen on", "",
        "Produced by `nice -n 19 python benchmarks/budget_setups.py` (the command lines are in "
        "the script's docstring; results cached in `cache/`, `--summary-only` rebuilds this "
        "page) on the shared 2-core machine. Sets (`benchmarks/data/README.md`): "
        + ", ".join(sorted({c["key"][0] for c in table})) + ". Kernels: "
        + ", ".join(KERNEL_LABELS[k] for k in KERNELS) + ". Set-ups: "
        + "; ".join(f"`{n}` {s.describe()}" for n, s in SETUPS.items()) + ". Seeds: "
        + ", ".join(f"{count} cells with {n}" for n, count in sorted(seeds.items()))
        + ". Each cell: the budgeted fit `DistributedKernelPCA(k, max_words=B)` against every "
        "method sized to B, mean excess over the seeds where all ran.", "",
        "## Verdict", "",
        f"- No ledger above B: {n_over} of {n_fits:,} budgeted fits over their budget. "
        f"{verdict(not n_over) if n_fits else '**not run yet**'}",
        f"- Budgeted excess <= {HELD_OUT} x the best method's (or best < {AT_OPTIMUM:g}): "
        f"{len(table) - len(missed)} of {len(table)} cells. "
        f"{verdict(not missed) if table else '**not run yet**'}",
    ]
    if choosing:
        lines.append(f"- What choosing cost (the words of the measurement that a fit of the "
                     f"chosen method alone would not have sent), as a share of B: median "
                     f"{sorted(choosing)[len(choosing) // 2]:.2%}, at most {max(choosing):.2%} "
                     f"over {len(choosing):,} budgeted fits.")
    if missed:
        lines.append("- Cells that miss (budgeted / best = ratio, the best method; 'noise': "
                     "the gap is within 2 standard errors): " + "; ".join(
                         f"{d} {KERNEL_LABELS[k]} {s} B={b:,}: {_g(x['mean']['budget'])} / "
                         f"{_g(x['mean'][x['best']])} = {x['ratio']:.2f}x ({x['best']}"
                         f"{', noise' if _noise(x) else ''})"
                         for x in missed for d, k, s, b in [x["key"]]) + ".")
    undecided = [c for c in table if c["undecided"]]
    lines.append(f"- Undecided at {HELD_OUT}x (paired by seed, within 2 standard errors; "
                 f"`--undecided-seeds N` runs them with more seeds): {len(undecided)} of "
                 f"{len(table)} cells.")
    lines += ["", "## Per set-up", "", "| set-up | cells | met | worst ratio | worst cell |",
              "|---|---|---|---|---|"]
    for name, setup in SETUPS.items():
        cells = [c for c in table if c["key"][2] == name]
        if not cells:
            continue
        worst = max(cells, key=lambda c: c["ratio"] if c["mean"][c["best"]] >= AT_OPTIMUM
                    else 0.0)
        d, k, _, b = worst["key"]
        lines.append(f"| {name} ({setup.describe()}) | {len(cells)} | "
                     f"{sum(c['met'] for c in cells)} | {worst['ratio']:.2f} | "
                     f"{d} {KERNEL_LABELS[k]} B={b:,} |")
    lines += ["", "## Per kernel", "", "| kernel | cells | met | worst ratio |",
              "|---|---|---|---|"]
    for which in KERNELS:
        cells = [c for c in table if c["key"][1] == which]
        if cells:
            worst = max((c["ratio"] for c in cells if c["mean"][c["best"]] >= AT_OPTIMUM),
                        default=1.0)
            lines.append(f"| {KERNEL_LABELS[which]} | {len(cells)} | "
                         f"{sum(c['met'] for c in cells)} | {worst:.2f} |")
    lines += ["", "## Compact", "", "Each cell: the budgeted fit's mean excess over the best "
              "method's, then what it chose (R: disKPCA with the ridge sampler, U: uniform + "
              "disLR, B: uniform + batch, E: exact; most frequent first); *: above "
              f"{HELD_OUT}; opt: the best excess is below 1e-6 (met); -: no cell (k components "
              "cost more than B).", "",
              "| data | kernel | set-up | " + " | ".join(f"{b:,}" for b in BUDGETS) + " |",
              "|" + "---|" * (len(BUDGETS) + 3)]
    grouped = defaultdict(dict)
    for c in table:
        d, k, s, b = c["key"]
        grouped[(d, k, s)][b] = _cell_text(c)
    for (d, k, s), cells in sorted(grouped.items(),
                                   key=lambda kv: (kv[0][0], KERNELS.index(kv[0][1]),
                                                   list(SETUPS).index(kv[0][2]))):
        lines.append(f"| {d} | {KERNEL_LABELS[k]} | {s} | "
                     + " | ".join(cells.get(b, "-") for b in BUDGETS) + " |")
    order = ["budget", *SIZED]
    lines += ["", "## Every cell", "", "Mean excess (mean fit words in thousands) per method; "
              "`budget` is the budgeted fit, with what it chose and its mean |Y|.", "",
              "| data | kernel | set-up | B | seeds | chosen (mean |Y|) | " + " | ".join(order)
              + " | best | ratio | met |", "|" + "---|" * (len(order) + 9)]
    for c in table:
        d, k, s, b = c["key"]
        cells = [f"{_g(c['mean'][m])} ({c['words'][m] / 1000:.0f}k)" if m in c["mean"]
                 else "-" for m in order]
        what = ", ".join(f"{m} x{n}" for m, n in sorted(c["chosen"].items()))
        lines.append(f"| {d} | {KERNEL_LABELS[k]} | {s} | {b:,} | {len(c['seeds'])} | {what} "
                     f"({c['size']:.0f}) | " + " | ".join(cells) + f" | {c['best']} | "
                     f"{c['ratio']:.2f} | {'yes' if c['met'] else '**no**'} |")
    (out / "summary.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default 3)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS))
    parser.add_argument("--setups", nargs="+", choices=list(SETUPS), default=list(SETUPS))
    parser.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    parser.add_argument("--part", choices=("all", "sized", "budget"), default="all")
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--undecided-seeds", type=int, default=0, metavar="N")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    args.seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    cache = Cache(args.out / "cache")
    if not args.summary_only:
        run(jobs(args), args.part, cache)
    rows = collect(cache, DATASETS, rule_fingerprint(), sampler_fingerprint())
    if args.undecided_seeds and not args.summary_only:
        run(undecided_jobs(rows, args.undecided_seeds), "all", cache)
        rows = collect(cache, DATASETS, rule_fingerprint(), sampler_fingerprint())
    if rows:
        write_rows(args.out / "results.csv", rows)
        write_summary(cell_table(rows, FIELDS, HELD_OUT), rows, args.out)
        print(f"wrote {args.out}/summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
