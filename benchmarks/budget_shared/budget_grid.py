"""The word-budget grid of ``benchmarks/budget*.py``: its sets, kernels, budgets, fits and cache.

Each cell is (data set, kernel, centring, word budget B); in each, the budgeted
estimator ``DistributedKernelPCA(max_words=B)`` is judged against every method
sized to B (:data:`METHODS`) by the excess (err - opt) / (trace - opt) against
the exact rank-k optimum (:func:`kernelscale.bench.settings.references`).
Every fit is cached on disk (:class:`Cache`), keyed by a fingerprint of the
source of the library code it runs (:func:`rule_fingerprint`,
:func:`sampler_fingerprint`), so that a change of the rule re-runs only the
fits it touches. The scripts pass the cache's folder.

>>> [method_tag(name, "rule", "sampler") for name in ("budget", "diskpca (ridge)", "exact")]
['rule', 'sampler', '']
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from kernelscale import DistributedKernelPCA
from kernelscale.backends.local import LocalCluster
from kernelscale.bench.settings import UNIT, kernel_options
from kernelscale.horizontal import distributed_error
from kernelscale.horizontal.budget import WordBudgetError
from kernelscale.kernels import Kernel

__all__ = [
    "AT_OPTIMUM",
    "BUDGETS",
    "CELL_FIELDS",
    "DATASETS",
    "K",
    "KERNELS",
    "LABELS",
    "METHODS",
    "TOLERANCE",
    "UNCENTRED",
    "UNIT_DATASETS",
    "Cache",
    "cell_table",
    "largest_landmarks_within",
    "measured_fit",
    "method_tag",
    "one_fit",
    "rule_fingerprint",
    "sampler_fingerprint",
    "settings",
]

DATASETS = ("digits", "letter", "satellite", "spam", "insurance", "musk", "income", "shuttle",
            "dna")
#: The sets also run uncentred (the papers' setting).
UNCENTRED = ("digits", "satellite")
UNIT_DATASETS = tuple(f"{name}{UNIT}" for name in DATASETS)
KERNELS = ("rbf0.2", "rbf1.0", "poly", "arccos")
BUDGETS = (10_000, 30_000, 100_000, 300_000, 1_000_000)
#: The components of every fit.
K = 10
#: A cell is met where the budgeted fit's mean excess is within this factor of the best
#: method's, or where the best is below :data:`AT_OPTIMUM`.
TOLERANCE = 1.1
AT_OPTIMUM = 1e-6
#: (label, estimator options) of every method sized to the budget.
METHODS = {"diskpca (ridge)": {"method": "diskpca"},
           "diskpca (paper)": {"method": "diskpca", "sampler": "paper"},
           "uniform + disLR": {"method": "uniform_dislr"},
           "uniform + batch": {"method": "uniform_batch"},
           "exact": {"method": "exact"}}
#: The label of each method the budgeted estimator can choose.
LABELS = {"diskpca": "diskpca (ridge)", "uniform_dislr": "uniform + disLR",
          "uniform_batch": "uniform + batch", "exact": "exact"}


def _source_fingerprint(functions, extra: str = "") -> str:
    """A hash of the functions' code (their docstrings and comments left out) and ``extra``."""
    import ast
    import inspect
    import textwrap

    parts = [extra]
    for function in functions:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
        body = tree.body[0].body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            tree.body[0].body = body[1:]
        parts.append(ast.unparse(tree))
    return hashlib.sha256("".join(parts).encode()).hexdigest()[:12]


def sampler_fingerprint() -> str:
    """A fingerprint of the ridge sampler (its schedule, ridge and rounds).

    A cached fit that runs it (the sized 'diskpca (ridge)' and every budgeted
    fit) is redone when it changes.
    """
    from importlib import import_module

    samplers = import_module("kernelscale.horizontal.samplers")
    sampling = import_module("kernelscale.horizontal.sampling")
    return _source_fingerprint((samplers.ridge_schedule, samplers.default_pilot_size,
                                samplers.pilot_ridge, samplers.ridge_sample,
                                samplers.ridge_outside_pilot, sampling.needs_ridge_floor,
                                sampling.defensive_split, sampling.defensive_share),
                               repr((sampling.DEFENSIVE_SHARE, sampling.READ_PILOT_SHARE,
                                     sampling.TRUSTED_PILOT, sampling.RIDGE_FLOOR)))


def rule_fingerprint() -> str:
    """A fingerprint of the budget rule and sampler: every function and constant of
    :mod:`kernelscale.horizontal.pilot`, :mod:`~kernelscale.horizontal.measure` and
    :mod:`~kernelscale.horizontal.measured`, the piloted fit, and the forecast's choice
    and resizing.

    A cached budgeted fit is redone when it changes (not when a docstring does).
    """
    import inspect

    from kernelscale.horizontal import budget, choice, measure, measured, pilot, piloted

    own = [f for module in (pilot, measure, measured) for f in vars(module).values()
           if inspect.isfunction(f) and f.__module__ == module.__name__]
    constants = tuple(value for module in (pilot, measure, measured)
                      for name, value in vars(module).items() if name.isupper())
    return _source_fingerprint((budget._choose, budget._batch_floor, budget.pilot_sizes,
                                piloted.piloted_fit,
                                choice.measures, measure.SpanGram.dislr, measure.SpanGram.captured,
                                measured._Gram.add, *own),
                               repr(constants) + sampler_fingerprint())


#: The fields of a grid cell's key (the budget last).
CELL_FIELDS = ("dataset", "kernel", "centred", "budget")


def _cell_order(key: tuple) -> tuple:
    """Cells by data, kernel, centred before uncentred (or set-up by name), then budget."""
    middle = [(not v) if isinstance(v, bool) else str(v) for v in key[2:-1]]
    return (key[0], key[1], *middle, key[-1])


def cell_table(rows: list[dict], fields: Sequence[str] = CELL_FIELDS,
               tolerance: float | None = None):
    """Per cell (``fields`` of the rows, the budget B last): the budgeted fit against the
    best method within B.

    Only seeds where the budgeted fit and every method ran are compared. A cell is
    ``undecided`` where the budgeted fit's excess minus ``tolerance`` (default
    :data:`TOLERANCE`) x the best method's, paired by seed, is within 2 standard
    errors of 0 (and the budgeted fit is not the best method's own fit): its seeds
    cannot tell whether it meets the bar; ``met`` is judged against the same factor.
    """
    tolerance = TOLERANCE if tolerance is None else tolerance
    cells = defaultdict(lambda: defaultdict(dict))
    for r in rows:
        cells[tuple(r[f] for f in fields)][r["method"]][r["seed"]] = r
    out = []
    for key, methods in sorted(cells.items(), key=lambda kv: _cell_order(kv[0])):
        if "budget" not in methods:
            continue
        sized = [m for m in methods if m != "budget"]
        seeds = sorted(set(methods["budget"]).intersection(
            *[set(methods[m]) for m in sized if m != "exact"]))
        if not seeds:
            continue
        mean = {m: float(np.mean([methods[m][s]["excess"] for s in seeds]))
                for m in methods if all(s in methods[m] for s in seeds)}
        secs = {m: float(np.mean([methods[m][s]["seconds"] for s in seeds])) for m in mean}
        words = {m: float(np.mean([methods[m][s]["fit_words"] for s in seeds])) for m in mean}
        best = min((m for m in mean if m != "budget"), key=mean.get)
        mine = mean["budget"]
        ratio = mine / mean[best] if mean[best] > 0 else float("inf")
        # the standard error of the difference of the two means (seeds are independent draws)
        spread = [np.var([methods[m][s]["excess"] for s in seeds], ddof=1) / len(seeds)
                  if len(seeds) > 1 else float("nan") for m in ("budget", best)]
        noise = float(np.sqrt(sum(spread)))
        met = mean[best] < AT_OPTIMUM or mine <= tolerance * mean[best]
        # Paired by seed: budgeted - tolerance x best, its mean against its standard error.
        gap = [methods["budget"][s]["excess"] - tolerance * methods[best][s]["excess"]
               for s in seeds]
        margin = (float(np.mean(gap) / (np.std(gap, ddof=1) / np.sqrt(len(seeds))))
                  if len(seeds) > 1 and np.std(gap) > 0 else float("inf"))
        same = all(methods["budget"][s]["excess"] == methods[best][s]["excess"] for s in seeds)
        chosen = defaultdict(int)
        for s in seeds:
            chosen[methods["budget"][s]["chosen"]] += 1
        over = [s for s in seeds if methods["budget"][s]["fit_words"] > key[-1]]
        out.append({"key": key, "seeds": seeds, "mean": mean, "seconds": secs, "words": words,
                    "best": best, "ratio": ratio, "met": met, "chosen": dict(chosen),
                    "noise": noise,
                    "undecided": not same and mean[best] >= AT_OPTIMUM and abs(margin) < 2,
                    "over": over,
                    "size": float(np.mean([methods["budget"][s]["n_landmarks"] for s in seeds]))})
    return out


def method_tag(name: str, rule: str, sampler: str) -> str:
    """The cache tag of a fit: the rule's fingerprint, the sampler's, or none."""
    return {"budget": rule, "diskpca (ridge)": sampler}.get(name, "")


def settings(datasets: Iterable[str], kernels: Sequence[str]) -> Iterator[tuple[str, str, bool]]:
    """The grid's (data, kernel, centred) settings: centred on every set, uncentred also
    on :data:`UNCENTRED`."""
    for dataset in datasets:
        for which in kernels:
            for centred in (True, False):
                if centred or dataset in UNCENTRED:
                    yield dataset, which, centred


class Cache:
    """The grid's fits on disk: one JSON line per fit, one file per (data, kernel, centring).

    Parameters
    ----------
    folder : Path
        The cache's folder (created if missing).
    """

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def _path(self, dataset, which, centred, setup=None) -> Path:
        where = setup if setup is not None else "centred" if centred else "uncentred"
        return self.folder / f"{dataset}_{which}_{where}.jsonl"

    def load(self, dataset: str, which: str, centred: bool, setup: str | None = None) -> dict:
        """The setting's fits by (budget, seed, method, tag); empty where none ran.

        ``setup``: the name of a set-up (``benchmarks/budget_setups.py``), which
        then names the file in place of the centring.
        """
        path = self._path(dataset, which, centred, setup)
        if not path.exists():
            return {}
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return {(r["budget"], r["seed"], r["method"], r.get("rule", "")): r for r in rows}

    def add(self, row: dict) -> None:
        """Append one fit (with keys dataset, kernel, centred, budget, seed, method, rule,
        and optionally setup)."""
        path = self._path(row["dataset"], row["kernel"], row["centred"], row.get("setup"))
        with open(path, "a") as handle:
            handle.write(json.dumps(row) + "\n")


def one_fit(parts: list, kernel: Kernel, ref: dict, budget: int, seed: int, center: bool,
            options: dict, n_components: int = K) -> dict | None:
    """``DistributedKernelPCA(n_components, max_words=budget, **options)`` on ``parts``,
    measured.

    Returns
    -------
    dict or None
        What it chose, its |Y|, fit words, seconds, error, excess against ``ref``
        (one centring of :func:`~kernelscale.bench.settings.references`) and the
        plan's reason; None where no fit is within the budget.
    """
    est = DistributedKernelPCA(n_components, max_words=budget, random_state=seed,
                               center=center, **kernel_options(kernel), **options)
    start = time.perf_counter()
    try:
        est.fit(parts)
    except WordBudgetError:
        return None
    seconds = time.perf_counter() - start
    err = distributed_error(LocalCluster(parts), est.model_,
                            ref["center_norm_sq"] if center else None)["error"]
    plan = est.budget_plan_
    return {"chosen": LABELS.get(est.method_, est.method_),
            "n_landmarks": int(est.model_.landmarks.shape[0])
            if hasattr(est.model_, "landmarks") else 0,
            "fit_words": est.communication_.total_words("fit"), "seconds": round(seconds, 3),
            "choosing_words": plan.choosing_words,
            "error": err, "excess": (err - ref["opt"]) / (ref["trace"] - ref["opt"]),
            "reason": plan.reason}


def largest_landmarks_within(forecast: Callable, budget: int, n_rows: Sequence[int], d: int,
                   kernel: Kernel) -> int | None:
    """The largest |Y| whose forecast is within ``budget`` (None below k).

    ``forecast(n_rows, d, k, n_y, kernel=, center=True)`` returns an object with
    ``words``; the search is a bisection over |Y| from k to n.
    """
    def words(size):
        return forecast(n_rows, d, K, size, kernel=kernel, center=True).words

    low, high = K, sum(n_rows)
    if words(low) > budget:
        return None
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if words(middle) <= budget else (low, middle - 1)
    return low


def measured_fit(fit: Callable, parts: list, ref: dict, *args, **options) -> tuple:
    """``fit(cluster, *args, **options)`` on a fresh in-process cluster of ``parts``,
    measured against ``ref`` (centred).

    Returns
    -------
    tuple
        (model, fit words, seconds, error, excess (err - opt) / (trace - opt)).
    """
    cluster = LocalCluster(parts)
    start = time.perf_counter()
    model = fit(cluster, *args, **options)
    seconds = time.perf_counter() - start
    err = distributed_error(LocalCluster(parts), model, ref["center_norm_sq"])["error"]
    return (model, cluster.ledger.total_words("fit"), seconds, err,
            (err - ref["opt"]) / (ref["trace"] - ref["opt"]))
