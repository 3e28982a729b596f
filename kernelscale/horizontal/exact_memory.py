"""Whether an exact kernel PCA fits in this machine's memory, before anything is allocated.

:class:`~kernelscale.KernelPCA` asks :func:`exact_fit_bytes` what scikit-learn's
computation needs (the n x n kernel matrix, LAPACK's copy of it, the
eigenvectors, and with ``fit_inverse_transform`` the n x n kernel of the
scores) and compares it with :func:`available_memory_bytes`: the operating
system's available memory (``MemAvailable``), or less where the environment
variable ``KERNELSCALE_MEMORY_LIMIT`` says so (bytes, or a number with ``K``,
``M``, ``G`` or ``T``: a share of a machine that others use too).

This is the minimal reading of the machine's memory the drop-in needs; the
library-wide memory checks (issue 47) read the same variable.
"""

from __future__ import annotations

import os
import re


class ExactFitMemoryError(MemoryError, ValueError):
    """An exact fit needs more memory than this machine has, and has no plan to fall back to.

    Raised before anything is allocated; a ``MemoryError`` and a ``ValueError``
    (the message says which setting to change).
    """


#: The environment variable that caps the memory kernelscale plans for.
MEMORY_LIMIT_ENV = "KERNELSCALE_MEMORY_LIMIT"
_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def _limit_from_env() -> int | None:
    text = os.environ.get(MEMORY_LIMIT_ENV, "").strip()
    if not text:
        return None
    match = re.fullmatch(r"(\d+(?:\.\d*)?)\s*([KMGT]?)(?:i?B)?", text, flags=re.IGNORECASE)
    if match is None:
        raise ValueError(f"{MEMORY_LIMIT_ENV}={text!r} is not a size: give bytes, or a "
                         "number with K, M, G or T (e.g. 8G).")
    return int(float(match.group(1)) * _UNITS[match.group(2).upper()])


def _os_available() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo`` (psutil's reading elsewhere), or None."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def available_memory_bytes() -> int | None:
    """The memory a fit may take: the least of the OS's available memory and
    ``KERNELSCALE_MEMORY_LIMIT``; None when neither is known."""
    known = [b for b in (_os_available(), _limit_from_env()) if b is not None]
    return min(known) if known else None


def exact_fit_bytes(n_samples: int, n_features: int, n_components: int | None,
                    fit_inverse_transform: bool = False) -> int:
    """Bytes of scikit-learn's exact kernel PCA of ``n_samples`` points (float64).

    The kernel matrix and the copy LAPACK's eigensolver takes (2 n^2 floats),
    the eigenvectors (n k; n^2 with ``n_components=None``), the data (n d), and
    with ``fit_inverse_transform`` the kernel matrix of the scores (n^2).
    """
    n = int(n_samples)
    k = n if n_components is None else min(int(n_components), n)
    squares = 2 + (1 if fit_inverse_transform else 0)
    return 8 * (squares * n * n + n * k + n * int(n_features))


def gib(nbytes: float) -> str:
    """``'37.3 GiB'``."""
    return f"{nbytes / 2**30:.1f} GiB"
