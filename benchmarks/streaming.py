"""Benchmark: streaming kernel PCA (paper 004): SKPCA against RNCA and streaming Nystrom.

    python benchmarks/streaming.py            # the real run (several minutes)
    python benchmarks/streaming.py --quick    # a small smoke run
    python benchmarks/streaming.py --plot-only   # redraw the PNGs from the CSVs

Writes CSV, PNG and ``summary.md`` under ``benchmarks/results/streaming/``:

* Figures 1-3 of 004 in spirit: kernel spectral error ``||G - G'||_2 / n``, kernel
  Frobenius error ``||G - G'||_F / n^2``, train time and test time per point
  against the sample size (m random features or c samples) and the space in
  words (m d + m l, m^2 + m d, c^2 + c d), for SKPCA with l in {2, 5, 10, 20, 30,
  50}, RNCA and Nystrom, on the paper's RandomNoisy (A = S D U + F / zeta,
  s = 50, zeta = 10; 5000 x 1000 here, 20000 x 1000 in the paper) and on
  scikit-learn's digits (standardised). RBF kernel, sigma = median pairwise
  distance; the errors are over 2000 training points (all of digits' training
  points); the test time is over a held-out set (1000 points, 300 for digits).
* Train time against n at m = c = 1000 (and n = 20000 at m = 2000) on a Gaussian
  mixture with d = 28: the RNCA / SKPCA train-time ratio, measured in one run.
* A 10-million-row generated stream (d = 28) through SKPCA, against 1 million:
  peak traced memory (tracemalloc) and peak RSS (getrusage), each in a fresh
  process.

Every method is fed mini-batches of 1000 rows; train time includes the final
eigendecomposition (RNCA, Nystrom) or SVD of the sketch (SKPCA). BLAS runs on
one thread for every method (threaded OpenBLAS on a loaded shared machine makes
timings noise).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
from streaming_shared.sweep import curve_style, seconds_per_query, sweep, timed_train
from threadpoolctl import threadpool_limits

from kernelscale.bench import write_rows
from kernelscale.bench.plot import log_axis
from kernelscale.bench.scripts import read_rows
from kernelscale.datasets import iter_gaussian_mixture, load_digits_standardized, make_random_noisy
from kernelscale.kernels import median_heuristic
from kernelscale.streaming import SKPCA

OUT = Path(__file__).parent / "results" / "streaming"
def scaling(ns, sizes, seed=0):
    """Train time against n (d = 28 mixture), SKPCA l in {10, 20}, RNCA, Nystrom."""
    rows = []
    for size, n_list in sizes:
        for n in n_list:
            X = np.concatenate(list(iter_gaussian_mixture(n, 28, random_state=seed)))
            gamma = 1.0 / (2 * median_heuristic(X, scale=1.0, random_state=seed) ** 2)
            for method, l in [("skpca", 10), ("skpca", 20), ("rnca", None), ("nystrom", None)]:
                t, model = timed_train(method, 28, size, l, gamma, seed, X)
                rows.append({"method": method, "sketch_size": l or "", "sample_size": size,
                             "n": n, "train_s": t, "test_s_per_point": seconds_per_query(model, X)})
                print(f"  scaling m={size} n={n} {method} l={l}: {t:.2f}s", flush=True)
    return rows


def memory_run(n, m, l, chunk):
    """One SKPCA pass over a generated d = 28 stream of n rows (run in a fresh process)."""
    tracemalloc.start()
    gamma = 1.0 / 28
    model = SKPCA(28, m, l, gamma=gamma, seed=0, chunk_size=chunk)
    start = time.perf_counter()
    for block in iter_gaussian_mixture(n, 28, random_state=1, chunk_size=chunk):
        model.partial_fit(block)
    model.eigen()
    elapsed = time.perf_counter() - start
    _, peak = tracemalloc.get_traced_memory()
    rss_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"n": n, "m": m, "l": l, "chunk": chunk, "seconds": elapsed,
            "points_per_s": n / elapsed, "tracemalloc_peak_mib": peak / 2**20,
            "max_rss_mib": rss_kib / 1024, "sketch_words": model.sketch.size_words,
            "n_samples_seen": model.n_samples_seen}


def memory(ns, m, l, chunk):
    rows = []
    for n in ns:
        out = subprocess.run(
            [sys.executable, __file__, "--memory-run", str(n), str(m), str(l), str(chunk)],
            check=True, capture_output=True, text=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"  memory n={n:,}: {rows[-1]}", flush=True)
    return rows


#: The sweep's two figures: the errors against sample size and space, then the times.
FIGURES = {
    "error_vs_size.png": [("sample_size", "spectral_error"), ("space_words", "spectral_error"),
                          ("sample_size", "frobenius_error"),
                          ("space_words", "frobenius_error")],
    "time_vs_size.png": [("sample_size", "train_s"), ("sample_size", "test_s_per_point")],
}
AXIS_LABELS = {
    "sample_size": "sample size (m features or c samples)",
    "space_words": "space (words held)",
    "spectral_error": "spectral error ||G - G'||_2 / n",
    "frobenius_error": "Frobenius error ||G - G'||_F / n^2",
    "train_s": "train seconds (in-process)",
    "test_s_per_point": "test seconds per point",
}


def plot_sweep(rows, out):
    """The figures of :data:`FIGURES` in ``out``."""
    for filename, panels in FIGURES.items():
        _plot_panels(rows, panels, out / filename)


def _plot_panels(rows, panels, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    datasets = sorted({r["dataset"] for r in rows})
    ls = sorted({int(r["sketch_size"]) for r in rows if r["method"] == "skpca"})
    fig, axes = plt.subplots(len(datasets), len(panels), figsize=(4.6 * len(panels),
                                                                  3.7 * len(datasets) + 0.8),
                             layout="constrained")
    axes = np.atleast_2d(axes)
    for i, name in enumerate(datasets):
        sub = [r for r in rows if r["dataset"] == name]
        labels = sorted({r["label"] for r in sub}, key=lambda s: (s.startswith("SKPCA"),
                        int(s.split("=")[1]) if "=" in s else 0, s))
        for j, (x, y) in enumerate(panels):
            ax = axes[i, j]
            values = [r[y] for r in sub]
            # An exact fit (Nystrom with c = n) has an error at machine precision: drawn at
            # the panel's floor with its value written, not at 1e-18 squashing the rest.
            # It is not joined to its curve: a line down to the floor would read as a
            # sudden drop of the error, which the axis cannot show.
            floor = min(v for v in values if v > 1e-9 * max(values)) / 3
            for label in labels:
                pts = sorted((r[x], r[y]) for r in sub if r["label"] == label)
                style = curve_style(label, ls)
                inexact = [p for p in pts if p[1] >= floor]
                ax.plot([p[0] for p in inexact], [p[1] for p in inexact], label=label, ms=4,
                        **style)
                for xv, yv in pts:
                    if yv < floor:
                        ax.plot([xv], [floor], marker=style["marker"], ms=7, linestyle="none",
                                markerfacecolor="none", color=style["color"])
                        ax.annotate(f"exact fit ({yv:.0e}),\ndrawn at the floor", (xv, floor),
                                    fontsize=9, xytext=(-165, 2), textcoords="offset points",
                                    va="bottom", arrowprops={"arrowstyle": "->", "lw": 0.8})
            log_axis(ax, "x")
            log_axis(ax, "y")
            ax.set_xlabel(AXIS_LABELS[x], fontsize=10)
            ax.set_ylabel(AXIS_LABELS[y], fontsize=10)
            against = "space" if x == "space_words" else "sample size"
            ax.set_title(f"{name}: {AXIS_LABELS[y].split(' ||')[0].split(' (')[0]} vs "
                         f"{against}", fontsize=11)
    handles, names = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, names, loc="outside lower center", ncol=(len(names) + 1) // 2,
               fontsize=11)
    what = ("error" if "error" in panels[0][1] else "train and test time")
    fig.suptitle(f"Streaming kernel PCA (004, Figures 1-3): {what} against sample size"
                 + (" and space" if what == "error" else "; seconds in-process, one BLAS "
                    "thread, shared 2-core machine"), fontsize=12)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def plot_scaling(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.6))
    size = min(r["sample_size"] for r in rows)
    for method, l in [("skpca", 10), ("skpca", 20), ("rnca", ""), ("nystrom", "")]:
        pts = sorted((r["n"], r["train_s"]) for r in rows if r["method"] == method
                     and r["sketch_size"] == l and r["sample_size"] == size)
        ax.plot(*zip(*pts, strict=True), "-o", label=f"{method} {l and f'l={l}'}")
    log_axis(ax, "x")
    log_axis(ax, "y")
    ns = sorted({r["n"] for r in rows if r["sample_size"] == size})
    ax.set_xticks(ns, [f"{n // 1000}k" for n in ns])
    ax.set_xlabel("n (d = 28)")
    ax.set_ylabel("train seconds (in-process, 1 BLAS thread)")
    ax.set_title(f"train time, m = c = {size} (shared 2-core machine)", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    # One BLAS thread for every method: on a shared machine threaded OpenBLAS stalls
    # unpredictably (up to 100x on small products), which would make timings noise.
    with threadpool_limits(1, user_api="blas"):
        run(argv)


def run(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--memory-run", nargs=4, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw the PNG files from the CSV files already written")
    args = parser.parse_args(argv)
    if args.memory_run:
        print(json.dumps(memory_run(*args.memory_run)))
        return
    if args.plot_only:
        plot_sweep(read_rows(OUT / "error_vs_size.csv"), OUT)
        plot_scaling(read_rows(OUT / "train_time_scaling.csv"), OUT / "train_time_scaling.png")
        return
    OUT.mkdir(parents=True, exist_ok=True)
    q = args.quick
    ls = [2, 5, 10, 20] if q else [2, 5, 10, 20, 30, 50]
    sizes = [20, 50, 100] if q else [50, 100, 200, 500, 1000, 2000]
    noisy = make_random_noisy(600 if q else 5000, 100 if q else 1000, random_state=0)
    Xd, _ = load_digits_standardized()
    perm = np.random.default_rng(0).permutation(len(Xd))
    Xd = Xd[perm]
    print("error sweep", flush=True)
    rows = sweep("RandomNoisy", noisy[: -200 if q else -1000], noisy[-200 if q else -1000 :],
                 sizes, ls, 300 if q else 2000)
    rows += sweep("digits", Xd[:-300], Xd[-300:], sizes, ls, 300 if q else 1497)
    write_rows(OUT / "error_vs_size.csv", rows)
    plot_sweep(rows, OUT)
    print("train time scaling", flush=True)
    plan = [(200, [2000, 4000])] if q else [(1000, [5000, 10000, 20000, 40000]), (2000, [20000])]
    srows = scaling(None, plan)
    write_rows(OUT / "train_time_scaling.csv", srows)
    plot_scaling(srows, OUT / "train_time_scaling.png")
    mrows = []
    if not args.skip_memory:
        print("memory", flush=True)
        mrows = memory([100_000, 300_000] if q else [1_000_000, 10_000_000], 128, 16, 10_000)
        write_rows(OUT / "memory.csv", mrows)
    write_summary(rows, srows, mrows, q)


def write_summary(rows, srows, mrows, quick):
    lines = ["# Streaming kernel PCA benchmark (paper 004)", ""]
    if quick:
        lines += ["**Quick smoke run** (small sizes); not the committed numbers.", ""]
    lines += ["Produced by `python benchmarks/streaming.py`. Errors are ||G - G'||_2 / n "
              "and ||G - G'||_F / n^2 on training points; times are wall-clock on a shared "
              "2-core machine (one BLAS thread for every method), measured side by side in "
              "one run. Full numbers: the CSV files; plots: the PNG files.", "",
              "## Error, space and test time at the largest sample size", "",
              "| dataset | method | m or c | space (words) | spectral | Frobenius | train (s) "
              "| test (ms/point) |", "|---|---|---|---|---|---|---|---|"]
    top = max(r["sample_size"] for r in rows)
    for r in rows:
        if r["sample_size"] == top and (r["method"] != "skpca" or r["sketch_size"] in (10, 20, 50)):
            lines.append(f"| {r['dataset']} | {r['label']} | {r['sample_size']} | "
                         f"{r['space_words']:,} | {r['spectral_error']:.4f} | "
                         f"{r['frobenius_error']:.2e} | {r['train_s']:.2f} | "
                         f"{1e3 * r['test_s_per_point']:.3f} |")
    lines += ["", "## Train time: RNCA / SKPCA in the same run", "",
              "| m | n | SKPCA l=10 (s) | SKPCA l=20 (s) | RNCA (s) | Nystrom (s) "
              "| RNCA / SKPCA l=20 | test ms/pt SKPCA l=20 / RNCA / Nystrom |",
              "|---|---|---|---|---|---|---|---|"]
    for key in sorted({(r["sample_size"], r["n"]) for r in srows}):
        get = {(r["method"], r["sketch_size"]): r for r in srows
               if (r["sample_size"], r["n"]) == key}
        s10, s20, rn, ny = (get[("skpca", 10)], get[("skpca", 20)], get[("rnca", "")],
                            get[("nystrom", "")])
        lines.append(f"| {key[0]} | {key[1]:,} | {s10['train_s']:.2f} | {s20['train_s']:.2f} | "
                     f"{rn['train_s']:.2f} | {ny['train_s']:.2f} | "
                     f"{rn['train_s'] / s20['train_s']:.1f}x | "
                     f"{1e3 * s20['test_s_per_point']:.3f} / {1e3 * rn['test_s_per_point']:.3f}"
                     f" / {1e3 * ny['test_s_per_point']:.3f} |")
    if mrows:
        lines += ["", "## Memory over a generated stream (d = 28, SKPCA m = 128, l = 16)", "",
                  "| rows | seconds | points/s | tracemalloc peak (MiB) | max RSS (MiB) "
                  "| sketch words |", "|---|---|---|---|---|---|"]
        for r in mrows:
            lines.append(f"| {r['n']:,} | {r['seconds']:.1f} | {r['points_per_s']:,.0f} | "
                         f"{r['tracemalloc_peak_mib']:.1f} | {r['max_rss_mib']:.1f} | "
                         f"{r['sketch_words']:,} |")
    (OUT / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
