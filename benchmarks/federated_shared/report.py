"""The report of the federated k-means benchmark (``benchmarks/federated.py``): plot and summary.

Reads the benchmark's rows back (``runs.csv``: one clustering fit per row;
``recovery.csv``: DSPGD per iteration, with and without CEM) and draws paper
003's Figures 1-5 in spirit (:func:`plot`) and writes ``summary.md``
(:func:`summary`): the centralised references, the methods like for like, FK
against RFK at equal words and against CK, client dropout, and verdicts on the
paper's DSPGD claims (:func:`dspgd_lines`). The setting's sizes, which the
figures and tables print, are defined here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from kernelscale.bench.clustering import CK_RESTARTS
from kernelscale.bench.equal_words import ci95_halfwidth
from kernelscale.bench.scripts import verdict

__all__ = ["D_FK", "K", "M", "REFINES", "S", "dspgd_lines", "plot", "recovery_curves",
           "summary"]

#: Clusters k, eigenvectors s, FK's random features D and clients M.
K, S, D_FK, M = 10, 10, 50, 5
#: Lloyd refinement rounds after the coreset k-means: 0 (the papers' protocols) and 10.
REFINES = (0, 10)


def _sd(values):
    return float(values.std(ddof=1)) if values.size > 1 else 0.0


def _fmt(mean_std):
    return f"{mean_std[0]:.3f} ± {mean_std[1]:.3f}"


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


def recovery_curves(recovery: list[dict], key: str) -> dict:
    """A column of ``recovery.csv`` per iteration, mean and standard deviation over the seeds.

    Parameters
    ----------
    recovery : list of dict
        The rows of ``recovery.csv`` (``data``, ``variant``, ``seed``, ``t`` and the columns).
    key : str
        The column: ``'recovery_error'``, ``'upload_words'``, ``'lanczos_steps'`` or ``'rank'``.

    Returns
    -------
    dict
        ``{(data, variant): (t, mean, std)}``, three arrays each (sample std, ddof = 1),
        variant ``'CEM'`` and ``'no CEM'``.
    """
    out = {}
    for name in dict.fromkeys(r["data"] for r in recovery):
        for variant in ("CEM", "no CEM"):
            sub = [r for r in recovery if r["data"] == name and r["variant"] == variant]
            ts = sorted({r["t"] for r in sub})
            vals = [np.array([r[key] for r in sub if r["t"] == t], dtype=float) for t in ts]
            out[name, variant] = (np.array(ts), np.array([v.mean() for v in vals]),
                                  np.array([_sd(v) for v in vals]))
    return out


def _run_range(recovery: list[dict], name: str, variant: str, key: str):
    """Per iteration, the smallest and the largest ``key`` over the runs."""
    sub = [r for r in recovery if r["data"] == name and r["variant"] == variant]
    ts = sorted({r["t"] for r in sub})
    values = [np.array([r[key] for r in sub if r["t"] == t], dtype=float) for t in ts]
    return np.array([v.min() for v in values]), np.array([v.max() for v in values])


def plot(rows: list[dict], recovery: list[dict], path: Path) -> None:
    """Draw the benchmark's nine panels (paper 003's Figures 1-5 in spirit) into ``path``.

    Parameters
    ----------
    rows : list of dict
        The clustering fits (``runs.csv``).
    recovery : list of dict
        DSPGD per iteration, with and without CEM (``recovery.csv``).
    path : Path
        The PNG file to write.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(3, 3, figsize=(18, 14))
    ax = axes.ravel()
    n_runs = len({r["seed"] for r in recovery})
    styles = {("digits", "CEM"): ("C0", "-"), ("digits", "no CEM"): ("C0", "--"),
              ("mixture", "CEM"): ("C1", "-"), ("mixture", "no CEM"): ("C1", "--")}
    panels = [(0, "recovery_error", "||K_t - K_hat||_F^2 / N^2 (mean; band: min to max of runs)",
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
                # min to max over the runs: mean - std falls below 0 on this log axis
                low, high = _run_range(recovery, name, variant, key)
                ax[i].fill_between(ts, low, high, color=color, alpha=0.15)
                ax[1].plot(ts, sd, linestyle=style, color=color, marker=".", label=label)
            elif key != "upload_words":
                ax[i].fill_between(ts, mean - sd, mean + sd, color=color, alpha=0.15)
        ax[i].set(xlabel="iteration t", ylabel=ylabel, yscale=scale, title=title)
        ax[i].xaxis.set_major_locator(MaxNLocator(integer=True))
        ax[i].legend(fontsize=8)
    for name, (ts, mean, _) in recovery_curves(recovery, "recovery_error").items():
        if name[1] == "CEM":
            ax[0].plot(ts, mean[0] / ts, ":", color=styles[name][0],
                       label=f"{name[0]}: err_1 / t (O(1/t))")
    ax[0].legend(fontsize=8)
    ax[1].set(xlabel="iteration t", ylabel="standard deviation over runs", yscale="log",
              title=f"Figure 1: standard deviation of the recovery error ({n_runs} runs)")
    ax[1].xaxis.set_major_locator(MaxNLocator(integer=True))
    ax[1].legend(fontsize=8)
    T = max(_params(rows, "FK"))
    n_seeds = len({r["seed"] for r in rows})
    for a, n_refine in zip(ax[6:8], REFINES, strict=True):
        for method, marker, knob in [("FK", "o", "T"), ("RFK", "s", "D"), ("CE PCA", "^", "|Y|")]:
            params = _params(rows, method)
            sel = dict(n_refine=n_refine, dropout=0.0 if method == "FK" else None)
            xs = [_stat(rows, "upload_words", method=method, param=p, **sel)[0] for p in params]
            ys = [_ci(rows, method=method, param=p, **sel) for p in params]
            a.errorbar(xs, [m for m, _ in ys], yerr=[e for _, e in ys], marker=marker,
                       capsize=3, label=f"{method} ({knob} = {params[0]} to {params[-1]}, "
                                       "left to right)")
        for method, color, style in [("CK", "k", "--"), ("SK", "gray", ":")]:
            a.axhline(_stat(rows, method=method)[0], color=color, linestyle=style,
                      label=f"{method} (centralised) {_stat(rows, method=method)[0]:.3f}")
        a.set(xlabel="upload words", xscale="log",
              ylabel=f"NMI (mean, bars: 95% CI over {n_seeds} seeds)",
              title=f"Figure 3 on digits, n_refine = {n_refine}"
              + (" (papers' protocols)" if n_refine == 0 else " (Lloyd refinement)"))
        a.legend(fontsize=8, loc="lower right")
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
    ax[5].legend(fontsize=8, loc="lower left")
    ratios = [_eig_ratios(rows, q, T) for q in rates]
    ax[8].errorbar(rates, [r.mean() for r in ratios], yerr=[_sd(r) for r in ratios], marker="o",
                   capsize=3, label="with N / N_answered rescaling")
    ax[8].plot(rates, [1 - q for q in rates], "k:", label="1 - p (no rescaling, first order)")
    ax[8].set(xlabel="client dropout rate", ylabel="top-s eigenvalue sum / no dropout",
              title="dropout: DSPGD eigenvalue estimates (mean ± std)")
    ax[8].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)



def dspgd_lines(recovery: list[dict]) -> list[str]:
    """Verdicts on the paper's DSPGD figures (1, 2, 4 and 5), with their numbers.

    Parameters
    ----------
    recovery : list of dict
        The rows of ``recovery.csv``.

    Returns
    -------
    list of str
        Markdown lines, one section per data set.
    """
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


def summary(rows: list[dict], recovery: list[dict], scaling: dict, exact: float, path: Path,
            quick: bool, n_seeds: int) -> None:
    """Write the benchmark's ``summary.md`` to ``path`` (and print it).

    Parameters
    ----------
    rows : list of dict
        The clustering fits (``runs.csv``).
    recovery : list of dict
        DSPGD per iteration, with and without CEM (``recovery.csv``).
    scaling : dict
        ``{n: (fit words, upload words, words of one Lanczos step, Lanczos steps)}``
        of FK k-means on n and 2n points of the mixture.
    exact : float
        The exact sum of the top-s eigenvalues of the digits kernel matrix.
    path : Path
        The Markdown file to write.
    quick : bool
        Whether the rows are those of a quick smoke run (said in the text).
    n_seeds : int
        The number of seeds of the clustering fits.
    """
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

