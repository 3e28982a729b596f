"""Paper 001's experiments at a glance: every method's best error within word and time budgets.

Run after ``kernelscale bench NAME`` for the experiments of
:mod:`kernelscale.bench.experiments`: ``python benchmarks/diskpca_words.py`` reads
``benchmarks/results/diskpca_*/results.csv`` and writes
``benchmarks/results/diskpca_words.md``, one row per experiment and method, the best
mean excess (err - opt) / (trace - opt) where the optimum is known, the raw error
otherwise, the k-means objective for Figure 8, within each budget B of fit words; then
the same within budgets T of fit seconds (the fit in one process on one BLAS thread, as
the CSVs record it) and of parallel seconds (each worker on its own core: every round's
worker steps replaced by the slowest), without Figure 8 (its k-means is not timed).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from kernelscale.bench.experiments import EXPERIMENTS
from kernelscale.bench.plot import best_within, read_results

RESULTS = Path(__file__).parent / "results"
BUDGETS = (31_623, 100_000, 1_000_000)
SECONDS = (0.1, 0.3, 1.0, 3.0)
SHORT = {"diskpca ridge (gram)": "ridge", "diskpca paper (gram)": "paper gram",
         "diskpca paper (sketch)": "paper sketch", "uniform + disLR": "unif+disLR",
         "uniform + batch": "unif+batch"}


def cell(best: dict, budget) -> str:
    if budget not in best:
        return "-"
    mean, std = best[budget][:2]
    return f"{mean:.3g} ± {std:.2g}" if not math.isnan(std) else f"{mean:.3g}"


def measure_of(rows: list[dict]) -> str:
    """What an experiment's rows are judged by: the k-means objective (Figure 8), the
    excess where the optimum is known, the raw error otherwise."""
    if any(not math.isnan(r["objective"]) for r in rows):
        return "objective"
    return "excess" if any(not math.isnan(r["excess"]) for r in rows) else "error"


def table(name: str, rows: list[dict], budgets, cost: str | None = None) -> list[str]:
    """One row per method: its best mean within each budget of ``cost`` (words by default)."""
    measure = measure_of(rows)
    best = best_within(rows, budgets, measure, cost)
    out = []
    for label in SHORT:
        if label in best:
            out.append(f"| {name} | {measure} | {SHORT[label]} | "
                       + " | ".join(cell(best[label], b) for b in budgets) + " |")
    return out


def best_per_budget(rows: list[dict], budgets, cost: str) -> list[str]:
    """The method with the lowest mean within each budget any method reaches."""
    best = best_within(rows, budgets, measure_of(rows), cost)
    winners = []
    for b in budgets:
        reached = {label: best[label][b][0] for label in best
                   if label in SHORT and b in best[label]}
        if reached:
            winners.append(min(reached, key=reached.get))
    return winners


def _short(value: float) -> str:
    """Two significant digits; 0 for the exact optimum (|excess| < 1e-10)."""
    return "0" if abs(value) < 1e-10 else f"{value:.2g}"


def compact(names, budgets=(100_000, 1_000_000)) -> list[str]:
    """README table: one row per experiment, a 'B1 / B2' cell per method (3 digits)."""
    lines = ["| experiment | measure | " + " | ".join(SHORT.values()) + " |",
             "|---|---|" + "---|" * len(SHORT)]
    for name in names:
        path = RESULTS / name / "results.csv"
        if not path.exists():
            continue
        rows = read_results(path)
        measure = measure_of(rows)
        best = best_within(rows, budgets, measure)
        cells = [" / ".join(_short(best[m][b][0]) if b in best.get(m, {}) else "-"
                            for b in budgets) for m in SHORT]
        lines.append(f"| {name.removeprefix('diskpca_')} | {measure} | "
                     + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=list(BUDGETS))
    parser.add_argument("--compact", action="store_true",
                        help="print the README's table (best at the budgets) and stop")
    args = parser.parse_args(argv)
    if args.compact:
        print("\n".join(compact([n for n, e in EXPERIMENTS.items() if e.word_budgets],
                                 tuple(args.budgets))))
        return
    lines = ["# Paper 001 at equal words: best mean within B fit words", "",
             "Produced by `python benchmarks/diskpca_words.py` from the results of "
             "`kernelscale bench NAME`. Each cell: a method's lowest mean (± std over seeds) "
             "over its points whose mean words (fit; fit + k-means for Figure 8) are at most "
             "B; '-': it reaches no point within B.", "",
             "| experiment | measure | method | "
             + " | ".join(f"B = {b:,}" for b in args.budgets) + " |",
             "|---|---|---|" + "---|" * len(args.budgets)]
    results = {name: read_results(RESULTS / name / "results.csv")
               for name, exp in EXPERIMENTS.items()
               if exp.word_budgets and (RESULTS / name / "results.csv").exists()}
    for name, rows in results.items():
        lines += table(name, rows, args.budgets)
    for cost, title in (("seconds", "fit seconds (one process, one BLAS thread)"),
                        ("parallel_seconds", "parallel seconds (each worker on its own core)")):
        lines += ["", f"## Best mean within T {title}", "",
                  f"Each cell: a method's lowest mean over its points whose mean {cost} "
                  "are at most T (Figure 8 left out: its k-means is not timed). Seconds come "
                  "from one run per experiment on the shared 2-core machine: compare within "
                  "a row.", "",
                  "| experiment | measure | method | "
                  + " | ".join(f"T = {t:g} s" for t in SECONDS) + " |",
                  "|---|---|---|" + "---|" * len(SECONDS)]
        wins: dict[str, int] = {}
        for name, rows in results.items():
            if measure_of(rows) != "objective":
                lines += table(name, rows, SECONDS, cost)
                for label in best_per_budget(rows, SECONDS, cost):
                    wins[label] = wins.get(label, 0) + 1
        lines += ["", f"Lowest mean per (experiment, T), over {sum(wins.values())} cells: "
                  + ", ".join(f"{SHORT[m]} {n}" for m, n in sorted(
                      wins.items(), key=lambda kv: -kv[1])) + "."]
    out = RESULTS / "diskpca_words.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
