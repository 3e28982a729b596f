"""Peak memory against the number of workers: replies are summed as they arrive.

    python benchmarks/many_workers.py            # the real run (about 5 minutes)
    python benchmarks/many_workers.py --quick    # a smoke run (seconds)

Each case runs in a fresh process, so that its maximum resident set size
(``os.wait4``'s ``ru_maxrss``) is its own:

* ``kernelscale demo --workers W --quiet``: the bundled digits (1,797 rows), every
  method of the demo (disKPCA in both message modes, the uniform baselines, the
  random-features baseline whose replies are m x m covariances, m = 2,000, and
  exact KPCA). The CLI caps W at the number of rows.
* ``kernelscale fit --method random_features`` on letter (20,000 x 16, written to
  a .npy first) with W workers: the round in which every worker uploads an m x m
  covariance (32 MiB each in float64), for W up to 5,000.

Held as they arrived, W replies of 32 MiB would need W x 32 MiB (160 GB at
W = 5,000); summed as they arrive (``reduce="sum"``, DESIGN.md's runtime), the
master holds O(one reply) whatever W. Writes ``benchmarks/results/many_workers/``
(``many_workers.csv``, ``summary.md``).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from kernelscale.bench import write_rows
from kernelscale.datasets import load_dataset

OUT = Path(__file__).resolve().parent / "results" / "many_workers"
REPLY_MIB = 2000 * 2000 * 8 / 2**20  # one m x m float64 covariance


def run_case(argv: list[str]) -> tuple[float, float]:
    """``(max RSS MiB, wall seconds)`` of ``kernelscale ARGV`` in a fresh process."""
    start = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "kernelscale", *argv],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    seconds = time.perf_counter() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    if process.returncode != 0:
        raise RuntimeError(f"kernelscale {' '.join(argv)} failed:\n{stderr}")
    return usage.ru_maxrss / 1024, seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    out = Path(args.out) / ("quick" if args.quick else "")
    out.mkdir(parents=True, exist_ok=True)
    worker_counts = [5, 50] if args.quick else [5, 50, 500, 5000]
    rows = []
    for w in worker_counts:
        rss, seconds = run_case(["demo", "--workers", str(w), "--quiet"])
        rows.append({"command": "demo (digits, every method)", "workers": w,
                     "effective_workers": min(w, 1797), "max_rss_mib": round(rss, 1),
                     "seconds": round(seconds, 1)})
        print(rows[-1], flush=True)
    X, _ = load_dataset("letter")
    if args.quick:
        X = X[:2000]
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "letter.npy")
        np.save(data, X)
        for w in worker_counts:
            rss, seconds = run_case(
                ["fit", "--data", data, "--method", "random_features", "--workers", str(w),
                 "--n-components", "10", "--out", os.path.join(tmp, "model.npz"), "--quiet"])
            rows.append({"command": f"fit --method random_features (letter {X.shape[0]:,} x 16)",
                         "workers": w, "effective_workers": w, "max_rss_mib": round(rss, 1),
                         "seconds": round(seconds, 1)})
            print(rows[-1], flush=True)
    write_rows(out / "many_workers.csv", rows)
    (out / "summary.md").write_text(summary(rows))
    print((out / "summary.md").read_text())


def summary(rows: list[dict]) -> str:
    lines = ["# Peak memory against the number of workers", "",
             "Each case in a fresh process (`python benchmarks/many_workers.py`); max RSS is the "
             "process's maximum resident set size. Replies held until the round ends would "
             f"need workers x {REPLY_MIB:.1f} MiB in the random-features round "
             "(m = 2,000: an m x m float64 covariance per worker).", "",
             "| command | workers asked | workers | max RSS MiB | seconds | "
             "all replies held, MiB |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        held = r["effective_workers"] * REPLY_MIB
        lines.append(f"| {r['command']} | {r['workers']:,} | {r['effective_workers']:,} | "
                     f"{r['max_rss_mib']:,.0f} | {r['seconds']} | {held:,.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
