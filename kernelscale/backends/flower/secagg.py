"""Secure sums on Flower: a summed round through Flower's SecAgg+ (the server sees only the sum).

Flower 1.41 masks only ``train`` messages in the legacy FitIns / FitRes layout
(``secaggplus_mod`` passes every other message type through) and its
``SecAggPlusWorkflow`` only runs inside a ``LegacyContext`` with a ``Strategy``.
So a secure round is one SecAgg+ "fit round" of a small strategy shim:

* ``configure_fit`` gives every node a FitIns whose config holds our usual
  ``query.kernelscale`` content (the step's name and its arguments);
* on the node, ``secaggplus_mod`` runs its four stages (setup: public keys;
  share keys: encrypted key shares through the server; collect masked vectors:
  our step runs and its reply, every number of it, is clipped to
  ``[-secure_range, secure_range]``, quantised to ``secure_levels`` levels,
  masked with pairwise and private masks modulo ``2**32``; unmask: key shares to
  remove the masks);
* ``aggregate_fit`` receives only the unmasked average; times the number of
  clients it is the sum.

What crosses the network is recorded for the ledger: the masked uploads (kind
``secure_sum``, one word per quantised entry) and SecAgg+'s own messages (kind
``secagg``, bytes / 8). The masked vectors the server received are handed back
too, so that a test can check that none of them reveals its client's reply.

The sum is approximate: each client adds at most one quantisation step
(``2 secure_range / secure_levels``) per entry (stochastic rounding).
"""

from __future__ import annotations

import math
import time

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.common import (
    Code,
    FitIns,
    FitRes,
    Parameters,
    Status,
    ndarrays_to_parameters,
    parameters_to_ndarrays,
)
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS, Key
from flwr.compat.common import recorddict_compat as compat
from flwr.server.compat.grid_client_proxy import GridClientProxy
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.strategy import Strategy
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD

from kernelscale.backends.flower.node import run_step
from kernelscale.backends.flower.wire import (
    HEADER,
    LOST_CODES,
    NODE_CHECK_SECONDS,
    POLL_SECONDS,
    from_bytes,
    send,
    to_npy,
)
from kernelscale.runtime import codec

SECURE = "kernelscale"  # the FitIns config key holding our message
STAGES = ("setup", "share keys", "collect masked vectors", "unmask")


# ----------------------------------------------------------------- the node

def secure_reply_arrays(reply, secure_range: float) -> tuple[str, list[np.ndarray]]:
    """A summed reply as float64 arrays (numbers included) and a tree holding no value."""

    def numbers(obj):
        if obj is None or isinstance(obj, str) or hasattr(obj, "tocsr"):
            raise TypeError("a secure sum needs replies of dense arrays and numbers only "
                            f"(got {type(obj).__name__})")
        if isinstance(obj, dict):
            parts = {k: numbers(v) for k, v in obj.items()}
            return type(obj)(**parts) if type(obj) is not dict else parts
        if isinstance(obj, (list, tuple)):
            return type(obj)(numbers(v) for v in obj)
        return np.array(obj, dtype=np.float64)

    tree, arrays = codec.encode(numbers(reply))
    largest = max((float(np.abs(a).max()) for a in arrays if a.size), default=0.0)
    if largest > secure_range:
        raise ValueError(f"a value of this client's reply ({largest:.3g}) lies outside the "
                         f"secure range +-{secure_range:g}: raise secure_range")
    return tree, arrays


def handle_secure_train(message: Message, context: Context) -> Message:
    """The ``train`` handler behind ``secaggplus_mod``: run the step, reply in FitRes form."""
    fitins = compat.recorddict_to_fitins(message.content, keep_input=True)
    content = from_bytes(fitins.config[SECURE])
    header = content[HEADER]
    reply, seconds = run_step(header, content, context)
    tree, arrays = secure_reply_arrays(reply, float(header["secure-range"]))
    fitres = FitRes(Status(Code.OK, ""), ndarrays_to_parameters(arrays), 1,
                    {"tree": tree, "seconds": float(seconds)})
    return Message(compat.fitres_to_recorddict(fitres, keep_input=True), reply_to=message)


# ----------------------------------------------------------------- the server

class _SumStrategy(Strategy):
    """The strategy shim: our FitIns per node in, the aggregated vector out."""

    def __init__(self, fitins: dict, grid, run_id: int):
        self.fitins, self.grid, self.run_id = fitins, grid, run_id
        self.results: list = []
        self.failures: list = []

    def configure_fit(self, server_round, parameters, client_manager):
        return [(GridClientProxy(node, self.grid, self.run_id), ins)
                for node, ins in self.fitins.items()]

    def aggregate_fit(self, server_round, results, failures):
        self.results, self.failures = list(results), list(failures)
        return None, {}

    def initialize_parameters(self, client_manager):
        return None

    def configure_evaluate(self, server_round, parameters, client_manager):
        return []

    def aggregate_evaluate(self, server_round, results, failures):
        return None, {}

    def evaluate(self, server_round, parameters):
        return None


class _WatchedGrid:
    """The Grid as SecAgg+ uses it: polling fast, recording every message's size, and
    which node was lost (no reply within the timeout, gone from the Grid, or
    reported gone by Flower) or failed, at which stage."""

    def __init__(self, grid):
        self.grid = grid
        self.transcript: list = []  # [stage, node, direction, kind, words, bytes]
        self.masked: dict[int, list[np.ndarray]] = {}
        self.lost: dict[int, list] = {}  # node -> [stage, reason]
        self.errors: dict[int, list] = {}  # node -> [stage, reason]
        self.stage = 0

    def __getattr__(self, name):
        return getattr(self.grid, name)

    def send_and_receive(self, messages, *, timeout=None):
        messages = list(messages)
        stage = STAGES[min(self.stage, len(STAGES) - 1)]
        self.stage += 1
        for m in messages:
            words, nbytes = _secagg_size(m.content)
            self.transcript.append([stage, m.metadata.dst_node_id, "down", "secagg", words,
                                    nbytes])
        ids = list(self.grid.push_messages(messages))
        pending = {mid: m.metadata.dst_node_id for mid, m in zip(ids, messages, strict=True)
                   if mid}
        for mid, m in zip(ids, messages, strict=True):
            if not mid:
                self.lost[m.metadata.dst_node_id] = [stage, "the SuperLink refused the message"]
        timeout = timeout if timeout is not None else 600.0
        deadline = time.monotonic() + timeout
        next_check = time.monotonic() + NODE_CHECK_SECONDS
        replies = []
        while pending and time.monotonic() < deadline:
            for reply in self.grid.pull_messages(list(pending)):
                node = pending.pop(reply.metadata.reply_to_message_id, None)
                if node is None:
                    continue
                replies.append(reply)
                if not reply.has_error():
                    self._record_reply(stage, reply)
                elif int(reply.error.code) in LOST_CODES:
                    self.lost[node] = [stage, str(reply.error.reason)]
                else:
                    self.errors[node] = [stage, str(reply.error.reason)]
            if pending and time.monotonic() > next_check:
                alive = set(self.grid.get_node_ids())
                for mid, node in list(pending.items()):
                    if node not in alive:
                        del pending[mid]
                        self.lost[node] = [stage, "the node left the federation"]
                next_check = time.monotonic() + NODE_CHECK_SECONDS
            if pending:
                time.sleep(POLL_SECONDS)
        for node in pending.values():
            self.lost[node] = [stage, f"no reply within the round timeout ({timeout:g} s)"]
        return replies

    def _record_reply(self, stage: str, reply) -> None:
        node = reply.metadata.src_node_id
        configs = reply.content.config_records.get(RECORD_KEY_CONFIGS)
        if stage == "collect masked vectors" and configs is not None:
            from flwr.common import bytes_to_ndarray

            vectors = [bytes_to_ndarray(b) for b in configs[Key.MASKED_PARAMETERS]]
            self.masked[node] = vectors
            size = sum(v.size for v in vectors)
            self.transcript.append([stage, node, "up", "secure_sum", size,
                                    sum(len(b) for b in configs[Key.MASKED_PARAMETERS])])
            rest = ConfigRecord({k: v for k, v in configs.items()
                                 if k != Key.MASKED_PARAMETERS})
            words, nbytes = _secagg_size(RecordDict({RECORD_KEY_CONFIGS: rest}))
        else:
            words, nbytes = _secagg_size(reply.content)
        if words:
            self.transcript.append([stage, node, "up", "secagg", words, nbytes])


def _secagg_size(content: RecordDict) -> tuple[int, int]:
    """Words (bytes / 8, at least one per value) and bytes of SecAgg+'s own config values."""
    nbytes = count = 0
    configs = content.config_records.get(RECORD_KEY_CONFIGS)
    for value in (configs or {}).values():
        for item in value if isinstance(value, list) else [value]:
            count += 1
            nbytes += len(item) if isinstance(item, (bytes, str)) else 8
    return max(count, math.ceil(nbytes / 8)), nbytes


class _DropTolerantSecAggPlus(SecAggPlusWorkflow):
    """Flower's SecAgg+ workflow, made to survive a client lost before its key shares went out.

    Flower 1.42's ``unmask_stage`` calls every sampled client that is no longer
    active "dead" and asks the others for its secret-key share. A client lost
    during the setup or share-keys stage never sent shares, so the surviving
    clients fail with ``KeyError`` in ``secaggplus_mod`` (``sk1_share_dict``) and
    the server could not rebuild its key anyway; yet no pairwise mask with it was
    ever added (a client masks only with those whose shares it received). So
    before the unmask stage the dead clients are only those that shared keys and
    then were lost, and a dead client's masks are removed only with the clients
    whose masked vectors are in the sum.
    """

    def share_keys_stage(self, grid, context, state) -> bool:
        ok = super().share_keys_stage(grid, context, state)
        state.keyed_node_ids = set(state.active_node_ids)
        return ok

    def unmask_stage(self, grid, context, state) -> bool:
        keyed, active = state.keyed_node_ids, set(state.active_node_ids)
        state.sampled_node_ids = keyed
        state.nid_to_neighbours = {
            nid: (neighbours & keyed) if nid in active else (neighbours & active) | {nid}
            for nid, neighbours in state.nid_to_neighbours.items() if nid in keyed}
        return super().unmask_stage(grid, context, state)


def grid_secure_sum(grid, request: dict, blobs: list[bytes]):
    """Run one secure round on the Grid: ``(header, sums, {node: masked arrays})``.

    The header says which nodes answered (their masked vectors are in the sum),
    which were lost and which failed (``{node: [stage, reason]}``); ``tree`` is
    ``None`` when SecAgg+ could not finish (too few clients left for its
    reconstruction threshold, or a client failed).
    """
    nodes = [int(node) for node, _ in request["messages"]]
    fitins = {node: FitIns(Parameters([], ""), {SECURE: blob})
              for node, blob in zip(nodes, blobs, strict=True)}
    watched = _WatchedGrid(grid)
    strategy = _SumStrategy(fitins, watched, grid.run.run_id)
    context = LegacyContext(Context(run_id=grid.run.run_id, node_id=0, node_config={},
                                    state=RecordDict(), run_config={}), strategy=strategy)
    context.state[MAIN_CONFIGS_RECORD] = ConfigRecord({"current_round": 1})
    context.state[MAIN_PARAMS_RECORD] = ArrayRecord()
    _DropTolerantSecAggPlus(
        num_shares=1.0, reconstruction_threshold=int(request["threshold"]),
        max_weight=1.0, clipping_range=float(request["secure_range"]),
        quantization_range=int(request["secure_levels"]), modulus_range=2**32,
        timeout=float(request["timeout"]),
    )(watched, context)
    answered = {proxy.node_id: res for proxy, res in strategy.results}
    trees = {res.metrics["tree"] for res in answered.values()}
    header = {"event": "secure", "answered": sorted(answered),
              "lost": {str(n): v for n, v in watched.lost.items()},
              "errors": {str(n): v for n, v in watched.errors.items()},
              "failures": [str(f) for f in strategy.failures],
              "seconds": {str(n): float(r.metrics["seconds"]) for n, r in answered.items()},
              "transcript": watched.transcript, "tree": None, "n_sum": 0,
              "masked": {str(n): len(v) for n, v in watched.masked.items()}}
    sums: list[np.ndarray] = []
    if answered and len(trees) == 1 and not watched.errors:
        mean = parameters_to_ndarrays(next(iter(answered.values())).parameters)
        header["tree"], header["n_sum"] = trees.pop(), len(mean)
        sums = [a * len(answered) for a in mean]
    return header, sums, dict(watched.masked)


def relay_secure_sum(grid, connection, request: dict, blobs: list[bytes]) -> None:
    """:func:`grid_secure_sum` for a FlowerCluster: the header, then the sums and the
    masked vectors as .npy blobs."""
    header, sums, masked = grid_secure_sum(grid, request, blobs)
    send(connection, header, *[to_npy(a) for a in sums],
         *[to_npy(v) for node in sorted(masked) for v in masked[node]])


__all__ = ["grid_secure_sum", "handle_secure_train", "relay_secure_sum",
           "secure_reply_arrays"]
