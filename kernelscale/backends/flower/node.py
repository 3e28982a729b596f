"""What a SuperNode does with one message: say which partition it holds, or run one step on it.

Used by the ClientApp's handlers (:mod:`~kernelscale.backends.flower.app`), plain
and secure (:mod:`~kernelscale.backends.flower.secagg`). The worker's state
between rounds is kept, encoded, in the ClientApp's ``context.state``.
"""

from __future__ import annotations

import time

from flwr.app import Context, RecordDict

from kernelscale.backends.flower.wire import STATE, get_payload, put_payload


def hello(context: Context, data_key: str) -> dict:
    """The partition id in this node's config (and the kernelscale version)."""
    config = context.node_config
    if "partition-id" not in config:
        raise ValueError(
            "this SuperNode has no partition-id in its node config; start it with "
            f"--node-config 'partition-id=0 {data_key}=\"/path/to/part0.npy\"'")
    if data_key not in config:
        raise ValueError(f"this SuperNode's node config has no {data_key!r} (the file of "
                         "its partition)")
    import kernelscale

    return {"partition-id": int(config["partition-id"]), "version": kernelscale.__version__}


def run_step(header, content: RecordDict, context: Context):
    """``(reply, seconds)`` of the registered step named in ``header`` on this node's partition."""
    from kernelscale.runtime.cluster import WorkerState, one_blas_thread
    from kernelscale.runtime.inputs import load_partition
    from kernelscale.runtime.ledger import count_words
    from kernelscale.runtime.steps import resolve_step
    from kernelscale.runtime.validation import as_float_matrix

    step = resolve_step(str(header["step"]))  # only kernelscale's registered steps
    data_key, epoch = str(header["data-key"]), int(header["epoch"])
    loaded = load_partition(str(context.node_config[data_key]))
    state = WorkerState(loaded, int(header["worker"]))
    saved = get_payload(context.state, STATE) if STATE + ".tree" in context.state else None
    if saved is not None and saved["epoch"] == epoch:
        for name, value in saved["attributes"].items():
            setattr(state, name, value)
        if saved["normalised"]:  # a validation step replaced the data by its float form
            state.data = as_float_matrix(loaded)
    args = get_payload(content, "args") or ()
    start = time.perf_counter()
    with one_blas_thread():
        reply = step(state, *args)
    seconds = time.perf_counter() - start
    count_words(reply)  # a reply the ledger cannot count is a step error
    attributes = {k: v for k, v in vars(state).items() if k not in ("data", "worker")}
    normalised = bool(saved and saved["epoch"] == epoch and saved["normalised"])
    put_payload(context.state, STATE, {"epoch": epoch, "attributes": attributes,
                                       "normalised": normalised or state.data is not loaded})
    return reply, seconds


__all__ = ["hello", "run_step"]
