"""Benchmark: federated kernel k-means (paper 003) against CK, SK, RFK k-means and CE PCA.

    python benchmarks/federated.py            # the real run (minutes, one thread)
    python benchmarks/federated.py --quick    # a small smoke run

Writes ``runs.csv``, ``recovery.csv``, ``federated.png`` and ``summary.md`` under
``benchmarks/results/federated/``. Figures 1-3 of 003 in spirit, on scikit-learn's
digits (standardised, 10 classes, M = 5 clients, uniform split) and a generated
Gaussian mixture (d = 28, 10 clusters), every clustering setting over 5 seeds:

* the normalised recovery error ``||K_t - K_hat||_F^2 / N^2`` per iteration for
  DSPGD with and without CEM, mean and standard deviation over 5 runs (Figure 1);
* upload words per DSPGD iteration with and without CEM (Figure 2);
* the Lanczos steps per iteration without (Q0) and with (Q1) CEM (Figure 4) and the
  rank r_t of Z_t (Figure 5), over the same runs;
* NMI against upload words for FK k-means (T in 5, 10, 20), RFK k-means (D in
  50..1600) and CE PCA (|Y| in 100..400), with CK and SK k-means as reference
  lines and 95% confidence intervals of the mean as error bars (Figure 3), like
  for like: every distributed method once with ``n_refine = 0`` (the coreset
  k-means of Balcan et al. alone, the papers' protocols) and once with
  ``n_refine = 10`` (Lloyd refinement over all points, this library's default,
  not in the papers);
* a diagnostic: FK's embedding ``H`` (T = 20) gathered and clustered centrally
  with scikit-learn's k-means (``n_init = 10``), to separate the embedding from
  the distributed k-means;
* NMI and the top-s eigenvalue estimates of DSPGD against the client dropout
  rate (0, 0.2, 0.4, 0.6; T = 20, n_refine = 10);
* fit words on n and 2n points of the mixture (exact counts).
Every fit runs the papers' own rounds (``protocol="paper"``: a round per Lanczos step;
``benchmarks/rounds.py`` compares them with the defaults). All words are counted by the
runtime's ledger (phase 'fit'). The plot and the summary
(tables and verdicts) are drawn and written by :mod:`federated_shared.report`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import scipy.linalg as sla
from federated_shared.report import D_FK, REFINES, K, M, S, plot, summary
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from kernelscale.backends.local import LocalCluster
from kernelscale.bench import write_rows
from kernelscale.bench.clustering import ck_embedding, ck_labels
from kernelscale.bench.scripts import read_rows
from kernelscale.datasets import load_digits_standardized, make_gaussian_mixture
from kernelscale.federated import (
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

OUT = Path(__file__).parent / "results" / "federated"


def _cluster(X, seed):
    idx = make_partition(X.shape[0], M, "uniform", random_state=seed)
    return LocalCluster(split(X, idx)), np.concatenate(idx)


def _embedding(state):
    return state.embedding


def clustering_runs(X, y, seeds, quick):
    rows = []
    gamma = gamma_rule(X)
    Ts = [5] if quick else [5, 10, 20]
    Ds = [100] if quick else [50, 100, 200, 400, 800, 1600]
    Ms = [100] if quick else [100, 200, 400]
    rates = [0.4] if quick else [0.2, 0.4, 0.6]
    T_drop = Ts[-1]

    def add(method, param, seed, labels, order=None, cluster=None, n_refine="", dropout="",
            eig=""):
        truth = y if order is None else y[order]
        ledger = cluster.ledger if cluster is not None else None
        rows.append(dict(
            method=method, param=param, n_refine=n_refine, dropout=dropout, seed=seed,
            nmi=nmi(truth, labels),
            upload_words=ledger.upload_words() if ledger else "",
            total_words=ledger.total_words() if ledger else "",
            raw_point_words=ledger.upload_words(kind="raw_points") if ledger else "",
            eig_top_sum=eig))
        print(rows[-1], flush=True)

    def fk(seed, T, n_refine, dropout=0.0):
        cluster, order = _cluster(X, seed)
        r = fk_kmeans(cluster, K, n_eigenvectors=S, n_random_features=D_FK, max_iter=T,
                      n_refine=n_refine, dropout=dropout, random_state=seed, protocol="paper")
        add("FK", T, seed, r.labels, order, cluster, n_refine, dropout,
            float(r.dspgd.eigenvalues.sum()))
        return cluster, order

    H_ck = ck_embedding(X, S, gamma)  # the shared reference (kernelscale.bench.clustering)
    for seed in seeds:
        add("CK", S, seed, ck_labels(H_ck, K, seed))
        add("SK", 200, seed, sk_kmeans(X, K, S, 200, gamma, random_state=seed))
        for n_refine in REFINES:
            for T in Ts:
                cluster, order = fk(seed, T, n_refine)
                if T == Ts[-1] and n_refine == 0:
                    # diagnostic: FK's H clustered centrally (not a federated protocol)
                    with cluster.phase("evaluate"):
                        H = np.vstack(cluster.broadcast_map(_embedding, round="gather H"))
                    labels = KMeans(K, n_init=10, random_state=seed).fit(H).labels_
                    add("FK H + central k-means", T, seed, labels, order)
            for D in Ds:
                cluster, order = _cluster(X, seed)
                r = rfk_kmeans(cluster, K, n_random_features=D, n_refine=n_refine,
                               random_state=seed)
                add("RFK", D, seed, r.labels, order, cluster, n_refine)
            for m in Ms:
                cluster, order = _cluster(X, seed)
                r = distributed_spectral_clustering(cluster, K, n_components=S, n_landmarks=m,
                                                    n_refine=n_refine, random_state=seed,
                                                    protocol="paper")
                add("CE PCA", m, seed, r.labels, order, cluster, n_refine)
        for rate in rates:  # rate 0 is the FK run above (T_drop, n_refine = 10)
            fk(seed, T_drop, 10, rate)
    return rows


def recovery_runs(X, T, name, seeds):
    """Figures 1, 2, 4 and 5: per iteration, with and without CEM, over ``seeds``.

    The recovery error ``||K_t - K_hat||_F^2 / N^2``, upload words, Lanczos steps
    (Q1 with CEM, Q0 without) and ``r_t``, the rank of ``Z_t`` (Lanczos runs on a
    matrix of size ``D + r_t`` with CEM; ``r_1 = 0``). Each seed draws its own
    split and random features.
    """
    gamma = gamma_rule(X)
    Kmat = make_kernel("rbf", gamma=gamma)(X, X)
    n = X.shape[0]
    w, U = sla.eigh(Kmat, subset_by_index=[n - S, n - 1])
    K_hat = (U * w) @ U.T
    rows = []
    for seed in seeds:
        cluster, order = _cluster(X, seed)
        fk = fk_kmeans(cluster, K, n_eigenvectors=S, n_random_features=D_FK, max_iter=T,
                       gamma=gamma, random_state=seed, record_estimates=True, protocol="paper")
        plain_cluster, _ = _cluster(X, seed)
        plain = dspgd_without_cem(plain_cluster, K, S, gamma=gamma, n_random_features=D_FK,
                                  max_iter=T, random_state=seed)
        Ko = K_hat[np.ix_(order, order)]
        for variant, run in (("CEM", fk.dspgd), ("no CEM", plain)):
            r_t = [0, *run.ranks[:-1]]
            for t in range(T):
                H = run.estimates[t]
                err = np.linalg.norm(H @ H.T - Ko) ** 2 / n**2
                rows.append(dict(data=name, n=n, variant=variant, seed=seed, t=t + 1,
                                 recovery_error=err, upload_words=run.upload_words[t],
                                 lanczos_steps=run.lanczos_steps[t], rank=r_t[t]))
    return rows


def scaling_words(quick):
    """Fit words of FK k-means on n and 2n points of the mixture (exact ledger counts)."""
    n = 1000 if quick else 4000
    out = {}
    for size in (n, 2 * n):
        X, _ = make_gaussian_mixture(size, random_state=0, return_labels=True)
        cluster, _ = _cluster(X, 0)
        r = fk_kmeans(cluster, K, n_eigenvectors=S, n_random_features=D_FK, max_iter=10,
                      random_state=0, protocol="paper")
        step = {m.words for m in cluster.ledger.rounds("fit") if m.round == "dspgd: lanczos step"}
        out[size] = (int(cluster.ledger.total_words()), int(cluster.ledger.upload_words()),
                     sorted(int(w) for w in step), int(sum(r.dspgd.lanczos_steps)))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run (to OUT/quick)")
    parser.add_argument("--summary-only", action="store_true",
                        help="summary.md and the plot from the CSV files already written")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS/OpenMP threads (1: fastest on a small shared machine)")
    args = parser.parse_args(argv)
    with threadpool_limits(limits=args.threads):
        run(args)


def run(args):
    out = OUT / "quick" if args.quick else OUT
    out.mkdir(parents=True, exist_ok=True)
    if args.summary_only:
        rows, recovery = read_rows(out / "runs.csv"), read_rows(out / "recovery.csv")
        extra = json.loads((out / "scaling.json").read_text())
    else:
        X, y = load_digits_standardized()
        seeds = [0] if args.quick else list(range(5))
        if args.quick:
            X, y = X[:600], y[:600]
        rows = clustering_runs(X, y, seeds, args.quick)
        write_rows(out / "runs.csv", rows)
        recovery = recovery_runs(X, 5 if args.quick else 20, "digits", seeds)
        Xm, _ = make_gaussian_mixture(600 if args.quick else 3000, random_state=1,
                                      return_labels=True)
        recovery += recovery_runs(Xm, 3 if args.quick else 10, "mixture", seeds)
        write_rows(out / "recovery.csv", recovery)
        n = X.shape[0]
        exact = float(sla.eigvalsh(make_kernel("rbf", gamma=gamma_rule(X))(X, X),
                                   subset_by_index=[n - S, n - 1]).sum())
        extra = {"exact_top_sum": exact, "scaling": scaling_words(args.quick)}
        (out / "scaling.json").write_text(json.dumps(extra, indent=1) + "\n")
    scaling = {int(n): tuple(v) for n, v in extra["scaling"].items()}
    plot(rows, recovery, out / "federated.png")
    summary(rows, recovery, scaling, extra["exact_top_sum"], out / "summary.md", args.quick,
            len({r["seed"] for r in rows}))


if __name__ == "__main__":
    main()
