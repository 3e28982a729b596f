"""disKPCA at scale: 1M x 28 over 50 power-law workers, the sparse bag-of-words
stand-in, and a side-by-side comparison with scikit-learn's KernelPCA at n = 20,000.

    python benchmarks/scale.py            # the full run (several minutes)
    python benchmarks/scale.py --quick    # a smoke run (seconds)
    python benchmarks/scale.py --n-dense 10000000 --skip-sparse --skip-sklearn

Writes ``benchmarks/results/scale/{scale.csv, summary.md, scale.png}``. Memory is
tracemalloc's peak during the fit (allocations beyond the data already held)
and the process's maximum resident set size.
"""

from __future__ import annotations

import argparse
import csv
import resource
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

from kernelscale.bench.runner import check_gram_entries, exact_reference
from kernelscale.datasets import make_gaussian_mixture, make_sparse_bow
from kernelscale.horizontal import diskpca, distributed_error
from kernelscale.kernels import make_kernel, median_heuristic
from kernelscale.metrics.lowrank import excess_energy_ratio
from kernelscale.partition import make_partition, split
from kernelscale.runtime import LocalCluster

COLUMNS = ("case", "method", "n_samples", "n_features", "nnz", "n_workers", "n_landmarks",
           "seconds", "peak_fit_mib", "max_rss_mib", "data_mib", "fit_words", "raw_point_words",
           "excess", "error")
PAPER = {"embedding_dim": 50, "row_sketch_dim": 250, "n_random_features": 2000}


def max_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def data_mib(X) -> float:
    if sp.issparse(X):
        return (X.data.nbytes + X.indices.nbytes + X.indptr.nbytes) / 2**20
    return X.nbytes / 2**20


def fit_diskpca(X, kernel, n_workers, n_landmarks, seed=0, **options) -> tuple:
    parts = split(X, make_partition(X.shape[0], n_workers, "power_law", random_state=seed))
    del X
    cluster = LocalCluster(parts)
    tracemalloc.start()
    tracemalloc.reset_peak()
    start = time.perf_counter()
    model = diskpca(cluster, kernel, 10, n_landmarks, random_state=seed, **PAPER, **options)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return model, cluster, seconds, peak


def dense_case(n, n_workers, n_landmarks, log) -> dict:
    start = time.perf_counter()
    X = make_gaussian_mixture(n, 28, random_state=0)
    log(f"dense {n} x 28 generated in {time.perf_counter() - start:.1f} s")
    kernel = make_kernel("rbf", sigma=median_heuristic(X, random_state=0))
    model, cluster, seconds, peak = fit_diskpca(X, kernel, n_workers, n_landmarks,
                                                embedding_dtype="float32")
    row = {"case": f"dense {n:,} x 28", "method": "diskpca (gram, float32 embedding)",
           "n_samples": n, "n_features": 28, "nnz": "", "n_workers": n_workers,
           "n_landmarks": model.landmarks.shape[0], "seconds": round(seconds, 2),
           "peak_fit_mib": round(peak, 1), "max_rss_mib": round(max_rss_mib(), 1),
           "data_mib": round(data_mib(X), 1), "fit_words": cluster.ledger.total_words(),
           "raw_point_words": cluster.ledger.total_words(kind="raw_points")}
    log(f"  fit {seconds:.1f} s, peak {peak:.0f} MiB beyond the data")
    return row


def sparse_case(n, d, n_workers, n_landmarks, chunk_size, log) -> dict:
    start = time.perf_counter()
    X = make_sparse_bow(n, d, nnz_per_row=100, random_state=0)
    log(f"sparse {n} x {d} (nnz {X.nnz:,}) generated in {time.perf_counter() - start:.1f} s")
    kernel = make_kernel("poly", degree=4, gamma=1.0, coef0=1.0)
    model, cluster, seconds, peak = fit_diskpca(X, kernel, n_workers, n_landmarks,
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
    return {"case": f"sparse bow {n:,} x {d:,}", "method": "diskpca (gram), poly q=4",
            "n_samples": n, "n_features": d, "nnz": X.nnz, "n_workers": n_workers,
            "n_landmarks": Y.shape[0], "seconds": round(seconds, 2),
            "peak_fit_mib": round(peak, 1), "max_rss_mib": round(max_rss_mib(), 1),
            "data_mib": round(data_mib(X), 1), "fit_words": cluster.ledger.total_words(),
            "raw_point_words": raw}


def sklearn_case(n, n_workers, n_landmarks, log) -> list[dict]:
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
                 "n_samples": n, "n_features": 28, "n_workers": 1, "n_landmarks": n,
                 "seconds": round(seconds, 2), "error": err,
                 "excess": excess_energy_ratio(err, reference["opt"], reference["trace"])})
    model, cluster, seconds, peak = fit_diskpca(X, kernel, n_workers, n_landmarks, center=True,
                                                embedding_dtype="float32")
    err = distributed_error(cluster, model, reference["center_norm_sq"])["error"]
    rows.append({"case": f"dense {n:,} x 28, centred",
                 "method": "diskpca (gram, float32 embedding)",
                 "n_samples": n, "n_features": 28, "n_workers": n_workers,
                 "n_landmarks": model.landmarks.shape[0], "seconds": round(seconds, 2),
                 "peak_fit_mib": round(peak, 1), "fit_words": cluster.ledger.total_words(),
                 "error": err,
                 "excess": excess_energy_ratio(err, reference["opt"], reference["trace"])})
    log(f"  sklearn {rows[0]['seconds']} s (excess {rows[0]['excess']:.4f}), disKPCA "
        f"{rows[1]['seconds']} s (excess {rows[1]['excess']:.4f})")
    return rows


def write_outputs(rows, out_dir: Path, threads) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with (out_dir / "scale.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(rows)
    lines = ["# disKPCA at scale", "",
             f"One process, BLAS threads = {threads}, on the shared 2-core machine; k = 10, "
             "t = 50, p = 250, m = 2000, power-law partitions.", "",
             "| case | method | workers | |Y| | seconds | peak fit MiB | max RSS MiB | data MiB "
             "| fit words | raw-point words | excess |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        excess = r.get("excess", "")
        lines.append(f"| {r['case']} | {r['method']} | {r['n_workers']} | {r['n_landmarks']} | "
                     f"{r['seconds']} | {r.get('peak_fit_mib', '')} | {r.get('max_rss_mib', '')} | "
                     f"{r.get('data_mib', '')} | {r.get('fit_words', '')} | "
                     f"{r.get('raw_point_words', '')} | "
                     f"{excess if excess == '' else f'{excess:.4f}'} |")
    sk = [r for r in rows if r["method"].startswith("sklearn")]
    ds = [r for r in rows if r["case"] == (sk[0]["case"] if sk else None) and r is not sk[0]]
    if sk and ds:
        lines += ["", f"Speed ratio sklearn / disKPCA at n = {sk[0]['n_samples']:,}: "
                  f"{sk[0]['seconds'] / ds[0]['seconds']:.1f}x (same run)."]
    lines += ["", "peak fit MiB: tracemalloc's peak during the fit (beyond the data; the "
              "workers' state of all 50 workers together, as they share one process). max RSS "
              "MiB: the process's maximum resident set so far (cases run in table order). "
              "excess = (err - opt) / (trace - opt) against the exact centred optimum.", ""]
    (out_dir / "summary.md").write_text("\n".join(lines))
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no scale.png", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(7, 3.5))
    labels = [f"{r['case']}\n{r['method']}" for r in rows]
    ax.barh(labels, [r["seconds"] for r in rows])
    ax.set_xscale("log")
    ax.set_xlabel("fit seconds")
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
    parser.add_argument("--out", default="benchmarks/results/scale")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_dense, args.n_sparse, args.n_sklearn = [20_000], 5_000, 2_000
        args.out = str(Path(args.out) / "quick")

    def log(text):
        print(text, file=sys.stderr, flush=True)

    rows = []
    with threadpool_limits(limits=args.threads, user_api="blas"):
        for n in args.n_dense:
            rows.append(dense_case(n, 50, 400, log))
        if not args.skip_sparse:
            rows.append(sparse_case(args.n_sparse, 100_000, 50, 400, 4096, log))
        if not args.skip_sklearn:  # last: its n x n matrices would dominate max RSS
            rows += sklearn_case(args.n_sklearn, 50, 400, log)
    write_outputs(rows, Path(args.out), args.threads)
    print(f"wrote {args.out}/scale.csv and summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
