"""Frequent Directions (Liberty 2013), with the shrink of Algorithm 1 of paper 004.

The sketch ``B`` has ``sketch_size`` (l) rows. Rows of the input are copied into
the zero rows of ``B``; when no zero row is left, ``B`` is rotated onto its right
singular vectors and every squared singular value is reduced by ``delta``:

* ``shrink='modified'`` (SKPCA, Algorithm 1 of 004): ``delta`` is the
  (l//2)-th squared singular value (for odd l, ``l//2`` rounds down: l = 7
  shrinks by the 3rd), so at most ``l//2 - 1`` directions survive and at least
  the next ``l - l//2 + 1`` input rows are copied in before the next decomposition.
  Guarantee: ``||A^T A - B^T B||_2 <= ||A - A_k||_F^2 / (l//2 - k)`` for every
  ``k < l//2`` (an odd l has the bound of l - 1).
* ``shrink='classic'`` (Liberty's original): ``delta`` is the smallest squared
  singular value (one row freed per decomposition, about l times slower).
  Guarantee: ``||A^T A - B^T B||_2 <= ||A - A_k||_F^2 / (l - k)``.

Copying a whole block of rows into the free rows is the same algorithm as
inserting them one at a time, so any split of the stream into mini-batches
gives the same sketch (up to floating-point rounding of the input rows).

The decomposition uses the small l x l matrix ``B B^T = U diag(lambda) U^T``:
the rotated, shrunk sketch is ``diag(sqrt(max(0, 1 - delta / lambda))) U^T B``,
whose rows are orthogonal with squared norms ``lambda - delta``. That is
``sqrt(max(0, Sigma^2 - delta I)) W^T`` of the paper without an l x m SVD.

Every shrink loses at most ``delta`` in any direction and at least
``(index of delta) * delta`` of squared Frobenius norm, so the sum of the
deltas, :attr:`FrequentDirections.shrinkage`, is a certified bound on
``||A^T A - B^T B||_2`` for the rows fed so far.
"""

from __future__ import annotations

from functools import lru_cache
from numbers import Integral

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp
from threadpoolctl import ThreadpoolController

SHRINKS = ("modified", "classic")


@lru_cache(maxsize=1)
def _blas_controller() -> ThreadpoolController:
    return ThreadpoolController()


def single_threaded_blas():
    """Context: one BLAS thread. The l x l eigenproblems and l x m products of the
    sketch are far too small to share; on a loaded machine, threaded OpenBLAS
    spends up to 100x their cost waiting for its threads."""
    return _blas_controller().limit(limits=1, user_api="blas")


# Directions whose squared singular value is below this fraction of the largest
# are rounding noise of the l x l eigensolver; they are freed with the shrink.
_RELATIVE_ZERO = 1e-13


class FrequentDirections:
    """A Frequent Directions sketch of a stream of rows in ``R^n_features``.

    Parameters
    ----------
    sketch_size : int
        Number of rows ``l`` of the sketch (>= 2).
    n_features : int
        Dimension of the rows (``m`` when the rows are random features).
    shrink : {'modified', 'classic'}, default='modified'
        Shrink by the (l//2)-th squared singular value (paper 004; ``l//2``
        rounds down for odd l) or by the smallest one (Liberty 2013).

    Attributes
    ----------
    n_rows_seen : int
        Rows fed so far (through :meth:`update` and :meth:`merge`).
    squared_frobenius : float
        ``||A||_F^2`` of the rows fed so far.
    shrinkage : float
        Sum of the shrink amounts: a certified bound on ``||A^T A - B^T B||_2``.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelscale.streaming import FrequentDirections
    >>> A = np.random.default_rng(0).standard_normal((500, 30))
    >>> fd = FrequentDirections(sketch_size=10, n_features=30).update(A)
    >>> fd.sketch.shape
    (10, 30)
    >>> bool(np.linalg.norm(A.T @ A - fd.sketch.T @ fd.sketch, 2) <= fd.shrinkage + 1e-9)
    True
    """

    def __init__(self, sketch_size: int, n_features: int, shrink: str = "modified"):
        if isinstance(sketch_size, bool) or not isinstance(sketch_size, Integral):
            raise TypeError(f"sketch_size must be an int, got {sketch_size!r}.")
        if sketch_size < 2:
            raise ValueError(f"sketch_size must be at least 2, got {sketch_size}.")
        if isinstance(n_features, bool) or not isinstance(n_features, Integral) or n_features < 1:
            raise ValueError(f"n_features must be a positive int, got {n_features!r}.")
        if shrink not in SHRINKS:
            raise ValueError(f"Unknown shrink {shrink!r}; choose one of {SHRINKS}.")
        self.sketch_size = int(sketch_size)
        self.n_features = int(n_features)
        self.shrink = shrink
        self._rows = np.zeros((self.sketch_size, self.n_features))
        self._n_filled = 0
        self.n_rows_seen = 0
        self.squared_frobenius = 0.0
        self.shrinkage = 0.0

    # ------------------------------------------------------------------ feeding
    def update(self, rows) -> FrequentDirections:
        """Feed a block of rows (n_rows, n_features), dense or CSR; returns self."""
        if sp.issparse(rows):
            rows = rows.toarray()
        rows = np.asarray(rows, dtype=np.float64)
        if rows.ndim == 1:
            rows = rows[None, :]
        if rows.ndim != 2 or rows.shape[1] != self.n_features:
            raise ValueError(
                f"rows must have shape (n_rows, {self.n_features}), got {rows.shape}."
            )
        if not np.all(np.isfinite(rows)):
            raise ValueError("rows hold NaN or infinite values; clean the stream first.")
        self.n_rows_seen += rows.shape[0]
        self.squared_frobenius += float(np.einsum("ij,ij->", rows, rows))
        self._insert(rows)
        return self

    partial_fit = update

    def _insert(self, rows: np.ndarray) -> None:
        # Algorithm 1 of 004: insert into zero rows; when B is full, shrink.
        with single_threaded_blas():
            self._insert_rows(rows)

    def _insert_rows(self, rows: np.ndarray) -> None:
        start = 0
        while start < rows.shape[0]:
            take = min(self.sketch_size - self._n_filled, rows.shape[0] - start)
            self._rows[self._n_filled : self._n_filled + take] = rows[start : start + take]
            self._n_filled += take
            start += take
            if self._n_filled == self.sketch_size:
                self._shrink()

    def _shrink(self) -> None:
        B = self._rows
        # B B^T on two distinct buffers (GEMM, not SYRK: DESIGN.md hazards).
        lam, U = np.linalg.eigh(B @ B.T.copy())
        lam, U = np.maximum(lam[::-1], 0.0), U[:, ::-1]
        index = self.sketch_size // 2 if self.shrink == "modified" else self.sketch_size
        delta = lam[index - 1]
        keep = lam > max(delta, _RELATIVE_ZERO * lam[0])
        n_keep = int(np.count_nonzero(keep))
        scale = np.sqrt(1.0 - delta / lam[:n_keep])
        rotated = U[:, :n_keep].T @ B
        rotated *= scale[:, None]
        B[:n_keep] = rotated
        B[n_keep:] = 0.0
        self._n_filled = n_keep
        self.shrinkage += float(delta)

    def merge(self, other: FrequentDirections) -> FrequentDirections:
        """Fold another sketch of the same shape into this one; returns self.

        The result sketches the union of both streams with the same guarantee
        (Frequent Directions sketches are mergeable: the shrinkages add up and
        the Frobenius argument goes through for the stacked rows).
        """
        if not isinstance(other, FrequentDirections):
            raise TypeError(f"Can only merge a FrequentDirections, got {type(other).__name__}.")
        if (other.sketch_size, other.n_features) != (self.sketch_size, self.n_features):
            raise ValueError(
                f"Cannot merge a {other.sketch_size} x {other.n_features} sketch into a "
                f"{self.sketch_size} x {self.n_features} one; build both with the same shape."
            )
        if other.shrink != self.shrink:
            raise ValueError(f"Cannot merge a {other.shrink!r} sketch into a {self.shrink!r} one.")
        self.n_rows_seen += other.n_rows_seen
        self.squared_frobenius += other.squared_frobenius
        self.shrinkage += other.shrinkage
        self._insert(other.filled_rows.copy())
        return self

    # ------------------------------------------------------------------ reading
    @property
    def sketch(self) -> np.ndarray:
        """The sketch ``B`` (sketch_size x n_features), zero rows included (a copy)."""
        return self._rows.copy()

    @property
    def filled_rows(self) -> np.ndarray:
        """The non-zero rows of ``B`` (a view); ``B^T B`` is their Gram matrix."""
        return self._rows[: self._n_filled]

    @property
    def size_words(self) -> int:
        """Words held by the sketch: ``l * m`` whatever the number of rows fed."""
        return int(self._rows.size)

    def right_singular(self) -> tuple[np.ndarray, np.ndarray]:
        """Singular values (descending) and right singular vectors ``W`` (m x r) of ``B``.

        Only directions with a non-zero singular value are returned (r <= l).
        """
        rows = self.filled_rows
        if rows.shape[0] == 0:
            return np.zeros(0), np.zeros((self.n_features, 0))
        with single_threaded_blas():
            _, s, Vt = sla.svd(rows, full_matrices=False, check_finite=False)
        keep = s > np.sqrt(_RELATIVE_ZERO) * s[0] if s[0] > 0 else np.zeros(s.size, bool)
        return s[keep], Vt[keep].T

    def __repr__(self) -> str:
        return (
            f"FrequentDirections(sketch_size={self.sketch_size}, n_features={self.n_features}, "
            f"shrink={self.shrink!r}, n_rows_seen={self.n_rows_seen})"
        )

    # ------------------------------------------------------------------ persistence
    def to_arrays(self) -> dict[str, np.ndarray]:
        """The state as plain arrays (for ``np.savez``; no pickle needed)."""
        return {
            "fd_rows": self.filled_rows.copy(),
            "fd_stats": np.array([self.n_rows_seen, self.squared_frobenius, self.shrinkage]),
        }

    @classmethod
    def from_arrays(
        cls, arrays: dict, sketch_size: int, n_features: int, shrink: str
    ) -> FrequentDirections:
        """Rebuild a sketch saved by :meth:`to_arrays`."""
        fd = cls(sketch_size, n_features, shrink)
        rows = np.asarray(arrays["fd_rows"], dtype=np.float64)
        if rows.ndim != 2 or rows.shape[1] != n_features or rows.shape[0] >= sketch_size:
            raise ValueError(f"Saved sketch rows have shape {rows.shape}; expected (< l, m).")
        fd._rows[: rows.shape[0]] = rows
        fd._n_filled = rows.shape[0]
        stats = np.asarray(arrays["fd_stats"], dtype=np.float64)
        fd.n_rows_seen = int(stats[0])
        fd.squared_frobenius = float(stats[1])
        fd.shrinkage = float(stats[2])
        return fd
