"""Run an :class:`~kernelscale.bench.spec.Experiment`: one CSV row per run.

The loop is workers x seeds x methods x budgets. Each run fits on a fresh
:class:`~kernelscale.backends.local.LocalCluster` partition, records the ledger's fit
and upload words, wall-clock seconds and the peak memory allocated during the
fit (``tracemalloc``: memory beyond the data already held), then evaluates
the low-rank error through the runtime (phase ``evaluate``). Where the spec
asks for it, the exact optimum gives ``ratio = err / opt`` and the excess
energy ratio ``(err - opt) / (trace - opt)``.

With ``word_budgets`` the budgeted methods are sized per (workers, seed) to
the largest |Y| within each fit-word budget (:mod:`kernelscale.bench.sweep`;
column ``max_words``) and run with ``redraw=False``. Exact KPCA on more than
:data:`DENSE_EIGH_MAX` rows is not rerun when the optimum is known: its row
holds the forecast words and ``error = opt`` (``seconds`` empty); so is
uniform + batch when its |Y| is all n points (then exact KPCA). With
``downstream='kmeans'`` each fit is followed by distributed k-means on the
workers' k-dimensional projections (phase ``kmeans``; paper 001, Figure 8).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import time
import tracemalloc
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from kernelscale import horizontal
from kernelscale.backends.local import LocalCluster
from kernelscale.bench.spec import Experiment, Method
from kernelscale.bench.sweep import data_options, size_method
from kernelscale.horizontal.forecast import forecast_words
from kernelscale.kernels import Kernel, make_kernel, median_heuristic
from kernelscale.metrics.lowrank import excess_energy_ratio
from kernelscale.partition import make_partition, split
from kernelscale.progress import progress_bar

COLUMNS = ("experiment", "method", "messages", "budget", "max_words", "n_landmarks", "seed",
           "n_workers", "n_samples", "n_features", "fit_words", "upload_words", "seconds",
           "parallel_seconds", "peak_mib",
           "error", "trace", "opt", "ratio", "excess",
           "kmeans_words", "total_words", "objective", "nmi")
RESULTS_ROOT = Path("benchmarks") / "results"
REFERENCE_MAX_SAMPLES = 20_000
DENSE_EIGH_MAX = 4_000


def resolve_kernel(spec: dict, X, random_state=0) -> Kernel:
    """A :class:`Kernel` from an experiment's kernel dict (``sigma_scale``: median trick)."""
    params = dict(spec)
    scale = params.pop("sigma_scale", None)
    if scale is not None:
        params["sigma"] = median_heuristic(X, scale=scale, n_subset=params.pop("n_subset", 2000),
                                           random_state=random_state)
    return make_kernel(n_features=X.shape[1], **params)


def write_rows(path, rows: list[dict]) -> None:
    """Write dict rows as CSV, the columns in the order of the first row's keys."""
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def check_gram_entries(X, K, n_checks: int = 2000, random_state=0, rtol: float = 1e-8,
                       kernel: Kernel | None = None) -> None:
    """Compare sampled entries of a large block ``K`` with direct row dot products.

    Guards against the platform's OpenBLAS SYRK hazard (DESIGN.md): a wrong
    ``X @ X.T`` would make ``K[i, j] != k(x_i, x_j)``. Raises ``AssertionError``.
    """
    rng = np.random.default_rng(random_state)
    rows = rng.integers(0, K.shape[0], n_checks)
    cols = rng.integers(0, K.shape[1], n_checks)
    if kernel is None:
        direct = np.array([_row_dot(X, i, j) for i, j in zip(rows, cols, strict=True)])
    else:
        direct = np.array([kernel(X[i : i + 1], X[j : j + 1])[0, 0]
                           for i, j in zip(rows, cols, strict=True)])
    scale = max(float(np.abs(direct).max()), 1e-300)
    bad = np.abs(K[rows, cols] - direct) > rtol * scale
    if bad.any():
        raise AssertionError(
            f"{int(bad.sum())} of {n_checks} sampled Gram entries differ from direct dot "
            "products: the BLAS symmetric-product hazard (DESIGN.md) reached a result.")


def _row_dot(X, i, j) -> float:
    if sp.issparse(X):
        return float(X[i].multiply(X[j]).sum())
    return float(np.dot(X[i], X[j]))


def exact_reference(X, kernel: Kernel, n_components: int, center: bool) -> dict:
    """``trace``, ``opt`` (and ``center_norm_sq``) from the full kernel matrix.

    Dense ``eigh`` up to :data:`DENSE_EIGH_MAX` rows, ARPACK (``eigsh``) beyond;
    sampled entries are checked against direct evaluations first.
    """
    from scipy.linalg import eigh
    from scipy.sparse.linalg import eigsh

    n = X.shape[0]
    if n > REFERENCE_MAX_SAMPLES:
        raise ValueError(f"The exact reference is limited to {REFERENCE_MAX_SAMPLES} rows.")
    K = kernel(X, X)
    check_gram_entries(X, K, n_checks=200, kernel=kernel)
    center_norm_sq = None
    if center:
        row_mean = K.mean(axis=0)
        center_norm_sq = float(row_mean.mean())
        K -= row_mean[None, :]
        K -= row_mean[:, None]
        K += center_norm_sq
    trace = float(np.trace(K))
    if n <= DENSE_EIGH_MAX:
        top = eigh(K, eigvals_only=True, subset_by_index=[n - n_components, n - 1])
    else:
        v0 = np.random.default_rng(0).standard_normal(n)
        top = eigsh(K, k=n_components, which="LA", return_eigenvectors=False, v0=v0, tol=1e-10)
    return {"trace": trace, "opt": trace - float(np.sum(top)), "center_norm_sq": center_norm_sq}


def _fit(method: Method, cluster, X, kernel, exp: Experiment, budget, seed):
    opts = dict(method.options)
    common = {"n_components": exp.n_components, "center": exp.center, "random_state": seed}
    if method.budgeted:
        common["n_landmarks"] = budget
        if exp.word_budgets and method.function != "random_features":
            common["redraw"] = False  # never more words than the forecast
    if method.function == "diskpca":
        return horizontal.diskpca(cluster, kernel, **common, **opts)
    if method.function == "uniform_dislr":
        return horizontal.uniform_dislr(cluster, kernel, **common, **opts)
    if method.function == "uniform_batch":
        return horizontal.uniform_batch(cluster, kernel, **common, **opts)
    if method.function == "exact":
        return horizontal.exact_kpca(cluster, kernel, n_components=exp.n_components,
                                     center=exp.center)
    if method.function == "random_features":
        return horizontal.random_features_pca(cluster, kernel, **common, **opts)
    return _sklearn_kpca(X, kernel, exp.n_components, seed, opts)


def _sklearn_kpca(X, kernel: Kernel, n_components, seed, opts):
    """scikit-learn's KernelPCA on all the data (always centred); returns its projections."""
    from sklearn.decomposition import KernelPCA

    params = {"gamma": kernel.gamma}
    if kernel.name == "poly":
        params.update(degree=kernel.degree, coef0=kernel.coef0)
    elif kernel.name not in ("rbf", "linear"):
        raise ValueError(f"sklearn_kpca does not support the {kernel.name} kernel here.")
    kpca = KernelPCA(n_components=n_components, kernel=kernel.name,
                     eigen_solver=opts.get("eigen_solver", "randomized"), random_state=seed,
                     **params)
    return kpca.fit_transform(X)


def _data_words(X) -> int:
    return int(2 * X.nnz) if sp.issparse(X) else int(X.size)


def _parallel_seconds(times, seconds: float) -> float:
    """The fit's time with every worker on its own machine (in-process workers run in turn).

    Each round's worker steps (one after another here) are replaced by the
    slowest of them; everything else (the master's work) stays.
    """
    return seconds - sum(t.worker_seconds - t.slowest_worker_seconds for t in times)


def run_one(method: Method, exp: Experiment, X, parts, kernel, budget, seed, reference,
            max_words=None, labels=None) -> dict:
    """Fit one method once and measure it; returns a CSV row (dict).

    ``max_words``: the word budget that sized ``budget`` (|Y|), for the CSV.
    ``labels``: true classes in worker order, for the NMI of a downstream k-means.
    """
    cluster = LocalCluster(parts)
    tracemalloc.start()
    tracemalloc.reset_peak()
    start = time.perf_counter()
    model = _fit(method, cluster, X, kernel, exp, budget, seed)
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    row = {"experiment": exp.name, "method": method.label,
           "messages": method.options.get("messages", ""), "budget": budget if method.budgeted
           else "", "max_words": max_words or "", "seed": seed, "n_workers": len(parts),
           "n_samples": X.shape[0], "n_features": X.shape[1], "seconds": round(seconds, 4),
           "parallel_seconds": round(_parallel_seconds(cluster.ledger.times("fit"), seconds), 4),
           "peak_mib": round(peak, 2)}
    if method.function == "sklearn_kpca":
        row.update(n_landmarks=X.shape[0], fit_words=_data_words(X), upload_words=_data_words(X))
        trace = reference["trace"] if reference else math.nan
        error = trace - float(np.sum(model**2))
    else:
        landmarks = getattr(model, "landmarks", None)
        row.update(n_landmarks=landmarks.shape[0] if landmarks is not None else "",
                   fit_words=cluster.ledger.total_words(phase="fit"),
                   upload_words=cluster.ledger.upload_words(phase="fit"))
        norm_sq = reference["center_norm_sq"] if reference else None
        result = horizontal.distributed_error(cluster, model, norm_sq)
        error, trace = result["error"], result["trace"]
    row.update(error=error, trace=trace)
    if reference:
        row.update(_ratios(error, reference))
    if exp.downstream == "kmeans":
        row.update(downstream_kmeans(cluster, model, exp, seed, error, labels))
    return row


def _ratios(error: float, reference: dict) -> dict:
    opt = reference["opt"]
    return {"opt": opt, "ratio": error / opt if opt > 0 else math.nan,
            "excess": excess_energy_ratio(error, opt, reference["trace"])}


def downstream_kmeans(cluster, model, exp: Experiment, seed, error: float, labels=None) -> dict:
    """Distributed k-means on the workers' projections after a fit (paper 001, Figure 8).

    The workers project their rows with the model the fit already sent them (no
    words), run the coreset k-means protocol with k = ``exp.n_components``
    clusters under phase ``kmeans``, and label their rows locally. The
    objective is the k-means cost in feature space, the mean over points of
    ``||phi(x) - c||^2`` = (the point's residual off the k components) + (its
    projection's squared distance to its centre): ``(error + cost) / n``.

    Returns
    -------
    dict
        ``kmeans_words``, ``total_words`` (fit + k-means), ``objective`` and
        ``nmi`` (against ``labels`` in worker order; NaN without them).
    """
    from sklearn.metrics import normalized_mutual_info_score

    from kernelscale.federated.kmeans import _sq_dist_to_centers, kmeans_on_workers

    for state in cluster.states:
        state.embedding = model.transform(state.data)
    with cluster.phase("kmeans"):
        result = kmeans_on_workers(cluster, exp.n_components, coreset_size=exp.coreset_size,
                                   source="embedding", point_kind="sketch", random_state=seed,
                                   collect_labels=False)
    cost, found = 0.0, []
    for state in cluster.states:
        d2, nearest = _sq_dist_to_centers(state.embedding, result.centers)
        cost += float(d2.sum())
        found.append(nearest)
    n = sum(state.embedding.shape[0] for state in cluster.states)
    kmeans_words = cluster.ledger.total_words(phase="kmeans")
    nmi = (normalized_mutual_info_score(labels, np.concatenate(found))
           if labels is not None else math.nan)
    return {"kmeans_words": kmeans_words,
            "total_words": cluster.ledger.total_words(phase="fit") + kmeans_words,
            "objective": (error + cost) / n, "nmi": nmi}


def exact_from_reference(exp: Experiment, X, parts, kernel, seed, reference,
                         method: Method | None = None, max_words=None) -> dict:
    """Exact KPCA's row without refitting it: forecast words, ``error = opt``.

    With ``method`` uniform + batch at |Y| = n (every point sampled: exact KPCA
    with the same messages), its row, labelled as the method.
    """
    n_rows = [p.shape[0] for p in parts]
    function = method.function if method is not None else "exact"
    words = forecast_words(function, n_rows, X.shape[1], exp.n_components,
                           n_landmarks=X.shape[0], kernel=kernel, center=exp.center,
                           **data_options(X))
    return {"experiment": exp.name, "method": method.label if method else EXACT_LABEL,
            "messages": "", "budget": X.shape[0] if method else "",
            "max_words": max_words or "", "n_landmarks": X.shape[0], "seed": seed,
            "n_workers": len(parts), "n_samples": X.shape[0], "n_features": X.shape[1],
            "fit_words": words.words,
            "upload_words": words.upload_words,
            "error": reference["opt"], "trace": reference["trace"],
            **_ratios(reference["opt"], reference)}


EXACT_LABEL = "exact KPCA (the optimum; words forecast)"


def _from_reference(method: Method, exp: Experiment, X, budget, reference) -> bool:
    """Whether a run is exact KPCA (or uniform + batch of all n points) too large to refit."""
    every_point = method.function == "exact" or (method.function == "uniform_batch"
                                                 and budget is not None and budget >= X.shape[0])
    return bool(every_point and reference and not exp.downstream
                and X.shape[0] > DENSE_EIGH_MAX)


def _plan(exp: Experiment, X=None, kernel=None) -> list[tuple]:
    """``(n_workers, seed, method, |Y| or None, max_words or None)`` for every run.

    With word budgets every budgeted method is sized on each (workers, seed)
    partition (``X`` and ``kernel`` needed).
    """
    runs = []
    for n_workers in exp.workers:
        for seed in exp.seeds:
            n_rows = None
            if exp.word_budgets:
                idx = make_partition(X.shape[0], n_workers, exp.partition, random_state=seed)
                n_rows = [len(i) for i in idx]
            for method in exp.methods:
                if not method.budgeted:
                    runs.append((n_workers, seed, method, None, None))
                elif n_rows is None:
                    runs += [(n_workers, seed, method, b, None) for b in exp.budgets]
                else:
                    sized = size_method(method.function, method.options, exp.word_budgets,
                                        n_rows, X.shape[1], exp.n_components, kernel=kernel,
                                        center=exp.center, **data_options(X))
                    runs += [(n_workers, seed, method, ny, b) for b, ny, _ in sized]
    return runs


def fingerprint(X) -> str:
    """The data's fingerprint in cached references (as ``benchmarks/sampler.py``)."""
    return hashlib.sha256(np.ascontiguousarray(X).tobytes()).hexdigest()[:16]


def load_reference(exp: Experiment, X, kernel) -> tuple[dict | None, str]:
    """The exact reference: from ``exp.reference_cache`` when its fingerprint matches,
    else computed (:func:`exact_reference`). Returns ``(reference, source)``."""
    if exp.reference_cache and not sp.issparse(X):
        path = Path(f"{exp.reference_cache}_{'centred' if exp.center else 'uncentred'}.npz")
        if path.exists():
            cached = np.load(path)
            if str(cached["fingerprint"]) == fingerprint(X):
                return ({k: float(cached[k]) for k in ("trace", "opt", "center_norm_sq")},
                        str(path))
    if not exp.reference:
        return None, ""
    return exact_reference(X, kernel, exp.n_components, exp.center), "computed"


def run_experiment(exp: Experiment, out_dir=None, quiet: bool = False,
                   blas_threads: int | None = 1) -> Path:
    """Run every (workers, seed, method, budget) of ``exp``; write ``results.csv``.

    ``blas_threads`` limits BLAS threads during the run (``threadpoolctl``; None
    leaves them alone): on a small shared machine one thread per process is
    faster and avoids the multi-threaded SYRK hazard of DESIGN.md.
    Returns the CSV path. Also writes ``meta.json`` (data shape, kernel,
    timings of the data generation and the reference).
    """
    from threadpoolctl import threadpool_limits

    if blas_threads is None:
        return _run_experiment(exp, out_dir, quiet, None)
    with threadpool_limits(limits=int(blas_threads), user_api="blas"):
        return _run_experiment(exp, out_dir, quiet, blas_threads)


def _run_experiment(exp: Experiment, out_dir, quiet: bool, blas_threads) -> Path:
    out_dir = Path(out_dir) if out_dir is not None else RESULTS_ROOT / exp.name
    out_dir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    X, y = exp.load_data(return_labels=True)
    data_seconds = time.perf_counter() - start
    kernel = resolve_kernel(exp.kernel, X)
    start = time.perf_counter()
    reference, reference_source = (load_reference(exp, X, kernel)
                                   if exp.reference or exp.reference_cache else (None, ""))
    reference_seconds = time.perf_counter() - start
    runs = _plan(exp, X, kernel)
    path = out_dir / "results.csv"
    t0 = time.perf_counter()
    with path.open("w", newline="") as handle, progress_bar(
            not quiet, total=len(runs), desc=exp.name, unit="run") as bar:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS, restval="")
        writer.writeheader()
        parts_key, parts, labels = None, None, None
        for n_workers, seed, method, budget, max_words in runs:
            if parts_key != (n_workers, seed):
                idx = make_partition(X.shape[0], n_workers, exp.partition, random_state=seed)
                parts_key, parts = (n_workers, seed), split(X, idx)
                labels = None if y is None else np.asarray(y)[np.concatenate(idx)]
            bar.set_postfix_str(f"{method.label} |Y|={budget or '-'} seed={seed} s={n_workers}")
            if _from_reference(method, exp, X, budget, reference):
                row = exact_from_reference(exp, X, parts, kernel, seed, reference,
                                           None if method.function == "exact" else method,
                                           max_words)
            else:
                row = run_one(method, exp, X, parts, kernel, budget, seed, reference,
                              max_words, labels)
            writer.writerow(row)
            handle.flush()
            bar.update()
    meta = {"experiment": exp.name, "description": exp.description,
            "dataset": exp.dataset if isinstance(exp.dataset, str) else None,
            "dataset_options": exp.dataset_options,
            "n_samples": int(X.shape[0]), "n_features": int(X.shape[1]),
            "sparse": bool(sp.issparse(X)), "kernel": kernel.to_dict(),
            "n_components": exp.n_components, "center": exp.center,
            "partition": exp.partition, "blas_threads": blas_threads,
            "data_seconds": round(data_seconds, 3),
            "reference_seconds": round(reference_seconds, 3),
            "reference_source": reference_source,
            "word_budgets": list(exp.word_budgets), "downstream": exp.downstream,
            "reference": None if reference is None else
            {"trace": reference["trace"], "opt": reference["opt"]},
            "total_seconds": round(time.perf_counter() - t0, 3)}
    (out_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    return path
