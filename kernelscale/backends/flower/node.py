"""What a SuperNode does with one message: say which partition it holds, or run one step on it.

Used by the ClientApp's handlers (:mod:`~kernelscale.backends.flower.app`), plain
and secure (:mod:`~kernelscale.backends.flower.secagg`). The worker's state
between rounds is kept, encoded, in the ClientApp's ``context.state``.

Before a step runs, the node checks what its reply would disclose against the
party's own policy (:mod:`~kernelscale.backends.flower.policy`, from the node
config, which no run can change), and checks the reply again before it leaves.

A message names the node-config key(s) of the data the step runs on
(``data-key``): one key (``partition-path``), or several, whose files the node
stacks row-wise (a vertical party's training block, then its block of new
samples, for a projection).
"""

from __future__ import annotations

import time

from flwr.app import Context, RecordDict

from kernelscale.backends.flower.policy import NodePolicy, PolicyRefusal
from kernelscale.backends.flower.wire import STATE, get_payload, put_payload


def data_keys(value) -> list[str]:
    """The node-config keys a message names: one string, or a list of them."""
    keys = [value] if isinstance(value, str) else [str(k) for k in value]
    if not keys or not all(keys):
        raise ValueError(f"data-key {value!r} names no node-config key.")
    return keys


def node_name(context: Context) -> str:
    """``SuperNode <id> (partition-id <i>)``: how a node names itself in its errors."""
    partition = context.node_config.get("partition-id", "?")
    return f"SuperNode {context.node_id} (partition-id {partition})"


def hello(context: Context, data_key) -> dict:
    """The partition id in this node's config, its policy and the kernelscale version.

    Every key of ``data_key`` must be in the node config, and the policy must be
    well formed: a node that cannot serve the run says so at its first message.
    """
    config = context.node_config
    keys = data_keys(data_key)
    if "partition-id" not in config:
        raise ValueError(
            "this SuperNode has no partition-id in its node config; start it with "
            f"--node-config 'partition-id=0 {keys[0]}=\"/path/to/part0.npy\"'")
    missing = [key for key in keys if key not in config]
    if missing:
        raise ValueError(f"this SuperNode's node config has no {', '.join(map(repr, missing))} "
                         "(the file of its partition)")
    policy = NodePolicy.from_node_config(config)
    import kernelscale

    return {"partition-id": int(config["partition-id"]), "version": kernelscale.__version__,
            "policy": policy.describe()}


def load_node_data(config, keys: list[str]):
    """The partition named by ``keys``: one file, or several stacked row-wise."""
    import numpy as np
    import scipy.sparse as sp

    from kernelscale.runtime.inputs import load_partition

    parts = [load_partition(str(config[key])) for key in keys]
    if len(parts) == 1:
        return parts[0]
    widths = {key: part.shape[1] for key, part in zip(keys, parts, strict=True)}
    if len(set(widths.values())) > 1:
        raise ValueError(f"the files to stack hold different numbers of features: {widths}")
    if any(sp.issparse(p) for p in parts):
        return sp.vstack([sp.csr_matrix(p) for p in parts], format="csr")
    return np.vstack([np.asarray(p) for p in parts])


def run_step(header, content: RecordDict, context: Context):
    """``(reply, seconds)`` of the registered step named in ``header`` on this node's partition.

    The step runs only if this party's policy allows what it discloses for its
    arguments; a reply holding raw rows under a no-rows policy is never returned.
    Either refusal is a :class:`~kernelscale.backends.flower.policy.PolicyRefusal`
    naming this node, the step and the round.
    """
    from kernelscale.runtime.cluster import WorkerState, one_blas_thread
    from kernelscale.runtime.ledger import count_words
    from kernelscale.runtime.steps import resolve_step, step_disclosure
    from kernelscale.runtime.validation import as_float_matrix

    name = str(header["step"])
    step = resolve_step(name)  # only kernelscale's registered steps
    args = get_payload(content, "args") or ()
    policy = NodePolicy.from_node_config(context.node_config)
    where = f"{node_name(context)} refused round {str(header.get('round', '?'))!r}"
    try:
        policy.check_step(name, step_disclosure(step, tuple(args)))
    except PolicyRefusal as exc:
        raise PolicyRefusal(f"{where}: {exc}") from None
    keys, epoch = data_keys(header["data-key"]), int(header["epoch"])
    loaded = load_node_data(context.node_config, keys)
    state = WorkerState(loaded, int(header["worker"]))
    saved = get_payload(context.state, STATE) if STATE + ".tree" in context.state else None
    if saved is not None and saved["epoch"] == epoch:
        for attribute, value in saved["attributes"].items():
            setattr(state, attribute, value)
        if saved["normalised"]:  # a validation step replaced the data by its float form
            state.data = as_float_matrix(loaded)
    start = time.perf_counter()
    with one_blas_thread():
        reply = step(state, *args)
    seconds = time.perf_counter() - start
    count_words(reply)  # a reply the ledger cannot count is a step error
    try:
        policy.check_reply(name, reply, str(header.get("reply-kind", "sketch")))
    except PolicyRefusal as exc:
        raise PolicyRefusal(f"{where}: {exc}") from None
    attributes = {k: v for k, v in vars(state).items() if k not in ("data", "worker")}
    normalised = bool(saved and saved["epoch"] == epoch and saved["normalised"])
    put_payload(context.state, STATE, {"epoch": epoch, "attributes": attributes,
                                       "normalised": normalised or state.data is not loaded})
    return reply, seconds


__all__ = ["data_keys", "hello", "load_node_data", "node_name", "run_step"]
