"""Fitted kernel PCA subspaces, their transform, and saving and loading fitted models.

Two shapes of answer come out of the horizontal algorithms:

* :class:`KernelPCAModel` - a subspace of the kernel's feature space spanned by
  representative points: ``V = phi(Y) C`` with ``C^T K_YY C = I``, so
  ``transform(x) = C^T (k(Y, x) - m)`` where ``m`` is the training mean of
  ``k(Y, .)`` when the model is centred (zero otherwise).
* :class:`RandomFeaturePCAModel` - a subspace of a random feature space ``z``:
  ``transform(x) = V^T (z(x) - mean)``.

:func:`save_model` writes them, or a fitted estimator (each setting registers
its estimator's state with :mod:`kernelscale.model_registry`), as a model file
(:mod:`kernelscale.model_format`: ``.npz`` archives of plain arrays plus a JSON
header, loaded with ``allow_pickle=False``, so loading a model can never run
code); :func:`load_model` reads any of them back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel
from kernelscale.model_format import (  # noqa: F401 - is_model_file: kernelscale.model's API
    FORMAT_VERSION,
    is_model_file,
    read_model_file,
    write_model_file,
)
from kernelscale.model_registry import (
    UnloadableModel,
    estimator_from_arrays,
    estimator_name,
    estimator_to_arrays,
    is_registered_estimator,
    registered_model_types,
)


def energy_shares(eigenvalues: np.ndarray, trace: float | None) -> np.ndarray:
    """``eigenvalues / trace`` (zeros when the trace is unknown or not positive)."""
    if trace is None or not trace > 0:
        return np.zeros_like(eigenvalues)
    return eigenvalues / trace


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


def model_to_arrays(model, prefix: str = "") -> tuple[dict, dict]:
    """A model's arrays (names prefixed with ``prefix``) and its JSON-able description.

    The description holds the ``model_type``; :func:`model_from_arrays` inverts
    it. Estimators use it to keep their ``model_`` among their other arrays.
    """
    if getattr(model, "model_type", None) not in MODEL_TYPES or not hasattr(model, "to_arrays"):
        raise TypeError(
            f"{type(model).__name__} cannot be saved as a kernelscale model file; save_model "
            "takes a fitted kernelscale estimator or a KernelPCAModel / RandomFeaturePCAModel.")
    if getattr(getattr(model, "kernel", None), "name", None) == "callable":
        raise ValueError(
            "A model with a callable kernel cannot be saved: model files hold parameters "
            "and arrays only, never code (they load with allow_pickle=False). Use a named "
            "kernel to save the model."
        )
    arrays, meta = model.to_arrays()
    return ({prefix + name: value for name, value in arrays.items()},
            {"model_type": model.model_type, **meta})


def model_from_arrays(arrays: dict, meta: dict, prefix: str = ""):
    """The model of :func:`model_to_arrays`'s ``(arrays, meta)``."""
    if meta.get("model_type") not in MODEL_TYPES:
        raise ValueError(f"unknown model type {meta.get('model_type')!r}")
    if isinstance(meta.get("kernel"), dict) and meta["kernel"].get("name") == "callable":
        raise UnloadableModel("names a callable kernel; a model file never loads code")
    own = {name[len(prefix):]: value for name, value in arrays.items()
           if name.startswith(prefix)}
    return MODEL_TYPES[meta["model_type"]].from_arrays(own, meta)


def save_model(model, path) -> None:
    """Save a fitted estimator or a model as a kernelscale model file; no pickle.

    The file is an ``.npz`` archive of plain arrays with a JSON header
    (``allow_pickle=False`` safe), written under a temporary name and renamed
    into place, so a crash never leaves half a file.

    Parameters
    ----------
    model : estimator or model
        A fitted :class:`~kernelscale.DistributedKernelPCA`,
        :class:`~kernelscale.VerticalKernelPCA`,
        :class:`~kernelscale.FederatedKernelKMeans`,
        :class:`~kernelscale.DistributedSpectralClustering` or
        :class:`~kernelscale.StreamingKernelPCA` (:func:`load_model` gives back
        an estimator that transforms and predicts as this one, with its ledger
        ``communication_``), or a bare ``KernelPCAModel`` /
        ``RandomFeaturePCAModel`` (an estimator's ``model_``). The
        estimator's constructor parameters are kept when they are plain values
        (numbers, strings, None, lists of them); one that holds an array, a
        generator or a client object is left out and comes back as its
        default (the header lists them under ``dropped_params``).
        ``DistributedKernelPCA.budget_plan_`` (the planner's report) is not
        kept. A ``VerticalKernelPCA`` file holds the parties' training blocks
        (or their file paths), which its ``transform`` needs.
    path : str or path-like

    Raises
    ------
    TypeError
        For anything else.
    ValueError
        For an estimator that is not fitted, or with a callable kernel (a model
        file holds no code).

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
    >>> save_model(kpca, path)
    >>> np.allclose(load_model(path).transform(X[:5]), kpca.transform(X[:5]))
    True
    """
    if is_registered_estimator(model):
        arrays, meta = estimator_to_arrays(model)
    else:
        arrays, meta = model_to_arrays(model)
    write_model_file(path, meta, arrays)


def load_model(path, expected_type: type | str | None = None):
    """Load a model file written by :func:`save_model`; never unpickles anything.

    Parameters
    ----------
    path : str or path-like
    expected_type : class or str, optional
        The class (or its name) that the file must hold, e.g.
        ``FederatedKernelKMeans``: a file that holds another one is a
        ``ValueError`` that names what it holds.

    Returns
    -------
    estimator or model
        A fitted estimator (with its ledger ``communication_`` when it had one), or
        a ``KernelPCAModel`` / ``RandomFeaturePCAModel``; everything has
        ``transform``. Files that ``save_streaming_model`` wrote before format
        version 2 load too, as a fitted ``StreamingKernelPCA``.

    Raises
    ------
    FileNotFoundError
        No file at ``path``.
    ValueError
        A file that is not a kernelscale model, is damaged, was written by a
        newer format, or holds another type than ``expected_type``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"No model file at {path}.")
    header, arrays = read_model_file(path)
    model_type = header.get("model_type")
    named = isinstance(model_type, str)
    bare = named and model_type in MODEL_TYPES  # a model, not an estimator
    holds = (MODEL_TYPES[model_type].__name__ if bare
             else estimator_name(model_type, header) if named else None)
    if holds is None:
        known = [*MODEL_TYPES, *registered_model_types()]
        raise ValueError(f"{path} holds a model of unknown type {model_type!r}; "
                         f"known types: {', '.join(known)}.")
    if expected_type is not None:
        expected = expected_type if isinstance(expected_type, str) else expected_type.__name__
        if holds != expected:
            raise ValueError(f"{path} is a {holds} model file, not a {expected} one; load it "
                             "with kernelscale.load_model.")
    try:
        return (model_from_arrays if bare else estimator_from_arrays)(arrays, header)
    except UnloadableModel as exc:
        raise ValueError(f"{path} {exc}.") from exc
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueError(
            f"{path} is a damaged {model_type if bare else holds} file: {exc!r} is missing "
            "or invalid."
        ) from exc
