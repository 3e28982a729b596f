"""The report of the landmark-sampler benchmark (``benchmarks/sampler.py``): equal-words verdicts.

The benchmark fits disKPCA with its two samplers and the uniform baselines at
several |Y| each; this module reads its CSV files back and writes its
``summary.md``: each method's mean error at its mean words against a baseline's
mean error interpolated log-log at the same words (:func:`at_words`,
:func:`verdict`), then why the paper's sampler loses (its leverage stage's words,
an ablation at equal |Y|, per-point diagnostics). The method names and the |Y| of
disKPCA are defined here, as the tables are keyed by them.

>>> curve = [(50, 1e3, 0.4, 0.02, 5), (100, 1e5, 0.004, 0.0002, 5)]  # (|Y|, words, mean, std, n)
>>> round(at_words(curve, 1e4)[0], 6)  # halfway in log words: halfway in log error
0.04
>>> ratio, mark = verdict((200, 1e4, 0.02, 0.001, 5), curve)  # half the error, same words
>>> round(ratio, 6), mark
(0.5, 'W')
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from kernelscale.bench.settings import KERNEL_LABELS

__all__ = ["ABLATION", "DATASETS", "DISKPCA_BUDGETS", "K", "KERNELS", "MAIN", "TIE", "at_words",
           "curves", "read_results", "summary", "verdict"]

#: Components of every fit.
K = 10
#: The data sets and kernels (:mod:`kernelscale.bench.settings`), in the tables' order.
DATASETS = ("digits", "spam", "satellite", "letter")
KERNELS = ("rbf0.2", "rbf1.0", "poly", "arccos")
#: The |Y| of both disKPCA samplers (the verdicts are read at these).
DISKPCA_BUDGETS = (50, 100, 200, 400)
#: The methods compared at equal words, and the ablation of the paper's sampler (equal |Y|).
MAIN = ("diskpca (ridge)", "diskpca (paper)", "uniform + disLR", "uniform + batch")
ABLATION = ("uniform P + adaptive", "uniform P + ridge, 1 round")
TIE = 0.10  # "never clearly worse": within 10% of the baseline, or within 2 standard errors


def curves(rows: list[dict]) -> dict:
    """Each method's error-against-words curve in each setting, over the seeds.

    Parameters
    ----------
    rows : list of dict
        The fits (``results.csv``): ``dataset``, ``kernel``, ``centred``, ``method``,
        ``n_landmarks``, ``fit_words`` and ``excess``.

    Returns
    -------
    dict
        ``{(dataset, kernel, centred): {method: [(|Y|, words, excess, std, n), ...]}}``:
        per |Y|, the mean fit words, the mean and standard deviation of the excess
        and the number of seeds, |Y| ascending.
    """
    acc = defaultdict(list)
    for r in rows:
        acc[(r["dataset"], r["kernel"], r["centred"], r["method"], r["n_landmarks"])].append(
            (r["fit_words"], r["excess"]))
    out = defaultdict(lambda: defaultdict(list))
    for (ds, kn, c, m, b), v in sorted(acc.items()):
        v = np.array(v, dtype=float)
        out[(ds, kn, c)][m].append((b, v[:, 0].mean(), v[:, 1].mean(), v[:, 1].std(),
                                    len(v)))
    return out


def at_words(curve: list[tuple], words: float) -> tuple[float, float]:
    """A curve's mean excess and its standard deviation at ``words``.

    Parameters
    ----------
    curve : list of tuple
        ``(|Y|, words, excess, std, n)`` points, as in :func:`curves`.
    words : float
        Where to read the curve.

    Returns
    -------
    tuple of float
        The mean excess, interpolated log-log, and the standard deviation,
        interpolated linearly in log words; NaN outside the curve's words.
    """
    pts = sorted(curve, key=lambda t: t[1])
    x = np.log([t[1] for t in pts])
    if not x[0] - 1e-9 <= np.log(words) <= x[-1] + 1e-9:
        return float("nan"), float("nan")
    y = np.log(np.maximum([t[2] for t in pts], 1e-12))
    return (float(np.exp(np.interp(np.log(words), x, y))),
            float(np.interp(np.log(words), x, [t[3] for t in pts])))


def verdict(point: tuple, baseline: list[tuple]) -> tuple[float, str]:
    """A point's error against a baseline's at the same words.

    Parameters
    ----------
    point : tuple
        ``(|Y|, words, excess, std, n)`` of one method (as in :func:`curves`).
    baseline : list of tuple
        The baseline's curve, read at the point's words by :func:`at_words`.

    Returns
    -------
    ratio : float
        The point's mean excess over the baseline's (NaN outside its words).
    mark : str
        ``'W'`` (win) or ``'L'`` (loss): more than :data:`TIE` better or worse and
        more than 2 standard errors apart; ``'T'`` otherwise; ``'-'`` outside.
    """
    _, words, excess, std, n = point
    ref, ref_std = at_words(baseline, words)
    if ref != ref:
        return float("nan"), "-"
    ratio = excess / max(ref, 1e-12)
    significant = abs(excess - ref) > 2 * math.hypot(std / math.sqrt(n), ref_std / math.sqrt(n))
    if ratio > 1 + TIE and significant:
        return ratio, "L"
    if ratio < 1 - TIE and significant:
        return ratio, "W"
    return ratio, "T"


def _fmt_ratio(ratio, mark):
    if ratio != ratio:
        return "-"
    text = f"{ratio:.2f}" if ratio >= 0.01 else f"{ratio:.0e}"
    return f"{text} {mark}"


def summary(rows: list[dict], diagnostics: list[dict], seeds: list[int],
            elapsed: float | None) -> str:
    """The benchmark's ``summary.md``.

    Parameters
    ----------
    rows : list of dict
        The fits (``results.csv``).
    diagnostics : list of dict
        The per-point diagnostics (``diagnostics.csv``; empty: no such table).
    seeds : list of int
        The seeds of the run.
    elapsed : float or None
        The run's seconds, or None (a summary rebuilt from the CSV files).

    Returns
    -------
    str
        The Markdown text.
    """
    cs = curves(rows)
    lines = ["# disKPCA's samplers at equal words on real data", "",
             "Produced by `python benchmarks/sampler.py`"
             + (f" in {elapsed / 60:.1f} min" if elapsed else "") + "; "
             f"{len(seeds)} seeds ({', '.join(map(str, seeds))}); k = {K}; power-law workers "
             "(5 on digits, 10 on the UCI sets); every feature standardised. Error: the "
             "excess-energy ratio (err - opt) / (trace - opt) on the training data against "
             "the exact optimum (benchmarks/results/sampler/refs). Words: "
             "`ledger.total_words('fit')`, both directions, every model broadcast included.", "",
             "Equal words: a method's mean error at its mean words divided by the baseline's "
             "mean error interpolated log-log at the same words (`-`: outside the baseline's "
             "range). W / L: more than 10% better / worse and more than 2 standard errors "
             "apart; T otherwise (a tie).", ""]
    lines += _verdict_tables(cs)
    lines += _why_section(cs, rows, diagnostics)
    lines += ["## Every point: error against words", "",
              "| data | kernel | centred | method | |Y| | fit words | excess (mean +- std) |",
              "|---|---|---|---|---|---|---|"]
    for (ds, kn, c), methods in sorted(cs.items()):
        for m in MAIN + ABLATION:
            for b, words, ex, sd, _ in methods.get(m, []):
                lines.append(f"| {ds} | {KERNEL_LABELS[kn]} | {'yes' if c else 'no'} | {m} | "
                             f"{b} | {words:,.0f} | {ex:.4f} +- {sd:.4f} |")
    return "\n".join(lines) + "\n"


def _verdict_tables(cs) -> list[str]:
    out = ["## Verdict at equal words", "",
           "Ratios at |Y| = " + ", ".join(map(str, DISKPCA_BUDGETS)) + " of disKPCA "
           "(below 1: lower error than the baseline with the same words).", "",
           "| data | kernel | centred | ridge / uniform+disLR | paper / uniform+disLR | "
           "ridge / uniform+batch | paper / uniform+batch | paper / ridge | "
           "uniform+disLR / uniform+batch |",
           "|---|---|---|---|---|---|---|---|---|"]
    tally = defaultdict(lambda: defaultdict(int))
    by_kernel = defaultdict(lambda: defaultdict(int))
    losses = defaultdict(list)
    marks = {}
    for (ds, kn, c), methods in sorted(cs.items()):
        cells = []
        for m, base in (("diskpca (ridge)", "uniform + disLR"),
                        ("diskpca (paper)", "uniform + disLR"),
                        ("diskpca (ridge)", "uniform + batch"),
                        ("diskpca (paper)", "uniform + batch"),
                        ("diskpca (paper)", "diskpca (ridge)"),
                        ("uniform + disLR", "uniform + batch")):
            if m not in methods or base not in methods:
                cells.append("-")
                continue
            parts = []
            for point in methods[m]:
                if m == "uniform + disLR" and point[0] not in DISKPCA_BUDGETS:
                    continue
                ratio, mark = verdict(point, methods[base])
                parts.append(_fmt_ratio(ratio, mark))
                tally[(m, base)][mark] += 1
                marks[(m, base, ds, kn, c, point[0])] = mark
                if m == "diskpca (ridge)":
                    by_kernel[(base, kn)][mark] += 1
                    if mark == "L":
                        losses[base].append(f"{ds}, {KERNEL_LABELS[kn]}"
                                            f"{', centred' if c else ''}, |Y| = {point[0]}: "
                                            f"{ratio:.2f}")
            cells.append(", ".join(parts))
        out.append(f"| {ds} | {KERNEL_LABELS[kn]} | {'yes' if c else 'no'} | "
                   + " | ".join(cells) + " |")
    out += ["", "Counts over every data set, kernel, centring and |Y| "
            "(W win, T tie, L loss, - outside the baseline's word range):", "",
            "| comparison | W | T | L | - |", "|---|---|---|---|---|"]
    for (m, base), t in tally.items():
        out.append(f"| {m} vs {base} | {t['W']} | {t['T']} | {t['L']} | {t['-']} |")
    batch_losses = [key for key, mark in marks.items()
                     if key[:2] == ("diskpca (ridge)", "uniform + batch") and mark == "L"]
    shared = sum(marks.get(("uniform + disLR", "uniform + batch", *key[2:])) == "L"
                 for key in batch_losses)
    out += ["", f"Of the default sampler's {len(batch_losses)} losses to uniform + batch, "
            f"{shared} are losses of uniform + disLR too (last column): with "
            "low-dimensional points, shipping more uniform points to the master costs fewer "
            "words than disLR's s |Y|(|Y|+1)/2 Gram upload, whatever the sampler (the "
            "budget feature of issue 11, part 5, chooses between the methods).", "",
            "The default sampler by kernel (W / T / L over data sets, centring and |Y|):", "",
            "| kernel | vs uniform + disLR | vs uniform + batch |", "|---|---|---|"]
    for kn in KERNELS:
        cells = [" / ".join(str(by_kernel[(base, kn)][mark]) for mark in "WTL")
                 for base in ("uniform + disLR", "uniform + batch")]
        if any(by_kernel[(base, kn)] for base in ("uniform + disLR", "uniform + batch")):
            out.append(f"| {KERNEL_LABELS[kn]} | {cells[0]} | {cells[1]} |")
    for base in ("uniform + disLR", "uniform + batch"):
        found = losses[base]
        out += ["", f"Where the default sampler loses to {base} ({len(found)}): "
                + ("; ".join(found) if found else "nowhere") + "."]
    return out + [""]


def _why_section(cs, rows, diagnostics) -> list[str]:
    out = ["## Why the paper's sampler loses", "",
           "**Words.** The leverage stage (embedding Gram up, triangular factor down, "
           "config) is a fixed cost per worker, s (t(t+1)/2 + t(t+1)/2 + ~13) words with "
           "t = 50; the ridge sampler replaces it by 14 words per worker (RBF; 4 more "
           "per extra round). Share of the paper sampler's fit words (mean over kernels "
           "and centring):", "",
           "| data | " + " | ".join(f"|Y| = {b}" for b in DISKPCA_BUDGETS) + " |",
           "|---|" + "---|" * len(DISKPCA_BUDGETS)]
    share = defaultdict(list)
    for r in rows:
        if r["method"] == "diskpca (paper)":
            share[(r["dataset"], r["n_landmarks"])].append(r["leverage_words"] / r["fit_words"])
    for ds in DATASETS:
        if any(k[0] == ds for k in share):
            out.append(f"| {ds} | " + " | ".join(
                f"{np.mean(share[(ds, b)]):.0%}" if share[(ds, b)] else "-"
                for b in DISKPCA_BUDGETS) + " |")
    out += ["", "**Sampling at equal |Y|** (no word counted): each sampler's mean error over "
            "uniform + disLR's at the same |Y|, uncentred. 'uniform P + adaptive' is the "
            "paper's Algorithm 2 with its |P| = ceil(2 k ln k) points drawn uniformly "
            "instead of by leverage score; '+ ridge, 1 round' also replaces the residual by "
            "the ridge residual; 'diskpca (ridge)' is the default (RBF: |Y|/4 uniform, two "
            "ridge rounds; polynomial and arc-cosine: k uniform, then doubling rounds by "
            "the plain residual).", "",
            "| data | kernel | method | " + " | ".join(f"|Y| = {b}" for b in DISKPCA_BUDGETS)
            + " |", "|---|---|---|" + "---|" * len(DISKPCA_BUDGETS)]
    for (ds, kn, c), methods in sorted(cs.items()):
        if c or "uniform + disLR" not in methods or ABLATION[0] not in methods:
            continue
        uniform = {b: ex for b, _, ex, _, _ in methods["uniform + disLR"]}
        for m in ("diskpca (paper)",) + ABLATION + ("diskpca (ridge)",):
            by_budget = {b: ex for b, _, ex, _, _ in methods.get(m, [])}
            out.append(f"| {ds} | {KERNEL_LABELS[kn]} | {m} | " + " | ".join(
                f"{by_budget[b] / uniform[b]:.2f}" if b in by_budget and uniform.get(b)
                else "-" for b in DISKPCA_BUDGETS) + " |")
    if diagnostics:
        out += ["", "**Per-point diagnostics** (uncentred, |Y| = 200, against the exact "
                "spectrum). 'isolated': the 10% of points with the smallest kernel degree; "
                "their share of the top-k energy and of the trace; the share of each "
                "sample drawn from them (uniform: 0.10). n lev_k / k: mean rank-k leverage "
                "of the sampled points, 1 for a uniform sample. rho: Spearman correlation "
                "of the paper's embedding leverage scores with the exact rank-k and ridge "
                "leverage scores (lambda = opt / k). spread: std / mean of the exact ridge "
                "leverage (0 = uniform).", "",
                "| data | kernel | isolated: top-k energy | trace | P (paper) | Y~ (paper) | "
                "ridge rounds | uniform | n lev_k/k: P (paper) | Y~ (paper) | ridge | "
                "rho(rank-k) | rho(ridge) | ridge spread |",
                "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for d in diagnostics:
            out.append(
                f"| {d['dataset']} | {KERNEL_LABELS[d['kernel']]} | "
                f"{d['isolated_energy_share']:.4f} | {d['isolated_trace_share']:.3f} | "
                f"{d['P (paper): isolated']:.3f} | {d['Y~ (paper): isolated']:.3f} | "
                f"{d['ridge rounds: isolated']:.3f} | {d['uniform: isolated']:.3f} | "
                f"{d['P (paper): n lev_k / k']:.2f} | {d['Y~ (paper): n lev_k / k']:.2f} | "
                f"{d['ridge rounds: n lev_k / k']:.2f} | {d['rho_k']:.2f} | "
                f"{d['rho_ridge']:.2f} | {d['ridge_lev_spread']:.2f} |")
    return out + [""]


def read_results(folder: Path) -> tuple[list[dict], list[dict]]:
    """The rows of a run's ``results.csv`` and ``diagnostics.csv``, typed as it wrote them.

    Parameters
    ----------
    folder : Path
        The run's output folder.

    Returns
    -------
    rows, diagnostics : list of dict
        ``'True'`` and ``'False'`` read as booleans, numbers as int or float (int
        where written without a point); ``diagnostics`` is empty where the run
        wrote none.
    """

    def typed(value):
        if value in ("True", "False"):
            return value == "True"
        try:
            number = float(value)
        except ValueError:
            return value
        return int(number) if number.is_integer() and "." not in value else number

    rows = [{k: typed(v) for k, v in r.items()}
            for r in csv.DictReader(open(folder / "results.csv"))]
    path = folder / "diagnostics.csv"
    diagnostics = ([{k: typed(v) for k, v in r.items()} for r in csv.DictReader(open(path))]
                   if path.exists() else [])
    return rows, diagnostics

