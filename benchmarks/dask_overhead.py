"""Benchmark: the Dask backend against the in-process one.

    python benchmarks/dask_overhead.py            # the real run (a few minutes)
    python benchmarks/dask_overhead.py --quick    # a small smoke run

Writes CSV, PNG and ``summary.md`` under ``benchmarks/results/dask/``:

* **Per-round overhead**: median wall time of one protocol round (a step that
  returns a scalar; and one that receives and returns a 100 x 100 block) on
  ``LocalCluster`` and on ``DaskCluster`` (one actor per partition on a
  ``distributed.LocalCluster`` of worker processes), for several partition counts.
* **disKPCA fit time vs the number of Dask workers** on n x 28 Gaussian-mixture
  points (n = 1,000,000 in the real run), one partition per worker, each worker
  memory-mapping its own ``.npy`` file (the data never passes through the
  client), next to the same fit in-process with one thread and with as many
  threads (``n_jobs``) as Dask workers. The ledgers of both backends are checked
  equal.

Every ratio is measured side by side in one run, on this machine (its core count
is in the summary: Dask workers beyond it cannot run in parallel).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from kernelscale.backends.dask.client import dask_client
from kernelscale.backends.dask.cluster import DaskCluster
from kernelscale.backends.local import LocalCluster
from kernelscale.bench import write_rows
from kernelscale.datasets import make_gaussian_mixture
from kernelscale.horizontal import diskpca
from kernelscale.kernels import make_kernel, median_heuristic

OUT = Path(__file__).parent / "results" / "dask"


def scalar_step(state):
    return state.data.shape[0]


def block_step(state, block):
    return block * 2.0


def median_round(cluster, step, args, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        cluster.broadcast_map(step, *args, round="bench")
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def overhead(client, partition_counts, repeats):
    rows = []
    block = np.ones((100, 100))
    for s in partition_counts:
        parts = [np.ones((10, 4)) for _ in range(s)]
        local = LocalCluster(parts)
        with DaskCluster.from_arrays(client, parts) as remote:
            for name, step, args in (("scalar", scalar_step, ()),
                                     ("100x100 block", block_step, (block,))):
                median_round(remote, step, args, 3)  # warm up the connections
                t_local = median_round(local, step, args, repeats)
                t_dask = median_round(remote, step, args, repeats)
                rows.append({"partitions": s, "round": name, "local_ms": 1e3 * t_local,
                             "dask_ms": 1e3 * t_dask,
                             "overhead_ms": 1e3 * (t_dask - t_local)})
                print(f"overhead s={s} {name}: local {1e3 * t_local:.3f} ms, "
                      f"dask {1e3 * t_dask:.2f} ms")
    return rows


def scaling(n_samples, worker_counts, params, seed=0):
    X = make_gaussian_mixture(n_samples, n_features=28, random_state=seed)
    kernel = make_kernel("rbf", sigma=median_heuristic(X, random_state=seed))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for w in worker_counts:
            bounds = np.linspace(0, n_samples, w + 1).astype(int)
            paths = []
            for i in range(w):
                paths.append(os.path.join(tmp, f"w{w}_part{i}.npy"))
                np.save(paths[-1], X[bounds[i]:bounds[i + 1]])
            times = {}
            for n_jobs in (1, w):  # one thread, then one per Dask worker (n_jobs=w)
                start = time.perf_counter()
                local = LocalCluster([np.load(p, mmap_mode="r") for p in paths], n_jobs=n_jobs)
                diskpca(local, kernel, random_state=seed, **params)
                times[n_jobs] = time.perf_counter() - start
                local.close()
            t_serial, t_local = times[1], times[w]
            with dask_client(n_workers=w) as client:
                start = time.perf_counter()
                remote = DaskCluster.from_loaders(client, paths)
                t_place = time.perf_counter() - start
                start = time.perf_counter()
                diskpca(remote, kernel, random_state=seed, **params)
                t_dask = time.perf_counter() - start
                same = remote.ledger == local.ledger
                remote.close()
            rows.append({"n_samples": n_samples, "dask_workers": w, "partitions": w,
                         "local_serial_fit_s": t_serial, "local_fit_s": t_local,
                         "dask_place_s": t_place, "dask_fit_s": t_dask,
                         "fit_words": local.ledger.total_words("fit"), "same_ledger": same})
            print(f"scaling n={n_samples} workers={w}: in-process {t_serial:.1f} s (1 thread), "
                  f"{t_local:.1f} s (n_jobs={w}), dask {t_dask:.1f} s "
                  f"(+{t_place:.1f} s placement), same ledger {same}")
    return rows


def plot(out, over, scale):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for name in dict.fromkeys(r["round"] for r in over):
        rs = [r for r in over if r["round"] == name]
        axes[0].plot([r["partitions"] for r in rs], [r["dask_ms"] for r in rs], "o-",
                     label=f"Dask, {name}")
        axes[0].plot([r["partitions"] for r in rs], [r["local_ms"] for r in rs], "x--",
                     label=f"in-process, {name}")
    axes[0].set(xlabel="partitions (actors)", ylabel="ms per round", yscale="log",
                title="per-round time")
    axes[0].legend(fontsize=7)
    ws = [r["dask_workers"] for r in scale]
    axes[1].plot(ws, [r["dask_fit_s"] for r in scale], "o-", label="Dask")
    axes[1].plot(ws, [r["local_fit_s"] for r in scale], "x--", label="in-process")
    axes[1].set(xlabel="Dask workers = partitions", ylabel="fit seconds",
                title=f"disKPCA fit, {scale[0]['n_samples']:,} x 28")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(out / "dask_overhead.png", dpi=110)


def summary(over, scale, params, quick):
    lines = ["# Dask backend: benchmark summary", "",
             f"{'Quick smoke run. ' if quick else ''}Machine: {os.cpu_count()} cores "
             "(shared with other jobs while measured); Dask workers are single-threaded "
             "processes on it.", "",
             "## Per-round overhead (median wall time of one broadcast round)", "",
             "| partitions | round | in-process ms | Dask ms | overhead ms |",
             "| --- | --- | --- | --- | --- |"]
    for r in over:
        lines.append(f"| {r['partitions']} | {r['round']} | {r['local_ms']:.3f} | "
                     f"{r['dask_ms']:.2f} | {r['overhead_ms']:.2f} |")
    lines += ["", f"## disKPCA fit time vs Dask workers ({scale[0]['n_samples']:,} x 28)", "",
              f"Parameters: {params}; one partition per worker, each loaded by its worker "
              "from its own memory-mapped .npy file. In-process: the same partitions, "
              "memory-mapped, once with one thread and once with `n_jobs` = the number of "
              "Dask workers (every thread, like every Dask worker, runs BLAS on one thread). "
              "Measured back to back in one run.", "",
              "| Dask workers | in-process fit s, 1 thread | in-process fit s, n_jobs = workers "
              "| Dask fit s | Dask / in-process (same cores) | placement s | fit words "
              "| same ledger |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in scale:
        lines.append(f"| {r['dask_workers']} | {r['local_serial_fit_s']:.1f} | "
                     f"{r['local_fit_s']:.1f} | {r['dask_fit_s']:.1f} | "
                     f"{r['dask_fit_s'] / r['local_fit_s']:.2f} | {r['dask_place_s']:.1f} | "
                     f"{r['fit_words']:,} | {r['same_ledger']} |")
    if len(scale) > 1:
        first, last = scale[0], scale[-1]
        lines += ["", f"Dask fit with {last['dask_workers']} workers vs 1: "
                  f"{first['dask_fit_s'] / last['dask_fit_s']:.2f}x faster; in-process "
                  f"n_jobs={last['dask_workers']} vs one thread: "
                  f"{last['local_serial_fit_s'] / last['local_fit_s']:.2f}x. Ratios within a "
                  "row are measured back to back; between rows the load of the shared "
                  "machine may have changed."]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--n-samples", type=int, default=None)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    n_samples = args.n_samples or (20_000 if args.quick else 1_000_000)
    params = (dict(n_components=5, n_landmarks=50, n_random_features=200)
              if args.quick else dict(n_components=10, n_landmarks=400,
                                      n_random_features=2000,
                                      embedding_dtype="float32"))
    with dask_client(n_workers=2) as client:
        over = overhead(client, [2, 4] if args.quick else [2, 4, 8, 16],
                        20 if args.quick else 100)
    scale = scaling(n_samples, [1, 2], params)
    write_rows(out / "overhead.csv", over)
    write_rows(out / "scaling.csv", scale)
    plot(out, over, scale)
    (out / "summary.md").write_text(summary(over, scale, params, args.quick))
    print((out / "summary.md").read_text())


if __name__ == "__main__":
    main()
