"""The ridge sampler's rounds for a word budget, measuring as they go (RBF and Laplacian kernels).

A budgeted fit whose pilot rule keeps disKPCA with the ridge sampler
(:mod:`kernelscale.horizontal.piloted`) runs the sampler's rounds with one
change: every round that sends landmarks down (P in round 1, the last round's
points in round 2, the last points in disLR's round) also asks for the new
columns of disLR's Gram ``sum_i k(Y, A_i) k(A_i, Y)`` (and of the row sums
``sum_a k(Y, a)`` when centred). The Gram is disLR's own message, sent in parts
as the landmarks arrive instead of at the end: the same words, the same rounds
(one trace word per worker more per part). From the parts it holds, the master
knows the energy over every row of any subspace in the span of the landmarks so
far (:mod:`kernelscale.horizontal.measure`), and uses it before it spends the
rest of the budget:

* where a round 2 follows, round 1 draws at least half its new points uniformly
  (:data:`MEASURE_SHARE`; the ridge sampler's defensive share is half already
  after a pilot of fewer than TRUSTED_PILOT k points, and none after a larger one
  or with ridge 0);
* with round 2's reply the master holds the Gram of both halves, and compares
  what each added to disLR over every row
  (:func:`~kernelscale.horizontal.measure.ridge_against_uniform`): where the ridge
  half added less than :data:`UNIFORM_BELOW` times the uniform half's energy,
  round 2 draws all its points uniformly (from :data:`RIDGE_FROM` times on, all
  by the ridge residual); between, as the sampler would
  (:func:`~kernelscale.horizontal.sampling.defensive_share`).

With one ridge round (a pilot of more than half of Y) nothing is compared, and
the round is the ridge sampler's, draw for draw. The forecast of these rounds is
``forecast_words('diskpca', ..., measured=True)``, exact to the word on dense
rows distinct across workers.
"""

from __future__ import annotations

import math

import numpy as np

from kernelscale.arrays import device, is_device_array, namespace, rows, to_device_of, to_host
from kernelscale.eigensolvers import top_eigenpairs
from kernelscale.horizontal.dislr import cap_at_rank, store_model_step
from kernelscale.horizontal.draws import sample_distinct, stack_rows, uniform_sample_step
from kernelscale.horizontal.measure import SpanGram, ridge_against_uniform
from kernelscale.horizontal.samplers import draw_by_residuals, pilot_ridge, ridge_schedule
from kernelscale.horizontal.sampling import (
    defensive_share,
    defensive_split,
    ridge_residual_step,
)
from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel
from kernelscale.linalg import pack_symmetric, unpack_symmetric, whitening
from kernelscale.model import KernelPCAModel
from kernelscale.runtime import Tagged, WorkerState
from kernelscale.runtime.chunks import map_chunks
from kernelscale.runtime.cluster import one_blas_thread
from kernelscale.runtime.lost import answered
from kernelscale.runtime.steps import worker_step

__all__ = ["MEASURE_SHARE", "RIDGE_FROM", "UNIFORM_BELOW", "first_share", "measured_ridge",
           "residual_round_name", "round_two_share"]

#: The rounds' names: round j's residuals (and the Gram's new columns), disLR's round.
RESIDUALS = "ridge sampling {j}: residuals and Gram"
DISLR = "disLR: k(Y,A_i) k(A_i,Y)"
#: Round 2 draws all its points uniformly where round 1's ridge points added less than
#: UNIFORM_BELOW times the energy of its uniform ones (chosen by
#: ``benchmarks/budget_measured.py``).
UNIFORM_BELOW = 0.6
#: ... and all by the ridge residual where they added at least RIDGE_FROM times as much.
RIDGE_FROM = math.inf


#: Round 1's uniform share where a round 2 follows, whatever the sampler's own: the half
#: that round 2 weighs the ridge residual's points against.
MEASURE_SHARE = 0.5


def first_share(kernel: Kernel, n_pilot: int, n_components: int, ridge_scale: float,
                last: bool) -> float:
    """Round 1's uniform share: :data:`MEASURE_SHARE` where round 2 follows (at least the
    sampler's own), else the sampler's own
    (:func:`~kernelscale.horizontal.sampling.defensive_share`)."""
    share = defensive_share(kernel, n_pilot, n_components, ridge_scale)
    return share if last else max(share, MEASURE_SHARE)


def round_two_share(gain: float, share: float) -> float:
    """Round 2's uniform share from round 1's measured ridge gain
    (:func:`~kernelscale.horizontal.measure.ridge_against_uniform`): 1 below
    :data:`UNIFORM_BELOW`, 0 from :data:`RIDGE_FROM` on, else the sampler's own
    ``share`` (:func:`~kernelscale.horizontal.sampling.defensive_share`)."""
    if gain < UNIFORM_BELOW:
        return 1.0
    return 0.0 if gain >= RIDGE_FROM else share


def residual_round_name(j: int) -> str:
    """The name of ridge round j's first message (P or the last points down; replies up)."""
    return RESIDUALS.format(j=j)


def gram_columns(state: WorkerState, Y, n_known: int, center: bool):
    """The new columns of ``k(Y, A_i) k(A_i, Y)`` on the worker: ``(packed, row sums, trace)``.

    Y's first ``n_known`` landmarks are those whose Gram the master holds; the
    reply packs the block ``[known x new]`` row by row and the ``new x new``
    block's upper triangle (:func:`~kernelscale.linalg.pack_symmetric`),
    ``n_known n_new + n_new (n_new + 1) / 2`` words, with the row sums
    ``sum_a k(Y_new, a)`` (None uncentred) and ``sum_a k(a, a)``. Sums in float64.
    """
    config = state.config
    kernel = Kernel.from_dict(config["kernel"])
    X, chunk = state.data, int(config.get("chunk_size", DEFAULT_CHUNK_SIZE))
    n_y = Y.shape[0]
    n_new = n_y - n_known
    on_device = is_device_array(X)
    if on_device:
        xp = namespace(X)
        Y = to_device_of(Y, X)

        def zeros(shape):
            return xp.zeros(shape, dtype=xp.float64, device=device(X))

        def to_f64(values):
            return xp.astype(values, xp.float64)
    else:
        xp, zeros = np, np.zeros

        def to_f64(values):
            return np.asarray(values, dtype=np.float64)
    acc, sums, diag = zeros((n_y, n_new)), zeros(n_new), 0.0

    def chunk_gram(start, stop):
        block = to_f64(kernel(rows(X, start, stop), Y, chunk_size=chunk if on_device else
                              DEFAULT_CHUNK_SIZE))
        new = block[:, n_known:]
        return block.T @ new, xp.sum(new, axis=0), xp.sum(to_f64(kernel.diag(rows(X, start,
                                                                               stop))))

    for _, _, (part, part_sums, part_diag) in map_chunks(chunk_gram, X.shape[0], chunk):
        acc += part
        sums += part_sums
        diag += float(part_diag)
    acc, sums = to_host(acc), to_host(sums)
    packed = np.concatenate([acc[:n_known].ravel(), pack_symmetric(acc[n_known:])])
    return packed, (sums if center else None), diag


def _reply(packed, sums, trace, extra=()):
    """A Gram part's reply: the columns as ``sketch``; residual sums, row sums, trace as
    ``scalars``."""
    scalars = [*extra] + ([sums] if sums is not None else []) + [trace]
    return Tagged(sketch=packed, scalars=scalars)


@worker_step(discloses="aggregates")
def residuals_and_gram_step(state: WorkerState, message):
    """A ridge round's residuals (:func:`~kernelscale.horizontal.sampling.ridge_residual_step`)
    and the new columns of disLR's Gram for the landmarks it brings (:func:`gram_columns`).

    ``message`` is ridge_residual_step's, its model adding ``'center'``. Replies
    ``Tagged(sketch=the columns, scalars=[residual sum, rows of positive residual,
    (row sums,) trace])``.
    """
    n_known = 0 if getattr(state, "held_landmarks", None) is None else \
        state.held_landmarks.shape[0]
    total, positive = ridge_residual_step(state, message)
    packed, sums, trace = gram_columns(state, state.held_landmarks, n_known,
                                       bool(state.config["center"]))
    return _reply(packed, sums, trace, (total, positive))


@worker_step(discloses="aggregates")
def gram_step(state: WorkerState, message):
    """disLR's round on landmarks sent in parts: add the new ones, reply the Gram's new columns.

    ``message`` is ``Tagged(raw_points=the new landmarks, model=settings)``; the
    settings hold ``'kernel'`` and ``'chunk_size'`` where no ridge round sent
    them, and ``'center'``. The worker keeps Y (``state.landmarks``) for the model.
    """
    state.config = config = {**getattr(state, "config", {}), **message["model"]}
    held = getattr(state, "held_landmarks", None)
    n_known = 0 if held is None else held.shape[0]
    Y = message["raw_points"] if held is None else stack_rows([held, message["raw_points"]])
    state.held_landmarks = state.landmarks = Y
    packed, sums, trace = gram_columns(state, Y, n_known, bool(config["center"]))
    return _reply(packed, sums, trace)


class _Gram:
    """The master's Gram of the landmarks so far, grown part by part."""

    def __init__(self, center: bool):
        self.center = center
        self.G, self.sums, self.trace = np.zeros((0, 0)), np.zeros(0), 0.0

    def add(self, cluster, replies, n_new: int, scalars_before: int = 0) -> list:
        """Fold a round's replies in; returns each worker's leading scalars (residual sums)."""
        got = answered(replies)
        scale = cluster.rescale_factor() if cluster.lost_workers else 1.0
        n_known = self.G.shape[0]
        cut = n_known * n_new
        columns = sum(np.asarray(r["sketch"], dtype=np.float64) for r in got) * scale
        grown = np.zeros((n_known + n_new, n_known + n_new))
        grown[:n_known, :n_known] = self.G
        grown[:n_known, n_known:] = columns[:cut].reshape(n_known, n_new)
        grown[n_known:, :n_known] = grown[:n_known, n_known:].T
        grown[n_known:, n_known:] = unpack_symmetric(columns[cut:], n_new)
        self.G = grown
        if self.center:
            self.sums = np.concatenate([self.sums, sum(np.asarray(r["scalars"][scalars_before],
                                                                  dtype=np.float64)
                                                       for r in got) * scale])
        self.trace = float(sum(r["scalars"][-1] for r in got)) * scale
        return [None if r is None else r["scalars"][:scalars_before] for r in replies]


def measured_ridge(cluster, kernel: Kernel, n_components: int, n_landmarks: int, pilot, *,
                   center: bool, chunk_size: int, rng, redraw: bool,
                   ridge_scale: float = 1.0,
                   eigensolver: dict | None = None) -> tuple[KernelPCAModel, dict]:
    """disKPCA with the ridge sampler from a drawn pilot, its Gram sent in parts, measured.

    ``pilot`` is ``(P, rows drawn from each worker, PartitionInfo)`` (the budget's
    uniform pilot, :func:`kernelscale.horizontal.draws.uniform_sample`). The
    rounds are those of :func:`kernelscale.horizontal.samplers.ridge_sample` and
    disLR (the module docstring); round j > 1 draws its points by the ridge
    residual or uniformly as the master measured. Returns the model and what
    was measured: ``{'shares': each round's uniform share, 'ridge_gain': round
    2's ridge gain over uniform (or None), 'ridge': the ridge used, 'n_iter': the
    master eigensolver's iterations}``. ``eigensolver``: keyword arguments of
    :func:`kernelscale.eigensolvers.top_eigenpairs` (default: LAPACK's dense solver).
    """
    P, received, info = pilot
    k, n = int(n_components), info.n_samples
    targets = ridge_schedule(kernel, k, n_landmarks, P.shape[0])
    n_rows = np.asarray(info.n_rows)
    ridge = ridge_scale * pilot_ridge(kernel, P, k, center)
    per_landmark = ridge / P.shape[0]
    config = {"kernel": kernel.to_dict(), "chunk_size": int(chunk_size), "center": bool(center)}
    gram = _Gram(center)
    Y, new = P, P
    ridge_part, uniform_part = [], []  # the last round's points by each draw (indices in Y)
    shares, gain = [], None
    for j, target in enumerate(targets[1:], start=1):
        settings = {**(config if j == 1 else {}), "ridge": per_landmark * Y.shape[0]}
        replies = cluster.broadcast_map(residuals_and_gram_step,
                                        Tagged(raw_points=new, model=settings),
                                        round=residual_round_name(j), reply_kind="scalars")
        sums = gram.add(cluster, replies, new.shape[0], scalars_before=2)
        share = (first_share(kernel, P.shape[0], k, ridge_scale, last=j == len(targets) - 1)
                 if j == 1 else defensive_share(kernel, P.shape[0], k, ridge_scale))
        if j > 1 and ridge_part and uniform_part:  # what round j - 1's halves added
            span = SpanGram(Y, kernel, gram.G, gram.sums if center else None, n)
            drawn = set(ridge_part + uniform_part)
            base = [i for i in range(Y.shape[0]) if i not in drawn]
            gain = ridge_against_uniform(span, base, ridge_part, uniform_part, k)
            share = round_two_share(gain, share)
        shares.append(share)
        n_new = target - (Y.shape[0] if redraw else targets[j - 1])
        chosen, more, got = _draw_round(cluster, Y, n_new, share, sums, n_rows - received, rng,
                                        j, redraw)
        split_at = Y.shape[0] + chosen.shape[0]  # Y, then the residual's, the uniform points
        ridge_part = list(range(Y.shape[0], split_at))
        uniform_part = list(range(split_at, split_at + more.shape[0]))
        new = stack_rows([chosen, more])
        Y, received = stack_rows([Y, new]), received + got
    settings = {**(config if len(targets) == 1 else {"center": bool(center)})}
    replies = cluster.broadcast_map(gram_step, Tagged(raw_points=new, model=settings),
                                    round=DISLR, reply_kind="sketch")
    gram.add(cluster, replies, new.shape[0])
    with one_blas_thread():
        coef, eigenvalues, mean, trace, n_iter = _components(Y, kernel, k, n, gram, center,
                                                             eigensolver or {})
    cluster.broadcast_map(store_model_step, coef, mean, round="disLR: components",
                          kind="model", reply_kind="model")
    model = KernelPCAModel(kernel=kernel, landmarks=Y, coef=coef, eigenvalues=eigenvalues,
                           center=mean, trace=trace)
    return model, {"shares": shares, "ridge_gain": gain, "ridge": ridge, "n_iter": n_iter}


def _draw_round(cluster, Y, n_new: int, share: float, sums, unsampled, rng, j: int,
                redraw: bool):
    """Ridge round j's draws: ``n_new`` points, ``share`` of them uniformly (round 'ridge
    sampling j: uniform share'), the rest by the workers' residual ``sums`` (round 'ridge
    sampling j'), as :func:`kernelscale.horizontal.samplers.ridge_sample` draws them.
    Returns (the points by residual, the uniform ones, the rows asked of each worker)."""
    by_residual, by_uniform = defensive_split(n_new, share)
    sums = [None if s is None else np.asarray(s, dtype=float) for s in sums]
    chosen, got = Y[:0], 0
    if by_residual:
        chosen, _, got = draw_by_residuals(cluster, Y, Y.shape[0] + by_residual, sums,
                                           unsampled, rng, f"ridge sampling {j}", redraw)
    more = Y[:0]
    if by_uniform:
        left = unsampled - got
        kept = stack_rows([Y, chosen])
        more, extra = sample_distinct(cluster, kept, kept.shape[0] + by_uniform, left, left,
                                      uniform_sample_step, rng,
                                      f"ridge sampling {j}: uniform share", redraw)
        got = got + extra
    return chosen, more, got


def _components(Y, kernel: Kernel, k: int, n: int, gram: _Gram, center: bool,
                eigensolver: dict):
    """disLR's master step on the Gram received in parts (as
    :func:`kernelscale.horizontal.dislr.dislr`'s): ``(C = F W, eigenvalues, mean, trace,
    n_iter)``."""
    F = whitening(kernel(Y, Y, dtype=np.float64))
    G, trace, mean = gram.G.copy(), gram.trace, None
    if center:
        mean = gram.sums / n
        trace -= n * float(np.sum((F.T @ mean) ** 2))  # the mean's projection on span(Y)
        G -= n * np.outer(mean, mean)
    n_iter = 1
    if F.shape[1] == 0:
        eigenvalues, W = np.zeros(0), np.zeros((0, 0))
    else:
        projected = F.T @ G @ F
        projected = (projected + projected.T) / 2.0  # symmetric to round-off: made exact
        eigenvalues, W, n_iter = top_eigenpairs(projected, k, **eigensolver, return_n_iter=True)
    coef, eigenvalues = cap_at_rank(F @ W, eigenvalues, k, "span(phi(Y))", stacklevel=4)
    return coef, eigenvalues, mean, trace, n_iter
