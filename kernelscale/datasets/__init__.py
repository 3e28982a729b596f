"""Data for kernelscale: data sets by name, file loaders and the papers' generators.

Data sets by name (:mod:`kernelscale.datasets.registry`):
:func:`load_dataset` ``(name, **options) -> (X, y)`` for every name in
:data:`DATASETS`, with ``n_samples=`` to take a random subset (or to set a
generator's size):

- bundled with the package, never downloaded: ``'digits'`` (scikit-learn's
  1,797 x 64, standardised) and four UCI sets with their values unchanged
  (:mod:`kernelscale.datasets.real`; provenance in ``datasets/data/README.md``):
  ``'letter'`` (:func:`load_letter`, 20,000 x 16, 26 classes), ``'satellite'``
  (:func:`load_satellite`, 6,435 x 36, 6 classes), ``'spam'``
  (:func:`load_spam`, 4,601 x 57, 2 classes) and ``'insurance'``
  (:func:`load_insurance`, 9,822 x 85, 2 classes; paper 001's own set), and
  two of kernlab's, ``'musk'`` (:func:`load_musk`, 476 x 166, 2 classes) and
  ``'income'`` (:func:`load_income`, 6,876 x 43, 9 classes), and two Statlog
  sets from mlbench, ``'shuttle'`` (:func:`load_shuttle`, 14,500 x 9, 7 classes
  of very unequal size) and ``'dna'`` (:func:`load_dna`, 3,186 x 180 binary, 3
  classes);
  ``standardize=True`` scales them;
- synthetic stand-ins for the papers' large sets: ``'gaussian_mixture'``
  (:func:`make_gaussian_mixture`) and ``'sparse_bow'`` (:func:`make_sparse_bow`);
- the LIBSVM repository's sets used by papers 003 and 004, ``'mushrooms'``,
  ``'a9a'``, ``'cpusmall'``, ``'covtype'``, ``'mnist'``
  (:func:`fetch_libsvm`): read from a ``data_home`` cache (scikit-learn's by
  default), downloaded once when missing unless ``download_if_missing=False``.

Loaders (:mod:`kernelscale.datasets.loaders`) read ``.npy``, CSV/text,
LIBSVM/svmlight and Parquet files into float64 arrays or CSR matrices, whole
(:func:`load`) or in bounded-memory row blocks (:func:`iter_chunks`).
Generators (:mod:`kernelscale.datasets.generators`) draw reproducible synthetic
data from ``random_state``.
"""

from .generators import (
    BLOCK_ROWS,
    PAPER_002_SPECTRUM,
    iter_gaussian_mixture,
    make_gaussian_mixture,
    make_low_rank_linear,
    make_random_noisy,
    make_sparse_bow,
)
from .libsvm import LIBSVM_SETS, fetch_libsvm, libsvm_path
from .loaders import (
    iter_chunks,
    load,
    load_csv,
    load_digits_standardized,
    load_npy,
    load_parquet,
    load_svmlight,
)
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
from .registry import DATASETS, load_dataset, subsample

__all__ = [
    "BLOCK_ROWS",
    "DATASETS",
    "LIBSVM_SETS",
    "PAPER_002_SPECTRUM",
    "fetch_libsvm",
    "iter_chunks",
    "iter_gaussian_mixture",
    "libsvm_path",
    "load",
    "load_csv",
    "load_dataset",
    "load_dna",
    "load_income",
    "load_insurance",
    "load_digits_standardized",
    "load_letter",
    "load_npy",
    "load_parquet",
    "load_satellite",
    "load_shuttle",
    "load_musk",
    "load_spam",
    "load_svmlight",
    "make_gaussian_mixture",
    "make_low_rank_linear",
    "make_random_noisy",
    "make_sparse_bow",
    "subsample",
]
