"""A word budget: the method and |Y| that spend at most B words well, in two steps.

First, before anything is sent, :func:`plan_budget` forecasts
(:func:`kernelscale.horizontal.forecast.forecast_words`) each method's
largest setting within ``max_words`` and picks one by a rule measured on real
data at equal words (``benchmarks/budget.py``, ``benchmarks/sampler.py``):

1. 'exact' when every point can go to the master and the model back within
   the budget (n <= 20,000): its error is the optimum, no sample does better;
2. otherwise disKPCA with the ridge sampler ('uniform_dislr' for a kernel
   without a random feature map) at the largest |Y| the budget buys. At equal
   words it had the lowest or within 2% of the lowest error of every method
   on digits, letter, satellite and spam with RBF, polynomial and arc-cosine
   kernels: its Gram message costs |Y|(|Y|+1)/2 words per worker, but the
   points it picks are worth far more than the extra uniform points that
   batch KPCA could ship for the same words where a few points carry the
   energy, and about as much where the energy is spread;
3. otherwise (a budget below disLR's cost of k landmarks) uniform + batch
   KPCA, the cheapest way to k landmarks;
4. otherwise a :class:`WordBudgetError` saying what k components cost.

Second, when the forecast picks disKPCA with the ridge sampler, the fit draws
that sampler's uniform pilot (its words count inside B) and the master looks
at the pilot's kernel matrix: where its energy is spread, it switches to
uniform + disLR or uniform + batch KPCA, resized to B with the pilot as the
first part of their uniform sample (:mod:`kernelscale.horizontal.pilot`;
:func:`pilot_sizes`). The forecast of the method it runs is kept in
``BudgetPlan.forecast`` and still equals the ledger to the word on dense rows
distinct across workers.

'random_features' is sized and listed (its m within the budget) but chosen
only when asked for (``methods=['random_features']``): with m near k its
components span little more than its own few random features.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from kernelscale.horizontal.forecast import FORECAST_METHODS, Forecast, forecast_words
from kernelscale.metrics.lowrank import EXACT_REFERENCE_MAX_SAMPLES

#: Methods whose setting (|Y|, or m for 'random_features') a budget sizes.
SIZED_METHODS = ("diskpca", "uniform_dislr", "uniform_batch", "random_features")
#: The most random features a plan considers for 'random_features'.
MAX_RANDOM_FEATURES = 20_000


class WordBudgetError(ValueError):
    """The word budget cannot buy the requested number of components."""


@dataclass(frozen=True)
class BudgetPlan:
    """What a word budget buys.

    Attributes
    ----------
    max_words : int
    method : str
        The method chosen.
    forecast : Forecast
        The chosen fit's messages (``forecast.words <= max_words``).
    candidates : dict
        Each method's largest setting within the budget (its Forecast), or
        None when it cannot reach k components within it.
    reason : str
        Why this method, in one sentence.
    sizing : dict
        What the forecasts were made from (``n_rows``, ``n_features``,
        ``n_components`` and the options of :func:`forecast_words`), to resize
        a method after the pilot.
    pilot : dict or None
        After the pilot: its size ``n_pilot``, its flatness ``phi``
        (:func:`kernelscale.horizontal.pilot.flatness`) and the forecast's own
        choice ``forecast_method``. None when the fit drew no pilot.
    """

    max_words: int
    method: str
    forecast: Forecast
    candidates: dict
    reason: str
    sizing: dict = field(default_factory=dict, repr=False)
    pilot: dict | None = None

    @property
    def n_landmarks(self) -> int:
        return self.forecast.n_landmarks

    @property
    def choosing_words(self) -> int:
        """What choosing cost: the plan's words minus those of its method at the same size
        sent in one go (no pilot to read, no Gram in parts to measure with).

        0 where the forecast chose without a pilot. After a pilot, the uniform methods'
        second draw (one count per worker); the measured ridge rounds' extra trace
        words and count rounds (:mod:`kernelscale.horizontal.measured`), less the
        settings their last Gram part does not repeat: a few words per worker, and
        negative where the measured rounds send fewer words than the plain ones.
        """
        if self.pilot is None:
            return 0
        args, sizing = split_sizing(self)
        for option in ("measured", "round_shares", "n_pilot", "ridge_scale"):
            sizing.pop(option, None)
        size = ({"n_random_features": self.forecast.n_random_features}
                if self.method == "random_features" else {"n_landmarks": self.n_landmarks})
        plain = forecast_words(self.method, *args, **sizing, **size)
        return self.forecast.words - plain.words


def largest_within(method: str, max_words: int, n_rows: Sequence[int], n_features: int,
                   n_components: int = 10, **options) -> Forecast | None:
    """The forecast of ``method``'s largest |Y| (or m) whose words fit in ``max_words``.

    None when even the smallest setting (k landmarks; k random features;
    every point for 'exact') costs more. ``options`` go to :func:`forecast_words`.
    """
    def words(size: int) -> Forecast:
        key = "n_random_features" if method == "random_features" else "n_landmarks"
        return forecast_words(method, n_rows, n_features, n_components,
                              **{**options, key: size})

    if method == "exact":
        forecast = words(0)
        return forecast if forecast.words <= max_words else None
    low = n_components
    high = MAX_RANDOM_FEATURES if method == "random_features" else sum(n_rows)
    if method != "random_features":  # the master holds |Y| x |Y| matrices (batch, disLR)
        high = min(high, EXACT_REFERENCE_MAX_SAMPLES)
    if low > high or words(low).words > max_words:
        return None
    # Words grow with the size: a bisection for the largest size within the budget.
    while low < high:
        middle = (low + high + 1) // 2
        if words(middle).words <= max_words:
            low = middle
        else:
            high = middle - 1
    return words(low)


def plan_budget(max_words: int, n_rows: Sequence[int], n_features: int,
                n_components: int = 10, *, kernel="rbf", center: bool = True,
                has_feature_map: bool = True, methods: Sequence[str] | None = None,
                **options) -> BudgetPlan:
    """Choose the method and |Y| that spend at most ``max_words`` fit words well.

    Parameters
    ----------
    max_words : int
        B, the most words the fit may send (both directions, phase 'fit').
    n_rows : sequence of int
        Rows of each worker's partition.
    n_features : int
    n_components : int
    kernel : Kernel, kernel name or dict
    center : bool
    has_feature_map : bool
        Whether the kernel has a random feature map (disKPCA and
        'random_features' need one; otherwise 'uniform_dislr' stands in).
    methods : sequence of str, optional
        Restrict the choice to these methods (default: all). With one method,
        the plan sizes it.
    **options
        ``nnz``, ``max_row_nnz``, ``chunk_size`` and disKPCA's options, as in
        :func:`kernelscale.horizontal.forecast.forecast_words`.

    Returns
    -------
    BudgetPlan

    Raises
    ------
    WordBudgetError
        When no allowed method reaches ``n_components`` within the budget.
    """
    if isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1:
        raise ValueError(f"max_words must be a positive integer, got {max_words!r}.")
    allowed = list(FORECAST_METHODS if methods is None else methods)
    unknown = set(allowed) - set(FORECAST_METHODS)
    if unknown:
        raise ValueError(f"Unknown methods {sorted(unknown)}; choose from "
                         f"{list(FORECAST_METHODS)}.")
    if not has_feature_map:
        allowed = [m for m in allowed if m not in ("diskpca", "random_features")]
    n = sum(int(r) for r in n_rows)
    if n > EXACT_REFERENCE_MAX_SAMPLES and "exact" in allowed:
        allowed.remove("exact")
    if not allowed:
        raise ValueError(f"No method to plan among {list(methods or [])}: 'exact' takes at "
                         f"most {EXACT_REFERENCE_MAX_SAMPLES:,} samples, and 'diskpca' and "
                         "'random_features' need a kernel with a random feature map.")
    common = dict(kernel=kernel, center=center, **options)
    candidates = {m: largest_within(m, max_words, n_rows, n_features, n_components, **common)
                  for m in allowed}
    method, reason = _choose(candidates, n)
    if method is None:
        raise WordBudgetError(_too_small(max_words, n_rows, n_features, n_components,
                                         allowed, common))
    forecast = candidates[method]
    floor = _batch_floor(method, candidates, n_rows, n_features, n_components, common)
    if floor is not None:
        method, forecast, reason = "uniform_batch", floor, (
            f"{method} would take |Y| = {candidates[method].n_landmarks}, fewer than the "
            f"{floor.n_landmarks} points uniform + batch takes just below {method}'s cost of "
            f"{n_components} landmarks: uniform + batch with those {floor.n_landmarks}, so "
            "that a larger budget never buys fewer landmarks")
    return BudgetPlan(max_words=max_words, method=method, forecast=forecast,
                      candidates=candidates, reason=reason,
                      sizing=dict(n_rows=list(n_rows), n_features=n_features,
                                  n_components=n_components, **common))


def _batch_floor(method: str, candidates: dict, n_rows, n_features: int, n_components: int,
                 common: dict) -> Forecast | None:
    """Uniform + batch at the size it reaches just below ``method``'s cost of k landmarks,
    where ``method`` (disLR's) takes fewer landmarks than that; else None.

    Below disLR's cost of k landmarks the plan is uniform + batch at the most points
    within B, m* of them just below that cost (m* > k: batch sends no Gram). Switching to
    disLR at k landmarks there would buy fewer landmarks with more words; the plan keeps
    uniform + batch with m* points (the words above its forecast unspent) until disLR
    reaches m*, so that the plan's |Y| never falls as B grows.
    """
    if method not in ("diskpca", "uniform_dislr") or "uniform_batch" not in candidates:
        return None
    k_words = forecast_words(method, n_rows, n_features, n_components,
                             **{**common, "n_landmarks": n_components}).words
    floor = largest_within("uniform_batch", k_words - 1, n_rows, n_features, n_components,
                           **common)
    if floor is None or candidates[method].n_landmarks >= floor.n_landmarks:
        return None
    return floor


def split_sizing(plan: BudgetPlan) -> tuple[list, dict]:
    """A plan's sizing as :func:`forecast_words`' arguments: the positional
    (n_rows, n_features, n_components) and the keywords (messages, centring, ...)."""
    sizing = dict(plan.sizing)
    return [sizing.pop(key) for key in ("n_rows", "n_features", "n_components")], sizing


def pilot_sizes(plan: BudgetPlan, n_pilot: int) -> dict:
    """The uniform methods' largest forecasts within the budget after a pilot of ``n_pilot``.

    The pilot is the first draw of their uniform sample ('pilot sampling'),
    the rest a second draw ('uniform sampling'): one count per worker more
    than in one draw. Returns ``{method: Forecast or None}`` for
    'uniform_dislr' and 'uniform_batch'.
    """
    args, sizing = split_sizing(plan)
    out = {}
    for method in ("uniform_dislr", "uniform_batch"):
        best = largest_within(method, plan.max_words, *args, **sizing, n_pilot=n_pilot)
        out[method] = best if best is not None and best.n_landmarks >= n_pilot else None
    return out


def _choose(candidates: dict, n: int) -> tuple[str | None, str]:
    if list(candidates) == ["random_features"] and candidates["random_features"]:
        return "random_features", "the most random features within the budget"
    if list(candidates) == ["uniform_batch"] and candidates["uniform_batch"]:
        return "uniform_batch", "the most uniform points within the budget"
    if candidates.get("exact") is not None:
        return "exact", "every point fits in the budget: the exact optimum"
    for method in ("diskpca", "uniform_dislr"):
        if candidates.get(method) is not None:
            return method, (f"the most landmarks disLR can take within the budget "
                            f"(|Y| = {candidates[method].n_landmarks} of {n})")
    if candidates.get("uniform_batch") is not None:
        return "uniform_batch", "the only way to k landmarks within the budget"
    return None, ""


def _too_small(max_words, n_rows, n_features, n_components, allowed, common) -> str:
    """The error message: what the cheapest allowed method needs for k components."""
    costs = []
    choosable = [m for m in allowed if m != "random_features"] or allowed
    for method in choosable:
        size = {} if method == "exact" else (
            {"n_random_features": n_components} if method == "random_features"
            else {"n_landmarks": n_components})
        words = forecast_words(method, n_rows, n_features, n_components, **common,
                               **size).words
        costs.append((words, method))
    words, method = min(costs)
    return (f"max_words={max_words:,} is too small for n_components={n_components}: the "
            f"cheapest method, {method!r}, needs {words:,} words for {n_components} "
            f"components on this data ({len(n_rows)} workers, {sum(n_rows):,} rows, "
            f"{n_features} features). Raise max_words or lower n_components.")
