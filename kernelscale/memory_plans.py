"""What each setting's plan holds at its peak, and the checks its estimator runs first.

The estimates count the arrays the algorithms allocate (matrices of 8-byte floats
and the copies their decompositions take) with constants measured on each method's
peak memory (``benchmarks/memory.py``, whose results in
``benchmarks/results/memory/`` compare every estimate with the peak it bounds).
Each ``check_*_memory`` function goes through :func:`kernelscale.memory.check_memory`
with what fits instead (the largest |Y|, m, sketch or number of samples within the
memory available); the estimators call them at their front door, before any round.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kernelscale.memory import (
    MemoryNeed,
    available_memory,
    check_memory,
    largest_within,
)

_FLOAT = 8  # bytes of a float64


# Each estimate counts what a method holds at its peak. The copies of an n x n
# matrix that a decomposition takes (the symmetrised copy, LAPACK's workspace, the
# eigenvectors) and of a |Y| x |Y| Gram accumulation (the accumulator, a chunk's
# product and the packed reply) were measured by benchmarks/memory.py.

#: n x n float64 copies while a kernel matrix is centred and decomposed.
DECOMPOSITION_COPIES = 5
#: n x n float64 copies at the master of batch and exact kernel PCA (measured 3.2 and 2.1).
MASTER_SQUARE_COPIES = 4
#: |Y| x |Y| float64 copies at the master in disLR (k(Y, Y), its whitening, the
#: summed Gram unpacked and the products of the projection, the eigenproblem's
#: workspace).
MASTER_GRAM_COPIES = 6
#: Rows a streaming method lifts at once (its sketcher's chunk), and the copies of the
#: lifted block (the features, their product with the frequencies, the checks of the
#: sketch's update; measured 2.1).
LIFT_ROWS, LIFT_COPIES = 4096, 2.5
#: n x (D + r) copies of the federated workers' feature blocks (measured 1.3).
FEATURE_BLOCK_COPIES = 1.5
#: Bytes a worker thread takes beyond its arrays (BLAS buffers, its stack).
THREAD_BYTES = 64 * 2**20
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
                      degree: int = 3, float32: bool = False) -> int:
    """A random feature map's own arrays: frequencies d x m (and their float32 copy when
    float32 rows are lifted), a TensorSketch's hashes."""
    d, m = int(n_features), int(n_random_features)
    if kernel in ("rbf", "laplacian"):
        return (12 if float32 else 8) * (d * m + m)
    if kernel == "arccos":
        return _FLOAT * d * m
    if kernel == "poly":
        return int(degree) * (d + 1) * 40 + int(degree) * m * _FLOAT
    return 0


def horizontal_need(method: str, n_rows: Sequence[int], n_features: int, *,
                    nnz: int | None = None, n_landmarks: int = 400,
                    n_random_features: int = 2000, kernel: str = "rbf", degree: int = 3,
                    embedding_dim: int = 50, sampler: str = "ridge",
                    messages: str = "gram", chunk_size: int = 4096, n_jobs: int = 1,
                    in_process: bool = True, data_resident: bool = True) -> MemoryNeed:
    """What a horizontal fit (``DistributedKernelPCA``'s methods) holds at its peak.

    ``n_rows``: the rows of each worker; ``n_jobs``: the threads that run
    in-process workers' steps at once (each with ``n_jobs`` chunk threads); with
    ``in_process=False`` (Dask, Flower) only the master's share is counted here;
    with ``data_resident=False`` the workers' copy of the data is counted too
    (the estimators check once it is made).
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
    if in_process and not data_resident:
        need.add("the workers' copy of the data", data_bytes(n, d, nnz))
    if in_process:
        need.add("the ledger", MESSAGE_BYTES * 3 * s * TYPICAL_ROUNDS)
    if method == "exact":
        need.add(f"the {n:,} x {n:,} kernel matrix at the master and its decomposition",
                 MASTER_SQUARE_COPIES * _FLOAT * n * n)
        need.add("the points at the master", data_bytes(n, d, nnz))
        return need
    if method == "uniform_batch":
        need.add(f"the {y:,} x {y:,} kernel matrix at the master and its decomposition",
                 MASTER_SQUARE_COPIES * _FLOAT * y * y)
        return need
    # The workers' round (each worker thread accumulating its square message, with
    # the blocks it is made of) and the master's decomposition come one after the other:
    # the peak is the larger of the two, with the summed message held through both.
    chunks = math.ceil(max(n_rows, default=1) / max(int(chunk_size), 1))
    ahead = 1 if jobs <= 1 else min(2 * jobs, chunks)  # chunk results ahead of the sum
    if method == "random_features":
        w = d if kernel == "linear" else m
        fmap = feature_map_bytes(kernel, d, m, degree)
        thread = _FLOAT * w * w * (1.5 + ahead) + fmap + 2 * ahead * _FLOAT * chunk * w
        square, size = f"{w:,} x {w:,} feature covariance", w
        if fmap > _FLOAT * w * w:
            square = f"feature map ({d:,} x {m:,} frequencies), its {square}"
    else:  # disLR: every worker accumulates k(Y, A_i) k(A_i, Y), |Y| x |Y|
        thread = (_FLOAT * y * y * (1.5 + ahead) if messages == "gram" else 0) \
            + 2 * ahead * _FLOAT * chunk * y
        if method == "diskpca" and sampler == "paper":  # the leverage embedding's map
            thread += feature_map_bytes(kernel, d, m, degree) + 2 * ahead * _FLOAT * chunk * m
            need.add("the workers' leverage embeddings", _FLOAT * n * embedding_dim)
        square, size = f"{y:,} x {y:,} Gram matrix", y
    held = (math.ceil(math.log2(max(s, 2))) + 1) * _FLOAT * size * (size + 1) / 2
    thread += THREAD_BYTES
    workers = jobs * thread + held
    master = MASTER_GRAM_COPIES * _FLOAT * size * size + _FLOAT * size * (size + 1) / 2
    if workers >= master:
        need.add(f"each of {jobs} worker thread{'s' if jobs > 1 else ''} at once: its "
                 f"{square} and blocks", jobs * thread)
        need.add("the summed messages", held)
    else:
        need.add(f"the master's {size:,} x {size:,} matrices and their decomposition", master)
    return need


def vertical_need(n_samples: int, n_parties: int, n_features: int, *, n_jobs: int = 1,
                  in_process: bool = True, data_resident: bool = True) -> MemoryNeed:
    """What the one-shot vertical kernel PCA holds: each party's n x n local kernel and
    its eigenpairs, the centre's fused n x n kernel and its decomposition."""
    n, jobs = int(n_samples), max(1, min(int(n_jobs), n_parties)) if in_process else 0
    need = MemoryNeed(f"the vertical kernel PCA of {n:,} samples over {n_parties} parties")
    if in_process and not data_resident:
        need.add("the parties' blocks", data_bytes(n, n_features))
    # The parties' round, then the centre's fusion: the larger of the two is the peak.
    parties = jobs * DECOMPOSITION_COPIES * _FLOAT * n * n
    centre = DECOMPOSITION_COPIES * _FLOAT * n * n
    if parties > centre:
        need.add(f"each of {jobs} part{'ies' if jobs > 1 else 'y'} at once: its {n:,} x "
                 f"{n:,} local kernel and its decomposition", parties)
    else:
        need.add(f"the {n:,} x {n:,} kernels and their decomposition", centre)
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
    need.add("working buffers (BLAS, sparse products)", THREAD_BYTES)
    need.add(f"the random feature map ({d:,} x {m:,} frequencies)",
             feature_map_bytes(kernel, d, m))
    rows = min(int(batch_size), LIFT_ROWS)
    need.add(f"one batch of {rows:,} x {m:,} lifted features",
             LIFT_COPIES * _FLOAT * rows * m + (0 if sparse else _FLOAT * batch_size * d))
    if method == "skpca":
        need.add(f"the {l:,} x {m:,} sketch and its shrinking SVD", 4 * _FLOAT * l * m)
    else:
        need.add(f"the {m:,} x {m:,} covariance and its decomposition",
                 DECOMPOSITION_COPIES * _FLOAT * m * m)
    return need


def federated_need(n_rows: Sequence[int], n_features: int, n_random_features: int,
                   n_eigenvectors: int, *, n_jobs: int = 1, in_process: bool = True,
                   nnz: int | None = None, data_resident: bool = True) -> MemoryNeed:
    """What ``FederatedKernelKMeans`` holds: every worker's n_i x (D + r) feature block
    (kept between iterations), the feature map and the master's (D + r) square."""
    s, n = len(n_rows), int(sum(n_rows))
    width = int(n_random_features) + int(n_eigenvectors) + 2
    jobs = max(1, min(int(n_jobs), s)) if in_process else 0
    need = MemoryNeed(f"FederatedKernelKMeans with n_random_features={n_random_features:,} "
                      f"on {n:,} points")
    if in_process and not data_resident:
        need.add("the workers' copy of the data", data_bytes(n, n_features, nnz))
    if in_process:
        need.add(f"the workers' {n:,} x {width:,} feature blocks",
                 FEATURE_BLOCK_COPIES * _FLOAT * n * width)
        need.add("the feature map on each worker thread",
                 jobs * feature_map_bytes("rbf", n_features, n_random_features))
    need.add(f"the master's {width:,} x {width:,} matrices", DECOMPOSITION_COPIES * _FLOAT
             * width * width)
    return need


def check_vertical_memory(n_samples: int, n_parties: int, n_features: int, *,
                          n_jobs: int = 1, in_process: bool = True) -> None:
    """Refuse, before any round, a vertical kernel PCA whose n x n kernels do not fit,
    saying how many samples do."""
    def need_of(n):
        return vertical_need(n, n_parties, n_features, n_jobs=n_jobs, in_process=in_process)

    available = available_memory()

    def fits() -> str:
        most = largest_within(lambda n: need_of(n).total, 2, n_samples, available)
        return ("the one-shot vertical kernel PCA holds n x n kernels by design (paper 002): "
                f"{'no' if most is None else f'at most {most:,}'} samples fit in this memory")

    check_memory(need_of(n_samples), fits, available)


def check_streaming_memory(method: str, n_features: int, *, n_random_features: int,
                           sketch_size: int, n_landmarks: int | None, batch_size: int,
                           kernel: str, sparse: bool) -> None:
    """Refuse, before the first batch, a streaming sketch that does not fit, saying the
    largest ``n_random_features`` (and ``sketch_size``) that does."""
    def need_of(m=n_random_features, l=sketch_size, c=n_landmarks):
        return streaming_need(method, n_features, n_random_features=m, sketch_size=l,
                              n_landmarks=c, batch_size=batch_size, kernel=kernel,
                              sparse=sparse)

    available = available_memory()

    def fits() -> str:
        if method == "nystrom":
            c = n_random_features if n_landmarks is None else n_landmarks
            most = largest_within(lambda v: need_of(c=v).total, 1, c, available)
            return (f"the largest n_landmarks that fits is {most:,}" if most
                    else "even one landmark does not fit")
        m = largest_within(lambda v: need_of(m=v).total, 1, n_random_features, available)
        parts = []
        if method == "skpca":
            l = largest_within(lambda v: need_of(l=v).total, 2, sketch_size, available)
            if m is not None:
                parts.append(f"the largest n_random_features that fits with "
                             f"sketch_size={sketch_size:,} is {m:,}")
            if l is not None:
                parts.append(f"the largest sketch_size that fits with "
                             f"n_random_features={n_random_features:,} is {l:,}")
        elif m is not None:
            parts.append(f"the largest n_random_features that fits is {m:,}")
        advice = "; ".join(parts) or "even one random feature does not fit"
        if sparse and n_features > 10 * n_random_features:
            advice += (f"; the map's frequencies grow with the {n_features:,} features of "
                       "these sparse rows")
        return advice

    check_memory(need_of(), fits, available)


def check_landmark_memory(n_rows: Sequence[int], n_features: int, n_landmarks: int,
                          **options) -> None:
    """Refuse, before any round, a disKPCA fit (:func:`horizontal_need`'s ``options``)
    whose |Y| x |Y| matrices do not fit, saying the largest ``n_landmarks`` that does."""
    def need_of(y):
        return horizontal_need("diskpca", n_rows, n_features, n_landmarks=y, **options)

    available = available_memory()

    def fits() -> str:
        most = largest_within(lambda v: need_of(v).total, 1, n_landmarks, available)
        return ("even one landmark does not fit" if most is None
                else f"the largest n_landmarks that fits is {most:,}")

    check_memory(need_of(n_landmarks), fits, available)


def check_federated_memory(n_rows: Sequence[int], n_features: int, n_random_features: int,
                           n_eigenvectors: int, *, n_jobs: int = 1,
                           in_process: bool = True) -> None:
    """Refuse, before any round, a federated kernel k-means whose feature blocks do not
    fit, saying the largest ``n_random_features`` that does."""
    def need_of(D):
        return federated_need(n_rows, n_features, D, n_eigenvectors, n_jobs=n_jobs,
                              in_process=in_process)

    available = available_memory()

    def fits() -> str:
        most = largest_within(lambda v: need_of(v).total, 1, n_random_features, available)
        return ("even one random feature does not fit" if most is None
                else f"the largest n_random_features that fits is {most:,}")

    check_memory(need_of(n_random_features), fits, available)


__all__ = ["check_federated_memory", "check_landmark_memory", "check_streaming_memory",
           "check_vertical_memory", "data_bytes", "federated_need", "feature_map_bytes",
           "horizontal_need", "streaming_need", "vertical_need"]
