"""Benchmark: rounds, words and seconds of each estimator's paper protocol and its default.

    python benchmarks/rounds.py               # 10 seeds (a few minutes, one thread)
    python benchmarks/rounds.py --quick       # 2 seeds, a smoke run

On scikit-learn's digits (1,797 x 64, standardised, 10 classes), side by side in
one run and one process (one BLAS thread):

* ``FederatedKernelKMeans(n_clusters=10)`` on 3 clients (uniform split), the
  paper's protocol (``protocol='paper'``: a round per seed, Lanczos step and update
  of B; the coreset k-means in two rounds) against the default (``'auto'``: one
  round per DSPGD iteration, the Gram message at D = 50); NMI against the digits'
  classes;
* the same at D = 1,000 (3 seeds), where the Gram message grows as (D + r)^2: the
  default then sends block Krylov products (``'auto'`` picks them by words plus its
  ``round_cost``), against the paper's Lanczos and the Gram message forced;
* ``DistributedSpectralClustering(n_clusters=10)`` (disKPCA, 400 landmarks, then
  the coreset k-means; 5 power-law workers), ``protocol='paper'`` against ``'auto'``;
* ``DistributedKernelPCA(10)``: the default (ridge sampler, Gram messages) and the
  paper's Algorithm 2 (``sampler='paper'``, sketched messages), 400 landmarks,
  excess (err - opt) / (trace - opt) against exact kernel PCA;
* ``VerticalKernelPCA(10)`` on 2 parties (its one-shot protocol is the paper's).

Rounds and words are the ledger's (phase 'fit'); seconds are the fit's wall time
here, and "at 50 ms" adds 50 ms per round: what a network with that round trip
would add. Writes ``runs.csv`` and ``summary.md`` under ``benchmarks/results/rounds/``.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

from kernelscale import DistributedKernelPCA, VerticalKernelPCA
from kernelscale.bench import write_rows
from kernelscale.datasets import load_digits_standardized
from kernelscale.federated import DistributedSpectralClustering, FederatedKernelKMeans
from kernelscale.metrics.clustering import nmi

OUT = Path(__file__).parent / "results" / "rounds"
LATENCY = 0.05  # seconds a round trip adds on the network of the "at 50 ms" column
LARGE_D_SEEDS = 3
SETTINGS = [  # (setting, estimator, protocol label, constructor, quality)
    ("FK k-means, D = 50", "FederatedKernelKMeans", "paper",
     lambda s: FederatedKernelKMeans(10, n_workers=3, protocol="paper", random_state=s), "nmi"),
    ("FK k-means, D = 50", "FederatedKernelKMeans", "default (auto)",
     lambda s: FederatedKernelKMeans(10, n_workers=3, random_state=s), "nmi"),
    ("FK k-means, D = 1,000", "FederatedKernelKMeans", "paper",
     lambda s: FederatedKernelKMeans(10, n_random_features=1000, n_workers=3,
                                     protocol="paper", random_state=s), "nmi"),
    ("FK k-means, D = 1,000", "FederatedKernelKMeans", "gram",
     lambda s: FederatedKernelKMeans(10, n_random_features=1000, n_workers=3,
                                     protocol="gram", random_state=s), "nmi"),
    ("FK k-means, D = 1,000", "FederatedKernelKMeans", "default (auto)",
     lambda s: FederatedKernelKMeans(10, n_random_features=1000, n_workers=3,
                                     random_state=s), "nmi"),
    ("spectral clustering", "DistributedSpectralClustering", "paper",
     lambda s: DistributedSpectralClustering(10, protocol="paper", random_state=s), "nmi"),
    ("spectral clustering", "DistributedSpectralClustering", "default (auto)",
     lambda s: DistributedSpectralClustering(10, random_state=s), "nmi"),
    ("kernel PCA", "DistributedKernelPCA", "paper (sampler='paper', sketch)",
     lambda s: DistributedKernelPCA(10, n_landmarks=400, sampler="paper", messages="sketch",
                                    random_state=s), "excess"),
    ("kernel PCA", "DistributedKernelPCA", "default",
     lambda s: DistributedKernelPCA(10, n_landmarks=400, random_state=s), "excess"),
    ("vertical kernel PCA", "VerticalKernelPCA", "paper = default",
     lambda s: VerticalKernelPCA(10), None),
]


def run(setting, estimator, protocol, make, quality, seed, X, y) -> dict:
    est = make(seed)
    start = time.perf_counter()
    est.fit(X)
    seconds = time.perf_counter() - start
    ledger = est.communication_
    rounds = ledger.n_rounds("fit")
    row = {"setting": setting, "estimator": estimator, "protocol": protocol, "seed": seed,
           "rounds": rounds, "rounds_all_phases": ledger.n_rounds(None),
           "words": ledger.total_words("fit"), "upload_words": ledger.upload_words("fit"),
           "seconds": round(seconds, 3), "seconds_at_50ms": round(seconds + LATENCY * rounds, 3),
           "quality": "", "value": np.nan,
           "solvers": ",".join(sorted(set(getattr(est, "eigensolvers_", []))))}
    if quality == "nmi":
        row.update(quality="NMI", value=round(nmi(y, est.labels_), 4))
    elif quality == "excess":
        row.update(quality="excess", value=round(est.approximation_error(X)["excess_ratio"], 4))
    return row


def _mean_std(values) -> str:
    values = np.asarray(values, dtype=float)
    if np.all(np.isnan(values)):
        return "-"
    if values.size == 1:
        return f"{values[0]:.4g}"
    return f"{np.mean(values):.4f} ± {np.std(values, ddof=1):.4f}"


def summary(rows: list[dict], seeds: int, load: tuple) -> str:
    lines = [f"# Rounds, words and seconds: the papers' protocols and the defaults "
             f"(`python benchmarks/rounds.py{' --quick' if seeds < 10 else ''}`)", "",
             f"Digits (1,797 x 64, standardised), {seeds} seeds, one process and one BLAS "
             f"thread, {os.cpu_count()} cores, load average {load[0]:.1f} at the start and "
             f"{load[1]:.1f} at the end (seconds are noisy on a shared machine: compare "
             "them within this table). Rounds and words: the ledger's, phase 'fit'; "
             f"seconds: the fit here; at 50 ms: plus {LATENCY * 1000:.0f} ms a round. "
             "Means ± standard deviations over the seeds.", "",
             "| setting | protocol | eigen-solver | fit rounds | fit words | upload words | "
             "seconds | seconds at 50 ms | quality |", "|---|---|---|---|---|---|---|---|---|"]
    keys = list(dict.fromkeys((r["setting"], r["protocol"]) for r in rows))
    by_key = {k: [r for r in rows if (r["setting"], r["protocol"]) == k] for k in keys}
    for (setting, protocol), group in by_key.items():
        quality = group[0]["quality"]
        value = _mean_std([r["value"] for r in group])
        solvers = ",".join(sorted({x for r in group for x in r["solvers"].split(",") if x}))
        lines.append(
            f"| {setting} | {protocol} | {solvers or '-'} | "
            f"{np.mean([r['rounds'] for r in group]):,.0f} | "
            f"{np.mean([r['words'] for r in group]):,.0f} | "
            f"{np.mean([r['upload_words'] for r in group]):,.0f} | "
            f"{np.mean([r['seconds'] for r in group]):.2f} | "
            f"{np.mean([r['seconds_at_50ms'] for r in group]):.1f} | "
            f"{quality + ' ' + value if quality else '-'} |")
    lines += ["", "## Verdicts", ""]
    paper = [r for r in rows if r["setting"] == "FK k-means, D = 50" and r["protocol"] == "paper"]
    auto = [r for r in rows if r["setting"] == "FK k-means, D = 50" and r["protocol"] != "paper"]
    if paper and auto:
        diff = np.mean([r["value"] for r in auto]) - np.mean([r["value"] for r in paper])
        worst = max(r["rounds"] for r in auto)
        lines.append(
            f"* FK k-means, `FederatedKernelKMeans(n_clusters=10)` on digits in three parts: "
            f"{worst} fit rounds at most (the paper's protocol: "
            f"{np.mean([r['rounds'] for r in paper]):,.0f} on average), mean NMI "
            f"{'+' if diff >= 0 else '-'}{abs(diff):.4f} against the paper protocol's "
            f"({'within' if abs(diff) <= 0.02 else 'NOT within'} 0.02), "
            f"{np.mean([r['words'] for r in auto]) / np.mean([r['words'] for r in paper]):.2f}x "
            "its words.")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="2 seeds")
    args = parser.parse_args()
    seeds = 2 if args.quick else args.seeds
    X, y = load_digits_standardized()
    load = os.getloadavg()[0]
    rows = []
    with threadpool_limits(1):
        for seed in range(seeds):
            for setting in SETTINGS:
                if setting[1] == "VerticalKernelPCA" and seed > 0:
                    continue  # deterministic
                if setting[0] == "FK k-means, D = 1,000" and seed >= LARGE_D_SEEDS:
                    continue  # a minute a fit
                rows.append(run(*setting, seed, X, y))
                print(rows[-1], flush=True)
    out = OUT / "quick" if args.quick else OUT
    out.mkdir(parents=True, exist_ok=True)
    write_rows(out / "runs.csv", rows)
    text = summary(rows, seeds, (load, os.getloadavg()[0]))
    (out / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
