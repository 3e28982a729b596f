"""The word budget on real data: is ``DistributedKernelPCA(max_words=B)`` near the best method?

For each data set (digits, letter, satellite, spam, insurance, musk, income, shuttle,
dna; every feature standardised), kernel (RBF at 0.2 and 1.0 x the median distance, polynomial
q = 4, arc-cosine order 2), budget B (10^4 to 10^6 words), centring (centred,
the estimator's default, on every set; uncentred, the papers' setting, on
digits and satellite) and seed, it fits

* the budgeted estimator, ``DistributedKernelPCA(max_words=B)``: the plan of
  :func:`kernelscale.horizontal.budget.plan_budget` and its pilot rule
  (:mod:`kernelscale.horizontal.pilot`), and
* every method sized to the same budget, ``DistributedKernelPCA(method=m,
  max_words=B)``: the largest |Y| whose forecast is within B (disKPCA with the
  ridge and the paper's sampler, uniform + disLR, uniform + batch KPCA, exact
  KPCA when all the data fits),

k = 10, power-law workers (5 on digits, 10 on the other sets). The criterion
(issue 20) is the excess (err - opt) / (trace - opt) against the exact rank-k
optimum (references cached in ``results/sampler/refs``): in each cell the
budgeted fit's mean excess should be at most 1.1 x the best method's (a cell
whose best excess is below 1e-6 counts as met), and no ledger may exceed B.

Every fit's result is cached on disk, one JSON line per (data, kernel,
centring, B, seed, method) in ``results/budget/cache/``; a budgeted fit's key
also holds a fingerprint of the rule's source, so changing the rule re-runs
only the budgeted fits. Seeds run one after the other over the whole grid, so
a run cut short leaves whole seeds. The grid's constants, fits and cache are
:mod:`budget_shared.budget_grid`; the data, kernels and references
:mod:`kernelscale.bench.settings`.

    python benchmarks/budget.py --seeds 5                 # the grid (hours on a quiet 2-core box)
    python benchmarks/budget.py --seeds 2 --part sized    # only the methods sized to B
    python benchmarks/budget.py --datasets letter --kernels rbf0.2 --budgets 100000 1000000
    python benchmarks/budget.py --summary-only            # summary.md and the plot from the cache
    python benchmarks/budget.py --plot-only --out DIR     # the plot from DIR/results.csv

Writes ``benchmarks/results/budget/{results.csv, summary.md, budget.png, cache/}``.

A set named ``NAME-unit`` is NAME with every row scaled to unit norm after the
standardisation, as text features often are. There a polynomial or arc-cosine
kernel has the same k(a, a) for every point, so the pilot rule's diagonal test
does not fire and the rule reads the flatness of a pilot of k points:

    python benchmarks/budget.py --seeds 10 --kernels poly arccos \
        --datasets digits-unit spam-unit satellite-unit insurance-unit \
        --out benchmarks/results/budget/unit_rows
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict
from pathlib import Path

from budget_shared.budget_grid import (
    AT_OPTIMUM,
    BUDGETS,
    DATASETS,
    KERNELS,
    METHODS,
    TOLERANCE,
    UNCENTRED,
    UNIT_DATASETS,
    Cache,
    K,
    cell_table,
    method_tag,
    one_fit,
    rule_fingerprint,
    sampler_fingerprint,
    settings,
)

from kernelscale.bench import write_rows
from kernelscale.bench.scripts import read_rows, verdict
from kernelscale.bench.settings import (
    KERNEL_LABELS,
    UNIT,
    load_set,
    make_setting_kernel,
    n_workers,
    references,
)
from kernelscale.partition import make_partition, split

OUT = Path(__file__).parent / "results" / "budget"
REFS = Path(__file__).parent / "results" / "sampler" / "refs"
COLUMNS = ("dataset", "kernel", "centred", "budget", "seed", "method", "chosen",
           "n_landmarks", "fit_words", "seconds", "error", "excess", "reason")


def grid_jobs(args):
    """``(seed, data, kernel, centred, budgets)`` over the grid the arguments name, seed by
    seed."""
    for seed in args.seeds:
        for dataset, which, centred in settings(args.datasets, args.kernels):
            yield seed, dataset, which, centred, args.budgets


def undecided_jobs(rows: list[dict], n_seeds: int):
    """The jobs that bring every undecided cell (:func:`cell_table`) to seeds 0..n_seeds-1."""
    cells = [c["key"] for c in cell_table(rows) if c["undecided"]]
    for seed in range(n_seeds):
        for dataset, which, centred, budget in cells:
            yield seed, dataset, which, centred, [budget]


def run(jobs, part: str, cache: Cache) -> None:
    """The sized methods and the budgeted fit of each job's cells (cached fits skipped)."""
    rule, sampler = rule_fingerprint(), sampler_fingerprint()
    data, kernels, refs = {}, {}, {}
    for seed, dataset, which, centred, budgets in jobs:
        if dataset not in data:
            data[dataset] = load_set(dataset)
        X = data[dataset]
        if (dataset, which) not in kernels:
            kernels[dataset, which] = make_setting_kernel(X, which)
            refs[dataset, which] = references(dataset, which, X, kernels[dataset, which], REFS)
        kernel, ref = kernels[dataset, which], refs[dataset, which][centred]
        done = cache.load(dataset, which, centred)
        parts = split(X, make_partition(X.shape[0], n_workers(dataset), random_state=seed))
        todo = []
        for budget in budgets:
            if part in ("all", "sized"):
                todo += [(budget, name, method_tag(name, rule, sampler), options)
                         for name, options in METHODS.items()]
            if part in ("all", "budget"):
                todo.append((budget, "budget", rule, {}))
        start, count = time.perf_counter(), 0
        for budget, name, tag, options in todo:
            if (budget, seed, name, tag) in done:
                continue
            result = one_fit(parts, kernel, ref, budget, seed, centred, options)
            count += 1
            row = {"dataset": dataset, "kernel": which, "centred": centred,
                   "budget": budget, "seed": seed, "method": name, "rule": tag,
                   **(result or {"chosen": "-", "n_landmarks": 0, "fit_words": 0,
                                 "seconds": 0.0, "error": None, "excess": None,
                                 "reason": "over budget"})}
            cache.add(row)
        print(f"seed {seed} {dataset} {which} {'centred' if centred else 'uncentred'}: "
              f"{count} fits, {time.perf_counter() - start:.0f} s", flush=True)


def collect(cache: Cache, rule: str, sampler: str) -> list[dict]:
    """The cached rows of the current rule (budgeted fits), sampler and every sized method."""
    rows = []
    for dataset, which, centred in settings(DATASETS + UNIT_DATASETS, KERNELS):
        for (_, _, method, tag), r in sorted(cache.load(dataset, which, centred)
                                                     .items(), key=lambda kv: str(kv[0])):
            if r["error"] is None or tag != method_tag(method, rule, sampler):
                continue
            rows.append({c: r.get(c, "") for c in COLUMNS})
    return rows


SHORT = {"diskpca (ridge)": "R", "uniform + disLR": "U", "uniform + batch": "B", "exact": "E"}


def compact_table(table) -> str:
    """Budgeted / best mean excess per (data, kernel, centring) and B, with what was chosen.

    R: disKPCA (ridge), U: uniform + disLR, B: uniform + batch, E: exact; '*' marks a
    cell that misses 1.1x; 'opt' a cell at the optimum (best excess < 1e-6).
    """
    rows = defaultdict(dict)
    for c in table:
        d, k, centred, b = c["key"]
        picks = "".join(SHORT.get(m, "?") for m, _ in sorted(c["chosen"].items(),
                                                               key=lambda kv: -kv[1]))
        if c["mean"][c["best"]] < AT_OPTIMUM:
            rows[(d, k, centred)][b] = f"opt {picks}"
        else:
            rows[(d, k, centred)][b] = f"{c['ratio']:.2f}{'' if c['met'] else '*'} {picks}"
    lines = ["| data | kernel | c/u | " + " | ".join(f"{b:,}" for b in BUDGETS) + " |",
             "|" + "---|" * (len(BUDGETS) + 3)]
    for (d, k, centred), cells in sorted(rows.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                        not kv[0][2])):
        lines.append(f"| {d} | {KERNEL_LABELS[k]} | {'c' if centred else 'u'} | "
                     + " | ".join(cells.get(b, "-") for b in BUDGETS) + " |")
    lines += ["", "Each cell: the budgeted fit's mean excess over the best method's, then "
              "what it chose (R: disKPCA with the ridge sampler, U: uniform + disLR, B: "
              "uniform + batch, E: exact; most frequent first). *: above 1.1; opt: the best "
              "excess is below 1e-6 (met)."]
    return "\n".join(lines)


def forecast_alone_line(table) -> str:
    """The plan before the pilot: exact where it fits within B, else disKPCA (ridge)."""
    met, worst = 0, (0.0, None)
    for c in table:
        plan = c["mean"].get("exact", c["mean"].get("diskpca (ridge)"))
        best = c["mean"][c["best"]]
        if plan is None:
            continue
        ratio = plan / best if best > 0 else 1.0
        if best < AT_OPTIMUM or ratio <= TOLERANCE:
            met += 1
        elif ratio > worst[0]:
            worst = (ratio, c["key"])
    text = (f"- The forecast alone (the plan before the pilot: exact where it fits within B, "
            f"else disKPCA with the ridge sampler) is within {TOLERANCE} x in {met} of "
            f"{len(table)} cells")
    if worst[1] is not None:
        d, k, centred, b = worst[1]
        text += (f"; its worst cell: {d} {KERNEL_LABELS[k]} {'c' if centred else 'u'} "
                 f"B={b:,}, {worst[0]:.2f}x")
    return text + "."


def _g(value: float) -> str:
    return f"{value:.3g}"


def write_summary(table: list[dict], out: Path) -> None:
    missed = [c for c in table if not c["met"]]
    over = [c for c in table if c["over"]]
    n_seeds = defaultdict(int)
    for c in table:
        n_seeds[len(c["seeds"])] += 1
    seed_note = ", ".join(f"{count} cells with {n} seed(s)"
                          for n, count in sorted(n_seeds.items()))
    order = ["budget", *METHODS]
    unit = all(c["key"][0].endswith(UNIT) for c in table)
    lines = [
        "# The word budget on real data" + (", rows of unit norm" if unit else ""), "",
        ("Every row scaled to unit norm after the standardisation (the set's name ends in "
         f"'{UNIT}'; the command is in the script's docstring): k(a, a) is the same for every "
         "point. " if unit else "")
        + "Produced by `nice -n 10 python benchmarks/budget.py --seeds N` (results cached in "
        "`cache/`; `--summary-only` rebuilds this page) on the shared 2-core machine under "
        f"load (seconds are noisy: compare them within a row). Seeds run: {seed_note}. k = {K}; "
        "power-law workers (5 on digits, 10 elsewhere); every feature standardised; centred "
        "on every set" + ("" if unit else f", uncentred also on {' and '.join(UNCENTRED)}")
        + ". Each cell: the budgeted "
        "fit `DistributedKernelPCA(max_words=B)` against every method sized to B "
        "(`method=m, max_words=B`), mean over the seeds where all ran. Excess = "
        "(err - opt) / (trace - opt) of the training data against the exact rank-k optimum.",
        "", "## Verdict", "",
        f"- No ledger above B: {sum(len(c['over']) for c in table)} of "
        f"{sum(len(c['seeds']) for c in table):,} budgeted fits over their budget, in "
        f"{len(over)} of {len(table)} cells. {verdict(not over)}",
        f"- Budgeted excess <= {TOLERANCE} x the best method's (or best < {AT_OPTIMUM:g}): "
        f"{len(table) - len(missed)} of {len(table)} cells. {verdict(not missed)}",
    ]
    if missed:
        within = [x for x in missed
                  if x["mean"]["budget"] - x["mean"][x["best"]] <= 2 * x["noise"]]
        lines.append("- Cells that miss (budgeted / best excess = ratio, the best method; "
                     "'noise': the gap is within 2 standard errors of the difference of the "
                     "means over seeds): " + "; ".join(
                         f"{d} {KERNEL_LABELS[k]} {'c' if c else 'u'} B={b:,}: "
                         f"{_g(x['mean']['budget'])} / {_g(x['mean'][x['best']])} = "
                         f"{x['ratio']:.2f}x ({x['best']}"
                         f"{', noise' if x in within else ''})"
                         for x in missed for d, k, c, b in [x["key"]]) + ".")
        lines.append(f"- Of the {len(missed)} misses, {len(within)} are within 2 standard "
                     f"errors (the budgeted fit and the best method are different random "
                     f"draws); {len(missed) - len(within)} are not.")
    undecided = [c for c in table if c["undecided"]]
    lines.append(
        f"- Undecided (the budgeted excess minus {TOLERANCE} x the best method's, paired by "
        f"seed, within 2 standard errors of 0; `--undecided-seeds N` runs them with more "
        f"seeds): {len(undecided)} of {len(table)} cells" + (": " + "; ".join(
            f"{d} {KERNEL_LABELS[k]} {'c' if c else 'u'} B={b:,} ({x['ratio']:.2f}x, "
            f"{len(x['seeds'])} seeds)" for x in undecided for d, k, c, b in [x["key"]])
            if undecided else "") + ".")
    lines.append(forecast_alone_line(table))
    chosen = defaultdict(int)
    for c in table:
        for m, n in c["chosen"].items():
            chosen[m] += n
    picks = ", ".join(f"{m} {n}" for m, n in sorted(chosen.items()))
    lines += [f"- The budgeted fit chose: {picks} (fits).", "",
              "## Every cell", "",
              "Mean excess (mean fit words in thousands, mean seconds of the fit) per method; "
              "`budget` is the budgeted fit, with what it chose and its mean |Y|. c/u: "
              "centred/uncentred. ratio: budget / best.", "",
              "| data | kernel | c/u | B | seeds | chosen (mean |Y|) | "
              + " | ".join(order) + " | best | ratio | met |",
              "|" + "---|" * (len(order) + 9)]
    for c in table:
        d, k, centred, b = c["key"]
        cells = [f"{_g(c['mean'][m])} ({c['words'][m] / 1000:.0f}k, {c['seconds'][m]:.1f}s)"
                 if m in c["mean"] else "-" for m in order]
        what = ", ".join(f"{m} x{n}" for m, n in sorted(c["chosen"].items()))
        lines.append(f"| {d} | {KERNEL_LABELS[k]} | {'c' if centred else 'u'} | {b:,} | "
                     f"{len(c['seeds'])} | {what} ({c['size']:.0f}) | " + " | ".join(cells)
                     + f" | {c['best']} | {c['ratio']:.2f} | {'yes' if c['met'] else '**no**'} |")
    lines += ["", "## Compact", "", compact_table(table)]
    lines += ["", "Words: every fit's ledger is within B (the sized methods at their largest "
              "|Y| within B; the words themselves are in results.csv).", ""]
    (out / "summary.md").write_text("\n".join(lines))


#: One colour per line, none alike (the default cycle drew two methods in red and brown).
COLOURS = {"budget": "black", "diskpca (ridge)": "tab:blue", "diskpca (paper)": "tab:purple",
           "uniform + disLR": "tab:orange", "uniform + batch": "tab:green", "exact": "tab:gray"}


def plot(table: list[dict], out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no budget.png", file=sys.stderr)
        return
    groups = sorted({(c["key"][0], c["key"][1]) for c in table if c["key"][2]})
    if not groups:
        return
    datasets = sorted({g[0] for g in groups})
    kernels = [k for k in KERNELS if any(g[1] == k for g in groups)]
    fig, axes = plt.subplots(len(datasets), len(kernels), figsize=(3.75 * len(kernels),
                                                                    3 * len(datasets)),
                             squeeze=False)
    for dataset, which in groups:
        ax = axes[datasets.index(dataset), kernels.index(which)]
        cells = sorted((c for c in table if c["key"][:3] == (dataset, which, True)),
                       key=lambda c: c["key"][3])
        for method in ["budget", *METHODS]:
            pts = [(c["key"][3], c["mean"][method]) for c in cells
                   if method in c["mean"] and c["mean"][method] > 0]
            if pts:
                ax.plot(*zip(*pts, strict=True), "o-" if method == "budget" else ".--",
                        label=method, lw=2.5 if method == "budget" else 1,
                        color=COLOURS.get(method))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{dataset}, {KERNEL_LABELS[which]} (centred)", fontsize=9)
        ax.set_xlabel("word budget B")
        ax.set_ylabel("excess")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "budget.png", dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 0..N-1 (default 5)")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS + UNIT_DATASETS,
                        default=list(DATASETS))
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS))
    parser.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    parser.add_argument("--part", choices=("all", "sized", "budget"), default="all",
                        help="which fits to run: the methods sized to B, the budgeted fit, both")
    parser.add_argument("--summary-only", action="store_true")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw OUT/budget.png from OUT/results.csv (the rows its summary "
                             "was written from, whatever rule the library has now)")
    parser.add_argument("--undecided-seeds", type=int, default=0, metavar="N",
                        help="then run every undecided cell of the cache (its budgeted - 1.1 x "
                             "best excess, paired by seed, within 2 standard errors of 0) "
                             "with seeds 0..N-1")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--cache", type=Path, default=None,
                        help="the fits' cache (default OUT/cache): a run writing its summary "
                             "elsewhere can reuse the grid's sized fits")
    args = parser.parse_args(argv)
    args.seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    if args.plot_only:
        rows = [{**r, "centred": r["centred"] in (True, "True")}
                for r in read_rows(args.out / "results.csv")]
        plot(cell_table(rows), args.out)
        return 0
    cache = Cache(args.cache or args.out / "cache")
    if not args.summary_only:
        run(grid_jobs(args), args.part, cache)
    rows = collect(cache, rule_fingerprint(), sampler_fingerprint())
    if args.undecided_seeds and not args.summary_only:
        run(undecided_jobs(rows, args.undecided_seeds), "all", cache)
        rows = collect(cache, rule_fingerprint(), sampler_fingerprint())
    if rows:
        args.out.mkdir(parents=True, exist_ok=True)
        write_rows(args.out / "results.csv", rows)
        table = cell_table(rows)  # per cell, for the summary and the plot
        write_summary(table, args.out)
        plot(table, args.out)
        print(f"wrote {args.out}/summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
