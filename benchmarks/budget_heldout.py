"""Leave one set out: the word budget's constants chosen without the set they are judged on.

The budgeted fit ``DistributedKernelPCA(max_words=B)`` depends on constants:
the ridge sampler's (:mod:`kernelscale.horizontal.sampling`: ``RIDGE_FLOOR``,
whether a pilot too small to read adds the energy outside its span to the
ridge; ``DEFENSIVE_SHARE`` and ``READ_PILOT_SHARE``, the share of each ridge
round's landmarks drawn uniformly after a pilot too small to read and after
one that is read; ``TRUSTED_PILOT``, the pilot size, in multiples of k, from
which the rounds draw none) and the pilot rule's thresholds
(:mod:`kernelscale.horizontal.pilot`: ``FLAT``, ``PEAKED``, ``MIN_PILOT``,
``BATCH_RATIO``). Judging them on the sets they were tuned on flatters them;
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

Choosing, among every combination of the candidates (48,000), on the training
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

Writes ``benchmarks/results/budget/heldout.md`` and ``heldout/fits.jsonl``.
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

sys.path.insert(0, str(Path(__file__).parent))

from budget import (  # noqa: E402 (the budget grid's data, kernels, cache and references)
    AT_OPTIMUM,
    BUDGETS,
    DATASETS,
    KERNEL_LABELS,
    OUT,
    REFS,
    Cache,
    kernel_options,
    load_data,
    n_workers,
)
from sampler import make_setting_kernel, references  # noqa: E402

from kernelscale import DistributedKernelPCA  # noqa: E402
from kernelscale.backends.local import LocalCluster  # noqa: E402
from kernelscale.horizontal import distributed_error, pilot, sampling  # noqa: E402
from kernelscale.horizontal.budget import WordBudgetError  # noqa: E402
from kernelscale.partition import make_partition, split  # noqa: E402

K = 10
KERNELS = ("rbf0.2", "rbf1.0", "poly", "arccos")
SHARES = (0.0, 0.25, 0.5, 0.75)  # RBF kernels; the others have none (sampling.defensive_share)
#: The candidates of each pilot-rule constant (the library's value among them). MIN_PILOT
#: starts at 2: below, pilots of k points are read, and on rows of unit norm (not in this
#: grid) they sent spam with a polynomial kernel to uniform + batch at 27-37x the ridge
#: sampler's excess (``results/budget/unit_rows``, docs/budget.md).
CANDIDATES = {"FLAT": (0.2, 0.25, 0.33, 0.4, 0.5),
              "PEAKED": (0.6, 0.7, 0.8, 0.9, math.inf),
              "MIN_PILOT": (2, 3, 4),
              "BATCH_RATIO": (1.5, 1.75, 2.0, 2.5, 3.0)}
IN_SAMPLE, HELD_OUT = 1.1, 1.15
SIZED = ("diskpca (paper)", "uniform + disLR", "uniform + batch", "exact")
FOLDER = OUT / "heldout"


@contextmanager
def constants(**values):
    """Set module constants of :mod:`pilot` and :mod:`sampling` for the block."""
    modules = {"DEFENSIVE_SHARE": sampling, "READ_PILOT_SHARE": sampling,
               "TRUSTED_PILOT": sampling, "RIDGE_FLOOR": sampling}
    old = {name: getattr(modules.get(name, pilot), name) for name in values}
    try:
        for name, value in values.items():
            setattr(modules.get(name, pilot), name, value)
        yield
    finally:
        for name, value in old.items():
            setattr(modules.get(name, pilot), name, value)


@contextmanager
def forced(choice: str, seen: dict):
    """The pilot rule records its inputs in ``seen`` and returns ``choice``.

    choice: 'R' (ridge sampler, the pilot's ridge), 'RF' (the same with the ridge floor of
    a pilot too small to read), 'R0' (ridge 0), 'U', 'B'.
    """
    real = pilot.choose_after_pilot

    def rule(phi, sizes, spread=1.0, n_pilot=None, n_components=None, n_samples=None):
        seen.update(phi=phi, sizes=dict(sizes), spread=spread, n_pilot=n_pilot,
                    n_samples=n_samples)
        method = {"R": "diskpca", "RF": "diskpca", "R0": "diskpca", "U": "uniform_dislr",
                  "B": "uniform_batch"}[choice]
        if sizes.get(method) is None:
            raise _OutOfReach
        return pilot.PilotChoice(method, f"forced: {choice}", 0.0 if choice == "R0" else 1.0)

    pilot.choose_after_pilot = rule
    try:
        yield
    finally:
        pilot.choose_after_pilot = real


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
                data[dataset] = load_data(dataset)
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


def shares_of(which: str) -> tuple[float, ...]:
    """The defensive shares a kernel's fits run at: :data:`SHARES` with RBF kernels, 0
    with the others (whose ridge rounds draw no uniform share)."""
    return SHARES if which.startswith("rbf") else (0.0,)


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


# ----------------------------------------------------------------------------- choosing

def load_fits(path: Path) -> dict:
    fits = {}
    for line in path.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            fits[tuple(entry["key"])] = entry["row"]
    return fits


def sized_best(datasets) -> dict:
    """Per (data, kernel, B, seed): the sized methods' excess from the budget grid's cache."""
    cache, best = Cache(OUT / "cache"), {}
    for dataset in datasets:
        for which in KERNELS:
            for (budget, seed, method, tag), r in cache.load(dataset, which, True).items():
                if method in SIZED and tag == "" and r["excess"] is not None:
                    best.setdefault((dataset, which, budget, seed), {})[method] = r["excess"]
    return best


def choose(row: dict, theta: dict) -> str:
    """The pilot rule's choice ('R', 'R0', 'U', 'B') under constants ``theta``."""
    with constants(**{k: v for k, v in theta.items() if k != "DEFENSIVE_SHARE"}):
        method, _, scale = pilot.choose_after_pilot(
            row["phi"], row["sizes"], row["spread"], row["n_pilot"], K, row["n_samples"])
    if method == "diskpca":
        return "R0" if scale == 0 else "R"
    return {"uniform_dislr": "U", "uniform_batch": "B"}[method]


_BY_PILOT: dict = {}


def by_pilot(fits: dict) -> dict:
    """The U and B fits by (data, kernel, B, seed, choice, pilot size)."""
    if id(fits) not in _BY_PILOT:
        _BY_PILOT[id(fits)] = {(d, w, b, s, c, f["n_pilot"]): f
                               for (d, w, b, s, _, c), f in fits.items()
                               if c in ("U", "B") and f and "n_pilot" in f}
    return _BY_PILOT[id(fits)]


CHOICES = ("R", "R0", "U", "B", "RF")


class FitTable:
    """The fits as arrays, one row per (cell, seed) where every share ran.

    ``excess[row, choice, share]``: the budgeted fit of that seed when the rule
    takes ``choice`` (:data:`CHOICES`) and the ridge rounds draw ``share``
    (:data:`SHARES`) uniformly; NaN where not run. RF (the ridge floor) stands
    for R where the pilot is read under every candidate. U and B do not depend on the
    share; a seed whose forecast ran exact or batch KPCA (no pilot) has one
    value for every choice and share, and so do the shares of kernels without
    one. ``sized``: each cell's mean excess of the methods sized to B
    (:data:`SIZED`; NaN where a seed lacks one), the ridge sampler's at each
    share in ``ridge``.
    """

    def __init__(self, fits: dict, best: dict, cells: dict):
        self.cells = list(cells)
        rows, self.cell_of, self.rule_rows, self.pilots, self.rbf = [], [], [], [], []
        for index, (cell, seeds) in enumerate(cells.items()):
            for seed in seeds:
                excess, over, rule_row = self._seed(fits, cell, seed)
                sized = best.get((*cell, seed), {})
                rows.append((excess, over, [sized.get(m, np.nan) for m in SIZED]))
                self.cell_of.append(index)
                self.rule_rows.append(rule_row)
                self.pilots.append(rule_row["n_pilot"] if rule_row else 0)
                self.rbf.append(cell[1].startswith("rbf"))
        self.excess = np.array([r[0] for r in rows])
        self.over = np.array([r[1] for r in rows])
        self.cell_of, self.pilots = np.array(self.cell_of), np.array(self.pilots)
        self.rbf = np.array(self.rbf)
        self.sized_rows = np.array([r[2] for r in rows])
        self.sized = self.cell_mean(self.sized_rows)
        self.has_ridge = np.array([r is not None for r in self.rule_rows])  # a pilot was drawn
        self._choices: dict = {}

    @staticmethod
    def _seed(fits: dict, cell: tuple, seed: int):
        excess = np.full((len(CHOICES), len(SHARES)), np.nan)
        over = np.zeros(excess.shape, dtype=bool)
        first = fits.get((*cell, seed, 0.0, "R")) or {}
        if "phi" not in first:  # the forecast's own fit: no constant changes it
            excess[:] = first.get("excess", np.nan)
            over[:] = bool(first.get("over"))
            return excess, over, None
        for j, share in enumerate(SHARES if cell[1].startswith("rbf") else (0.0,)):
            for i, choice in enumerate(CHOICES):
                got = fits.get((*cell, seed, share, choice))
                if got is None and choice in ("U", "B"):
                    got = by_pilot(fits).get((*cell, seed, choice, first["n_pilot"]))
                if got and "excess" in got:
                    excess[i, j], over[i, j] = got["excess"], bool(got.get("over"))
        if not cell[1].startswith("rbf"):  # no uniform share: the same fit at every share
            excess[:] = excess[:, :1]
            over[:] = over[:, :1]
        rf = CHOICES.index("RF")
        if np.isnan(excess[rf]).all():  # no floor under any candidate: the R fits
            excess[rf], over[rf] = excess[0], over[0]
        return excess, over, first

    def cell_mean(self, values: np.ndarray) -> np.ndarray:
        """Per cell, the mean over its seeds of ``values`` (rows first); NaN if one is NaN."""
        n = len(self.cells)
        flat = values.reshape(values.shape[0], -1)
        out = np.empty((n, flat.shape[1]))
        for col in range(flat.shape[1]):
            v = flat[:, col]
            sums = np.bincount(self.cell_of, np.nan_to_num(v), n)
            bad = np.bincount(self.cell_of, ~np.isfinite(v), n) > 0
            out[:, col] = np.where(bad, np.nan, sums / np.bincount(self.cell_of, minlength=n))
        return out.reshape((n, *values.shape[1:]))

    def choices(self, rule: tuple) -> np.ndarray:
        """Per row, the pilot rule's choice (an index of :data:`CHOICES`) under ``rule``:
        (FLAT, PEAKED, MIN_PILOT, BATCH_RATIO); 0 (R) for the forecast's own fits."""
        if rule not in self._choices:
            theta = dict(zip(PILOT_CONSTANTS, rule, strict=True))
            self._choices[rule] = np.array([CHOICES.index(choose(r, theta)) if r else 0
                                            for r in self.rule_rows])
        return self._choices[rule]

    def results(self, theta: dict) -> dict:
        """Per cell: the budgeted and the best mean excess under ``theta``, the best
        method, ledgers over B and seeds; cells lacking a fit are left out."""
        rows = np.arange(len(self.cell_of))
        shares = self.share_index(theta)
        # the ridge sampler with the floor where theta's MIN_PILOT calls the pilot too small
        ridge = np.where(theta["RIDGE_FLOOR"] & self.rbf & (self.pilots > 0)
                         & (self.pilots < theta["MIN_PILOT"] * K), CHOICES.index("RF"), 0)
        picks = self.choices(tuple(theta[name] for name in PILOT_CONSTANTS))
        picks = np.where(picks == 0, ridge, picks)
        # ridge 0 draws no uniform share (sampling.defensive_share)
        mine_shares = np.where(picks == CHOICES.index("R0"), 0, shares)
        mine_rows = self.excess[rows, picks, mine_shares]
        mine = self.cell_mean(mine_rows)
        over = np.bincount(self.cell_of, self.over[rows, picks, mine_shares], len(self.cells))
        ridge_rows = np.where(self.has_ridge, self.excess[rows, ridge, shares], np.nan)
        ridge = self.cell_mean(ridge_rows)
        methods = ("diskpca (ridge)", *SIZED)
        candidates = np.column_stack([ridge, self.sized])
        candidate_rows = np.column_stack([ridge_rows, self.sized_rows])
        out = {}
        for index, cell in enumerate(self.cells):
            if np.isnan(mine[index]) or np.isnan(candidates[index]).all():
                continue
            top = int(np.nanargmin(candidates[index]))
            # the paired differences over the cell's seeds (one partition per seed)
            diff = (mine_rows - candidate_rows[:, top])[self.cell_of == index]
            spread = 2 * np.std(diff, ddof=1) / np.sqrt(diff.size) if diff.size > 1 else np.inf
            out[cell] = {"budget": float(mine[index]), "best": float(candidates[index, top]),
                         "method": methods[top], "over": int(over[index]),
                         "seeds": int(diff.size), "noise": bool(np.mean(diff) <= spread)}
        return out

    def share_index(self, theta: dict) -> np.ndarray:
        """Per row, the share its ridge rounds draw under ``theta``: DEFENSIVE_SHARE
        where the pilot is too small to read (fewer than MIN_PILOT k points),
        READ_PILOT_SHARE where it is read, none from TRUSTED_PILOT k points on; RBF
        kernels only."""
        small = self.pilots < theta["MIN_PILOT"] * K
        share = np.where(small, theta["DEFENSIVE_SHARE"], theta["READ_PILOT_SHARE"])
        share = np.where(~small & (self.pilots >= theta["TRUSTED_PILOT"] * K), 0.0, share)
        return np.searchsorted(SHARES, np.where(self.rbf, share, 0.0))


def ratio(c: dict) -> float:
    return 1.0 if c["best"] < AT_OPTIMUM else c["budget"] / c["best"]


def score(results: dict, tolerance: float) -> tuple:
    met = sum(ratio(c) <= tolerance for c in results.values())
    loss = sum(math.log(max(ratio(c), 1.0)) for c in results.values())
    return met, -loss


PILOT_CONSTANTS = ("FLAT", "PEAKED", "MIN_PILOT", "BATCH_RATIO")
DEFAULTS = {"RIDGE_FLOOR": sampling.RIDGE_FLOOR,
            "DEFENSIVE_SHARE": sampling.DEFENSIVE_SHARE,
            "READ_PILOT_SHARE": sampling.READ_PILOT_SHARE,
            "TRUSTED_PILOT": sampling.TRUSTED_PILOT,
            **{name: getattr(pilot, name) for name in PILOT_CONSTANTS}}
#: The constants before this search (the library after issue 20 and the first share of
#: issue 35): a candidate moves away from them only where it meets more cells.
PRIOR = {"RIDGE_FLOOR": False, "DEFENSIVE_SHARE": 0.25, "READ_PILOT_SHARE": 0.25,
         "TRUSTED_PILOT": math.inf, "FLAT": 0.33, "PEAKED": 0.7, "MIN_PILOT": 2,
         "BATCH_RATIO": 2.0}
#: Candidates of TRUSTED_PILOT (x k; inf: a share at every pilot size).
TRUSTED = (math.inf, 4, 6, 8)


def distance(theta: dict) -> float:
    """How far ``theta`` is from :data:`PRIOR` (each constant relative to its prior value; a
    switch or an infinite PEAKED counts 1)."""
    return sum(0.0 if theta[k] == PRIOR[k] else abs(theta[k] - PRIOR[k]) / (1 + abs(PRIOR[k]))
               if math.isfinite(theta[k]) and math.isfinite(PRIOR[k]) else 1.0
               for k in theta)


def every_theta() -> list[dict]:
    """Every combination of the candidates: the two shares and the pilot rule's constants."""
    return [{"RIDGE_FLOOR": floor, "DEFENSIVE_SHARE": small, "READ_PILOT_SHARE": read,
             "TRUSTED_PILOT": trusted, **dict(zip(PILOT_CONSTANTS, values, strict=True))}
            for floor in (False, True) for small, read in itertools.product(SHARES, SHARES)
            for trusted in TRUSTED
            for values in itertools.product(*(CANDIDATES[n] for n in PILOT_CONSTANTS))]


class Search:
    """The ratio of every cell under every candidate theta, computed once; a fold then
    only scores its training cells."""

    def __init__(self, table: FitTable):
        self.table, self.thetas = table, every_theta()
        index = {cell: i for i, cell in enumerate(table.cells)}
        self.ratios = np.full((len(self.thetas), len(table.cells)), np.nan)
        self.log_excess = np.full(self.ratios.shape, np.nan)
        for t, theta in enumerate(self.thetas):
            for cell, c in table.results(theta).items():
                self.ratios[t, index[cell]] = ratio(c)
                self.log_excess[t, index[cell]] = math.log(max(c["budget"], AT_OPTIMUM))
        self.distances = np.array([distance(theta) for theta in self.thetas])

    def best(self, cells) -> dict:
        """The theta meeting most of ``cells`` within 1.1x; among those, the one whose
        budgeted fits have the least excess (the sum of its logs over the cells, an
        excess below the optimum's 1e-6 counted as 1e-6), then the nearest to
        :data:`PRIOR`."""
        mask = np.array([cell in cells for cell in self.table.cells])
        r = self.ratios[:, mask]
        met = np.sum(r <= IN_SAMPLE, axis=1)
        excess = np.nansum(self.log_excess[:, mask], axis=1)
        order = np.lexsort((self.distances, excess, -met))
        return self.thetas[int(order[0])]


def fmt_theta(theta: dict) -> str:
    return ", ".join(f"{k} = {v}" if isinstance(v, bool) else f"{k} = {v:g}"
                     for k, v in theta.items())


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
    best = sized_best(datasets)
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
        f"{_met(in_sample, IN_SAMPLE)} of {len(in_sample)} cells within {IN_SAMPLE}x of the "
        f"best method ({_misses(in_sample, IN_SAMPLE)}).",
        f"- The library's constants ({fmt_theta(DEFAULTS)}): {_met(defaults, IN_SAMPLE)} of "
        f"{len(defaults)} cells within {IN_SAMPLE}x; {_met(defaults, HELD_OUT)} within "
        f"{HELD_OUT}x ({_misses(defaults, IN_SAMPLE)} of {IN_SAMPLE}x); ledgers over B: "
        f"{sum(c['over'] for c in defaults.values())}.",
    ]
    for floor, small, read in itertools.product((False, True), (0.0, 0.25, 0.5),
                                                (0.0, 0.25, 0.5)):
        results = table.results({**DEFAULTS, "RIDGE_FLOOR": floor, "DEFENSIVE_SHARE": small,
                                 "READ_PILOT_SHARE": read})
        lines.append(f"- The library's pilot rule with RIDGE_FLOOR = {floor}, DEFENSIVE_SHARE "
                     f"= {small:g}, READ_PILOT_SHARE = {read:g}: {_met(results, IN_SAMPLE)} "
                     f"of {len(results)} cells within {IN_SAMPLE}x; "
                     f"{_met(results, HELD_OUT)} within {HELD_OUT}x.")
    held_rows, held = [], {}
    for left in datasets:
        theta = search.best({c for c in cells if c[0] != left})
        results = {c: r for c, r in table.results(theta).items() if c[0] == left}
        held.update(results)
        held_rows.append((left, theta, results))
    lines.append(f"- Held out (each set judged with the constants chosen on the others): "
                 f"{_met(held, HELD_OUT)} of {len(held)} cells within {HELD_OUT}x of the best "
                 f"method ({_misses(held, HELD_OUT)}); ledgers over B: "
                 f"{sum(c['over'] for c in held.values())}.")
    lines += ["", "## Held out, set by set", ""]
    for left, theta, results in held_rows:
        lines += [f"**{left}** (chosen without it: {fmt_theta(theta)}): "
                  f"{_met(results, HELD_OUT)} of {len(results)} cells within {HELD_OUT}x.", ""]
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


def against_prior(table: FitTable, theta: dict) -> list[str]:
    """Per constant of ``theta`` that differs from :data:`PRIOR`: where setting it back to
    the prior changes the budgeted fit, and by how much."""
    chosen, lines = table.results(theta), []
    for name, value in theta.items():
        if value == PRIOR[name]:
            continue
        prior = table.results({**theta, name: PRIOR[name]})
        changed = sorted((cell, chosen[cell]["budget"] / prior[cell]["budget"])
                         for cell in chosen.keys() & prior.keys()
                         if not np.isclose(chosen[cell]["budget"], prior[cell]["budget"]))
        if not changed:
            lines.append(f"- {name} = {value:g} (prior {PRIOR[name]:g}): no cell changes.")
            continue
        ratios = np.array([r for _, r in changed])
        where = "; ".join(f"{d} {KERNEL_LABELS[w]} {b:,} {r:.2f}x"
                          for (d, w, b), r in sorted(changed, key=lambda c: (
                              DATASETS.index(c[0][0]), c[0][1], c[0][2])))
        lines.append(f"- {name} = {value:g} (prior {PRIOR[name]:g}): {len(changed)} cells "
                     f"change, {ratios.min():.2f}-{ratios.max():.2f}x (median "
                     f"{np.median(ratios):.2f}x, lower in {int(np.sum(ratios < 1))}): {where}.")
    return lines


def _met(results: dict, tolerance: float) -> int:
    return sum(ratio(c) <= tolerance for c in results.values())


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


def _mark(c: dict, tolerance: float) -> str:
    """'*' on a cell beyond ``tolerance``, '* (noise)' where the gap is within two standard
    errors of the seeds' paired differences."""
    if ratio(c) <= tolerance:
        return ""
    return "* (noise)" if c["noise"] else "*"


def _misses(results: dict, tolerance: float) -> str:
    """How many cells miss ``tolerance``, and how many of them by more than the noise."""
    missed = [c for c in results.values() if ratio(c) > tolerance]
    return (f"{len(missed)} miss, {sum(not c['noise'] for c in missed)} of them by more than "
            "two standard errors of the seeds' paired differences")


def _cell_lines(results: dict, tolerance: float) -> list[str]:
    lines = ["| data | kernel | B | seeds | budgeted | best | best method | ratio |",
             "|---|---|---|---|---|---|---|---|"]
    for (d, w, b), c in sorted(results.items(), key=lambda kv: (DATASETS.index(kv[0][0]),
                                                                 kv[0][1], kv[0][2])):
        r = ratio(c)
        lines.append(f"| {d} | {KERNEL_LABELS[w]} | {b:,} | {c['seeds']} | {c['budget']:.3g} | "
                     f"{c['best']:.3g} | {c['method']} | "
                     f"{'opt' if c['best'] < AT_OPTIMUM else f'{r:.2f}'}"
                     f"{_mark(c, tolerance)} |")
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
