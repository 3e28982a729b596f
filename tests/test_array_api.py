"""Partitions on a device through the array API, tested without a GPU.

``array-api-strict`` stands in for a GPU library: its arrays on ``device1`` cannot
be mixed with host arrays nor converted to NumPy implicitly, so a step that
forgot to move its landmarks to the partition's device, or a reply that left
the device without :func:`kernelscale.arrays.to_host`, fails here as it would
on CuPy. Every fit is compared with the same fit on the NumPy array: the model
to 1e-12 (float64), and the ledger message for message (words and bytes).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import sklearn

from kernelscale.arrays import is_device_array, to_host
from kernelscale.horizontal.estimator import DistributedKernelPCA
from kernelscale.kernels import make_kernel
from kernelscale.runtime.errors import WorkerError

xp = pytest.importorskip("array_api_strict")
DEVICE = xp.Device("device1")  # not the host: nothing converts to NumPy implicitly


@pytest.fixture
def dispatch(monkeypatch):
    """scikit-learn's array API dispatch (it asks for SCIPY_ARRAY_API=1)."""
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")
    with sklearn.config_context(array_api_dispatch=True):
        yield


def on_device(X):
    return xp.asarray(X, device=DEVICE)


def data(seed=0, n=240, d=5, dtype=np.float64):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((4, d)) * 2.0
    X = centres[rng.integers(4, size=n)] + 0.5 * rng.standard_normal((n, d))
    return X.astype(dtype)


@pytest.mark.parametrize("name, params", [
    ("rbf", {"gamma": 0.3}), ("laplacian", {"gamma": 0.3}), ("poly", {"gamma": 0.2}),
    ("linear", {}), ("arccos", {"order": 2}), ("sigmoid", {"gamma": 0.1}), ("cosine", {}),
    ("rbf", {"gamma": 1e300}),  # the exponent's terms overflow: distances first
])
@pytest.mark.parametrize("dtype, tol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")  # gamma=1e300: exp(-inf) = 0
def test_kernel_blocks_on_device_equal_numpy(name, params, dtype, tol):
    kernel = make_kernel(name, **params)
    X, Y = data(1, 70, dtype=dtype), data(2, 9, dtype=dtype)
    block = kernel(on_device(X), Y, chunk_size=16)  # Y from the host, X on the device
    assert is_device_array(block) and block.device == DEVICE
    assert block.dtype == (xp.float32 if dtype == np.float32 else xp.float64)
    scale = max(1.0, float(np.abs(kernel(X, Y)).max()))
    np.testing.assert_allclose(to_host(block), kernel(X, Y), rtol=0, atol=tol * scale)
    np.testing.assert_allclose(to_host(kernel.diag(on_device(X))), kernel.diag(X), rtol=tol,
                               atol=tol * scale)


FITS = [
    {"method": "diskpca"},
    {"method": "diskpca", "sampler": "paper", "center": False},
    {"method": "uniform_dislr"},
    {"method": "uniform_dislr", "messages": "sketch"},
    {"method": "uniform_batch"},
    {"method": "exact"},
    {"method": None},  # the pilot rule
]


def fit_both(X_host, X_device, **params):
    # The device blocks differ from NumPy's by round-off (squared norms summed in another
    # order); disLR's whitening of K_YY amplifies it by K_YY's condition number, which a
    # bandwidth of about the clusters' spread keeps near 1e-14 here (1e-12 at gamma=0.2).
    options = {"n_components": 4, "n_landmarks": 40, "gamma": 0.5, "random_state": 3,
               "n_workers": 3, **params}
    host = DistributedKernelPCA(**options).fit(X_host)
    device = DistributedKernelPCA(**options).fit(X_device)
    return host, device


@pytest.mark.parametrize("params", FITS, ids=lambda p: "-".join(map(str, p.values())))
@pytest.mark.parametrize("seed", [0, 1])
def test_fit_on_device_equals_numpy_fit(dispatch, params, seed):
    X = data(seed)
    host, device = fit_both(X, on_device(X), **params)
    assert device.communication_ == host.communication_  # every message, words and bytes
    assert device.communication_.total_words("fit") == host.communication_.total_words("fit")
    assert isinstance(device.landmark_coef_, np.ndarray)  # the model lives on the host
    np.testing.assert_allclose(device.landmark_coef_, host.landmark_coef_, rtol=0, atol=1e-12)
    np.testing.assert_allclose(device.eigenvalues_, host.eigenvalues_, rtol=1e-12)
    Z = device.transform(on_device(X[:50]))
    assert Z.device == DEVICE and Z.dtype == xp.float64
    np.testing.assert_allclose(to_host(Z), host.transform(X[:50]), rtol=0, atol=1e-12)


@pytest.mark.parametrize("method", ["diskpca", "uniform_dislr"])
def test_float32_partitions_stay_float32(dispatch, method):
    X = data(4, dtype=np.float32)
    host, device = fit_both(X, on_device(X), method=method)
    assert device.communication_ == host.communication_
    np.testing.assert_allclose(device.landmark_coef_, host.landmark_coef_, rtol=0,
                               atol=1e-4 * np.abs(host.landmark_coef_).max())
    Z = device.transform(on_device(X[:30]))
    assert Z.dtype == xp.float32
    np.testing.assert_allclose(to_host(Z), host.transform(X[:30]), rtol=0, atol=1e-4)


@pytest.mark.parametrize("method", ["diskpca", "uniform_dislr", "uniform_batch"])
def test_device_fit_on_threads_equals_one_thread_and_numpy(dispatch, method):
    # Copies of rows inside partition 0 (rows 0-29 = rows 30-59): their hashes are sorted
    # on the device. Threads (n_jobs, chunks of 32 rows) change the time, not one bit.
    X = data(6)
    X = np.vstack([X[:30], X])
    options = {"n_components": 4, "n_landmarks": 40, "gamma": 0.5, "random_state": 2,
               "chunk_size": 32, "method": method}
    parts = np.array_split(X, 3)
    host = DistributedKernelPCA(**options).fit(parts)
    one = DistributedKernelPCA(**options).fit([on_device(p) for p in parts])
    threads = DistributedKernelPCA(n_jobs=3, **options).fit([on_device(p) for p in parts])
    assert threads.communication_ == one.communication_ == host.communication_
    np.testing.assert_array_equal(threads.landmark_coef_, one.landmark_coef_)
    np.testing.assert_allclose(one.landmark_coef_, host.landmark_coef_, rtol=0, atol=1e-12)


def test_partition_lists_and_given_landmarks(dispatch):
    X = data(5)
    parts = [X[:60], X[60:150], X[150:]]
    landmarks = X[::7]
    for params in ({"method": "diskpca"}, {"method": "uniform_dislr", "landmarks": landmarks},
                   {"method": "uniform_batch", "landmarks": landmarks}):
        host, device = fit_both(parts, [on_device(p) for p in parts], **params)
        assert device.communication_ == host.communication_
        np.testing.assert_allclose(device.landmark_coef_, host.landmark_coef_, rtol=0, atol=1e-12)


def test_device_array_without_dispatch_is_refused():
    with pytest.raises(TypeError, match="array_api_dispatch=True"):
        DistributedKernelPCA(n_components=2, n_landmarks=20).fit(on_device(data()))
    fitted = DistributedKernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(data())
    with pytest.raises(TypeError, match="convert X to a NumPy array"):
        fitted.transform(on_device(data()[:5]))


def test_host_array_api_input_without_dispatch_is_converted():
    """As scikit-learn does: an array that converts to NumPy is converted."""
    X = data(6)
    options = {"n_components": 3, "n_landmarks": 30, "gamma": 0.2, "random_state": 1}
    host = DistributedKernelPCA(**options).fit(X)
    converted = DistributedKernelPCA(**options).fit(xp.asarray(X))  # array-api-strict's CPU
    assert converted.communication_ == host.communication_
    np.testing.assert_array_equal(converted.landmark_coef_, host.landmark_coef_)
    assert isinstance(converted.transform(xp.asarray(X[:5])), np.ndarray)


def test_methods_and_kernels_without_a_device_path_say_so(dispatch):
    X = on_device(data())
    with pytest.raises(WorkerError, match="method='random_features' has no device path"):
        DistributedKernelPCA(n_components=2, method="random_features").fit(X)
    with pytest.raises(WorkerError, match="The chi2 kernel has no device path"):
        DistributedKernelPCA(n_components=2, n_landmarks=20, kernel="chi2",
                             method="uniform_dislr").fit(on_device(np.abs(data())))


def test_bad_device_partitions_get_the_usual_errors(dispatch):
    X = data()
    X[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite"):
        DistributedKernelPCA(n_components=2, n_landmarks=20).fit(on_device(X))
    with pytest.raises(ValueError, match="2-D"):
        DistributedKernelPCA(n_components=2).fit(on_device(np.ones(5)))
    fitted = DistributedKernelPCA(n_components=2, n_landmarks=20, random_state=0).fit(
        on_device(data()))
    with pytest.raises(ValueError, match="features"):
        fitted.transform(on_device(np.ones((3, 2))))


@pytest.mark.parametrize(("scale", "word"), [(1e200, "overflow"), (1e-200, "underflow")])
def test_device_values_that_overflow_or_underflow_say_so(dispatch, scale, word):
    """The workers' magnitude check (issue 34) reads device partitions on their device,
    naming the same cause as the NumPy fit and saying to scale the data."""
    X = data() * scale
    with pytest.raises(ValueError, match=word) as on_host:
        DistributedKernelPCA(n_components=2, n_landmarks=20).fit(X)
    with pytest.raises(ValueError, match=word) as on_device_:
        DistributedKernelPCA(n_components=2, n_landmarks=20).fit(on_device(X))
    assert "scale" in str(on_device_.value) and "scale" in str(on_host.value)


def test_sparse_input_is_unchanged(dispatch):
    X = sp.random(120, 30, density=0.2, format="csr", random_state=0)
    options = {"n_components": 2, "n_landmarks": 20, "random_state": 0}
    fitted = DistributedKernelPCA(**options).fit(X)
    assert isinstance(fitted.transform(X[:4]), np.ndarray)


def test_gpu_benchmark_runs_on_a_cpu_namespace(monkeypatch, tmp_path, capsys):
    """benchmarks/gpu.py: without a GPU library the full run says so and stops; --quick runs
    the device code path on array-api-strict, with the CPU fit's ledger and model."""
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "benchmarks"))
    monkeypatch.setenv("SCIPY_ARRAY_API", "1")  # gpu.main sets it otherwise, for the whole session
    import gpu

    found = gpu.find_library
    monkeypatch.setattr(gpu, "find_library", lambda *_: (None, "cupy: not installed"))
    assert gpu.main(["--out", str(tmp_path)]) is None  # a machine without a GPU
    assert "no GPU library usable (cupy: not installed)" in capsys.readouterr().out
    monkeypatch.setattr(gpu, "find_library", found)
    (row,) = gpu.main(["--quick", "--library", "strict", "--sizes", "600", "--landmarks",
                       "12", "--dtypes", "float64", "--workers", "2", "--out", str(tmp_path)])
    assert row["library"] == "array-api-strict" and row["ledger_equal"]
    assert row["max_coef_diff"] < 1e-10 and row["device_floor_s"] > 0
    assert (tmp_path / "quick" / "summary.md").exists()


def test_approximation_error_of_device_data_runs_on_the_host(dispatch):
    X = data(7)
    host, device = fit_both(X, on_device(X), method="uniform_dislr")
    expected = host.approximation_error(X, reference=False)
    got = device.approximation_error(on_device(X), reference=False)
    assert got["error"] == pytest.approx(expected["error"], rel=1e-12)


def test_numpy_and_sparse_inputs_never_reach_the_namespace_code(monkeypatch):
    """NumPy and CSR partitions take the path they took before devices existed: the
    array API machinery (array-api-compat) is never consulted for them."""
    import kernelscale.arrays

    def refuse():
        raise AssertionError("the array API namespace was consulted for host input")

    monkeypatch.setattr(kernelscale.arrays, "_compat", refuse)
    X = data(8)
    for params in FITS:
        fitted = DistributedKernelPCA(n_components=3, n_landmarks=24, gamma=0.5,
                                      random_state=0, **params).fit(X)
        fitted.transform(X[:5])
    X_sparse = sp.random(80, 20, density=0.3, format="csr", random_state=1)
    DistributedKernelPCA(n_components=2, n_landmarks=15, random_state=0).fit(
        X_sparse).transform(X_sparse[:3])
