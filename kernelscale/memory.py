"""The memory a fit needs, checked against the memory this machine has, before it starts.

Every memory-heavy choice (|Y| landmarks, random features, a streaming sketch,
the vertical setting's n x n kernels, the exact fit's n x n kernel matrix, the
number of in-process workers, a model file) is estimated here from the sizes
alone, before any data is touched, and :func:`check_memory` refuses a plan
that needs more than :func:`available_memory` with a :class:`MemoryLimitError`
that says what it needs, what there is, and what fits (the largest |Y|, m,
sketch or budget within the memory available). Nothing then runs until a
``MemoryError`` half-way.

What each setting's plan needs is estimated in :mod:`kernelscale.memory_plans`
(whose checks the estimators call at their front door); this module holds the
machine's side and the one check that every plan goes through.

The memory available is the least of what the operating system can give
(``MemAvailable``, or psutil's), the process's control group limit, its address
space limit (``ulimit -v``) and ``KERNELSCALE_MEMORY_LIMIT`` (bytes, or a number
with ``K``, ``M``, ``G`` or ``T``: a share of a machine that others use too).
"""

from __future__ import annotations

import math
import os
import re
import resource
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

#: The environment variable that caps the memory kernelscale plans for.
MEMORY_LIMIT_ENV = "KERNELSCALE_MEMORY_LIMIT"
#: The most in-process workers a fit simulates (each costs every round a task, a
#: message in the ledger and its own blocks: 8,000 workers took 70 s on 20,000 rows
#: for the same fit that took 19 s on 500 workers; one worker per row of a large
#: data set would run for hours).
MAX_LOCAL_WORKERS = 10_000
#: A fit needing more than this is said before it starts (the command line's note).
NOTE_BYTES = 2**30

_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


class MemoryLimitError(MemoryError, ValueError):
    """A plan needs more memory than this machine has: refused before it starts.

    A ``MemoryError`` and a ``ValueError`` (a setting the user chose, which the
    message says how to change).
    """


class LargeMemoryWarning(UserWarning):
    """A plan that fits, but needs more than :data:`NOTE_BYTES`: said before it starts
    (the command line prints it as a note)."""


@dataclass
class MemoryNeed:
    """What a plan needs: its parts, each described, in bytes.

    Attributes
    ----------
    what : str
        The plan, as the message names it ("disKPCA with |Y| = 20,000 on 5 workers").
    parts : list of (str, int)
        What takes the memory, and how much.
    """

    what: str
    parts: list[tuple[str, int]] = field(default_factory=list)

    def add(self, what: str, nbytes: float) -> MemoryNeed:
        if nbytes > 0:
            self.parts.append((what, int(nbytes)))
        return self

    @property
    def total(self) -> int:
        return sum(n for _, n in self.parts)

    def describe(self, n_parts: int = 2) -> str:
        """The total and its largest parts, in words."""
        largest = sorted(self.parts, key=lambda part: -part[1])[:n_parts]
        detail = "; ".join(f"{what}: {format_bytes(n)}" for what, n in largest)
        return f"about {format_bytes(self.total)} ({detail})" if detail else \
            f"about {format_bytes(self.total)}"


def format_bytes(n: float) -> str:
    """``n`` bytes in binary units, e.g. ``3.0 GiB``."""
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} bytes"


def parse_bytes(text: str) -> int:
    """``'4G'``, ``'512M'``, ``'1.5e9'`` as bytes (binary units); ValueError otherwise."""
    match = re.fullmatch(r"\s*([0-9.eE+]+)\s*([KMGT]?)(?:i?B)?\s*", str(text), re.IGNORECASE)
    try:
        value = float(match.group(1)) * _UNITS[match.group(2).upper()] if match else -1.0
    except ValueError:
        value = -1.0
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{MEMORY_LIMIT_ENV}={text!r} is not an amount of memory (bytes, or a "
                         "number with K, M, G or T, e.g. 4G).")
    return int(value)


def _meminfo_available() -> int | None:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil
    except ImportError:
        return None
    return int(psutil.virtual_memory().available)


def _cgroup_available() -> int | None:
    """What the process's control group still allows (cgroup v2, then v1)."""
    pairs = (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
             ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
              "/sys/fs/cgroup/memory/memory.usage_in_bytes"))
    for limit_path, usage_path in pairs:
        try:
            with open(limit_path) as fh:
                limit = fh.read().strip()
            with open(usage_path) as fh:
                usage = int(fh.read().strip())
        except (OSError, ValueError):
            continue
        if limit.isdigit() and int(limit) < 2**60:
            return max(int(limit) - usage, 0)
    return None


def _address_space_available() -> int | None:
    """What ``ulimit -v`` still allows this process (its limit less its current size)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        with open("/proc/self/statm") as fh:
            used = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        used = 0
    return max(soft - used, 0)


def available_memory() -> int:
    """Bytes this process can still allocate: the least of the system's available
    memory, the control group's and the address space's limits, and
    ``KERNELSCALE_MEMORY_LIMIT``."""
    found = [n for n in (_meminfo_available(), _cgroup_available(),
                         _address_space_available()) if n is not None]
    limit = os.environ.get(MEMORY_LIMIT_ENV)
    if limit:
        found.append(parse_bytes(limit))
    if not found:  # no way to tell: the physical memory
        found.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    return min(found)


def largest_within(need_of: Callable[[int], int], low: int, high: int,
                   available: int) -> int | None:
    """The largest integer ``v`` in ``[low, high]`` with ``need_of(v) <= available``
    (``need_of`` grows with ``v``), or None when even ``low`` does not fit."""
    if need_of(low) > available:
        return None
    while low < high:
        middle = (low + high + 1) // 2
        if need_of(middle) <= available:
            low = middle
        else:
            high = middle - 1
    return low


def check_memory(need: MemoryNeed, fits: str | Callable[[], str] | None = None,
                 available: int | None = None, note: bool = True) -> None:
    """Refuse ``need`` when it exceeds the memory available, before any work.

    A plan that fits but needs more than :data:`NOTE_BYTES` is said with a
    :class:`LargeMemoryWarning`.

    Parameters
    ----------
    need : MemoryNeed
    fits : str or callable, optional
        What fits instead, one sentence ("the largest n_landmarks that fits is 9,100"),
        or a function that works it out (called only for a refusal).
    available : int, optional
        Bytes available (default :func:`available_memory`).
    note : bool, default=True
        Whether a plan above :data:`NOTE_BYTES` that fits is said.

    Raises
    ------
    MemoryLimitError
        With what the plan needs, its largest parts, what is available and ``fits``.
    """
    available = available_memory() if available is None else available
    if need.total <= available:
        if note and need.total > NOTE_BYTES:
            warnings.warn(LargeMemoryWarning(
                f"{need.what} needs {need.describe()} of memory ({format_bytes(available)} "
                "available)"), stacklevel=3)
        return
    fits = fits() if callable(fits) else fits
    advice = f"; {fits}" if fits else ""
    raise MemoryLimitError(
        f"{need.what} needs {need.describe()} of memory, more than the "
        f"{format_bytes(available)} available{advice}.")


def check_local_workers(n_workers: int, n_samples: int | None = None) -> None:
    """Refuse more in-process workers than :data:`MAX_LOCAL_WORKERS`, before the split."""
    if n_workers <= MAX_LOCAL_WORKERS:
        return
    rows = "" if n_samples is None else f" ({n_samples:,} rows)"
    raise MemoryLimitError(
        f"n_workers={n_workers:,} in-process workers{rows}: kernelscale simulates at most "
        f"{MAX_LOCAL_WORKERS:,} workers in one process (each costs every round a task, a "
        "ledger message and blocks of its own, so that many would run for hours); lower "
        "n_workers, or give real workers (backend='dask' or 'flower').")


__all__ = ["MAX_LOCAL_WORKERS", "MEMORY_LIMIT_ENV", "NOTE_BYTES", "LargeMemoryWarning",
           "MemoryLimitError", "MemoryNeed", "available_memory", "check_local_workers",
           "check_memory", "format_bytes", "largest_within", "parse_bytes"]
