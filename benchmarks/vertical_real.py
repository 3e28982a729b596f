"""Benchmark: paper 002's Figure 3 and Table I on real data: one-shot RBF vertical KPCA.

    python benchmarks/vertical_real.py            # the real run (about 10 minutes)
    python benchmarks/vertical_real.py --quick    # a smoke run (seconds)
    python benchmarks/vertical_real.py --summary-only   # summary.md and the plot from the CSVs

Writes ``parties.csv``, ``samples.csv``, ``svm.csv``, ``vertical_real.png`` and
``summary.md`` under ``benchmarks/results/vertical_real/``. Satellite (6,435 x
36) and letter (20,000 x 16), standardised, in place of the paper's GSE2187;
the features are dealt to J parties at random (a new deal each seed), the RBF
kernel has gamma = 1 / M (M features; scikit-learn's 'scale' on standardised
data), the fused kernel is centred. Exact references are n x n eigenproblems
(and every party holds an n x n local kernel, by design of 002), so each seed
draws a random subset of the points, as the paper's n = 288-537:

* Figure 3(a): n = 1000, k = 5 components; ||sin Theta||_F to centralised KPCA,
  uploaded words (J D (n + 1)) and seconds against the number of parties J, for
  D in {6, 10, 20} local eigenpairs;
* Figure 3(b): the same against n in {250, 500, 1000, 2000} (satellite J = 9,
  letter J = 4, D = 10);
* Table I: n = 2000, a stratified half/half train/test split per seed; the
  training embedding (V sqrt(lambda)) of the one-shot method (satellite J = 9,
  letter J = 4, D = 20), of centralised KPCA and of linear PCA, with k in {1, 2,
  5, 10, 20, 50} components, standardised on the training half, fed to
  scikit-learn's LinearSVC; test accuracy. Like the paper, the embedding is
  transductive (every point's coordinates come from one eigenproblem); the
  labels of the test half are never used.

5 seeds; mean ± sample std. The summary compares with sending the raw features
(n M words) at equal words and states where the paper's claims hold.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.decomposition import PCA
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import LinearSVC
from threadpoolctl import threadpool_limits
from vertical import parties, top_vectors

from kernelscale.backends.local import LocalCluster
from kernelscale.bench import write_rows
from kernelscale.bench.equal_words import fmt, mean_std, summarize, words_to_reach
from kernelscale.bench.scripts import read_rows, script_arguments, verdict
from kernelscale.datasets import load_dataset
from kernelscale.kernels import make_kernel
from kernelscale.linalg import top_eigh
from kernelscale.metrics.subspace import sin_theta_distance
from kernelscale.vertical import centre_kernel, one_shot_kpca

OUT = Path(__file__).parent / "results" / "vertical_real"
# name: (parties J of Figure 3(a), J of Figure 3(b) and Table I)
DATASETS = {"satellite": ((1, 2, 4, 6, 9, 12, 18, 36), 9), "letter": ((1, 2, 4, 8, 16), 4)}
K_FIG3, DS, N_FIG3, NS = 5, (6, 10, 20), 1000, (250, 500, 1000, 2000)
D_SAMPLES, D_TABLE, N_TABLE, KS = 10, 20, 2000, (1, 2, 5, 10, 20, 50)
METHODS = ("one-shot", "KPCA", "PCA")
TARGET = 0.01  # ||sin Theta||_F of "high quality"


def load(name, n, seed):
    """``n`` random points of a standardised set, its columns in a random order (the deal)."""
    X, y = load_dataset(name, n_samples=n, random_state=seed, standardize=True)
    return X[:, np.random.default_rng(seed).permutation(X.shape[1])], y


def centralised(X, kernel, k):
    start = time.perf_counter()
    V = top_vectors(centre_kernel(kernel(X, X)), k)
    return V, time.perf_counter() - start


def one_shot(X, kernel, k, J, D):
    cluster = LocalCluster(parties(X, J))
    start = time.perf_counter()
    with warnings.catch_warnings():  # D <= k for k = 20, 50 in Table I: measured, not advised
        warnings.filterwarnings("ignore", "n_local_components=", UserWarning)
        model = one_shot_kpca(cluster, kernel, k, D)
    return model, time.perf_counter() - start, cluster.ledger.upload_words()


def subspace_runs(name, seeds, quick):
    """Figure 3 (a) and (b): sin theta, words and seconds against J, D and n."""
    Js, J_fixed = DATASETS[name]
    if quick:
        Js, ns, Ds, n_fig3 = Js[:3], (200, 300), (6, 10), 300
    else:
        ns, Ds, n_fig3 = NS, DS, N_FIG3
    parties_rows, sample_rows = [], []
    for seed in seeds:
        for n in sorted({n_fig3, *ns}):
            X, _ = load(name, n, seed)
            kernel = make_kernel("rbf", gamma=1.0 / X.shape[1])
            truth, exact_s = centralised(X, kernel, K_FIG3)
            settings = [(J, D) for J in Js for D in Ds] if n == n_fig3 else []
            if n in ns:
                settings.append((J_fixed, D_SAMPLES))
            for J, D in dict.fromkeys(settings):
                model, seconds, words = one_shot(X, kernel, K_FIG3, J, D)
                row = dict(dataset=name, n=n, M=X.shape[1], J=J, D=D, k=K_FIG3, seed=seed,
                           sin_theta=sin_theta_distance(truth, model.eigenvectors),
                           upload_words=words, raw_words=X.size, seconds=seconds,
                           exact_seconds=exact_s)
                if n == n_fig3 and J in Js and D in Ds:
                    parties_rows.append(row)
                if n in ns and (J, D) == (J_fixed, D_SAMPLES):
                    sample_rows.append(row)
                print(f"  {name} n={n} J={J} D={D} seed={seed}: sin theta "
                      f"{row['sin_theta']:.4f}, {words:,} words, {seconds:.2f}s", flush=True)
    return parties_rows, sample_rows


def svm_accuracy(F, y, train, test):
    clf = make_pipeline(StandardScaler(), LinearSVC(max_iter=20_000))
    return float(clf.fit(F[train], y[train]).score(F[test], y[test]))


def svm_runs(name, seeds, quick):
    """Table I: LinearSVC accuracy on the k leading coordinates of each embedding."""
    J = DATASETS[name][1]
    n, ks = (400, (1, 5, 10)) if quick else (N_TABLE, KS)
    rows = []
    for seed in seeds:
        X, y = load(name, n, seed)
        train, test = train_test_split(np.arange(n), test_size=0.5, stratify=y,
                                       random_state=seed)
        kernel = make_kernel("rbf", gamma=1.0 / X.shape[1])
        w, V = top_eigh(centre_kernel(kernel(X, X)), max(ks))
        kpca = V * np.sqrt(np.maximum(w, 0.0))
        model, _, words = one_shot(X, kernel, max(ks), J, D_TABLE)
        embeddings = {"one-shot": model.training_embedding(), "KPCA": kpca,
                      # linear PCA has at most M components; larger k reuse all of them
                      "PCA": PCA(min(max(ks), X.shape[1]), random_state=seed).fit_transform(X)}
        for method, F in embeddings.items():
            for k in ks:
                rows.append(dict(dataset=name, n=n, M=X.shape[1], J=J, D=D_TABLE, seed=seed,
                                 method=method, k=k,
                                 accuracy=svm_accuracy(F[:, :k], y, train, test),
                                 upload_words=words if method == "one-shot" else X.size))
                print(f"  {name} seed={seed} {method} k={k}: accuracy "
                      f"{rows[-1]['accuracy']:.3f}", flush=True)
    return rows


# ----------------------------------------------------------------------------- plot
def plot(parties_rows, sample_rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["dataset"] for r in parties_rows))
    fig, axes = plt.subplots(len(names), 3, figsize=(16, 3.8 * len(names)), squeeze=False)
    for i, name in enumerate(names):
        seconds_axis = axes[i, 0].twinx()
        for D in sorted({r["D"] for r in parties_rows if r["dataset"] == name}):
            sub = [dict(r, param=r["J"]) for r in parties_rows
                   if r["dataset"] == name and r["D"] == D]
            err = summarize(sub, "sin_theta", words="upload_words")
            sec = {s.param: s for s in summarize(sub, "seconds", words="upload_words")}
            Js = [s.param for s in err]
            axes[i, 0].errorbar(Js, [s.mean for s in err], yerr=[s.std for s in err],
                                marker="o", capsize=3, label=f"D = {D}")
            seconds_axis.plot(Js, [sec[J].mean for J in Js], ":", color="gray")
            axes[i, 1].errorbar([s.words for s in err], [s.mean for s in err],
                                yerr=[s.std for s in err], marker="o", capsize=3,
                                label=f"D = {D} (J = {Js[0]}..{Js[-1]})")
        raw = sub[0]["raw_words"]
        axes[i, 1].axvline(raw, color="k", linestyle="--", label="raw features (n M words)")
        seconds_axis.set(yscale="log", ylabel="one-shot seconds (dotted)")
        axes[i, 0].set(xscale="log", xlabel="parties J", ylabel="||sin Theta||_F (k = 5)",
                       title=f"{name}: Fig. 3(a), n = {sub[0]['n']}")
        axes[i, 1].set(xscale="log", xlabel="uploaded words",
                       ylabel="||sin Theta||_F", title=f"{name}: error against words")
        for ax in axes[i, :2]:  # log below 1e-4 would be dominated by exact zeros
            ax.set_yscale("symlog", linthresh=1e-4)
            ax.set_ylim(bottom=0)
        sub = [dict(r, param=r["n"]) for r in sample_rows if r["dataset"] == name]
        if sub:
            err = summarize(sub, "sin_theta", words="upload_words")
            axes[i, 2].errorbar([s.param for s in err], [s.mean for s in err],
                                yerr=[s.std for s in err], marker="o", capsize=3)
            axes[i, 2].set(xscale="log", xlabel="samples n", ylabel="||sin Theta||_F",
                           title=f"{name}: Fig. 3(b), J = {sub[0]['J']}, D = {sub[0]['D']}")
        for ax in axes[i, :2]:
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ----------------------------------------------------------------------------- summary
def parties_section(rows, name):
    sub = [r for r in rows if r["dataset"] == name]
    Ds = sorted({r["D"] for r in sub})
    Js = sorted({r["J"] for r in sub})
    n, M = sub[0]["n"], sub[0]["M"]
    lines = [f"### Figure 3(a): against the number of parties (n = {n}, M = {M}, k = "
             f"{sub[0]['k']})", "",
             "‖sin Θ‖_F to centralised KPCA (mean ± std), uploaded words / raw words "
             "(n M), one-shot seconds; centralised KPCA took "
             f"{mean_std(r['exact_seconds'] for r in sub)[0]:.2f} s.", "",
             "| J | features per party | " + " | ".join(f"D = {D}" for D in Ds) + " |",
             "|---|---|" + "---|" * len(Ds)]
    cell = {}
    for J in Js:
        cells = []
        for D in Ds:
            group = [r for r in sub if r["J"] == J and r["D"] == D]
            cell[J, D] = mean_std(r["sin_theta"] for r in group)
            ratio = group[0]["upload_words"] / group[0]["raw_words"]
            secs = mean_std(r["seconds"] for r in group)[0]
            cells.append(f"{cell[J, D][0]:.4f} ± {cell[J, D][1]:.4f} ({ratio:.2f}x raw, "
                         f"{secs:.2f} s)")
        lines.append(f"| {J} | {M / J:.1f} | " + " | ".join(cells) + " |")
    return lines, cell


def summary_for(name, parties_rows, sample_rows, svm_rows):
    lines = [f"## {name}", ""]
    part, cell = parties_section(parties_rows, name)
    lines += part + [""]
    sub = [r for r in parties_rows if r["dataset"] == name]
    Js, Ds = sorted({r["J"] for r in sub}), sorted({r["D"] for r in sub})
    inner = [J for J in Js if 1 < J < Js[-1]]
    claims = [f"D = {D}: {cell[inner[0], D][0]:.4f} at J = {inner[0]}, "
              f"{cell[inner[-1], D][0]:.4f} at J = {inner[-1]}" for D in Ds]
    flat = all(max(cell[J, D][0] for J in inner) <= 3 * max(min(cell[J, D][0] for J in inner),
                                                            1e-3) for D in Ds)
    # Words to reach ‖sin Θ‖_F <= TARGET for each J (D is the party's choice).
    reach = {J: words_to_reach(summarize([dict(r, param=r["D"]) for r in sub if r["J"] == J],
                                         "sin_theta", words="upload_words"), TARGET)
             for J in Js if J > 1}
    raw = sub[0]["n"] * sub[0]["M"]
    lines += [f"Fewest uploaded words with mean ‖sin Θ‖_F <= {TARGET} for a given number "
              f"of parties (D from {Ds}), against the raw features' {raw:,} words:", "",
              "| J | D | ‖sin Θ‖_F | words | words / raw |", "|---|---|---|---|---|"]
    for J, hit in reach.items():
        lines.append(f"| {J} | " + (f"{hit.param} | {fmt(hit, words=False, spec='.4f')} | "
                                    f"{hit.words:,.0f} | {hit.words / raw:.2f} |" if hit else
                                    "not reached | - | - | - |"))
    lines.append("")
    cheaper = [J for J, hit in reach.items() if hit and hit.words < raw]
    samples = [r for r in sample_rows if r["dataset"] == name]
    if samples:
        ns = sorted({r["n"] for r in samples})
        by_n = {n: mean_std(r["sin_theta"] for r in samples if r["n"] == n) for n in ns}
        lines += [f"### Figure 3(b): against the number of samples (J = {samples[0]['J']}, "
                  f"D = {samples[0]['D']})", "",
                  "| n | ‖sin Θ‖_F | uploaded / raw words | one-shot s | centralised s |",
                  "|---|---|---|---|---|"]
        for n in ns:
            group = [r for r in samples if r["n"] == n]
            lines.append(f"| {n} | {by_n[n][0]:.4f} ± {by_n[n][1]:.4f} | "
                         f"{group[0]['upload_words'] / group[0]['raw_words']:.2f} | "
                         f"{mean_std(r['seconds'] for r in group)[0]:.2f} | "
                         f"{mean_std(r['exact_seconds'] for r in group)[0]:.2f} |")
        lines.append("")
        trend = max(v[0] for v in by_n.values()) / max(min(v[0] for v in by_n.values()), 1e-12)
    svm = [r for r in svm_rows if r["dataset"] == name]
    ks = sorted({r["k"] for r in svm})
    acc = {(m, k): summarize([dict(r, param=k) for r in svm if r["method"] == m
                              and r["k"] == k], "accuracy", words="upload_words")[0]
           for m in METHODS for k in ks}
    lines += [f"### Table I: LinearSVC test accuracy on the embeddings (n = {svm[0]['n']}, "
              f"half/half split, one-shot J = {svm[0]['J']}, D = {svm[0]['D']}: "
              f"{acc['one-shot', ks[0]].words:,.0f} uploaded words, raw features "
              f"{svm[0]['n'] * svm[0]['M']:,})", "",
              "| components k | " + " | ".join(METHODS) + " |", "|---|" + "---|" * len(METHODS)]
    for k in ks:
        lines.append(f"| {k} | " + " | ".join(fmt(acc[m, k], words=False) for m in METHODS)
                     + " |")
    if ks[-1] > svm[0]["M"]:
        lines += ["", f"Linear PCA has at most M = {svm[0]['M']} components: for k > M its "
                  "row uses all of them."]
    gaps = [acc["KPCA", k].mean - acc["one-shot", k].mean for k in ks]

    def margin(k):
        return max(acc["one-shot", k].std, acc["PCA", k].std)

    better = [k for k in ks if acc["one-shot", k].mean > acc["PCA", k].mean + margin(k)]
    worse = [k for k in ks if acc["one-shot", k].mean < acc["PCA", k].mean - margin(k)]
    lines += ["", "Paper's claims on this data:", ""]
    lines.append(f"* The error is similar across J except the extremes (within 3x over "
                 f"1 < J < {Js[-1]}): {verdict(flat)}; at fixed D it falls as J grows, as each "
                 "party's kernel on fewer features has a faster-decaying spectrum, while the "
                 f"words grow as J D ({'; '.join(claims)}).")
    if samples:
        lines.append(f"* The error shows little trend with the number of samples (within 3x "
                     f"over n = {ns[0]}..{ns[-1]}): {verdict(trend <= 3)} (max / min = "
                     f"{trend:.1f}).")
    lines.append(f"* High quality at low communication: it reaches ‖sin Θ‖_F <= {TARGET} "
                 f"with fewer words than the raw features (which give the exact answer): "
                 f"{verdict(len(cheaper) == len(reach))} (for J = {cheaper} of "
                 f"{list(reach)}; the table above).")
    close = max(gaps) <= 0.01 + 1e-9
    lines.append(f"* The one-shot embedding's accuracy approaches centralised KPCA's (within "
                 f"0.01): {verdict(close)} (KPCA - one-shot from {min(gaps):+.3f} to "
                 f"{max(gaps):+.3f} over k = {ks[0]}..{ks[-1]}).")
    lines.append(f"* It is generally better than linear PCA: {verdict(better and not worse)} "
                 f"(better by more than the larger std at k = {better}, worse at k = {worse}, "
                 "tied elsewhere).")
    return lines + [""]


def summary(parties_rows, sample_rows, svm_rows, quick):
    n_seeds = len({r["seed"] for r in parties_rows})
    lines = ["# One-shot vertical kernel PCA on real data (paper 002, Figure 3 and Table I)", ""]
    if quick:
        lines += ["**Quick smoke run** (small n, one seed): not the committed numbers.", ""]
    lines += ["Produced by `python benchmarks/vertical_real.py`. Satellite and letter, "
              "standardised, features dealt to J parties at random per seed; RBF with gamma = "
              "1 / M; centred; exact references by dense eigendecomposition of the n x n "
              f"kernel, on random subsets of n points per seed. Means ± sample std over "
              f"{n_seeds} seeds. Uploaded words are J D (n + 1) (each party's D eigenpairs, "
              "once); 'raw' is n M, the words of shipping every feature to one place, which "
              "gives the exact answer. Times are wall-clock, parties one after the other, "
              "one BLAS thread. CSVs: `parties.csv`, `samples.csv`, `svm.csv`; plot: "
              "`vertical_real.png`.", ""]
    for name in dict.fromkeys(r["dataset"] for r in parties_rows):
        lines += summary_for(name, parties_rows, sample_rows, svm_rows)
    return "\n".join(lines) + "\n"


def main(argv=None):
    args, out = script_arguments(__doc__, DATASETS, OUT, argv)
    files = ("parties.csv", "samples.csv", "svm.csv")
    if args.summary_only:
        parties_rows, sample_rows, svm_rows = (read_rows(out / f) for f in files)
    else:
        parties_rows, sample_rows, svm_rows = [], [], []
        with threadpool_limits(1):  # one BLAS thread: the machine is small and shared
            for name in args.datasets:
                a, b = subspace_runs(name, args.seeds, args.quick)
                parties_rows += a
                sample_rows += b
                svm_rows += svm_runs(name, args.seeds, args.quick)
        for f, rows in zip(files, (parties_rows, sample_rows, svm_rows), strict=True):
            write_rows(out / f, rows)
    plot(parties_rows, sample_rows, out / "vertical_real.png")
    text = summary(parties_rows, sample_rows, svm_rows, args.quick)
    (out / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
