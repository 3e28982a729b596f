"""Methods compared at equal words: seeds summarised, best within a budget, words to a target.

Each method sweeps its own knob (|Y|, random features D, iterations T, sample
size m, ...), so its settings land at different word counts. Comparing at equal
words means, for a budget ``W``, taking each method's best mean value among its
settings whose mean words are at most ``W`` (the lower envelope of an error, the
upper envelope of a score such as NMI), and, for a target value, the fewest
words with which a method's mean reaches it.

>>> rows = [dict(method="a", param=p, seed=s, words=10 * p, nmi=0.1 * p + 0.01 * s)
...         for p in (1, 2, 4) for s in (0, 1)]
>>> a = summarize(rows, "nmi")
>>> [(round(x.words), round(x.mean, 3)) for x in a]
[(10, 0.105), (20, 0.205), (40, 0.405)]
>>> round(best_within(a, 25, higher_is_better=True).mean, 3)
0.205
>>> words_to_reach(a, 0.3, higher_is_better=True).param
4
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Setting", "best_within", "budget_grid", "ci95_halfwidth", "fmt", "mean_std",
           "summarize", "words_to_reach"]


@dataclass(frozen=True)
class Setting:
    """One setting of a method, summarised over its seeds.

    Attributes
    ----------
    param : object
        The value of the method's knob (``|Y|``, ``D``, ``T``, ...).
    words : float
        Mean words over the seeds.
    mean, std : float
        Mean and sample standard deviation (``ddof = 1``; 0 for one seed) of the value.
    n_seeds : int
    """

    param: object
    words: float
    mean: float
    std: float
    n_seeds: int

    @property
    def ci95(self) -> float:
        """Half-width of the 95% confidence interval of the mean (Student's t; 0 for one seed).

        >>> round(Setting("a", 1.0, 0.5, 0.1, 5).ci95, 4)
        0.1242
        """
        return ci95_halfwidth(self.std, self.n_seeds)


def ci95_halfwidth(std: float, n: int) -> float:
    """``t_{0.975, n-1} std / sqrt(n)``: the 95% interval of a mean of ``n`` values (0 if n < 2)."""
    if n < 2:
        return 0.0
    from scipy.stats import t

    return float(t.ppf(0.975, n - 1) * std / math.sqrt(n))


def mean_std(values: Iterable[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (``ddof = 1``, 0 for a single value).

    >>> mean_std([1.0, 2.0, 3.0])
    (2.0, 1.0)
    """
    array = np.asarray(list(values), dtype=float)
    if array.size == 0:
        raise ValueError("mean_std needs at least one value.")
    return float(array.mean()), float(array.std(ddof=1)) if array.size > 1 else 0.0


def summarize(rows: Sequence[dict], value: str, words: str = "words",
              param: str = "param") -> list[Setting]:
    """Group ``rows`` (one per seed) by ``row[param]``; one :class:`Setting` each, by words.

    Parameters
    ----------
    rows : sequence of dict
        One method's runs (select them first), each with ``param``, ``words`` and
        ``value`` keys.
    value, words, param : str
        Keys of the measured value, the word count and the knob.

    Returns
    -------
    list of Setting
        Sorted by mean words.
    """
    groups: dict = defaultdict(list)
    for row in rows:
        groups[row[param]].append(row)
    out = []
    for key, group in groups.items():
        mean, std = mean_std(r[value] for r in group)
        out.append(Setting(key, mean_std(r[words] for r in group)[0], mean, std, len(group)))
    return sorted(out, key=lambda s: s.words)


def _better(a: float, b: float, higher_is_better: bool) -> bool:
    return a > b if higher_is_better else a < b


def best_within(settings: Sequence[Setting], budget: float,
                higher_is_better: bool = False) -> Setting | None:
    """The setting with the best mean among those with mean words ``<= budget`` (None if none)."""
    best = None
    for s in settings:
        if s.words <= budget and (best is None or _better(s.mean, best.mean, higher_is_better)):
            best = s
    return best


def words_to_reach(settings: Sequence[Setting], target: float,
                   higher_is_better: bool = False) -> Setting | None:
    """The setting with the fewest mean words whose mean reaches ``target`` (None if none).

    Reaching means ``mean >= target`` for a score (``higher_is_better``),
    ``mean <= target`` for an error.
    """
    reached = [s for s in settings
               if (s.mean >= target if higher_is_better else s.mean <= target)]
    return min(reached, key=lambda s: s.words) if reached else None


def budget_grid(methods: Mapping[str, Sequence[Setting]], per_decade: int = 2) -> list[float]:
    """Word budgets ``10^(i / per_decade)`` over the range the methods cover together.

    From the first budget at which every method has a setting up to the first
    budget at or above the largest words of any setting, so that every setting
    counts in some budget.

    >>> a = [Setting(1, 40.0, 0.0, 0.0, 1), Setting(2, 900.0, 0.0, 0.0, 1)]
    >>> b = [Setting(1, 120.0, 0.0, 0.0, 1)]
    >>> [round(w) for w in budget_grid({"a": a, "b": b})]
    [316, 1000]
    """
    if any(not settings for settings in methods.values()):
        raise ValueError("every method needs at least one setting.")
    low = max(min(s.words for s in settings) for settings in methods.values())
    high = max(max(s.words for s in settings) for settings in methods.values())
    first = math.ceil(per_decade * math.log10(low) - 1e-9)
    last = math.ceil(per_decade * math.log10(high) - 1e-9)
    return [10 ** (e / per_decade) for e in range(first, last + 1)]


def fmt(setting: Setting | None, knob: str = "", spec: str = ".3f", words: bool = True) -> str:
    """A table cell, ``'0.512 ± 0.010 (T = 10, 118,478 w)'`` (``knob='T'``); ``'-'`` for None.

    ``spec`` formats the mean and the std (``'.3f'``, ``'.2e'``); ``words=False``
    leaves out the setting and its words.

    >>> fmt(Setting(10, 118478.0, 0.5123, 0.01, 5), "T")
    '0.512 ± 0.010 (T = 10, 118,478 w)'
    """
    if setting is None:
        return "-"
    text = f"{setting.mean:{spec}} ± {setting.std:{spec}}"
    if not words:
        return text
    label = f"{knob} = {setting.param}" if knob else f"{setting.param}"
    return f"{text} ({label}, {setting.words:,.0f} w)"
