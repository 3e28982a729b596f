"""Split a dataset over workers: power law (the papers' setting), uniform, by label.

Each splitter returns a list of row-index arrays, one per worker, every one
non-empty; :func:`split` applies them to an array or CSR matrix.
"""

from __future__ import annotations

import numpy as np

from kernelscale.linalg import as_generator

PARTITIONS = ("power_law", "uniform", "label")


def power_law_sizes(n_samples: int, n_workers: int, exponent: float = 2.0, random_state=None):
    """Partition sizes proportional to ``rank^-exponent`` in a random worker order.

    The experiments of paper 001 (section 6.2) spread the data over workers by a
    power law with exponent 2: the largest worker holds most of the data, the
    smallest a few points. Every worker gets at least one row.
    """
    _check_counts(n_samples, n_workers)
    rng = as_generator(random_state)
    weights = np.arange(1, n_workers + 1, dtype=float) ** (-exponent)
    weights = rng.permutation(weights / weights.sum())
    sizes = np.ones(n_workers, dtype=np.int64)
    extra = n_samples - n_workers
    # Largest-remainder rounding of the rows beyond the one each worker must hold.
    raw = weights * extra
    sizes += np.floor(raw).astype(np.int64)
    leftover = n_samples - sizes.sum()
    sizes[np.argsort(raw - np.floor(raw))[::-1][:leftover]] += 1
    return sizes


def power_law_partition(n_samples, n_workers, exponent=2.0, random_state=None):
    """Random rows to workers with power-law sizes (see :func:`power_law_sizes`)."""
    rng = as_generator(random_state)
    sizes = power_law_sizes(n_samples, n_workers, exponent, rng)
    return _cut(rng.permutation(n_samples), sizes)


def uniform_partition(n_samples, n_workers, random_state=None):
    """Random rows to workers in (almost) equal shares."""
    _check_counts(n_samples, n_workers)
    rng = as_generator(random_state)
    return [np.sort(p) for p in np.array_split(rng.permutation(n_samples), n_workers)]


def label_partition(labels, n_workers, random_state=None):
    """Non-IID split: rows sorted by label, then cut into contiguous equal shares.

    Each worker sees few classes, as user devices do in the federated setting.
    """
    labels = np.asarray(labels)
    _check_counts(labels.shape[0], n_workers)
    rng = as_generator(random_state)
    order = np.lexsort((rng.random(labels.shape[0]), labels))
    return [np.sort(p) for p in np.array_split(order, n_workers)]


def make_partition(n_samples, n_workers, method="power_law", labels=None, random_state=None):
    """Row indices per worker by ``method`` in {'power_law', 'uniform', 'label'}."""
    if method == "power_law":
        return power_law_partition(n_samples, n_workers, random_state=random_state)
    if method == "uniform":
        return uniform_partition(n_samples, n_workers, random_state=random_state)
    if method == "label":
        if labels is None:
            raise ValueError("partition='label' needs the labels y.")
        return label_partition(labels, n_workers, random_state=random_state)
    raise ValueError(f"Unknown partition {method!r}; choose one of {', '.join(PARTITIONS)}.")


def split(X, indices):
    """The row blocks ``[X[idx] for idx in indices]``."""
    return [X[idx] for idx in indices]


def _cut(perm, sizes):
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [np.sort(perm[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]


def _check_counts(n_samples, n_workers):
    if int(n_workers) != n_workers or n_workers < 1:
        raise ValueError(f"n_workers must be a positive integer, got {n_workers!r}.")
    if n_samples < n_workers:
        raise ValueError(
            f"Cannot split {n_samples} rows over {n_workers} workers: "
            "every worker needs at least one row."
        )


def feature_block_partition(n_features: int, blocks) -> list[np.ndarray]:
    """Column indices per party for vertical partitions (each party holds some features).

    Parameters
    ----------
    n_features : int
        Number of columns of the full data.
    blocks : int, sequence of int, or sequence of index arrays
        An int ``J`` cuts the columns into ``J`` contiguous, (almost) even blocks;
        a list of ints gives the block sizes (uneven blocks, summing to
        ``n_features``); a list of index arrays gives the columns of each party
        explicitly (every column exactly once).

    Returns
    -------
    list of ndarray of int
        One non-empty array of column indices per party.
    """
    if int(n_features) != n_features or n_features < 1:
        raise ValueError(f"n_features must be a positive integer, got {n_features!r}.")
    n_features = int(n_features)
    if np.isscalar(blocks):
        if int(blocks) != blocks or blocks < 1:
            raise ValueError(f"feature_blocks must be a positive integer, got {blocks!r}.")
        if blocks > n_features:
            raise ValueError(
                f"Cannot split {n_features} features over {blocks} parties: "
                "every party needs at least one feature."
            )
        even = np.array_split(np.arange(n_features), int(blocks))
        return [np.asarray(b, dtype=np.int64) for b in even]
    blocks = list(blocks)
    if not blocks:
        raise ValueError("feature_blocks is empty: give at least one party.")
    if all(np.isscalar(b) for b in blocks):
        sizes = np.asarray(blocks)
        if np.any(sizes != np.round(sizes)) or np.any(sizes < 1):
            raise ValueError(f"feature_blocks sizes must be positive integers, got {blocks!r}.")
        if sizes.sum() != n_features:
            raise ValueError(
                f"feature_blocks={blocks!r}: the sizes sum to {int(sizes.sum())}, but the data "
                f"has {n_features} features."
            )
        return _cut(np.arange(n_features), sizes.astype(np.int64))
    indices = [np.asarray(b).ravel() for b in blocks]
    for party, idx in enumerate(indices):
        if idx.size == 0:
            raise ValueError(f"Feature block {party} is empty: every party needs a feature.")
        if idx.dtype.kind not in "iu":
            raise ValueError(f"Feature block {party} must hold integer column indices.")
    every = np.sort(np.concatenate(indices))
    if not np.array_equal(every, np.arange(n_features)):
        raise ValueError(
            "Feature blocks must use every column 0..n_features-1 exactly once "
            f"(n_features={n_features})."
        )
    return [idx.astype(np.int64) for idx in indices]
