"""Pieces of the estimators' ``_parameter_constraints``, scikit-learn's own parameter checks.

Each estimator declares what every parameter may be (``Interval``, ``StrOptions``,
types), and ``fit`` validates them through scikit-learn before any work starts
(``sklearn.base._fit_context``), with scikit-learn's message naming the parameter
and the allowed values. Checks between parameters (``n_components`` against
``n_landmarks``, a kernel against a method) and against the data stay in the
estimators, by hand.
"""

from __future__ import annotations

from numbers import Integral, Real

import numpy as np
from sklearn.utils._param_validation import Interval, StrOptions

from kernelscale.kernels import ALL_KERNELS, KERNEL_ALIASES

__all__ = ["Interval", "StrOptions", "POSITIVE_INT", "NON_NEGATIVE_INT", "POSITIVE_REAL",
           "FINITE_REAL", "RANDOM_STATE", "kernel_names"]

#: An int >= 1 (n_components, sizes, chunk_size...).
POSITIVE_INT = Interval(Integral, 1, None, closed="left")
#: An int >= 0.
NON_NEGATIVE_INT = Interval(Integral, 0, None, closed="left")
#: A finite float > 0 (gamma, a timeout).
POSITIVE_REAL = Interval(Real, 0, None, closed="neither")
#: Any finite float.
FINITE_REAL = Interval(Real, None, None, closed="neither")
#: ``random_state``: scikit-learn's (an int, a RandomState, None) or a numpy Generator.
RANDOM_STATE = ["random_state", np.random.Generator]


def kernel_names(names=None) -> StrOptions:
    """The kernel names (and their aliases) among ``names`` (default: every named kernel)."""
    names = [n for n in (ALL_KERNELS if names is None else names) if n != "callable"]
    aliases = [alias for alias, name in KERNEL_ALIASES.items() if name in names]
    return StrOptions(set(names) | set(aliases))
