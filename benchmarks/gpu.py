"""Benchmark: disKPCA with every worker's partition on a GPU, against the same fit on the CPUs.

    python benchmarks/gpu.py                  # 1M and 10M x 28, |Y| = 400 and 2,000,
                                              # float32 and float64 (needs CuPy or CUDA torch)
    python benchmarks/gpu.py --library torch  # CUDA tensors instead of CuPy arrays
    python benchmarks/gpu.py --quick          # 20,000 x 28, |Y| = 50 and 200, on the first
                                              # device library found, else array-api-strict

For each size, |Y| and dtype, one run measures side by side:

* **device fit**: ``DistributedKernelPCA`` (disKPCA, ridge sampler, Gram messages,
  uncentred as in the papers; ``--workers`` uniform partitions, all on the one device)
  on partitions that are device arrays, under scikit-learn's ``array_api_dispatch``:
  kernel blocks, residuals and Gram sums on the device, messages and the master's
  eigenproblems on the host (:mod:`kernelscale.arrays`). Seconds of ``fit``, from the
  device partitions to the fitted model (every device-to-host copy included), after an
  untimed warm-up fit on a slice of the rows (the device library compiles its kernels
  for each dtype on first use). Twice: with the workers' steps one after another
  (``n_jobs=None``), and on one thread per worker (``threaded``, ``n_jobs=--workers``):
  each worker's draw from its residuals runs on the host, over its n_i rows, with
  NumPy's generator (so that the points drawn, the model and the ledger are those of
  the NumPy fit); on a cluster each worker is its own process and those draws run side
  by side, as the threads let them here. ``threads equal``: the two device fits agree
  bit for bit.
* **CPU fit**: the same fit on the same rows as NumPy partitions, with every core of the
  machine (``n_jobs=-1``; chunk size 4,096, the default).
* **device floor**: the fit's passes over the rows timed alone on the device: the
  ridge rounds' residual passes ``||k(A_i, S) G||^2`` with |S| as the sampler's schedule
  grows it, and disLR's pass ``k(Y, A_i) k(A_i, Y)`` with its row sums, each pass
  synchronised at its end. The fit cannot be faster than these.

The device fit's model is compared with the CPU fit's (largest coefficient difference,
absolute and relative to the largest coefficient)
and its ledger with the CPU fit's, message for message (``ledger_equal``); the words are
the same by construction.

Without CuPy or a CUDA build of torch the full run prints why and stops (exit status 0).
``--quick`` then runs on ``array-api-strict`` (NumPy under the array API, on the CPU):
it checks that the script and the device code path run, and its "device" seconds are
CPU seconds, not a GPU's. Results go to ``benchmarks/results/gpu/`` (``quick/`` for
``--quick``): ``gpu.csv`` and ``summary.md``.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "gpu"
LIBRARIES = ("auto", "cupy", "torch", "strict")


def find_library(requested: str, quick: bool):
    """``(name, module, device, synchronize)`` of the device library, or ``None`` with the
    reason when none is usable."""
    tried = []
    for name in (("cupy", "torch") if requested == "auto" else (requested,)):
        if name == "strict":
            break
        try:
            if name == "cupy":
                import cupy

                cupy.cuda.runtime.getDeviceCount()
                return (name, cupy, cupy.cuda.Device(0),
                        lambda: cupy.cuda.Device(0).synchronize()), None
            import torch

            if not torch.cuda.is_available():
                raise RuntimeError("torch.cuda.is_available() is False")
            return (name, torch, torch.device("cuda"), torch.cuda.synchronize), None
        except Exception as exc:  # noqa: BLE001 - the reason is reported
            tried.append(f"{name}: {type(exc).__name__}: {exc}")
    if requested == "strict" or (requested == "auto" and quick):
        import array_api_strict

        return ("array-api-strict", array_api_strict, array_api_strict.Device("device1"),
                lambda: None), None
    return None, "; ".join(tried) or f"--library {requested} is not a GPU library"


def to_device(library, X):
    name, module, device, _ = library
    if name == "cupy":
        with device:
            return module.asarray(X)
    if name == "torch":
        return module.from_numpy(X).to(device)
    return module.asarray(X, device=device)


def device_floor(library, parts, X_host, kernel, sizes, n_landmarks, chunk):
    """Seconds of the fit's passes over the device rows, each pass timed alone (the
    landmarks are rows of the data, as the fit's: far-away points would give kernel
    values that underflow, and a different speed)."""
    from kernelscale.arrays import device, namespace, rows, to_device_of

    synchronize = library[3]
    rng = np.random.default_rng(0)
    seconds = 0.0
    for n_points in [*sizes, n_landmarks]:
        gram_pass = n_points == n_landmarks
        for X in parts:
            xp = namespace(X)
            S = to_device_of(X_host[rng.choice(X_host.shape[0], n_points, replace=False)], X)
            G = to_device_of(np.tril(rng.standard_normal((n_points, n_points))), X, X.dtype)
            synchronize()
            start = time.perf_counter()
            if gram_pass:  # disLR: k(Y, A_i) k(A_i, Y) and the row sums, in float64
                acc = xp.zeros((n_points, n_points), dtype=xp.float64, device=device(X))
                sums = xp.zeros(n_points, dtype=xp.float64, device=device(X))
                for lo in range(0, X.shape[0], chunk):
                    block = kernel(rows(X, lo, lo + chunk), S, chunk_size=chunk)
                    acc += block.T @ block
                    sums += xp.sum(block, axis=0)
            else:  # a ridge round: ||k(A_i, S) G^T||^2 per row
                norms = xp.empty(X.shape[0], dtype=xp.float64, device=device(X))
                for lo in range(0, X.shape[0], chunk):
                    proj = kernel(rows(X, lo, lo + chunk), S, chunk_size=chunk) @ G.T
                    norms[lo:min(lo + chunk, X.shape[0])] = xp.astype(
                        xp.sum(proj * proj, axis=1), xp.float64)
            synchronize()
            seconds += time.perf_counter() - start
    return seconds


def one_run(library, X_host, n_landmarks, dtype, args):
    import sklearn

    from kernelscale.arrays import rows
    from kernelscale.horizontal.estimator import DistributedKernelPCA
    from kernelscale.horizontal.samplers import ridge_schedule
    from kernelscale.kernels import make_kernel, median_heuristic
    from kernelscale.runtime.cluster import one_blas_thread

    X_host = X_host.astype(dtype, copy=False)
    sigma = median_heuristic(X_host, n_subset=2000, random_state=0)
    gamma = 1.0 / (2.0 * sigma**2)
    bounds = np.linspace(0, X_host.shape[0], args.workers + 1).astype(int)
    host_parts = [X_host[lo:hi] for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)]
    options = {"n_components": 10, "n_landmarks": n_landmarks, "gamma": gamma,
               "method": "diskpca", "center": False, "random_state": 0}
    cpu = DistributedKernelPCA(n_jobs=-1, **options)
    start = time.perf_counter()
    cpu.fit(host_parts)
    cpu_seconds = time.perf_counter() - start

    device_parts = [to_device(library, p) for p in host_parts]
    library[3]()
    os.environ.setdefault("SCIPY_ARRAY_API", "1")  # asked for by scikit-learn's dispatch
    with sklearn.config_context(array_api_dispatch=True):
        # Untimed warm-up on a slice: the device library compiles its kernels for this
        # dtype on first use (seconds with CuPy), once per process.
        warm = [rows(p, 0, 2 * args.chunk_size) for p in device_parts]
        DistributedKernelPCA(chunk_size=args.chunk_size, **options).fit(warm)
        library[3]()
        gpu = DistributedKernelPCA(chunk_size=args.chunk_size, **options)
        start = time.perf_counter()
        gpu.fit(device_parts)
        gpu_seconds = time.perf_counter() - start
        # The workers' host work (their draws from the residuals) on one thread each, as
        # on a cluster where each worker is its own process; the device is shared.
        threaded = DistributedKernelPCA(chunk_size=args.chunk_size, n_jobs=args.workers,
                                        **options)
        start = time.perf_counter()
        threaded.fit(device_parts)
        threaded_seconds = time.perf_counter() - start
    kernel = make_kernel("rbf", gamma=gamma)
    sizes = ridge_schedule(kernel, 10, n_landmarks)[:-1]
    with one_blas_thread():  # as the fit's worker steps (for array-api-strict's NumPy)
        floor = device_floor(library, device_parts, X_host, kernel, sizes, n_landmarks,
                             args.chunk_size)
    return {"library": library[0], "n_samples": X_host.shape[0], "n_features": X_host.shape[1],
            "n_landmarks": n_landmarks, "dtype": np.dtype(dtype).name, "workers": args.workers,
            "device_chunk": args.chunk_size, "device_fit_s": gpu_seconds,
            "device_fit_threads_s": threaded_seconds,
            "threads_equal": bool(threaded.communication_ == gpu.communication_ and np.array_equal(
                threaded.landmark_coef_, gpu.landmark_coef_)),
            "device_floor_s": floor, "cpu_fit_s": cpu_seconds, "cpu_cores": os.cpu_count(),
            "fit_over_floor": gpu_seconds / floor, "cpu_over_device": cpu_seconds / gpu_seconds,
            "threads_over_floor": threaded_seconds / floor,
            "cpu_over_threads": cpu_seconds / threaded_seconds,
            "ledger_equal": gpu.communication_ == cpu.communication_,
            "fit_words": gpu.communication_.total_words("fit"),
            "max_coef_diff": float(np.abs(gpu.landmark_coef_ - cpu.landmark_coef_).max()),
            "rel_coef_diff": float(np.abs(gpu.landmark_coef_ - cpu.landmark_coef_).max()
                                   / np.abs(cpu.landmark_coef_).max())}


def device_name(library) -> str:
    """The GPU's name as its library reports it ('CPU' for array-api-strict)."""
    name, module, device, _ = library
    if name == "cupy":
        return module.cuda.runtime.getDeviceProperties(device.id)["name"].decode()
    if name == "torch":
        return module.cuda.get_device_name(device)
    return "CPU"


def summary(rows, library, quick):
    lines = ["# disKPCA on a device against the CPUs: benchmark summary", "",
             f"Library: {library[0]} ({library[2]}, {device_name(library)}); "
             f"{os.cpu_count()} CPU cores; "
             f"{platform.processor() or platform.machine()}."
             + (" Quick run on array-api-strict: its 'device' is the CPU, so the device "
                "seconds below are CPU seconds (a check that the code path runs, not a GPU "
                "measurement)." if library[0] == "array-api-strict" else ""), "",
             "| n | d | \\|Y\\| | dtype | device fit s | threaded s | device floor s "
             "| fit / floor | threaded / floor | CPU fit s | CPU / device | CPU / threaded "
             "| ledger equal | threads equal | max coef diff | relative |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['n_samples']:,} | {r['n_features']} | {r['n_landmarks']} | {r['dtype']} "
            f"| {r['device_fit_s']:.3f} | {r['device_fit_threads_s']:.3f} "
            f"| {r['device_floor_s']:.3f} | {r['fit_over_floor']:.2f} "
            f"| {r['threads_over_floor']:.2f} | {r['cpu_fit_s']:.3f} "
            f"| {r['cpu_over_device']:.1f} | {r['cpu_over_threads']:.1f} | {r['ledger_equal']} "
            f"| {r['threads_equal']} | {r['max_coef_diff']:.1e} | {r['rel_coef_diff']:.1e} |")
    lines += ["", "Rerun: `python benchmarks/gpu.py" + (" --quick" if quick else "") + "`."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="20,000 x 28 rows, |Y| = 50 and 200 (array-api-strict without a GPU)")
    parser.add_argument("--library", choices=LIBRARIES, default="auto")
    parser.add_argument("--sizes", type=int, nargs="+", default=None)
    parser.add_argument("--landmarks", type=int, nargs="+", default=None)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "float64"])
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="rows per device block (default 65,536; 4,096 with --quick)")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    library, reason = find_library(args.library, args.quick)
    if library is None:
        print(f"benchmarks/gpu.py: no GPU library usable ({reason}); nothing measured. "
              "Install CuPy or a CUDA build of PyTorch on a GPU machine, or run with --quick "
              "to check the code path on array-api-strict.")
        return None
    sizes = args.sizes or ([20_000] if args.quick else [1_000_000, 10_000_000])
    landmarks = args.landmarks or ([50, 200] if args.quick else [400, 2_000])
    if args.chunk_size is None:
        args.chunk_size = 4096 if args.quick else 65_536
    out = Path(args.out) / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    from kernelscale.bench import write_rows
    from kernelscale.datasets import make_gaussian_mixture

    rows = []
    for n in sizes:
        X = make_gaussian_mixture(n, 28, random_state=0)
        for n_landmarks in landmarks:
            for dtype in args.dtypes:
                row = one_run(library, X, n_landmarks, np.dtype(dtype), args)
                rows.append(row)
                print(f"n={n:,} |Y|={n_landmarks} {dtype}: device {row['device_fit_s']:.3f} s "
                      f"(floor {row['device_floor_s']:.3f} s), CPU {row['cpu_fit_s']:.3f} s, "
                      f"ledger equal {row['ledger_equal']}", flush=True)
                # after every run, so that a run stopped at a time limit keeps what it measured
                write_rows(out / "gpu.csv", rows)
                (out / "summary.md").write_text(summary(rows, library, args.quick))
        del X
    return rows


if __name__ == "__main__":
    main()
