"""Figures and summary tables from a results CSV (the paper's Figures 2-7).

* ``error_vs_communication.png``: error (``err/opt`` where the optimum is known)
  against fit words, mean and standard deviation over seeds, one line per method.
* ``time.png``: fit seconds against the budget, or against the number of
  workers when the experiment sweeps it (Figure 7).
* ``summary.md``: one row per (method, budget, workers), means over seeds.

The figures need matplotlib (the optional ``plot`` extra); the summary does not.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

NUMERIC = ("fit_words", "upload_words", "seconds", "parallel_seconds", "peak_mib", "error",
           "trace", "opt", "ratio", "excess", "n_landmarks")


def read_results(path) -> list[dict]:
    """Rows of a results CSV with numeric fields as floats (NaN where empty)."""
    with Path(path).open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        for key in NUMERIC:
            value = row.get(key, "")
            row[key] = float(value) if value not in ("", None) else math.nan
    return rows


def group(rows: list[dict], keys: tuple) -> dict:
    """``{key tuple: [rows]}`` in first-seen order."""
    groups: dict = defaultdict(list)
    for row in rows:
        groups[tuple(row[k] for k in keys)].append(row)
    return groups


def _stats(rows, key) -> tuple[float, float]:
    values = np.array([r[key] for r in rows], dtype=float)
    if np.all(np.isnan(values)):
        return math.nan, math.nan
    return float(np.nanmean(values)), float(np.nanstd(values))


def _import_pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise ImportError(
            "Plotting needs matplotlib: pip install 'kernelscale[plot]' (or matplotlib). "
            "The CSV and summary.md were written without it.") from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def error_measure(rows) -> tuple[str, str]:
    """``('ratio', 'err / opt')`` when the optimum is known, else the raw error."""
    if any(not math.isnan(r["ratio"]) for r in rows):
        return "ratio", "low-rank error / optimum"
    return "error", "low-rank approximation error"


def plot_results(csv_path, out_dir=None, title: str | None = None) -> list[Path]:
    """Draw the PNG figures for a results CSV; returns their paths."""
    plt = _import_pyplot()
    csv_path = Path(csv_path)
    out_dir = Path(out_dir) if out_dir is not None else csv_path.parent
    rows = read_results(csv_path)
    title = title or rows[0]["experiment"]
    measure, ylabel = error_measure(rows)
    paths = []
    max_workers = max(int(r["n_workers"]) for r in rows)
    fig, ax = plt.subplots(figsize=(6, 4.2))
    for label, method_rows in group([r for r in rows if int(r["n_workers"]) == max_workers],
                                    ("method",)).items():
        points = [(_stats(g, "fit_words"), _stats(g, measure))
                  for g in group(method_rows, ("budget",)).values()]
        points.sort(key=lambda p: p[0][0])
        x = [p[0][0] for p in points]
        y = np.array([p[1][0] for p in points])
        err = np.array([p[1][1] for p in points])
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label[0])
    ax.set_xscale("log")
    values = [r[measure] for r in rows if r[measure] > 0]
    if values and max(values) / min(values) > 20:
        ax.set_yscale("log")
    ax.set_xlabel("communication (words, both directions)")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{title}: error vs communication (s={max_workers})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out_dir / "error_vs_communication.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)

    workers = sorted({int(r["n_workers"]) for r in rows})
    fig, ax = plt.subplots(figsize=(6, 4.2))
    if len(workers) > 1:
        for label, method_rows in group(rows, ("method",)).items():
            budget = max((r["budget"] for r in method_rows), key=lambda b: float(b or 0))
            by_w = group([r for r in method_rows if r["budget"] == budget], ("n_workers",))
            xs = sorted(by_w, key=lambda k: int(k[0]))
            stats = [_stats(by_w[w], "seconds") for w in xs]
            line = ax.errorbar([int(w[0]) for w in xs], [s[0] for s in stats],
                               yerr=[s[1] for s in stats], marker="o", capsize=3,
                               label=f"{label[0]} (in-process, sequential)")
            stats = [_stats(by_w[w], "parallel_seconds") for w in xs]
            ax.errorbar([int(w[0]) for w in xs], [s[0] for s in stats],
                        yerr=[s[1] for s in stats], marker="s", capsize=3, linestyle="--",
                        color=line[0].get_color(),
                        label=f"{label[0]} (master + slowest worker per round)")
        ax.set_xlabel("number of workers")
        ax.set_xscale("log")
        ax.set_title(f"{title}: runtime vs workers")
    else:
        for label, method_rows in group(rows, ("method",)).items():
            by_b = group(method_rows, ("budget",))
            keys = sorted(by_b, key=lambda k: float(k[0] or 0))
            stats = [_stats(by_b[b], "seconds") for b in keys]
            xs = [float(b[0]) if b[0] else _stats(by_b[b], "n_landmarks")[0] for b in keys]
            ax.errorbar(xs, [s[0] for s in stats], yerr=[s[1] for s in stats], marker="o",
                        capsize=3, label=label[0])
        ax.set_xlabel("|Y| (landmarks; n for exact methods)")
        ax.set_xscale("log")
        ax.set_title(f"{title}: fit time")
    ax.set_ylabel("seconds")
    ax.set_yscale("log")
    ax.legend(fontsize=8)
    fig.tight_layout()
    paths.append(out_dir / "time.png")
    fig.savefig(paths[-1], dpi=120)
    plt.close(fig)
    return paths


def _fmt(mean: float, std: float | None = None, digits: int = 4) -> str:
    if math.isnan(mean):
        return ""
    text = f"{mean:.{digits}g}"
    return text if std is None or math.isnan(std) else f"{text} ± {std:.2g}"


def write_summary(csv_path, out_dir=None) -> Path:
    """``summary.md``: means (± std over seeds) per method, budget and workers."""
    csv_path = Path(csv_path)
    out_dir = Path(out_dir) if out_dir is not None else csv_path.parent
    rows = read_results(csv_path)
    meta_path = csv_path.parent / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    lines = [f"# {rows[0]['experiment']}", ""]
    if meta:
        lines += [meta.get("description", ""), "",
                  f"n = {meta['n_samples']}, d = {meta['n_features']}"
                  f"{' (sparse CSR)' if meta.get('sparse') else ''}, kernel = "
                  f"{json.dumps(meta['kernel'])}, k = {meta['n_components']}, partition = "
                  f"{meta['partition']}, centred = {meta['center']}.", ""]
    lines += ["| method | workers | budget | |Y| | fit words | upload words | seconds | "
              "parallel s | peak MiB | error | err/opt | excess | seeds |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (label, workers, budget), g in group(rows, ("method", "n_workers", "budget")).items():
        lines.append("| " + " | ".join([
            label, workers, budget or "-", _fmt(_stats(g, "n_landmarks")[0]),
            _fmt(_stats(g, "fit_words")[0]), _fmt(_stats(g, "upload_words")[0]),
            _fmt(*_stats(g, "seconds"), digits=3), _fmt(_stats(g, "parallel_seconds")[0], digits=3),
            _fmt(_stats(g, "peak_mib")[0], digits=4),
            _fmt(*_stats(g, "error")), _fmt(*_stats(g, "ratio")), _fmt(*_stats(g, "excess")),
            str(len(g))]) + " |")
    lines += ["", "Means over seeds (± standard deviation). Words are the ledger's fit phase; "
              "peak MiB is tracemalloc's peak during the fit (memory beyond the data); "
              "parallel s = master time + the slowest worker's step time per round (the wall "
              "time with one machine per worker; the in-process run is sequential). "
              "excess = (err - opt) / (trace - opt).", ""]
    path = out_dir / "summary.md"
    path.write_text("\n".join(lines))
    return path
