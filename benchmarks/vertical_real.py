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
(n M words) at equal words and states where the paper's claims hold; the figure
and the summary are drawn and written by :mod:`vertical_shared.real_plot`
and :mod:`vertical_shared.real_report`.
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
from vertical_shared.blocks import parties, top_vectors
from vertical_shared.real_plot import plot
from vertical_shared.real_report import (
    OURS,
    PAPER,
    PAPER_TRAIN,
    PAPER_TRIALS,
    PROTOCOLS,
    summary,
)

from kernelscale.backends.local import LocalCluster
from kernelscale.bench import write_rows
from kernelscale.bench.scripts import read_rows, script_arguments
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
#: RBF gamma for (setting, M): ours is 1/M (scikit-learn's 'scale' on standardised data);
#: the paper's is sigma = sqrt(M)/3 for Figure 3 (gamma = 4.5/M) and sigma = 50 for Table I.
BANDWIDTHS = {OURS: {"fig3": lambda M: 1.0 / M, "table": lambda M: 1.0 / M},
              PAPER: {"fig3": lambda M: 9.0 / (2.0 * M), "table": lambda M: 1.0 / (2 * 50.0**2)}}


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


def subspace_runs(name, seeds, quick, bandwidth=OURS):
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
            kernel = make_kernel("rbf", gamma=BANDWIDTHS[bandwidth]["fig3"](X.shape[1]))
            truth, exact_s = centralised(X, kernel, K_FIG3)
            settings = [(J, D) for J in Js for D in Ds] if n == n_fig3 else []
            if n in ns:
                settings.append((J_fixed, D_SAMPLES))
            for J, D in dict.fromkeys(settings):
                model, seconds, words = one_shot(X, kernel, K_FIG3, J, D)
                row = dict(dataset=name, bandwidth=bandwidth, gamma=kernel.gamma, n=n,
                           M=X.shape[1], J=J, D=D, k=K_FIG3, seed=seed,
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


def splits(n, y, seed, protocol):
    """(train, test) index pairs: one stratified half/half split per seed (ours), or the
    paper's protocol, :data:`PAPER_TRIALS` draws of 200 random training points per seed."""
    if protocol == "stratified half":
        return [train_test_split(np.arange(n), test_size=0.5, stratify=y, random_state=seed)]
    rng = np.random.default_rng([seed, 200])
    out = []
    for _ in range(PAPER_TRIALS):
        order = rng.permutation(n)
        out.append((np.sort(order[:PAPER_TRAIN]), np.sort(order[PAPER_TRAIN:])))
    return out


def svm_runs(name, seeds, quick, bandwidth=OURS):
    """Table I: LinearSVC accuracy on the k leading coordinates of each embedding."""
    J = DATASETS[name][1]
    n, ks = (400, (1, 5, 10)) if quick else (N_TABLE, KS)
    rows = []
    for seed in seeds:
        X, y = load(name, n, seed)
        kernel = make_kernel("rbf", gamma=BANDWIDTHS[bandwidth]["table"](X.shape[1]))
        w, V = top_eigh(centre_kernel(kernel(X, X)), max(ks))
        kpca = V * np.sqrt(np.maximum(w, 0.0))
        model, _, words = one_shot(X, kernel, max(ks), J, D_TABLE)
        embeddings = {"one-shot": model.training_embedding(), "KPCA": kpca,
                      # linear PCA has at most M components; larger k reuse all of them
                      "PCA": PCA(min(max(ks), X.shape[1]), random_state=seed).fit_transform(X)}
        for protocol in PROTOCOLS:
            for trial, (train, test) in enumerate(splits(n, y, seed, protocol)):
                for method, F in embeddings.items():
                    for k in ks:
                        rows.append(dict(
                            dataset=name, bandwidth=bandwidth, gamma=kernel.gamma,
                            protocol=protocol, trial=trial, n=n, M=X.shape[1], J=J, D=D_TABLE,
                            seed=seed, method=method, k=k,
                            accuracy=svm_accuracy(F[:, :k], y, train, test),
                            upload_words=words if method == "one-shot" else X.size))
            print(f"  {name} {bandwidth} seed={seed} {protocol}: done", flush=True)
    return rows


def with_defaults(rows, **defaults):
    """Rows of CSVs written before a column existed get its default (our settings)."""
    return [{**defaults, **r} for r in rows]


PARTS = {"fig3-ours": ("fig3", OURS), "fig3-paper": ("fig3", PAPER),
         "table-ours": ("table", OURS), "table-paper": ("table", PAPER)}


def _options(parser):
    parser.add_argument("--run", nargs="+", choices=list(PARTS), default=list(PARTS),
                        help="parts to (re)run; the CSVs' rows of the other parts are kept")


def main(argv=None):
    args, out = script_arguments(__doc__, DATASETS, OUT, argv, extra=_options)
    files = ("parties.csv", "samples.csv", "svm.csv")
    old = [with_defaults(read_rows(out / f), bandwidth=OURS) if (out / f).exists() else []
           for f in files]
    old[2] = with_defaults(old[2], protocol=PROTOCOLS[0], trial=0)
    if args.summary_only:
        parties_rows, sample_rows, svm_rows = old
    else:
        runs = [PARTS[r] for r in args.run]
        keep = [[r for r in rows if (part, r["bandwidth"]) not in runs
                 or r["dataset"] not in args.datasets]
                for rows, part in zip(old, ("fig3", "fig3", "table"), strict=True)]
        parties_rows, sample_rows, svm_rows = keep
        with threadpool_limits(1):  # one BLAS thread: the machine is small and shared
            for name in args.datasets:
                for part, bandwidth in runs:
                    if part == "fig3":
                        a, b = subspace_runs(name, args.seeds, args.quick, bandwidth)
                        parties_rows += a
                        sample_rows += b
                    else:
                        svm_rows += svm_runs(name, args.seeds, args.quick, bandwidth)
                for f, rows in zip(files, (parties_rows, sample_rows, svm_rows), strict=True):
                    if rows:  # old rows lack the newer columns: every row gets every column
                        columns = dict.fromkeys(k for r in rows for k in r)
                        write_rows(out / f, [{k: r.get(k, "") for k in columns} for r in rows])
    plot(parties_rows, sample_rows, svm_rows, out / "vertical_real.png")
    text = summary(parties_rows, sample_rows, svm_rows, args.quick)
    (out / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
