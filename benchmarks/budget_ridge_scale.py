"""The ridge sampler's ridge, from the plain residual to nearly uniform, at equal words (issue 20).

The budget grid's one miss that is not noise (``benchmarks/budget.py``:
insurance, RBF at 1.0 x the median distance, B = 10^5) is a cell where
uniform + disLR beats the ridge sampler. The ridge is a dial between the two:
``diskpca(ridge_scale=s)`` multiplies the pilot's ridge (its tail beyond k
over k) by s. At s = 0 the rounds draw by the plain residual (paper 001's
adaptive sampling, what the budget runs where its pilot reads phi >= 0.7);
as s grows every point's ridge residual tends to a multiple of k(a, a),
the same for all points of an RBF kernel, and the rounds draw nearly
uniformly.

This script sweeps the dial on the grid's RBF cells (the five sets,
standardised; RBF at 0.2 and 1.0 x the median distance; centred; k = 10;
power-law workers; the grid's seeds and partitions): the ridge sampler with
its |Y|/4 pilot and s = 0, 1, 4 and 16, and uniform + disLR, each sized to the
same word budget B. It asks two questions of the mean excess
(err - opt) / (trace - opt):

* is one value of s within 1.1x of the best variant in every cell?
* does the pilot's flatness phi tell the cells that want a large ridge
  (or uniform landmarks) from those that want a small one?

    python benchmarks/budget_ridge_scale.py                 # about 5 minutes on one core
    python benchmarks/budget_ridge_scale.py --summary-only  # ridge_scale.md from the CSV

Writes ``benchmarks/results/budget/ridge_scale.{csv,md}``.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
from budget_shared.budget_grid import TOLERANCE, one_fit
from budget_shared.pilot_variants import QUARTER, benchmark_main, quarter, ridge_fit, sized

from kernelscale.bench.settings import KERNEL_LABELS
from kernelscale.horizontal.pilot import FLAT, PEAKED

OUT = Path(__file__).parent / "results" / "budget"
REFS = Path(__file__).parent / "results" / "sampler" / "refs"
KERNELS = ("rbf0.2", "rbf1.0")
SCALES = (0.0, 1.0, 4.0, 16.0)
UNIFORM = "uniform + disLR"


def scale_label(scale: float) -> str:
    return f"ridge x{scale:g}"


VARIANTS = tuple(scale_label(s) for s in SCALES) + (UNIFORM,)


def cell_fits(parts, kernel, ref, budget: int, seed: int, d: int) -> list[dict]:
    """Every variant sized to ``budget`` on one partition (none where k landmarks cost more)."""
    n_rows = [p.shape[0] for p in parts]
    n_y = sized(QUARTER, budget, n_rows, d, kernel)
    if n_y is None:
        return []
    rows = [{"variant": scale_label(scale),
             **ridge_fit(parts, kernel, ref, n_y, quarter(n_y), seed, scale)}
            for scale in SCALES]
    fit = one_fit(parts, kernel, ref, budget, seed, True, {"method": "uniform_dislr"})
    if fit is None:  # over budget: the cell lacks a variant and the summary leaves it out
        return rows
    rows.append({"variant": UNIFORM, "n_landmarks": fit["n_landmarks"], "n_pilot": 0,
                 "fit_words": fit["fit_words"], "seconds": fit["seconds"],
                 "excess": fit["excess"], "phi": rows[0]["phi"]})
    return rows


def cell_means(rows: list[dict]) -> dict:
    """(data, kernel, B) -> {variant: (mean excess, mean |Y|, mean words, mean seconds)},
    with the cell's mean phi and pilot size under the keys 'phi' and 'pilot'."""
    cells = defaultdict(lambda: defaultdict(list))
    for r in rows:
        cells[(r["dataset"], r["kernel"], r["budget"])][r["variant"]].append(r)
    means = {}
    for key, variants in sorted(cells.items()):
        if set(variants) != set(VARIANTS):
            continue
        means[key] = {v: tuple(float(np.mean([r[c] for r in variants[v]]))
                               for c in ("excess", "n_landmarks", "fit_words", "seconds"))
                      for v in VARIANTS}
        first = variants[VARIANTS[0]]
        means[key]["phi"] = float(np.mean([r["phi"] for r in first]))
        means[key]["pilot"] = float(np.mean([r["n_pilot"] for r in first]))
    return means


def summary(rows: list[dict], seeds: int) -> str:
    means = cell_means(rows)
    lines = ["# The ridge sampler's ridge, from the plain residual to nearly uniform, "
             "at equal words", "",
             f"Produced by `python benchmarks/budget_ridge_scale.py --seeds {seeds}`. "
             "Centred, k = 10, the budget grid's data, RBF kernels, workers and seeds. Each "
             "variant sized to the same B: the ridge sampler with its |Y|/4 pilot and its "
             "ridge (the pilot's tail beyond k over k) times s (`diskpca(ridge_scale=s)`), "
             "and uniform + disLR. Mean excess (err - opt) / (trace - opt) over the seeds "
             "(mean |Y|, mean fit words, mean fit seconds; one process on the shared 2-core "
             "machine: compare within a row). phi: the mean flatness of the pilots; "
             "ratios: each variant's excess over the best variant's in the cell.", "",
             "| data | kernel | B | pilot | phi | " + " | ".join(VARIANTS) + " | "
             + " | ".join(f"ratio {v}" for v in VARIANTS) + " |",
             "|" + "---|" * (5 + 2 * len(VARIANTS))]
    within, prefer, bands = defaultdict(list), defaultdict(list), defaultdict(list)
    for (dataset, which, budget), cell in means.items():
        best = min(cell[v][0] for v in VARIANTS)
        ratio = {v: cell[v][0] / best if best > 0 else 1.0 for v in VARIANTS}
        label = f"{dataset} {KERNEL_LABELS[which]} {budget:,}"
        band = (f"phi < {FLAT}" if cell["phi"] < FLAT else f"{FLAT} <= phi < {PEAKED}"
                if cell["phi"] < PEAKED else f"phi >= {PEAKED}")
        bands[band].append((label, ratio))
        for v in VARIANTS:
            within[v].append((ratio[v] <= TOLERANCE, label))
        # which way the dial should turn from the pilot's ridge (s = 1), by more than 1.1x
        small, large = ratio[scale_label(0.0)], min(ratio[v] for v in VARIANTS[2:])
        if ratio[scale_label(1.0)] > TOLERANCE * min(small, large):
            prefer["large" if large < small else "small"].append((cell["phi"], label))
        text = [f"{cell[v][0]:.3g} ({cell[v][1]:.0f}, {cell[v][2] / 1e3:.0f}k, "
                f"{cell[v][3]:.2f}s)" for v in VARIANTS]
        lines.append(f"| {dataset} | {KERNEL_LABELS[which]} | {budget:,} | "
                     f"{cell['pilot']:.0f} | {cell['phi']:.2f} | " + " | ".join(text) + " | "
                     + " | ".join(f"{ratio[v]:.2f}" for v in VARIANTS) + " |")
    lines += ["", f"Within {TOLERANCE}x of the best variant, of {len(means)} cells:", ""]
    for v in VARIANTS:
        met = [label for ok, label in within[v] if ok]
        missed = [label for ok, label in within[v] if not ok]
        lines.append(f"- {v}: {len(met)}" + (f"; misses: {', '.join(missed)}" if missed
                                             else ""))
    lines += ["", "By the pilot rule's bands of phi (`kernelscale.horizontal.pilot`: below "
              f"{FLAT} it sends uniform points, from {PEAKED} it drops the ridge), the cells "
              f"where each variant is within {TOLERANCE}x of the best:", ""]
    for band, cells in sorted(bands.items()):
        counts = ", ".join(f"{v} {sum(r[v] <= TOLERANCE for _, r in cells)}"
                           for v in VARIANTS)
        lines.append(f"- {band}, {len(cells)} cells: {counts}.")
    lines += ["", f"Cells where the pilot's ridge (s = 1) has more than {TOLERANCE}x the "
              "excess of a smaller or a larger dial setting, with their mean phi:", ""]
    for way, text in (("small", "a smaller ridge (s = 0)"),
                      ("large", "a larger ridge (s = 4, 16) or uniform + disLR")):
        cells = sorted(prefer[way])
        listed = "; ".join(f"{label} ({phi:.2f})" for phi, label in cells) or "none"
        span = f"phi {cells[0][0]:.2f}-{cells[-1][0]:.2f}: " if cells else ""
        lines.append(f"- better with {text}: {len(cells)} cells, {span}{listed}.")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    return benchmark_main(argv, __doc__, KERNELS, 20, "ridge_scale", cell_fits, summary, OUT,
                          REFS)


if __name__ == "__main__":
    sys.exit(main())
