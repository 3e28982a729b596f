"""Leave one set out: the word budget's constants chosen without the set they are judged on.

The budgeted fit ``DistributedKernelPCA(max_words=B)`` depends on constants:
the ridge sampler's (:mod:`kernelscale.horizontal.sampling`: ``RIDGE_FLOOR``,
whether a pilot too small to read adds the energy outside its span to the
ridge; ``DEFENSIVE_SHARE`` and ``READ_PILOT_SHARE``, the share of each ridge
round's landmarks drawn uniformly after a pilot too small to read and after
one that is read; ``TRUSTED_PILOT``, the pilot size, in multiples of k, from
which the rounds draw none) and the pilot rule's thresholds
(:mod:`kernelscale.horizontal.pilot`: ``FLAT``, ``PEAKED``, ``MIN_PILOT``,
``BATCH_RATIO``, ``MIN_BATCH_PILOT``). Judging them on the sets they were tuned on flatters them;
here each of the nine sets in turn is left out, the constants are chosen on
the others, and the left-out set's cells are judged with them.

How, without a fit per combination of constants: for each set, kernel
(centred), budget B (the grid's five), seed and defensive share (0, 0.25,
0.5, 0.75 with RBF kernels; none with the others), the budgeted fit runs once
per method the pilot rule can choose, the rule forced to that choice (the
pilot, drawn before the rule, is the same draw in each): the ridge sampler
with the pilot's ridge (R), the same with the ridge floor (RF, where a
``MIN_PILOT`` candidate could call the pilot too small), with ridge 0 (R0,
where the pilot's flatness reaches the lowest ``PEAKED`` candidate; it draws
no uniform share), uniform + disLR (U) and uniform + batch (B) (where the
flatness is below the highest ``FLAT`` candidate). Each run records what the
rule reads (phi, the diagonal spread, the pilot's size, every method's |Y|
after the pilot). For any constants, the budgeted fit of that seed is then
the forced fit of the rule's choice at the share the constants give its
pilot, exactly. U and B do not depend on the share, and run once per pilot
size. A cell's best method: the methods sized to B in the budget grid's cache
(``results/budget/cache``: the paper's sampler, uniform + disLR, uniform +
batch, exact; run ``budget.py --part sized`` first) and the ridge sampler
under the same constants (the forced R or RF, which is the sized ridge fit
draw for draw).

Choosing, among every combination of the candidates (96,000), on the training
sets' cells: the constants that meet the most cells (mean budgeted excess <=
1.1 x the best's, or the best below 1e-6); among those, the ones whose
budgeted fits have the least excess (the sum over the cells of its log, an
excess below 1e-6 counted as 1e-6: what the user gets); then the nearest to
:data:`PRIOR` (the constants before this search), which decides where
constants change no fit. The excess, not the ratio: a ratio's reference
includes the ridge sampler under the same constants, so a constant that
makes the ridge sampler worse makes the ratio easier to meet, and a
tie-break on ratios rewarded that. (With the ratios first, an earlier
candidate set had a fold without satellite drop ``FLAT`` to 0.2 and
``PEAKED`` to never, missing satellite's RBF cells by up to 3.3x; with the
prior first, no fold without income moved ``TRUSTED_PILOT``, and income's
RBF 1.0 x cell at 10^6 words missed by 1.21x.) Reported: per
left-out set, its cells under the constants chosen without it (criterion
1.15x), and all cells under the constants chosen on all sets (in-sample,
1.1x); a miss is marked 'noise' where the gap is within two standard errors
of the seeds' paired differences.

    nice -n 10 python benchmarks/budget_heldout.py --seeds 10     # fits (cached), then the page
    python benchmarks/budget_heldout.py --summary-only

Writes ``benchmarks/results/budget/heldout.md`` and ``heldout/fits.jsonl``. This
script runs the forced fits and writes the page; reading the budgeted fit under
any constants, the search and the scores are :mod:`budget_shared.constant_search`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from budget_shared.budget_grid import AT_OPTIMUM, BUDGETS, DATASETS, KERNELS, K
from budget_shared.constant_search import (
    CANDIDATES,
    DEFAULTS,
    HELD_OUT,
    IN_SAMPLE,
    SHARES,
    TRUSTED,
    FitTable,
    Search,
    against_prior,
    constants,
    count_met,
    fmt_theta,
    load_fits,
    miss_mark,
    misses,
    ratio,
    shares_of,
    sized_best,
)

from kernelscale import DistributedKernelPCA
from kernelscale.backends.local import LocalCluster
from kernelscale.bench.settings import (
    KERNEL_LABELS,
    kernel_options,
    load_set,
    make_setting_kernel,
    n_workers,
    references,
)
from kernelscale.horizontal import distributed_error, pilot, piloted
from kernelscale.horizontal.budget import WordBudgetError
from kernelscale.partition import make_partition, split

OUT = Path(__file__).parent / "results" / "budget"
REFS = Path(__file__).parent / "results" / "sampler" / "refs"
FOLDER = OUT / "heldout"


@contextmanager
def forced(choice: str, seen: dict):
    """The pilot rule records its inputs in ``seen`` and returns ``choice``.

    choice: 'R' (ridge sampler, the pilot's ridge), 'RF' (the same with the ridge floor of
    a pilot too small to read), 'R0' (ridge 0), 'U', 'B'.
    """
    real = pilot.choose_after_pilot  # piloted_fit calls it by the name it imported

    def rule(phi, sizes, spread=1.0, n_pilot=None, n_components=None, n_samples=None):
        seen.update(phi=phi, sizes=dict(sizes), spread=spread, n_pilot=n_pilot,
                    n_samples=n_samples)
        method = {"R": "diskpca", "RF": "diskpca", "R0": "diskpca", "U": "uniform_dislr",
                  "B": "uniform_batch"}[choice]
        if sizes.get(method) is None:
            raise _OutOfReach
        return pilot.PilotChoice(method, f"forced: {choice}", 0.0 if choice == "R0" else 1.0)

    pilot.choose_after_pilot = piloted.choose_after_pilot = rule
    try:
        yield
    finally:
        pilot.choose_after_pilot = piloted.choose_after_pilot = real


class _OutOfReach(Exception):
    """The forced method has no |Y| within the budget after the pilot."""


def budgeted_fit(parts, kernel, ref, budget, seed, choice, share) -> dict | None:
    """The budgeted fit with the pilot rule forced to ``choice``; None below k components."""
    seen: dict = {}
    est = DistributedKernelPCA(K, max_words=budget, random_state=seed, center=True,
                               **kernel_options(kernel))
    try:
        # RF: the floor wherever a MIN_PILOT candidate could call the pilot too small
        floor = {"RIDGE_FLOOR": True, "MIN_PILOT": max(CANDIDATES["MIN_PILOT"])} \
            if choice == "RF" else {"RIDGE_FLOOR": False}
        # the share at every pilot size: TRUSTED_PILOT is read off these fits
        with constants(DEFENSIVE_SHARE=share, READ_PILOT_SHARE=share,
                       TRUSTED_PILOT=math.inf, **floor), forced(choice, seen):
            est.fit(parts)
    except WordBudgetError:
        return None
    except _OutOfReach:
        return {"choice": choice, "out_of_reach": True, **seen}
    if est.budget_plan_.pilot is not None and not seen:
        raise RuntimeError("the fit read its pilot with the library's rule, not the forced "
                           "one: forced() no longer patches the name piloted_fit calls")
    err = distributed_error(LocalCluster(parts), est.model_, ref["center_norm_sq"])["error"]
    words = est.communication_.total_words("fit")
    return {"choice": choice if seen else "forecast:" + est.method_, **seen,
            "fit_words": words, "over": words > budget,
            "excess": (err - ref["opt"]) / (ref["trace"] - ref["opt"])}


def run(args) -> None:
    """Seed after seed over sets, kernels and budgets: every forced fit not cached yet."""
    FOLDER.mkdir(parents=True, exist_ok=True)
    path = FOLDER / "fits.jsonl"
    done = {tuple(json.loads(line)["key"]) for line in path.read_text().splitlines()
            if line.strip()} if path.exists() else set()
    data, kernels, refs = {}, {}, {}
    lowest_peaked, highest_flat = min(CANDIDATES["PEAKED"]), max(CANDIDATES["FLAT"])
    smallest_read = max(CANDIDATES["MIN_PILOT"]) * K
    for seed in args.seeds:
        for dataset in args.datasets:
            if dataset not in data:
                data[dataset] = load_set(dataset)
            X = data[dataset]
            parts = split(X, make_partition(X.shape[0], n_workers(dataset), random_state=seed))
            start, count = time.perf_counter(), 0
            for which in args.kernels:
                if (dataset, which) not in kernels:
                    kernels[dataset, which] = make_setting_kernel(X, which)
                    refs[dataset, which] = references(dataset, which, X,
                                                      kernels[dataset, which], REFS)[True]
                kernel, ref = kernels[dataset, which], refs[dataset, which]
                for budget in args.budgets:
                    pilots = {}  # pilot size -> the share whose U and B fits stand for it
                    for share in shares_of(which):
                        key = (dataset, which, budget, seed, share, "R")
                        row = None if key in done else budgeted_fit(parts, kernel, ref, budget,
                                                                     seed, "R", share)
                        if key not in done:
                            _append(path, key, row)
                            done.add(key)
                            count += 1
                        row = row if row is not None else _read(path, key)
                        if not row or "phi" not in row or row.get("out_of_reach"):
                            continue
                        more = []
                        if which.startswith("rbf") and row["n_pilot"] < smallest_read:
                            more.append(("RF", share))
                        if (share == 0 and row["phi"] >= lowest_peaked
                                and row["spread"] <= pilot.MAX_SPREAD):
                            more.append(("R0", share))  # ridge 0 draws no uniform share
                        if row["phi"] < highest_flat and row["spread"] <= pilot.MAX_SPREAD:
                            owner = pilots.setdefault(row["n_pilot"], share)
                            more += [("U", owner), ("B", owner)]
                        for choice, at in more:
                            key = (dataset, which, budget, seed, at, choice)
                            if key in done:
                                continue
                            _append(path, key, budgeted_fit(parts, kernel, ref, budget, seed,
                                                            choice, at))
                            done.add(key)
                            count += 1
            print(f"seed {seed} {dataset}: {count} fits, {time.perf_counter() - start:.0f} s",
                  flush=True)


def _append(path: Path, key: tuple, row: dict | None) -> None:
    with open(path, "a") as handle:
        handle.write(json.dumps({"key": list(key), "row": row}) + "\n")


_READ: dict = {}


def _read(path: Path, key: tuple):
    if not _READ:
        for line in path.read_text().splitlines():
            if line.strip():
                entry = json.loads(line)
                _READ[tuple(entry["key"])] = entry["row"]
    return _READ.get(key)


# ----------------------------------------------------------------------------- the page

def summary(fits: dict) -> str:
    datasets = sorted({k[0] for k in fits}, key=DATASETS.index)
    runs = defaultdict(set)
    for d, w, b, s, share, c in fits:
        if c == "R":
            runs[(d, w, b, s)].add(share)
    seeds = defaultdict(set)  # a seed counts in a cell where every share of its kernel ran
    for (d, w, b, s), done in runs.items():
        if done >= set(shares_of(w)):
            seeds[(d, w, b)].add(s)
    cells = {cell: sorted(s) for cell, s in seeds.items()}
    best = sized_best(datasets, OUT / "cache")
    table = FitTable(fits, best, cells)
    search = Search(table)
    theta_all = search.best(cells)
    in_sample, defaults = table.results(theta_all), table.results(DEFAULTS)
    counts = defaultdict(int)
    for s in cells.values():
        counts[len(s)] += 1
    lines = [
        "# The word budget's constants, left one set out", "",
        "Produced by `nice -n 10 python benchmarks/budget_heldout.py` on the shared 2-core "
        "machine (script docstring: the method). Seeds per cell: "
        + ", ".join(f"{n} in {c} cells" for n, c in sorted(counts.items()))
        + f"; budgets {', '.join(f'{b:,}' for b in sorted({c[2] for c in cells}))}; "
        f"defensive shares {', '.join(f'{s:g}' for s in SHARES)} (RBF kernels); centred; "
        f"k = {K}. Candidates: RIDGE_FLOOR off, on; DEFENSIVE_SHARE and READ_PILOT_SHARE "
        f"{', '.join(f'{v:g}' for v in SHARES)}; TRUSTED_PILOT "
        f"{', '.join(f'{v:g}' for v in TRUSTED)}; "
        + "; ".join(f"{n} {', '.join(f'{v:g}' for v in vs)}" for n, vs in CANDIDATES.items())
        + f"; {len(search.thetas):,} combinations.", "",
        "## Verdict", "",
        f"- In-sample (constants chosen on every set: {fmt_theta(theta_all)}): "
        f"{count_met(in_sample, IN_SAMPLE)} of {len(in_sample)} cells within {IN_SAMPLE}x of the "
        f"best method ({misses(in_sample, IN_SAMPLE)}).",
        f"- The library's constants ({fmt_theta(DEFAULTS)}): {count_met(defaults, IN_SAMPLE)} of "
        f"{len(defaults)} cells within {IN_SAMPLE}x; {count_met(defaults, HELD_OUT)} within "
        f"{HELD_OUT}x ({misses(defaults, IN_SAMPLE)} of {IN_SAMPLE}x); ledgers over B: "
        f"{sum(c['over'] for c in defaults.values())}.",
    ]
    for floor, small, read in itertools.product((False, True), (0.0, 0.25, 0.5),
                                                (0.0, 0.25, 0.5)):
        results = table.results({**DEFAULTS, "RIDGE_FLOOR": floor, "DEFENSIVE_SHARE": small,
                                 "READ_PILOT_SHARE": read})
        lines.append(f"- The library's pilot rule with RIDGE_FLOOR = {floor}, DEFENSIVE_SHARE "
                     f"= {small:g}, READ_PILOT_SHARE = {read:g}: {count_met(results, IN_SAMPLE)} "
                     f"of {len(results)} cells within {IN_SAMPLE}x; "
                     f"{count_met(results, HELD_OUT)} within {HELD_OUT}x.")
    held_rows, held = [], {}
    for left in datasets:
        theta = search.best({c for c in cells if c[0] != left})
        results = {c: r for c, r in table.results(theta).items() if c[0] == left}
        held.update(results)
        held_rows.append((left, theta, results))
    lines.append(f"- Held out (each set judged with the constants chosen on the others): "
                 f"{count_met(held, HELD_OUT)} of {len(held)} cells within {HELD_OUT}x of the best "
                 f"method ({misses(held, HELD_OUT)}); ledgers over B: "
                 f"{sum(c['over'] for c in held.values())}.")
    lines += ["", "## Held out, set by set", ""]
    for left, theta, results in held_rows:
        lines += [f"**{left}** (chosen without it: {fmt_theta(theta)}): "
                  f"{count_met(results, HELD_OUT)} of {len(results)} cells within {HELD_OUT}x.", ""]
        lines += _cell_lines(results, HELD_OUT) + [""]
    lines += ["## Each chosen constant against its prior value", "",
              "The in-sample choice against the same constants with one of them at its "
              "value before this search (PRIOR): the cells where the budgeted fit differs, "
              "and its mean excess with the chosen value over that with the prior one.", ""]
    lines += against_prior(table, theta_all) + [""]
    lines += ["## The ridge sampler at each share against uniform sampling", "",
              "Mean excess over the cell's seeds of the ridge sampler (the forced R fit, "
              "sized to B like the others) at each defensive share, and of uniform + disLR "
              "and uniform + batch sized to B; R s / U: the ridge sampler's excess over "
              "uniform + disLR's at equal words; pilot: the pilot's mean size (read from "
              f"{pilot.MIN_PILOT} k = {pilot.MIN_PILOT * K} points on).", ""]
    lines += share_lines(fits, best, cells, SHARES)
    lines += ["", "## In-sample, every cell", ""] + _cell_lines(in_sample, IN_SAMPLE)
    lines += ["", "## The library's constants, every cell", ""] + _cell_lines(defaults,
                                                                             IN_SAMPLE)
    return "\n".join(lines) + "\n"


def share_lines(fits: dict, best: dict, cells: dict, shares) -> list[str]:
    """The RBF cells' ridge sampler at each share against uniform + disLR, and a summary
    by whether the pilot is read."""
    head = ("| data | kernel | B | pilot | " + " | ".join(f"R {s:g}" for s in shares)
            + " | U | B | " + " | ".join(f"R {s:g} / U" for s in shares) + " |")
    lines = [head, "|" + "---|" * (4 + 2 * len(shares) + 2)]
    against = defaultdict(list)  # (pilot read?, share) -> R s / U per cell
    for cell, seeds in sorted(cells.items(), key=lambda kv: (DATASETS.index(kv[0][0]),
                                                              kv[0][1], kv[0][2])):
        rows = {(seed, s): fits.get((*cell, seed, s, "R")) or {} for seed in seeds
                for s in shares}
        if not cell[1].startswith("rbf") or not all("excess" in r and "phi" in r
                                                      for r in rows.values()):
            continue  # no share, or the forecast chose exact or batch: no ridge fit
        means = {s: float(np.mean([rows[seed, s]["excess"] for seed in seeds])) for s in shares}
        n_pilot = float(np.mean([rows[seed, shares[0]]["n_pilot"] for seed in seeds]))
        sized = [best.get((*cell, seed), {}) for seed in seeds]
        u, b = ([x.get(m) for x in sized] for m in ("uniform + disLR", "uniform + batch"))
        u = float(np.mean(u)) if None not in u else float("nan")
        b = float(np.mean(b)) if None not in b else float("nan")
        read = n_pilot >= pilot.MIN_PILOT * K
        for share in shares:
            against[read, share].append(means[share] / u)
            floored = [(fits.get((*cell, seed, share, "RF")) or {}).get("excess")
                       for seed in seeds]
            if not read and None not in floored:
                against["floor", share].append(float(np.mean(floored)) / u)
        lines.append(f"| {cell[0]} | {KERNEL_LABELS[cell[1]]} | {cell[2]:,} | {n_pilot:.0f} | "
                     + " | ".join(f"{means[s]:.3g}" for s in shares) + f" | {u:.3g} | {b:.3g} | "
                     + " | ".join(f"{means[s] / u:.2f}" for s in shares) + " |")
    lines.append("")
    for read in (False, True, "floor"):
        for share in shares:
            ru = np.array(against[read, share])
            if read == "floor":
                if ru.size:
                    lines.append(
                        f"- Pilots too small to read, with the ridge floor, share {share:g}: "
                        f"{np.nanmin(ru):.2f}-{np.nanmax(ru):.2f}x (median "
                        f"{np.nanmedian(ru):.2f}x, above 1.1x in {int(np.sum(ru > 1.1))} of "
                        f"{ru.size} cells).")
                continue
            if ru.size:
                lines.append(
                    f"- Pilots {'read' if read else 'too small to read'}, share {share:g}: "
                    f"the ridge sampler's excess over uniform + disLR's "
                    f"{np.nanmin(ru):.2f}-{np.nanmax(ru):.2f}x (median {np.nanmedian(ru):.2f}x, "
                    f"above 1.1x in {int(np.sum(ru > 1.1))} of {ru.size} cells).")
    return lines


def _cell_lines(results: dict, tolerance: float) -> list[str]:
    lines = ["| data | kernel | B | seeds | budgeted | best | best method | ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for (d, w, b), c in sorted(results.items(), key=lambda kv: (DATASETS.index(kv[0][0]),
                                                                 kv[0][1], kv[0][2])):
        r = ratio(c)
        lines.append(f"| {d} | {KERNEL_LABELS[w]} | {b:,} | {c['seeds']} | {c['budget']:.3g} | "
                     f"{c['best']:.3g} | {c['method']} | "
                     f"{'opt' if c['best'] < AT_OPTIMUM else f'{r:.2f}'}"
                     f"{miss_mark(c, tolerance)} |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS))
    parser.add_argument("--budgets", nargs="+", type=int, default=list(BUDGETS))
    parser.add_argument("--summary-only", action="store_true")
    args = parser.parse_args(argv)
    args.seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    if not args.summary_only:
        run(args)
    fits = load_fits(FOLDER / "fits.jsonl")
    (OUT / "heldout.md").write_text(summary(fits))
    print(f"wrote {OUT / 'heldout.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
