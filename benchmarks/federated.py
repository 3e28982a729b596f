"""Benchmark: federated kernel k-means (paper 003) against CK, SK, RFK k-means and CE PCA.

    python benchmarks/federated.py            # the real run (minutes, one thread)
    python benchmarks/federated.py --quick    # a small smoke run

Writes ``runs.csv``, ``recovery.csv``, ``federated.png`` and ``summary.md`` under
``benchmarks/results/federated/``. Figures 1-3 of 003 in spirit, on scikit-learn's
digits (standardised, 10 classes, M = 5 clients, uniform split) and a generated
Gaussian mixture (d = 28, 10 clusters), every clustering setting over 5 seeds:

* the normalised recovery error ``||K_t - K_hat||_F^2 / N^2`` per iteration for
  DSPGD with and without CEM (Figure 1);
* upload words per DSPGD iteration with and without CEM (Figure 2);
* NMI against upload words for FK k-means (T in 5, 10, 20), RFK k-means (D in
  50..1600) and CE PCA (|Y| in 100..400), with CK and SK k-means as reference
  lines (Figure 3), like for like: every distributed method once with
  ``n_refine = 0`` (the coreset k-means of Balcan et al. alone, the papers'
  protocols) and once with ``n_refine = 10`` (Lloyd refinement over all points,
  this library's default, not in the papers);
* a diagnostic: FK's embedding ``H`` (T = 20) gathered and clustered centrally
  with scikit-learn's k-means (``n_init = 10``), to separate the embedding from
  the distributed k-means;
* NMI and the top-s eigenvalue estimates of DSPGD against the client dropout
  rate (0, 0.2, 0.4, 0.6; T = 20, n_refine = 10);
* fit words on n and 2n points of the mixture (exact counts).
All words are counted by the runtime's ledger (phase 'fit').
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import scipy.linalg as sla
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from kernelscale.backends.local import LocalCluster
from kernelscale.bench import write_rows
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

OUT = Path(__file__).parent / "results" / "federated"
K, S, D_FK, M = 10, 10, 50, 5
REFINES = (0, 10)
FIELDS = ["method", "param", "n_refine", "dropout", "seed", "nmi", "upload_words",
          "total_words", "raw_point_words", "eig_top_sum"]


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
            raw_point_words=ledger.total_words(kind="raw_points") if ledger else "",
            eig_top_sum=eig))
        print(rows[-1], flush=True)

    def fk(seed, T, n_refine, dropout=0.0):
        cluster, order = _cluster(X, seed)
        r = fk_kmeans(cluster, K, n_eigenvectors=S, n_random_features=D_FK, max_iter=T,
                      n_refine=n_refine, dropout=dropout, random_state=seed)
        add("FK", T, seed, r.labels, order, cluster, n_refine, dropout,
            float(r.dspgd.eigenvalues.sum()))
        return cluster, order

    for seed in seeds:
        add("CK", S, seed, ck_kmeans(X, K, S, gamma, random_state=seed))
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
                                                    n_refine=n_refine, random_state=seed)
                add("CE PCA", m, seed, r.labels, order, cluster, n_refine)
        for rate in rates:  # rate 0 is the FK run above (T_drop, n_refine = 10)
            fk(seed, T_drop, 10, rate)
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


def _select(rows, method, param=None, n_refine=None, dropout=None):
    return [r for r in rows if r["method"] == method
            and (param is None or r["param"] == param)
            and (n_refine is None or r["n_refine"] == n_refine)
            and (dropout is None or r["dropout"] == dropout)]


def _stat(rows, key="nmi", **sel):
    """Mean and sample standard deviation (ddof = 1) over the seeds of a setting."""
    vals = np.array([r[key] for r in _select(rows, **sel)], dtype=float)
    return float(vals.mean()), _sd(vals)


def _params(rows, method):
    return sorted({r["param"] for r in rows if r["method"] == method})


def _eig_ratios(rows, rate, T):
    """Per seed: DSPGD's top-s eigenvalue sum at dropout ``rate`` / at no dropout."""
    base = {r["seed"]: r["eig_top_sum"] for r in _select(rows, "FK", T, 10, 0.0)}
    return np.array([r["eig_top_sum"] / base[r["seed"]]
                     for r in _select(rows, "FK", T, 10, rate)])


def plot(rows, recovery, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 3, figsize=(18, 9))
    ax = axes.ravel()
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
    ax[0].set(xlabel="iteration t", ylabel="||K_t - K_hat||_F^2 / N^2", yscale="log",
              title="recovery error (Figure 1)")
    ax[1].set(xlabel="iteration t", ylabel="upload words", yscale="log",
              title="uploads per DSPGD iteration (Figure 2)")
    for a in ax[:2]:
        a.legend(fontsize=7)
    T = max(_params(rows, "FK"))
    for a, n_refine in zip(ax[3:5], REFINES, strict=True):
        for method, marker in [("FK", "o"), ("RFK", "s"), ("CE PCA", "^")]:
            params = _params(rows, method)
            sel = dict(n_refine=n_refine, dropout=0.0 if method == "FK" else None)
            xs = [_stat(rows, "upload_words", method=method, param=p, **sel)[0] for p in params]
            ys = [_stat(rows, method=method, param=p, **sel) for p in params]
            a.errorbar(xs, [m for m, _ in ys], yerr=[e for _, e in ys], marker=marker,
                       capsize=3, label=method)
            for x, (yv, _), p in zip(xs, ys, params, strict=True):
                a.annotate(str(p), (x, yv), fontsize=6, xytext=(3, 3), textcoords="offset points")
        for method, color in [("CK", "k"), ("SK", "gray")]:
            a.axhline(_stat(rows, method=method)[0], color=color, linestyle="--",
                      label=f"{method} (centralised)")
        a.set(xlabel="upload words", ylabel="NMI (mean ± std over seeds)", xscale="log",
              title=f"digits, n_refine = {n_refine}"
              + (" (papers' protocols)" if n_refine == 0 else " (Lloyd refinement)"))
        a.legend(fontsize=7)
    lo = min(a.get_ylim()[0] for a in ax[3:5])
    hi = max(a.get_ylim()[1] for a in ax[3:5])
    for a in ax[3:5]:
        a.set_ylim(lo, hi)
    rates = sorted({r["dropout"] for r in _select(rows, "FK", T, 10)})
    stats = [_stat(rows, method="FK", param=T, n_refine=10, dropout=q) for q in rates]
    ax[2].errorbar(rates, [m for m, _ in stats], yerr=[e for _, e in stats], marker="o",
                   capsize=3)
    ax[2].set(xlabel="client dropout rate", ylabel=f"NMI (FK k-means, T = {T}, n_refine = 10)",
              title="dropout: NMI (mean ± std)")
    ratios = [_eig_ratios(rows, q, T) for q in rates]
    ax[5].errorbar(rates, [r.mean() for r in ratios], yerr=[_sd(r) for r in ratios], marker="o",
                   capsize=3, label="with N / N_answered rescaling")
    ax[5].plot(rates, [1 - q for q in rates], "k:", label="1 - p (no rescaling, first order)")
    ax[5].set(xlabel="client dropout rate", ylabel="top-s eigenvalue sum / no dropout",
              title="dropout: DSPGD eigenvalue estimates")
    ax[5].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS/OpenMP threads (1: fastest on a small shared machine)")
    args = parser.parse_args(argv)
    with threadpool_limits(limits=args.threads):
        run(args)


def run(args):
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
    n = X.shape[0]
    exact = float(sla.eigvalsh(make_kernel("rbf", gamma=gamma_rule(X))(X, X),
                               subset_by_index=[n - S, n - 1]).sum())
    write_rows(OUT / "runs.csv", rows)
    write_rows(OUT / "recovery.csv", recovery)
    plot(rows, recovery, OUT / "federated.png")
    summary(rows, recovery, scaling, exact, OUT / "summary.md", args.quick, len(seeds))


def _sd(values):
    return float(values.std(ddof=1)) if values.size > 1 else 0.0


def _fmt(mean_std):
    return f"{mean_std[0]:.3f} ± {mean_std[1]:.3f}"


def summary(rows, recovery, scaling, exact, path, quick, n_seeds):
    T = max(_params(rows, "FK"))
    lines = ["# Federated kernel k-means (paper 003) — benchmark summary", "",
             f"{'Quick smoke run. ' if quick else ''}Digits (standardised), M = {M} clients, "
             f"k = {K}, s = {S}, FK's D = {D_FK}, coreset C = 1000, gamma by the paper's rule. "
             f"NMI: mean ± sample std over {n_seeds} seeds (0..{n_seeds - 1}); words: mean "
             "upload words of the fit (worker -> master, phase 'fit'). `n_refine = 0` is the "
             "coreset k-means of Balcan et al. alone (the papers' protocols); "
             "`n_refine = 10` adds 10 Lloyd rounds over all points (not in the papers).", "",
             "## Centralised references", "",
             "| method | NMI |", "| --- | --- |",
             f"| CK k-means (exact top-{S} eigenvectors, k-means n_init = 10) | "
             f"{_fmt(_stat(rows, method='CK'))} |",
             f"| SK k-means (Nystroem, 200 landmarks) | {_fmt(_stat(rows, method='SK'))} |",
             f"| diagnostic: FK's H (T = {T}) gathered, central k-means n_init = 10 | "
             f"{_fmt(_stat(rows, method='FK H + central k-means'))} |", ""]
    for n_refine in REFINES:
        title = ("papers' protocols" if n_refine == 0 else "Lloyd refinement, library default")
        lines += [f"## Like for like, n_refine = {n_refine} ({title})", "",
                  "| method | setting | NMI | upload words | raw-point words |",
                  "| --- | --- | --- | --- | --- |"]
        for method, label in [("FK", "T"), ("RFK", "D"), ("CE PCA", "landmarks")]:
            sel = dict(method=method, n_refine=n_refine, dropout=0.0 if method == "FK" else None)
            for p in _params(rows, method):
                lines.append(
                    f"| {method} | {label} = {p} | {_fmt(_stat(rows, param=p, **sel))} | "
                    f"{_stat(rows, 'upload_words', param=p, **sel)[0]:,.0f} | "
                    f"{_stat(rows, 'raw_point_words', param=p, **sel)[0]:,.0f} |")
        lines.append("")
    lines += ["## FK against RFK: words at equal NMI, NMI at equal words", "",
              "Smallest RFK D of the sweep whose mean NMI reaches FK's mean NMI, and the RFK "
              "D whose upload words are nearest FK's. Differences smaller than the stds "
              f"are not resolved by {n_seeds} seeds.", "",
              "| n_refine | FK T | FK NMI | FK words | RFK reaching it: D, NMI, words | "
              "FK / RFK words | RFK at nearest words: D, NMI, words |",
              "| --- | --- | --- | --- | --- | --- | --- |"]
    for n_refine in REFINES:
        rfk = [(D, _stat(rows, method="RFK", param=D, n_refine=n_refine),
                _stat(rows, "upload_words", method="RFK", param=D, n_refine=n_refine)[0])
               for D in _params(rows, "RFK")]
        for t in _params(rows, "FK"):
            sel = dict(method="FK", param=t, n_refine=n_refine, dropout=0.0)
            f_nmi, f_up = _stat(rows, **sel), _stat(rows, "upload_words", **sel)[0]
            reach = [r for r in rfk if r[1][0] >= f_nmi[0]]
            near = min(rfk, key=lambda r, f_up=f_up: abs(np.log(r[2] / f_up)))
            if reach:
                D, st, up = reach[0]
                reach_txt, ratio = f"{D}, {_fmt(st)}, {up:,.0f}", f"{f_up / up:.2f} x"
            else:
                reach_txt, ratio = f"none up to D = {rfk[-1][0]}", "-"
            lines.append(f"| {n_refine} | {t} | {_fmt(f_nmi)} | {f_up:,.0f} | {reach_txt} | "
                         f"{ratio} | {near[0]}, {_fmt(near[1])}, {near[2]:,.0f} |")
    ck = {r["seed"]: r["nmi"] for r in _select(rows, "CK")}
    lines += ["", "## FK against CK (acceptance: mean NMI within 0.03 of CK)", "",
              "| n_refine | FK T | mean FK - CK | per-seed FK - CK | within 0.03? |",
              "| --- | --- | --- | --- | --- |"]
    for n_refine in REFINES:
        for t in _params(rows, "FK"):
            d = np.array([r["nmi"] - ck[r["seed"]]
                          for r in _select(rows, "FK", t, n_refine, 0.0)])
            lines.append(f"| {n_refine} | {t} | {d.mean():+.3f} | "
                         f"{', '.join(f'{v:+.3f}' for v in d)} | "
                         f"{'yes' if d.mean() >= -0.03 else 'no'} |")
    rates = sorted({r["dropout"] for r in _select(rows, "FK", T, 10)})
    lines += ["", f"## Client dropout (FK T = {T}, n_refine = 10)", "",
              f"Eigenvalues: sum of DSPGD's top-{S} eigenvalue estimates per seed, divided by "
              f"the same seed's no-dropout run, and by the exact top-{S} sum of the kernel "
              f"matrix ({exact:,.1f}).", "",
              "| dropout | NMI | upload words | eigenvalue sum / no dropout | / exact |",
              "| --- | --- | --- | --- | --- |"]
    for q in rates:
        ratio = _eig_ratios(rows, q, T)
        sel = dict(method="FK", param=T, n_refine=10, dropout=q)
        to_exact = np.array([r["eig_top_sum"] for r in _select(rows, **sel)]) / exact
        lines.append(f"| {q} | {_fmt(_stat(rows, **sel))} | "
                     f"{_stat(rows, 'upload_words', **sel)[0]:,.0f} | "
                     f"{_fmt((ratio.mean(), _sd(ratio)))} | "
                     f"{_fmt((to_exact.mean(), _sd(to_exact)))} |")
    lines += ["", "## Communication of DSPGD", ""]
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
    raw = sum(r["raw_point_words"] for r in _select(rows, "FK"))
    lines.append(f"* Raw-point words in all FK k-means ledgers: {raw}.")
    path.write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
