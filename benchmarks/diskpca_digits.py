"""disKPCA against its baselines on scikit-learn's digits (issue 2's acceptance numbers).

Run: ``python benchmarks/diskpca_digits.py`` (about 5 minutes on 2 cores;
``--quick`` for a 2-seed smoke run). Writes ``benchmarks/results/diskpca_digits/``:
``results.csv`` (one row per fit) and ``summary.md``.

Measured, all in one run:
1. RBF, paper bandwidth (0.2 x median) and 1.0 x median, k = 10, 5 power-law
   workers, |Y| = 400, 5 seeds: excess-energy ratio, err/opt and fit words of
   disKPCA (gram and sketch messages), uniform + disLR, uniform + batch KPCA.
2. The leverage-score round's upload words, gram (t(t+1)/2 per worker) vs
   sketch (p*t per worker with n_i > p).
3. Polynomial kernel (q = 4, unit-norm rows): error against fit words over
   |Y| in {50, 100, 200, 400} for disKPCA and uniform + disLR.
4. Fit words on n and on 2n points (gram and sketch).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from kernelscale.backends.local import LocalCluster
from kernelscale.bench import write_rows
from kernelscale.datasets import load_digits_standardized
from kernelscale.horizontal import diskpca, distributed_error, uniform_batch, uniform_dislr
from kernelscale.kernels import make_kernel, median_heuristic
from kernelscale.metrics.lowrank import exact_kpca_reference, excess_energy_ratio
from kernelscale.partition import make_partition, split

OUT = Path(__file__).parent / "results" / "diskpca_digits"
METHODS = {  # disKPCA with the paper's sampler, whose leverage round the modes change
    "diskpca (gram)": (diskpca, "gram"),
    "diskpca (sketch)": (diskpca, "sketch"),
    "uniform+disLR": (uniform_dislr, "gram"),
    "uniform+batch": (uniform_batch, "gram"),
}


def run_one(X, kernel, ref, method, budget, seed, workers=5):
    fn, messages = METHODS[method]
    cluster = LocalCluster(split(X, make_partition(X.shape[0], workers, random_state=seed)))
    start = time.perf_counter()
    model = fn(cluster, kernel, n_components=10, n_landmarks=budget, messages=messages,
               random_state=seed, sampler="paper")
    seconds = time.perf_counter() - start
    err = distributed_error(cluster, model)["error"]
    ledger = cluster.ledger
    leverage = sum(v["worker->master"] for name, v in ledger.words_by_round().items()
                   if name.startswith("leverage scores:"))
    return {"method": method, "budget": budget, "seed": seed,
            "fit_words": ledger.total_words("fit"), "upload_words": ledger.upload_words("fit"),
            "leverage_upload_words": leverage, "seconds": round(seconds, 3),
            "error": err, "opt": ref["opt"], "ratio": err / ref["opt"],
            "excess_ratio": excess_energy_ratio(err, ref["opt"], ref["trace"])}


def mean_std(rows, key):
    values = np.array([r[key] for r in rows], dtype=float)
    return values.mean(), values.std()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    seeds = range(2 if args.quick else 5)
    X, _ = load_digits_standardized()
    X_unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    settings = [
        ("rbf 0.2 x median", X, make_kernel("rbf", sigma=median_heuristic(X, 0.2, random_state=0))),
        ("rbf 1.0 x median", X, make_kernel("rbf", sigma=median_heuristic(X, 1.0, random_state=0))),
    ]
    rows = []
    lines = ["# disKPCA on digits (1797 x 64, standardised), k = 10, 5 power-law workers", "",
             f"Seeds: {len(seeds)}. Produced by `python benchmarks/diskpca_digits.py`.", ""]
    lines += ["## RBF, |Y| = 400", "",
              "| kernel | method | excess ratio (mean +- std) | err/opt | fit words | "
              "leverage-round upload words |", "|---|---|---|---|---|---|"]
    for label, data, kernel in settings:
        ref = exact_kpca_reference(data, kernel, 10)
        for method in METHODS:
            runs = [run_one(data, kernel, ref, method, 400, s) for s in seeds]
            for r in runs:
                r["setting"] = label
            rows += runs
            ex, exs = mean_std(runs, "excess_ratio")
            ratio, words = mean_std(runs, "ratio")[0], mean_std(runs, "fit_words")[0]
            leverage = mean_std(runs, "leverage_upload_words")[0]
            lines.append(f"| {label} | {method} | {ex:.4f} +- {exs:.4f} | {ratio:.5f} | "
                         f"{words:,.0f} | {leverage:,.0f} |")
            print(lines[-1], flush=True)
    poly = make_kernel("poly", degree=4, gamma=1.0, coef0=1.0)
    ref = exact_kpca_reference(X_unit, poly, 10)
    lines += ["", "## Polynomial (q = 4, unit-norm rows): error vs fit words", "",
              "| method | |Y| | excess ratio (mean +- std) | fit words |", "|---|---|---|---|"]
    for method in ("diskpca (gram)", "uniform+disLR"):
        for budget in (50, 100, 200, 400):
            runs = [run_one(X_unit, poly, ref, method, budget, s) for s in seeds]
            for r in runs:
                r["setting"] = "poly q=4 unit rows"
            rows += runs
            ex, exs = mean_std(runs, "excess_ratio")
            lines.append(f"| {method} | {budget} | {ex:.4f} +- {exs:.4f} | "
                         f"{mean_std(runs, 'fit_words')[0]:,.0f} |")
            print(lines[-1], flush=True)
    lines += ["", "## Fit words on n and 2n points (rbf 1.0 x median, |Y| = 400, seed 0)", "",
              "| messages | n words | 2n words |", "|---|---|---|"]
    kernel = settings[1][2]
    X2 = np.vstack([X, X + 1e-3 * np.random.default_rng(0).standard_normal(X.shape)])
    for messages in ("gram", "sketch"):
        words = []
        for data in (X, X2):
            # uniform split: every worker holds more than p = 250 and w = 400 points
            parts = split(data, make_partition(data.shape[0], 3, "uniform", random_state=0))
            cluster = LocalCluster(parts)
            diskpca(cluster, kernel, 10, n_landmarks=400, messages=messages, random_state=0,
                    sampler="paper")
            words.append(cluster.ledger.total_words("fit"))
        lines.append(f"| {messages} | {words[0]:,} | {words[1]:,} |")
        print(lines[-1], flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    write_rows(OUT / "results.csv", [{"setting": r["setting"], **r} for r in rows])
    (OUT / "summary.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT}/results.csv and summary.md")


if __name__ == "__main__":
    main()
