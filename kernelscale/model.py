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

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel
from kernelscale.memory import MemoryNeed, check_memory
from kernelscale.memory_plans import feature_map_bytes
from kernelscale.model_format import (  # noqa: F401 - FORMAT_VERSION: kernelscale.model's API
    FORMAT_VERSION,
    open_model_file,
    parse_header,
    spec_of,
    write_model_file,
)
from kernelscale.model_format import is_model_file as _is_archive_of_a_model
from kernelscale.model_layout import (
    INTS,
    ModelLayout,
    check_csr,
    check_kernel_finite,
    declare_kernel,
)
from kernelscale.model_registry import (
    UnloadableModel,
    declare_estimator,
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

    @staticmethod
    def declare(layout: ModelLayout, meta: dict, prefix: str = "") -> tuple[int, int]:
        """Check the arrays of :meth:`to_arrays` against ``meta`` (see
        :mod:`kernelscale.model_layout`); returns ``(n_features, n_components)``."""
        kernel = declare_kernel(layout, meta.get("kernel"))
        shape = meta.get("landmarks_shape")
        if not isinstance(shape, list) or len(shape) != 2:
            raise layout.error(f"its header's landmarks_shape is {shape!r}, not [rows, "
                               "features]")
        n_landmarks = layout.count(shape[0], "number of landmarks", 1)
        n_features = layout.count(shape[1], "number of features", 1)
        k = layout.array(prefix + "coef", (n_landmarks, None)).shape[1]
        layout.array(prefix + "eigenvalues", (k,))
        sparse = meta.get("sparse_landmarks")
        if sparse is True:
            nnz = layout.array(prefix + "landmarks_data", (None,)).shape[0]
            layout.array(prefix + "landmarks_indices", (nnz,), INTS)
            layout.array(prefix + "landmarks_indptr", (n_landmarks + 1,), INTS)
            layout.check_values(lambda arrays: check_csr(layout, arrays, prefix + "landmarks",
                                                          n_features))
        elif sparse is False:
            layout.array(prefix + "landmarks", (n_landmarks, n_features))
        else:
            raise layout.error(f"its header's sparse_landmarks is {sparse!r}, not true or false")
        layout.array(prefix + "center", (n_landmarks,), optional=True)
        if meta.get("trace") is not None:
            layout.number(meta["trace"], "trace")
        layout.check_values(lambda arrays: check_kernel_finite(
            layout, kernel, _landmarks_of(arrays, meta, prefix)))
        return n_features, k

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

    @staticmethod
    def declare(layout: ModelLayout, meta: dict, prefix: str = "") -> tuple[int, int]:
        """Check the arrays of :meth:`to_arrays` against ``meta``, and count the feature
        map that restoring rebuilds; returns ``(n_features, n_components)``."""
        from kernelscale.features import feature_map_size
        from kernelscale.kernels import make_kernel

        kernel = declare_kernel(layout, meta.get("kernel"))
        n_features = layout.count(meta.get("n_features_in"), "n_features_in", 1)
        n_random = layout.count(meta.get("n_random_features"), "n_random_features", 1)
        seed = meta.get("feature_seed")
        if not (isinstance(seed, (str, int)) and not isinstance(seed, bool)
                and str(seed).isdigit()):
            raise layout.error(f"its header's feature_seed is {seed!r}, not a seed")
        m = feature_map_size(make_kernel(**kernel), n_features, n_random)
        k = layout.array(prefix + "components", (m, None)).shape[1]
        layout.array(prefix + "eigenvalues", (k,))
        layout.array(prefix + "mean", (m,), optional=True)
        if meta.get("trace") is not None:
            layout.number(meta["trace"], "trace")
        layout.allocates("its random feature map", feature_map_bytes(
            kernel["name"], n_features, n_random, int(kernel.get("degree", 3))))
        return n_features, k

    def save(self, path) -> None:
        save_model(self, path)


MODEL_TYPES = {cls.model_type: cls for cls in (KernelPCAModel, RandomFeaturePCAModel)}


def register_model_type(cls) -> None:
    """Let :func:`load_model` read another model class (``model_type``, ``from_arrays``
    and ``declare``, which checks a file's arrays: see :mod:`kernelscale.model_layout`)."""
    MODEL_TYPES[cls.model_type] = cls


def declare_model(layout: ModelLayout, meta, prefix: str = "") -> tuple[int, int]:
    """Check a model's arrays in a file (:meth:`KernelPCAModel.declare`...) by its
    ``model_type``; returns ``(n_features, n_components)``."""
    model_type = meta.get("model_type") if isinstance(meta, dict) else None
    if model_type not in MODEL_TYPES:
        raise layout.error(f"its model has the unknown type {model_type!r}")
    return MODEL_TYPES[model_type].declare(layout, meta, prefix)


def _landmarks_of(arrays: dict, meta: dict, prefix: str):
    if meta["sparse_landmarks"]:
        return sp.csr_matrix((arrays[prefix + "landmarks_data"],
                              arrays[prefix + "landmarks_indices"],
                              arrays[prefix + "landmarks_indptr"]),
                             shape=tuple(meta["landmarks_shape"]))
    return arrays[prefix + "landmarks"]


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


def save_model(model, path, *, overwrite: bool = True) -> None:
    """Save a fitted estimator or a model as a kernelscale model file; no pickle.

    The file is an ``.npz`` archive of plain arrays with a JSON header
    (``allow_pickle=False`` safe), written under a temporary name and renamed
    into place, so a crash never leaves half a file. It is checked as
    :func:`load_model` checks a file first, so a model that could not be loaded
    back is never written.

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
    overwrite : bool, default=True
        Replace an existing file at ``path``; with False an existing file is kept
        and a ``FileExistsError`` raised (also when one appears while writing).

    Raises
    ------
    TypeError
        For anything else.
    ValueError
        For an estimator that is not fitted, with a callable kernel (a model file
        holds no code), or whose arrays :func:`load_model` would refuse (NaN or
        infinite values, shapes that disagree).

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
    # What load_model would refuse is not written: the same checks, on these arrays.
    what = (type(model).__name__ if is_registered_estimator(model)
            else meta["model_type"])
    parse_header(json.dumps(meta), path)
    layout = _declared_layout(path, meta, {name: spec_of(a) for name, a in arrays.items()},
                              what, saving=True)
    layout.validate_values({name: np.asarray(a) for name, a in arrays.items()})
    write_model_file(path, meta, arrays, overwrite=overwrite)


def is_model_file(path) -> bool:
    """Whether ``path`` is a model file that kernelscale wrote (read from its header,
    not from a member's name: a user's own ``np.savez`` archive is not one)."""
    return _is_archive_of_a_model(path, accepts=_names_a_model)


def _names_a_model(header: dict) -> bool:
    import kernelscale

    if header.get("model_type") in MODEL_TYPES:
        return True
    name = header.get("estimator")
    return isinstance(name, str) and name in kernelscale.__all__ and \
        isinstance(header.get("params"), dict)


def _declared_layout(path, header: dict, declared: dict, what: str,
                     saving: bool = False) -> ModelLayout:
    """The checked :class:`ModelLayout` of a file's arrays (before any is read)."""
    layout = ModelLayout(path, what, declared, saving=saving)
    try:
        if header.get("model_type") in MODEL_TYPES:
            declare_model(layout, header)
        else:
            declare_estimator(layout, header)
    except UnloadableModel:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        if str(exc).startswith(str(path)) or " cannot be saved" in str(exc):
            raise
        raise layout.error(f"{exc!r} is missing or invalid") from exc
    layout.finish()
    return layout


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
    model_file = open_model_file(path)
    header = model_file.header
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
    what = model_type if bare else holds
    try:
        layout = _declared_layout(path, header, model_file.declared, what)
    except UnloadableModel as exc:
        raise ValueError(f"{path} {exc}.") from exc
    # Nothing is read before the model is known to fit in memory.
    check_memory(MemoryNeed(f"loading {path} ({holds})",
                            [*((f"member {name}.npy", spec.nbytes)
                               for name, spec in model_file.declared.items()),
                             *layout.allocations]))
    arrays = model_file.load()
    layout.validate_values(arrays)
    try:
        return (model_from_arrays if bare else estimator_from_arrays)(arrays, header)
    except UnloadableModel as exc:
        raise ValueError(f"{path} {exc}.") from exc
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ValueError(
            f"{path} is a damaged {what} file: {exc!r} is missing or invalid."
        ) from exc
