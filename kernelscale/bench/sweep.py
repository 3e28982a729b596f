"""Word-budget sweeps: each method sized to the same grid of fit-word budgets.

An experiment with ``word_budgets`` runs every budgeted method at the largest
|Y| whose fit, as :func:`kernelscale.horizontal.forecast.forecast_words`
counts it, fits in each budget B (:func:`kernelscale.horizontal.budget.largest_within`),
so that all methods cover the same range of words whatever their cost per
landmark. The fits run with ``redraw=False`` and so send at most the forecast.
"""

from __future__ import annotations

import inspect

import scipy.sparse as sp

from kernelscale.horizontal.budget import largest_within
from kernelscale.horizontal.forecast import forecast_words, max_row_nnz_of

#: Method options that :func:`forecast_words` understands.
FORECAST_OPTIONS = frozenset(inspect.signature(forecast_words).parameters) - {
    "method", "n_rows", "n_features", "n_components", "n_landmarks", "kernel", "center"}


def word_grid(low: float = 4.0, high: float = 6.5, per_decade: int = 2) -> tuple[int, ...]:
    """Word budgets ``10^low .. 10^high``, ``per_decade`` per factor of 10 (rounded).

    Parameters
    ----------
    low, high : float
        Base-10 exponents of the smallest and largest budget.
    per_decade : int
        Budgets per decade.

    Returns
    -------
    tuple of int
    """
    steps = int(round((high - low) * per_decade))
    return tuple(int(round(10 ** (low + i / per_decade))) for i in range(steps + 1))


def data_options(X) -> dict:
    """Forecast options of the data: ``max_row_nnz`` of a sparse matrix (a word upper bound)."""
    return {"max_row_nnz": max_row_nnz_of(X)} if sp.issparse(X) else {}


def size_method(function: str, options: dict, word_budgets, n_rows, n_features: int,
                n_components: int, *, kernel, center: bool, **data) -> list[tuple[int, int, int]]:
    """``[(B, |Y|, forecast words), ...]``: the largest |Y| of ``function`` within each B.

    Budgets that cannot buy ``n_components`` landmarks are left out, and so are
    budgets that buy the same |Y| as a smaller one (|Y| capped at n).

    Parameters
    ----------
    function : str
        A method of :data:`kernelscale.horizontal.forecast.FORECAST_METHODS`.
    options : dict
        The method's options (those of :data:`FORECAST_OPTIONS` are used).
    word_budgets : sequence of int
    n_rows : sequence of int
        Rows per worker.
    n_features, n_components : int
    kernel : Kernel
    center : bool
    **data
        ``nnz`` or ``max_row_nnz`` of sparse data (:func:`data_options`).

    Returns
    -------
    list of (int, int, int)
    """
    opts = {k: v for k, v in options.items() if k in FORECAST_OPTIONS}
    sized, seen = [], set()
    for budget in sorted(word_budgets):
        forecast = largest_within(function, int(budget), n_rows, n_features, n_components,
                                  kernel=kernel, center=center, **opts, **data)
        if forecast is None or forecast.n_landmarks in seen:
            continue
        seen.add(forecast.n_landmarks)
        sized.append((int(budget), forecast.n_landmarks, forecast.words))
    return sized

