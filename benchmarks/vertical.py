"""Benchmark: one-shot vertical kernel PCA (paper 002) against exact KPCA and the DPCA baseline.

    python benchmarks/vertical.py            # the real run (a few minutes)
    python benchmarks/vertical.py --quick    # a small smoke run
    python benchmarks/vertical.py --plot-only   # redraw the PNG from the CSVs

Writes CSV, PNG and ``summary.md`` under ``benchmarks/results/vertical/``:

* Figure 2 of 002 - error and time of Alg. 1 vs the number of parties ``J`` on the
  paper's simulated linear data (``X = U sqrt(Sigma) V``, rank 50, 5000, 2500, 1125,
  then 50), M = 1000 features, uncentred linear kernel, 1 component, D = 2; and the
  error vs the number of samples (J = 5, D = 1).
* Figure 4 of 002 - DKPCA vs DPCA3/5/10 (ADMM, c = 4, 12 inner iterations),
  M = 1000, T = 100, J = 10, D = 1, eigengap beta = 100 and 2: projector error per
  outer iteration, and words sent.
* RBF (and the polynomial extension) on scikit-learn's digits (standardised),
  ``gamma = 1 / 64``: sin-theta error and uploaded words vs ``J`` and ``D``.

Every ratio is measured side by side in one run; times are wall-clock on this
machine, in-process (parties run one after the other).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits
from vertical_shared.blocks import parties, top_vectors

from kernelscale.backends.local import LocalCluster
from kernelscale.bench import write_rows
from kernelscale.bench.scripts import read_rows
from kernelscale.datasets import load_digits_standardized, make_low_rank_linear
from kernelscale.kernels import make_kernel
from kernelscale.metrics.subspace import projector_error, sin_theta_distance
from kernelscale.vertical import centre_kernel, one_shot_kpca
from kernelscale.vertical.dpca import dpca

OUT = Path(__file__).parent / "results" / "vertical"


def figure2(quick, seeds):
    """Error (||sin Theta||_F^2) and time vs J, and vs n."""
    rows = []
    M = 200 if quick else 1000
    ns = [100] if quick else [200, 400]
    Js = [1, 2, 5, 10, 50] if quick else [1, 2, 5, 10, 20, 50, 100, 200]
    for n in ns:
        for seed in seeds:
            X = make_low_rank_linear(n, M, random_state=seed)
            start = time.perf_counter()
            truth = top_vectors(X @ X.T.copy(), 1)
            exact_s = time.perf_counter() - start
            for J in Js:
                cluster = LocalCluster(parties(X, J))
                start = time.perf_counter()
                model = one_shot_kpca(cluster, make_kernel("linear"), 1, 2, center=False)
                seconds = time.perf_counter() - start
                rows.append(
                    dict(
                        experiment="parties",
                        n=n,
                        M=M,
                        J=J,
                        D=2,
                        seed=seed,
                        error=sin_theta_distance(truth, model.eigenvectors) ** 2,
                        seconds=seconds,
                        exact_seconds=exact_s,
                        upload_words=cluster.ledger.upload_words(),
                        raw_words=n * M,
                    )
                )
    for n in [50, 100, 200] if quick else [100, 200, 400, 800]:
        for seed in seeds:
            X = make_low_rank_linear(n, M, random_state=seed)
            truth = top_vectors(X @ X.T.copy(), 1)
            cluster = LocalCluster(parties(X, 5))
            start = time.perf_counter()
            model = one_shot_kpca(cluster, make_kernel("linear"), 1, 1, center=False)
            rows.append(
                dict(
                    experiment="samples",
                    n=n,
                    M=M,
                    J=5,
                    D=1,
                    seed=seed,
                    error=sin_theta_distance(truth, model.eigenvectors) ** 2,
                    seconds=time.perf_counter() - start,
                    exact_seconds=np.nan,
                    upload_words=cluster.ledger.upload_words(),
                    raw_words=n * M,
                )
            )
    return rows


def figure4(quick, seeds):
    """DKPCA vs DPCA: projector error per outer iteration, words sent."""
    rows = []
    M, T, J = (300, 60, 10) if quick else (1000, 100, 10)
    n_outer = 8 if quick else 20
    for beta in (100.0, 2.0):
        spectrum = np.array([5000.0, 5000.0 / beta] + [50.0] * 48)
        for seed in seeds:
            X = make_low_rank_linear(T, M, spectrum=spectrum, random_state=seed)
            truth = np.linalg.svd(X, full_matrices=False)[2][:1].T  # top principal direction
            cluster = LocalCluster(parties(X, J))
            start = time.perf_counter()
            model = one_shot_kpca(cluster, make_kernel("linear"), 1, 1, center=False)
            seconds = time.perf_counter() - start
            err = projector_error(truth, X.T @ model.eigenvectors)  # U = X^T V (eq. (9))
            for it in range(1, n_outer + 1):
                rows.append(
                    dict(
                        method="DKPCA",
                        beta=beta,
                        seed=seed,
                        iteration=it,
                        error=err,
                        words=cluster.ledger.total_words(),
                        seconds=seconds,
                    )
                )
            for size in (3, 5, 10):
                cluster = LocalCluster(parties(X, J))
                start = time.perf_counter()
                result = dpca(
                    cluster,
                    1,
                    size,
                    penalty=4.0,
                    n_inner=12,
                    n_outer=n_outer,
                    reference=truth,
                    random_state=seed,
                )
                seconds = time.perf_counter() - start
                words = cluster.ledger.total_words()
                for it, err_it in enumerate(result.error_history, start=1):
                    rows.append(
                        dict(
                            method=f"DPCA{size}",
                            beta=beta,
                            seed=seed,
                            iteration=it,
                            error=err_it,
                            words=words,
                            seconds=seconds,
                        )
                    )
    return rows


def rbf_digits(quick, seeds):
    """RBF (and poly) on digits: error vs J and D, uploaded words."""
    X_all, _ = load_digits_standardized()
    n = 300 if quick else 600
    k = 5
    rows = []
    settings = [("rbf", dict(gamma=1.0 / 64)), ("poly", dict(gamma=1.0 / 64, degree=2))]
    Js = [1, 2, 8, 32] if quick else [1, 2, 4, 8, 16, 32, 64]
    Ds = [5, 6, 20] if quick else [5, 6, 10, 20, 50]
    for seed in seeds:
        idx = np.random.default_rng(seed).choice(X_all.shape[0], n, replace=False)
        X = X_all[idx]
        for name, params in settings:
            kernel = make_kernel(name, **params)
            K = kernel(X, X)
            start = time.perf_counter()
            truth = top_vectors(centre_kernel(K), k)
            exact_s = time.perf_counter() - start
            for J in Js if name == "rbf" else [2, 8]:
                for D in Ds:
                    cluster = LocalCluster(parties(X, J))
                    start = time.perf_counter()
                    model = one_shot_kpca(cluster, kernel, k, D, keep_fused_kernel=True)
                    seconds = time.perf_counter() - start
                    rows.append(
                        dict(
                            kernel=name,
                            n=n,
                            J=J,
                            D=D,
                            seed=seed,
                            sin_theta=sin_theta_distance(truth, model.eigenvectors),
                            kernel_rel_error=np.linalg.norm(K - model.fused_kernel)
                            / np.linalg.norm(K),
                            seconds=seconds,
                            exact_seconds=exact_s,
                            upload_words=cluster.ledger.upload_words(),
                            raw_words=n * X.shape[1],
                        )
                    )
    return rows


def mean_by(rows, keys, value, **where):
    table = {}
    for r in rows:
        if all(r[k] == v for k, v in where.items()):
            table.setdefault(tuple(r[k] for k in keys), []).append(r[value])
    return {key: float(np.mean(v)) for key, v in sorted(table.items())}


def plot(fig2, fig4, digits, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from kernelscale.bench.plot import line_style, log_axis

    def legend_below(ax, ncol=2):
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=ncol)

    fig, axes = plt.subplots(1, 5, figsize=(24, 4.8), layout="constrained")
    for i, n in enumerate(sorted({r["n"] for r in fig2 if r["experiment"] == "parties"})):
        err = mean_by(fig2, ["J"], "error", experiment="parties", n=n)
        sec = mean_by(fig2, ["J"], "seconds", experiment="parties", n=n)
        J = [key[0] for key in err]
        # the two sample sizes give the same error to 8 digits: open, larger markers
        # for the first keep both visible
        axes[0].plot(J, np.maximum(list(err.values()), 1e-17), label=f"error, n = {n}",
                     **line_style(i), **({"markersize": 10, "markerfacecolor": "none"}
                                         if i == 0 else {}))
        axes[1].plot(J, list(sec.values()), label=f"seconds, n = {n}", **line_style(i))
    axes[0].set(xlabel="parties J", ylabel="||sin Theta||_F^2 (1e-16: machine precision)",
                title="Fig. 2(a): error vs parties (linear, D = 2; both n coincide)")
    axes[1].set(xlabel="parties J", ylabel="fit seconds (in-process, parties in turn)",
                title="Fig. 2(a): time vs parties (shared 2-core machine)")
    for ax in axes[:2]:
        ax.set_xscale("log")
        ax.set_yscale("log")
        legend_below(ax)
    for col, beta in ((2, 100.0), (3, 2.0)):
        ax = axes[col]
        for i, method in enumerate(("DKPCA", "DPCA3", "DPCA5", "DPCA10")):
            err = mean_by(fig4, ["iteration"], "error", method=method, beta=beta)
            style = {"linestyle": ":", "lw": 2.5} if method == "DKPCA" else \
                {**line_style(i), "lw": 1.5, "markersize": 4}
            ax.semilogy([k[0] for k in err], np.maximum(list(err.values()), 1e-17),
                        label=method + (" (one shot)" if method == "DKPCA" else ""), **style)
        ax.set(xlabel="outer iteration (DPCA)", ylabel="projector error",
               title=f"Fig. 4: eigengap beta = {beta:g}")
        legend_below(ax, ncol=4)
    ax = axes[4]
    for i, J in enumerate(sorted({r["J"] for r in digits if r["kernel"] == "rbf"})):
        err = mean_by(digits, ["D"], "sin_theta", kernel="rbf", J=J)
        ax.plot([k[0] for k in err], np.maximum(list(err.values()), 1e-17), label=f"J = {J}",
                **line_style(i))
    ax.set_xscale("log")
    log_axis(ax, "x")
    ax.set_yscale("log")
    ax.set(xlabel="local eigenpairs D", ylabel="||sin Theta||_F (k = 5)",
           title="RBF on digits (centred): error vs D")
    legend_below(ax, ncol=4)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def summary(fig2, fig4, digits, quick):
    lines = [
        "# Vertical one-shot kernel PCA (paper 002): benchmark summary",
        "",
        f"Mode: {'quick' if quick else 'full'}. Means over seeds; one run, side by side; "
        "one BLAS thread, parties run one after the other in-process.",
        "",
    ]
    lines += [
        "## Figure 2: linear kernel, simulated data (D = 2, 1 component)",
        "",
        "| n | J | ||sin Theta||_F^2 | one-shot s | exact s | upload words / raw words |",
        "|---|---|---|---|---|---|",
    ]
    for (n, J), err in mean_by(fig2, ["n", "J"], "error", experiment="parties").items():
        sec = mean_by(fig2, ["n", "J"], "seconds", experiment="parties")[(n, J)]
        ex = mean_by(fig2, ["n", "J"], "exact_seconds", experiment="parties")[(n, J)]
        up = mean_by(fig2, ["n", "J"], "upload_words", experiment="parties")[(n, J)]
        raw = mean_by(fig2, ["n", "J"], "raw_words", experiment="parties")[(n, J)]
        lines.append(f"| {n} | {J} | {err:.2e} | {sec:.3f} | {ex:.3f} | {up / raw:.4f} |")
    lines += [
        "",
        "Error vs samples (J = 5, D = 1): "
        + ", ".join(
            f"n={k[0]}: {v:.2e}"
            for k, v in mean_by(fig2, ["n"], "error", experiment="samples").items()
        ),
        "",
    ]
    lines += [
        "## Figure 4: DKPCA vs DPCA (linear, J = 10, D = 1)",
        "",
        "| beta | method | error after it. 1 | after last it. | words (total) |",
        "|---|---|---|---|---|",
    ]
    last = max(r["iteration"] for r in fig4)
    for beta in (100.0, 2.0):
        for method in ("DKPCA", "DPCA3", "DPCA5", "DPCA10"):
            err = mean_by(fig4, ["iteration"], "error", method=method, beta=beta)
            words = mean_by(fig4, ["iteration"], "words", method=method, beta=beta)[(last,)]
            lines.append(
                f"| {beta:g} | {method} | {err[(1,)]:.2e} | {err[(last,)]:.2e} | {words:,.0f} |"
            )
    lines += [
        "",
        "## RBF / poly on digits (k = 5 components, centred)",
        "",
        "| kernel | J | D | ||sin Theta||_F | ||K - K_hat||_F / ||K||_F | "
        "upload words / raw words |",
        "|---|---|---|---|---|---|",
    ]
    for (name, J, D), err in mean_by(digits, ["kernel", "J", "D"], "sin_theta").items():
        rel = mean_by(digits, ["kernel", "J", "D"], "kernel_rel_error")[(name, J, D)]
        up = mean_by(digits, ["kernel", "J", "D"], "upload_words")[(name, J, D)]
        raw = mean_by(digits, ["kernel", "J", "D"], "raw_words")[(name, J, D)]
        lines.append(f"| {name} | {J} | {D} | {err:.3f} | {rel:.2e} | {up / raw:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw vertical.png from the CSV files already written")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.plot_only:
        plot(*(read_rows(out / name) for name in (
            "figure2_parties_samples.csv", "figure4_dkpca_vs_dpca.csv", "rbf_poly_digits.csv")),
            out / "vertical.png")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    seeds = [0, 1] if args.quick else [0, 1, 2, 3, 4]
    # One BLAS thread: the machine is shared, and 2-thread OpenBLAS is 10x slower under load.
    with threadpool_limits(1):
        fig2, fig4 = figure2(args.quick, seeds), figure4(args.quick, seeds)
        digits = rbf_digits(args.quick, seeds[:2])
    write_rows(out / "figure2_parties_samples.csv", fig2)
    write_rows(out / "figure4_dkpca_vs_dpca.csv", fig4)
    write_rows(out / "rbf_poly_digits.csv", digits)
    plot(fig2, fig4, digits, out / "vertical.png")
    text = summary(fig2, fig4, digits, args.quick)
    (out / "summary.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
