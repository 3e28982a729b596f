"""The Flower backend's wire format: payloads round-trip bit for bit, without pickle."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from kernelscale.runtime import Tagged
from kernelscale.runtime.codec import decode, encode


def _roundtrip(payload):
    tree, arrays = encode(payload)
    json.loads(tree)  # plain JSON text
    # what crosses the wire: the arrays' bytes, dtype and shape
    arrays = [np.frombuffer(a.tobytes(), dtype=a.dtype).reshape(a.shape) for a in arrays]
    return decode(tree, arrays)


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
    elif sp.issparse(a):
        assert a.shape == b.shape and a.format == b.format == "csr"
        for x, y in [(a.data, b.data), (a.indices, b.indices), (a.indptr, b.indptr)]:
            _same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            _same(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    elif isinstance(a, float):
        assert np.float64(a).tobytes() == np.float64(b).tobytes()
    else:
        assert a == b


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_nested_payloads_round_trip_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    payload = {
        "float64": rng.standard_normal((4, 3)),
        "float32": rng.standard_normal(5).astype(np.float32),
        "int64": rng.integers(-(2**63), 2**63 - 1, size=6, dtype=np.int64),
        "bool": rng.random(7) > 0.5,
        "transposed": rng.standard_normal((3, 2)).T,
        "empty": np.zeros((0, 3)),
        "csr": sp.random(5, 4, density=0.4, format="csr", random_state=seed),
        "scalars": (np.float64(rng.standard_normal()), np.int64(-3), np.bool_(True)),
        "numbers": [0.1, -0.0, float("inf"), float("nan"), 2**63 - 1, 2**63, -(2**70), True],
        "text": "gamma: moments",
        "none": None,
        7: [(), [], {}],
        "tagged": Tagged(scalars=np.arange(3.0), seed=12345),
    }
    _same(payload, _roundtrip(payload))
    assert isinstance(_roundtrip(payload)["tagged"], Tagged)


def test_a_random_generator_goes_on_where_it_stopped():
    rng = np.random.default_rng(42)
    rng.random(5)
    copy = _roundtrip({"rng": rng})["rng"]
    np.testing.assert_array_equal(copy.random(10), rng.random(10))


@pytest.mark.parametrize(
    "bad", [len, object(), {(1, 2): 3}, np.array(["a"]), sp.coo_matrix((2, 2))])
def test_anything_but_data_is_refused(bad):
    with pytest.raises(TypeError):
        encode(bad)


def test_an_unknown_tag_is_refused():
    with pytest.raises(ValueError, match="Unknown payload tag"):
        decode('["pickle", "cos\\nsystem"]', [])
    with pytest.raises(ValueError, match="refers to array"):
        decode('["array", 3]', [])


def test_the_supernode_launcher_shortens_only_flowers_fixed_waits():
    from types import SimpleNamespace

    from kernelscale.backends.flower.supernode import _Waits

    slept, now = [], [7.0]
    fake_time = SimpleNamespace(sleep=slept.append, monotonic=lambda: now[0])
    clock = _Waits(0.1, idle_seconds=0.4, active_seconds=5.0, reply_seconds=0.01,
                   clock=fake_time)
    clock.sleep(3)  # after an empty poll of the SuperLink, while active
    clock.sleep(0.5)  # while waiting for the ClientApp's reply
    clock.sleep(0.25)
    assert slept == [0.1, 0.01, 0.25]
    now[0] = 13.0  # 6 s without a message: the idle interval
    clock.sleep(3)
    clock.saw_message()  # a message: the short interval again
    clock.sleep(3)
    assert slept[3:] == [0.4, 0.1]
    assert clock.monotonic() == 13.0


def test_a_node_polls_a_slow_superlink_less_often():
    from types import SimpleNamespace

    from kernelscale.backends.flower.supernode import _Waits

    slept, now = [], [0.0]
    fake_time = SimpleNamespace(sleep=slept.append, monotonic=lambda: now[0])
    clock = _Waits(0.02, idle_seconds=0.2, active_seconds=5.0, clock=fake_time,
                   latency_factor=4.0)
    clock.polled(0.002)  # a quick answer: the short interval
    clock.sleep(3)
    clock.polled(0.05)  # a busy SuperLink: four times the poll's own time
    clock.sleep(3)
    clock.sleep(0.5)  # the wait for the ClientApp's reply is not a poll's
    now[0] = 10.0  # idle: the longer of the idle interval and four polls
    clock.sleep(3)
    clock.polled(0.01)
    clock.sleep(3)
    assert slept == pytest.approx([0.02, 0.2, 0.005, 0.2, 0.2])
    clock.polled(0.1)
    clock.sleep(3)
    assert slept[-1] == pytest.approx(0.4)


@pytest.mark.parametrize("text", ["abc", "-1", "nan", "inf"])
def test_the_supernode_launcher_refuses_a_bad_wait_setting(monkeypatch, text):
    from kernelscale.backends.flower.supernode import LATENCY_ENV, _env_number

    monkeypatch.setenv(LATENCY_ENV, text)
    with pytest.raises(SystemExit, match=f"{LATENCY_ENV}='{text}': give a number of 0 or more"):
        _env_number(LATENCY_ENV, 4.0)
    monkeypatch.setenv(LATENCY_ENV, "0")  # 0: a fixed interval, no wait for a slow poll
    assert _env_number(LATENCY_ENV, 4.0) == 0.0
