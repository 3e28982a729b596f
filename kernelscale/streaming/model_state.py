"""What a ``StreamingKernelPCA`` file's arrays must be (:mod:`kernelscale.model_layout`).

The estimator's state functions (``streaming_state``, ``restore_streaming`` in
:mod:`kernelscale.streaming.estimator`) keep the sketch's arrays and its
parameters: Frequent Directions' rows (skpca), the packed feature covariance
(rnca) or the reservoir and its sampler's state (nystrom). :func:`streaming_layout`
checks them against the header's parameters before any is read, and counts what
restoring allocates (the random feature map rebuilt from its seed, the sketch's
buffer), so that a small file whose header names 10^8 random features is refused
up front instead of filling the memory.
"""

from __future__ import annotations

from kernelscale.memory_plans import feature_map_bytes
from kernelscale.model_layout import TEXT, declare_kernel
from kernelscale.model_registry import register_layout

#: The streaming methods a file may hold.
STREAMING_METHODS = ("skpca", "rnca", "nystrom")


def _sketcher(layout, state: dict, header: dict) -> dict:
    """The header's sketcher parameters, checked against the estimator's."""
    sketcher = state.get("sketcher")
    if not isinstance(sketcher, dict) or sketcher.get("method") not in STREAMING_METHODS:
        raise layout.error(f"its header's sketcher is {sketcher!r}")
    params = header["params"]
    if sketcher["method"] != params.get("method"):
        raise layout.error(f"its sketch is {sketcher['method']!r}, its parameters say method "
                           f"= {params.get('method')!r}")
    if sketcher.get("n_features_in") != header["n_features_in"]:
        raise layout.error(f"its sketch takes {sketcher.get('n_features_in')!r} features, its "
                           f"header says n_features_in = {header['n_features_in']:,}")
    kernel = {"name": sketcher.get("kernel"), "gamma": sketcher.get("gamma")}
    if sketcher["method"] == "nystrom":
        kernel.update(degree=sketcher.get("degree", 3), coef0=sketcher.get("coef0", 1.0))
    declare_kernel(layout, kernel, "sketch's kernel")
    if sketcher.get("kernel") != params.get("kernel"):
        raise layout.error(f"its sketch's kernel is {sketcher.get('kernel')!r}, its "
                           f"parameters say kernel = {params.get('kernel')!r}")
    layout.seed(sketcher.get("seed"), "sketch's seed")
    layout.count(sketcher.get("chunk_size", 1), "sketch's chunk_size", 1)
    layout.count(sketcher.get("n_samples_seen"), "n_samples_seen")
    return sketcher


def _same(layout, sketcher: dict, params: dict, name: str, default=None) -> int:
    """A size the sketch and the estimator's parameters both state, checked equal."""
    value = layout.count(sketcher.get(name), name, 1)
    stated = params.get(name, default)
    if stated is not None and stated != value:
        raise layout.error(f"its sketch has {name} = {value:,}, its parameters say "
                           f"{stated!r}")
    return value


def streaming_layout(layout, state: dict, header: dict) -> None:
    """Check a ``StreamingKernelPCA`` file's arrays against its header."""
    sketcher = _sketcher(layout, state, header)
    params, d = header["params"], header["n_features_in"]
    method = sketcher["method"]
    if method == "nystrom":
        default = params.get("n_random_features") if params.get("n_landmarks") is None \
            else params["n_landmarks"]
        c = _same(layout, sketcher, {"n_landmarks": default}, "n_landmarks")
        kept = layout.array("landmarks", (None, d)).shape[0]
        if kept > c:
            raise layout.error(f"member landmarks.npy holds {kept:,} rows; the reservoir has "
                               f"{c:,}")
        layout.array("rng_state", (4,), TEXT)
        layout.allocates(f"its {c:,} x {d:,} reservoir", 8 * c * d)
        return
    m = _same(layout, sketcher, params, "n_random_features")
    layout.allocates("its random feature map", feature_map_bytes(sketcher["kernel"], d, m))
    if method == "rnca":
        layout.array("covariance_packed", (m * (m + 1) // 2,))
        layout.allocates(f"its {m:,} x {m:,} covariance", 8 * m * m)
        return
    l = _same(layout, sketcher, params, "sketch_size")
    if sketcher.get("shrink") not in ("modified", "classic") \
            or sketcher["shrink"] != params.get("shrink", sketcher["shrink"]):
        raise layout.error(f"its sketch's shrink is {sketcher.get('shrink')!r}")
    rows = layout.array("fd_rows", (None, m)).shape[0]
    if rows >= l:
        raise layout.error(f"member fd_rows.npy holds {rows:,} rows; a sketch of "
                           f"sketch_size = {l:,} keeps fewer")
    layout.array("fd_stats", (3,))
    layout.allocates(f"its {l:,} x {m:,} sketch", 8 * l * m)


register_layout("streaming_kpca", streaming_layout)
