"""disKPCA's landmark samplers at equal words on real data (issue 11, part 4).

Run: ``python benchmarks/sampler.py`` (about 20 minutes on 2 cores with ``--jobs 2``;
``--quick`` for a 2-seed, 2-data-set smoke run). Writes ``benchmarks/results/sampler/``:
``results.csv`` (one row per fit), ``summary.md`` and ``refs/`` (the exact references,
computed once and reused).

Data: scikit-learn's digits (standardised, 5 power-law workers) and the UCI sets
letter, satellite and spam (gzipped CSV with a last ``label`` column, by default the
copies bundled with :mod:`kernelscale.datasets`, else from ``--data-dir``; each feature
standardised; 10 power-law workers). Paper 001, section 6.2:
k = 10; RBF with sigma = 0.2 and 1.0 x the median distance; polynomial q = 4
(gamma = 1/d, coef0 = 1); arc-cosine of order 2. Uncentred and centred.

Methods, all in one run, each sweeping its own |Y| so that the curves cover the
same range of total fit words (``ledger.total_words('fit')``):

* ``diskpca (ridge)``: the default sampler, a uniform pilot and ridge-leverage rounds;
* ``diskpca (paper)``: Algorithm 2 of 001 (leverage scores of the embedding, then adaptive);
* ``uniform + disLR`` and ``uniform + batch`` (the latter up to the |Y| the others' words buy).

Error: the excess-energy ratio (err - opt) / (trace - opt) on the training data
against the exact rank-k optimum (0 = optimal). Equal words: a method's mean
error at its mean words, against a baseline's mean error interpolated (log-log)
at the same words. A second part (``--no-why`` skips it) measures why the
paper's sampler loses: the leverage stage's share of the words, an ablation at
equal |Y| (leverage P vs uniform P, residual vs ridge residual, one vs two
rounds), and per-point diagnostics of the samples against the exact spectrum.

The data, the kernels and the cached exact references are those of
:mod:`kernelscale.bench.settings`, shared with the word-budget benchmarks; the
summary's tables and verdicts are written by :mod:`sampler_shared.report`.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
from sampler_shared.report import (
    ABLATION,
    DATASETS,
    DISKPCA_BUDGETS,
    KERNELS,
    MAIN,
    K,
    read_results,
    summary,
)
from scipy.stats import spearmanr

from kernelscale.backends.local import LocalCluster
from kernelscale.bench import write_rows
from kernelscale.bench.settings import (
    full_kernel,
    load_standardized,
    make_setting_kernel,
    n_workers,
    references,
    top_eigh,
)
from kernelscale.horizontal import distributed_error, uniform_batch, uniform_dislr
from kernelscale.horizontal.diskpca import (
    default_n_leverage,
    diskpca,
    ridge_sample,
)
from kernelscale.horizontal.dislr import dislr
from kernelscale.linalg import as_generator
from kernelscale.partition import make_partition, split
from kernelscale.runtime import validate_cluster, worker_seeds

OUT = Path(__file__).parent / "results" / "sampler"
UNIFORM_DISLR_BUDGETS = (50, 100, 200, 400, 450)  # 450: its curve reaches the paper's words
BATCH_BUDGETS = (50, 100, 200, 400, 800, 1600, 3200)


# ----------------------------------------------------------------------------- fits

def fit(method, cluster, kernel, n_landmarks, center, rng):
    if method == "diskpca (ridge)":
        return diskpca(cluster, kernel, K, n_landmarks=n_landmarks, center=center,
                       random_state=rng)
    if method == "diskpca (paper)":
        return diskpca(cluster, kernel, K, n_landmarks=n_landmarks, center=center,
                       random_state=rng, sampler="paper")
    if method == "uniform + disLR":
        return uniform_dislr(cluster, kernel, K, n_landmarks=n_landmarks, center=center,
                             random_state=rng)
    if method == "uniform + batch":
        return uniform_batch(cluster, kernel, K, n_landmarks=n_landmarks, center=center,
                             random_state=rng)
    # Ablation: the paper's |P| = ceil(2 k ln k) uniform points, one round by the plain
    # residual (ridge 0) or the ridge residual; the default adds a second ridge round.
    cluster.reset()
    info = validate_cluster(cluster)
    targets = [default_n_leverage(K, n_landmarks), n_landmarks]
    scale = 0.0 if method == "uniform P + adaptive" else 1.0
    Y, new, _, _ = ridge_sample(cluster, kernel, K, targets, np.array(info.n_rows), center,
                                4096, rng, ridge_scale=scale)
    return dislr(cluster, Y, new, kernel, K, info.n_samples, "gram", center, 4096,
                 worker_seeds(rng, cluster.n_workers))


def batch_budgets(X, dataset, words_to_cover: float, center: bool) -> list[int]:
    """|Y| for uniform + batch up to the words the other methods spend (and at most n)."""
    s, (n, d) = n_workers(dataset), X.shape
    per_point = d + s * (d + K + (1 if center else 0))  # up, then Y and C to every worker
    cap = min(n, math.ceil(words_to_cover / per_point))
    return sorted({b for b in BATCH_BUDGETS if b < 0.8 * cap} | {cap})


def run_setting(task) -> list[dict]:
    dataset, which, seeds, methods, data_dir, refs_dir = task
    X = load_standardized(dataset, data_dir)
    kernel = make_setting_kernel(X, which)
    refs = references(dataset, which, X, kernel, refs_dir)
    rows = []
    for center in (False, True):
        ref = refs[center]
        plan = [(m, b) for m in methods if m != "uniform + batch"
                and not (center and m in ABLATION)  # the ablation is read uncentred
                for b in (UNIFORM_DISLR_BUDGETS if m == "uniform + disLR" else DISKPCA_BUDGETS)]
        for seed in seeds:
            parts = split(X, make_partition(X.shape[0], n_workers(dataset), random_state=seed))
            runs = [(m, b, seed) for m, b in plan]
            done = []
            for m, b, sd in runs:
                done.append(one_fit(dataset, which, center, parts, kernel, ref, m, b, sd))
            rows += done
            if "uniform + batch" in methods:
                most = max(r["fit_words"] for r in done)
                for b in batch_budgets(X, dataset, most, center):
                    rows.append(one_fit(dataset, which, center, parts, kernel, ref,
                                        "uniform + batch", b, seed))
    print(f"{dataset} {which}: {len(rows)} fits", flush=True)
    return rows


def one_fit(dataset, which, center, parts, kernel, ref, method, n_landmarks, seed) -> dict:
    cluster = LocalCluster(parts)
    start = time.perf_counter()
    model = fit(method, cluster, kernel, n_landmarks, center, as_generator(seed))
    seconds = time.perf_counter() - start
    err = distributed_error(cluster, model, ref["center_norm_sq"] if center else None)["error"]
    rounds = cluster.ledger.words_by_round("fit")
    return {"dataset": dataset, "kernel": which, "centred": center, "method": method,
            "n_landmarks": int(n_landmarks), "seed": seed,
            "fit_words": cluster.ledger.total_words("fit"),
            "leverage_words": sum(sum(v.values()) for r, v in rounds.items()
                                  if r.startswith("leverage")),
            "n_rounds": len(rounds), "seconds": round(seconds, 3), "error": err,
            "excess": (err - ref["opt"]) / (ref["trace"] - ref["opt"])}


# ----------------------------------------------------------------------------- why

DIAGNOSE = (("digits", "rbf0.2"), ("digits", "rbf1.0"), ("digits", "poly"),
            ("spam", "rbf0.2"), ("spam", "rbf1.0"), ("satellite", "rbf0.2"),
            ("satellite", "rbf1.0"))


def diagnose(task) -> dict:
    """Per-point statistics of the samples of |Y| = 200 against the exact spectrum.

    ``lev_k``: rank-k leverage (sums to k; the top-k subspace's weight on a point);
    ridge leverage with lambda = opt / k (Musco and Musco's choice; top 50
    eigenpairs exact, the tail's w / (w + lambda) taken as w / lambda);
    isolation: the 10% of points with the smallest kernel degree mean_j k(a, x_j).
    """
    dataset, which, seeds, data_dir = task
    X = load_standardized(dataset, data_dir)
    kernel = make_setting_kernel(X, which)
    Kmat = full_kernel(X, kernel)
    w, U = top_eigh(Kmat, 50, vectors=True)
    w = np.maximum(w, 0.0)
    diag = np.diag(Kmat).copy()
    degree = Kmat.mean(axis=1)
    del Kmat
    opt_over_k = (diag.sum() - w[:K].sum()) / K
    lev_k = np.sum(U[:, :K] ** 2, axis=1)
    head = (U**2) @ w
    ridge_lev = (U**2) @ (w / (w + opt_over_k)) + np.maximum(diag - head, 0.0) / opt_over_k
    energy_k = (U[:, :K] ** 2) @ w[:K]
    isolated = degree <= np.quantile(degree, 0.1)
    index = {row.tobytes(): i for i, row in enumerate(X)}
    picks = defaultdict(list)
    rho_k, rho_ridge = [], []
    for seed in seeds:
        idx = make_partition(X.shape[0], n_workers(dataset), random_state=seed)
        parts, order = split(X, idx), np.concatenate(idx)
        for name in ("paper", "ridge", "uniform"):
            cluster = LocalCluster(parts)
            if name == "uniform":
                model = uniform_dislr(cluster, kernel, K, n_landmarks=200, random_state=seed)
                first = 0
            else:
                model = diskpca(cluster, kernel, K, n_landmarks=200, sampler=name,
                                random_state=seed)
                first = model.info["n_leverage"]
            rows = np.array([index[r.tobytes()] for r in np.ascontiguousarray(model.landmarks)])
            if name == "paper":
                picks["P (paper)"].append(rows[:first])
                scores = np.concatenate([state.scores for state in cluster.states])
                rho_k.append(spearmanr(scores, lev_k[order])[0])
                rho_ridge.append(spearmanr(scores, ridge_lev[order])[0])
            picks[{"paper": "Y~ (paper)", "ridge": "ridge rounds", "uniform": "uniform"}[name]
                  ].append(rows[first:])
    out = {"dataset": dataset, "kernel": which,
           "isolated_energy_share": energy_k[isolated].sum() / energy_k.sum(),
           "isolated_trace_share": diag[isolated].sum() / diag.sum(),
           "rho_k": float(np.mean(rho_k)), "rho_ridge": float(np.mean(rho_ridge)),
           "ridge_lev_spread": float(ridge_lev.std() / ridge_lev.mean())}
    for name, lst in picks.items():
        rows = np.concatenate(lst)
        out[f"{name}: isolated"] = float(isolated[rows].mean())
        out[f"{name}: n lev_k / k"] = float(np.mean(X.shape[0] * lev_k[rows] / K))
    return out


# ----------------------------------------------------------------------------- main

def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="2 seeds, digits and spam, RBF 0.2 and poly only")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="processes (one setting each)")
    parser.add_argument("--data-dir", type=Path, help="folder of letter/satellite/spam.csv.gz")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=KERNELS)
    parser.add_argument("--no-why", action="store_true", help="skip the ablation and diagnostics")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--summary-only", action="store_true",
                        help="rewrite summary.md from results.csv and diagnostics.csv")
    args = parser.parse_args(argv)
    if args.summary_only:
        rows, diagnostics = read_results(args.out)
        seeds = sorted({r["seed"] for r in rows})
        (args.out / "summary.md").write_text(summary(rows, diagnostics, seeds, None))
        print(f"wrote {args.out}/summary.md")
        return
    seeds = list(range(2 if args.quick else args.seeds))
    datasets = ["digits", "spam"] if args.quick else args.datasets
    kernels = ["rbf0.2", "poly"] if args.quick else args.kernels
    start = time.perf_counter()
    refs_dir = args.out / "refs"
    # Reference first, one setting at a time (letter's kernel matrix is 3.2 GB).
    for ds in datasets:
        X = load_standardized(ds, args.data_dir)
        for kn in kernels:
            references(ds, kn, X, make_setting_kernel(X, kn), refs_dir)
    tasks = []
    for ds in datasets:
        for kn in kernels:
            methods = MAIN
            if not args.no_why and kn.startswith("rbf"):
                methods = MAIN + ABLATION
            tasks.append((ds, kn, seeds, methods, args.data_dir, refs_dir))
    tasks.sort(key=lambda t: t[0] != "letter")  # the longest first
    diag_tasks = [] if args.no_why else [
        (ds, kn, seeds, args.data_dir) for ds, kn in DIAGNOSE if ds in datasets and kn in kernels]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        diag_futures = [pool.submit(diagnose, t) for t in diag_tasks]
        rows = [r for part in pool.map(run_setting, tasks) for r in part]
        diagnostics = [f.result() for f in diag_futures]
    args.out.mkdir(parents=True, exist_ok=True)
    write_rows(args.out / "results.csv", rows)
    if diagnostics:
        write_rows(args.out / "diagnostics.csv", diagnostics)
    text = summary(rows, diagnostics, seeds, time.perf_counter() - start)
    (args.out / "summary.md").write_text(text)
    print(f"wrote {args.out}/results.csv and summary.md "
          f"({(time.perf_counter() - start) / 60:.1f} min)")


if __name__ == "__main__":
    main()
