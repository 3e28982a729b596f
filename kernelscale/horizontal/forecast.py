"""Word forecasts: what a horizontal method's fit will send, before anything is sent.

:func:`forecast_words` lists every message of a fit (round, direction, kind,
words over all workers), and so its rounds (:attr:`Forecast.n_rounds`), from
the partition sizes n_i, the feature count d, the
number of nonzeros (sparse data), k, |Y| and the method's options, by the
ledger's own counting rules (:func:`kernelscale.runtime.ledger.count_words`
on the same configuration dictionaries the protocols send). It mirrors the
master functions in :mod:`kernelscale.horizontal.diskpca`,
:mod:`kernelscale.horizontal.baselines` and :mod:`kernelscale.horizontal.dislr`
round by round, and the tests hold it to the ledger word for word.

The forecast is exact for dense data whose rows are distinct across workers.
Three things only the data decide, each documented where it happens:

* copies of a drawn point on other workers make a sampling stage draw again
  (a '(top-up j)' round) and a sampler whose weights run out fills uniformly
  (an ': uniform fill' round); a fit with ``redraw=False`` (what
  ``DistributedKernelPCA(max_words=B)`` runs) never does either, so it sends at
  most the forecast, with a few points fewer in Y;
* a sparse row costs ``2 nnz`` words (values and column indices): the
  forecast charges each drawn row ``2 nnz / n`` words (its expectation under
  uniform sampling; ``exact`` is then False), or ``2 max_row_nnz`` when given
  (an upper bound, what a word budget needs);
* the paper's whitening factor is packed at the embedding's numerical rank r,
  ``r t - r (r - 1) / 2`` words; the forecast takes full rank, r = t.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from kernelscale.horizontal.diskpca import MESSAGES, SAMPLERS, default_n_leverage
from kernelscale.horizontal.measured import DISLR, first_share, residual_round_name
from kernelscale.horizontal.preimage import PREIMAGE_ROUND
from kernelscale.horizontal.samplers import ridge_schedule
from kernelscale.horizontal.sampling import defensive_share, defensive_split, needs_ridge_floor
from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel, make_kernel
from kernelscale.runtime.ledger import DOWN, UP, count_words

#: The methods a forecast covers (every method of ``DistributedKernelPCA``).
#: The fewest rows :class:`~kernelscale.horizontal.DistributedKernelPCA` fits on.
MIN_FIT_ROWS = 2

FORECAST_METHODS = ("diskpca", "uniform_dislr", "uniform_batch", "exact", "random_features")


@dataclass(frozen=True)
class RoundWords:
    """Words of one round in one direction and of one kind, over all workers."""

    round: str
    direction: str
    kind: str
    words: int


@dataclass(frozen=True)
class Forecast:
    """The messages a fit will send (phase 'fit'), as the ledger will count them.

    Attributes
    ----------
    method : str
    n_landmarks : int
        |Y| (0 for 'random_features'; n for 'exact').
    n_random_features : int
        m of 'random_features' (0 for the other methods).
    messages : tuple of RoundWords
    exact : bool
        True when the forecast is the ledger's count to the word (dense rows,
        distinct across workers); False when sparse rows are charged their
        expected or maximal size.
    """

    method: str
    n_landmarks: int
    n_random_features: int = 0
    messages: tuple[RoundWords, ...] = field(default_factory=tuple)
    exact: bool = True

    @property
    def setting(self) -> str:
        """What the budget sized: ``'|Y| = 129'`` (``'m = 187'`` for 'random_features')."""
        if self.method == "random_features":
            return f"m = {self.n_random_features}"
        return f"|Y| = {self.n_landmarks}"

    @property
    def words(self) -> int:
        """Total fit words, both directions (``ledger.total_words('fit')``)."""
        return sum(m.words for m in self.messages)

    @property
    def upload_words(self) -> int:
        """Worker -> master words (``ledger.upload_words('fit')``)."""
        return sum(m.words for m in self.messages if m.direction == UP)

    @property
    def n_rounds(self) -> int:
        """Round trips of the fit (``ledger.n_rounds('fit')``): a round costs the network's
        latency whatever its words."""
        return sum(self.rounds_by_name().values())

    def rounds_by_name(self) -> dict[str, int]:
        """``{round: 1}`` in the order the rounds run, as :meth:`Ledger.rounds_by_name`
        (every round a forecast lists has a name of its own)."""
        return dict.fromkeys((m.round for m in self.messages), 1)

    def words_by_round(self) -> dict[str, dict[str, int]]:
        """``{round: {direction: words}}``, as :meth:`Ledger.words_by_round`."""
        table: dict[str, dict[str, int]] = {}
        for m in self.messages:
            row = table.setdefault(m.round, {DOWN: 0, UP: 0})
            row[m.direction] += m.words
        return table

    def words_by_kind(self) -> dict[str, int]:
        table: dict[str, int] = {}
        for m in self.messages:
            table[m.kind] = table.get(m.kind, 0) + m.words
        return table


class _Rounds:
    """Collects a forecast's messages; ``per_worker`` words are multiplied by s."""

    def __init__(self, n_workers: int):
        self.s = n_workers
        self.messages: list[RoundWords] = []

    def add(self, round: str, direction: str, kind: str, words: float, per_worker=True):
        total = words * self.s if per_worker else words
        if total:
            self.messages.append(RoundWords(round, direction, kind, int(math.ceil(total))))


def _as_kernel(kernel, n_features: int) -> Kernel:
    """A Kernel from a Kernel, its ``to_dict()`` or a name (with its default parameters)."""
    if isinstance(kernel, Kernel):
        return kernel
    if isinstance(kernel, dict):
        return make_kernel(**kernel)
    return make_kernel(kernel, n_features=n_features)


def forecast_words(
    method: str,
    n_rows: Sequence[int],
    n_features: int,
    n_components: int = 10,
    n_landmarks: int = 400,
    *,
    kernel: Kernel | str | dict = "rbf",
    center: bool = False,
    nnz: int | None = None,
    max_row_nnz: int | None = None,
    sampler: str = "ridge",
    messages: str = "gram",
    n_leverage: int | None = None,
    embedding_dim: int = 50,
    row_sketch_dim: int = 250,
    n_random_features: int = 2000,
    embedding_dtype: str = "float64",
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    n_pilot: int | None = None,
    ridge_scale: float = 1.0,
    preimage: bool = False,
    measured: bool = False,
    round_shares: Sequence[float] | None = None,
) -> Forecast:
    """The words a horizontal method's fit will send, round by round, before it runs.

    Parameters
    ----------
    method : {'diskpca', 'uniform_dislr', 'uniform_batch', 'exact', 'random_features'}
    n_rows : sequence of int
        Rows of each worker's partition (n_i); s = ``len(n_rows)``.
    n_features : int
        d.
    n_components : int
        k.
    n_landmarks : int
        |Y| (capped at n, as the fit does; unused by 'exact' and 'random_features').
    kernel : Kernel, kernel name or ``Kernel.to_dict()``
        Its parameters travel with the configuration (4 to 5 words).
    center : bool
    nnz : int, optional
        Nonzeros of sparse data (None: dense). Each drawn row is then charged
        ``2 nnz / n`` words, its expected size; the forecast is not exact.
    max_row_nnz : int, optional
        Sparse data: the most nonzeros of any row; each drawn row is charged
        ``2 max_row_nnz`` words, an upper bound (takes precedence over ``nnz``).
    sampler, messages, n_leverage, embedding_dim, row_sketch_dim, n_random_features, \
embedding_dtype, chunk_size
        As in :func:`kernelscale.horizontal.diskpca` (``n_random_features`` is
        also 'random_features'' m).
    n_pilot : int, optional
        'uniform_dislr' and 'uniform_batch' after a budget's pilot
        (:mod:`kernelscale.horizontal.pilot`): the uniform sample is drawn in
        two rounds, 'pilot sampling' (``n_pilot`` points, with the seeds) and
        'uniform sampling' (the rest), one count per worker more.
    ridge_scale : float, default=1.0
        'diskpca' with the ridge sampler: 0 draws no uniform share
        (:func:`kernelscale.horizontal.sampling.defensive_share`), one count
        per worker and round less.
    preimage : bool, default=False
        The fit learns the pre-image map on every worker's rows
        (``fit_inverse_transform=True``; :func:`kernelscale.horizontal.preimage.preimage_round`):
        one round more for the landmark methods, the kernel's parameters down
        and ``|Y|(|Y|+1)/2 + |Y| d`` words up per worker ('exact' learns it at
        the master from the data it already holds; 'random_features' has none).
    measured : bool, default=False
        'diskpca' with the ridge sampler as a word budget runs it after its
        pilot (:mod:`kernelscale.horizontal.measured`): disLR's Gram sent in
        parts with each round's landmarks (one trace word per worker and part
        more), from a pilot of ``n_pilot`` points (default the ridge sampler's,
        :func:`~kernelscale.horizontal.samplers.ridge_schedule`). Needs
        ``messages='gram'``.
    round_shares : sequence of float, optional
        With ``measured``: each ridge round's uniform share as drawn (default:
        round 1's :func:`~kernelscale.horizontal.measured.first_share`, then the
        sampler's own, :func:`~kernelscale.horizontal.sampling.defensive_share`,
        before any measurement). Words depend on them only through the count
        of a second draw in a round that draws both ways (s words).

    Returns
    -------
    Forecast
        ``.words`` equals ``ledger.total_words('fit')`` of the fit for dense
        data with rows distinct across workers (see the module docstring for
        what only the data decide).
    """
    if method not in FORECAST_METHODS:
        raise ValueError(f"Unknown method {method!r}; choose one of {list(FORECAST_METHODS)}.")
    if messages not in MESSAGES:
        raise ValueError(f"messages must be one of {MESSAGES}, got {messages!r}.")
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}.")
    n_rows = [int(r) for r in n_rows]
    if not n_rows or min(n_rows) < 1:
        raise ValueError(f"n_rows must list every worker's rows (each >= 1), got {n_rows}.")
    kernel = _as_kernel(kernel, int(n_features))
    n = sum(n_rows)
    point = _point_words(n, n_features, nnz, max_row_nnz)
    rounds = _Rounds(len(n_rows))
    n_landmarks = min(int(n_landmarks), n)
    options = dict(kernel=kernel, center=bool(center), k=int(n_components), point=point,
                   n_rows=n_rows, chunk_size=int(chunk_size))
    m = 0
    if method == "diskpca" and sampler == "ridge" and measured:
        if messages != "gram":
            raise ValueError("measured=True sends disLR's Gram in parts: messages='gram'.")
        _measured_diskpca(rounds, n_landmarks, n_pilot, round_shares, ridge_scale=ridge_scale,
                          **options)
    elif method == "diskpca" and sampler == "ridge":
        _ridge_diskpca(rounds, n_landmarks, n_leverage, messages, ridge_scale=ridge_scale,
                       **options)
    elif method == "diskpca":
        _paper_diskpca(rounds, n_landmarks, n_leverage, messages, embedding_dim,
                       row_sketch_dim, n_random_features, embedding_dtype, **options)
    elif method == "uniform_dislr":
        _piloted_uniform_sample(rounds, n_landmarks, n_pilot, point)
        _dislr(rounds, n_landmarks, n_landmarks, messages, **options)
    elif method == "uniform_batch":
        _piloted_uniform_sample(rounds, n_landmarks, n_pilot, point)
        # each point's copies on the worker that sent it (one word per point)
        rounds.add("batch KPCA: copies", UP, "scalars", n_landmarks, per_worker=False)
        _landmark_model(rounds, "batch KPCA: landmarks and components", n_landmarks, **options)
    elif method == "exact":
        n_landmarks = n
        rounds.add("all data to master", UP, "raw_points", n * point, per_worker=False)
        _landmark_model(rounds, "exact KPCA: landmarks and components", n, **options)
    else:
        n_landmarks, m = 0, _random_features(rounds, n_features, n_random_features, **options)
    if preimage and method in ("diskpca", "uniform_dislr", "uniform_batch"):
        _preimage(rounds, n_landmarks, int(n_features), kernel=kernel,
                  chunk_size=int(chunk_size))
    return Forecast(method=method, n_landmarks=n_landmarks, n_random_features=m,
                    messages=tuple(rounds.messages), exact=nnz is None and max_row_nnz is None)


def max_row_nnz_of(X) -> int:
    """The most nonzeros of a row of a sparse matrix (``max_row_nnz`` of :func:`forecast_words`)."""
    return int(np.diff(sp.csr_matrix(X).indptr).max(initial=0))


def _point_words(n: int, d: int, nnz, max_row_nnz) -> float:
    """Words of one raw row: d dense; 2 nnz per sparse row (bound, else expectation)."""
    if max_row_nnz is not None:
        return 2.0 * int(max_row_nnz)
    if nnz is not None:
        return 2.0 * int(nnz) / n
    return float(d)


def _uniform_sample(rounds: _Rounds, name: str, count: int, point: float) -> None:
    """:func:`kernelscale.horizontal.draws.uniform_sample`: a seed and a count to every
    worker, the points up, in one round."""
    rounds.add(name, DOWN, "seed", 1)
    _draw(rounds, name, count, point)


def _piloted_uniform_sample(rounds: _Rounds, count: int, n_pilot, point: float) -> None:
    """A uniform sample, in one draw or after a budget's pilot of ``n_pilot`` points."""
    if n_pilot is None:
        _uniform_sample(rounds, "uniform sampling", count, point)
        return
    n_pilot = min(int(n_pilot), count)
    _uniform_sample(rounds, "pilot sampling", n_pilot, point)
    if count > n_pilot:
        _draw(rounds, "uniform sampling", count - n_pilot, point)


def _draw(rounds: _Rounds, name: str, count: int, point: float) -> None:
    """One :func:`~kernelscale.horizontal.draws.sample_distinct` round: a count to every
    worker, ``count`` rows up."""
    rounds.add(name, DOWN, "scalars", 1)
    rounds.add(name, UP, "raw_points", count * point, per_worker=False)


def _ridge_sampling(rounds, targets, *, kernel, k, point, chunk_size,
                    ridge_scale: float = 1.0) -> int:
    """The rounds of :func:`kernelscale.horizontal.samplers.ridge_sample` up to ``targets[-1]``
    points; returns how many points its last round drew (not yet sent down)."""
    _uniform_sample(rounds, "pilot sampling", targets[0], point)
    config = {"kernel": kernel.to_dict(), "chunk_size": int(chunk_size)}
    floor = len(targets) > 1 and needs_ridge_floor(kernel, targets[0], k)
    if floor:  # samplers.ridge_outside_pilot: P and the settings down, a residual sum up
        name = "ridge sampling: pilot residuals"
        rounds.add(name, DOWN, "raw_points", targets[0] * point)
        rounds.add(name, DOWN, "model", count_words({**config, "ridge": 0.0}))
        rounds.add(name, UP, "scalars", 2)
    for j in range(1, len(targets)):
        name = f"ridge sampling {j}"
        settings = {"ridge": 0.0}
        if j == 1 and not floor:
            settings = {**config, **settings}
        sent = targets[j - 1] - (targets[j - 2] if j >= 2 else 0)
        if j == 1 and floor:
            sent = 0  # P went down with the pilot residuals
        rounds.add(f"{name}: residuals", DOWN, "raw_points", sent * point)
        rounds.add(f"{name}: residuals", DOWN, "model", count_words(settings))
        rounds.add(f"{name}: residuals", UP, "scalars", 2)
        by_residual, by_uniform = defensive_split(targets[j] - targets[j - 1],
                                                  defensive_share(kernel, targets[0], k,
                                                                  ridge_scale))
        _draw(rounds, name, by_residual, point)
        if by_uniform:
            _draw(rounds, f"{name}: uniform share", by_uniform, point)
    return targets[-1] - (targets[-2] if len(targets) > 1 else 0)


def _ridge_diskpca(rounds, n_landmarks, n_leverage, messages, *, kernel, k, point, chunk_size,
                   ridge_scale: float = 1.0, **options) -> None:
    """:func:`kernelscale.horizontal.samplers.ridge_sample`, then disLR on the last points."""
    new = _ridge_sampling(rounds, ridge_schedule(kernel, k, n_landmarks, n_leverage), kernel=kernel,
                          k=k, point=point, chunk_size=chunk_size, ridge_scale=ridge_scale)
    _dislr(rounds, n_landmarks, new, messages, kernel=kernel, k=k, point=point,
           chunk_size=chunk_size, **options)


def _measured_diskpca(rounds, n_landmarks, n_pilot, round_shares, *, kernel, center, k, point,
                      chunk_size, ridge_scale: float = 1.0, **_) -> None:
    """:func:`kernelscale.horizontal.measured.measured_ridge` after its pilot: each round's
    landmarks down with the Gram's new columns up, the draws, disLR's last part."""
    targets = ridge_schedule(kernel, k, n_landmarks, n_pilot)
    config = {"kernel": kernel.to_dict(), "chunk_size": int(chunk_size), "center": bool(center)}
    _uniform_sample(rounds, "pilot sampling", targets[0], point)
    known, sent = 0, targets[0]
    for j in range(1, len(targets)):
        name = residual_round_name(j)
        rounds.add(name, DOWN, "raw_points", sent * point)
        rounds.add(name, DOWN, "model", count_words({**(config if j == 1 else {}),
                                                     "ridge": 0.0}))
        _gram_part(rounds, name, known, sent, center, extra=2)  # + the residual sums
        known += sent
        last = j == len(targets) - 1
        share = (round_shares[j - 1] if round_shares is not None else
                 first_share(kernel, targets[0], k, ridge_scale, last) if j == 1 else
                 defensive_share(kernel, targets[0], k, ridge_scale))
        by_residual, by_uniform = defensive_split(targets[j] - targets[j - 1], share)
        if by_residual:
            _draw(rounds, f"ridge sampling {j}", by_residual, point)
        if by_uniform:
            _draw(rounds, f"ridge sampling {j}: uniform share", by_uniform, point)
        sent = targets[j] - targets[j - 1]
    rounds.add(DISLR, DOWN, "raw_points", sent * point)
    rounds.add(DISLR, DOWN, "model", count_words(config if len(targets) == 1 else
                                                 {"center": bool(center)}))
    _gram_part(rounds, DISLR, known, sent, center)
    rounds.add("disLR: components", DOWN, "model", n_landmarks * k + (n_landmarks if center
                                                                       else 0))


def _gram_part(rounds, name, known: int, new: int, center: bool, extra: int = 0) -> None:
    """:func:`kernelscale.horizontal.measured.gram_columns` from every worker: the Gram's
    new columns, ``extra`` scalars, the new row sums (centred) and the trace."""
    rounds.add(name, UP, "sketch", known * new + new * (new + 1) // 2)
    rounds.add(name, UP, "scalars", extra + (new if center else 0) + 1)


def _paper_diskpca(rounds, n_landmarks, n_leverage, messages, t, p, m, embedding_dtype, *,
                   kernel, k, point, n_rows, chunk_size, **options) -> None:
    """Algorithm 2 of 001: embedding, disLS, leverage then adaptive sampling; disLR."""
    if n_leverage is None:
        n_leverage = default_n_leverage(k, n_landmarks)
    config = {"kernel": kernel.to_dict(), "n_random_features": m, "embedding_dim": t,
              "row_sketch_dim": p, "messages": messages, "chunk_size": chunk_size}
    if embedding_dtype != "float64":
        config["embedding_dtype"] = embedding_dtype
    if messages == "gram":
        name, up = "leverage scores: E_i^T E_i", t * (t + 1) // 2 * rounds.s
    else:
        name = "leverage scores: T_i^T E_i (E_i where n_i <= p)"
        up = sum(min(n_i, p) * t for n_i in n_rows)
    rounds.add(name, DOWN, "seed", 3)  # the feature map's, the sketch's and the worker's own
    rounds.add(name, DOWN, "model", count_words(config))
    rounds.add(name, UP, "sketch", up, per_worker=False)
    rounds.add("leverage scores: whitening", DOWN, "model", t * (t + 1) // 2)  # full rank
    rounds.add("leverage scores: whitening", UP, "scalars", 2)
    _draw(rounds, "leverage sampling", n_leverage, point)
    rounds.add("adaptive sampling: residuals", DOWN, "raw_points", n_leverage * point)
    rounds.add("adaptive sampling: residuals", UP, "scalars", 2)
    _draw(rounds, "adaptive sampling", n_landmarks - n_leverage, point)
    _dislr(rounds, n_landmarks, n_landmarks - n_leverage, messages, kernel=kernel, k=k,
           point=point, n_rows=n_rows, chunk_size=chunk_size, **options)


def _dislr(rounds, n_y, new, messages, *, kernel, center, k, point, n_rows,
           chunk_size) -> None:
    """:func:`kernelscale.horizontal.dislr.dislr`: Y's new points and the config down,
    the Gram (or sketch) of ``k(Y, A_i)`` up, the coefficients down."""
    config = {"kernel": kernel.to_dict(), "chunk_size": chunk_size, "messages": messages,
              "center": center, "sketch_width": n_y}
    if messages == "gram":
        name = "disLR: k(Y,A_i) k(A_i,Y)"
        sketch = n_y * (n_y + 1) // 2 * rounds.s
        # centred: the row sums of k(Y, A_i) and the trace; uncentred: the trace
        scalars = (n_y + 1 if center else 1) * rounds.s
    else:
        name = "disLR: k(Y,A_i) T_i (k(Y,A_i) where n_i <= w)"
        sketch = sum(n_y * min(n_i, n_y) for n_i in n_rows)
        # centred: row sums, the sketch's column sums (sketched workers only), the trace
        scalars = sum((n_y + (n_y if n_i > n_y else 0) + 1) if center else 1
                      for n_i in n_rows)
    rounds.add(name, DOWN, "raw_points", new * point)
    rounds.add(name, DOWN, "model", count_words(config))
    rounds.add(name, DOWN, "seed", 1)
    rounds.add(name, UP, "sketch", sketch, per_worker=False)
    rounds.add(name, UP, "scalars", scalars, per_worker=False)
    rounds.add("disLR: components", DOWN, "model", n_y * k + (n_y if center else 0))


def _landmark_model(rounds, name, n_y, *, kernel, center, k, point, **_) -> None:
    """:func:`kernelscale.horizontal.baselines.broadcast_landmark_model`: Y, C, m, kernel."""
    rounds.add(name, DOWN, "raw_points", n_y * point)
    rounds.add(name, DOWN, "model",
               n_y * k + (n_y if center else 0) + count_words(kernel.to_dict()))


def _preimage(rounds, n_y: int, n_features: int, *, kernel, chunk_size) -> None:
    """:func:`kernelscale.horizontal.preimage.preimage_round`: the kernel down, the two
    sums up (packed ``sum c c^T`` and the |Y| x d ``sum c a^T``, dense even for CSR rows)."""
    config = {"kernel": kernel.to_dict(), "chunk_size": chunk_size}
    rounds.add(PREIMAGE_ROUND, DOWN, "model", count_words(config))
    rounds.add(PREIMAGE_ROUND, UP, "sketch", n_y * (n_y + 1) // 2 + n_y * n_features)


def _random_features(rounds, n_features, n_random_features, *, kernel, center, k,
                     chunk_size, **_) -> int:
    """:func:`kernelscale.horizontal.baselines.random_features_pca`; returns m."""
    from kernelscale.features import feature_map_size

    m = feature_map_size(kernel, n_features, int(n_random_features))
    config = {"kernel": kernel.to_dict(), "n_random_features": int(n_random_features),
              "chunk_size": chunk_size, "center": center}
    name = "random features: Z_i^T Z_i"
    rounds.add(name, DOWN, "seed", 1)
    rounds.add(name, DOWN, "model", count_words(config))
    rounds.add(name, UP, "sketch", m * (m + 1) // 2)
    rounds.add(name, UP, "scalars", m if center else 0)
    rounds.add("random features: components", DOWN, "model", m * k + (m if center else 0))
    return m
