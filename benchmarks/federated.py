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
All words are counted by the runtime's ledger (phase 'fit').
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import scipy.linalg as sla
from sklearn.cluster import KMeans
from threadpoolctl import threadpool_limits

from kernelscale.backends.local import LocalCluster
from kernelscale.bench import write_rows
from kernelscale.bench.clustering import CK_RESTARTS, ck_embedding, ck_labels
from kernelscale.bench.equal_words import ci95_halfwidth
from kernelscale.bench.scripts import read_rows, verdict
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
            raw_point_words=ledger.upload_words(kind="raw_points") if ledger else "",
            eig_top_sum=eig))
        print(rows[-1], flush=True)

    def fk(seed, T, n_refine, dropout=0.0):
        cluster, order = _cluster(X, seed)
        r = fk_kmeans(cluster, K, n_eigenvectors=S, n_random_features=D_FK, max_iter=T,
                      n_refine=n_refine, dropout=dropout, random_state=seed)
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
                                                    n_refine=n_refine, random_state=seed)
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
                       gamma=gamma, random_state=seed, record_estimates=True)
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
                      random_state=0)
        step = {m.words for m in cluster.ledger.rounds("fit") if m.round == "dspgd: lanczos step"}
        out[size] = (int(cluster.ledger.total_words()), int(cluster.ledger.upload_words()),
                     sorted(int(w) for w in step), int(sum(r.dspgd.lanczos_steps)))
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


def _ci(rows, **sel):
    """Mean NMI and the half-width of its 95% confidence interval over the seeds."""
    mean, sd = _stat(rows, **sel)
    return mean, ci95_halfwidth(sd, len(_select(rows, **sel)))


def recovery_curves(recovery, key):
    """``{(data, variant): (t, mean, std)}`` of a recovery.csv column over the seeds."""
    out = {}
    for name in dict.fromkeys(r["data"] for r in recovery):
        for variant in ("CEM", "no CEM"):
            sub = [r for r in recovery if r["data"] == name and r["variant"] == variant]
            ts = sorted({r["t"] for r in sub})
            vals = [np.array([r[key] for r in sub if r["t"] == t], dtype=float) for t in ts]
            out[name, variant] = (np.array(ts), np.array([v.mean() for v in vals]),
                                  np.array([_sd(v) for v in vals]))
    return out


def plot(rows, recovery, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 3, figsize=(18, 14))
    ax = axes.ravel()
    n_runs = len({r["seed"] for r in recovery})
    styles = {("digits", "CEM"): ("C0", "-"), ("digits", "no CEM"): ("C0", "--"),
              ("mixture", "CEM"): ("C1", "-"), ("mixture", "no CEM"): ("C1", "--")}
    panels = [(0, "recovery_error", "||K_t - K_hat||_F^2 / N^2 (mean, band: ± std)",
               f"Figure 1: recovery error, mean over {n_runs} runs", "log"),
              (2, "upload_words", "upload words in iteration t (mean)",
               "Figure 2: uploads per DSPGD iteration", "log"),
              (3, "lanczos_steps", "Lanczos steps in iteration t (mean ± std)",
               "Figure 4: Lanczos steps, Q0 (no CEM, dashed) vs Q1 (CEM, solid)", "linear"),
              (4, "rank", "r_t = rank of Z_t (mean ± std)",
               f"Figure 5: r_t (CEM's Lanczos size is D + r_t; s = {S})", "linear")]
    for i, key, ylabel, title, scale in panels:
        for (name, variant), (ts, mean, sd) in recovery_curves(recovery, key).items():
            color, style = styles[name, variant]
            label = f"{name}, {variant}"
            if key == "rank" and variant == "no CEM":
                continue
            ax[i].plot(ts, mean, linestyle=style, color=color, marker=".", label=label)
            if key == "recovery_error":
                ax[i].fill_between(ts, np.maximum(mean - sd, mean * 0.05), mean + sd,
                                   color=color, alpha=0.15)
                ax[1].plot(ts, sd, linestyle=style, color=color, marker=".", label=label)
            elif key != "upload_words":
                ax[i].fill_between(ts, mean - sd, mean + sd, color=color, alpha=0.15)
        ax[i].set(xlabel="iteration t", ylabel=ylabel, yscale=scale, title=title)
        ax[i].legend(fontsize=7)
    for name, (ts, mean, _) in recovery_curves(recovery, "recovery_error").items():
        if name[1] == "CEM":
            ax[0].plot(ts, mean[0] / ts, ":", color=styles[name][0],
                       label=f"{name[0]}: err_1 / t (O(1/t))")
    ax[0].legend(fontsize=7)
    ax[1].set(xlabel="iteration t", ylabel="standard deviation over runs", yscale="log",
              title=f"Figure 1: standard deviation of the recovery error ({n_runs} runs)")
    ax[1].legend(fontsize=7)
    T = max(_params(rows, "FK"))
    n_seeds = len({r["seed"] for r in rows})
    for a, n_refine in zip(ax[6:8], REFINES, strict=True):
        for method, marker, knob in [("FK", "o", "T"), ("RFK", "s", "D"), ("CE PCA", "^", "|Y|")]:
            params = _params(rows, method)
            sel = dict(n_refine=n_refine, dropout=0.0 if method == "FK" else None)
            xs = [_stat(rows, "upload_words", method=method, param=p, **sel)[0] for p in params]
            ys = [_ci(rows, method=method, param=p, **sel) for p in params]
            a.errorbar(xs, [m for m, _ in ys], yerr=[e for _, e in ys], marker=marker,
                       capsize=3, label=f"{method} (points: {knob})")
            for x, (yv, _), p in zip(xs, ys, params, strict=True):
                a.annotate(f"{knob}={p}", (x, yv), fontsize=6, xytext=(3, 3),
                           textcoords="offset points")
        for method, color, style in [("CK", "k", "--"), ("SK", "gray", ":")]:
            a.axhline(_stat(rows, method=method)[0], color=color, linestyle=style,
                      label=f"{method} (centralised) {_stat(rows, method=method)[0]:.3f}")
        a.set(xlabel="upload words", xscale="log",
              ylabel=f"NMI (mean, bars: 95% CI over {n_seeds} seeds)",
              title=f"Figure 3 on digits, n_refine = {n_refine}"
              + (" (papers' protocols)" if n_refine == 0 else " (Lloyd refinement)"))
        a.legend(fontsize=7, loc="lower right")
    lo = min(a.get_ylim()[0] for a in ax[6:8])
    hi = max(a.get_ylim()[1] for a in ax[6:8])
    for a in ax[6:8]:
        a.set_ylim(lo, hi)
    rates = sorted({r["dropout"] for r in _select(rows, "FK", T, 10)})
    stats = [_stat(rows, method="FK", param=T, n_refine=10, dropout=q) for q in rates]
    # NMI from 0 up, beside the centralised reference: a zoomed axis (0.62-0.67) made
    # differences within one standard deviation look like a collapse
    mean = np.array([m for m, _ in stats])
    std = np.array([e for _, e in stats])
    ax[5].errorbar(rates, mean, yerr=[np.minimum(std, mean), np.minimum(std, 1 - mean)],
                   marker="o", capsize=3, label=f"FK, T = {T}, n_refine = 10")
    for q, m in zip(rates, mean, strict=True):
        ax[5].annotate(f"{m:.3f}", (q, m), xytext=(5, -12), textcoords="offset points",
                       fontsize=8)
    ck = _stat(rows, method="CK")[0]
    ax[5].axhline(ck, color="k", linestyle="--", label=f"CK (centralised) {ck:.3f}")
    ax[5].set_ylim(0, 1)
    ax[5].set(xlabel="client dropout rate p", ylabel="NMI (mean ± std over seeds)",
              title="dropout: NMI against the dropout rate (axis from 0)")
    ax[5].legend(fontsize=7, loc="lower left")
    ratios = [_eig_ratios(rows, q, T) for q in rates]
    ax[8].errorbar(rates, [r.mean() for r in ratios], yerr=[_sd(r) for r in ratios], marker="o",
                   capsize=3, label="with N / N_answered rescaling")
    ax[8].plot(rates, [1 - q for q in rates], "k:", label="1 - p (no rescaling, first order)")
    ax[8].set(xlabel="client dropout rate", ylabel="top-s eigenvalue sum / no dropout",
              title="dropout: DSPGD eigenvalue estimates (mean ± std)")
    ax[8].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


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


def _sd(values):
    return float(values.std(ddof=1)) if values.size > 1 else 0.0


def _fmt(mean_std):
    return f"{mean_std[0]:.3f} ± {mean_std[1]:.3f}"


def dspgd_lines(recovery):
    """Verdicts on the paper's DSPGD figures, with their numbers, from recovery.csv."""
    lines = []
    err = recovery_curves(recovery, "recovery_error")
    steps = recovery_curves(recovery, "lanczos_steps")
    ups = recovery_curves(recovery, "upload_words")
    rank = recovery_curves(recovery, "rank")
    n_runs = len({r["seed"] for r in recovery})
    for name in dict.fromkeys(r["data"] for r in recovery):
        n = next(r["n"] for r in recovery if r["data"] == name)
        ts, cem, cem_sd = err[name, "CEM"]
        _, plain, plain_sd = err[name, "no CEM"]
        T = int(ts[-1])
        gap = np.maximum(cem, plain) / np.minimum(cem, plain)
        worst = int(np.argmax(gap))
        # O(1/t): the mean error stays below err_1 / t (the paper draws c / t above its curves)
        above = [int(t) for t, e in zip(ts, cem, strict=True) if e > cem[0] / t * 1.0001]
        q1, q0 = steps[name, "CEM"][1], steps[name, "no CEM"][1]
        qr = q0 / q1
        r_mean, r_sd = rank[name, "CEM"][1], rank[name, "CEM"][2]
        ratio = np.mean(ups[name, "no CEM"][1]) / np.mean(ups[name, "CEM"][1])
        lines += [
            f"### {name} (N = {n:,}, M = {M}, D = {D_FK}, s = {S}; {n_runs} runs, each its "
            "own split and random features)", "",
            f"* Figure 1, recovery error ||K_t - K_hat||_F^2 / N^2 (mean ± std over runs): "
            f"t = 1 {cem[0]:.2e} ± {cem_sd[0]:.1e}; t = {T} with CEM {cem[-1]:.2e} ± "
            f"{cem_sd[-1]:.1e}, without {plain[-1]:.2e} ± {plain_sd[-1]:.1e}.",
            "* O(1/t) convergence (mean error with CEM at or below err_1 / t at every t): "
            + (verdict(True) + "." if not above else
               f"{verdict(False)} (above err_1 / t at t = {', '.join(map(str, above))})."),
            f"* \"The curves of the two versions nearly overlap\" (read as: means within "
            f"1.25 x at every t): {verdict(gap.max() <= 1.25)}; the larger / smaller mean is "
            f"{gap.max():.2f} x at t = {int(ts[worst])} and {gap[-1]:.2f} x at t = {T} "
            f"(no CEM {'lower' if plain[-1] < cem[-1] else 'higher'} at t = {T}).",
            f"* Figure 2: uploads per iteration without / with CEM: {ratio:.1f} x "
            f"(the paper: CEM saves more than 98%, i.e. > 50 x; here "
            f"{100 * (1 - 1 / ratio):.0f}%: {verdict(ratio > 50)}).",
            f"* Figure 4, Lanczos steps per iteration: Q1 (CEM) {q1.min():.1f} to "
            f"{q1.max():.1f}, Q0 (no CEM) {q0.min():.1f} to {q0.max():.1f} (means over runs); "
            f"Q0 / Q1 from {qr.min():.2f} to {qr.max():.2f} (the paper: Q0 / Q1 close to 1; "
            f"within 0.5-2 at every t: {verdict(bool(np.all((qr >= 0.5) & (qr <= 2))))}).",
            f"* Figure 5, r_t (rank of Z_t; r_1 = 0): mean {r_mean[1]:.1f} at t = 2, "
            f"{r_mean[-1]:.1f} ± {r_sd[-1]:.1f} at t = {T}, largest mean {r_mean.max():.1f} "
            f"= {r_mean.max() / S:.1f} x s; over the last third of the iterations it moves "
            f"between {r_mean[-max(1, T // 3):].min():.1f} and "
            f"{r_mean[-max(1, T // 3):].max():.1f} (the paper: r_t converges to a constant "
            f"factor times s, far below N / M = {n // M:,}).", ""]
    return lines


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
             f"| CK k-means (exact top-{S} eigenvectors, the best of {CK_RESTARTS} k-means "
             "restarts: kernelscale.bench.clustering, as federated_real.py) | "
             f"{_fmt(_stat(rows, method='CK'))} |",
             f"| SK k-means (Nystroem, 200 landmarks) | {_fmt(_stat(rows, method='SK'))} |",
             f"| diagnostic: FK's H (T = {T}) gathered, central k-means n_init = 10 | "
             f"{_fmt(_stat(rows, method='FK H + central k-means'))} |", ""]
    for n_refine in REFINES:
        title = ("papers' protocols" if n_refine == 0 else "Lloyd refinement, library default")
        lines += [f"## Like for like, n_refine = {n_refine} ({title})", "",
                  "| method | setting | NMI | upload words | raw-point words uploaded |",
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
    within = {}
    for n_refine in REFINES:
        for t in _params(rows, "FK"):
            d = np.array([r["nmi"] - ck[r["seed"]]
                          for r in _select(rows, "FK", t, n_refine, 0.0)])
            within[n_refine, t] = d
            lines.append(f"| {n_refine} | {t} | {d.mean():+.3f} | "
                         f"{', '.join(f'{v:+.3f}' for v in d)} | "
                         f"{'yes' if d.mean() >= -0.03 else 'no'} |")
    lines.append("")
    for n_refine in REFINES:
        held = [t for t in _params(rows, "FK") if within[n_refine, t].mean() >= -0.03]
        d = within[n_refine, T]
        lines.append(f"* FK k-means reaches CK's NMI within 0.03 with n_refine = {n_refine}: "
                     + (f"{verdict(True)} at T = {', '.join(map(str, held))}" if held else
                        verdict(False))
                     + f" (CK {_stat(rows, method='CK')[0]:.3f}; at T = {T} FK - CK = "
                     f"{d.mean():+.3f}, per seed {d.min():+.3f} to {d.max():+.3f}).")
    ce = _params(rows, "CE PCA")[0]
    raw = _stat(rows, "raw_point_words", method="CE PCA", param=ce, n_refine=0)[0]
    up = _stat(rows, "upload_words", method="CE PCA", param=ce, n_refine=0)[0]
    lines.append(f"* CE PCA uploads raw points (its landmarks): {raw:,.0f} of its {up:,.0f} "
                 f"upload words at |Y| = {ce}; FK and RFK upload none.")
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
    lines += ["", "## DSPGD with and without CEM (Figures 1, 2, 4 and 5)", ""]
    lines += dspgd_lines(recovery)
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
