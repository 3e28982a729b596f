"""Peak memory of each memory-heavy plan against the estimate that checks it up front.

    python benchmarks/memory.py            # the real run (a few minutes)
    python benchmarks/memory.py --quick    # a smoke run (seconds)

``kernelscale.memory`` refuses a plan, before it starts, when its estimate exceeds the
memory available. An estimate below the real peak would let a fit run out of memory
half-way; one far above would refuse fits that fit. Each case here fits one estimator
in a fresh process and records the peak of the memory it allocated during the fit
(``tracemalloc``: every NumPy and SciPy array, beyond what the process held before)
and its peak resident set during the fit (``VmHWM``, reset before the fit through
``/proc/self/clear_refs``) less the resident set before it; the
estimate is :mod:`kernelscale.memory`'s for the same plan (the data already held
left out, as the estimators' own check leaves it out). The ratio estimate / peak
must be at least 1, and is kept near it. Writes ``benchmarks/results/memory/``
(``memory.csv``, ``summary.md``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent / "results" / "memory"

#: One fit per case: the estimator's code, its data, the estimate's arguments.
CASES = {
    "diskpca |Y|=1500": ("horizontal", dict(method="diskpca", n_landmarks=1500)),
    "diskpca |Y|=3000": ("horizontal", dict(method="diskpca", n_landmarks=3000)),
    "diskpca |Y|=3000 n_jobs=2": ("horizontal", dict(method="diskpca", n_landmarks=3000,
                                                     n_jobs=2)),
    "uniform_dislr |Y|=3000": ("horizontal", dict(method="uniform_dislr", n_landmarks=3000)),
    "uniform_batch |Y|=3000": ("horizontal", dict(method="uniform_batch", n_landmarks=3000)),
    "exact n=3000": ("horizontal", dict(method="exact", n=3000)),
    "random_features m=3000": ("horizontal", dict(method="random_features",
                                                  n_random_features=3000)),
    "random_features sparse d=100,000": ("horizontal", dict(
        method="random_features", n_random_features=500, sparse_features=100_000)),
    "vertical n=3000": ("vertical", dict(n=3000)),
    "skpca m=20,000": ("streaming", dict(method="skpca", n_random_features=20_000)),
    "skpca sparse d=100,000": ("streaming", dict(method="skpca", n_random_features=500,
                                                 sparse_features=100_000)),
    "rnca m=3000": ("streaming", dict(method="rnca", n_random_features=3000)),
    "nystrom c=3000": ("streaming", dict(method="nystrom", n_random_features=3000)),
    "fk-kmeans D=1000": ("federated", dict(n_random_features=1000)),
}
QUICK = {name: (kind, {**options, **{k: max(50, v // 10) for k, v in options.items()
                                      if k in ("n_landmarks", "n", "n_random_features")}})
         for name, (kind, options) in list(CASES.items())[:4]}

#: The child: fits one case and prints its peaks and the estimate, as JSON.
CHILD = r'''
import json, sys, tracemalloc
import numpy as np
import scipy.sparse as sp
from kernelscale import memory_plans as memory

kind, options = sys.argv[1], json.loads(sys.argv[2])
rng = np.random.default_rng(0)
n, d = options.pop("n", 20_000), 10
wide = options.pop("sparse_features", None)
if wide:  # 20 nonzeros a row, built directly (sp.random draws from all n x d cells)
    n = 2_000
    X = sp.csr_matrix((rng.random(20 * n), rng.integers(0, wide, 20 * n),
                       np.arange(0, 20 * n + 1, 20)), shape=(n, wide))
    X.sum_duplicates()
else:
    X = rng.standard_normal((n, d))
def status(field):
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) * 1024 for line in fh if line.startswith(field))

if kind == "horizontal":
    from kernelscale import DistributedKernelPCA
    est = DistributedKernelPCA(n_components=10, gamma=0.1, n_workers=5, random_state=0,
                               **options)
    rows = [n // 5] * 5
    need = memory.horizontal_need(options["method"], rows, X.shape[1],
                                  nnz=X.nnz if wide else None,
                                  n_landmarks=options.get("n_landmarks", 400),
                                  n_random_features=options.get("n_random_features", 2000),
                                  n_jobs=options.get("n_jobs", 1), data_resident=False)
elif kind == "vertical":
    from kernelscale import VerticalKernelPCA
    est = VerticalKernelPCA(n_components=5, gamma=0.1)
    need = memory.vertical_need(n, 2, d, data_resident=False)
elif kind == "streaming":
    from kernelscale import StreamingKernelPCA
    est = StreamingKernelPCA(n_components=5, gamma=0.1, random_state=0, **options)
    need = memory.streaming_need(options["method"], X.shape[1],
                                 n_random_features=options["n_random_features"],
                                 sparse=bool(wide))
else:
    from kernelscale import FederatedKernelKMeans
    est = FederatedKernelKMeans(n_clusters=5, gamma=0.1, n_workers=5, max_iter=5,
                                random_state=0, **options)
    need = memory.federated_need([n // 5] * 5, d, options["n_random_features"],
                                 est.n_clusters, data_resident=False)
with open("/proc/self/clear_refs", "w") as fh:  # the peak resident set from here
    fh.write("5")
before = status("VmRSS:")
tracemalloc.start()
est.fit(X)
traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
resident = status("VmHWM:") - before
print(json.dumps({"traced": traced, "resident": resident, "estimate": need.total,
                  "parts": need.parts}))
'''


def run_case(kind: str, options: dict) -> dict:
    """The peaks and the estimate of one case, fitted in a fresh process."""
    out = subprocess.run([sys.executable, "-c", CHILD, kind, json.dumps(options)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke run (seconds)")
    args = parser.parse_args(argv)
    cases = QUICK if args.quick else CASES
    out = OUT / "quick" if args.quick else OUT
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, (kind, options) in cases.items():
        result = run_case(kind, options)
        peak = max(result["traced"], result["resident"])
        rows.append({"case": name, "estimate_mib": result["estimate"] / 2**20,
                     "traced_mib": result["traced"] / 2**20,
                     "resident_mib": result["resident"] / 2**20,
                     "ratio": result["estimate"] / peak})
        print(f"{name:<36} estimate {rows[-1]['estimate_mib']:9.1f} MiB  traced "
              f"{rows[-1]['traced_mib']:9.1f}  resident {rows[-1]['resident_mib']:9.1f}  "
              f"ratio {rows[-1]['ratio']:.2f}", flush=True)
    columns = list(rows[0])
    with open(out / "memory.csv", "w") as fh:
        fh.write(",".join(columns) + "\n")
        for row in rows:
            fh.write(",".join(f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c])
                              for c in columns) + "\n")
    lines = ["# Peak memory against kernelscale.memory's estimate", "",
             "Each case fits once in a fresh process (`python benchmarks/memory.py`). "
             "*traced*: the peak of what NumPy and SciPy allocated during the fit "
             "(tracemalloc); *resident*: the peak resident set less the resident set before "
             "the fit (BLAS buffers and the allocator's slack included); *ratio*: the "
             "estimate over the larger of the two (at least 1: the check never lets a fit "
             "through that then runs out).", "",
             "| case | estimate MiB | traced MiB | resident MiB | ratio |",
             "|---|---:|---:|---:|---:|"]
    lines += [f"| {r['case']} | {r['estimate_mib']:.1f} | {r['traced_mib']:.1f} | "
              f"{r['resident_mib']:.1f} | {r['ratio']:.2f} |" for r in rows]
    lines += ["", f"Lowest ratio {min(r['ratio'] for r in rows):.2f}, highest "
              f"{max(r['ratio'] for r in rows):.2f}."]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
