"""scikit-learn's KernelPCA gallery settings: kernelscale.KernelPCA against scikit-learn's.

Run: ``python benchmarks/sklearn_gallery.py`` (about ten minutes on a loaded 2-core
machine; ``--quick`` for a smoke run at small sizes). Writes
``benchmarks/results/sklearn_gallery/``: ``results.csv`` (one row per example,
setting and repeat) and ``summary.md``.

Issue 44: ``from kernelscale import KernelPCA`` runs scikit-learn's KernelPCA
examples with only the import swapped and gives scikit-learn's numbers, at no
more than its time. The examples themselves are scikit-learn's (BSD) and are not
copied here; each setting below is our own description of an example's data,
parameters and workload, which both classes run in one process, interleaved
(which goes first alternates), with one BLAS thread:

* ``kernel_pca``: the current "Kernel PCA" example: 1,000 points on two circles,
  a stratified split, ``n_components=None``, RBF gamma 10, the pre-image map
  (alpha 0.1); workload: fit, transform the test points, reconstruct them.
* ``kernel_pca_2011``: its first version: 400 points on two circles, the default
  ``n_components``, RBF gamma 10, the pre-image map; fit_transform, reconstruct.
* ``digits_denoising``: the denoising example on scikit-learn's bundled digits
  (the example downloads USPS): pixels scaled to [0, 1], 1,000 training and 100
  test images, noise of scale 0.25, 400 components, RBF gamma 1e-3, alpha 5e-3;
  fit on the noisy training images, denoise the noisy test images (MSE).
* ``approximation``: the "Kernel PCA approximation" example: 2,000 points on two
  circles, RBF gamma 10, the pre-image map, n_components 4, 40 and 2,000;
  fit_transform and reconstruct.
* ``solvers_components``: the solvers benchmark over n_components: 2,000 training
  and 1,000 test points on two circles, the linear kernel, n_components on part of
  its grid, each eigen_solver ('arpack' below 100 components, as it does).
* ``solvers_samples``: the solvers benchmark over n_samples: 100 components of
  101 to 4,000 points, 'dense' and 'randomized'.

Each row records the largest differences between the two classes' arrays:
scores up to a sign per component, on the components whose eigenvalue stands
apart from its neighbours and from round-off (a near-tie's directions are not
determined, by either library); the reconstructions (sign-free) and the
eigenvalues (relative to the largest). ``example_check`` is the example's own
check where it has one (the solvers benchmarks' ``assert_array_almost_equal`` of
a solver's |scores| against the dense solver's, 6 decimals), run on ours.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
from sklearn import decomposition
from sklearn.datasets import load_digits, make_circles
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import MinMaxScaler
from threadpoolctl import threadpool_limits

from kernelscale import KernelPCA
from kernelscale.bench import write_rows

OUT = Path(__file__).parent / "results" / "sklearn_gallery"


def well_separated(eigenvalues, gap=1e-6):
    """Components whose eigenvalue stands apart from its neighbours and from round-off."""
    w = np.asarray(eigenvalues, dtype=float)
    if w.size == 0:
        return np.zeros(0, bool)
    rel = np.abs(np.diff(w)) / w[0]
    apart = np.ones(w.size, bool)
    apart[:-1] &= rel > gap
    apart[1:] &= rel > gap
    return apart & (w > 1e-8 * w[0])


def score_difference(A, B, eigenvalues) -> float:
    """Largest |A - B| up to a sign per component, on the well-separated components."""
    keep = well_separated(eigenvalues)
    A, B = A[:, keep], B[:, keep]
    signs = np.where(np.sum(A * B, axis=0) < 0, -1.0, 1.0)
    return float(np.max(np.abs(A * signs - B), initial=0.0))


def circles(n, seed=0):
    return make_circles(n_samples=n, factor=0.3, noise=0.05, random_state=seed)


# ------------------------------------------------------------------ the workloads

def kernel_pca_current(cls, data):
    X_train, X_test = data
    est = cls(n_components=None, kernel="rbf", gamma=10, fit_inverse_transform=True, alpha=0.1)
    Z = est.fit(X_train).transform(X_test)
    return est, {"scores": Z, "back": est.inverse_transform(Z)}


def kernel_pca_2011(cls, X):
    est = cls(kernel="rbf", fit_inverse_transform=True, gamma=10)
    Z = est.fit_transform(X)
    return est, {"scores": Z, "back": est.inverse_transform(Z)}


def digits_denoising(cls, data):
    X_train_noisy, X_test_noisy, X_test = data
    est = cls(n_components=400, kernel="rbf", gamma=1e-3, fit_inverse_transform=True,
              alpha=5e-3, random_state=42)
    Z = est.fit(X_train_noisy).transform(X_test_noisy)
    back = est.inverse_transform(Z)
    return est, {"scores": Z, "back": back, "mse": float(np.mean((X_test - back) ** 2))}


def approximation(cls, X, n_components):
    est = cls(n_components=n_components, kernel="rbf", fit_inverse_transform=True, gamma=10)
    Z = est.fit_transform(X)
    return est, {"scores": Z, "back": est.inverse_transform(Z)}


def solvers(cls, data, n_components, solver):
    X_train, X_test = data
    est = cls(n_components, eigen_solver=solver)
    return est, {"scores": est.fit(X_train).transform(X_test)}


# ------------------------------------------------------------------ the runs

def compare(run, *args, repeats=3):
    """Both classes on one workload, interleaved; the last repeat's arrays compared.

    Each workload is timed in CPU seconds of this process (``time.process_time``),
    which other processes on a shared machine disturb far less than wall seconds (one
    BLAS thread: the CPU seconds are the computation's); wall seconds are kept too.
    """
    seconds = {"kernelscale": [], "scikit-learn": []}
    wall = {"kernelscale": [], "scikit-learn": []}
    classes = {"kernelscale": KernelPCA, "scikit-learn": decomposition.KernelPCA}
    for rep in range(repeats + 1):  # repeat 0 warms both up and is not timed
        order = list(classes) if rep % 2 else list(classes)[::-1]
        out = {}
        for name in order:
            start, cpu = time.perf_counter(), time.process_time()
            out[name] = run(classes[name], *args)
            if rep:
                seconds[name].append(time.process_time() - cpu)
                wall[name].append(time.perf_counter() - start)
    (ours, mine), (theirs, their) = out["kernelscale"], out["scikit-learn"]
    w = theirs.eigenvalues_
    row = {"n_components_out": mine["scores"].shape[1],
           "same_shape": mine["scores"].shape == their["scores"].shape,
           "method": ours.method_,
           "max_score_diff": score_difference(mine["scores"], their["scores"], w),
           "compared_components": int(well_separated(w).sum()),
           "max_eigenvalue_rel_diff": float(np.max(np.abs(ours.eigenvalues_ - w)) / w[0]),
           "max_reconstruction_diff": (float(np.max(np.abs(mine["back"] - their["back"])))
                                       if "back" in mine else ""),
           "mse_ours": mine.get("mse", ""), "mse_sklearn": their.get("mse", ""),
           "kernelscale_s": round(statistics.median(seconds["kernelscale"]), 4),
           "sklearn_s": round(statistics.median(seconds["scikit-learn"]), 4),
           "kernelscale_wall_s": round(statistics.median(wall["kernelscale"]), 4),
           "sklearn_wall_s": round(statistics.median(wall["scikit-learn"]), 4),
           "ratio": round(statistics.median(
               a / b for a, b in zip(seconds["kernelscale"], seconds["scikit-learn"],
                                     strict=True)), 3),
           "repeats": repeats}
    return row, mine


def run_all(quick: bool, repeats: int) -> list[dict]:
    scale = 4 if quick else 1
    rows = []

    def add(example, setting, row):
        rows.append({"example": example, "setting": setting, **row})
        print(rows[-1], flush=True)

    X, y = circles(1_000 // scale)
    X_train, X_test, _, _ = train_test_split(X, y, stratify=y, random_state=0)
    add("kernel_pca", "n_components=None", compare(kernel_pca_current, (X_train, X_test),
                                                   repeats=repeats)[0])
    add("kernel_pca_2011", "default n_components",
        compare(kernel_pca_2011, circles(400 // scale)[0], repeats=repeats)[0])

    X, y = load_digits(return_X_y=True)
    X = MinMaxScaler().fit_transform(X)
    n_train, n_test = (1_000, 100) if not quick else (450, 50)
    X_train, X_test, _, _ = train_test_split(X, y, stratify=y, random_state=0,
                                             train_size=n_train, test_size=n_test)
    rng = np.random.RandomState(0)
    X_test_noisy = X_test + rng.normal(scale=0.25, size=X_test.shape)
    X_train_noisy = X_train + rng.normal(scale=0.25, size=X_train.shape)
    add("digits_denoising", "bundled digits, 400 components",
        compare(digits_denoising, (X_train_noisy, X_test_noisy, X_test), repeats=repeats)[0])

    X = circles(2_000 // scale)[0]
    for k in (4, 40, X.shape[0]):
        add("approximation", f"n_components={k}",
            compare(approximation, X, k, repeats=1 if k > 1000 else repeats)[0])

    X = circles(3_000 // scale)[0]
    data = (X[: 2_000 // scale], X[2_000 // scale:])
    for k in (1, 5, 30, 200, 2_000 // scale - 1):
        dense = None
        for solver in ("dense", "arpack", "randomized"):
            if solver == "arpack" and k >= 100:
                continue
            row, mine = compare(solvers, data, k, solver, repeats=1 if k > 1000 else repeats)
            if solver == "dense":
                dense = mine["scores"]
            else:  # the example's own check, on ours
                try:
                    np.testing.assert_array_almost_equal(np.abs(mine["scores"]), np.abs(dense))
                    row["example_check"] = "passed"
                except AssertionError:
                    row["example_check"] = "FAILED"
            add("solvers_components", f"n_components={k}, {solver}", row)

    X = circles(4_000 // scale)[0]
    for n in np.linspace(101, X.shape[0], 4).astype(int):
        for solver in ("dense", "randomized"):
            row, mine = compare(solvers, (X[:n], X[:n]), 100, solver, repeats=1)
            add("solvers_samples", f"n_samples={n}, {solver}", row)
    return rows


def summary(rows, repeats) -> str:
    lines = [
        "# scikit-learn's KernelPCA gallery settings: kernelscale.KernelPCA against "
        "scikit-learn's", "",
        "`python benchmarks/sklearn_gallery.py`: each example's data, parameters and "
        "workload, run by `kernelscale.KernelPCA` and `sklearn.decomposition.KernelPCA` in "
        "one process, interleaved, one BLAS thread; seconds are CPU seconds of the process "
        "(less disturbed by the other jobs of a shared machine than wall seconds, which "
        f"results.csv keeps too), the median of the repeats ({repeats}, 1 for the largest "
        "fits); ratio = ours / scikit-learn's per repeat (median). A shared, loaded 2-core "
        "machine: read the ratios, not the seconds. "
        "Differences: scores up to a sign per component on the components whose eigenvalue "
        "stands apart (count in 'comps'), reconstructions as they are, eigenvalues relative "
        "to the largest.", "",
        "| example | setting | method | out cols | comps | max score diff | "
        "max reconstruction diff | max eigenvalue diff | MSE ours / sklearn | example check | "
        "ours CPU s | sklearn CPU s | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        recon = r["max_reconstruction_diff"]
        mse = (f"{r['mse_ours']:.5f} / {r['mse_sklearn']:.5f}" if r["mse_ours"] != "" else "")
        lines.append(
            f"| {r['example']} | {r['setting']} | {r['method']} | {r['n_components_out']} | "
            f"{r['compared_components']} | {r['max_score_diff']:.1e} | "
            f"{'' if recon == '' else f'{recon:.1e}'} | {r['max_eigenvalue_rel_diff']:.1e} | "
            f"{mse} | {r.get('example_check', '')} | {r['kernelscale_s']:.3f} | "
            f"{r['sklearn_s']:.3f} | {r['ratio']:.2f} |")
    ratios = [r["ratio"] for r in rows]
    lines += ["", f"Median ratio over the {len(rows)} settings: "
                  f"{statistics.median(ratios):.2f} (ours / scikit-learn's CPU seconds; "
                  f"largest {max(ratios):.2f}, smallest {min(ratios):.2f})."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="a quarter of the sizes")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    out = args.out / "quick" if args.quick else args.out
    out.mkdir(parents=True, exist_ok=True)
    with threadpool_limits(1):
        rows = run_all(args.quick, 1 if args.quick else args.repeats)
    for row in rows:
        row.setdefault("example_check", "")
    write_rows(out / "results.csv", rows)
    text = summary(rows, args.repeats)
    (out / "summary.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
