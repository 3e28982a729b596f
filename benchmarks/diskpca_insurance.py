"""Paper 001, Figures 2 and 3, on its own data: the insurance set (CoIL 2000, 9,822 x 85).

    python benchmarks/diskpca_insurance.py                 # both kernels (about 30 minutes)
    python benchmarks/diskpca_insurance.py --summary-only  # summary.md and the figure from the CSVs
    python benchmarks/diskpca_insurance.py --quick         # a 2,000-point smoke run (seconds)

The paper's setting (Table 1, section 6.2): 5 workers with a power-law partition,
k = 10, the polynomial kernel (q = 4) and the RBF kernel (sigma = 0.2 x the median
pairwise distance), each feature standardised. Its experiments
``diskpca_insurance_poly`` and ``diskpca_insurance_rbf`` (:mod:`kernelscale.bench.experiments`)
run through the paper-001 harness: disKPCA (the ridge sampler, and the paper's sampler
with Gram and sketched messages), uniform + disLR and uniform + batch, each sized to the
same fit-word budgets, 5 seeds. Batch (exact) KPCA on all 9,822 points (a 0.77 GB
kernel matrix) runs once per kernel: its optimum and its fit time are cached under
``benchmarks/results/diskpca_insurance/refs/`` (the optimum in the format the harness
reads, keyed by the data's fingerprint).

Writes ``benchmarks/results/diskpca_insurance/summary.md`` (the paper's two claims of
section 6.3 with our numbers, held or not held) and ``figures2_3.png`` (error against
words and runtime against words, as the paper's Figures 2 and 3); the per-experiment
CSVs, summaries and plots go to ``benchmarks/results/diskpca_insurance_{poly,rbf}/``.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from kernelscale import horizontal
from kernelscale.backends.local import LocalCluster
from kernelscale.bench import (
    get_experiment,
    plot_results,
    read_results,
    resolve_kernel,
    run_experiment,
    write_summary,
)
from kernelscale.bench.plot import group
from kernelscale.bench.runner import fingerprint
from kernelscale.bench.scripts import verdict
from kernelscale.partition import make_partition, split

RESULTS = Path(__file__).parent / "results"
OUT = RESULTS / "diskpca_insurance"
KERNELS = {"poly": ("Figure 2", "polynomial (q = 4)"), "rbf": ("Figure 3", "RBF (0.2 x median)")}
# Paper 000 (section 6): "the error increases typically by less than 3%" over batch KPCA.
FEW_PERCENT = 1.03
SPEEDUP = 10.0       # "a speed up of 10x by using five workers"
EXCESS = 0.05        # the excess reading: at most 5% of the optimum's captured energy missed
DISKPCA = ("diskpca ridge (gram)", "diskpca paper (gram)", "diskpca paper (sketch)")
BASELINES = ("uniform + disLR", "uniform + batch")


def exact_cache(exp, X, kernel, refs: Path) -> dict:
    """Batch KPCA on all points, once: the optimum (harness format) and its fit seconds.

    The fit runs as the harness's exact KPCA (workers send all rows to the master,
    which builds the n x n kernel and its top-k eigenpairs by a dense ``eigh``),
    seed 0's partition, one BLAS thread as every run of the harness. A second
    timing, ``lanczos_seconds``, is the kernel matrix and its top-k eigenpairs by
    ARPACK (``eigsh``), the faster batch solver: the speed-up is reported against both.
    """
    cache = Path(exp.reference_cache + "_uncentred.npz")
    timing = Path(exp.reference_cache + "_exact.json")
    fp = fingerprint(X)
    if cache.exists() and timing.exists() and str(np.load(cache)["fingerprint"]) == fp:
        info = json.loads(timing.read_text())
    else:
        refs.mkdir(parents=True, exist_ok=True)
        idx = make_partition(X.shape[0], exp.workers[0], exp.partition, random_state=0)
        cluster = LocalCluster(split(X, idx))
        start = time.perf_counter()
        model = horizontal.exact_kpca(cluster, kernel, n_components=exp.n_components)
        seconds = time.perf_counter() - start
        parallel = seconds - sum(t.worker_seconds - t.slowest_worker_seconds
                                 for t in cluster.ledger.times("fit"))
        trace, opt = float(model.trace), float(model.trace - np.sum(model.eigenvalues))
        np.savez(cache, fingerprint=fp, trace=trace, opt=opt, center_norm_sq=math.nan)
        info = {"seconds": round(seconds, 3), "parallel_seconds": round(parallel, 3),
                "fit_words": cluster.ledger.total_words(phase="fit"), "trace": trace,
                "opt": opt, "n_samples": int(X.shape[0]), "blas_threads": 1}
    if "lanczos_seconds" not in info:
        from scipy.sparse.linalg import eigsh

        start = time.perf_counter()
        K = kernel(X, X)
        w = eigsh(K, k=exp.n_components, which="LA", return_eigenvectors=False,
                  v0=np.ones(K.shape[0]))
        info["lanczos_seconds"] = round(time.perf_counter() - start, 3)
        info["lanczos_opt"] = float(np.trace(K) - np.sum(w))
    timing.write_text(json.dumps(info, indent=2) + "\n")
    return info


def experiment(which: str, quick: bool):
    """The harness's experiment; a quick run keeps its own cache (another data fingerprint)."""
    exp = get_experiment(f"diskpca_insurance_{which}", quick=quick)
    if quick:
        exp = replace(exp, reference_cache=str(OUT / "quick" / "refs" / Path(
            exp.reference_cache).name))
    return exp


def run(which: str, quick: bool, rerun: bool) -> tuple[Path, dict]:
    exp = experiment(which, quick)
    out = RESULTS / exp.name / ("quick" if quick else "")
    X = exp.load_data()
    kernel = resolve_kernel(exp.kernel, X)
    with threadpool_limits(1):
        exact = exact_cache(exp, X, kernel, Path(exp.reference_cache).parent)
    csv = out / "results.csv"
    if rerun or not csv.exists():
        csv = run_experiment(exp, out, quiet=True)
    write_summary(csv)
    plot_results(csv)
    return csv, exact


# ----------------------------------------------------------------------------- analysis
def points(rows, method) -> list[dict]:
    """One point per word budget: means over seeds, sorted by fit words."""
    out = []
    for (budget,), g in group([r for r in rows if r["method"] == method], ("max_words",)).items():
        mean = {k: float(np.nanmean([r[k] for r in g])) for k in
                ("fit_words", "ratio", "excess", "seconds", "parallel_seconds", "n_landmarks")}
        out.append({"budget": budget, **mean, "seeds": len(g)})
    return sorted(out, key=lambda p: p["fit_words"])


def rows_seeds(rows) -> int:
    return len({r["seed"] for r in rows})


def claims(which: str, rows, exact: dict) -> list[str]:
    figure, label = KERNELS[which]
    lines = [f"## {figure}: {label}", "",
             f"Batch (exact) KPCA of all {exact['n_samples']:,} points: "
             f"{exact['seconds']:.1f} s in one process (one BLAS thread; the kernel matrix and "
             f"its top-10 eigenpairs by a dense eigh at the master), {exact['fit_words']:,} "
             f"fit words; optimum {exact['opt']:.6g} of trace {exact['trace']:.6g}. The same "
             f"with ARPACK (eigsh, top 10) in place of eigh: {exact['lanczos_seconds']:.1f} s.",
             "",
             "| method | B | |Y| | fit words | err / opt | excess | seconds | parallel s | "
             "batch s / parallel s | batch s / seconds |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for method in DISKPCA + BASELINES:
        for p in points(rows, method):
            lines.append(
                f"| {method} | {p['budget']} | {p['n_landmarks']:.0f} | {p['fit_words']:,.0f} | "
                f"{p['ratio']:.4f} | {p['excess']:.3g} | {p['seconds']:.3g} | "
                f"{p['parallel_seconds']:.3g} | {exact['seconds'] / p['parallel_seconds']:.1f} x"
                f" | {exact['seconds'] / p['seconds']:.1f} x |")
    lines += ["", f"Means over {rows_seeds(rows)} seeds. excess = (err - opt) / (trace - opt); "
              "parallel s = the master's time + the slowest worker's per round (one "
              "machine per worker); seconds = the whole fit in one process.", "",
              "Paper's claims (section 6.3):", ""]
    for method in DISKPCA:
        pts = points(rows, method)
        if not pts:
            continue
        good = [p for p in pts if p["ratio"] <= FEW_PERCENT]
        best = min(pts, key=lambda p: p["ratio"])
        if good:
            first = good[0]
            lines.append(
                f"* {method}, error within 3% of the optimum (err / opt <= "
                f"{FEW_PERCENT}): {verdict(True)} from {first['fit_words']:,.0f} fit words "
                f"(|Y| = {first['n_landmarks']:.0f}: err / opt = {first['ratio']:.4f}, excess "
                f"{first['excess']:.3g}); at the most words ({pts[-1]['fit_words']:,.0f}) "
                f"err / opt = {pts[-1]['ratio']:.4f}, excess {pts[-1]['excess']:.3g}.")
            tight = [p for p in pts if p["excess"] <= EXCESS]
            lines.append(
                f"* {method}, read by the excess instead (excess <= {EXCESS}: at most "
                f"{EXCESS:.0%} of the optimum's captured energy missed; stricter than err / "
                "opt where opt is most of the trace (RBF), looser where it is a small part "
                "(polynomial)): "
                + (f"{verdict(True)} from {tight[0]['fit_words']:,.0f} fit words (excess "
                   f"{tight[0]['excess']:.3g})." if tight else
                   f"{verdict(False)} (lowest excess {min(p['excess'] for p in pts):.3g})."))
            par = exact["seconds"] / first["parallel_seconds"]
            one = exact["seconds"] / first["seconds"]
            arpack = exact["lanczos_seconds"] / first["parallel_seconds"]
            lines.append(
                f"* {method}, 10x faster than batch KPCA on 5 workers at that error: "
                f"{verdict(par >= SPEEDUP)} with one machine per worker ({par:.1f} x: "
                f"{first['parallel_seconds']:.2f} s against {exact['seconds']:.1f} s); in one "
                f"process {one:.1f} x ({first['seconds']:.2f} s); against batch KPCA by ARPACK "
                f"({exact['lanczos_seconds']:.1f} s) {arpack:.1f} x with one machine per "
                f"worker, {exact['lanczos_seconds'] / first['seconds']:.1f} x measured in one "
                f"process: {verdict(arpack >= SPEEDUP)}. At its most words (excess "
                f"{pts[-1]['excess']:.3g}) {exact['seconds'] / pts[-1]['parallel_seconds']:.1f} "
                f"x, against ARPACK "
                f"{exact['lanczos_seconds'] / pts[-1]['parallel_seconds']:.1f} x.")
        else:
            lines.append(
                f"* {method}, error within 3% of the optimum: {verdict(False)} "
                f"(its best err / opt is {best['ratio']:.4f}, excess {best['excess']:.3g}, at "
                f"{best['fit_words']:,.0f} words); the speed-up claim has no setting to judge.")
    lines.append("")
    return lines


def summary(results: dict, quick: bool) -> str:
    lines = ["# Paper 001, Figures 2 and 3, on insurance (its own data)", ""]
    if quick:
        lines += ["**Quick smoke run** (2,000 points, one seed): not the committed numbers.", ""]
    lines += ["Produced by `python benchmarks/diskpca_insurance.py`. Insurance (CoIL 2000, "
              "9,822 x 85, each feature standardised), 5 power-law workers, k = 10, the "
              "paper's parameters (t = 50, p = 250, m = 2000), every method sized to the same "
              "fit-word budgets B (10^4 .. 10^6.5), one BLAS thread per process on a "
              "shared, loaded 2-core machine (seconds are noisy: compare within a row). "
              f"Paper 000's 'less than 3%' is read as err / opt <= {FEW_PERCENT}; the excess "
              "says how much of the best rank-10 subspace's energy is missed, which raw "
              "err / opt hides (opt is most of the trace). The speed-up is judged at the "
              "cheapest setting that meets the error claim. Figure: `figures2_3.png`; "
              "per-kernel tables, plots and CSVs: `diskpca_insurance_{poly,rbf}/`.", ""]
    if len(results) > 1:
        batch = [exact["seconds"] for _, exact in results.values()]
        lines += [f"Load: batch KPCA's dense eigh costs the same for both kernels, yet it took "
                  f"{' s and '.join(f'{b:.0f}' for b in batch)} s: the shared machine's load "
                  f"moved single timings by up to {max(batch) / min(batch):.1f}x, so a "
                  "speed-up far from 10x is a verdict, one near it is not.", ""]
    for which, (rows, exact) in results.items():
        lines += claims(which, rows, exact)
    return "\n".join(lines) + "\n"


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(results), figsize=(6.6 * len(results), 11.0), squeeze=False)
    for j, (which, (rows, exact)) in enumerate(results.items()):
        figure, label = KERNELS[which]
        err_ax, time_ax = axes[0, j], axes[1, j]
        fastest = math.inf
        for method, marker in zip(DISKPCA + BASELINES, "os^Dv", strict=True):
            pts = [p for p in points(rows, method) if p["excess"] > 0]
            if not pts:
                continue
            xs = [p["fit_words"] for p in pts]
            line, = err_ax.plot(xs, [p["excess"] for p in pts], marker=marker, label=method)
            time_ax.plot(xs, [p["parallel_seconds"] for p in pts], marker=marker,
                         color=line.get_color(), label=f"{method}, parallel")
            time_ax.plot(xs, [p["seconds"] for p in pts], marker=marker, linestyle=":",
                         color=line.get_color(), alpha=0.6)
            fastest = min(fastest, *(p["parallel_seconds"] for p in pts),
                          *(p["seconds"] for p in pts))
        err_ax.axvline(exact["fit_words"], color="k", linestyle="--",
                       label=f"batch KPCA (excess 0) at {exact['fit_words']:,} words")
        time_ax.axhline(exact["seconds"], color="k", linestyle="--",
                        label=f"batch KPCA, one process ({exact['seconds']:.0f} s)")
        time_ax.axhline(exact["seconds"] / SPEEDUP, color="gray", linestyle="-.",
                        label="batch / 10 (the paper's claim)")
        if "lanczos_seconds" in exact:
            time_ax.axhline(exact["lanczos_seconds"], color="k", linestyle=":",
                            label=f"batch KPCA by ARPACK ({exact['lanczos_seconds']:.0f} s)")
        err_ax.set(xscale="log", yscale="log", xlabel="fit words (both directions)",
                   ylabel="excess (err - opt) / (trace - opt)",
                   title=f"{figure}(a) on insurance: {label}, error")
        time_ax.set(xscale="log", yscale="log", xlabel="fit words (both directions)",
                    ylabel="fit seconds",
                    title=f"{figure}(b): runtime (solid: one machine per worker; "
                          "dotted: one process)")
        time_ax.title.set_fontsize(9)
        # every point shown, the cheapest fits included; the legends go below the axes
        time_ax.set_ylim(fastest / 2, exact["seconds"] * 2)
        err_ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
        time_ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000-point smoke run")
    parser.add_argument("--summary-only", action="store_true",
                        help="summary and figure from the CSVs and the cached batch KPCA")
    parser.add_argument("--rerun", action="store_true", help="rerun the sweeps even if cached")
    parser.add_argument("--kernels", nargs="+", choices=list(KERNELS), default=list(KERNELS))
    args = parser.parse_args(argv)
    out = OUT / "quick" if args.quick else OUT
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for which in args.kernels:
        if args.summary_only:
            exp = experiment(which, args.quick)
            csv = RESULTS / exp.name / ("quick" if args.quick else "") / "results.csv"
            exact = json.loads(Path(exp.reference_cache + "_exact.json").read_text())
        else:
            csv, exact = run(which, args.quick, args.rerun)
        results[which] = (read_results(csv), exact)
    plot(results, out / "figures2_3.png")
    text = summary(results, args.quick)
    (out / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
