"""The ridge sampler's pilot variants sized to a word budget, and their benchmarks' command line.

``benchmarks/budget_pilot_size.py`` and ``benchmarks/budget_ridge_scale.py``
fit the ridge sampler (:func:`kernelscale.horizontal.diskpca.diskpca`) with a
uniform pilot of a given size (:data:`PILOTS`) and ridge scale, each sized to
the same word budget B (:func:`sized`), on the word-budget grid's data,
kernels, seeds and partitions (:mod:`budget_shared.budget_grid`). The
scripts pass their output folder and the references' folder.

>>> quarter(100), quarter(20), PILOTS["k"](400)
(25, 10, 10)
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from kernelscale.bench.runner import write_rows
from kernelscale.bench.settings import load_set, make_setting_kernel, n_workers, references
from kernelscale.horizontal.diskpca import diskpca
from kernelscale.horizontal.forecast import forecast_words
from kernelscale.horizontal.pilot import flatness
from kernelscale.kernels import Kernel
from kernelscale.partition import make_partition, split

from .budget_grid import DATASETS, K, largest_landmarks_within, measured_fit

__all__ = [
    "BUDGETS",
    "NUMERIC",
    "PILOTS",
    "QUARTER",
    "RIDGE_SCALE",
    "ZERO",
    "benchmark_main",
    "quarter",
    "ridge_fit",
    "run_grid",
    "sized",
]

#: The budgets of the pilot benchmarks.
BUDGETS = (30_000, 100_000, 300_000, 1_000_000)
QUARTER, ZERO = "|Y|/4", "|Y|/4 ridge 0"


def quarter(n_y: int) -> int:
    """The |Y|/4 pilot's size: ``ceil(n_y / 4)``, at least k."""
    return max(K, math.ceil(n_y / 4))


#: Each variant's pilot size from |Y|.
PILOTS = {QUARTER: quarter, "k": lambda n_y: K, ZERO: quarter}
#: Each variant's ridge scale (1 unless given).
RIDGE_SCALE = {ZERO: 0.0}


def sized(pilot: str, budget: int, n_rows: Sequence[int], d: int, kernel: Kernel) -> int | None:
    """The largest |Y| whose forecast with the pilot ``pilot`` (a key of :data:`PILOTS`)
    and its rounds is within ``budget`` (None below k)."""
    def forecast(n_rows, d, k, n_y, **options):
        return forecast_words("diskpca", n_rows, d, k, n_y, n_leverage=PILOTS[pilot](n_y),
                              **options)

    return largest_landmarks_within(forecast, budget, n_rows, d, kernel)


def ridge_fit(parts: list, kernel: Kernel, ref: dict, n_y: int, n_pilot: int, seed: int,
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


def run_grid(args: argparse.Namespace, cell_fits: Callable, refs: Path) -> list[dict]:
    """``cell_fits(parts, kernel, ref, B, seed, d)`` over the grid's data, kernels, seeds
    (the budget grid's partitions) and budgets, centred; the references cached in ``refs``."""
    rows = []
    for dataset in args.datasets:
        X = load_set(dataset)
        for which in args.kernels:
            kernel = make_setting_kernel(X, which)
            ref = references(dataset, which, X, kernel, refs)[True]
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


#: The CSV's columns that are numbers (a run's rows read back by --summary-only).
NUMERIC = {"budget": int, "n_landmarks": int, "n_pilot": int, "fit_words": int,
           "seconds": float, "excess": float, "phi": float}


def benchmark_main(argv: Sequence[str] | None, doc: str, kernels: Sequence[str], seeds: int,
                   stem: str, cell_fits: Callable, summary: Callable, out: Path,
                   refs: Path) -> int:
    """A pilot benchmark's command line.

    ``cell_fits`` over the grid (:func:`run_grid`; or, with ``--summary-only``,
    the rows of ``out/stem.csv``), then ``summary(rows, seeds)`` into ``out/stem.md``.

    Parameters
    ----------
    argv : list of str or None
        The options (``--seeds``, ``--datasets``, ``--kernels``, ``--budgets``,
        ``--summary-only``); None reads ``sys.argv``.
    doc : str
        The script's docstring (its first line describes the command).
    kernels : sequence of str
        The kernels to choose from (all by default).
    seeds : int
        The default number of seeds.
    stem : str
        The name of the CSV and Markdown files.
    cell_fits, summary : callable
        The script's fits of one cell, and its page from the rows.
    out, refs : Path
        The output folder, and the folder of the cached exact references.

    Returns
    -------
    int
        0, the exit status.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=seeds)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--kernels", nargs="+", choices=kernels, default=list(kernels))
    parser.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    parser.add_argument("--summary-only", action="store_true", help=f"{stem}.md from the CSV")
    args = parser.parse_args(argv)
    if args.summary_only:
        with open(out / f"{stem}.csv") as handle:
            rows = [{key: NUMERIC.get(key, str)(value) for key, value in r.items()}
                    for r in csv.DictReader(handle)]
        args.seeds = len({r["seed"] for r in rows})
    else:
        rows = run_grid(args, cell_fits, refs)
        out.mkdir(parents=True, exist_ok=True)
        write_rows(out / f"{stem}.csv", rows)
    (out / f"{stem}.md").write_text(summary(rows, args.seeds))
    print((out / f"{stem}.md").read_text())
    return 0
