"""The command line's values checked against the data, before any work.

A value can be valid alone and impossible on the data: a ``--bandwidth-scale``
whose kernel scale leaves the float range (:func:`gamma_of_scale`), a
``--degree`` whose polynomial kernel overflows on the rows
(:func:`check_kernel_values`), a ``--workers`` that makes more in-process workers
than run in reasonable time (:func:`check_worker_count`). Each is one line that
names the flag and what fits, as every subcommand's errors are
(:mod:`kernelscale.cli_common`).
"""

from __future__ import annotations

import numpy as np

from kernelscale.cli_common import UsageError
from kernelscale.kernels import row_sq_norms


def gamma_of_scale(scale: float, median: float) -> float:
    """``gamma = 1 / (2 sigma^2)`` for ``sigma = scale x median``, or a UsageError naming
    the range of ``--bandwidth-scale`` whose gamma is a positive float (1e-300 and 1e300
    were a ZeroDivisionError and an OverflowError traceback)."""
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        sigma = np.float64(scale) * median
        gamma = 1.0 / (2.0 * sigma * sigma)
    if np.isfinite(gamma) and gamma > 0:
        return float(gamma)
    info = np.finfo(np.float64)
    # gamma stays finite for sigma >= 1 / sqrt(2 max), and positive (and sigma^2 finite)
    # for sigma <= min(1 / sqrt(2 tiny), sqrt(max)).
    low = 1.0 / (np.sqrt(2.0) * np.sqrt(info.max)) / median
    high = min(1.0 / (np.sqrt(2.0) * np.sqrt(info.tiny)), np.sqrt(info.max)) / median
    return_side = "small" if not np.isfinite(gamma) else "large"
    raise UsageError(
        f"--bandwidth-scale {scale:g} is too {return_side}: sigma = {scale:g} x the median "
        f"distance {median:.4g} gives gamma = 1 / (2 sigma^2) beyond the float range; choose "
        f"--bandwidth-scale between {low:.3g} and {high:.3g}, or give --gamma")


def check_kernel_values(kernel, X, path, flags: str = "--degree or --gamma") -> None:
    """A polynomial kernel whose values leave the float range on the data is refused
    before any work, naming the flags (``--degree 1000000`` failed deep in a
    decomposition as "Eigenvalues did not converge", or in a worker's round)."""
    if kernel.name != "poly":
        return
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        base = kernel.gamma * row_sq_norms(X) + kernel.coef0
        values = base ** kernel.degree
    bad = ~np.isfinite(values)
    if bad.any():
        raise UsageError(
            f"--degree {kernel.degree} overflows the poly kernel on {path}: (gamma <x, x> + "
            f"coef0)^degree is beyond the float range for {int(bad.sum()):,} of its "
            f"{X.shape[0]:,} rows (gamma <x, x> + coef0 reaches {float(base.max()):.4g}); "
            f"lower {flags}")
    if values.size and not values.any() and base.any():
        raise UsageError(
            f"--degree {kernel.degree} underflows the poly kernel on {path}: (gamma <x, x> + "
            f"coef0)^degree is 0 for every row (gamma <x, x> + coef0 is at most "
            f"{float(np.abs(base).max()):.4g}); lower --degree, or raise --gamma or --coef0")


def check_worker_count(args, n_rows: int) -> None:
    """More in-process workers than :data:`kernelscale.memory.MAX_LOCAL_WORKERS` are
    refused before the split (``--workers 1000000`` on 200,000 rows ran for hours)."""
    from kernelscale.memory import MAX_LOCAL_WORKERS

    workers = min(args.workers, n_rows)
    if args.client is None and workers > MAX_LOCAL_WORKERS:
        one_each = f" (one per row of {n_rows:,})" if args.workers >= n_rows else ""
        raise UsageError(
            f"--workers {args.workers:,} means {workers:,} in-process workers{one_each}; "
            f"kernelscale simulates at most {MAX_LOCAL_WORKERS:,} in one process (every round "
            "costs each worker a task, a ledger message and blocks of its own: that many "
            "would run for hours). Lower --workers, or give real workers (--scheduler, "
            "--dask-workers)")
