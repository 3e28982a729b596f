"""Choosing the word budget's constants from forced fits (``benchmarks/budget_heldout.py``).

The budgeted fit ``DistributedKernelPCA(max_words=B)`` depends on constants of
the ridge sampler (:mod:`kernelscale.horizontal.sampling`) and of the pilot
rule (:mod:`kernelscale.horizontal.pilot`). The script runs, per cell and
seed, the budgeted fit once per method the rule can choose (:data:`CHOICES`)
at each defensive share (:data:`SHARES`); this module then reads, for any
constants theta, the fit the rule would have made (:class:`FitTable`), scores
every combination of the candidates (:func:`every_theta`, :class:`Search`)
and compares a choice with the constants before the search
(:func:`against_prior`). Pure functions over the fits: no fit runs here.

>>> distance(PRIOR), distance({**PRIOR, "FLAT": 0.5}) > 0, len(every_theta())
(0.0, True, 96000)
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from kernelscale.bench.settings import KERNEL_LABELS
from kernelscale.horizontal import pilot, sampling

from .budget_grid import AT_OPTIMUM, DATASETS, KERNELS, Cache, K

__all__ = [
    "CANDIDATES",
    "CHOICES",
    "DEFAULTS",
    "HELD_OUT",
    "IN_SAMPLE",
    "PILOT_CONSTANTS",
    "PRIOR",
    "SHARES",
    "SIZED",
    "SWITCHES",
    "TRUSTED",
    "FitTable",
    "Search",
    "against_prior",
    "by_pilot",
    "choose",
    "constants",
    "count_met",
    "distance",
    "every_theta",
    "fmt_theta",
    "load_fits",
    "miss_mark",
    "misses",
    "ratio",
    "score",
    "shares_of",
    "sized_best",
]

#: The defensive shares the RBF kernels' fits run at (the others have none:
#: :func:`kernelscale.horizontal.sampling.defensive_share`).
SHARES = (0.0, 0.25, 0.5, 0.75)
#: The candidates of each pilot-rule constant (the library's value among them). MIN_PILOT
#: starts at 2: below, pilots of k points are read, and on rows of unit norm (not in this
#: grid) they sent spam with a polynomial kernel to uniform + batch at 27-37x the ridge
#: sampler's excess (``results/budget/unit_rows``, docs/budget.md).
CANDIDATES = {"FLAT": (0.2, 0.25, 0.33, 0.4, 0.5),
              "PEAKED": (0.6, 0.7, 0.8, 0.9, math.inf),
              "MIN_PILOT": (2, 3, 4),
              "BATCH_RATIO": (1.5, 1.75, 2.0, 2.5, 3.0),
              "MIN_BATCH_PILOT": (0, 20)}
#: The criteria in-sample and held out: the budgeted fit's excess over the best method's.
IN_SAMPLE, HELD_OUT = 1.1, 1.15
#: The methods sized to B read from the budget grid's cache.
SIZED = ("diskpca (paper)", "uniform + disLR", "uniform + batch", "exact")


@contextmanager
def constants(**values) -> Iterator[None]:
    """Set module constants of :mod:`~kernelscale.horizontal.pilot` and
    :mod:`~kernelscale.horizontal.sampling` for the block (by name, e.g. ``FLAT=0.4``)."""
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


def shares_of(which: str) -> tuple[float, ...]:
    """The defensive shares a kernel's fits run at: :data:`SHARES` with RBF kernels, 0
    with the others (whose ridge rounds draw no uniform share)."""
    return SHARES if which.startswith("rbf") else (0.0,)


def load_fits(path: Path) -> dict:
    """The forced fits of ``path`` (one JSON line ``{"key": [...], "row": {...}}`` each) by
    key (data, kernel, B, seed, share, choice); a later line replaces an earlier one."""
    fits = {}
    for line in path.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            fits[tuple(entry["key"])] = entry["row"]
    return fits


def sized_best(datasets: Iterable[str], cache_folder: Path) -> dict:
    """Per (data, kernel, B, seed): the sized methods' excess from the budget grid's cache
    (:class:`~budget_shared.budget_grid.Cache` of ``cache_folder``), centred."""
    cache, best = Cache(cache_folder), {}
    for dataset in datasets:
        for which in KERNELS:
            for (budget, seed, method, tag), r in cache.load(dataset, which, True).items():
                if method in SIZED and tag == "" and r["excess"] is not None:
                    best.setdefault((dataset, which, budget, seed), {})[method] = r["excess"]
    return best


def choose(row: dict, theta: dict, shift_invariant: bool = False) -> str:
    """The pilot rule's choice ('R', 'R0', 'U', 'B') under constants ``theta``
    (``shift_invariant``: an RBF kernel, whose pilot the rule reads whatever its size)."""
    with constants(**{k: v for k, v in theta.items() if k != "DEFENSIVE_SHARE"}):
        method, _, scale = pilot.choose_after_pilot(
            row["phi"], row["sizes"], row["spread"], row["n_pilot"], K, row["n_samples"],
            shift_invariant)
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


#: The pilot rule's forced choices: the ridge sampler with the pilot's ridge, with ridge 0,
#: uniform + disLR, uniform + batch, the ridge sampler with the ridge floor.
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
        (FLAT, PEAKED, MIN_PILOT, BATCH_RATIO, MIN_BATCH_PILOT); 0 (R) for the forecast's
        own fits."""
        if rule not in self._choices:
            theta = dict(zip(PILOT_CONSTANTS, rule, strict=True))
            self._choices[rule] = np.array([
                CHOICES.index(choose(r, theta, bool(rbf))) if r else 0
                for r, rbf in zip(self.rule_rows, self.rbf, strict=True)])
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
    """A cell's budgeted mean excess over the best method's (1 where the best is at the
    optimum, below :data:`~budget_shared.budget_grid.AT_OPTIMUM`)."""
    return 1.0 if c["best"] < AT_OPTIMUM else c["budget"] / c["best"]


def score(results: dict, tolerance: float) -> tuple:
    """(cells within ``tolerance``, minus the sum of the log ratios above 1): higher is better."""
    met = sum(ratio(c) <= tolerance for c in results.values())
    loss = sum(math.log(max(ratio(c), 1.0)) for c in results.values())
    return met, -loss


#: The pilot rule's constants searched (:mod:`kernelscale.horizontal.pilot`).
PILOT_CONSTANTS = ("FLAT", "PEAKED", "MIN_PILOT", "BATCH_RATIO", "MIN_BATCH_PILOT")
#: The library's constants (at import).
DEFAULTS = {"RIDGE_FLOOR": sampling.RIDGE_FLOOR,
            "DEFENSIVE_SHARE": sampling.DEFENSIVE_SHARE,
            "READ_PILOT_SHARE": sampling.READ_PILOT_SHARE,
            "TRUSTED_PILOT": sampling.TRUSTED_PILOT,
            **{name: getattr(pilot, name) for name in PILOT_CONSTANTS}}
#: The constants before this search (the library after issue 20 and the first share of
#: issue 35): a candidate moves away from them only where it meets more cells.
PRIOR = {"RIDGE_FLOOR": False, "DEFENSIVE_SHARE": 0.25, "READ_PILOT_SHARE": 0.25,
         "TRUSTED_PILOT": math.inf, "FLAT": 0.33, "PEAKED": 0.7, "MIN_PILOT": 2,
         "BATCH_RATIO": 2.0, "MIN_BATCH_PILOT": 0}
#: Candidates of TRUSTED_PILOT (x k; inf: a share at every pilot size).
TRUSTED = (math.inf, 4, 6, 8)


#: Constants that switch a rule on or off (0: off): any change counts 1.
SWITCHES = ("RIDGE_FLOOR", "MIN_BATCH_PILOT")


def distance(theta: dict) -> float:
    """How far ``theta`` is from :data:`PRIOR` (each constant relative to its prior value; a
    switch (:data:`SWITCHES`) or an infinite PEAKED counts 1)."""
    return sum(0.0 if theta[k] == PRIOR[k] else 1.0 if k in SWITCHES
               else abs(theta[k] - PRIOR[k]) / (1 + abs(PRIOR[k]))
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
    """``theta`` as text: ``NAME = value, ...``."""
    return ", ".join(f"{k} = {v}" if isinstance(v, bool) else f"{k} = {v:g}"
                     for k, v in theta.items())

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


def count_met(results: dict, tolerance: float) -> int:
    """How many cells of ``results`` are within ``tolerance`` (:func:`ratio`)."""
    return sum(ratio(c) <= tolerance for c in results.values())


def miss_mark(c: dict, tolerance: float) -> str:
    """'*' on a cell beyond ``tolerance``, '* (noise)' where the gap is within two standard
    errors of the seeds' paired differences."""
    if ratio(c) <= tolerance:
        return ""
    return "* (noise)" if c["noise"] else "*"


def misses(results: dict, tolerance: float) -> str:
    """How many cells miss ``tolerance``, and how many of them by more than the noise."""
    missed = [c for c in results.values() if ratio(c) > tolerance]
    return (f"{len(missed)} miss, {sum(not c['noise'] for c in missed)} of them by more than "
            "two standard errors of the seeds' paired differences")


