"""Fitted kernel PCA subspaces, their transform, their error, and a portable file format.

Two shapes of answer come out of the horizontal algorithms:

* :class:`KernelPCAModel` - a subspace of the kernel's feature space spanned by
  representative points: ``V = phi(Y) C`` with ``C^T K_YY C = I``, so
  ``transform(x) = C^T (k(Y, x) - m)`` where ``m`` is the training mean of
  ``k(Y, .)`` when the model is centred (zero otherwise).
* :class:`RandomFeaturePCAModel` - a subspace of a random feature space ``z``:
  ``transform(x) = V^T (z(x) - mean)``.

Files are ``.npz`` archives of plain arrays plus a JSON header, loaded with
``allow_pickle=False``: loading a model can never run code.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from kernelscale.files import write_npz_atomically
from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel

FORMAT_VERSION = 1


@dataclass
class KernelPCAModel:
    """A rank-k subspace ``phi(Y) C`` of the kernel feature space.

    Attributes
    ----------
    kernel : Kernel
    landmarks : array or CSR of shape (n_landmarks, n_features)
        The representative points ``Y``.
    coef : ndarray of shape (n_landmarks, n_components)
        ``C``, with ``C^T K_YY C = I`` (orthonormal directions in feature space).
    eigenvalues : ndarray of shape (n_components,)
        Energy captured by each direction (eigenvalues of the projected kernel).
    center : ndarray of shape (n_landmarks,) or None
        Training mean of ``k(Y, a)`` for a centred model.
    trace : float or None
        The training data's total energy in feature space, against which
        ``eigenvalues`` are shares: ``sum_a k(a, a)``, minus ``n ||mu||^2`` for a
        centred model (see the fitting function for how ``mu`` is known). ``None``
        when unknown.
    """

    kernel: Kernel
    landmarks: object
    coef: np.ndarray
    eigenvalues: np.ndarray
    center: np.ndarray | None = None
    info: dict = field(default_factory=dict)
    trace: float | None = None

    model_type = "landmark_kpca"

    @property
    def n_components(self) -> int:
        return self.coef.shape[1]

    def transform(self, X, chunk_size: int = DEFAULT_CHUNK_SIZE) -> np.ndarray:
        """Coordinates of the rows of ``X`` on the components, shape (n, n_components)."""
        out = np.empty((X.shape[0], self.n_components))
        for start in range(0, X.shape[0], chunk_size):
            block = self.kernel(X[start : start + chunk_size], self.landmarks)
            if self.center is not None:
                block -= self.center
            out[start : start + chunk_size] = block @ self.coef
        return out

    def diag(self, X) -> np.ndarray:
        """``k(x, x)`` for each row: the squared feature-space norm."""
        return self.kernel.diag(X)

    def to_arrays(self) -> tuple[dict, dict]:
        Y = self.landmarks
        arrays = {"coef": self.coef, "eigenvalues": self.eigenvalues}
        if sp.issparse(Y):
            Y = Y.tocsr()
            arrays.update(
                landmarks_data=Y.data, landmarks_indices=Y.indices, landmarks_indptr=Y.indptr
            )
        else:
            arrays["landmarks"] = np.asarray(Y)
        if self.center is not None:
            arrays["center"] = self.center
        meta = {
            "kernel": self.kernel.to_dict(),
            "sparse_landmarks": bool(sp.issparse(Y)),
            "landmarks_shape": list(Y.shape),
            "info": self.info,
        }
        if self.trace is not None:
            meta["trace"] = float(self.trace)
        return arrays, meta

    @classmethod
    def from_arrays(cls, arrays: dict, meta: dict) -> KernelPCAModel:
        if meta["sparse_landmarks"]:
            Y = sp.csr_matrix(
                (arrays["landmarks_data"], arrays["landmarks_indices"], arrays["landmarks_indptr"]),
                shape=tuple(meta["landmarks_shape"]),
            )
        else:
            Y = arrays["landmarks"]
        return cls(
            kernel=Kernel.from_dict(meta["kernel"]),
            landmarks=Y,
            coef=arrays["coef"],
            eigenvalues=arrays["eigenvalues"],
            center=arrays.get("center"),
            info=meta.get("info", {}),
            trace=meta.get("trace"),
        )

    def save(self, path) -> None:
        """Write the model as ``.npz`` (arrays) with a JSON header; no pickle."""
        save_model(self, path)


@dataclass
class RandomFeaturePCAModel:
    """A rank-k subspace of a random feature space (the random-features baseline).

    The feature map is rebuilt from ``(kernel, n_features_in, n_random_features,
    feature_seed)``, so the file holds the seed, not the map. ``trace`` is the
    (centred) training energy in the random feature space, ``sum_a ||z(a) - mean||^2``.
    """

    kernel: Kernel
    n_features_in: int
    n_random_features: int
    feature_seed: int
    components: np.ndarray
    eigenvalues: np.ndarray
    mean: np.ndarray | None = None
    info: dict = field(default_factory=dict)
    trace: float | None = None

    model_type = "random_feature_pca"

    @property
    def n_components(self) -> int:
        return self.components.shape[1]

    @property
    def feature_map(self):
        from kernelscale.features import make_feature_map

        return make_feature_map(
            self.kernel, self.n_features_in, self.n_random_features, self.feature_seed
        )

    def transform(self, X, chunk_size: int = DEFAULT_CHUNK_SIZE) -> np.ndarray:
        fmap = self.feature_map
        out = np.empty((X.shape[0], self.n_components))
        for start in range(0, X.shape[0], chunk_size):
            Z = fmap.transform(X[start : start + chunk_size])
            if self.mean is not None:
                Z -= self.mean
            out[start : start + chunk_size] = Z @ self.components
        return out

    def diag(self, X) -> np.ndarray:
        return self.kernel.diag(X)

    def to_arrays(self) -> tuple[dict, dict]:
        arrays = {"components": self.components, "eigenvalues": self.eigenvalues}
        if self.mean is not None:
            arrays["mean"] = self.mean
        meta = {
            "kernel": self.kernel.to_dict(),
            "n_features_in": self.n_features_in,
            "n_random_features": self.n_random_features,
            "feature_seed": str(self.feature_seed),
            "info": self.info,
        }
        if self.trace is not None:
            meta["trace"] = float(self.trace)
        return arrays, meta

    @classmethod
    def from_arrays(cls, arrays: dict, meta: dict) -> RandomFeaturePCAModel:
        return cls(
            kernel=Kernel.from_dict(meta["kernel"]),
            n_features_in=int(meta["n_features_in"]),
            n_random_features=int(meta["n_random_features"]),
            feature_seed=int(meta["feature_seed"]),
            components=arrays["components"],
            eigenvalues=arrays["eigenvalues"],
            mean=arrays.get("mean"),
            info=meta.get("info", {}),
            trace=meta.get("trace"),
        )

    def save(self, path) -> None:
        save_model(self, path)


MODEL_TYPES = {cls.model_type: cls for cls in (KernelPCAModel, RandomFeaturePCAModel)}


def register_model_type(cls) -> None:
    """Let :func:`load_model` read another model class (``model_type``, ``from_arrays``)."""
    MODEL_TYPES[cls.model_type] = cls


def is_model_file(path) -> bool:
    """Whether ``path`` is a kernelscale model file: a zip archive of ``.npy`` members
    holding the header of :func:`save_model` or the ``params`` of a streaming model."""
    path = Path(path)
    if not path.is_file() or not zipfile.is_zipfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False
    return "__header__.npy" in names or "params.npy" in names


def save_model(model, path) -> None:
    """Save any registered model as ``.npz`` with a JSON header (``allow_pickle=False`` safe).

    The file is written under a temporary name and renamed into place
    (:func:`write_npz_atomically`). A model with a callable kernel cannot be
    saved: a model file holds no code.

    Parameters
    ----------
    model : object
        A fitted model: an estimator's ``model_`` (for example
        ``DistributedKernelPCA().fit(X).model_``) or a model a protocol function
        returned.
    path : str or pathlib.Path
        Where to write it (``.npz``).

    Returns
    -------
    None

    See Also
    --------
    load_model : Reads it back.

    Examples
    --------
    >>> import numpy as np, tempfile, pathlib
    >>> from kernelscale import DistributedKernelPCA
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> kpca = DistributedKernelPCA(n_components=2, n_landmarks=40, random_state=0).fit(X)
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "model.npz"
    >>> save_model(kpca.model_, path)
    >>> np.allclose(load_model(path).transform(X[:5]), kpca.transform(X[:5]))
    True
    """
    kernel = getattr(model, "kernel", None)
    if getattr(kernel, "name", None) == "callable":
        raise ValueError(
            "A model with a callable kernel cannot be saved: model files hold parameters "
            "and arrays only, never code (they load with allow_pickle=False). Use a named "
            "kernel to save the model."
        )
    arrays, meta = model.to_arrays()
    header = {"format_version": FORMAT_VERSION, "model_type": model.model_type, **meta}
    write_npz_atomically(path, __header__=np.array(json.dumps(header)), **arrays)


def load_model(path):
    """Load a model written by :func:`save_model`; never unpickles anything.

    A file written by :func:`kernelscale.streaming.save_streaming_model` is read
    too and comes back as a fitted :class:`~kernelscale.StreamingKernelPCA`, so
    everything ``load_model`` returns has ``transform``.

    Parameters
    ----------
    path : str or pathlib.Path
        A ``.npz`` file written by :func:`save_model`, ``kernelscale fit`` or
        :func:`~kernelscale.streaming.save_streaming_model`.

    Returns
    -------
    model : object
        The model, ready to ``transform`` new rows.

    See Also
    --------
    save_model : Writes the file (example there).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No model file at {path}.")
    not_a_model = (f"{path} is not a kernelscale model file (.npz); write one with "
                   "'kernelscale fit' or save_model.")
    # np.load also reads a plain .npy (an array, not an archive) and text files
    # raise their own confusing errors: only a zip archive can be a model.
    if not path.is_file() or not zipfile.is_zipfile(path):
        raise ValueError(not_a_model)
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"{not_a_model[:-1]} ({exc}).") from exc
    if "__header__" not in arrays and "params" in arrays:
        # A streaming model (kernelscale.streaming.save_streaming_model): an estimator.
        from kernelscale.streaming import load_streaming_model

        return load_streaming_model(path)
    if "__header__" not in arrays:
        raise ValueError(f"{not_a_model[:-1]} (it has no kernelscale header).")
    try:
        header = json.loads(str(arrays.pop("__header__")))
    except ValueError as exc:
        raise ValueError(f"{path} has a damaged header (not JSON): {exc}") from exc
    model_type = header.get("model_type") if isinstance(header, dict) else None
    if model_type not in MODEL_TYPES:
        raise ValueError(
            f"{path} holds a model of unknown type {model_type!r}; "
            f"known types: {', '.join(MODEL_TYPES)}."
        )
    if isinstance(header.get("kernel"), dict) and header["kernel"].get("name") == "callable":
        raise ValueError(f"{path} names a callable kernel; a model file never loads code.")
    try:
        return MODEL_TYPES[model_type].from_arrays(arrays, header)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(
            f"{path} is a damaged {model_type} file: {exc!r} is missing or invalid."
        ) from exc
