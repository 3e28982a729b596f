"""What the vertical benchmarks share: the parties' feature blocks and the exact eigenvectors.

Shared by ``benchmarks/vertical.py`` (paper 002's figures) and
``benchmarks/vertical_real.py`` (the UCI sets).

>>> import numpy as np
>>> [block.shape for block in parties(np.zeros((4, 7)), 3)]
[(4, 3), (4, 2), (4, 2)]
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from kernelscale.partition import feature_block_partition

__all__ = ["parties", "top_vectors"]


def parties(X: np.ndarray, J: int) -> list[np.ndarray]:
    """The columns of ``X`` dealt to ``J`` parties in contiguous blocks
    (:func:`~kernelscale.partition.feature_block_partition`), one array each."""
    return [np.ascontiguousarray(X[:, c]) for c in feature_block_partition(X.shape[1], J)]


def top_vectors(K: np.ndarray, k: int) -> np.ndarray:
    """The top ``k`` eigenvectors of the symmetric matrix ``K``, largest eigenvalue first."""
    n = K.shape[0]
    return sla.eigh(K, subset_by_index=[n - k, n - 1])[1][:, ::-1]
