"""Distributed streaming kernel PCA: one pass per worker, one merge at the master.

Each worker streams its own partition through a sketch built from the broadcast
random-feature seed (Algorithm 1 of 004 on its rows), and sends the sketch back;
the master merges the sketches. One round. For SKPCA the upload is the
non-zero rows of each Frequent Directions sketch (at most l m words per worker,
so at most s l m in all) plus three scalars (rows seen, ||A_i||_F^2, shrinkage);
the merged sketch keeps the Frequent Directions bound for the union.

RNCA sends its packed m x m covariance (m(m+1)/2 words per worker); Nystrom
sends its reservoir (raw points) and its row count, and the master draws a
uniform sample of the union.
"""

from __future__ import annotations

import numpy as np

from kernelscale.linalg import as_generator
from kernelscale.runtime import Cluster, Tagged, WorkerState, validate_cluster, worker_seeds
from kernelscale.runtime.steps import worker_step
from kernelscale.streaming.frequent_directions import FrequentDirections
from kernelscale.streaming.methods import METHODS, build_method
from kernelscale.streaming.skpca import StreamingMethod


def _sketch_disclosure(message: dict) -> str:
    """A Nystrom sketch's state is its reservoir of raw rows; the others' are aggregates."""
    return "rows" if message["model"]["method"] == "nystrom" else "aggregates"


@worker_step(discloses=_sketch_disclosure)
def sketch_partition(state: WorkerState, message: dict):
    """Worker step: stream the partition through a fresh sketch, reply with its state."""
    seeds, config = message["seed"], message["model"]
    method = build_method(n_features_in=state.data.shape[1], seed=int(seeds[0]), **config)
    if config["method"] == "nystrom":
        # Reservoir sampling is local randomness: this worker's own seed.
        method._rng = np.random.default_rng(int(seeds[1]))
    method.partial_fit(state.data)
    if config["method"] == "skpca":
        fd = method.sketch
        stats = np.array([fd.n_rows_seen, fd.squared_frobenius, fd.shrinkage])
        return Tagged(sketch=fd.filled_rows.copy(), scalars=stats)
    if config["method"] == "rnca":
        arrays = method.to_arrays()
        return Tagged(sketch=arrays["covariance_packed"], scalars=method.n_samples_seen)
    return Tagged(raw_points=method.landmarks.copy(), scalars=method.n_samples_seen)


def _rebuild(config: dict, n_features: int, seed: int, reply: dict) -> StreamingMethod:
    """The master's copy of one worker's sketch, from its reply."""
    method = build_method(n_features_in=n_features, seed=seed, **config)
    if config["method"] == "skpca":
        stats = np.asarray(reply["scalars"])
        method.sketch = FrequentDirections.from_arrays(
            {"fd_rows": reply["sketch"], "fd_stats": stats},
            config["sketch_size"], config["n_random_features"], config["shrink"],
        )
        method.n_samples_seen = int(stats[0])
        return method
    params = {**method.params(), "n_samples_seen": int(reply["scalars"])}
    if config["method"] == "rnca":
        return type(method).from_state(params, {"covariance_packed": reply["sketch"]})
    rng_state = method.to_arrays()["rng_state"]
    return type(method).from_state(params, {"landmarks": reply["raw_points"],
                                            "rng_state": rng_state})


def streaming_kpca_distributed(
    cluster: Cluster,
    method: str = "skpca",
    kernel: str = "rbf",
    gamma: float | None = None,
    n_random_features: int = 1000,
    sketch_size: int = 20,
    n_landmarks: int | None = None,
    shrink: str = "modified",
    chunk_size: int = 4096,
    random_state=None,
) -> StreamingMethod:
    """Sketch every partition in one pass and merge the sketches at the master.

    Parameters
    ----------
    cluster : Cluster
        Workers holding the partitions (rows are points).
    method : {'skpca', 'rnca', 'nystrom'}, default='skpca'
    kernel, gamma, n_random_features, sketch_size, n_landmarks, shrink
        As in :class:`~kernelscale.streaming.StreamingKernelPCA`
        (``gamma=None`` means ``1 / n_features``).
    chunk_size : int, default=4096
        Rows each worker lifts and feeds at a time.
    random_state : int, Generator or None

    Returns
    -------
    StreamingMethod
        The merged sketch (``SKPCA``, ``RNCA`` or ``StreamingNystrom``): call
        ``transform(X, n_components)`` or ``features(X)`` on it.
    """
    if method not in METHODS:
        raise ValueError(f"Unknown method {method!r}; choose one of {sorted(METHODS)}.")
    cluster.reset()
    info = validate_cluster(cluster)
    rng = as_generator(random_state)
    gamma = 1.0 / info.n_features if gamma is None else gamma
    config = {
        "method": method, "kernel": kernel, "gamma": gamma,
        "n_random_features": n_random_features, "sketch_size": sketch_size,
        "n_landmarks": n_landmarks, "shrink": shrink, "chunk_size": chunk_size,
    }
    # Validate the parameters at the master before any worker starts.
    merged = build_method(n_features_in=info.n_features, seed=0, **config)
    # Step 1: one shared seed for the random features (every sketch must use the
    # same feature map to be mergeable); worker-local seeds for the reservoirs.
    feature_seed = int(rng.integers(2**63))
    locals_ = worker_seeds(rng, cluster.n_workers) if method == "nystrom" else None
    messages = [
        (Tagged(seed=[feature_seed] + ([locals_[w]] if locals_ else []), model=config),)
        for w in range(cluster.n_workers)
    ]
    # Step 2: each worker runs Algorithm 1 of 004 over its partition (one pass).
    replies = cluster.scatter_map(
        sketch_partition, messages, round="sketch partitions", kind="seed", reply_kind="sketch"
    )
    # Step 3: the master merges the s sketches (Frequent Directions is mergeable).
    merged = build_method(n_features_in=info.n_features, seed=feature_seed, **config)
    merged._rng = np.random.default_rng(int(rng.integers(2**63)))
    for reply in replies:
        merged.merge(_rebuild(config, info.n_features, feature_seed, reply))
    return merged
