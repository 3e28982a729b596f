"""Distributed sampling of representative points (Algorithms 1 and 2 of paper 001).

Worker steps for the kernel subspace embedding, the distributed leverage
scores (disLS), leverage-score sampling of P and adaptive sampling of Y~ by the
feature-space residual to span(phi(P)); and the master-side allocation of a
sample budget over workers.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from kernelscale.features import make_feature_map
from kernelscale.kernels import Kernel
from kernelscale.linalg import gram, pack_symmetric, whitening
from kernelscale.runtime import Tagged, WorkerState
from kernelscale.sketches import make_sketch


def allocate(budget: int, weights, capacity, rng: np.random.Generator) -> np.ndarray:
    """Split ``budget`` draws over workers in proportion to ``weights``, within ``capacity``.

    A multinomial draw (the i.i.d. sampling of the paper, aggregated per worker);
    a worker cannot give more distinct points than it has with positive weight,
    so the excess is drawn again among the others.
    """
    weights = np.asarray(weights, dtype=float)
    capacity = np.asarray(capacity, dtype=np.int64)
    counts = np.zeros(len(weights), dtype=np.int64)
    budget = int(min(budget, capacity.sum()))
    while budget > 0:
        open_ = (counts < capacity) & (weights > 0)
        if not open_.any():
            break
        p = np.where(open_, weights, 0.0)
        draw = rng.multinomial(budget, p / p.sum())
        take = np.minimum(draw, capacity - counts)
        counts += take
        budget -= int(take.sum())
    return counts


def sample_rows(state: WorkerState, weights: np.ndarray, count: int):
    """Draw ``count`` distinct unsampled rows with probability proportional to ``weights``."""
    if count == 0:
        return _empty_rows(state.data)
    p = np.where(state.sampled, 0.0, weights)
    idx = np.sort(state.rng.choice(len(p), size=count, replace=False, p=p / p.sum()))
    state.sampled[idx] = True
    return state.data[idx]


def _empty_rows(X):
    return X[:0]


def _rows(X, start, stop):
    return X[start:stop]


# Step 1: kernel subspace embedding E_i = phi_hat(A_i) T (Algorithm 4 of 001, line 1)
def embed_step(state: WorkerState, message):
    """Embed the partition, keep ``E_i``, reply the leverage-score message.

    ``message`` is ``Tagged(seed=(feature, sketch, own), model=config)``.

    ``config['messages'] == 'gram'``: ``E_i^T E_i`` packed (t(t+1)/2 words).
    ``'sketch'``: the paper's ``T_i^T E_i`` (p x t) or ``E_i`` itself when n_i <= p.
    """
    feature_seed, sketch_seed, own_seed = message["seed"]
    state.config = config = message["model"]
    state.rng = np.random.default_rng(own_seed)
    X = state.data
    state.sampled = np.zeros(X.shape[0], dtype=bool)
    kernel = Kernel.from_dict(config["kernel"])
    fmap = make_feature_map(kernel, X.shape[1], config["n_random_features"], feature_seed)
    t = config["embedding_dim"]
    sketch = make_sketch("gaussian", fmap.n_components, t, sketch_seed)
    chunk = config["chunk_size"]
    dtype = np.dtype(config.get("embedding_dtype", "float64"))
    state.embedding = np.empty((X.shape[0], t), dtype=dtype)
    for start in range(0, X.shape[0], chunk):
        block = fmap.transform(_rows(X, start, start + chunk), chunk_size=chunk, dtype=dtype)
        state.embedding[start : start + chunk] = sketch.right(block)
    if config["messages"] == "gram":
        return pack_symmetric(gram(state.embedding))
    p = config["row_sketch_dim"]
    if X.shape[0] <= p:
        return state.embedding
    return row_sketch(state.embedding, p, own_seed, chunk)


def row_sketch(M: np.ndarray, n_out: int, seed: int, chunk: int) -> np.ndarray:
    """``T_i^T M``: a CountSketch + Gaussian subspace embedding over the rows of ``M``."""
    sketch = make_sketch("countsketch+gaussian", M.shape[0], n_out, seed)
    return sketch.left(M)


# Step 2: disLS, line 3 of Algorithm 1 of 001: l_j = ||(Z^T)^-1 E^i_{:j}||^2
def leverage_scores_step(state: WorkerState, whitener: np.ndarray):
    """Keep the generalised leverage scores of the embedded rows; reply (sum, #positive)."""
    E, chunk = state.embedding, state.config["chunk_size"]
    state.scores = np.empty(E.shape[0])
    for start in range(0, E.shape[0], chunk):  # no n_i x t temporaries
        projected = E[start : start + chunk] @ whitener.astype(E.dtype, copy=False)
        state.scores[start : start + chunk] = np.einsum("ij,ij->i", projected, projected)
    return np.array([state.scores.sum(), np.count_nonzero(state.scores > 0)])


# Step 3: leverage-score sampling of P (Algorithm 2 of 001, line 1)
def leverage_sample_step(state: WorkerState, count: int):
    return Tagged(raw_points=sample_rows(state, state.scores, int(count)))


# Step 4: residuals k(a, a) - ||proj of phi(a) on span(phi(P))||^2 (Algorithm 2, line 3)
def residual_step(state: WorkerState, P):
    """Keep P; compute each row's squared feature-space distance to span(phi(P))."""
    config = state.config
    kernel = Kernel.from_dict(config["kernel"])
    state.leverage_points = P
    basis = whitening(kernel(P, P))
    X, chunk = state.data, config["chunk_size"]
    residual = kernel.diag(X).astype(float)
    for start in range(0, X.shape[0], chunk):
        proj = kernel(_rows(X, start, start + chunk), P) @ basis
        residual[start : start + chunk] -= np.einsum("ij,ij->i", proj, proj)
    # Round-off makes the residual of points in (or near) the span slightly negative.
    residual[residual < 1e-12 * max(1.0, float(np.abs(kernel.diag(X)).max()))] = 0.0
    residual[state.sampled] = 0.0
    state.residual = residual
    return np.array([residual.sum(), np.count_nonzero(residual > 0)])


def adaptive_sample_step(state: WorkerState, count: int):
    return Tagged(raw_points=sample_rows(state, state.residual, int(count)))


def uniform_setup_step(state: WorkerState, own_seed: int):
    """Uniform baselines: a fresh sampler state with every row weighted 1."""
    state.rng = np.random.default_rng(own_seed)
    state.sampled = np.zeros(state.data.shape[0], dtype=bool)
    state.scores = np.ones(state.data.shape[0])


def stack_rows(blocks):
    """Vertically stack dense or CSR row blocks."""
    if any(sp.issparse(b) for b in blocks):
        return sp.vstack([sp.csr_matrix(b) for b in blocks], format="csr")
    return np.vstack(blocks)
