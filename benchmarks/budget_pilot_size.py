"""The ridge sampler's uniform pilot: |Y|/4 points or k, and its ridge, at equal words (issue 20).

The ridge sampler (:func:`kernelscale.horizontal.samplers.ridge_sample`) draws a
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

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from budget_shared.budget_grid import KERNELS
from budget_shared.pilot_variants import (
    PILOTS,
    QUARTER,
    RIDGE_SCALE,
    ZERO,
    benchmark_main,
    ridge_fit,
    sized,
)

from kernelscale.bench.settings import KERNEL_LABELS
from kernelscale.horizontal.pilot import PEAKED

OUT = Path(__file__).parent / "results" / "budget"
REFS = Path(__file__).parent / "results" / "sampler" / "refs"


def cell_fits(parts, kernel, ref, budget: int, seed: int, d: int) -> list[dict]:
    """Every pilot variant sized to ``budget`` on one partition (none below k landmarks)."""
    n_rows, rows = [p.shape[0] for p in parts], []
    for pilot in PILOTS:
        n_y = sized(pilot, budget, n_rows, d, kernel)
        if n_y is not None:
            rows.append({"pilot": pilot, **ridge_fit(parts, kernel, ref, n_y, PILOTS[pilot](n_y),
                                                     seed, RIDGE_SCALE.get(pilot, 1.0))})
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


def main(argv=None) -> int:
    return benchmark_main(argv, __doc__, KERNELS, 10, "pilot_size", cell_fits, summary, OUT,
                          REFS)


if __name__ == "__main__":
    sys.exit(main())
