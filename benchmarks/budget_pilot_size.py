"""The ridge sampler's uniform pilot: |Y|/4 points or k, and its ridge, at equal words (issue 20).

The ridge sampler (:func:`kernelscale.horizontal.diskpca.ridge_sample`) draws a
uniform pilot P, then rounds that double the landmarks by their ridge
residual. Two pilot sizes are compared here on the budget grid's data and
kernels (``benchmarks/budget.py``: digits, letter, satellite, spam and
insurance, standardised; RBF at 0.2 and 1.0 x the median distance, polynomial
q = 4, arc-cosine order 2; centred; k = 10; power-law workers):

* ``|Y|/4``: ``ceil(|Y| / 4)`` points (at least k), then two ridge rounds, the
  ridge from the pilot's tail beyond k;
* ``k``: k points, then log2(|Y| / k) rounds; the pilot has no eigenvalue
  beyond k, so the ridge is 0 and every round draws by the plain residual;
* ``|Y|/4 ridge 0``: the |Y|/4 pilot and its two rounds, drawing by the plain
  residual (``diskpca(ridge_scale=0)``), what a word budget runs where its
  pilot's flatness phi is at least 0.7 (:mod:`kernelscale.horizontal.pilot`).
  Each cell also gives the mean phi of the |Y|/4 pilots.

Each is sized to the same word budget B (the largest |Y| whose forecast, with
its own pilot and rounds, is within B) and fitted with the same seeds and
partitions; the criterion is the mean excess (err - opt) / (trace - opt)
against the exact optimum (references cached in ``results/sampler/refs``).

    python benchmarks/budget_pilot_size.py                 # about 8 minutes on one core
    python benchmarks/budget_pilot_size.py --summary-only  # pilot_size.md from the CSV

Writes ``benchmarks/results/budget/pilot_size.{csv,md}``.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from budget import DATASETS, KERNELS, REFS, load_data, n_workers  # noqa: E402
from budget_hybrids import largest_within, measured_fit  # noqa: E402
from sampler import KERNEL_LABELS, make_setting_kernel, references  # noqa: E402

from kernelscale.bench import write_rows  # noqa: E402
from kernelscale.horizontal.diskpca import diskpca  # noqa: E402
from kernelscale.horizontal.forecast import forecast_words  # noqa: E402
from kernelscale.horizontal.pilot import PEAKED, flatness  # noqa: E402
from kernelscale.partition import make_partition, split  # noqa: E402

OUT = Path(__file__).parent / "results" / "budget"
BUDGETS = (30_000, 100_000, 300_000, 1_000_000)
K = 10
QUARTER, ZERO = "|Y|/4", "|Y|/4 ridge 0"


def quarter(n_y: int) -> int:
    return max(K, math.ceil(n_y / 4))


# each variant's pilot size from |Y|, and its ridge scale (1 unless given)
PILOTS = {QUARTER: quarter, "k": lambda n_y: K, ZERO: quarter}
RIDGE_SCALE = {ZERO: 0.0}


def sized(pilot: str, budget: int, n_rows, d: int, kernel) -> int | None:
    """The largest |Y| whose forecast with this pilot (and its rounds) is within B."""
    def forecast(n_rows, d, k, n_y, **options):
        return forecast_words("diskpca", n_rows, d, k, n_y, n_leverage=PILOTS[pilot](n_y),
                              **options)

    return largest_within(forecast, budget, n_rows, d, kernel)


def ridge_fit(parts, kernel, ref, n_y: int, n_pilot: int, seed: int,
              ridge_scale: float) -> dict:
    """The ridge sampler's fit of |Y| = ``n_y`` from a uniform pilot of ``n_pilot``, measured:
    |Y|, words, seconds, excess and the pilot's flatness phi."""
    model, words, seconds, _, excess = measured_fit(
        diskpca, parts, ref, kernel, K, n_y, n_pilot, center=True, random_state=seed,
        redraw=False, ridge_scale=ridge_scale)
    P = model.landmarks[:n_pilot]  # Y holds the pilot first
    return {"n_landmarks": model.landmarks.shape[0], "n_pilot": n_pilot, "fit_words": words,
            "seconds": round(seconds, 4), "excess": excess,
            "phi": round(float(flatness(kernel(P, P), K)), 4)}


def cell_fits(parts, kernel, ref, budget: int, seed: int, d: int) -> list[dict]:
    """Every pilot variant sized to ``budget`` on one partition (none below k landmarks)."""
    n_rows, rows = [p.shape[0] for p in parts], []
    for pilot in PILOTS:
        n_y = sized(pilot, budget, n_rows, d, kernel)
        if n_y is not None:
            rows.append({"pilot": pilot, **ridge_fit(parts, kernel, ref, n_y, PILOTS[pilot](n_y),
                                                     seed, RIDGE_SCALE.get(pilot, 1.0))})
    return rows


def run_grid(args, cell_fits) -> list[dict]:
    """``cell_fits(parts, kernel, ref, B, seed, d)`` over the grid's data, kernels, seeds
    (the budget grid's partitions) and budgets, centred."""
    rows = []
    for dataset in args.datasets:
        X = load_data(dataset)
        for which in args.kernels:
            kernel = make_setting_kernel(X, which)
            ref = references(dataset, which, X, kernel, REFS)[True]
            start = time.perf_counter()
            for seed in range(args.seeds):
                parts = split(X, make_partition(X.shape[0], n_workers(dataset),
                                                random_state=seed))
                for budget in args.budgets:
                    rows += [{"dataset": dataset, "kernel": which, "budget": budget,
                              "seed": seed, **fit}
                             for fit in cell_fits(parts, kernel, ref, budget, seed, X.shape[1])]
            print(f"{dataset} {which}: {time.perf_counter() - start:.0f} s", flush=True)
    return rows


def summary(rows: list[dict], seeds: int) -> str:
    cells = defaultdict(lambda: defaultdict(list))
    for r in rows:
        cells[(r["dataset"], r["kernel"], r["budget"])][r["pilot"]].append(r)
    lines = ["# The ridge sampler's pilot: |Y|/4 points or k, and its ridge, at equal words",
             "",
             f"Produced by `python benchmarks/budget_pilot_size.py --seeds {seeds}`. Centred, "
             "k = 10, the budget grid's data, kernels, workers and seeds; each pilot sized to "
             "the same B with its own rounds (its forecast within B). Mean excess (err - opt) "
             "/ (trace - opt) over the seeds, then the mean |Y|, the mean fit words and the "
             "mean fit seconds (one process on the shared 2-core machine, another benchmark "
             "on the other core: compare within a row). phi: the mean flatness of the |Y|/4 "
             "pilots (`kernelscale.horizontal.pilot.flatness`). ratio k, ratio ridge 0: "
             "the excess of the pilot of k and of the |Y|/4 pilot with ridge 0 over that "
             "of the |Y|/4 pilot with its ridge.", "",
             "| data | kernel | B | phi | pilot ceil(n_Y / 4) | pilot k | ceil(n_Y / 4), "
             "ridge 0 | ratio k | ratio ridge 0 |",
             "|---|---|---|---|---|---|---|---|---|"]
    by_kind, slower, zero = defaultdict(list), defaultdict(list), defaultdict(list)
    for (dataset, which, budget), pilots in sorted(cells.items()):
        if set(pilots) != set(PILOTS):
            continue
        mean = {p: float(np.mean([r["excess"] for r in pilots[p]])) for p in PILOTS}
        seconds = {p: float(np.mean([r["seconds"] for r in pilots[p]])) for p in PILOTS}
        text = {p: (f"{mean[p]:.3g} ({np.mean([r['n_landmarks'] for r in pilots[p]]):.0f}, "
                    f"{np.mean([r['fit_words'] for r in pilots[p]]) / 1e3:.0f}k, "
                    f"{seconds[p]:.2f}s)") for p in PILOTS}
        ratio = {p: mean[p] / mean[QUARTER] if mean[QUARTER] > 0 else float("nan")
                 for p in ("k", ZERO)}
        phi = float(np.mean([r["phi"] for r in pilots[QUARTER]]))
        kind = "RBF" if which.startswith("rbf") else "polynomial and arc-cosine"
        label = f"{dataset} {KERNEL_LABELS[which]} {budget:,}"
        by_kind[kind].append((ratio["k"], label))
        slower[kind].append(seconds["k"] / seconds[QUARTER])
        if kind == "RBF":
            zero[phi >= PEAKED].append((ratio[ZERO], label))
        lines.append(f"| {dataset} | {KERNEL_LABELS[which]} | {budget:,} | {phi:.2f} | "
                     f"{text[QUARTER]} | {text['k']} | {text[ZERO]} | {ratio['k']:.2f} | "
                     f"{ratio[ZERO]:.2f} |")
    lines += [""]
    for kind, ratios in sorted(by_kind.items()):
        values = sorted(r for r, _ in ratios)
        better = sum(r < 1 for r in values)
        worst = max(ratios)
        lines.append(f"- {kind}: the pilot of k has the lower excess in {better} of "
                     f"{len(values)} cells; ratio from {values[0]:.2f} to {values[-1]:.2f} "
                     f"(median {np.median(values):.2f}; highest: {worst[1]}); its fit "
                     f"seconds {min(slower[kind]):.1f}x to {max(slower[kind]):.1f}x those of "
                     f"the |Y|/4 pilot (median {np.median(slower[kind]):.1f}x: more rounds).")
    for peaked, ratios in sorted(zero.items(), reverse=True):
        if not ratios:
            continue
        values = sorted(r for r, _ in ratios)
        lines.append(f"- RBF, phi {'>=' if peaked else '<'} {PEAKED}: ridge 0 has the lower "
                     f"excess in {sum(r < 1 for r in values)} of {len(values)} cells; ratio "
                     f"from {values[0]:.2f} ({min(ratios)[1]}) to {values[-1]:.2f} "
                     f"({max(ratios)[1]}), median {np.median(values):.2f}.")
    return "\n".join(lines) + "\n"


# the CSV's columns that are numbers (a run's rows read back by --summary-only)
NUMERIC = {"budget": int, "n_landmarks": int, "n_pilot": int, "fit_words": int,
           "seconds": float, "excess": float, "phi": float}


def benchmark_main(argv, doc: str, kernels, seeds: int, stem: str, cell_fits,
                   summary) -> int:
    """A pilot benchmark's command line: ``cell_fits`` over the grid (or, with
    --summary-only, the rows of ``OUT/stem.csv``), then ``summary(rows, seeds)`` into
    ``OUT/stem.md``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=seeds)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--kernels", nargs="+", choices=kernels, default=list(kernels))
    parser.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    parser.add_argument("--summary-only", action="store_true", help=f"{stem}.md from the CSV")
    args = parser.parse_args(argv)
    if args.summary_only:
        with open(OUT / f"{stem}.csv") as handle:
            rows = [{key: NUMERIC.get(key, str)(value) for key, value in r.items()}
                    for r in csv.DictReader(handle)]
        args.seeds = len({r["seed"] for r in rows})
    else:
        rows = run_grid(args, cell_fits)
        OUT.mkdir(parents=True, exist_ok=True)
        write_rows(OUT / f"{stem}.csv", rows)
    (OUT / f"{stem}.md").write_text(summary(rows, args.seeds))
    print((OUT / f"{stem}.md").read_text())
    return 0


def main(argv=None) -> int:
    return benchmark_main(argv, __doc__, KERNELS, 10, "pilot_size", cell_fits, summary)


if __name__ == "__main__":
    sys.exit(main())
