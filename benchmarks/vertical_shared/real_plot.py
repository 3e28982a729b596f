"""The figure of the real-data vertical benchmark (``benchmarks/vertical_real.py``).

:func:`plot` draws, per data set, paper 002's Figure 3 (a) and (b) (error
against the parties J, the uploaded words and the points n), the one-shot
method's seconds and Table I (accuracy against the components k), each
bandwidth and protocol a line style.
"""

from __future__ import annotations

from pathlib import Path

from vertical_shared.real_report import METHODS, OURS, PAPER, PROTOCOLS

from kernelscale.bench.equal_words import mean_std, summarize

__all__ = ["FLOOR", "plot"]

FLOOR = 1e-6   # the plots' floor: smaller errors (exact to rounding) are drawn on it


def _floored(values):
    return [max(v, FLOOR) for v in values]


def _key_legend(ax, colours, styles, ncol=2):
    """A legend below the axes that names colours and line styles once each, not every
    combination of the two."""
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color=c, marker="o", linestyle="-", label=label)
               for label, c in colours.items()]
    handles += [Line2D([], [], color="gray", linestyle=style, label=label)
                for label, style in styles.items()]
    handles += [h for h in ax.get_legend_handles_labels()[0]
                if h.get_label().startswith(("centralised", "raw"))]
    ax.legend(handles=handles, fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.16),
              ncol=ncol)


def plot(parties_rows: list[dict], sample_rows: list[dict], svm_rows: list[dict],
         path: Path) -> None:
    """Draw the benchmark's figure into ``path``: two rows of panels per data set.

    Parameters
    ----------
    parties_rows : list of dict
        Figure 3(a)'s one-shot fits (``parties.csv``): ``dataset``, ``bandwidth``,
        ``J``, ``D``, ``n``, ``k``, ``sin_theta``, ``upload_words``, ``raw_words``,
        ``seconds`` and ``exact_seconds``.
    sample_rows : list of dict
        Figure 3(b)'s fits against n (``samples.csv``), the same columns.
    svm_rows : list of dict
        Table I's accuracies (``svm.csv``): ``dataset``, ``bandwidth``, ``protocol``,
        ``method``, ``k``, ``accuracy`` and ``upload_words``.
    path : Path
        The PNG file to write.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullFormatter, ScalarFormatter

    from kernelscale.bench.plot import log_axis

    names = list(dict.fromkeys(r["dataset"] for r in parties_rows))
    styles = {OURS: "-", PAPER: "--"}
    plt.rcParams.update({"font.size": 11, "axes.titlesize": 12})
    fig, axes = plt.subplots(2 * len(names), 3, figsize=(17, 10 * len(names)), squeeze=False,
                             layout="constrained")
    for i, name in enumerate(names):
        (ax_j, ax_w, ax_n), (ax_s, ax_t, spare) = axes[2 * i], axes[2 * i + 1]
        spare.axis("off")
        colours = {}
        for bandwidth in (OURS, PAPER):
            rows = [r for r in parties_rows if r["dataset"] == name
                    and r["bandwidth"] == bandwidth]
            for c, D in enumerate(sorted({r["D"] for r in rows})):
                colours[f"D = {D}"] = f"C{c}"
                sub = [dict(r, param=r["J"]) for r in rows if r["D"] == D]
                err = summarize(sub, "sin_theta", words="upload_words")
                sec = {x.param: x for x in summarize(sub, "seconds", words="upload_words")}
                Js = [x.param for x in err]
                ax_j.plot(Js, _floored([x.mean for x in err]), styles[bandwidth], marker="o",
                          color=f"C{c}")
                ax_w.plot([x.words for x in err], _floored([x.mean for x in err]),
                          styles[bandwidth], marker="o", color=f"C{c}")
                if bandwidth == OURS:  # the paper's sigma ran under another load
                    ax_s.plot(Js, [sec[J].mean for J in Js], styles[bandwidth], marker="o",
                              color=f"C{c}")
            if rows and bandwidth == OURS:
                exact = mean_std(r["exact_seconds"] for r in rows)[0]
                ax_s.axhline(exact, color="k", linestyle=":",
                             label=f"centralised KPCA, {OURS} runs ({exact:.2f} s)")
                ax_w.axvline(rows[0]["raw_words"], color="k", linestyle=":",
                             label="raw features (n M words, exact)")
            sub = [dict(r, param=r["n"]) for r in sample_rows if r["dataset"] == name
                   and r["bandwidth"] == bandwidth]
            if sub:
                err = summarize(sub, "sin_theta", words="upload_words")
                ax_n.errorbar([x.param for x in err], _floored([x.mean for x in err]),
                              yerr=[x.std for x in err], marker="o", capsize=3,
                              linestyle=styles[bandwidth],
                              label=f"J = {sub[0]['J']}, D = {sub[0]['D']}, {bandwidth}")
                n_ticks = [x.param for x in err]
        n, k = next((r["n"], r["k"]) for r in parties_rows if r["dataset"] == name)
        for ax, xlabel, title in (
                (ax_j, "parties J", f"{name}: Fig. 3(a), n = {n}, k = {k}"),
                (ax_w, "uploaded words (J D (n + 1))", f"{name}: error against words"),
                (ax_n, "samples n", f"{name}: Fig. 3(b)")):
            ax.set(xscale="log", yscale="log", xlabel=xlabel, ylabel="||sin Theta||_F (mean)",
                   title=title)
            if any(y <= FLOOR for line in ax.get_lines() for y in line.get_ydata()):
                ax.axhline(FLOOR, color="gray", linewidth=0.8)
                ax.text(0.01, 0.01, f"floor: errors < {FLOOR:g} (exact to rounding) drawn "
                        "on this line", transform=ax.transAxes, fontsize=9, color="gray")
        bandwidths = {f"{OURS} (solid)": "-", f"{PAPER} (dashed)": "--"}
        _key_legend(ax_j, colours, bandwidths)
        _key_legend(ax_w, colours, bandwidths)
        ax_n.legend(fontsize=10, loc="upper center", bbox_to_anchor=(0.5, -0.16))
        ax_n.xaxis.set_major_locator(FixedLocator(n_ticks))
        ax_n.xaxis.set_major_formatter(ScalarFormatter())
        ax_n.xaxis.set_minor_formatter(NullFormatter())
        log_axis(ax_n, "y")  # minor labels collide over less than two decades
        ax_s.set(xscale="log", yscale="log", xlabel="parties J",
                 ylabel="seconds (wall, in-process, mean)",
                 title=f"{name}: one-shot time, {OURS} (parties in turn)")
        # The paper's-sigma runs were timed under another load: their seconds are in
        # summary.md, not beside these.
        _key_legend(ax_s, colours, {f"{OURS} (solid)": "-"})
        svm = [r for r in svm_rows if r["dataset"] == name]
        protocols = {}
        for (bandwidth, protocol), style in zip(
                [(OURS, PROTOCOLS[0]), (OURS, PROTOCOLS[1]), (PAPER, PROTOCOLS[1])],
                ("-", "--", ":"), strict=True):
            protocols[f"{bandwidth}, {protocol}"] = style
            for c, method in enumerate(METHODS):
                rows = [dict(r, param=r["k"]) for r in svm if r["method"] == method
                        and r["bandwidth"] == bandwidth and r["protocol"] == protocol]
                if rows:
                    acc = summarize(rows, "accuracy", words="upload_words")
                    ax_t.plot([x.param for x in acc], [x.mean for x in acc], style,
                              marker="o", color=f"C{c}")
        ax_t.set(xscale="log", xlabel="components k", ylabel="LinearSVC test accuracy (mean)",
                 title=f"{name}: Table I\n(one-shot and KPCA overlap where equal)")
        _key_legend(ax_t, {method: f"C{c}" for c, method in enumerate(METHODS)}, protocols,
                    ncol=2)
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)
    plt.rcdefaults()

