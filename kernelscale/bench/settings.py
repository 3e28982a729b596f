"""The real-data settings of the sampler and word-budget benchmarks: data, kernel, exact reference.

A setting is a data set (every feature standardised), one of four kernels
(:data:`KERNEL_LABELS`) and the exact rank-k optimum of its kernel matrix,
uncentred and centred. The scripts ``benchmarks/sampler.py`` and
``benchmarks/budget*.py`` share it; they pass the folder of the cached
references (``results/sampler/refs``), this module knows no benchmark folder.

>>> KERNEL_LABELS["rbf0.2"], n_workers("digits"), n_workers("letter-unit")
('RBF 0.2 x median', 5, 10)
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import scipy.linalg as sla
import scipy.sparse.linalg as ssla

from kernelscale.bench.runner import fingerprint
from kernelscale.datasets import load_dataset, load_digits_standardized
from kernelscale.kernels import Kernel, make_kernel, median_heuristic

__all__ = [
    "KERNEL_LABELS",
    "UNIT",
    "full_kernel",
    "kernel_options",
    "load_set",
    "load_standardized",
    "make_setting_kernel",
    "n_workers",
    "references",
    "spectrum_references",
    "top_eigh",
]

#: The components of every reference's optimum.
K = 10
#: The settings' kernels by name.
KERNEL_LABELS = {"rbf0.1": "RBF 0.1 x median", "rbf0.2": "RBF 0.2 x median",
                 "rbf1.0": "RBF 1.0 x median", "poly": "poly q = 4", "arccos": "arc-cos deg 2"}
#: A set's rows scaled to unit norm: ``NAME-unit``.
UNIT = "-unit"


def load_standardized(name: str, data_dir: Path | None = None) -> np.ndarray:
    """A set with every feature standardised: the copy bundled with
    :mod:`kernelscale.datasets`, or a gzipped CSV file of ``data_dir``.

    Parameters
    ----------
    name : str
        ``'digits'``, a set of :func:`kernelscale.datasets.load_dataset`
        (letter, satellite, spam, insurance, ...), or with ``data_dir`` the stem
        of ``NAME.csv.gz`` there (a header line, numeric feature columns, a last
        ``label`` column).
    data_dir : Path, optional
        Read ``NAME.csv.gz`` from this folder instead of the bundled copy.

    Returns
    -------
    ndarray of shape (n_samples, n_features)
        Every column centred and scaled to unit variance (a constant column is
        only centred).
    """
    if name == "digits":
        return load_digits_standardized()[0]
    if data_dir is None:
        return load_dataset(name, standardize=True)[0]
    path = Path(data_dir) / f"{name}.csv.gz"
    if not path.exists():
        raise SystemExit(f"{path} not found; pass another --data-dir.")
    with gzip.open(path, "rt") as handle:
        handle.readline()
        rows = [line.rstrip("\n").split(",")[:-1] for line in handle if line.strip()]
    X = np.array(rows, dtype=float)
    scale = X.std(axis=0)
    scale[scale == 0] = 1.0
    return (X - X.mean(axis=0)) / scale


def load_set(name: str) -> np.ndarray:
    """A set of the word-budget grid, every feature standardised.

    Parameters
    ----------
    name : str
        A set of :func:`load_standardized` (its bundled copy), or ``NAME-unit``:
        NAME with every row then scaled to unit norm.

    Returns
    -------
    ndarray of shape (n_samples, n_features)
    """
    if name.endswith(UNIT):
        X = load_set(name.removesuffix(UNIT))
        return X / np.linalg.norm(X, axis=1, keepdims=True)
    return load_standardized(name)


def n_workers(name: str) -> int:
    """The power-law workers of a set: 5 on digits and musk (and their ``-unit`` rows), else 10."""
    return 5 if name.removesuffix(UNIT) in ("digits", "musk") else 10


def make_setting_kernel(X: np.ndarray, which: str) -> Kernel:
    """The kernel ``which`` (a key of :data:`KERNEL_LABELS`) on the data ``X``.

    RBF at 0.2 or 1.0 x the median distance (:func:`~kernelscale.kernels.median_heuristic`,
    seed 0), polynomial of degree 4 with gamma = 1/d and coef0 = 1, arc-cosine of order 2.
    """
    if which.startswith("rbf"):
        return make_kernel("rbf", sigma=median_heuristic(X, float(which[3:]), random_state=0))
    if which == "poly":
        return make_kernel("poly", degree=4, gamma=1.0 / X.shape[1], coef0=1.0)
    return make_kernel("arccos", order=2)


def kernel_options(kernel: Kernel) -> dict:
    """The options of :class:`~kernelscale.DistributedKernelPCA` that give ``kernel``."""
    if kernel.name == "arccos":
        return {"kernel": "arccos", "degree": kernel.order}
    return {"kernel": kernel.name, "gamma": kernel.gamma, "degree": kernel.degree,
            "coef0": kernel.coef0}


def full_kernel(X: np.ndarray, kernel: Kernel, chunk: int = 2000) -> np.ndarray:
    """The n x n kernel matrix, computed in blocks of ``chunk`` rows (3.2 GB for letter)."""
    out = np.empty((X.shape[0], X.shape[0]))
    for start in range(0, X.shape[0], chunk):
        out[start : start + chunk] = kernel(X[start : start + chunk], X)
    return out


def top_eigh(Kmat: np.ndarray, n_top: int, vectors: bool = False):
    """The top ``n_top`` eigenvalues of a symmetric matrix, largest first (and the vectors).

    Dense ``eigh`` of the subset up to 3,000 rows, Lanczos (``eigsh``) above.
    """
    n = Kmat.shape[0]
    if n <= 3000:
        w, V = sla.eigh(Kmat, subset_by_index=[n - n_top, n - 1])
    else:
        w, V = ssla.eigsh(Kmat, k=n_top, which="LA", tol=0, ncv=max(2 * n_top + 1, 60),
                          v0=np.ones(n) / np.sqrt(n))
    order = np.argsort(w)[::-1]
    return (w[order], V[:, order]) if vectors else w[order]


def references(dataset: str, which: str, X: np.ndarray, kernel: Kernel,
               refs_dir: Path) -> dict:
    """The exact trace, rank-k optimum and ||mu||^2 of a setting, uncentred and centred.

    Computed once and cached in ``refs_dir`` (one ``.npz`` per centring, keyed
    by the data's fingerprint); recomputed when the data changes.

    Parameters
    ----------
    dataset, which : str
        The setting's names (the cache files' names).
    X : ndarray
        The data.
    kernel : Kernel
        The setting's kernel (:func:`make_setting_kernel`).
    refs_dir : Path
        The cache's folder.

    Returns
    -------
    dict
        ``{centred: {'trace', 'opt', 'center_norm_sq'}}`` for centred False and True.
    """
    paths = {c: refs_dir / f"{dataset}_{which}_{'centred' if c else 'uncentred'}.npz"
             for c in (False, True)}
    fp = fingerprint(X)
    if all(p.exists() and str(np.load(p)["fingerprint"]) == fp for p in paths.values()):
        return {c: {k: float(v) for k, v in np.load(p).items() if k != "fingerprint"}
                for c, p in paths.items()}
    refs_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for center, Kmat, norm_sq in _both_centrings(full_kernel(X, kernel)):
        trace = float(np.trace(Kmat))
        w = top_eigh(Kmat, K)
        out[center] = {"trace": trace, "opt": trace - float(w.sum()), "center_norm_sq": norm_sq}
        np.savez(paths[center], fingerprint=fp, **out[center])
    return out


def _both_centrings(Kmat: np.ndarray):
    """Yield ``(centred, K, ||mu||^2)`` for the uncentred kernel matrix, then the centred
    one (``Kmat`` centred in place: K - 1 m^T - m 1^T + mean(m))."""
    yield False, Kmat, float(Kmat.mean())
    m = Kmat.mean(axis=0)
    Kmat -= m[None, :]
    Kmat -= m[:, None]
    Kmat += m.mean()
    yield True, Kmat, float(m.mean())


def spectrum_references(dataset: str, which: str, X: np.ndarray, kernel: Kernel,
                        refs_dir: Path, n_top: int = 50) -> dict:
    """The exact trace, top ``n_top`` eigenvalues and ||mu||^2 of a setting, both centrings.

    As :func:`references`, for any k up to ``n_top``: the rank-k optimum is
    ``trace - top[:k].sum()``. Cached in ``refs_dir`` (one ``.npz`` per
    centring, ``{dataset}_{which}_{centring}_top{n_top}.npz``, keyed by the
    data's fingerprint).

    Returns
    -------
    dict
        ``{centred: {'trace', 'top', 'center_norm_sq'}}`` for centred False and True
        (``top``: an array, largest first).
    """
    paths = {c: refs_dir / f"{dataset}_{which}_{'centred' if c else 'uncentred'}_top{n_top}.npz"
             for c in (False, True)}
    fp = fingerprint(X)
    if all(p.exists() and str(np.load(p)["fingerprint"]) == fp for p in paths.values()):
        return {c: {k: (np.asarray(v) if k == "top" else float(v))
                    for k, v in np.load(p).items() if k != "fingerprint"}
                for c, p in paths.items()}
    refs_dir.mkdir(parents=True, exist_ok=True)
    out = {}
    for center, Kmat, norm_sq in _both_centrings(full_kernel(X, kernel)):
        top = top_eigh(Kmat, min(n_top, X.shape[0] - 1))
        out[center] = {"trace": float(np.trace(Kmat)), "top": top, "center_norm_sq": norm_sq}
        np.savez(paths[center], fingerprint=fp, **out[center])
    return out
