"""Synthetic data sets: the papers' generators and stand-ins for the real data.

Every generator takes ``random_state`` (int, :class:`numpy.random.Generator`,
:class:`numpy.random.SeedSequence` or None) and returns points as rows. Rows are
drawn in fixed blocks of :data:`BLOCK_ROWS` rows, block ``b`` from its own
stream ``SeedSequence(entropy, spawn_key=(..., b))``, so the output for a seed
does not depend on ``chunk_size`` (which only sets how many rows are produced
or yielded at a time) and no intermediate is larger than a block or a chunk.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import scipy.sparse as sp
from scipy.optimize import brentq

__all__ = [
    "BLOCK_ROWS",
    "make_gaussian_mixture",
    "iter_gaussian_mixture",
    "make_sparse_bow",
    "make_random_noisy",
    "make_low_rank_linear",
    "PAPER_002_SPECTRUM",
]

#: Rows per random block: the unit of reproducibility of the chunked generators.
BLOCK_ROWS = 4096

#: Paper 002 (section IV.A): rank 50, leading eigenvalues 5000, 2500, 1125, then 50.
PAPER_002_SPECTRUM = np.array([5000.0, 2500.0, 1125.0] + [50.0] * 47)

# Spawn-key slots: parameters of a model vs. its row blocks.
_PARAMS, _ROWS = 0, 1


def _seed_sequence(random_state: Any) -> np.random.SeedSequence:
    """A root SeedSequence from an int, Generator, SeedSequence or None."""
    if random_state is None or isinstance(random_state, int | np.integer):
        if random_state is not None and random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state}")
        return np.random.SeedSequence(None if random_state is None else int(random_state))
    if isinstance(random_state, np.random.SeedSequence):
        return random_state
    if isinstance(random_state, np.random.Generator):  # draws from (advances) the Generator
        return np.random.SeedSequence(random_state.integers(0, 2**63, size=4).tolist())
    raise TypeError(
        f"random_state must be an int, numpy Generator, SeedSequence or None, "
        f"got {type(random_state).__name__}"
    )


def _rng(root: np.random.SeedSequence, *key: int) -> np.random.Generator:
    ss = np.random.SeedSequence(root.entropy, spawn_key=tuple(root.spawn_key) + key)
    return np.random.default_rng(ss)


def _positive_int(name: str, value: Any, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)


def _orthonormal_columns(rng: np.random.Generator, n: int, k: int) -> np.ndarray:
    """Haar-distributed n x k matrix with orthonormal columns (QR with sign fix)."""
    q, r = np.linalg.qr(rng.standard_normal((n, k)))
    return q * np.sign(np.diag(r))


def _rechunk(blocks: Iterator[tuple[np.ndarray, ...]], chunk_size: int) -> Iterator[tuple]:
    """Regroup a stream of row blocks (tuples of aligned arrays) into chunk_size rows."""
    pending: list[tuple[np.ndarray, ...]] = []
    held = 0

    def take(rows: int) -> tuple[np.ndarray, ...]:
        nonlocal held
        parts, got = [], 0
        while got < rows:
            head = pending[0]
            n = min(rows - got, head[0].shape[0])
            parts.append(tuple(a[:n] for a in head))
            if n == head[0].shape[0]:
                pending.pop(0)
            else:
                pending[0] = tuple(a[n:] for a in head)
            got += n
        held -= rows
        if len(parts) == 1:
            return parts[0]
        return tuple(np.concatenate(a) for a in zip(*parts, strict=True))

    for block in blocks:
        pending.append(block)
        held += block[0].shape[0]
        while held >= chunk_size:
            yield take(chunk_size)
    if held:
        yield take(held)


# --------------------------------------------------------------------------- mixture
def _mixture_params(
    root: np.random.SeedSequence, n_features: int, n_clusters: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = _rng(root, _PARAMS)
    # Power-law sizes, w_k ~ 1/(k+1), in a random order of the clusters.
    weights = rng.permutation(1.0 / np.arange(1, n_clusters + 1))
    weights /= weights.sum()
    means = rng.normal(scale=3.0, size=(n_clusters, n_features))
    # Anisotropic: random rotation times axis scales log-uniform in [0.1, 1.5].
    factors = np.empty((n_clusters, n_features, n_features))
    for k in range(n_clusters):
        scales = np.exp(rng.uniform(np.log(0.1), np.log(1.5), size=n_features))
        factors[k] = _orthonormal_columns(rng, n_features, n_features) * scales
    return weights, means, factors


def _mixture_blocks(
    n_samples: int, n_features: int, n_clusters: int, random_state: Any
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    root = _seed_sequence(random_state)
    weights, means, factors = _mixture_params(root, n_features, n_clusters)
    for b, start in enumerate(range(0, n_samples, BLOCK_ROWS)):
        rows = min(BLOCK_ROWS, n_samples - start)
        rng = _rng(root, _ROWS, b)
        labels = rng.choice(n_clusters, size=rows, p=weights)
        Z = rng.standard_normal((rows, n_features))
        X = np.empty_like(Z)
        for k in range(n_clusters):
            idx = labels == k
            X[idx] = Z[idx] @ factors[k].T + means[k]
        yield X, labels.astype(np.int64)


def _check_mixture(n_samples: int, n_features: int, n_clusters: int, chunk_size: int) -> None:
    _positive_int("n_samples", n_samples)
    _positive_int("n_features", n_features)
    _positive_int("n_clusters", n_clusters)
    _positive_int("chunk_size", chunk_size)


def iter_gaussian_mixture(
    n_samples: int,
    n_features: int = 28,
    n_clusters: int = 10,
    random_state: Any = None,
    chunk_size: int = 100_000,
    dtype: Any = np.float64,
    return_labels: bool = False,
) -> Iterator[Any]:
    """Yield the rows of :func:`make_gaussian_mixture` in chunks, never holding them all.

    Parameters are those of :func:`make_gaussian_mixture`; the chunks (of
    ``chunk_size`` rows, the last one shorter) concatenate to its output for the
    same ``random_state``, whatever ``chunk_size``.

    Returns
    -------
    chunks : iterator
        Of ``X_chunk`` arrays of shape (<= chunk_size, n_features), or of
        ``(X_chunk, y_chunk)`` pairs (``y_chunk`` int64) when ``return_labels``.
        Arguments are checked at the call, before iteration.
    """
    _check_mixture(n_samples, n_features, n_clusters, chunk_size)
    blocks = _mixture_blocks(n_samples, n_features, n_clusters, random_state)
    chunks = ((X.astype(dtype, copy=False), y) for X, y in _rechunk(blocks, chunk_size))
    return chunks if return_labels else (X for X, _ in chunks)


def make_gaussian_mixture(
    n_samples: int,
    n_features: int = 28,
    n_clusters: int = 10,
    random_state: Any = None,
    chunk_size: int = 100_000,
    dtype: Any = np.float64,
    return_labels: bool = False,
) -> Any:
    """Gaussian mixture with uneven clusters: a stand-in for HIGGS (d=28) or SUSY (d=18).

    Cluster ``k`` (in a random order) has weight proportional to ``1/(k+1)`` (a
    power law: with 10 clusters the largest holds about 34% of the points, the
    smallest about 3.4%), a mean drawn from N(0, 9 I) and covariance
    ``Q_k diag(s_k)^2 Q_k^T`` with ``Q_k`` a random rotation and the axis
    scales ``s_k`` log-uniform in [0.1, 1.5] (anisotropic). Rows are generated
    in blocks (see :data:`BLOCK_ROWS`), so ``n_samples`` up to 1e7 needs only
    the output itself plus one chunk; the result does not depend on
    ``chunk_size``.

    Parameters
    ----------
    n_samples : int
        Number of points.
    n_features : int, default=28
        Dimension (28 for HIGGS, 18 for SUSY).
    n_clusters : int, default=10
        Number of mixture components.
    random_state : int, Generator, SeedSequence or None, default=None
        Seed; the same seed gives the same data.
    chunk_size : int, default=100_000
        Rows produced at a time (memory only; the data do not depend on it).
    dtype : numpy dtype, default=np.float64
        Output dtype; rows are drawn in float64 and cast.
    return_labels : bool, default=False
        Also return each point's component.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), int64
        Only when ``return_labels``.
    """
    _check_mixture(n_samples, n_features, n_clusters, chunk_size)
    X = np.empty((n_samples, n_features), dtype=dtype)
    y = np.empty(n_samples, dtype=np.int64)
    start = 0
    chunks = iter_gaussian_mixture(
        n_samples, n_features, n_clusters, random_state, chunk_size, dtype, True
    )
    for Xc, yc in chunks:
        X[start : start + len(yc)] = Xc
        y[start : start + len(yc)] = yc
        start += len(yc)
    return (X, y) if return_labels else X


# --------------------------------------------------------------------------- bag of words
def _tokens_for_distinct(p: np.ndarray, target: float) -> float:
    """Tokens per document whose expected number of distinct terms is ``target``."""

    def gap(t: float) -> float:
        return float(-np.expm1(t * np.log1p(-p)).sum()) - target

    hi = 2.0 * target
    while gap(hi) < 0:
        hi *= 2.0
    return brentq(gap, target, hi, xtol=1e-3)


def make_sparse_bow(
    n_samples: int,
    n_features: int = 100_000,
    nnz_per_row: int = 100,
    zipf_exponent: float = 1.1,
    normalize: bool = True,
    random_state: Any = None,
) -> sp.csr_matrix:
    """Bag-of-words-like sparse data (a stand-in for 20 Newsgroups).

    Term ``j`` of the vocabulary has probability proportional to
    ``(r_j + 1) ** -zipf_exponent`` where ``r`` is a random permutation (the
    rank of each column; frequent terms are spread over the columns). Each
    document draws a Poisson number of tokens, with the mean chosen so that the
    expected number of *distinct* terms is ``nnz_per_row``; repeated tokens
    become counts. With ``normalize`` the counts are tf-idf weighted and each
    row scaled to unit l2 norm (:class:`sklearn.feature_extraction.text.TfidfTransformer`).
    Rows are drawn in blocks of :data:`BLOCK_ROWS`.

    Parameters
    ----------
    n_samples : int
        Number of documents.
    n_features : int, default=100_000
        Vocabulary size.
    nnz_per_row : int, default=100
        Target mean number of nonzeros per row; must be below ``n_features``.
    zipf_exponent : float, default=1.1
        Zipf exponent (> 0) of the term frequencies.
    normalize : bool, default=True
        tf-idf weighting and l2 row normalisation; False keeps raw counts.
    random_state : int, Generator, SeedSequence or None, default=None
        Seed.

    Returns
    -------
    X : scipy.sparse.csr_matrix of shape (n_samples, n_features), float64
        Sorted indices, no explicit zeros (a document may be empty only if it
        drew no token).
    """
    from sklearn.feature_extraction.text import TfidfTransformer

    _positive_int("n_samples", n_samples)
    _positive_int("n_features", n_features)
    _positive_int("nnz_per_row", nnz_per_row)
    if nnz_per_row >= n_features:
        raise ValueError(f"nnz_per_row={nnz_per_row} must be below n_features={n_features}")
    if not zipf_exponent > 0:
        raise ValueError(f"zipf_exponent must be positive, got {zipf_exponent}")
    root = _seed_sequence(random_state)
    rank = _rng(root, _PARAMS).permutation(n_features)
    p = (rank + 1.0) ** -float(zipf_exponent)
    p /= p.sum()
    cdf = np.cumsum(p)
    cdf[-1] = 1.0
    mean_tokens = _tokens_for_distinct(p, nnz_per_row)

    indptr, indices, data = [np.zeros(1, dtype=np.int64)], [], []
    for b, start in enumerate(range(0, n_samples, BLOCK_ROWS)):
        rows = min(BLOCK_ROWS, n_samples - start)
        rng = _rng(root, _ROWS, b)
        lengths = rng.poisson(mean_tokens, size=rows)
        terms = np.searchsorted(cdf, rng.random(lengths.sum()), side="right")
        keys = np.repeat(np.arange(rows, dtype=np.int64), lengths) * n_features + terms
        keys, counts = np.unique(keys, return_counts=True)  # sorted: by row, then term
        row_nnz = np.bincount(keys // n_features, minlength=rows)
        indptr.append(indptr[-1][-1] + np.cumsum(row_nnz))
        indices.append(keys % n_features)
        data.append(counts.astype(np.float64))
    X = sp.csr_matrix(
        (np.concatenate(data), np.concatenate(indices), np.concatenate(indptr)),
        shape=(n_samples, n_features),
    )
    if normalize:
        X = sp.csr_matrix(TfidfTransformer(norm="l2").fit_transform(X), dtype=np.float64)
    X.sort_indices()
    return X


# --------------------------------------------------------------------------- paper 004
def make_random_noisy(
    n_samples: int,
    n_features: int,
    rank: int = 50,
    zeta: float = 10.0,
    random_state: Any = None,
) -> np.ndarray:
    """RandomNoisy of paper 004 (section 5): ``A = S D U + F / zeta``.

    ``S`` (n_samples x rank) and ``F`` (n_samples x n_features) have i.i.d.
    N(0, 1) entries, ``D`` is diagonal with ``D_ii = 1 - (i - 1) / n_features``
    (linearly decreasing, i = 1..rank) and ``U`` (rank x n_features) has
    random orthonormal rows. The paper uses 20000 x 1000, rank s = 50, zeta = 10.
    Rows are drawn in blocks of :data:`BLOCK_ROWS` (deterministic per seed).

    Parameters
    ----------
    n_samples : int
        Number of points (rows of A).
    n_features : int
        Dimension d.
    rank : int, default=50
        Signal dimension s, at most ``n_features``.
    zeta : float, default=10.0
        Signal-to-noise control; ``np.inf`` gives the noiseless rank-s signal.
    random_state : int, Generator, SeedSequence or None, default=None
        Seed.

    Returns
    -------
    A : ndarray of shape (n_samples, n_features), float64
    """
    _positive_int("n_samples", n_samples)
    _positive_int("n_features", n_features)
    _positive_int("rank", rank)
    if rank > n_features:
        raise ValueError(f"rank={rank} must be at most n_features={n_features}")
    if not zeta > 0:
        raise ValueError(f"zeta must be positive, got {zeta}")
    root = _seed_sequence(random_state)
    D = 1.0 - np.arange(rank) / n_features
    DU = D[:, None] * _orthonormal_columns(_rng(root, _PARAMS), n_features, rank).T
    A = np.empty((n_samples, n_features))
    for b, start in enumerate(range(0, n_samples, BLOCK_ROWS)):
        rows = min(BLOCK_ROWS, n_samples - start)
        rng = _rng(root, _ROWS, b)
        block = rng.standard_normal((rows, rank)) @ DU
        if np.isfinite(zeta):
            block += rng.standard_normal((rows, n_features)) / zeta
        A[start : start + rows] = block
    return A


# --------------------------------------------------------------------------- paper 002
def make_low_rank_linear(
    n_samples: int,
    n_features: int,
    spectrum: Sequence[float] | np.ndarray | None = None,
    random_state: Any = None,
) -> np.ndarray:
    """Paper 002's simulated data ``X = U sqrt(Sigma) V``, with rows as points.

    Returns ``X = V_r diag(sqrt(spectrum)) U_r^T`` where ``V_r``
    (n_samples x r) and ``U_r`` (n_features x r) have random orthonormal
    columns, r = len(spectrum). So ``X^T X`` has eigenvalues exactly
    ``spectrum`` (and zeros): the covariance of the paper's construction.

    Parameters
    ----------
    n_samples : int
        Number of points (the paper's T).
    n_features : int
        Dimension (the paper's M).
    spectrum : sequence of float or None, default=None
        The nonzero eigenvalues (diagonal of Sigma), non-negative. None uses
        :data:`PAPER_002_SPECTRUM` (rank 50: 5000, 2500, 1125, then 47 x 50).
        Its length must not exceed ``min(n_samples, n_features)``.
    random_state : int, Generator, SeedSequence or None, default=None
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features), float64
    """
    _positive_int("n_samples", n_samples)
    _positive_int("n_features", n_features)
    s = PAPER_002_SPECTRUM if spectrum is None else np.asarray(spectrum, dtype=np.float64)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"spectrum must be a non-empty 1-D sequence, got shape {s.shape}")
    if not np.isfinite(s).all() or (s < 0).any():
        raise ValueError("spectrum must hold finite, non-negative values")
    if s.size > min(n_samples, n_features):
        raise ValueError(
            f"spectrum has rank {s.size}, more than min(n_samples, n_features) = "
            f"{min(n_samples, n_features)}"
        )
    root = _seed_sequence(random_state)
    rng = _rng(root, _PARAMS)
    U = _orthonormal_columns(rng, n_features, s.size)
    V = _orthonormal_columns(rng, n_samples, s.size)
    return (V * np.sqrt(s)) @ U.T
