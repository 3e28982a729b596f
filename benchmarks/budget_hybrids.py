"""Two hybrids between choosing landmarks and sending more of them, at equal words (issue 20).

* ``batch + refine`` (:func:`kernelscale.horizontal.hybrid.batch_refine`):
  uniform + batch KPCA whose top 2k sample components the workers refine to the
  best k for all the data (a disLR round on a 2k-dimensional basis);
* ``ridge + batch`` (:func:`kernelscale.horizontal.hybrid.ridge_batch`): the
  ridge sampler's points sent raw to the master, then kernel PCA weighted by
  their inverse sampling probabilities, no Gram message.

Each is sized to the budget B by its own word forecast (the largest |Y| whose
forecast is within B; the forecast equals the ledger on these dense sets) and
compared with the methods of ``benchmarks/budget.py`` sized to the same B,
read from that benchmark's cache (run it first, ``--part sized``): the excess
(err - opt) / (trace - opt), centred, k = 10, mean over seeds.

    python benchmarks/budget_hybrids.py --seeds 3

Writes ``benchmarks/results/budget/hybrids.{csv,md}``.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from budget_shared.budget_grid import Cache, largest_landmarks_within, measured_fit

from kernelscale.bench import write_rows
from kernelscale.bench.settings import (
    KERNEL_LABELS,
    load_set,
    make_setting_kernel,
    n_workers,
    references,
)
from kernelscale.horizontal.hybrid import (
    batch_refine,
    forecast_batch_refine,
    forecast_ridge_batch,
    ridge_batch,
)
from kernelscale.partition import make_partition, split

OUT = Path(__file__).parent / "results" / "budget"
REFS = Path(__file__).parent / "results" / "sampler" / "refs"
K = 10
SETTINGS = (("digits", "rbf0.2"), ("letter", "rbf0.2"), ("satellite", "rbf0.2"),
            ("spam", "rbf0.2"), ("letter", "rbf1.0"), ("spam", "rbf1.0"), ("letter", "poly"),
            ("satellite", "arccos"), ("insurance", "arccos"))
BUDGETS = (100_000, 300_000, 1_000_000)
HYBRIDS = {"batch + refine": (batch_refine, forecast_batch_refine),
           "ridge + batch": (ridge_batch, forecast_ridge_batch)}
BASELINES = ("diskpca (ridge)", "diskpca (paper)", "uniform + disLR", "uniform + batch")


def run(seeds) -> list[dict]:
    rows = []
    for dataset, which in SETTINGS:
        X = load_set(dataset)
        kernel = make_setting_kernel(X, which)
        ref = references(dataset, which, X, kernel, REFS)[True]
        for seed in seeds:
            parts = split(X, make_partition(X.shape[0], n_workers(dataset), random_state=seed))
            n_rows = [p.shape[0] for p in parts]
            for budget in BUDGETS:
                for name, (fit, forecast) in HYBRIDS.items():
                    size = largest_landmarks_within(forecast, budget, n_rows, X.shape[1], kernel)
                    if size is None:
                        continue
                    model, words, seconds, err, excess = measured_fit(
                        fit, parts, ref, kernel, K, n_landmarks=size, center=True,
                        random_state=seed, redraw=False)
                    rows.append({"dataset": dataset, "kernel": which, "budget": budget,
                                 "seed": seed, "method": name,
                                 "n_landmarks": model.landmarks.shape[0],
                                 "fit_words": words, "seconds": round(seconds, 3),
                                 "error": err, "excess": excess})
        print(f"{dataset} {which}: done", flush=True)
    return rows


def summary(rows: list[dict], seeds) -> str:
    cache = Cache(OUT / "cache")
    lines = ["# Hybrids at equal words", "",
             f"Produced by `python benchmarks/budget_hybrids.py --seeds {len(seeds)}` on the "
             "shared 2-core machine (loaded); centred, k = 10; mean excess (err - opt) / "
             "(trace - opt) over seeds, mean |Y| in brackets; the methods of "
             "`benchmarks/budget.py` sized to the same B (same seeds, from its cache). "
             "ratio: the hybrid's excess over the best of those methods (< 1: the hybrid wins; "
             "none where the best is the optimum, excess below 1e-6).",
             "", "| data | kernel | B | " + " | ".join(BASELINES) + " | batch + refine | ratio "
             "| ridge + batch | ratio |", "|" + "---|" * (len(BASELINES) + 7)]
    mine = defaultdict(list)
    for r in rows:
        mine[(r["dataset"], r["kernel"], r["budget"], r["method"])].append(r)
    wins = defaultdict(int)
    cells = 0
    for dataset, which in SETTINGS:
        done = cache.load(dataset, which, True)
        for budget in BUDGETS:
            base = {}
            for m in BASELINES:
                found = [done[(budget, s, m, "")] for s in seeds
                         if (budget, s, m, "") in done and done[(budget, s, m, "")]["excess"]
                         is not None]
                if len(found) == len(seeds):
                    base[m] = (np.mean([r["excess"] for r in found]),
                               np.mean([r["n_landmarks"] for r in found]))
            if not base or not all(mine[(dataset, which, budget, h)] for h in HYBRIDS):
                continue
            cells += 1
            best = min(v[0] for v in base.values())
            cols = [f"{base[m][0]:.3g} ({base[m][1]:.0f})" if m in base else "-"
                    for m in BASELINES]
            for h in HYBRIDS:
                rs = mine[(dataset, which, budget, h)]
                e = np.mean([r["excess"] for r in rs])
                wins[h] += e < best
                cols += [f"{e:.3g} ({np.mean([r['n_landmarks'] for r in rs]):.0f})",
                         f"{e / best:.2f}" if best >= 1e-6 else "(best at the optimum)"]
            lines.append(f"| {dataset} | {KERNEL_LABELS[which]} | {budget:,} | "
                         + " | ".join(cols) + " |")
    lines += ["", "Cells where the hybrid's mean excess is below every method's: "
              + ", ".join(f"{h} {wins[h]} of {cells}" for h in HYBRIDS) + ".", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--summary-only", action="store_true")
    args = parser.parse_args(argv)
    seeds = list(range(args.seeds))
    path = OUT / "hybrids.csv"
    if args.summary_only:
        from kernelscale.bench.scripts import read_rows

        rows = read_rows(path)
    else:
        rows = run(seeds)
        write_rows(path, rows)
    (OUT / "hybrids.md").write_text(summary(rows, seeds))
    print(f"wrote {OUT}/hybrids.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
