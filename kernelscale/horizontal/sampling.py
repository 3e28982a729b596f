"""The samplers' worker steps and rules (Algorithms 1 and 2 of paper 001).

Worker steps for the kernel subspace embedding, the distributed leverage
scores (disLS), leverage-score sampling of P and adaptive sampling of Y~ by the
feature-space residual to span(phi(P)), or by the ridge residual of the
default sampler; and the ridge sampler's rules: its defensive uniform share
(:func:`defensive_share`, :func:`defensive_split`) and whether it measures the
energy outside its pilot's span (:func:`needs_ridge_floor`). How the rows are
drawn (distinct, copies marked, the budget over workers, the uniform draws)
lives in :mod:`kernelscale.horizontal.draws`.
"""

from __future__ import annotations

import numpy as np

from kernelscale.arrays import (
    device,
    is_device_array,
    is_float32,
    namespace,
    rows,
    to_device_of,
    to_host,
)
from kernelscale.features import make_feature_map
from kernelscale.horizontal.draws import sample_rows, stack_rows
from kernelscale.kernels import Kernel
from kernelscale.linalg import (
    gram,
    pack_symmetric,
    projected_sq_norms,
    ridge_factor,
    ridge_whitening,
    unpack_trapezoidal,
    whitening,
)
from kernelscale.runtime import Tagged, WorkerState
from kernelscale.runtime.chunks import map_chunks
from kernelscale.runtime.steps import worker_step
from kernelscale.sketches import make_sketch

#: The share of each ridge round's new landmarks drawn uniformly (a defensive mixture)
#: where the pilot is too small to read (fewer than ``pilot.MIN_PILOT`` k points), with
#: RBF and Laplacian kernels (:func:`defensive_share`).
DEFENSIVE_SHARE = 0.5
#: The same share where the pilot is read.
READ_PILOT_SHARE = 0.5
#: From a pilot of TRUSTED_PILOT x k points on, the ridge rounds draw no uniform share.
TRUSTED_PILOT = 6


def defensive_share(kernel, n_pilot: int | None = None, n_components: int | None = None,
                    ridge_scale: float = 1.0) -> float:
    """The ridge rounds' uniform share after a pilot of ``n_pilot`` points.

    * Polynomial, linear and arc-cosine kernels: 0. The energy sits with the
      points of large norm, which the residual rounds find and a uniform draw
      mostly misses (a share of 0.25 had 0.77-2.55x the excess of none, median
      1.08x over 34 cells of seven sets; ``benchmarks/budget_heldout.py``).
    * ``ridge_scale=0`` (the pilot rule read a concentrated spectrum and draws
      by the plain residual, :mod:`kernelscale.horizontal.pilot`): 0; the
      scores are what the rule trusts there.
    * A pilot too small to read (fewer than ``MIN_PILOT`` k points, or
      ``n_pilot`` not given): :data:`DEFENSIVE_SHARE`. Its scores come from
      a handful of points.
    * A pilot of :data:`TRUSTED_PILOT` k points or more: 0. Its scores are
      trusted; in the five cells where this changes the budgeted fit, the
      excess is 0.79-0.98x that with the share (income, spam and insurance
      with RBF 1.0 x the median distance and shuttle with 0.2 x at 10^6
      words, pilots of about 100 points; digits at 3 x 10^5).
    * Otherwise :data:`READ_PILOT_SHARE`.

    The shares and the threshold were chosen by leaving one set out of nine
    (``benchmarks/budget_heldout.py``, ``docs/budget.md``).
    """
    from kernelscale.horizontal.pilot import too_small_to_read

    if not kernel.is_shift_invariant or ridge_scale == 0:
        return 0.0
    if n_pilot is None or n_components is None or too_small_to_read(n_pilot, n_components):
        return DEFENSIVE_SHARE
    if n_pilot >= TRUSTED_PILOT * n_components:
        return 0.0
    return READ_PILOT_SHARE


#: Whether the ridge sampler's ridge counts the energy outside span(phi(P)) where its
#: pilot P is too small to read (:func:`needs_ridge_floor`). Off: leaving one set out of
#: nine, it met no more cells than without (``benchmarks/budget_heldout.py``).
RIDGE_FLOOR = False


def needs_ridge_floor(kernel, n_pilot: int, n_components: int) -> bool:
    """Whether the ridge sampler measures the energy outside its pilot's span first.

    Musco and Musco's (2017) ridge is ``lambda = (1/k) sum_{i>k} lambda_i(K)``;
    from a uniform pilot P of m points, (n/m) K_PP's spectrum stands for K's
    (:func:`~kernelscale.horizontal.samplers.pilot_ridge`) within span(phi(P))
    only. The energy outside that span, the rows' total squared distance to it
    (trace(K) minus the trace of P's Nystroem approximation), belongs to the
    tail beyond k as well, and a pilot of a few times k points leaves most of
    it out: a pilot of k points reads a tail of 0, and the rounds then draw by
    the plain residual, which chases isolated points. So where the pilot is
    too small to read (fewer than :data:`~kernelscale.horizontal.pilot.MIN_PILOT`
    k points) with RBF and Laplacian kernels, a first round sends P and has
    every worker return its rows' total residual (2 words up per worker), and
    the ridge adds it. Polynomial, linear and arc-cosine kernels keep ridge 0,
    by design (:func:`~kernelscale.horizontal.samplers.default_pilot_size`).
    """
    from kernelscale.horizontal.pilot import too_small_to_read

    return bool(RIDGE_FLOOR and kernel.is_shift_invariant
                and too_small_to_read(int(n_pilot), int(n_components)))


def defensive_split(n_new: int, share: float | None = None) -> tuple[int, int]:
    """Split a ridge round's ``n_new`` landmarks into (by the residual, uniformly).

    The ridge sampler's scores come from a pilot of a few dozen points; where
    they mislead (a pilot of k points has no tail beyond k, so the ridge is 0
    and the plain residual chases isolated points) its sample can be worse
    than a uniform one. Defensive importance sampling (Hesterberg 1995) draws
    from a mixture of the proposal and the nominal distribution, which bounds
    the loss against the nominal one; here each round draws ``floor(share x
    n_new)`` of its points uniformly from the rows not sampled yet and the
    rest by the ridge residual, Musco and Musco's (2017) ridge leverage score
    estimate. Landmarks only add to the span, so the sample's projection error
    is never above that of its uniform part alone. ``share`` defaults to
    :data:`DEFENSIVE_SHARE`, read at call time; the sampler and the forecast
    pass :func:`defensive_share` of the kernel.
    """
    share = DEFENSIVE_SHARE if share is None else float(share)
    n_uniform = int(np.floor(share * max(int(n_new), 0) + 1e-9))
    return int(n_new) - n_uniform, n_uniform


def _host_rows(X, start, stop):
    """Rows of the partition on the host (the random feature maps are NumPy's)."""
    return to_host(rows(X, start, stop))


# Step 1: kernel subspace embedding E_i = phi_hat(A_i) T (Algorithm 4 of 001, line 1)
def _embedding_disclosure(message) -> str:
    """The Gram message is a sum over rows; the paper's sketch is ``E_i`` itself when
    ``n_i <= p`` (an embedding per row)."""
    return "aggregates" if message["model"]["messages"] == "gram" else "per-row"


@worker_step(discloses=_embedding_disclosure)
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
    state.embedding = E = np.empty((X.shape[0], t), dtype=dtype)

    def embed_chunk(start, stop):
        block = fmap.transform(_host_rows(X, start, stop), chunk_size=chunk, dtype=dtype)
        E[start:stop] = sketch.right(block)
        return gram(E[start:stop]) if config["messages"] == "gram" else None

    gram_sum = 0.0
    for *_, chunk_gram in map_chunks(embed_chunk, X.shape[0], chunk):
        if chunk_gram is not None:
            gram_sum = gram_sum + chunk_gram
    if config["messages"] == "gram":
        return pack_symmetric(gram_sum)
    p = config["row_sketch_dim"]
    if X.shape[0] <= p:
        return state.embedding
    return row_sketch(state.embedding, p, own_seed, chunk)


def row_sketch(M: np.ndarray, n_out: int, seed: int, chunk: int) -> np.ndarray:
    """``T_i^T M``: a CountSketch + Gaussian subspace embedding over the rows of ``M``."""
    sketch = make_sketch("countsketch+gaussian", M.shape[0], n_out, seed)
    return sketch.left(M)


# Step 2: disLS, line 3 of Algorithm 1 of 001: l_j = ||(Z^T)^-1 E^i_{:j}||^2
@worker_step(discloses="aggregates")
def leverage_scores_step(state: WorkerState, packed_factor: np.ndarray):
    """Keep the generalised leverage scores of the embedded rows; reply (sum, #positive).

    ``packed_factor`` is the master's upper-trapezoidal factor ``R`` (r x t,
    :func:`kernelscale.linalg.pack_trapezoidal`), with ``R^T R`` the
    pseudo-inverse of ``E^T E`` on its numerical range: the score of row ``e``
    is ``||R e||^2``, the paper's ``||(Z^T)^-1 e||^2`` without inverting a
    singular ``Z``.
    """
    E, chunk = state.embedding, state.config["chunk_size"]
    factor_t = unpack_trapezoidal(packed_factor, E.shape[1]).T.astype(E.dtype, copy=False)
    state.scores = np.empty(E.shape[0])
    for start in range(0, E.shape[0], chunk):  # no n_i x t temporaries
        projected = E[start : start + chunk] @ factor_t
        state.scores[start : start + chunk] = np.einsum("ij,ij->i", projected, projected)
    return np.array([state.scores.sum(), np.count_nonzero(state.scores > 0)])


# Step 3: leverage-score sampling of P (Algorithm 2 of 001, line 1)
@worker_step(discloses="rows")
def leverage_sample_step(state: WorkerState, count: int):
    """``count`` distinct unsampled rows drawn by their leverage scores (:func:`sample_rows`)."""
    return Tagged(raw_points=sample_rows(state, state.scores, int(count)))


# Step 4: residuals k(a, a) - ||proj of phi(a) on span(phi(P))||^2 (Algorithm 2, line 3)
@worker_step(discloses="aggregates")
def residual_step(state: WorkerState, P):
    """Keep P; compute each row's squared feature-space distance to span(phi(P))."""
    config = state.config
    kernel = Kernel.from_dict(config["kernel"])
    return _keep_residuals(state, kernel, P, whitening(kernel(P, P, dtype=np.float64)),
                           config["chunk_size"])


@worker_step(discloses="aggregates")
def ridge_residual_step(state: WorkerState, message):
    """Add the new landmarks to those kept; each row's ridge residual to span(phi(S)).

    ``message`` is ``Tagged(raw_points=new points, model={'ridge': mu, ...})``;
    the first round also carries ``'kernel'`` and ``'chunk_size'``, kept in
    ``state.config``. With S every landmark received so far, the residual is
    ``k(a,a) - k(a,S) (K_SS + mu I)^-1 k(S,a)``; with ``mu = 0`` it is
    :func:`residual_step`'s squared distance to span(phi(S)). Divided by the
    ridge lambda, it is Musco and Musco's (2017) estimate of the
    lambda-ridge leverage score of ``a`` from the sample S (their Algorithm 2,
    with ``mu = lambda |S| / n``, the ridge in S's coordinates).
    """
    new_points = message["raw_points"]
    state.config = config = {**getattr(state, "config", {}), **message["model"]}
    kept = getattr(state, "held_landmarks", None)
    S = new_points if kept is None else stack_rows([kept, new_points])
    kernel = Kernel.from_dict(config["kernel"])
    K_SS, ridge = kernel(S, S, dtype=np.float64), float(config["ridge"])
    factor = ridge_factor(K_SS, ridge)
    if factor is None:
        return _keep_residuals(state, kernel, S, ridge_whitening(K_SS, ridge),
                               config["chunk_size"])
    return _keep_residuals(state, kernel, S, factor.T, config["chunk_size"])


def _keep_residuals(state: WorkerState, kernel: Kernel, P, basis, chunk: int):
    """``state.residual = k(a,a) - ||k(a,P) basis||^2`` (0 for sampled rows); reply (sum, #>0).

    With the ridge factor ``G`` (``basis = G.T``) the residual is
    ``k(a,a) - ||G k(P,a)||^2`` (:func:`~kernelscale.linalg.projected_sq_norms`).

    The worker keeps P (``state.held_landmarks``): disLR's round sends only the
    landmarks it does not hold yet. The blocks are in the partition's precision
    (float32 partitions: float32 blocks and products, the residuals in float64).
    """
    state.held_landmarks = P
    X = state.data
    if is_device_array(X):
        residual, largest = _device_residuals(kernel, X, P, basis, chunk)
    else:
        residual = kernel.diag(X).astype(float)
        dtype = np.float32 if X.dtype == np.float32 and P.dtype == np.float32 else np.float64
        basis = np.asarray(basis, dtype=dtype)

        def residual_chunk(start, stop):
            block = kernel(X[start:stop], P, dtype=dtype)
            residual[start:stop] -= projected_sq_norms(block, basis)

        for _ in map_chunks(residual_chunk, X.shape[0], chunk):
            pass
        largest = np.abs(kernel.diag(X)).max(initial=0.0)
    # Round-off makes the residual of points in (or near) the span slightly negative;
    # what is below 1e-12 of the largest k(a, a) is round-off (relative: the data's
    # scale must not decide which points count as already spanned).
    residual[residual <= 1e-12 * float(largest)] = 0.0
    residual[state.sampled] = 0.0
    state.residual = residual
    return np.array([residual.sum(), np.count_nonzero(residual > 0)])


def _device_residuals(kernel: Kernel, X, P, basis, chunk: int) -> tuple[np.ndarray, float]:
    """``k(a,a) - ||k(a,P) basis||^2`` for a device partition, computed on its device
    (blocks and products in its precision, as on the host) and sent to the host once,
    and the largest ``|k(a, a)|``."""
    xp = namespace(X)
    work = xp.float32 if is_float32(X) and P.dtype == np.float32 else xp.float64
    P = to_device_of(P, X)
    basis = to_device_of(np.asarray(basis), X, work)
    sq = xp.empty(X.shape[0], dtype=xp.float64, device=device(X))

    def residual_chunk(start, stop):
        proj = kernel(rows(X, start, stop), P, chunk_size=chunk,  # the chunk is one block
                      dtype=np.float32 if work == xp.float32 else np.float64) @ basis
        sq[start:stop] = xp.astype(xp.sum(proj * proj, axis=1), xp.float64)

    for _ in map_chunks(residual_chunk, X.shape[0], chunk):
        pass
    diag = xp.astype(kernel.diag(X), xp.float64)
    return to_host(diag - sq), float(xp.max(xp.abs(diag))) if diag.shape[0] else 0.0


@worker_step(discloses="rows")
def adaptive_sample_step(state: WorkerState, count: int):
    """``count`` distinct unsampled rows drawn by their residuals (:func:`sample_rows`)."""
    return Tagged(raw_points=sample_rows(state, state.residual, int(count)))
