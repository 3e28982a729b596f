"""What :class:`DistributedKernelPCA` chooses, and only where the user left it unset.

The rule (issue 33, "explicit means explicit"): a parameter the user set is
honoured; the planner chooses only what is left at ``None``.

* ``method=None, n_landmarks=None`` (no ``max_words``): the default fit's
  words (disKPCA, ridge sampler, :data:`DEFAULT_N_LANDMARKS` landmarks) are a
  budget within which the pilot rule of :mod:`kernelscale.horizontal.pilot` may
  choose uniform + disLR or uniform + batch KPCA and their |Y|.
* ``method=None`` and an explicit ``n_landmarks`` (no ``max_words``): disKPCA
  with exactly ``n_landmarks`` landmarks, and no pilot. The pilot compares
  methods at equal words, which would change |Y|; at the |Y| the user set,
  the ridge sampler's choice of landmarks is what the default method adds.
* ``max_words=B``: with ``n_landmarks`` left unset, the method (or the given
  ``method``) and the largest |Y| within B (:func:`plan_budget`); with an
  explicit ``n_landmarks``, exactly that |Y| with the given ``method``, or
  with ``method=None`` the first of disKPCA, uniform + disLR and uniform +
  batch KPCA whose forecast fits in B, and a ``WordBudgetError`` when none does.

Every choice is in ``method_`` and ``budget_plan_.reason``.
"""

from __future__ import annotations

from dataclasses import replace
from numbers import Integral

import scipy.sparse as sp

from kernelscale.horizontal.budget import BudgetPlan, WordBudgetError, plan_budget
from kernelscale.horizontal.forecast import forecast_words, max_row_nnz_of
from kernelscale.horizontal.sklearn_api import DEFAULT_N_LANDMARKS
from kernelscale.kernels import KERNELS, kernel_name
from kernelscale.progress import get_logger
from kernelscale.runtime.inputs import is_partition_list

LOGGER = get_logger("horizontal")

#: The methods an explicit ``n_landmarks`` can size, in the order a budget tries them.
SIZED_BY_LANDMARKS = ("diskpca", "uniform_dislr", "uniform_batch")


def landmark_count(estimator) -> int:
    """|Y| of a fit without a budget: ``n_landmarks``, or the default's when unset."""
    return DEFAULT_N_LANDMARKS if estimator.n_landmarks is None else int(estimator.n_landmarks)


def max_row_nnz(X) -> int:
    """The most nonzeros of a row of sparse data the estimator holds (for a word budget)."""
    parts = list(X) if is_partition_list(X) else [X]
    if not all(sp.issparse(p) for p in parts):
        raise ValueError(
            "max_words with sparse partitions that stay on the workers (loaders, a dask "
            "array) cannot bound the words of a sparse row before sending anything; pass "
            "the sparse matrices themselves, or fit without max_words.")
    return max(max_row_nnz_of(p) for p in parts)


def choose_plan(estimator, X, info, cluster) -> BudgetPlan | None:
    """The plan of a fit (what it chooses and why), or None when nothing is chosen."""
    est = estimator
    explicit_y = est.n_landmarks is not None and est.method in (None, *SIZED_BY_LANDMARKS)
    if est.max_words is not None:
        if explicit_y:
            return explicit_landmarks_plan(est, X, info, cluster)
        return budget_plan(est, X, info, cluster)
    if est.method is not None or est.landmarks is not None or not pilot_applies(est, info,
                                                                                 cluster):
        return None
    if est.n_landmarks is None:
        return default_plan(est, info)
    plan = _sized_plan(est, "diskpca", info, _forecast_options(est, X, info))
    return replace(plan, reason=(
        f"n_landmarks={est.n_landmarks} was set: disKPCA (ridge sampler) with exactly "
        f"{est.n_landmarks} landmarks; the pilot rule chooses the method and |Y| at equal "
        "words, only when n_landmarks is left unset"))


def draws_pilot(estimator, plan: BudgetPlan | None) -> bool:
    """Whether the fit draws the ridge sampler's pilot and lets it choose the method.

    Only when both ``method`` and ``n_landmarks`` were left unset and the plan
    (the default's words, or a budget's) chose disKPCA with the ridge sampler.
    """
    return (plan is not None and estimator.method is None and estimator.n_landmarks is None
            and plan.method == "diskpca" and estimator.sampler == "ridge")


def pilot_applies(estimator, info, cluster) -> bool:
    """Whether a fit with ``method=None`` and no budget stands where the pilot rule applies.

    At the words of the default (disKPCA, ridge sampler, ``n_landmarks``), on
    dense data with at least ``n_landmarks`` rows and a kernel with a random
    feature map; the fit is then the default's, or the method the pilot shows
    at the same words.
    """
    est = estimator
    return (est.sampler == "ridge" and kernel_name(est.kernel) in KERNELS
            and not info.is_sparse and isinstance(est.n_components, Integral)
            and info.n_samples >= landmark_count(est) >= est.n_components
            and min(info.n_rows) >= 1 and getattr(cluster, "secure_rounds", None) is None)


def measures(estimator) -> bool:
    """Whether a budgeted fit's ridge rounds measure as they go
    (:mod:`kernelscale.horizontal.measured`): ``method`` and ``n_leverage`` unset,
    the ridge sampler, ``messages='gram'`` and an RBF or Laplacian kernel."""
    est = estimator
    return (est.method is None and est.n_leverage is None and est.sampler == "ridge"
            and est.messages == "gram"
            and bool(getattr(est.kernel_, "is_shift_invariant", False)))


def _options(est) -> dict:
    return dict(kernel=est.kernel_, center=bool(est.center), messages=est.messages,
                n_leverage=est.n_leverage, chunk_size=est.chunk_size,
                preimage=bool(est.fit_inverse_transform))


def default_plan(estimator, info) -> BudgetPlan:
    """The default's words as a budget: disKPCA (ridge) at ``n_landmarks`` within it."""
    est = estimator
    words = forecast_words("diskpca", info.n_rows, info.n_features, est.n_components,
                           landmark_count(est), **_options(est)).words
    return plan_budget(words, info.n_rows, info.n_features, est.n_components,
                       methods=["diskpca", "uniform_dislr", "uniform_batch"], **_options(est))


def _forecast_options(est, X, info) -> dict:
    options = _options(est)
    if info.is_sparse:
        options["max_row_nnz"] = max_row_nnz(X)
    if est.sampler == "paper":
        options.update(sampler="paper", embedding_dim=est.embedding_dim,
                       row_sketch_dim=est.row_sketch_dim, embedding_dtype=est.embedding_dtype)
    return options


def _check_no_secure_rounds(cluster) -> None:
    if getattr(cluster, "secure_rounds", None) is not None:
        raise ValueError(
            "max_words forecasts the protocol's messages, not SecAgg+'s own (keys, "
            "shares, masked uploads); fit with secure_rounds=None, or without max_words.")


def budget_plan(estimator, X, info, cluster) -> BudgetPlan:
    """The budget's method and sizes, from the partition sizes (no word sent)."""
    est = estimator
    _check_no_secure_rounds(cluster)
    options = _forecast_options(est, X, info)
    options.pop("kernel")
    options.pop("center")
    plan = plan_budget(
        int(est.max_words), info.n_rows, info.n_features, est.n_components,
        kernel=est.kernel_, center=bool(est.center),
        has_feature_map=kernel_name(est.kernel) in KERNELS,
        methods=None if est.method is None else [est.method],
        measured=measures(est), **options)
    LOGGER.info("max_words=%s: %s with %s (forecast %s words; %s)%s", f"{est.max_words:,}",
                plan.method, plan.forecast.setting, f"{plan.forecast.words:,}",
                plan.reason, "; its uniform pilot may change the method"
                if draws_pilot(est, plan) else "")
    return plan


def _sized_plan(est, method: str, info, options: dict, max_words: int | None = None):
    """A plan of ``method`` at exactly ``n_landmarks`` (its forecast; no choice made)."""
    forecast = forecast_words(method, info.n_rows, info.n_features, est.n_components,
                              landmark_count(est), **options)
    return BudgetPlan(max_words=forecast.words if max_words is None else int(max_words),
                      method=method, forecast=forecast, candidates={method: forecast},
                      reason="", sizing={"n_rows": list(info.n_rows),
                                         "n_features": info.n_features,
                                         "n_components": est.n_components, **options})


def explicit_landmarks_plan(estimator, X, info, cluster) -> BudgetPlan:
    """``max_words`` with an explicit ``n_landmarks``: exactly that |Y| within B, or an error."""
    est = estimator
    _check_no_secure_rounds(cluster)
    options = _forecast_options(est, X, info)
    if est.method is not None:
        methods = [est.method]
    else:
        has_map = kernel_name(est.kernel) in KERNELS
        methods = [m for m in SIZED_BY_LANDMARKS if has_map or m != "diskpca"]
    plans = [_sized_plan(est, m, info, options, est.max_words) for m in methods]
    for plan in plans:
        if plan.forecast.words <= est.max_words:
            how = ("method and n_landmarks were set" if est.method is not None else
                   "n_landmarks was set: the first of "
                   f"{', '.join(methods)} whose forecast fits in max_words")
            reason = (f"{how}: {plan.method} with exactly |Y| = {est.n_landmarks}, forecast "
                      f"{plan.forecast.words:,} of max_words={est.max_words:,} words")
            LOGGER.info("max_words=%s: %s", f"{est.max_words:,}", reason)
            return replace(plan, reason=reason)
    costs = ", ".join(f"{p.method} {p.forecast.words:,}" for p in plans)
    raise WordBudgetError(
        f"n_landmarks={est.n_landmarks} does not fit in max_words={est.max_words:,}: at "
        f"|Y| = {est.n_landmarks} the fit sends {costs} words. Raise max_words, lower "
        "n_landmarks, or leave n_landmarks unset to let the budget choose |Y|.")


def check_budget_kept(estimator) -> None:
    """A fit that sent more than ``max_words``: never silent."""
    est = estimator
    words = est.communication_.total_words("fit")
    if words > est.max_words:  # a forecast that missed a message
        raise RuntimeError(
            f"The fit sent {words:,} words, above max_words={est.max_words:,} (forecast "
            f"{est.budget_plan_.forecast.words:,}); the word forecast missed a message. "
            "Please report this with the ledger (communication_.summary()).")
