"""Benchmark: federated kernel k-means (paper 003) against CK, SK, RFK k-means and CE PCA.

    python benchmarks/federated.py            # the real run (a few minutes)
    python benchmarks/federated.py --quick    # a small smoke run

Writes ``runs.csv``, ``recovery.csv``, ``federated.png`` and ``summary.md`` under
``benchmarks/results/federated/``. Figures 1-3 of 003 in spirit, on scikit-learn's
digits (standardised, 10 classes, M = 5 clients, uniform split) and a generated
Gaussian mixture (d = 28, 10 clusters):

* the normalised recovery error ``||K_t - K_hat||_F^2 / N^2`` per iteration for
  DSPGD with and without CEM (Figure 1);
* upload words per DSPGD iteration with and without CEM (Figure 2);
* NMI against upload words for FK k-means (T in 5, 10, 20), RFK k-means (D in
  100..800) and CE PCA (|Y| in 100..400), with CK and SK k-means as reference
  lines (Figure 3); FK and CK over 5 seeds;
* NMI against the client dropout rate;
* fit words on n and 2n points of the mixture (exact counts).
All words are counted by the runtime's ledger (phase 'fit').
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
import scipy.linalg as sla

from kernelscale.datasets import load_digits_standardized, make_gaussian_mixture
from kernelscale.federated import (
    ck_kmeans,
    distributed_spectral_clustering,
    fk_kmeans,
    rfk_kmeans,
    sk_kmeans,
)
from kernelscale.federated.baselines import gamma_rule
from kernelscale.federated.dspgd_plain import dspgd_without_cem
from kernelscale.kernels import make_kernel
from kernelscale.metrics.clustering import nmi
from kernelscale.partition import make_partition, split
from kernelscale.runtime import LocalCluster

OUT = Path(__file__).parent / "results" / "federated"
K, S, D_FK, M = 10, 10, 50, 5


def _cluster(X, seed):
    idx = make_partition(X.shape[0], M, "uniform", random_state=seed)
    return LocalCluster(split(X, idx)), np.concatenate(idx)


def clustering_runs(X, y, seeds, quick):
    rows = []
    gamma = gamma_rule(X)

    def add(method, param, seed, labels, order, cluster):
        truth = y if order is None else y[order]
        up = cluster.ledger.upload_words() if cluster else 0
        tot = cluster.ledger.total_words() if cluster else 0
        raw = cluster.ledger.total_words(kind="raw_points") if cluster else 0
        rows.append(dict(method=method, param=param, seed=seed, nmi=nmi(truth, labels),
                         upload_words=up, total_words=tot, raw_point_words=raw))
        print(rows[-1], flush=True)

    for seed in seeds:
        add("CK", S, seed, ck_kmeans(X, K, S, gamma, random_state=seed), None, None)
        add("SK", 200, seed, sk_kmeans(X, K, S, 200, gamma, random_state=seed), None, None)
        for T in ([5] if quick else [5, 10, 20]):
            cluster, order = _cluster(X, seed)
            r = fk_kmeans(cluster, K, n_eigenvectors=S, n_random_features=D_FK, max_iter=T,
                          random_state=seed)
            add("FK", T, seed, r.labels, order, cluster)
        if seed < 3 or quick:
            for D in ([100] if quick else [100, 200, 400, 800]):
                cluster, order = _cluster(X, seed)
                r = rfk_kmeans(cluster, K, n_random_features=D, random_state=seed)
                add("RFK", D, seed, r.labels, order, cluster)
                cluster, order = _cluster(X, seed)
                r = rfk_kmeans(cluster, K, n_random_features=D, n_refine=0, random_state=seed)
                add("RFK no refine", D, seed, r.labels, order, cluster)
            for m in ([100] if quick else [100, 200, 400]):
                cluster, order = _cluster(X, seed)
                r = distributed_spectral_clustering(cluster, K, n_components=S, n_landmarks=m,
                                                    random_state=seed)
                add("CE PCA", m, seed, r.labels, order, cluster)
            for rate in ([0.4] if quick else [0.2, 0.4, 0.6]):
                cluster, order = _cluster(X, seed)
                r = fk_kmeans(cluster, K, n_eigenvectors=S, n_random_features=D_FK,
                              max_iter=20 if not quick else 5, dropout=rate, random_state=seed)
                add(f"FK dropout {rate}", 20, seed, r.labels, order, cluster)
    return rows


def recovery_runs(X, T, name):
    """Figure 1 and 2: recovery error and uploads per iteration, with and without CEM."""
    gamma = gamma_rule(X)
    Kmat = make_kernel("rbf", gamma=gamma)(X, X)
    n = X.shape[0]
    rows = []
    cluster, order = _cluster(X, 0)
    fk = fk_kmeans(cluster, K, n_eigenvectors=S, n_random_features=D_FK, max_iter=T,
                   gamma=gamma, random_state=0, record_estimates=True)
    plain_cluster, _ = _cluster(X, 0)
    plain = dspgd_without_cem(plain_cluster, K, S, gamma=gamma, n_random_features=D_FK,
                              max_iter=T, random_state=0)
    Ko = Kmat[np.ix_(order, order)]
    w, U = sla.eigh(Ko, subset_by_index=[n - S, n - 1])
    K_hat = (U * w) @ U.T
    for t in range(T):
        for variant, H, up, steps in [
            ("CEM", fk.dspgd.estimates[t], fk.dspgd.upload_words[t], fk.dspgd.lanczos_steps[t]),
            ("no CEM", plain.estimates[t], plain.upload_words[t], plain.lanczos_steps[t]),
        ]:
            err = np.linalg.norm(H @ H.T - K_hat) ** 2 / n**2
            rows.append(dict(data=name, n=n, variant=variant, t=t + 1, recovery_error=err,
                             upload_words=up, lanczos_steps=steps))
    return rows


def scaling_words(quick):
    """Fit words of FK k-means on n and 2n points of the mixture (exact ledger counts)."""
    n = 1000 if quick else 4000
    out = {}
    for size in (n, 2 * n):
        X, _ = make_gaussian_mixture(size, random_state=0, return_labels=True)
        cluster, _ = _cluster(X, 0)
        r = fk_kmeans(cluster, K, n_eigenvectors=S, n_random_features=D_FK, max_iter=10,
                      random_state=0)
        step = {m.words for m in cluster.ledger.rounds("fit") if m.round == "dspgd: lanczos step"}
        out[size] = (cluster.ledger.total_words(), cluster.ledger.upload_words(),
                     sorted(step), sum(r.dspgd.lanczos_steps))
    return out


def plot(rows, recovery, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 4, figsize=(20, 4.5))
    for (name, variant), style in zip(
        sorted({(r["data"], r["variant"]) for r in recovery}), ["-", "--", "-.", ":"], strict=False
    ):
        pts = [r for r in recovery if r["data"] == name and r["variant"] == variant]
        ax[0].plot([p["t"] for p in pts], [p["recovery_error"] for p in pts], style,
                   label=f"{name} {variant}")
        ax[1].plot([p["t"] for p in pts], [p["upload_words"] for p in pts], style,
                   label=f"{name} {variant}")
    ts = np.arange(1, max(r["t"] for r in recovery) + 1)
    first = recovery[0]["recovery_error"]
    ax[0].plot(ts, first / ts, "k:", label="O(1/t)")
    ax[0].set(xlabel="iteration t", ylabel="||K_t - K_hat||_F^2 / N^2", yscale="log")
    ax[1].set(xlabel="iteration t", ylabel="upload words", yscale="log")
    for a in ax[:2]:
        a.legend(fontsize=7)
    for method, marker in [("FK", "o"), ("RFK", "s"), ("RFK no refine", "x"), ("CE PCA", "^")]:
        params = sorted({r["param"] for r in rows if r["method"] == method})
        xs = [np.mean([r["upload_words"] for r in rows if r["method"] == method
                       and r["param"] == p]) for p in params]
        ys = [np.mean([r["nmi"] for r in rows if r["method"] == method and r["param"] == p])
              for p in params]
        ax[2].plot(xs, ys, marker=marker, label=method)
    for method, color in [("CK", "k"), ("SK", "gray")]:
        ax[2].axhline(np.mean([r["nmi"] for r in rows if r["method"] == method]), color=color,
                      linestyle="--", label=f"{method} (centralised)")
    ax[2].set(xlabel="upload words", ylabel="NMI", xscale="log", title="digits")
    ax[2].legend(fontsize=7)
    rates = [0.0] + sorted({float(r["method"].split()[-1]) for r in rows
                            if r["method"].startswith("FK dropout")})
    means = [np.mean([r["nmi"] for r in rows if r["method"] == "FK" and r["param"] == 20
                      and r["seed"] < 3] or [np.nan])]
    means += [np.mean([r["nmi"] for r in rows if r["method"] == f"FK dropout {q}"])
              for q in rates[1:]]
    ax[3].plot(rates, means, "o-")
    ax[3].set(xlabel="client dropout rate", ylabel="NMI (FK k-means, T = 20)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    args = parser.parse_args(argv)
    OUT.mkdir(parents=True, exist_ok=True)
    X, y = load_digits_standardized()
    seeds = [0] if args.quick else list(range(5))
    if args.quick:
        X, y = X[:600], y[:600]
    rows = clustering_runs(X, y, seeds, args.quick)
    T = 5 if args.quick else 20
    recovery = recovery_runs(X, T, "digits")
    Xm, _ = make_gaussian_mixture(600 if args.quick else 3000, random_state=1,
                                  return_labels=True)
    recovery += recovery_runs(Xm, 3 if args.quick else 10, "mixture")
    scaling = scaling_words(args.quick)
    write_csv(OUT / "runs.csv", rows)
    write_csv(OUT / "recovery.csv", recovery)
    plot(rows, recovery, OUT / "federated.png")
    summary(rows, recovery, scaling, OUT / "summary.md", args.quick)


def _mean(rows, method, param=None, key="nmi", seeds=None):
    vals = [r[key] for r in rows if r["method"] == method and (param is None
            or r["param"] == param) and (seeds is None or r["seed"] in seeds)]
    return float(np.mean(vals))


def summary(rows, recovery, scaling, path, quick):
    T = 5 if quick else 20
    ck, fk = _mean(rows, "CK"), _mean(rows, "FK", T)
    fk_up = _mean(rows, "FK", T, "upload_words")
    lines = ["# Federated kernel k-means (paper 003) — benchmark summary", "",
             f"{'Quick smoke run. ' if quick else ''}Digits (standardised), M = {M} clients, "
             f"k = {K}, s = {S}, D = {D_FK}, coreset C = 1000, gamma by the paper's rule.", "",
             "| method | setting | mean NMI | mean upload words | raw-point words |",
             "| --- | --- | --- | --- | --- |"]
    for method in dict.fromkeys(r["method"] for r in rows):
        for param in sorted({r["param"] for r in rows if r["method"] == method}):
            lines.append(f"| {method} | {param} | {_mean(rows, method, param):.4f} | "
                         f"{_mean(rows, method, param, 'upload_words'):,.0f} | "
                         f"{_mean(rows, method, param, 'raw_point_words'):,.0f} |")
    rfk = [(f"{m} D = {p}", _mean(rows, m, p), _mean(rows, m, p, "upload_words"))
           for m in ("RFK", "RFK no refine")
           for p in sorted({r["param"] for r in rows if r["method"] == m})]
    best_rfk = max(rfk, key=lambda x: x[1])
    lines += ["", f"* FK k-means (T = {T}) NMI {fk:.4f} vs CK k-means {ck:.4f}: "
              f"difference {fk - ck:+.4f} (mean of the same seeds).",
              f"* Best RFK k-means: {best_rfk[0]}, NMI {best_rfk[1]:.4f} with "
              f"{best_rfk[2]:,.0f} upload words; FK uploads {fk_up:,.0f} "
              f"({fk_up / best_rfk[2]:.2f} x) for NMI {fk:.4f}."]
    for name in dict.fromkeys(r["data"] for r in recovery):
        cem = [r for r in recovery if r["data"] == name and r["variant"] == "CEM"]
        plain = [r for r in recovery if r["data"] == name and r["variant"] == "no CEM"]
        ratio = np.mean([p["upload_words"] for p in plain]) / np.mean(
            [c["upload_words"] for c in cem])
        lines.append(f"* {name} (N = {cem[0]['n']}): uploads per iteration without / with CEM "
                     f"= {ratio:.1f} x; recovery error at t = 1 and t = {len(cem)}: "
                     f"{cem[0]['recovery_error']:.2e} -> {cem[-1]['recovery_error']:.2e} (CEM), "
                     f"{plain[0]['recovery_error']:.2e} -> {plain[-1]['recovery_error']:.2e} "
                     "(no CEM).")
    (n1, a), (n2, b) = sorted(scaling.items())
    lines.append(f"* Mixture, n = {n1:,} vs {n2:,} (T = 10): fit words {a[0]:,} vs {b[0]:,} "
                 f"({b[0] / a[0]:.3f} x); words of one Lanczos step per client {a[2]} vs "
                 f"{b[2]} (D + r_t, independent of n); Lanczos steps {a[3]} vs {b[3]}.")
    lines.append("* No raw points in FK k-means' ledger: "
                 f"{_mean(rows, 'FK', key='raw_point_words'):.0f} words.")
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
