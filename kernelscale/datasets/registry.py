"""Data sets by name: :func:`load_dataset` and the names it knows, :data:`DATASETS`.

A benchmark or the command line names its data by a string; ``load_dataset``
turns the name and its options into ``(X, y)``. Three kinds of names:

- bundled, never downloaded: ``'digits'`` (scikit-learn's 1,797 x 64,
  standardised), ``'letter'``, ``'satellite'``, ``'spam'``, ``'insurance'`` (UCI, raw values;
  :mod:`kernelscale.datasets.real`), ``'musk'`` and ``'income'`` (kernlab's, raw
  values), ``'shuttle'`` (Statlog's test part) and ``'dna'`` (mlbench's, raw values);
- synthetic stand-ins of the papers' large sets: ``'gaussian_mixture'``
  (HIGGS-like, d = 28) and ``'sparse_bow'`` (20 Newsgroups-like, d = 100,000);
- the LIBSVM repository's sets, cached under ``data_home``:
  ``'mushrooms'``, ``'a9a'``, ``'cpusmall'``, ``'covtype'``, ``'mnist'``
  (:mod:`kernelscale.datasets.libsvm`).

Every name takes ``n_samples`` and ``random_state``. For a fixed set
``n_samples`` keeps a random subset of that many rows (drawn with
``random_state``, in the file's order); for a generator it is the number of
points drawn and ``random_state`` its seed.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.sparse as sp

from .generators import make_gaussian_mixture, make_sparse_bow
from .libsvm import LIBSVM_SETS, fetch_libsvm
from .loaders import load_digits_standardized
from .real import (
    load_dna,
    load_income,
    load_insurance,
    load_letter,
    load_musk,
    load_satellite,
    load_shuttle,
    load_spam,
)

__all__ = ["DATASETS", "load_dataset", "subsample"]

Data = tuple[np.ndarray | sp.csr_matrix, np.ndarray | None]


def subsample(X: Any, y: np.ndarray | None, n_samples: int | None, random_state: Any = 0) -> Data:
    """A random subset of ``n_samples`` rows of ``(X, y)``, kept in their order.

    Parameters
    ----------
    X : ndarray or sparse matrix of shape (n, d)
    y : ndarray of shape (n,) or None
    n_samples : int or None
        Rows to keep, at most ``n``; None keeps all (``X`` and ``y`` are
        returned as they are).
    random_state : int, Generator, RandomState or None, default=0
        Seed of the draw (without replacement).

    Returns
    -------
    X_subset, y_subset
        The same types, ``n_samples`` rows.
    """
    if n_samples is None:
        return X, y
    n = X.shape[0]
    if isinstance(n_samples, bool) or not isinstance(n_samples, int | np.integer):
        raise TypeError(f"n_samples must be a positive int or None, got {n_samples!r}")
    if not 1 <= n_samples <= n:
        raise ValueError(f"n_samples must be between 1 and {n} (the set's size), got {n_samples}")
    from sklearn.utils import check_random_state  # slow import: on first use
    rows = np.sort(check_random_state(random_state).choice(n, size=int(n_samples), replace=False))
    return X[rows], None if y is None else y[rows]


# --------------------------------------------------------------------------- one loader a name
def _digits(n_samples: int | None = None, random_state: Any = 0) -> Data:
    return subsample(*load_digits_standardized(), n_samples, random_state)


def _bundled(load: Callable[..., tuple[np.ndarray, np.ndarray]]) -> Callable[..., Data]:
    def loader(
        n_samples: int | None = None, random_state: Any = 0, standardize: bool = False
    ) -> Data:
        # Standardised over the whole set, then subset: a row is the same either way.
        return subsample(*load(standardize=standardize), n_samples, random_state)

    return loader


def _gaussian_mixture(
    n_samples: int = 50_000, n_features: int = 28, n_clusters: int = 10, random_state: Any = 0
) -> Data:
    return make_gaussian_mixture(
        n_samples, n_features, n_clusters, random_state=random_state, return_labels=True
    )


def _sparse_bow(
    n_samples: int = 50_000,
    n_features: int = 100_000,
    nnz_per_row: int = 100,
    random_state: Any = 0,
) -> Data:
    X = make_sparse_bow(n_samples, n_features, nnz_per_row, random_state=random_state)
    return X, None


def _libsvm(name: str) -> Callable[..., Data]:
    def loader(
        n_samples: int | None = None,
        random_state: Any = 0,
        data_home: str | os.PathLike[str] | None = None,
        download_if_missing: bool = True,
    ) -> Data:
        X, y = fetch_libsvm(name, data_home, download_if_missing)
        return subsample(X, y, n_samples, random_state)

    return loader


_LOADERS: dict[str, Callable[..., Data]] = {
    "digits": _digits,
    "letter": _bundled(load_letter),
    "satellite": _bundled(load_satellite),
    "spam": _bundled(load_spam),
    "insurance": _bundled(load_insurance),
    "musk": _bundled(load_musk),
    "income": _bundled(load_income),
    "shuttle": _bundled(load_shuttle),
    "dna": _bundled(load_dna),
    "gaussian_mixture": _gaussian_mixture,
    "sparse_bow": _sparse_bow,
    **{name: _libsvm(name) for name in LIBSVM_SETS},
}

#: Every name :func:`load_dataset` accepts: bundled, synthetic, then LIBSVM's.
DATASETS: tuple[str, ...] = tuple(_LOADERS)


def load_dataset(name: str, **options: Any) -> Data:
    """Load a data set by name.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`.
    **options
        The name's options; all take ``n_samples`` and ``random_state`` (see
        the module docstring):

        - ``'digits'``: ``n_samples=None``, ``random_state=0``.
        - ``'letter'``, ``'satellite'``, ``'spam'``, ``'insurance'``, ``'musk'``,
          ``'income'``, ``'shuttle'``, ``'dna'``: also ``standardize=False``
          (True: zero mean, unit variance per feature, before subsetting).
        - ``'gaussian_mixture'``: ``n_samples=50_000``, ``n_features=28``,
          ``n_clusters=10``, ``random_state=0``
          (:func:`~kernelscale.datasets.make_gaussian_mixture`).
        - ``'sparse_bow'``: ``n_samples=50_000``, ``n_features=100_000``,
          ``nnz_per_row=100``, ``random_state=0``
          (:func:`~kernelscale.datasets.make_sparse_bow`).
        - ``'mushrooms'``, ``'a9a'``, ``'cpusmall'``, ``'covtype'``,
          ``'mnist'``: also ``data_home=None``, ``download_if_missing=True``
          (:func:`~kernelscale.datasets.fetch_libsvm`).

    Returns
    -------
    X : ndarray or scipy.sparse.csr_matrix of shape (n_samples, n_features), float64
        Dense for the bundled sets and ``'gaussian_mixture'``; CSR for
        ``'sparse_bow'`` and the LIBSVM sets.
    y : ndarray of shape (n_samples,) or None
        Class names (str) for the bundled UCI and kernlab sets; integers for digits
        and the mixture's components; the file's float labels for LIBSVM;
        None for ``'sparse_bow'``.

    Raises
    ------
    ValueError
        If ``name`` is unknown or an option is not one of the name's (the
        message lists the valid ones).
    """
    if name not in _LOADERS:
        raise ValueError(f"Unknown data set {name!r}; choose one of {', '.join(DATASETS)}.")
    loader = _LOADERS[name]
    accepted = tuple(inspect.signature(loader).parameters)
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ValueError(
            f"Unknown option(s) {', '.join(unknown)} for data set {name!r}; "
            f"it takes {', '.join(accepted)}."
        )
    return loader(**options)
