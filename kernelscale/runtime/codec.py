"""Payloads as data, never as code: the wire format of the Flower backend.

A protocol message (a step's arguments, a reply, a worker's state between
rounds) is a nested payload of arrays, CSR matrices, numbers, strings, ``None``,
lists, tuples, dicts and :class:`~kernelscale.runtime.Tagged` parts. It is
split into a *tree* (JSON text: the structure, the scalars, the dtypes) and a
flat list of numpy *arrays* (the numbers, bit for bit, whatever their dtype),
and decoded back without ``pickle``: a receiver only ever builds the types
listed here, so nothing it receives can run code.

Floats travel as ``float.hex`` (exact, NaN and inf included), ints as JSON
integers of any size, numpy scalars as 0-d arrays (their dtype is kept), and a
``numpy.random.Generator`` as its bit generator's name and state (a worker's
own random stream must go on where it stopped in the next round).

>>> import numpy as np
>>> tree, arrays = encode({"x": np.arange(3), "seed": 2**63 - 1, "w": (0.1, None)})
>>> decoded = decode(tree, arrays)
>>> decoded["seed"], decoded["w"], decoded["x"].dtype
(9223372036854775807, (0.1, None), dtype('int64'))
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

from kernelscale.runtime.ledger import Tagged

BIT_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")


def encode(payload) -> tuple[str, list[np.ndarray]]:
    """``(tree, arrays)`` of a payload: JSON text and the arrays it refers to by index.

    Raises
    ------
    TypeError
        For a type outside the wire format (a function, an arbitrary object).
    """
    arrays: list[np.ndarray] = []
    tree = _encode(payload, arrays)
    return json.dumps(tree, separators=(",", ":")), arrays


def decode(tree: str, arrays: Sequence[np.ndarray]):
    """The payload that :func:`encode` split into ``tree`` and ``arrays``."""
    return _decode(json.loads(tree), arrays)


def _array(value: np.ndarray, arrays: list) -> int:
    if value.dtype.kind not in "biufc":
        raise TypeError(f"Cannot send an array of dtype {value.dtype} (numbers and bools only).")
    arrays.append(value if value.flags.c_contiguous else value.copy(order="C"))
    return len(arrays) - 1


def _encode(obj, arrays: list):
    if obj is None:
        return ["none"]
    if isinstance(obj, (bool, np.bool_)) and not isinstance(obj, np.ndarray):
        if isinstance(obj, np.bool_):
            return ["scalar", _array(np.asarray(obj), arrays)]
        return ["bool", obj]
    if isinstance(obj, np.generic):
        return ["scalar", _array(np.asarray(obj), arrays)]
    if isinstance(obj, int):
        return ["int", int(obj)]
    if isinstance(obj, float):
        return ["float", float(obj).hex()]
    if isinstance(obj, str):
        return ["str", obj]
    if isinstance(obj, np.ndarray):
        return ["array", _array(obj, arrays)]
    if sp.issparse(obj):
        if obj.format != "csr":
            raise TypeError(f"Cannot send a sparse {obj.format} matrix; convert it to CSR.")
        return ["csr", list(obj.shape), _array(obj.data, arrays),
                _array(obj.indices, arrays), _array(obj.indptr, arrays)]
    if isinstance(obj, Tagged):
        return ["tagged", [[k, _encode(v, arrays)] for k, v in obj.items()]]
    if isinstance(obj, dict):
        for key in obj:
            if not isinstance(key, (str, int)) or isinstance(key, bool):
                raise TypeError(f"Cannot send a dict with a {type(key).__name__} key.")
        return ["dict", [[_encode(k, arrays), _encode(v, arrays)] for k, v in obj.items()]]
    if isinstance(obj, list):
        return ["list", [_encode(v, arrays) for v in obj]]
    if isinstance(obj, tuple):
        return ["tuple", [_encode(v, arrays) for v in obj]]
    if isinstance(obj, np.random.Generator):
        name = type(obj.bit_generator).__name__
        if name not in BIT_GENERATORS:
            raise TypeError(f"Cannot send a Generator on a {name} bit generator.")
        return ["generator", name, _encode(obj.bit_generator.state, arrays)]
    raise TypeError(f"Cannot send a {type(obj).__name__}: the wire format holds arrays, CSR "
                    "matrices, numbers, strings, None, lists, tuples, dicts and Tagged parts.")


def _decode(node, arrays: Sequence[np.ndarray]):
    tag = node[0]
    if tag == "none":
        return None
    if tag == "bool":
        return bool(node[1])
    if tag == "int":
        return int(node[1])
    if tag == "float":
        return float.fromhex(node[1])
    if tag == "str":
        return str(node[1])
    if tag == "scalar":
        return _fetch(arrays, node[1])[()]
    if tag == "array":
        return _fetch(arrays, node[1])
    if tag == "csr":
        data, indices, indptr = (_fetch(arrays, i) for i in node[2:5])
        return sp.csr_matrix((data, indices, indptr), shape=tuple(int(s) for s in node[1]))
    if tag == "tagged":
        return Tagged(**{str(k): _decode(v, arrays) for k, v in node[1]})
    if tag == "dict":
        return {_decode(k, arrays): _decode(v, arrays) for k, v in node[1]}
    if tag == "list":
        return [_decode(v, arrays) for v in node[1]]
    if tag == "tuple":
        return tuple(_decode(v, arrays) for v in node[1])
    if tag == "generator":
        if node[1] not in BIT_GENERATORS:
            raise ValueError(f"Unknown bit generator {node[1]!r}.")
        bit_generator = getattr(np.random, node[1])()
        bit_generator.state = _decode(node[2], arrays)
        return np.random.Generator(bit_generator)
    raise ValueError(f"Unknown payload tag {tag!r}.")


def _fetch(arrays: Sequence[np.ndarray], index) -> np.ndarray:
    index = int(index)
    if not 0 <= index < len(arrays):
        raise ValueError(f"Payload refers to array {index} of {len(arrays)}.")
    return arrays[index]


__all__ = ["decode", "encode"]
