"""Figures and summary tables from a results CSV (the paper's Figures 2-7).

* ``error_vs_communication.png``: error (the excess ``(err - opt) / (trace - opt)``
  where the optimum is known, log scale, exact KPCA's excess 0 drawn as a vertical
  line at its words; a raw error or k-means objective whose means differ by under 50% as
  the percentage above the lowest mean, so small differences read as small) against fit words (PCA +
  k-means words downstream), mean and standard deviation over seeds, one line
  per method, one point per word budget B (per |Y| without word budgets).
* ``nmi_vs_words.png`` (downstream k-means with labels): NMI against words.
* ``time.png``: in-process fit seconds against the budget (exact KPCA, which has
  none, as a reference line with its words), or against the number of
  workers when the experiment sweeps it (Figure 7).
* ``summary.md``: one row per (method, budget, workers), means over seeds, and
  in a word sweep each method's best mean error within each B
  (:func:`best_within`).

The figures need matplotlib (the optional ``plot`` extra); the summary does not.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path

import numpy as np

EXACT_EXCESS = 1e-10  # |excess| below this: the exact optimum
NUMERIC = ("fit_words", "upload_words", "seconds", "parallel_seconds", "peak_mib", "error",
           "trace", "opt", "ratio", "excess", "n_landmarks", "kmeans_words", "total_words",
           "objective", "nmi")


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


def seeds_note(rows) -> str:
    """``'mean ± std over 10 seeds'``, or ``'one seed'`` when no point was repeated (a bar
    of zero height is no standard deviation)."""
    seeds = {len(g) for g in group(rows, ("method", "n_workers", sweep_key(rows))).values()}
    if max(seeds) == 1:
        return "one seed"
    count = str(max(seeds)) if len(seeds) == 1 else f"{min(seeds)}-{max(seeds)}"
    return f"mean ± std over {count} seeds"


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
    """``('excess', ...)`` when the optimum is known (the measure of the summaries'
    tables), else the raw error. A downstream k-means experiment: its objective.
    """
    if is_downstream(rows):
        return "objective", "k-means objective (feature space, mean per point)"
    if any(not math.isnan(r["excess"]) for r in rows):
        return "excess", "excess (err - opt) / (trace - opt)"
    return "error", "low-rank approximation error"


def is_downstream(rows) -> bool:
    """Whether the rows hold a downstream k-means (columns ``objective``, ``total_words``)."""
    return any(not math.isnan(r.get("objective", math.nan)) for r in rows)


def words_key(rows) -> str:
    """The x axis: ``total_words`` (fit + k-means) downstream, else ``fit_words``."""
    return "total_words" if is_downstream(rows) else "fit_words"


def sweep_key(rows) -> str:
    """What a curve's points are grouped by: ``max_words`` in a word sweep, else ``budget``."""
    return "max_words" if any(r.get("max_words") for r in rows) else "budget"


def best_within(rows, budgets, measure: str, cost: str | None = None) -> dict:
    """``{method: {B: (mean, std, |Y|, cost)}}``: each method's best mean ``measure``
    over its points (means over seeds) whose mean cost (words) is at most B.

    Parameters
    ----------
    rows : list of dict
        Rows of :func:`read_results` (one worker count).
    budgets : sequence of float
    measure : str
        Column to minimise (``'excess'``, ``'error'``, ``'objective'``).
    cost : str, optional
        Column the budgets bound: the fit's words by default (fit + k-means
        words for Figure 8); ``'seconds'`` compares methods at equal time.
    """
    words, key = cost or words_key(rows), sweep_key(rows)
    out: dict = {}
    for (label,), method_rows in group(rows, ("method",)).items():
        points = [(_stats(g, words)[0], *_stats(g, measure), _stats(g, "n_landmarks")[0])
                  for g in group(method_rows, (key,)).values()]
        out[label] = {}
        for budget in budgets:
            inside = [p for p in points if p[0] <= budget and not math.isnan(p[1])]
            if inside:
                w, mean, std, size = min(inside, key=lambda p: p[1])
                out[label][budget] = (mean, std, size, w)
    return out


MARKERS = "osD^vPX*h<>p"
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1)))


def line_style(i: int) -> dict:
    """Marker and line style of the i-th curve: no two of the first twelve alike, so
    curves stay apart in grey print and where colours are close."""
    return {"marker": MARKERS[i % len(MARKERS)], "linestyle": LINESTYLES[i % len(LINESTYLES)]}


def legend_outside(ax, **kwargs) -> None:
    """The legend to the right of the axes, where it can hide no point."""
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0,
              **kwargs)


def log_axis(ax, axis: str = "x") -> None:
    """A log axis whose tick labels cannot collide: over less than two decades, ticks at
    1, 2 and 5 times powers of ten in plain form (0.02, 500, 200k, 1M), no minor labels."""
    from matplotlib.ticker import EngFormatter, FuncFormatter, LogLocator, NullFormatter

    getattr(ax, f"set_{axis}scale")("log")
    target = ax.xaxis if axis == "x" else ax.yaxis
    lo, hi = (ax.get_xlim() if axis == "x" else ax.get_ylim())
    if lo > 0 and hi / lo < 100:
        large = EngFormatter(sep="")
        target.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        target.set_major_formatter(FuncFormatter(
            lambda v, pos: large(v, pos) if v >= 1000 else f"{v:g}"))
        target.set_minor_formatter(NullFormatter())


def relative_error(rows, measure: str) -> tuple[float, bool]:
    """``(lowest mean, as_percent)``: a raw error (or k-means objective) whose means
    differ by less than 50% is drawn as the percentage above the lowest mean of any
    method in the run (an offset axis would make 0.2% look like a cliff); wider ranges
    go on a log axis."""
    means = [_stats(g, measure)[0] for g in group(rows, ("method", "n_workers",
                                                         sweep_key(rows))).values()]
    means = [m for m in means if m > 0]
    if measure == "excess" or not means or max(means) / min(means) > 1.5:
        return math.nan, False
    return min(means), True


SECONDS_NOTE = ("in-process seconds: every worker's steps run in one process, one BLAS "
                "thread, on a shared 2-core machine")


def plot_results(csv_path, out_dir=None, title: str | None = None) -> list[Path]:
    """Draw the PNG figures for a results CSV; returns their paths."""
    plt = _import_pyplot()
    csv_path = Path(csv_path)
    out_dir = Path(out_dir) if out_dir is not None else csv_path.parent
    rows = read_results(csv_path)
    title = title or rows[0]["experiment"]
    measure, ylabel = error_measure(rows)
    workers = sorted({int(r["n_workers"]) for r in rows})
    words, key = words_key(rows), sweep_key(rows)
    # A sweep over workers: every worker count is a point (its words grow with s).
    shown = rows if len(workers) > 1 else [r for r in rows if int(r["n_workers"]) == workers[-1]]
    lowest, as_percent = relative_error(shown, measure)
    paths = []
    fig, ax = plt.subplots(figsize=(8.4, 4.2))
    for i, (label, method_rows) in enumerate(group(shown, ("method",)).items()):
        points = [(_stats(g, words), _stats(g, measure), int(g[0]["n_workers"]))
                  for g in group(method_rows, (key, "n_workers")).values()]
        points.sort(key=lambda p: p[0][0])
        if measure == "excess" and all(abs(p[1][0]) < EXACT_EXCESS for p in points):
            # exact KPCA: excess 0 has no place on a log axis; mark its words instead
            ax.axvline(points[0][0][0], color="k", linestyle=":",
                       label=f"{label[0]}: excess 0 at {points[0][0][0]:,.0f} words")
            continue
        name = label[0]
        if measure == "excess":
            exact = [p[0][0] for p in points if abs(p[1][0]) < EXACT_EXCESS]
            if exact:  # e.g. uniform + batch sampling every point
                name += f" (excess 0 at {min(exact):,.0f} words)"
            points = [p for p in points if p[1][0] >= EXACT_EXCESS]
        x = [p[0][0] for p in points]
        y = np.array([p[1][0] for p in points])
        err = np.array([p[1][1] for p in points])
        if as_percent:
            y, err = 100 * (y / lowest - 1), 100 * err / lowest
        # a symmetric std bar below a small mean would reach below 0 on a log axis
        lower = np.minimum(err, 0.9 * y) if measure == "excess" else err
        line = ax.errorbar(x, y, yerr=[lower, err], capsize=3, label=name, markersize=5,
                           **line_style(i))
        if len(workers) > 1:
            for xi, yi, p in zip(x, y, points, strict=True):
                ax.annotate(f"s={p[2]}", (xi, yi), textcoords="offset points",
                            xytext=(4, 4 if i % 2 == 0 else -10), fontsize=7,
                            color=line[0].get_color())
    log_axis(ax, "x")
    if as_percent:
        shown_lowest = f"{lowest:,.0f}" if lowest >= 1000 else f"{lowest:.4g}"
        ylabel = (f"{ylabel.split(' (')[0]}:\n% above the lowest mean "
                  f"({shown_lowest})")
        ax.set_ylim(bottom=min(0.0, ax.get_ylim()[0]))
        ax.yaxis.get_major_formatter().set_useOffset(False)
    else:
        log_axis(ax, "y")
    ax.set_xlabel("fit words, both directions" + (" (PCA + k-means)"
                                                    if words == "total_words" else ""))
    ax.set_ylabel(ylabel, fontsize=9)
    where = f"s = {workers[0]}..{workers[-1]} workers" if len(workers) > 1 \
        else f"s = {workers[-1]}"
    ax.set_title(f"{title}: {ylabel.split(' (')[0].split(':')[0]} vs words ({where}; "
                 f"{seeds_note(shown)})", fontsize=9)
    legend_outside(ax)
    paths.append(out_dir / "error_vs_communication.png")
    fig.savefig(paths[-1], dpi=120, bbox_inches="tight")
    plt.close(fig)
    if words == "total_words" and any(not math.isnan(r["nmi"]) for r in rows):
        paths.append(_plot_nmi(plt, rows, out_dir, title))
    paths.append(_plot_time(plt, rows, out_dir, title))
    return paths


def _plot_time(plt, rows, out_dir, title) -> Path:
    """``time.png``: in-process fit seconds against the budget (or the workers)."""
    workers = sorted({int(r["n_workers"]) for r in rows})
    key = sweep_key(rows)
    fig, ax = plt.subplots(figsize=(8.4, 4.2))
    if len(workers) > 1:
        for label, method_rows in group(rows, ("method",)).items():
            budget = max((r["budget"] for r in method_rows), key=lambda b: float(b or 0))
            by_w = group([r for r in method_rows if r["budget"] == budget], ("n_workers",))
            xs = sorted(by_w, key=lambda k: int(k[0]))
            stats = [_stats(by_w[w], "seconds") for w in xs]
            line = ax.errorbar([int(w[0]) for w in xs], [s[0] for s in stats],
                               yerr=[s[1] for s in stats], marker="o", capsize=3,
                               label=f"{label[0]}: in-process (workers in turn)")
            stats = [_stats(by_w[w], "parallel_seconds") for w in xs]
            ax.errorbar([int(w[0]) for w in xs], [s[0] for s in stats],
                        yerr=[s[1] for s in stats], marker="s", capsize=3, linestyle="--",
                        color=line[0].get_color(),
                        label=f"{label[0]}: modelled, master + slowest worker per round")
        ax.set_xlabel("number of workers s")
        ax.set_xscale("log")
        ax.set_xticks(workers, [str(w) for w in workers])
        ax.xaxis.set_minor_formatter(plt.NullFormatter())
        ax.set_title(f"{title}: fit seconds vs workers (one machine, shared 2-core, "
                     "1 BLAS thread)", fontsize=9)
        ax.set_ylabel("fit seconds")
    else:
        for i, (label, method_rows) in enumerate(group(rows, ("method",)).items()):
            by_b = group(method_rows, (key,))
            keys = sorted(by_b, key=lambda k: float(k[0] or 0))
            if len(keys) == 1 and not keys[0][0]:
                # exact KPCA has no budget: a reference line at its seconds, its true words said
                sec = _stats(by_b[keys[0]], "seconds")[0]
                words = _stats(by_b[keys[0]], words_key(rows))[0]
                if not math.isnan(sec):
                    ax.axhline(sec, color="k", linestyle=":",
                               label=f"{label[0]}: {sec:.2g} s, no budget "
                                     f"({words:,.0f} words)")
                continue
            stats = [_stats(by_b[b], "seconds") for b in keys]
            xs = [float(b[0]) if b[0] else _stats(by_b[b], "n_landmarks")[0] for b in keys]
            mean = np.array([s[0] for s in stats])
            std = np.array([s[1] for s in stats])
            ax.errorbar(xs, mean, yerr=[np.minimum(std, 0.9 * mean), std], capsize=3,
                        label=label[0], markersize=5, **line_style(i))
        ax.set_xlabel("word budget B (fit words)" if key == "max_words" else "|Y| (landmarks)")
        log_axis(ax, "x")
        ax.set_ylabel("fit seconds, in-process")
        ax.set_title(f"{title}: fit time ({SECONDS_NOTE})", fontsize=8)
    ax.set_yscale("log")
    legend_outside(ax)
    path = out_dir / "time.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def _plot_nmi(plt, rows, out_dir, title) -> Path:
    """``nmi_vs_words.png``: NMI of the k-means labels against total words (the std bar
    clipped to NMI's range [0, 1]). The axis starts at 0 and spans at least 0.1, so that
    NMIs that all sit near 0.01 (no method finds the classes) look alike rather than
    spread over an offset axis."""
    fig, ax = plt.subplots(figsize=(8.4, 4.2))
    top = 0.0
    for i, ((label,), method_rows) in enumerate(group(rows, ("method",)).items()):
        stats = sorted((_stats(g, "total_words")[0], *_stats(g, "nmi"))
                       for g in group(method_rows, (sweep_key(rows),)).values())
        y = np.array([p[1] for p in stats])
        err = np.array([p[2] for p in stats])
        upper = np.minimum(err, 1 - y)
        top = max(top, float(np.nanmax(y + upper)))
        ax.errorbar([p[0] for p in stats], y, yerr=[np.minimum(err, y), upper], capsize=3,
                    label=label, markersize=5, **line_style(i))
    ax.set_ylim(0.0, min(1.0, max(0.1, 1.15 * top)))
    log_axis(ax, "x")
    ax.set_xlabel("fit words, both directions (PCA + k-means)")
    ax.set_ylabel("NMI with the true classes")
    ax.set_title(f"{title}: NMI vs words ({seeds_note(rows)})", fontsize=9)
    legend_outside(ax)
    path = out_dir / "nmi_vs_words.png"
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


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
    key, downstream = sweep_key(rows), is_downstream(rows)
    extra = ["k-means words", "total words", "objective", "NMI"] if downstream else []
    head = ["method", "workers", "word budget B" if key == "max_words" else "budget", "|Y|",
            "fit words", "upload words", "seconds", "parallel s", "peak MiB", "error",
            "err/opt", "excess", *extra, "seeds"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (label, workers, sweep), g in group(rows, ("method", "n_workers", key)).items():
        cells = [label, workers, sweep or "-", _fmt(_stats(g, "n_landmarks")[0]),
                 _fmt(_stats(g, "fit_words")[0]), _fmt(_stats(g, "upload_words")[0]),
                 _fmt(*_stats(g, "seconds"), digits=3),
                 _fmt(_stats(g, "parallel_seconds")[0], digits=3),
                 _fmt(_stats(g, "peak_mib")[0], digits=4),
                 _fmt(*_stats(g, "error")), _fmt(*_stats(g, "ratio")), _fmt(*_stats(g, "excess"))]
        if downstream:
            cells += [_fmt(_stats(g, "kmeans_words")[0]), _fmt(_stats(g, "total_words")[0]),
                      _fmt(*_stats(g, "objective")), _fmt(*_stats(g, "nmi"), digits=3)]
        lines.append("| " + " | ".join(cells + [str(len(g))]) + " |")
    lines += ["", "Means over seeds (± standard deviation). Words are the ledger's fit phase; "
              "peak MiB is tracemalloc's peak during the fit (memory beyond the data); "
              "parallel s = master time + the slowest worker's step time per round (the wall "
              "time with one machine per worker; the in-process run is sequential). "
              "excess = (err - opt) / (trace - opt).", ""]
    if key == "max_words":
        lines += best_table(rows, meta.get("word_budgets") or sorted(
            {float(r["max_words"]) for r in rows if r["max_words"]}))
    path = out_dir / "summary.md"
    path.write_text("\n".join(lines))
    return path


def best_table(rows, budgets) -> list[str]:
    """Markdown: each method's best mean error (excess where known) within each word budget."""
    measure = ("objective" if is_downstream(rows) else
               "excess" if any(not math.isnan(r["excess"]) for r in rows) else "error")
    best = best_within(rows, budgets, measure)
    words = "total (PCA + k-means)" if measure == "objective" else "fit"
    lines = [f"## Best {measure} within B {words} words", "",
             f"Each method's lowest mean {measure} (± std over seeds) over its points whose "
             f"mean {words} words are at most B, with that point's |Y| in brackets; "
             "'-': the method cannot reach k components within B.", "",
             "| method | " + " | ".join(f"B = {b:.3g}" for b in budgets) + " |",
             "|---|" + "---|" * len(budgets)]
    for label, cells in best.items():
        lines.append(f"| {label} | " + " | ".join(
            f"{_fmt(cells[b][0], cells[b][1], 3)} ({cells[b][2]:.0f})" if b in cells else "-"
            for b in budgets) + " |")
    return lines + [""]
