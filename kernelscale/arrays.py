"""Partitions on a device: the array API helpers, in one place.

A worker's partition may be a GPU array (a CuPy array, a CUDA ``torch.Tensor``)
or any other array of the `array API standard <https://data-apis.org/array-api/>`_
(``array-api-strict`` in the tests). Following scikit-learn's convention, such
input is opt-in: with ``sklearn.set_config(array_api_dispatch=True)`` (or inside
``sklearn.config_context(array_api_dispatch=True)``) the estimators keep it on its
device, and the workers compute their kernel blocks, residuals and Gram sums there
(:mod:`kernelscale.kernels` dispatches to :mod:`kernelscale.device_kernels`), in the partition's
dtype, with the sums accumulated in float64. Without dispatch an array that
converts to NumPy is converted, as scikit-learn does; one that does not (a GPU
array) gets one error that says to enable dispatch or convert it.

Messages keep their content: a worker moves what it sends to the host
(:func:`to_host`) at the message boundary, so the ledger counts the same words,
and the master's small eigenproblems stay on the host. NumPy arrays and CSR
matrices never enter this module's device paths: :func:`is_device_array` is one
``isinstance`` test for them.

The namespace comes from ``array-api-compat`` (the ``gpu`` extra), or from the
copy vendored in scikit-learn when it is not installed.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

_COMPAT = None


def _compat():
    """The ``array_api_compat`` module (standalone, or scikit-learn's vendored copy)."""
    global _COMPAT
    if _COMPAT is None:
        try:
            import array_api_compat
        except ImportError:  # pragma: no cover - scikit-learn vendors it
            from sklearn.externals import array_api_compat
        _COMPAT = array_api_compat
    return _COMPAT


def is_device_array(X) -> bool:
    """Whether ``X`` is an array of the array API other than a NumPy array.

    NumPy arrays, CSR matrices, lists, dask arrays and DataFrames are not (a
    dask array of CuPy chunks is a set of device partitions, see
    :func:`is_device_input`).
    """
    if isinstance(X, np.ndarray) or sp.issparse(X) or X is None:
        return False
    module = type(X).__module__
    if module.startswith(("dask", "pandas", "polars", "builtins")):
        return False
    compat = _compat()
    return bool(compat.is_array_api_obj(X)) and not compat.is_numpy_array(X)


def is_device_input(X) -> bool:
    """A device array, a list of them, or a dask array whose chunks are device arrays."""
    if isinstance(X, (list, tuple)):
        return len(X) > 0 and any(is_device_array(p) for p in X)
    if type(X).__module__.startswith("dask.array") and hasattr(X, "_meta"):
        return is_device_array(X._meta)
    return is_device_array(X)


def namespace(X):
    """The array API namespace of a device array."""
    return _compat().array_namespace(X)


def device(X):
    """The device of a device array."""
    return _compat().device(X)


def describe(X) -> str:
    """``'a <type> on <device>'`` for error messages."""
    try:
        where = f" on {device(X)}"
    except Exception:  # noqa: BLE001 - only for a message
        where = ""
    return f"a {type(X).__module__.split('.')[0]} {type(X).__name__}{where}"


def to_host(X) -> np.ndarray:
    """A NumPy copy of a device array (NumPy and CSR input is returned as it is).

    The copy at the message boundary: what a worker sends is always on the host.
    """
    if isinstance(X, np.ndarray) or sp.issparse(X):
        return X
    compat = _compat()
    if compat.is_cupy_array(X):
        return X.get()
    if compat.is_torch_array(X):
        return X.detach().cpu().numpy()
    if compat.is_jax_array(X):
        return np.asarray(X)
    return np.from_dlpack(X)  # array-api-strict (any of its devices), others with DLPack


def to_device_of(A, like, dtype=None):
    """``A`` (host or device) as an array of ``like``'s namespace, on its device."""
    xp = namespace(like)
    if isinstance(A, np.ndarray):
        A = np.ascontiguousarray(A)
    if dtype is not None:
        return xp.asarray(A, dtype=dtype, device=device(like))
    return xp.asarray(A, device=device(like))


def is_float32(X) -> bool:
    """Whether the (host or device) array holds float32."""
    if isinstance(X, np.ndarray) or sp.issparse(X):
        return X.dtype == np.float32
    return X.dtype == namespace(X).float32


def rows(X, start: int, stop: int):
    """Rows ``start:stop`` (the array API asks for every axis in an index, within bounds)."""
    if isinstance(X, np.ndarray) or sp.issparse(X):
        return X[start:stop]
    return X[start:min(stop, X.shape[0]), ...]


def take_rows(X, index):
    """Rows ``index`` (an integer NumPy array) of a host or device array, on its device."""
    if isinstance(X, np.ndarray) or sp.issparse(X):
        return X[index]
    xp = namespace(X)
    return xp.take(X, xp.asarray(np.asarray(index, dtype=np.int64), device=device(X)), axis=0)


def as_float_device_matrix(X):
    """A 2-D real floating device array (integers and booleans become float64), or an error.

    The worker's check of a device partition (:mod:`kernelscale.runtime.validation`).
    """
    xp = namespace(X)
    if X.ndim != 2:
        raise ValueError(f"data must be 2-D (n_samples, n_features), got shape {tuple(X.shape)}.")
    if xp.isdtype(X.dtype, "complex floating"):
        raise ValueError(f"Complex data not supported: the partition has dtype {X.dtype}; pass "
                         "its real part, or the real and imaginary parts as separate columns.")
    if not xp.isdtype(X.dtype, ("real floating", "integral", "bool")):
        raise ValueError(f"data must be numeric, got dtype {X.dtype}.")
    if X.dtype not in (xp.float32, xp.float64):
        X = xp.astype(X, xp.float64)
    return X


def count_nonfinite_on_device(X, chunk: int) -> int:
    """NaN and inf entries of a device matrix, in row chunks."""
    xp = namespace(X)
    counts = [xp.count_nonzero(~xp.isfinite(rows(X, start, start + chunk)))
              for start in range(0, X.shape[0], chunk)]
    return int(sum(counts)) if counts else 0  # one device-to-host copy


def magnitude_on_device(X, chunk: int) -> tuple[float, float]:
    """``(largest |value|, largest squared row norm)`` of a device matrix, in row chunks
    (:func:`kernelscale.runtime.validation.magnitude`'s numbers, computed on its device:
    the norms of the rows divided by the largest value, so neither overflows)."""
    xp = namespace(X)
    if X.shape[0] == 0 or X.shape[1] == 0:
        return 0.0, 0.0
    largest = max(float(xp.max(xp.abs(rows(X, start, start + chunk))))
                  for start in range(0, X.shape[0], chunk))
    if largest == 0.0 or not np.isfinite(largest):
        return largest, largest
    top = 0.0
    for start in range(0, X.shape[0], chunk):
        scaled = xp.astype(rows(X, start, start + chunk), xp.float64) / largest
        top = max(top, float(xp.max(xp.sum(scaled * scaled, axis=1))))
    with np.errstate(over="ignore", under="ignore"):
        return largest, float(np.float64(largest) ** 2 * top)


def dispatch_enabled() -> bool:
    """scikit-learn's ``array_api_dispatch`` setting in this thread."""
    from sklearn import get_config  # on first use: a slow import

    return bool(get_config().get("array_api_dispatch", False))


def accept_device_input(X, name: str = "X"):
    """``X`` as the estimators take it: device input kept under array API dispatch.

    NumPy, CSR, loaders and other input are returned as they are (one
    ``isinstance`` test). A device array (or a list of them, or a dask array of
    device chunks) is kept on its device when scikit-learn's ``array_api_dispatch``
    is on; without it, it is converted to NumPy as scikit-learn does, and one that
    cannot be (a GPU array) raises a ``TypeError`` that says what to do.
    """
    if isinstance(X, np.ndarray) or sp.issparse(X) or not is_device_input(X):
        return X
    if dispatch_enabled():
        return X
    parts = X if isinstance(X, (list, tuple)) else [X]
    try:
        if type(X).__module__.startswith("dask.array"):
            raise TypeError("a dask array of device chunks")
        converted = [np.asarray(p) if is_device_array(p) else p for p in parts]
    except (TypeError, RuntimeError, ValueError) as exc:
        first = next(p for p in parts if is_device_array(p)) if isinstance(
            X, (list, tuple)) else getattr(X, "_meta", X)
        raise TypeError(
            f"{name} is {describe(first)}, which scikit-learn's array API dispatch is off "
            "for. Enable it to fit on the array's device: sklearn.set_config("
            "array_api_dispatch=True) (or, around the fit, with sklearn.config_context("
            "array_api_dispatch=True); scikit-learn needs SCIPY_ARRAY_API=1 in the "
            f"environment), or convert {name} to a NumPy array first ({exc})."
        ) from exc
    return converted if isinstance(X, (list, tuple)) else converted[0]


def check_device_matrix(X, name: str = "X", min_samples: int = 1):
    """A device matrix the estimators can split: 2-D, real, at least ``min_samples`` rows."""
    X = as_float_device_matrix(X)
    if X.shape[0] < min_samples:
        raise ValueError(f"Found array with {X.shape[0]} sample(s) (shape={tuple(X.shape)}) "
                         f"while a minimum of {min_samples} is required.")
    if X.shape[1] < 1:
        raise ValueError(f"{name} has no features (shape={tuple(X.shape)}).")
    return X


def device_transform(model, X, n_features: int, chunk_size: int):
    """``model.transform(X)`` for a device ``X``, computed and returned on its device.

    For a landmark model (``C^T (k(Y, x) - m)``): the kernel blocks on the device
    in X's dtype, the centring and the product with C in float64; the result has
    X's floating dtype, as scikit-learn's transformers give. ``None`` for host input.
    """
    if not is_device_array(X):
        return None
    accept_device_input(X)  # without dispatch: converts (returns) or refuses
    if not dispatch_enabled():
        return None
    X = as_float_device_matrix(X)
    if X.shape[1] != n_features:
        raise ValueError(f"X has {X.shape[1]} features, but the model is expecting "
                         f"{n_features} features as input.")
    if not hasattr(model, "landmarks"):
        raise TypeError(
            f"{type(model).__name__} (method='random_features') has no device path: its "
            "random feature map runs on NumPy. Pass X as a NumPy array, or fit a landmark "
            "method ('diskpca', 'uniform_dislr', 'uniform_batch', 'exact').")
    xp = namespace(X)
    coef = to_device_of(model.coef, X, dtype=xp.float64)
    center = None if model.center is None else to_device_of(model.center, X, dtype=xp.float64)
    landmarks = model.landmarks
    if sp.issparse(landmarks):
        landmarks = landmarks.toarray()
    landmarks = to_device_of(landmarks, X)
    out = xp.empty((X.shape[0], coef.shape[1]), dtype=xp.float64, device=device(X))
    for start in range(0, X.shape[0], chunk_size):
        stop = min(start + chunk_size, X.shape[0])
        block = xp.astype(model.kernel(rows(X, start, stop), landmarks, chunk_size=chunk_size),
                          xp.float64)
        if center is not None:
            block = block - center
        out[start:stop, ...] = block @ coef
    return xp.astype(out, X.dtype)


__all__ = [
    "accept_device_input",
    "as_float_device_matrix",
    "check_device_matrix",
    "count_nonfinite_on_device",
    "device",
    "device_partitions",
    "device_transform",
    "dispatch_enabled",
    "is_device_array",
    "is_device_input",
    "is_float32",
    "namespace",
    "rows",
    "take_rows",
    "to_device_of",
    "to_host",
]


def device_partitions(X, split_rows, min_samples: int = 1) -> tuple[list, list | None]:
    """``(partitions, row indices)`` of device input (one matrix or a list of partitions).

    One matrix is checked (:func:`check_device_matrix`) and split by
    ``split_rows(n_samples)`` on its device; a list keeps its partitions (host
    ones are checked by scikit-learn as usual). Partitions must agree on their
    features.
    """
    if isinstance(X, (list, tuple)):
        from sklearn.utils.validation import check_array  # slow import: on first use

        parts = [check_device_matrix(p, min_samples=0) if is_device_array(p) else
                 check_array(p, accept_sparse="csr", dtype=[np.float64, np.float32],
                             ensure_min_samples=0) for p in X]
        indices = None
    else:
        X = check_device_matrix(X, min_samples=min_samples)
        if split_rows is None:
            raise TypeError("estimator_cluster needs split_rows to split one matrix.")
        indices = split_rows(X.shape[0])
        parts = [take_rows(X, index) for index in indices]
    features = sorted({int(p.shape[1]) for p in parts})
    if len(features) > 1:
        raise ValueError(f"Partitions have different numbers of features {features}; "
                         "every worker must hold the same columns.")
    return parts, indices
