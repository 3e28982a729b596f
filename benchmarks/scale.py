"""disKPCA at scale: 1M x 28 over 50 power-law workers, the sparse bag-of-words
stand-in, and a side-by-side comparison with scikit-learn's KernelPCA at n = 20,000.

    python benchmarks/scale.py            # the full run (several minutes)
    python benchmarks/scale.py --quick    # a smoke run (seconds)
    python benchmarks/scale.py --plot-only [--out DIR]   # redraw scale.png from DIR/scale.csv
    python benchmarks/scale.py --n-dense 10000000 --skip-sparse --skip-sklearn

The dense case runs the estimator defaults (ridge sampler, gram messages) on
float64 data and on the same data in float32 (float32 partitions: float32
kernel blocks, Gram and residuals summed in float64), each with every
``--jobs`` value (``LocalCluster(n_jobs)``). Each fit's rounds are set against
their arithmetic floor, measured in the same run: the same-shaped GEMMs, RBF
blocks (a clip and the exponentials) and products (G k(S,A) of the ridge
residuals, a GEMM; the Gram k(Y,A) k(A,Y) of disLR, a SYRK) over
the same row chunks of the same partitions, timed by themselves on as many
threads as the fit had (``round_floor``; the faster of a run just before the
fit and one just after); rounds without kernel blocks have
none. The default sampler evaluates no random features (no cosines): the
paper's sampler (``sampler='paper'``) is not timed here.

Writes ``benchmarks/results/scale/{scale.csv, rounds.csv, summary.md, scale.png}``.
Memory is tracemalloc's peak during the fit (allocations beyond the data
already held) and the process's maximum resident set size.
"""

from __future__ import annotations

import argparse
import csv
import resource
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from kernelscale.backends.local import LocalCluster, effective_n_jobs
from kernelscale.bench.plot import log_axis
from kernelscale.bench.runner import check_gram_entries, exact_reference
from kernelscale.bench.scripts import read_rows
from kernelscale.datasets import make_gaussian_mixture, make_sparse_bow
from kernelscale.horizontal import diskpca, distributed_error
from kernelscale.horizontal.samplers import ridge_schedule
from kernelscale.kernels import DEFAULT_CHUNK_SIZE, make_kernel, median_heuristic
from kernelscale.linalg import projected_sq_norms
from kernelscale.metrics.lowrank import excess_energy_ratio
from kernelscale.partition import make_partition, split
from kernelscale.runtime.chunks import chunk_bounds
from kernelscale.runtime.cluster import one_blas_thread

COLUMNS = ("case", "method", "dtype", "n_jobs", "n_samples", "n_features", "nnz", "n_workers",
           "n_landmarks", "seconds", "floor_seconds", "fit_over_floor", "peak_fit_mib",
           "max_rss_mib", "data_mib", "fit_words", "raw_point_words", "excess", "error")
ROUND_COLUMNS = ("case", "dtype", "n_jobs", "round", "seconds", "floor_seconds",
                 "fit_over_floor")
PAPER = {"embedding_dim": 50, "row_sketch_dim": 250, "n_random_features": 2000}
DISLR_ROUND = "disLR: k(Y,A_i) k(A_i,Y)"


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def data_mib(X) -> float:
    if sp.issparse(X):
        return (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20
    return X.nbytes / 2**20


def power_law_parts(X, n_workers, seed=0) -> list:
    return split(X, make_partition(X.shape[0], n_workers, "power_law", random_state=seed))


def fit_diskpca(parts, kernel, n_landmarks, seed=0, n_jobs=None, **options) -> tuple:
    cluster = LocalCluster(parts, n_jobs=n_jobs)
    tracemalloc.start()
    tracemalloc.reset_peak()
    start = time.perf_counter()
    model = diskpca(cluster, kernel, 10, n_landmarks, random_state=seed, **PAPER, **options)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    cluster.close()
    return model, cluster, seconds, peak


def rbf_block(rows, S_aug, gamma):
    """exp(-gamma ||x - s||^2) for a chunk of rows: one GEMM, a clip and the exponentials.

    ``S_aug = [s, -gamma ||s||^2, 1]``, so that ``[2 gamma x, 1, -gamma ||x||^2]``
    against it is the exponent (the fewest passes over the block).
    """
    rows_aug = np.empty((rows.shape[0], S_aug.shape[1]), dtype=S_aug.dtype)
    np.multiply(rows, 2.0 * gamma, out=rows_aug[:, :-2])
    rows_aug[:, -2] = 1.0
    rows_aug[:, -1] = -gamma * np.einsum("ij,ij->i", rows, rows)
    exponent = rows_aug @ S_aug.T
    np.minimum(exponent, 0.0, out=exponent)
    return np.exp(exponent, out=exponent)


def residual_chunk(rows, S_aug, gamma, factor):
    """A ridge-residual chunk's arithmetic: the RBF block, k(a, S) G^T (a GEMM), the norms."""
    return projected_sq_norms(rbf_block(rows, S_aug, gamma), factor)


def gram_chunk(rows, S_aug, gamma, _):
    """A disLR chunk's arithmetic: the RBF block and its Gram (numpy's SYRK)."""
    block = rbf_block(rows, S_aug, gamma)
    return block.T @ block


def round_floor(parts, gamma, n_points, work, n_jobs, chunk=DEFAULT_CHUNK_SIZE) -> float:
    """Seconds of ``work`` over every row chunk of every partition, on ``n_jobs`` threads.

    ``n_points`` landmarks (the first rows of the data) and a random triangular
    factor of the partitions' dtype: the values do not change the arithmetic.
    """
    dtype = parts[0].dtype
    S = np.vstack([p[:n_points] for p in parts[:n_points]])[:n_points]
    S_aug = np.hstack([S, -gamma * np.einsum("ij,ij->i", S, S)[:, None],
                       np.ones((n_points, 1))]).astype(dtype)
    factor = np.triu(np.random.default_rng(0).standard_normal((n_points, n_points)))
    factor = factor.astype(dtype)  # G.T, as the workers apply it
    tasks = [(p, a, b) for p in parts for a, b in chunk_bounds(p.shape[0], chunk)]
    jobs = effective_n_jobs(n_jobs)
    with one_blas_thread(), ThreadPoolExecutor(jobs) as pool:
        start = time.perf_counter()
        for _ in pool.map(lambda t: work(t[0][t[1]:t[2]], S_aug, gamma, factor), tasks):
            pass
        return time.perf_counter() - start


def floors(parts, kernel, n_landmarks, n_jobs) -> dict[str, float]:
    """The arithmetic floor of each round that evaluates kernel blocks (default sampler)."""
    targets = ridge_schedule(kernel, 10, n_landmarks)
    out = {f"ridge sampling {j}: residuals": round_floor(parts, kernel.gamma, n_points,
                                                         residual_chunk, n_jobs)
           for j, n_points in enumerate(targets[:-1], start=1)}
    out[DISLR_ROUND] = round_floor(parts, kernel.gamma, targets[-1], gram_chunk, n_jobs)
    return out


def dense_case(n, n_workers, n_landmarks, jobs, dtypes, log) -> tuple[list, list]:
    start = time.perf_counter()
    X = make_gaussian_mixture(n, 28, random_state=0)
    log(f"dense {n} x 28 generated in {time.perf_counter() - start:.1f} s")
    kernel = make_kernel("rbf", sigma=median_heuristic(X, random_state=0))
    parts64 = power_law_parts(X, n_workers)
    mib = data_mib(X)
    del X  # the workers' partitions are the only copy of the data from here on
    rows, round_rows = [], []
    for dtype in dtypes:
        parts = parts64 if dtype == "float64" else [p.astype(dtype) for p in parts64]
        for n_jobs in jobs:
            row, per_round = dense_fit(parts, kernel, n, n_landmarks, n_jobs, log)
            rows.append({**row, "data_mib": round(mib * np.dtype(dtype).itemsize / 8, 1)})
            round_rows += per_round
        del parts
    return rows, round_rows


def dense_fit(parts, kernel, n, n_landmarks, n_jobs, log) -> tuple[dict, list]:
    """One fit of the estimator defaults, then its rounds' floors (same partitions, threads)."""
    dtype = str(parts[0].dtype)
    before = floors(parts, kernel, n_landmarks, n_jobs)
    model, cluster, seconds, peak = fit_diskpca(parts, kernel, n_landmarks, n_jobs=n_jobs)
    after = floors(parts, kernel, model.landmarks.shape[0], n_jobs)
    # The machine's load drifts: the floor is the faster of a run before and one after.
    floor = {name: min(before[name], after[name]) for name in after}
    case = f"dense {n:,} x 28"
    per_round = [{"case": case, "dtype": dtype, "n_jobs": n_jobs, "round": name,
                  "seconds": round(t["wall"] + t["master"], 3),
                  "floor_seconds": round(floor.get(name, 0.0), 3),
                  "fit_over_floor": ratio(t["wall"] + t["master"], floor.get(name))}
                 for name, t in cluster.ledger.seconds_by_round().items()]
    total_floor = sum(floor.values())
    row = {"case": case, "method": "diskpca (defaults)", "dtype": dtype, "n_jobs": n_jobs,
           "n_samples": n, "n_features": 28, "nnz": "", "n_workers": len(parts),
           "n_landmarks": model.landmarks.shape[0], "seconds": round(seconds, 2),
           "floor_seconds": round(total_floor, 2), "fit_over_floor": ratio(seconds, total_floor),
           "peak_fit_mib": round(peak, 1), "max_rss_mib": round(max_rss_mib(), 1),
           "fit_words": cluster.ledger.total_words(),
           "raw_point_words": cluster.ledger.total_words(kind="raw_points")}
    log(f"  {dtype} n_jobs={n_jobs}: fit {seconds:.1f} s, floor {total_floor:.1f} s "
        f"({row['fit_over_floor']}x), peak {peak:.0f} MiB beyond the data")
    return row, per_round


def ratio(seconds, floor) -> float | str:
    return round(seconds / floor, 2) if floor else ""


def sparse_case(n, d, n_workers, n_landmarks, chunk_size, n_jobs, log) -> dict:
    start = time.perf_counter()
    X = make_sparse_bow(n, d, nnz_per_row=100, random_state=0)
    log(f"sparse {n} x {d} (nnz {X.nnz:,}) generated in {time.perf_counter() - start:.1f} s")
    kernel = make_kernel("poly", degree=4, gamma=1.0, coef0=1.0)
    model, cluster, seconds, peak = fit_diskpca(power_law_parts(X, n_workers), kernel,
                                                n_landmarks, n_jobs=n_jobs,
                                                chunk_size=chunk_size)
    Y = model.landmarks
    assert sp.issparse(Y), "sampled sparse points must travel and stay as CSR"
    raw = cluster.ledger.total_words(kind="raw_points")
    # A chunk densified over all d columns would alone take chunk_size * d * 8 bytes.
    dense_chunk_mib = chunk_size * d * 8 / 2**20
    assert peak < dense_chunk_mib, (
        f"peak {peak:.0f} MiB >= one densified {chunk_size}-row chunk ({dense_chunk_mib:.0f} MiB)")
    log(f"  fit {seconds:.1f} s, peak {peak:.0f} MiB (a dense {chunk_size}-row chunk: "
        f"{dense_chunk_mib:.0f} MiB); Y is CSR with nnz {Y.nnz}")
    return {"case": f"sparse bow {n:,} x {d:,}", "method": "diskpca (defaults), poly q=4",
            "dtype": "float64", "n_jobs": n_jobs, "n_samples": n, "n_features": d,
            "nnz": X.nnz, "n_workers": n_workers,
            "n_landmarks": Y.shape[0], "seconds": round(seconds, 2),
            "peak_fit_mib": round(peak, 1), "max_rss_mib": round(max_rss_mib(), 1),
            "data_mib": round(data_mib(X), 1), "fit_words": cluster.ledger.total_words(),
            "raw_point_words": raw}


def sklearn_case(n, n_workers, n_landmarks, jobs, dtypes, log) -> list[dict]:
    from sklearn.decomposition import KernelPCA

    X = make_gaussian_mixture(n, 28, random_state=0)
    kernel = make_kernel("rbf", sigma=median_heuristic(X, random_state=0))
    start = time.perf_counter()
    reference = exact_reference(X, kernel, 10, center=True)  # also checks sampled K entries
    log(f"sklearn comparison: exact centred reference in {time.perf_counter() - start:.1f} s")
    # The SYRK hazard check: one large block against direct dot products.
    block = make_kernel("linear")(X[:20000], X[:20000])
    check_gram_entries(X[:20000], block, n_checks=5000)
    del block
    rows = []
    start = time.perf_counter()
    Z = KernelPCA(10, kernel="rbf", gamma=kernel.gamma, eigen_solver="randomized",
                  random_state=0).fit_transform(X)
    seconds = time.perf_counter() - start
    err = reference["trace"] - float(np.sum(Z**2))
    rows.append({"case": f"dense {n:,} x 28, centred", "method": "sklearn KernelPCA (randomized)",
                 "dtype": "float64", "n_jobs": 1, "n_samples": n, "n_features": 28,
                 "n_workers": 1, "n_landmarks": n,
                 "seconds": round(seconds, 2), "error": err,
                 "excess": excess_energy_ratio(err, reference["opt"], reference["trace"])})
    parts64 = power_law_parts(X, n_workers)
    for dtype, n_jobs in [(d, j) for d in dtypes for j in jobs]:
        parts = parts64 if dtype == "float64" else [p.astype(dtype) for p in parts64]
        rows.append(centred_fit(parts, kernel, n_landmarks, n_jobs, reference))
        log(f"  sklearn {rows[0]['seconds']} s (excess {rows[0]['excess']:.4f}), disKPCA "
            f"{dtype} n_jobs={n_jobs} {rows[-1]['seconds']} s (excess {rows[-1]['excess']:.4f})")
    return rows


def centred_fit(parts, kernel, n_landmarks, n_jobs, reference) -> dict:
    model, cluster, seconds, peak = fit_diskpca(parts, kernel, n_landmarks, center=True,
                                                n_jobs=n_jobs)
    err = distributed_error(cluster, model, reference["center_norm_sq"])["error"]
    n = sum(p.shape[0] for p in parts)
    return {"case": f"dense {n:,} x 28, centred", "method": "diskpca (defaults)",
            "dtype": str(parts[0].dtype), "n_jobs": n_jobs, "n_samples": n, "n_features": 28,
            "n_workers": len(parts), "n_landmarks": model.landmarks.shape[0],
            "seconds": round(seconds, 2), "peak_fit_mib": round(peak, 1),
            "fit_words": cluster.ledger.total_words(), "error": err,
            "excess": excess_energy_ratio(err, reference["opt"], reference["trace"])}


def write_outputs(rows, round_rows, out_dir: Path, threads) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_csv(out_dir / "scale.csv", COLUMNS, rows)
    write_csv(out_dir / "rounds.csv", ROUND_COLUMNS, round_rows)
    lines = ["# disKPCA at scale", "",
             f"One process on the shared 2-core machine (BLAS threads = {threads} outside the "
             "workers; each worker thread runs one); disKPCA with the estimator defaults "
             "(ridge sampler, gram messages), k = 10, |Y| = 400, power-law partitions. "
             "dtype: the partitions' (float32: float32 kernel blocks, sums in float64). "
             "floor: the fit's kernel blocks and products timed by themselves in the same "
             "run, on as many threads, the faster of a run just before and one just after "
             "the fit (benchmarks/scale.py, `round_floor`). The default sampler evaluates "
             "no random features, so no cosines enter the floor.", "",
             "| case | method | dtype | n_jobs | workers | |Y| | seconds | floor s | fit / floor "
             "| peak fit MiB | max RSS MiB | data MiB | fit words | raw-point words | excess |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        excess = r.get("excess", "")
        lines.append(f"| {r['case']} | {r['method']} | {r['dtype']} | {r['n_jobs']} | "
                     f"{r['n_workers']} | {r['n_landmarks']} | {r['seconds']} | "
                     f"{r.get('floor_seconds', '')} | {r.get('fit_over_floor', '')} | "
                     f"{r.get('peak_fit_mib', '')} | {r.get('max_rss_mib', '')} | "
                     f"{r.get('data_mib', '')} | {r.get('fit_words', '')} | "
                     f"{r.get('raw_point_words', '')} | "
                     f"{excess if excess == '' else f'{excess:.4f}'} |")
    lines += round_table(round_rows) + sklearn_lines(rows)
    lines += ["", "seconds of a round: its wall time plus the master's work before it. peak fit "
              "MiB: tracemalloc's peak during the fit (beyond the data; the workers' state of "
              "all 50 workers together, as they share one process). max RSS MiB: the "
              "process's maximum resident set so far (cases run in table order). excess = "
              "(err - opt) / (trace - opt) against the exact centred optimum.", ""]
    (out_dir / "summary.md").write_text("\n".join(lines))
    plot(rows, out_dir)


def write_csv(path: Path, columns, rows) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)


def round_table(round_rows) -> list[str]:
    if not round_rows:
        return []
    lines = ["", "## Rounds against their floor", "",
             "| case | dtype | n_jobs | round | seconds | floor s | fit / floor |",
             "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['dtype']} | {r['n_jobs']} | {r['round']} | {r['seconds']} | "
              f"{r['floor_seconds'] or ''} | {r['fit_over_floor']} |" for r in round_rows]
    return lines


def sklearn_lines(rows) -> list[str]:
    sk = [r for r in rows if r["method"].startswith("sklearn")]
    if not sk:
        return []
    ours = [r for r in rows if r["case"] == sk[0]["case"] and r is not sk[0]]
    lines = ["", f"Speed ratio scikit-learn / disKPCA at n = {sk[0]['n_samples']:,} (same run; "
             "scikit-learn on one BLAS thread, the SYRK hazard forbids two):", ""]
    lines += [f"- {r['dtype']}, n_jobs = {r['n_jobs']}: {sk[0]['seconds'] / r['seconds']:.1f}x "
              f"({sk[0]['seconds']} s / {r['seconds']} s)" for r in ours]
    return lines


def plot(rows, out_dir: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no scale.png", file=sys.stderr)
        return
    # Points, not bars: a bar's length on a log axis depends on where the axis starts.
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(rows) + 1.2))
    labels = [f"{r['case']}\n{r['method']} {r['dtype']} n_jobs={r['n_jobs']}" for r in rows]
    y = np.arange(len(rows))[::-1]
    for yi, r in zip(y, rows, strict=True):
        ax.plot([r["seconds"]], [yi], "o" if r["dtype"] == "float64" else "s",
                color="C1" if r["method"].startswith("sklearn") else "C0", markersize=6)
        ax.annotate(f"{r['seconds']:g} s", (r["seconds"], yi), xytext=(6, -3),
                    textcoords="offset points", fontsize=7)
    ax.set_yticks(y, labels)
    ax.grid(axis="y", linestyle=":", linewidth=0.6)
    ax.margins(x=0.1, y=0.5 / len(rows))
    log_axis(ax, "x")
    lo, hi = ax.get_xlim()
    ax.set_xlim(lo / 1.3, hi * 1.6)  # room for the values' labels
    ax.set_xlabel("fit seconds (wall clock, one process, shared 2-core machine)")
    ax.set_title("circles: float64, squares: float32; orange: scikit-learn", fontsize=8)
    ax.tick_params(axis="y", labelsize=6)
    fig.tight_layout()
    fig.savefig(out_dir / "scale.png", dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n-dense", type=int, nargs="*", default=[1_000_000])
    parser.add_argument("--n-sparse", type=int, default=200_000)
    parser.add_argument("--n-sklearn", type=int, default=20_000)
    parser.add_argument("--skip-sparse", action="store_true")
    parser.add_argument("--skip-sklearn", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--jobs", type=int, nargs="*", default=[-1],
                        help="LocalCluster n_jobs values, each run in turn (default -1)")
    parser.add_argument("--dtypes", nargs="*", default=["float64", "float32"],
                        choices=["float64", "float32"])
    parser.add_argument("--out", default="benchmarks/results/scale")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw scale.png from the scale.csv under --out")
    args = parser.parse_args(argv)
    if args.plot_only:
        plot(read_rows(Path(args.out) / "scale.csv"), Path(args.out))
        return 0
    if args.quick:
        args.n_dense, args.n_sparse, args.n_sklearn = [20_000], 5_000, 2_000
        args.out = str(Path(args.out) / "quick")

    def log(text):
        print(text, file=sys.stderr, flush=True)

    rows, round_rows = [], []
    with threadpool_limits(limits=args.threads, user_api="blas"):
        for n in args.n_dense:
            dense, per_round = dense_case(n, 50, 400, args.jobs, args.dtypes, log)
            rows, round_rows = rows + dense, round_rows + per_round
        if not args.skip_sparse:
            rows.append(sparse_case(args.n_sparse, 100_000, 50, 400, 4096, args.jobs[0], log))
        if not args.skip_sklearn:  # last: its n x n matrices would dominate max RSS
            rows += sklearn_case(args.n_sklearn, 50, 400, args.jobs, args.dtypes, log)
    write_outputs(rows, round_rows, Path(args.out), args.threads)
    print(f"wrote {args.out}/scale.csv, rounds.csv and summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
