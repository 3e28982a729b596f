"""The memory a fit needs, checked against the memory this machine has, before it starts.

Every memory-heavy choice (|Y| landmarks, random features, a streaming sketch,
the vertical setting's n x n kernels, the exact fit's n x n kernel matrix, the
number of in-process workers, a model file) is estimated here from the sizes
alone, before any data is touched, and :func:`check_memory` refuses a plan
that needs more than :func:`available_memory` with a :class:`MemoryLimitError`
that says what it needs, what there is, and what fits (the largest |Y|, m,
sketch or budget within the memory available). Nothing then runs until a
``MemoryError`` half-way.

The estimates count the arrays the algorithms allocate (matrices of 8-byte
floats and the copies their decompositions take) with constants measured on
each method's peak resident memory (``benchmarks/memory.py``, whose results in
``benchmarks/results/memory/`` compare every estimate with the peak it bounds).

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
from collections.abc import Callable, Sequence
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

_FLOAT = 8  # bytes of a float64
_UNITS = {"": 1, "B": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


class MemoryLimitError(MemoryError, ValueError):
    """A plan needs more memory than this machine has: refused before it starts.

    A ``MemoryError`` and a ``ValueError`` (a setting the user chose, which the
    message says how to change).
    """


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


def check_memory(need: MemoryNeed, fits: str | None = None,
                 available: int | None = None) -> None:
    """Refuse ``need`` when it exceeds the memory available, before any work.

    Parameters
    ----------
    need : MemoryNeed
    fits : str, optional
        What fits instead, one sentence ("the largest n_landmarks that fits is 9,100").
    available : int, optional
        Bytes available (default :func:`available_memory`).

    Raises
    ------
    MemoryLimitError
        With what the plan needs, its largest parts, what is available and ``fits``.
    """
    available = available_memory() if available is None else available
    if need.total <= available:
        return
    advice = f"; {fits}" if fits else ""
    raise MemoryLimitError(
        f"{need.what} needs {need.describe()} of memory, more than the "
        f"{format_bytes(available)} available{advice}.")


# ----------------------------------------------------------------------------- estimates
# Each estimate counts what a method holds at its peak. The copies of an n x n
# matrix that a decomposition takes (the symmetrised copy, LAPACK's workspace, the
# eigenvectors) and of a |Y| x |Y| Gram accumulation (the accumulator, a chunk's
# product and the packed reply) were measured by benchmarks/memory.py.

#: n x n float64 copies while the master centres and decomposes a kernel matrix.
DECOMPOSITION_COPIES = 5
#: |Y| x |Y| float64 copies a worker holds while it accumulates its Gram message
#: (the accumulator, one chunk's product per chunk thread, the packed reply).
WORKER_GRAM_COPIES = 2.5
#: |Y| x |Y| float64 copies at the master in disLR (k(Y, Y), its whitening, the
#: summed Gram and the products of the projection, the eigenproblem's workspace).
MASTER_GRAM_COPIES = 6
#: Bytes per ledger message (a Message and its list slot), per worker and round.
MESSAGE_BYTES = 250
#: Rounds of a fit, for the ledger's size (disKPCA with the ridge sampler has ~15).
TYPICAL_ROUNDS = 20


def data_bytes(n_samples: int, n_features: int, nnz: int | None = None) -> int:
    """The bytes of a data set: 8 n d dense, 12 nnz + 8 n for CSR."""
    if nnz is not None:
        return 12 * int(nnz) + 8 * (int(n_samples) + 1)
    return _FLOAT * int(n_samples) * int(n_features)


def feature_map_bytes(kernel: str, n_features: int, n_random_features: int,
                      degree: int = 3) -> int:
    """A random feature map's own arrays (frequencies d x m, and a float32 copy)."""
    d, m = int(n_features), int(n_random_features)
    if kernel in ("rbf", "laplacian"):
        return 12 * d * m + 12 * m
    if kernel == "arccos":
        return _FLOAT * d * m
    if kernel == "poly":
        return int(degree) * (d + 1) * 40 + int(degree) * m * _FLOAT
    return 0


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


def horizontal_need(method: str, n_rows: Sequence[int], n_features: int, *,
                    nnz: int | None = None, n_landmarks: int = 400,
                    n_random_features: int = 2000, kernel: str = "rbf", degree: int = 3,
                    embedding_dim: int = 50, sampler: str = "ridge",
                    messages: str = "gram", chunk_size: int = 4096, n_jobs: int = 1,
                    in_process: bool = True) -> MemoryNeed:
    """What a horizontal fit (``DistributedKernelPCA``'s methods) holds at its peak.

    ``n_rows``: the rows of each worker; ``n_jobs``: the threads that run
    in-process workers' steps at once (each with ``n_jobs`` chunk threads); with
    ``in_process=False`` (Dask, Flower) only the master's share is counted here.
    """
    s, n = len(n_rows), int(sum(n_rows))
    d, y, m = int(n_features), int(n_landmarks), int(n_random_features)
    jobs = max(1, min(int(n_jobs), s)) if in_process else 0
    chunk = min(int(chunk_size), max(n_rows, default=1))
    what = {"exact": f"method='exact' on {n:,} points",
            "uniform_batch": f"method='uniform_batch' with n_landmarks={y:,}",
            "random_features": f"method='random_features' with n_random_features={m:,}"}.get(
        method, f"method={method!r} with n_landmarks={y:,}")
    need = MemoryNeed(f"{what} on {s:,} worker{'s' if s > 1 else ''}")
    if in_process:
        need.add("the workers' copy of the data", data_bytes(n, d, nnz))
        need.add("the ledger", MESSAGE_BYTES * 3 * s * TYPICAL_ROUNDS)
    if method == "exact":
        need.add(f"the {n:,} x {n:,} kernel matrix at the master and its decomposition",
                 DECOMPOSITION_COPIES * _FLOAT * n * n)
        need.add("the points at the master", data_bytes(n, d, nnz))
        return need
    if method == "uniform_batch":
        need.add(f"the {y:,} x {y:,} kernel matrix at the master and its decomposition",
                 DECOMPOSITION_COPIES * _FLOAT * y * y)
        return need
    if method == "random_features":
        m_out = d if kernel == "linear" else m
        per_worker = (WORKER_GRAM_COPIES * _FLOAT * m_out * m_out
                      + feature_map_bytes(kernel, d, m, degree)
                      + jobs * _FLOAT * chunk * m_out)
        need.add(f"each of {jobs} worker thread{'s' if jobs > 1 else ''} at once: the "
                 f"{m_out:,} x {m_out:,} feature covariance and the feature map",
                 jobs * per_worker)
        need.add(f"the {m_out:,} x {m_out:,} covariance at the master and its decomposition",
                 DECOMPOSITION_COPIES * _FLOAT * m_out * m_out)
        return need
    # disLR methods: every worker accumulates k(Y, A_i) k(A_i, Y), |Y| x |Y|.
    gram = _FLOAT * y * y if messages == "gram" else _FLOAT * y * chunk
    per_worker = WORKER_GRAM_COPIES * gram + jobs * _FLOAT * chunk * y
    if method == "diskpca" and kernel != "linear":  # the leverage embedding's feature map
        per_worker += feature_map_bytes(kernel, d, m, degree) + jobs * _FLOAT * chunk * m
    need.add(f"each of {jobs} worker thread{'s' if jobs > 1 else ''} at once: a {y:,} x "
             f"{y:,} Gram matrix and its blocks", jobs * per_worker)
    held = math.ceil(math.log2(max(s, 2))) + 1  # the pairwise sum's partial sums
    need.add("the summed Gram messages", held * _FLOAT * y * (y + 1) / 2)
    need.add(f"the master's {y:,} x {y:,} matrices", MASTER_GRAM_COPIES * _FLOAT * y * y)
    if method == "diskpca" and sampler == "paper":
        need.add("the workers' leverage embeddings", _FLOAT * n * embedding_dim)
    return need


def vertical_need(n_samples: int, n_parties: int, n_features: int, *, n_jobs: int = 1,
                  in_process: bool = True) -> MemoryNeed:
    """What the one-shot vertical kernel PCA holds: each party's n x n local kernel and
    its eigenpairs, the centre's fused n x n kernel and its decomposition."""
    n, jobs = int(n_samples), max(1, min(int(n_jobs), n_parties)) if in_process else 0
    need = MemoryNeed(f"the vertical kernel PCA of {n:,} samples over {n_parties} parties")
    if in_process:
        need.add("the parties' blocks", data_bytes(n, n_features))
        need.add(f"each of {jobs} part{'ies' if jobs > 1 else 'y'} at once: its {n:,} x "
                 f"{n:,} local kernel and its decomposition",
                 jobs * DECOMPOSITION_COPIES * _FLOAT * n * n)
    need.add(f"the centre's fused {n:,} x {n:,} kernel and its decomposition",
             (DECOMPOSITION_COPIES + 1) * _FLOAT * n * n)
    return need


def streaming_need(method: str, n_features: int, *, n_random_features: int = 500,
                   sketch_size: int = 20, n_landmarks: int | None = None,
                   batch_size: int = 1024, kernel: str = "rbf",
                   sparse: bool = False) -> MemoryNeed:
    """What a ``StreamingKernelPCA`` holds: its feature map (d x m frequencies), its
    sketch (l x m rows, the m x m covariance, or the c x d reservoir) and one lifted
    batch of ``batch_size`` x m features."""
    d, m, l = int(n_features), int(n_random_features), int(sketch_size)
    if method == "nystrom":
        c = m if n_landmarks is None else int(n_landmarks)
        need = MemoryNeed(f"streaming method='nystrom' with {c:,} landmarks on {d:,} features")
        need.add(f"the {c:,} x {d:,} reservoir", _FLOAT * c * d)
        need.add(f"the {c:,} x {c:,} landmark kernel and its decomposition",
                 DECOMPOSITION_COPIES * _FLOAT * c * c)
        need.add("one batch's kernel block", _FLOAT * batch_size * c)
        return need
    what = (f"streaming method={method!r} with n_random_features={m:,}"
            + (f" and sketch_size={l:,}" if method == "skpca" else "")
            + f" on {d:,} features")
    need = MemoryNeed(what)
    need.add(f"the random feature map ({d:,} x {m:,} frequencies)",
             feature_map_bytes(kernel, d, m))
    need.add(f"one batch of {batch_size:,} x {m:,} lifted features",
             2 * _FLOAT * batch_size * m + (0 if sparse else _FLOAT * batch_size * d))
    if method == "skpca":
        need.add(f"the {l:,} x {m:,} sketch and its shrinking SVD", 4 * _FLOAT * l * m)
    else:
        need.add(f"the {m:,} x {m:,} covariance and its decomposition",
                 DECOMPOSITION_COPIES * _FLOAT * m * m)
    return need


def federated_need(n_rows: Sequence[int], n_features: int, n_random_features: int,
                   n_eigenvectors: int, *, n_jobs: int = 1, in_process: bool = True,
                   nnz: int | None = None) -> MemoryNeed:
    """What ``FederatedKernelKMeans`` holds: every worker's n_i x (D + r) feature block
    (kept between iterations), the feature map and the master's (D + r) square."""
    s, n = len(n_rows), int(sum(n_rows))
    width = int(n_random_features) + int(n_eigenvectors) + 2
    jobs = max(1, min(int(n_jobs), s)) if in_process else 0
    need = MemoryNeed(f"FederatedKernelKMeans with n_random_features={n_random_features:,} "
                      f"on {n:,} points")
    if in_process:
        need.add("the workers' copy of the data", data_bytes(n, n_features, nnz))
        need.add(f"the workers' {n:,} x {width:,} feature blocks", 3 * _FLOAT * n * width)
        need.add("the feature map on each worker thread",
                 jobs * feature_map_bytes("rbf", n_features, n_random_features))
    need.add(f"the master's {width:,} x {width:,} matrices", DECOMPOSITION_COPIES * _FLOAT
             * width * width)
    return need


__all__ = ["MAX_LOCAL_WORKERS", "MEMORY_LIMIT_ENV", "MemoryLimitError", "MemoryNeed",
           "available_memory", "check_local_workers", "check_memory", "data_bytes",
           "federated_need", "feature_map_bytes", "format_bytes", "horizontal_need",
           "largest_within", "parse_bytes", "streaming_need", "vertical_need"]
