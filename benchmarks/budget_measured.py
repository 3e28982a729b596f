"""The measured ridge rounds' thresholds, chosen on the budget grid's sets (and held out by set).

A budgeted fit whose pilot rule keeps the ridge sampler runs its rounds measuring
(:mod:`kernelscale.horizontal.measured`): where round 1 draws half its new landmarks
by the ridge residual and half uniformly (the sampler's defensive share), the master
knows with round 2's reply the energy each half added to disLR over the pilot, over
every row. Round 2 then draws all its points uniformly where the ridge half's gain is
below ``UNIFORM_BELOW`` times the uniform half's, all by the ridge residual from
``RIDGE_FROM`` times on, and otherwise as the sampler would
(:func:`~kernelscale.horizontal.measured.round_two_share`). This script chooses the
two thresholds.

How, without a fit per candidate: for each cell of the budget grid (its RBF kernels;
``benchmarks/budget.py``'s sets, centring, budgets and partitions) and seed, the
budgeted fit runs with round 2 forced three ways, by the ridge residual (R),
uniformly (U) and with the sampler's own share (O), and records the measured gain;
the pilot and round 1 are the same draws in all three. Under any thresholds the
budgeted fit of that seed is the forced fit of the choice they make, exactly. Where
the fit measured nothing (the pilot rule chose another method, no uniform share in
round 1, or one ridge round), one fit stands for all; where the forecast picks exact
KPCA or uniform + batch before any pilot, no fit runs (nothing there depends on the
thresholds). Each cell's best method: the methods sized to B in the grid's cache
(``results/budget/cache``; run ``budget.py --part sized`` first).

The choice, as ``budget_heldout.py`` chooses the pilot rule's constants: the
thresholds that meet the most cells within 1.1x of the best method; among those, the
least budgeted excess (the sum over cells of its log, below 1e-6 counted as 1e-6);
then the nearest to the sampler without a measurement (0 and never). Reported:
in-sample (chosen on all sets), and each set judged with the thresholds chosen on
the others (1.15x).

    nice -n 19 python benchmarks/budget_measured.py --seeds 10
    python benchmarks/budget_measured.py --summary-only

Writes ``benchmarks/results/budget/measured.md`` and ``measured/fits.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from budget_shared.budget_grid import (
    AT_OPTIMUM,
    BUDGETS,
    DATASETS,
    METHODS,
    Cache,
    K,
    method_tag,
    one_fit,
    sampler_fingerprint,
    settings,
)

from kernelscale.bench.settings import (
    KERNEL_LABELS,
    load_set,
    make_setting_kernel,
    n_workers,
    references,
)
from kernelscale.horizontal import measured
from kernelscale.horizontal.budget import WordBudgetError, plan_budget
from kernelscale.kernels import make_kernel
from kernelscale.partition import make_partition, split

OUT = Path(__file__).parent / "results" / "budget"
REFS = Path(__file__).parent / "results" / "sampler" / "refs"
FOLDER = OUT / "measured"
KERNELS = ("rbf0.2", "rbf1.0")
#: The thresholds weighed (the library's among them): (UNIFORM_BELOW, RIDGE_FROM).
CANDIDATES = tuple((low, high) for low in (0.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
                   for high in (1.0, 1.1, 1.25, 1.5, 2.0, math.inf) if low <= high)
#: The forced choices of round 2: by the ridge residual, uniformly, the sampler's share.
CHOICES = {"R": lambda share: 0.0, "U": lambda share: 1.0, "O": lambda share: share}
IN_SAMPLE, HELD_OUT = 1.1, 1.15


@contextmanager
def forced(choice: str, seen: dict):
    """Round 2's share forced to ``choice`` (:data:`CHOICES`); the gain recorded in ``seen``."""
    real = measured.round_two_share

    def decide(gain, share):
        seen["gain"] = float(gain)
        return CHOICES[choice](share)

    measured.round_two_share = decide
    try:
        yield
    finally:
        measured.round_two_share = real


def forced_fit(parts, kernel, ref, budget, seed, centred, choice) -> dict | None:
    """The budgeted fit with round 2 forced; None below k components."""
    seen: dict = {}
    with forced(choice, seen):
        result = one_fit(parts, kernel, ref, budget, seed, centred, {})
    if result is None:
        return None
    return {"gain": seen.get("gain"), "excess": result["excess"],
            "fit_words": result["fit_words"], "chosen": result["chosen"],
            "over": result["fit_words"] > budget}


def plans_ridge(parts, kernel, budget: int, centred: bool) -> bool:
    """Whether the budget's forecast (before the pilot) picks disKPCA with the ridge sampler."""
    try:
        plan = plan_budget(budget, [p.shape[0] for p in parts], parts[0].shape[1], K,
                           kernel=kernel, center=centred, measured=True)
    except WordBudgetError:
        return False
    return plan.method == "diskpca"


def run(args) -> None:
    """Seed after seed over the grid's RBF settings: the forced fits not cached yet."""
    FOLDER.mkdir(parents=True, exist_ok=True)
    path = FOLDER / "fits.jsonl"
    done = set(load_fits(path)) if path.exists() else set()
    data, kernels, refs = {}, {}, {}
    for seed in args.seeds:
        for dataset, which, centred in settings(args.datasets, args.kernels):
            if dataset not in data:
                data[dataset] = load_set(dataset)
            X = data[dataset]
            if (dataset, which) not in kernels:
                kernels[dataset, which] = make_setting_kernel(X, which)
                refs[dataset, which] = references(dataset, which, X, kernels[dataset, which],
                                                  REFS)
            kernel, ref = kernels[dataset, which], refs[dataset, which][centred]
            parts = split(X, make_partition(X.shape[0], n_workers(dataset), random_state=seed))
            start, count = time.perf_counter(), 0
            for budget in args.budgets:
                key = (dataset, which, centred, budget, seed)
                if not plans_ridge(parts, kernel, budget, centred):
                    continue  # exact or batch before any pilot: nothing to measure
                if (*key, "O") not in done:
                    row = forced_fit(parts, kernel, ref, budget, seed, centred, "O")
                    _append(path, (*key, "O"), row)
                    done.add((*key, "O"))
                    count += 1
                    if row is not None and row["gain"] is not None:
                        for choice in ("R", "U"):
                            _append(path, (*key, choice), forced_fit(
                                parts, kernel, ref, budget, seed, centred, choice))
                            done.add((*key, choice))
                            count += 1
            if count:
                print(f"seed {seed} {dataset} {which} {'c' if centred else 'u'}: {count} fits, "
                      f"{time.perf_counter() - start:.0f} s", flush=True)


def _append(path: Path, key: tuple, row: dict | None) -> None:
    with open(path, "a") as handle:
        handle.write(json.dumps({"key": list(key), "row": row}) + "\n")


def load_fits(path: Path) -> dict:
    """The forced fits by (data, kernel, centred, B, seed, 'R', 'U' or 'O')."""
    fits = {}
    for line in path.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            fits[tuple(entry["key"])] = entry["row"]
    return fits


def sized_fits(cache_folder: Path, datasets) -> dict:
    """Per (data, kernel, centred, B, seed): each sized method's excess (the grid's cache)."""
    cache, sampler, out = Cache(cache_folder), sampler_fingerprint(), {}
    for dataset, which, centred in settings(datasets, KERNELS):
        for (budget, seed, method, tag), r in cache.load(dataset, which, centred).items():
            if method in METHODS and tag == method_tag(method, "", sampler) \
                    and r["excess"] is not None:
                out.setdefault((dataset, which, centred, budget, seed), {})[method] = r["excess"]
    return out


def forecast_stands_in(cache_folder: Path, datasets) -> dict:
    """The seeds whose budgeted fit is a sized method's fit, draw for draw: as forced fits.

    Where the budget's forecast picks exact KPCA or uniform + batch at its largest size
    before any pilot, the budgeted fit runs that method as ``method=m, max_words=B``
    does, with the same seed: its excess and words are the grid cache's (no fit runs).
    """
    cache, shapes, out = Cache(cache_folder), {}, {}
    labels = {"exact": "exact", "uniform_batch": "uniform + batch"}
    for dataset, which, centred in settings(datasets, KERNELS):
        if dataset not in shapes:
            shapes[dataset] = load_set(dataset).shape
        n, d = shapes[dataset]
        kernel = make_kernel("rbf", gamma=1.0)  # the words do not depend on the bandwidth
        for (budget, seed, method, tag), r in cache.load(dataset, which, centred).items():
            if tag or r["excess"] is None or method not in labels.values():
                continue
            rows = [len(i) for i in make_partition(n, n_workers(dataset), random_state=seed)]
            try:
                plan = plan_budget(budget, rows, d, K, kernel=kernel, center=centred,
                                   measured=True)
            except WordBudgetError:
                continue
            sized = plan.candidates.get(plan.method)
            if labels.get(plan.method) == method and plan.forecast is sized:
                out[(dataset, which, centred, budget, seed, "O")] = {
                    "gain": None, "excess": r["excess"], "fit_words": r["fit_words"],
                    "chosen": method, "over": r["fit_words"] > budget}
    return out


def unchanged_plans(datasets, seeds=range(40)) -> tuple[int, int]:
    """The polynomial and arc-cosine cells' plans that the measured rounds leave as they were.

    With these kernels the pilot rule keeps the ridge sampler by the diagonal, which
    nothing measures; only the forecast's batch floor (a larger budget never buys fewer
    landmarks, :func:`kernelscale.horizontal.budget.plan_budget`) could change a plan.
    Returns (plans whose method and |Y| are the forecast's own choice, plans checked)
    over the grid's cells and seeds: where every one is, the grid's budgeted fits of
    these kernels (``results/budget/share``) are the library's as it runs now.
    """
    from kernelscale.bench.settings import make_setting_kernel as kernel_of

    same = total = 0
    for dataset, which, centred in settings(datasets, ("poly", "arccos")):
        X = load_set(dataset)
        kernel = kernel_of(X, which)
        for seed in seeds:
            rows = [len(i) for i in make_partition(X.shape[0], n_workers(dataset),
                                                   random_state=seed)]
            for budget in BUDGETS:
                try:
                    plan = plan_budget(budget, rows, X.shape[1], K, kernel=kernel,
                                       center=centred)
                except WordBudgetError:
                    continue
                total += 1
                same += plan.forecast is plan.candidates[plan.method]
    return same, total


def budgeted(fits: dict, key: tuple, theta: tuple) -> dict | None:
    """The budgeted fit of one seed under ``theta`` (UNIFORM_BELOW, RIDGE_FROM): the forced
    fit of its choice."""
    own = fits.get((*key, "O"))
    if own is None or own["gain"] is None:
        return own
    low, high = theta
    choice = "U" if own["gain"] < low else "R" if own["gain"] >= high else "O"
    return fits.get((*key, choice))


def cells(fits: dict, sized: dict) -> dict:
    """Per cell (data, kernel, centred, B): the seeds where the forced fits and every sized
    method ran (exact only where it fits)."""
    out = defaultdict(list)
    for (d, w, c, b, s, choice) in fits:
        if choice != "O" or fits[(d, w, c, b, s, "O")] is None:
            continue
        row = fits[(d, w, c, b, s, "O")]
        if row["gain"] is not None and any(fits.get((d, w, c, b, s, x)) is None
                                           for x in ("R", "U")):
            continue
        methods = sized.get((d, w, c, b, s), {})
        if all(m in methods for m in METHODS if m not in ("exact", "diskpca (paper)")):
            out[(d, w, c, b)].append(s)
    return {cell: sorted(seeds) for cell, seeds in out.items()}


def results(fits: dict, sized: dict, table: dict, theta: tuple) -> dict:
    """Per cell: the budgeted fit's mean excess under ``theta``, the best sized method's."""
    out = {}
    for cell, seeds in table.items():
        mine = [budgeted(fits, (*cell, s), theta) for s in seeds]
        common = [m for m in METHODS if all(m in sized[(*cell, s)] for s in seeds)]
        means = {m: float(np.mean([sized[(*cell, s)][m] for s in seeds])) for m in common}
        best = min(means, key=means.get)
        out[cell] = {"budget": float(np.mean([r["excess"] for r in mine])), "best": means[best],
                     "method": best, "seeds": len(seeds), "over": sum(r["over"] for r in mine),
                     "measured": sum(r["gain"] is not None for r in mine),
                     "uniform": sum(r["gain"] is not None and r["gain"] < theta[0]
                                    for r in mine),
                     "ridge": sum(r["gain"] is not None and r["gain"] >= theta[1]
                                  for r in mine)}
    return out


def met(c: dict, tolerance: float) -> bool:
    return c["best"] < AT_OPTIMUM or c["budget"] <= tolerance * c["best"]


def score(res: dict, tolerance: float) -> tuple:
    """Cells met, then the least summed log excess (an excess below 1e-6 as 1e-6)."""
    return (sum(met(c, tolerance) for c in res.values()),
            -sum(math.log(max(c["budget"], AT_OPTIMUM)) for c in res.values()))


def choose(fits, sized, table) -> tuple:
    """The thresholds with the best :func:`score` in-sample, then the nearest to the
    sampler without a measurement (0, never)."""
    return max(CANDIDATES, key=lambda t: (*score(results(fits, sized, table, t), IN_SAMPLE),
                                          -t[0] - (0.0 if t[1] == math.inf else 1.0 / t[1])))


def _fmt(theta: tuple) -> str:
    return f"UNIFORM_BELOW {theta[0]:g}, RIDGE_FROM {theta[1]:g}"


def _cell_lines(res: dict, tolerance: float) -> list[str]:
    lines = ["| data | kernel | c/u | B | seeds | measured (uniform, ridge) | budgeted | best | "
             "best method | ratio |", "|---|---|---|---|---|---|---|---|---|---|"]
    for (d, w, c, b), r in sorted(res.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                               not kv[0][2], kv[0][3])):
        ratio = r["budget"] / r["best"] if r["best"] >= AT_OPTIMUM else float("nan")
        mark = "" if met(r, tolerance) else " **miss**"
        lines.append(f"| {d} | {KERNEL_LABELS[w]} | {'c' if c else 'u'} | {b:,} | {r['seeds']} | "
                     f"{r['measured']} ({r['uniform']}, {r['ridge']}) | {r['budget']:.3g} | "
                     f"{r['best']:.3g} | "
                     f"{r['method']} | {'opt' if ratio != ratio else f'{ratio:.2f}'}{mark} |")
    return lines


def summary(fits: dict, sized: dict) -> str:
    table = cells(fits, sized)
    theta = choose(fits, sized, table)
    sets = sorted({c[0] for c in table}, key=DATASETS.index)
    lines = ["# The measured ridge rounds' thresholds", "",
             "Produced by `nice -n 19 python benchmarks/budget_measured.py` (the method: the "
             "script's docstring) on the shared 2-core machine. Seeds per cell: "
             + ", ".join(f"{n} in {sum(len(s) == n for s in table.values())} cells"
                         for n in sorted({len(s) for s in table.values()}))
             + f"; the budget grid's sets ({', '.join(sets)}), RBF at 0.2 and 1.0 x the "
             "median distance, centred (uncentred also on digits and satellite), k = 10.", "",
             "## Each threshold, in-sample", "",
             f"| UNIFORM_BELOW | RIDGE_FROM | cells within {IN_SAMPLE}x | within {HELD_OUT}x | "
             "round 2 uniform, by the ridge / measured | summed log excess |",
             "|---|---|---|---|---|---|"]
    for t in CANDIDATES:
        res = results(fits, sized, table, t)
        lines.append(f"| {t[0]:g} | {t[1]:g} | {sum(met(c, IN_SAMPLE) for c in res.values())} of "
                     f"{len(res)} | {sum(met(c, HELD_OUT) for c in res.values())} | "
                     f"{sum(c['uniform'] for c in res.values())}, "
                     f"{sum(c['ridge'] for c in res.values())} / "
                     f"{sum(c['measured'] for c in res.values())} | "
                     f"{-score(res, IN_SAMPLE)[1]:.1f} |")
    lines += ["", f"Chosen on every set: {_fmt(theta)} (the library's: "
              f"{_fmt((measured.UNIFORM_BELOW, measured.RIDGE_FROM))}).", "",
              "## Held out, set by set", ""]
    held = {}
    for left in sets:
        t = choose(fits, sized, {c: s for c, s in table.items() if c[0] != left})
        res = {c: r for c, r in results(fits, sized, table, t).items() if c[0] == left}
        held.update(res)
        lines.append(f"- {left}: {_fmt(t)} chosen without it; "
                     f"{sum(met(c, HELD_OUT) for c in res.values())} of {len(res)} cells within "
                     f"{HELD_OUT}x.")
    same, total = unchanged_plans(sets, range(10))
    lines += ["", "Polynomial and arc-cosine kernels: the pilot rule keeps the ridge sampler by "
              "the diagonal and nothing is measured; the plan is the forecast's own choice in "
              f"{same:,} of {total:,} (cell, seed) pairs of the grid (seeds 0-9), so the "
              "budgeted fits the grid judged there (`results/budget/share`) are the library's "
              "as it runs now."]
    lines += ["", f"Held out: {sum(met(c, HELD_OUT) for c in held.values())} of {len(held)} "
              f"cells within {HELD_OUT}x; ledgers over B: "
              f"{sum(c['over'] for c in held.values())}.", "",
              f"## Every cell at {_fmt(theta)}", ""]
    lines += _cell_lines(results(fits, sized, table, theta), IN_SAMPLE)
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS))
    parser.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    parser.add_argument("--cache", type=Path, default=OUT / "cache",
                        help="the budget grid's cache (the sized methods)")
    parser.add_argument("--summary-only", action="store_true")
    args = parser.parse_args(argv)
    args.seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    if not args.summary_only:
        run(args)
    fits = {**forecast_stands_in(args.cache, DATASETS), **load_fits(FOLDER / "fits.jsonl")}
    (OUT / "measured.md").write_text(summary(fits, sized_fits(args.cache, DATASETS)))
    print(f"wrote {OUT / 'measured.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
