"""What the two sides of the Flower backend share: message names, records and relay framing.

The master's side (:mod:`~kernelscale.backends.flower.cluster`), the ServerApp and
ClientApp (:mod:`~kernelscale.backends.flower.app`) and the secure sums
(:mod:`~kernelscale.backends.flower.secagg`) all import this module and never
each other's internals: a payload travels as ``<name>.tree`` (a config record)
and ``<name>.arrays`` (an array record) in the format of
:mod:`kernelscale.runtime.codec`; a record dict crosses the relay connection as
Flower's protobuf bytes; an array as ``.npy`` bytes.
"""

from __future__ import annotations

import io
import json

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict
from flwr.common import serde
from flwr.proto.recorddict_pb2 import RecordDict as RecordDictProto

from kernelscale.runtime import codec

QUERY = "query.kernelscale"
HEADER = "kernelscale"
STATE = "kernelscale.state"
DEFAULT_DATA_KEY = "partition-path"
POLL_SECONDS = 0.02  # the relay's and SecAgg+'s wait between two pulls of the Grid
# Flower's first wait for a message object that is not stored yet is 1 s, doubling
# (PULL_INITIAL_BACKOFF); a message is often announced before its content arrives.
OBJECT_BACKOFF_SECONDS = (0.01, 0.05)  # our first wait, longest wait (doubling)
NODE_CHECK_SECONDS = 1.0  # how often a round asks the Grid which nodes are still there
# Flower's error codes for a node or message that is gone (flwr.common.constant.ErrorCode).
LOST_CODES = (3, 4, 5, 8)  # message unavailable, reply unavailable, node unavailable, crashed


#: Payloads up to this many array bytes travel inside a config record (``.npy`` bytes);
#: larger ones as Flower arrays, which it sends in 5 MB chunks.
INLINE_BYTES = 1 << 20


def _holder(content: RecordDict, name: str, create: bool):
    """The config record that holds ``<name>.tree``: the message's header record when it
    has one (one Flower object for the header and the payload), else its own record."""
    if HEADER in content:
        header = content[HEADER]
        if create or f"{name}.tree" in header:
            return header
    if f"{name}.tree" in content:
        return content[f"{name}.tree"]
    if create:
        content[f"{name}.tree"] = ConfigRecord()
        return content[f"{name}.tree"]
    return None


def put_payload(content: RecordDict, name: str, payload) -> None:
    """Store ``payload`` in ``content`` under ``name``, in as few Flower objects as can be.

    Flower moves a message as one object per record, array and array chunk, each
    announced, then pushed and pulled in its own request at every hop (the
    ServerApp, the SuperLink, the SuperNode, the ClientApp). So the payload's
    tree (:mod:`kernelscale.runtime.codec`) and, up to :data:`INLINE_BYTES`,
    its arrays as ``.npy`` bytes go into the message's header record
    (``<name>.tree``, ``<name>.npy``): a message of three objects (the message,
    its record dict, that record) instead of five plus two per array. Larger
    arrays go in an array record ``<name>.arrays``, which Flower chunks.
    """
    tree, arrays = codec.encode(payload)
    record = _holder(content, name, create=True)
    record[f"{name}.tree"] = tree
    if sum(a.nbytes for a in arrays) <= INLINE_BYTES:
        record[f"{name}.npy"] = [to_npy(a) for a in arrays]
    else:
        content[f"{name}.arrays"] = ArrayRecord({str(i): Array(a) for i, a in enumerate(arrays)})


def get_payload(content: RecordDict, name: str):
    """The payload stored by :func:`put_payload` (``None`` if absent)."""
    record = _holder(content, name, create=False)
    if record is None:
        return None
    if f"{name}.npy" in record:
        arrays = [from_npy(blob) for blob in record[f"{name}.npy"]]
    else:
        stored = content[f"{name}.arrays"]
        arrays = [stored[str(i)].numpy() for i in range(len(stored))]
    return codec.decode(str(record[f"{name}.tree"]), arrays)


def to_bytes(content: RecordDict) -> bytes:
    """A RecordDict as Flower's protobuf bytes (for the relay connection)."""
    return serde.recorddict_to_proto(content).SerializeToString()


def from_bytes(data: bytes) -> RecordDict:
    proto = RecordDictProto()
    proto.ParseFromString(data)
    return serde.recorddict_from_proto(proto)


def send(connection, header: dict, *blobs: bytes) -> None:
    """One relay message: a JSON header, then its binary blobs."""
    connection.send_bytes(json.dumps(header).encode())
    for blob in blobs:
        connection.send_bytes(blob)


def to_npy(array: np.ndarray) -> bytes:
    """An array as .npy bytes (no pickle)."""
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def from_npy(blob: bytes) -> np.ndarray:
    """The array of :func:`to_npy` (no pickle)."""
    return np.load(io.BytesIO(blob), allow_pickle=False)


__all__ = ["HEADER", "INLINE_BYTES", "LOST_CODES", "NODE_CHECK_SECONDS", "OBJECT_BACKOFF_SECONDS",
           "QUERY", "STATE", "from_bytes",
           "from_npy", "get_payload", "put_payload", "send", "to_bytes", "to_npy"]
