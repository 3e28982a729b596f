"""Data for kernelscale: file loaders and the papers' synthetic generators.

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
from .loaders import (
    iter_chunks,
    load,
    load_csv,
    load_digits_standardized,
    load_npy,
    load_parquet,
    load_svmlight,
)

__all__ = [
    "BLOCK_ROWS",
    "PAPER_002_SPECTRUM",
    "iter_chunks",
    "iter_gaussian_mixture",
    "load",
    "load_csv",
    "load_digits_standardized",
    "load_npy",
    "load_parquet",
    "load_svmlight",
    "make_gaussian_mixture",
    "make_low_rank_linear",
    "make_random_noisy",
    "make_sparse_bow",
]
