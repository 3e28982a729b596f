"""Linear sketches: CountSketch, Gaussian, SRHT and their composition.

A sketch ``S`` maps ``R^{n_in}`` to ``R^{n_out}``; think of it as an
``n_out x n_in`` matrix that is never stored when it need not be. Each sketch
draws its random data once from ``np.random.default_rng(seed)`` in its
constructor (generate, then apply: scipy's ``clarkson_woodruff_transform``,
PARLA's ``generate_srct`` / ``apply_srct``), so a worker that rebuilds it from a
broadcast seed gets the identical operator.

* ``left(M)``  = ``S @ M``    for ``M`` of shape (n_in, c): sketches the rows (points).
* ``right(M)`` = ``M @ S.T``  for ``M`` of shape (r, n_in): sketches the columns,
  e.g. a feature-side sketch ``E = phi(A) @ T`` (paper 001, section 5.1).
* ``left_partial(M_chunk, start)`` + ``finish(acc)``: a worker walks its rows in
  chunks, sums the partial products, and finishes once::

      acc = sum(S.left_partial(M[a:b], a) for a, b in chunks)
      S.finish(acc) == S.left(M)

  For CountSketch and GaussianSketch the partial products already live in
  ``R^{n_out}`` and ``finish`` returns its argument. For a ComposedSketch they
  live in the first stage's output space, and ``finish`` applies the second stage.

The composition CountSketch then Gaussian is the embedding that paper 001
(Lemma 1) recommends: input-sparsity time from CountSketch, few rows from the
Gaussian.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import scipy.sparse as sp

SKETCHES = ("countsketch", "gaussian", "srht", "countsketch+gaussian")


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, Integral) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}.")
    return int(seed)


def _check_positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return int(value)


def _as_matrix(M):
    """Return (2-D dense array or CSR matrix, whether M was 1-D)."""
    if sp.issparse(M):
        return M.tocsr(), False
    M = np.asarray(M)
    if M.ndim == 1:
        return M[:, None], True
    if M.ndim != 2:
        raise ValueError(f"Expected a 1-D or 2-D array, got shape {M.shape}.")
    return M, False


def _dense(M) -> np.ndarray:
    return M.toarray() if sp.issparse(M) else np.asarray(M)


def fwht(a: np.ndarray) -> np.ndarray:
    """Unnormalised fast Walsh-Hadamard transform along axis 0.

    Computes ``H @ a`` for the Sylvester-ordered Hadamard matrix ``H`` (entries
    +-1, as ``scipy.linalg.hadamard``) in ``O(N c log N)`` without forming ``H``.

    Parameters
    ----------
    a : ndarray of shape (N, c) or (N,)
        ``N`` must be a power of 2.

    Returns
    -------
    ndarray of the same shape as ``a`` (a new array).
    """
    a = np.asarray(a, dtype=np.float64)
    n = a.shape[0]
    if n < 1 or n & (n - 1):
        raise ValueError(f"fwht needs a power-of-2 length, got {n}.")
    shape = a.shape
    out = a.reshape(n, -1)
    h = 1
    while h < n:
        # Butterfly between halves of each block of 2h rows: H_2h = [[H, H], [H, -H]].
        blocks = out.reshape(n // (2 * h), 2, h, -1)
        top, bottom = blocks[:, 0], blocks[:, 1]
        out = np.stack((top + bottom, top - bottom), axis=1).reshape(n, -1)
        h *= 2
    return out.reshape(shape)


class Sketch:
    """Base class of linear sketches ``S`` (an ``n_out x n_in`` matrix).

    Attributes
    ----------
    n_in : int
        Input dimension.
    n_out : int
        Output (sketch) dimension.
    seed : int or None
        Seed the random data was drawn from (``None`` for a composition built
        by hand).
    supports_partial : bool
        Whether :meth:`left_partial` is available.
    """

    supports_partial = False

    def __init__(self, n_in: int, n_out: int, seed: int | None) -> None:
        self.n_in = _check_positive_int(n_in, "n_in")
        self.n_out = _check_positive_int(n_out, "n_out")
        self.seed = seed

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_in={self.n_in}, n_out={self.n_out}, seed={self.seed})"

    def left(self, M) -> np.ndarray:
        """``S @ M`` for ``M`` of shape (n_in, c) (or (n_in,)), dense or CSR.

        Returns
        -------
        ndarray of shape (n_out, c) (or (n_out,)).
        """
        M, vector = _as_matrix(M)
        if M.shape[0] != self.n_in:
            raise ValueError(
                f"left() sketches rows: M has {M.shape[0]} rows but the sketch takes "
                f"n_in={self.n_in}. Pass M with n_in rows (use right() to sketch columns)."
            )
        out = self._left(M)
        return out[:, 0] if vector else out

    def right(self, M) -> np.ndarray:
        """``M @ S.T`` for ``M`` of shape (r, n_in) (or (n_in,)), dense or CSR.

        Returns
        -------
        ndarray of shape (r, n_out) (or (n_out,)).
        """
        if not sp.issparse(M) and np.ndim(M) == 1:
            return self.left(M)
        M, _ = _as_matrix(M)
        if M.shape[1] != self.n_in:
            raise ValueError(
                f"right() sketches columns: M has {M.shape[1]} columns but the sketch "
                f"takes n_in={self.n_in}. Pass M with n_in columns (use left() for rows)."
            )
        return self._left(M.T).T

    def left_partial(self, M_chunk, start: int) -> np.ndarray:
        """Contribution ``S[:, start:start + len(M_chunk)] @ M_chunk`` of a row chunk.

        Sum the contributions of all chunks, then call :meth:`finish` on the sum.

        Parameters
        ----------
        M_chunk : array or CSR matrix of shape (k, c) (or (k,))
            Rows ``start .. start + k - 1`` of the matrix being sketched.
        start : int
            Index of the chunk's first row.
        """
        if not self.supports_partial:
            raise NotImplementedError(
                f"{type(self).__name__} does not sketch chunk by chunk; use left() on "
                "all rows, or a CountSketch / Gaussian first stage."
            )
        M_chunk, vector = _as_matrix(M_chunk)
        k = M_chunk.shape[0]
        if isinstance(start, bool) or not isinstance(start, Integral):
            raise ValueError(f"start must be an int, got {start!r}.")
        if start < 0 or start + k > self.n_in:
            raise ValueError(
                f"Rows {start}..{start + k - 1} fall outside 0..{self.n_in - 1} (n_in)."
            )
        out = self._left_partial(M_chunk, int(start))
        return out[:, 0] if vector else out

    def finish(self, accumulated: np.ndarray) -> np.ndarray:
        """Map the sum of :meth:`left_partial` results to ``S @ M``."""
        return np.asarray(accumulated)

    def _left(self, M) -> np.ndarray:  # M: 2-D dense or CSR with n_in rows
        raise NotImplementedError

    def _left_partial(self, M_chunk, start: int) -> np.ndarray:
        raise NotImplementedError


class CountSketch(Sketch):
    """CountSketch (Clarkson & Woodruff 2013): ``S[h(i), i] = s(i)``, else 0.

    Stores only the hash ``h`` (n_in ints in [0, n_out)) and the signs ``s``
    (n_in values +-1), as one sparse matrix with n_in non-zeros; ``S @ M`` costs
    ``O(nnz(M))``.

    Parameters
    ----------
    n_in, n_out : int
    seed : int
    """

    supports_partial = True

    def __init__(self, n_in: int, n_out: int, seed: int) -> None:
        super().__init__(n_in, n_out, _check_seed(seed))
        rng = np.random.default_rng(self.seed)
        self.hash_ = rng.integers(0, self.n_out, size=self.n_in)
        self.sign_ = rng.choice(np.array([-1.0, 1.0]), size=self.n_in)
        # Transposed sketch S^T (n_in x n_out): row i holds s(i) at column h(i).
        self._st = sp.csr_matrix(
            (self.sign_, (np.arange(self.n_in), self.hash_)), shape=(self.n_in, self.n_out)
        )

    def _left(self, M) -> np.ndarray:
        return _dense(self._st.T @ M)

    def _left_partial(self, M_chunk, start: int) -> np.ndarray:
        return _dense(self._st[start : start + M_chunk.shape[0]].T @ M_chunk)


class GaussianSketch(Sketch):
    """Dense Gaussian sketch with i.i.d. entries ``N(0, 1 / n_out)``.

    Stores the ``n_out x n_in`` matrix; use it after a CountSketch when ``n_in``
    is large (see :func:`make_sketch`).

    Parameters
    ----------
    n_in, n_out : int
    seed : int
    """

    supports_partial = True

    def __init__(self, n_in: int, n_out: int, seed: int) -> None:
        super().__init__(n_in, n_out, _check_seed(seed))
        rng = np.random.default_rng(self.seed)
        self.matrix_ = rng.standard_normal((self.n_out, self.n_in)) / np.sqrt(self.n_out)

    def _matrix_for(self, M) -> np.ndarray:
        # A float32 input is sketched in float32 (the caller chose that precision).
        if not sp.issparse(M) and M.dtype == np.float32:
            if getattr(self, "_matrix32", None) is None:
                self._matrix32 = self.matrix_.astype(np.float32)
            return self._matrix32
        return self.matrix_

    def _left(self, M) -> np.ndarray:
        return _dense(self._matrix_for(M) @ M)

    def _left_partial(self, M_chunk, start: int) -> np.ndarray:
        return _dense(self._matrix_for(M_chunk)[:, start : start + M_chunk.shape[0]] @ M_chunk)


class SRHT(Sketch):
    """Subsampled randomised Hadamard transform ``S = sqrt(1/n_out) P H D``.

    ``D`` random signs on the n_in coordinates, ``H`` the (unnormalised) Hadamard
    transform of size ``N`` = n_in rounded up to a power of 2 (zero padding),
    ``P`` picks ``n_out`` of the ``N`` rows uniformly without replacement. With
    ``H / sqrt(N)`` orthogonal and each row kept with probability n_out / N, the
    scale ``sqrt(N / n_out) / sqrt(N)`` gives ``E ||S x||^2 = ||x||^2``.

    Input is densified (the transform mixes every coordinate).

    Parameters
    ----------
    n_in, n_out : int
        ``n_out`` must not exceed the padded size ``N``.
    seed : int
    """

    def __init__(self, n_in: int, n_out: int, seed: int) -> None:
        super().__init__(n_in, n_out, _check_seed(seed))
        self.n_padded = 1 << (self.n_in - 1).bit_length()
        if self.n_out > self.n_padded:
            raise ValueError(
                f"SRHT samples n_out={self.n_out} distinct rows of a {self.n_padded}-point "
                "Hadamard transform; choose n_out <= that, or a Gaussian sketch."
            )
        rng = np.random.default_rng(self.seed)
        self.sign_ = rng.choice(np.array([-1.0, 1.0]), size=self.n_in)
        self.rows_ = np.sort(rng.choice(self.n_padded, size=self.n_out, replace=False))

    def _left(self, M) -> np.ndarray:
        padded = np.zeros((self.n_padded, M.shape[1]))
        padded[: self.n_in] = self.sign_[:, None] * _dense(M)
        return fwht(padded)[self.rows_] / np.sqrt(self.n_out)


class ComposedSketch(Sketch):
    """``second`` after ``first``: ``S = S_second @ S_first``.

    Chunked use: ``left_partial`` is the first stage's (when it has one), its
    results are summed in the first stage's output space (``first.n_out`` rows),
    and ``finish`` applies the second stage.

    Parameters
    ----------
    first, second : Sketch
        ``first.n_out`` must equal ``second.n_in``.
    seed : int, optional
        The seed both stages were derived from (informational; set by
        :func:`make_sketch`).
    """

    def __init__(self, first: Sketch, second: Sketch, seed: int | None = None) -> None:
        if first.n_out != second.n_in:
            raise ValueError(
                f"Cannot compose: the first sketch outputs {first.n_out} rows but the "
                f"second takes n_in={second.n_in}."
            )
        super().__init__(first.n_in, second.n_out, seed)
        self.first = first
        self.second = second
        self.supports_partial = first.supports_partial

    def __repr__(self) -> str:
        return f"ComposedSketch({self.first!r}, {self.second!r})"

    def _left(self, M) -> np.ndarray:
        return self.second.left(self.first.left(M))

    def _left_partial(self, M_chunk, start: int) -> np.ndarray:
        return self.first.left_partial(M_chunk, start)

    def finish(self, accumulated: np.ndarray) -> np.ndarray:
        return self.second.left(self.first.finish(accumulated))


def intermediate_size(n_in: int, n_out: int) -> int:
    """Rows of the CountSketch stage of ``'countsketch+gaussian'``.

    A CountSketch needs about ``d^2 / eps^2`` rows to embed a d-dimensional
    subspace, a Gaussian about ``d / eps^2``; with ``n_out`` Gaussian rows sized
    for ``d`` at eps ~ 1/2 that is ``d ~ n_out / 4``, so the CountSketch stage
    gets ``n_out^2 / 4`` rows (at least ``4 n_out``), capped at ``n_in``. The
    Gaussian stage then stores ``n_out^3 / 4`` numbers (31 MB at n_out = 250).
    """
    return min(n_in, max(4 * n_out, n_out * n_out // 4))


def make_sketch(name: str, n_in: int, n_out: int, seed: int) -> Sketch:
    """Build a sketch by name.

    Parameters
    ----------
    name : {'countsketch', 'gaussian', 'srht', 'countsketch+gaussian'}
        The last is a CountSketch to :func:`intermediate_size` rows followed by a
        Gaussian sketch to ``n_out`` (paper 001, Lemma 1); its two stages get
        independent seeds spawned from ``seed``.
    n_in, n_out : int
    seed : int

    Returns
    -------
    Sketch
    """
    seed = _check_seed(seed)
    if name == "countsketch":
        return CountSketch(n_in, n_out, seed)
    if name == "gaussian":
        return GaussianSketch(n_in, n_out, seed)
    if name == "srht":
        return SRHT(n_in, n_out, seed)
    if name == "countsketch+gaussian":
        n_in = _check_positive_int(n_in, "n_in")
        n_out = _check_positive_int(n_out, "n_out")
        s1, s2 = (
            int(child.generate_state(1)[0]) for child in np.random.SeedSequence(seed).spawn(2)
        )
        mid = intermediate_size(n_in, n_out)
        return ComposedSketch(CountSketch(n_in, mid, s1), GaussianSketch(mid, n_out, s2), seed)
    raise ValueError(f"Unknown sketch {name!r}; choose one of {', '.join(SKETCHES)}.")
