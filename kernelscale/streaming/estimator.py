"""``StreamingKernelPCA``: a scikit-learn estimator over SKPCA, RNCA and streaming Nystrom.

Also its state in the model file (:func:`kernelscale.save_model`, ``"model_type":
"streaming_kpca"``), registered with :mod:`kernelscale.model_registry`, and
:func:`save_streaming_model` / :func:`load_streaming_model`, the same file for
this estimator alone.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils.validation import check_is_fitted, validate_data

from kernelscale.constraints import (
    POSITIVE_INT,
    POSITIVE_REAL,
    RANDOM_STATE,
    StrOptions,
    kernel_names,
)
from kernelscale.linalg import as_generator, like_input, preserved_dtypes
from kernelscale.memory_plans import check_streaming_memory
from kernelscale.model import load_model, save_model
from kernelscale.model_registry import register_estimator
from kernelscale.progress import get_logger, progress_bar, verbosity
from kernelscale.runtime.validation import check_real
from kernelscale.streaming import model_state  # noqa: F401 - registers the file's layout
from kernelscale.streaming.methods import METHODS, build_method

#: The ``model_type`` a saved streaming model carries in its JSON header (files of
#: format version 1 held it in a ``params`` entry).
MODEL_TYPE = "streaming_kpca"
LOGGER = get_logger("streaming")


class StreamingKernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Kernel PCA from one pass over a stream, in memory independent of its length.

    ``method='skpca'`` is Algorithm 1 of paper 004: m random Fourier features fed
    into a Frequent Directions sketch of ``sketch_size`` rows. ``'rnca'`` keeps the
    exact m x m covariance of the features; ``'nystrom'`` keeps a reservoir sample
    of ``n_landmarks`` points. Scores are uncentred, as in the paper (the kernel
    matrix ``G`` itself is approximated, not the centred one).

    Parameters
    ----------
    n_components : int, default=2
        Number of kernel principal components returned by ``transform``. The
        default ``sketch_size`` (20) holds fewer than 10 with its error bound,
        hence a smaller default than ``DistributedKernelPCA``'s 10.
    kernel : {'rbf', 'laplacian'}, default='rbf'
        Shift-invariant kernel (Nystrom also takes 'poly', 'linear', 'arccos').
    gamma : float or None, default=None
        Kernel scale; None means ``1 / n_features``.
    n_random_features : int, default=500
        Number of random Fourier features m (skpca, rnca).
    sketch_size : int, default=20
        Rows l of the Frequent Directions sketch (skpca). With the default
        ``shrink='modified'`` each shrink keeps at most ``l//2 - 1`` directions
        (``l//2`` rounds down for odd l) and the Frequent Directions bound covers
        ``k < l//2`` components, so take ``sketch_size >= 2 * n_components + 2``.
    n_landmarks : int or None, default=None
        Reservoir size c (nystrom); None means ``n_random_features``.
    method : {'skpca', 'rnca', 'nystrom'}, default='skpca'
    shrink : {'modified', 'classic'}, default='modified'
        Frequent Directions shrink (skpca): by the ``(l//2)``-th squared singular
        value (paper 004) or by the smallest one (Liberty 2013; keeps ``l - 1``
        directions, about ``l/2`` times slower).
    batch_size : int, default=1024
        Rows per mini-batch in ``fit``.
    verbose : int, default=0
        0: silent. 1: a tqdm progress bar over ``fit``'s batches on stderr and one
        INFO line per fit on the ``kernelscale.streaming`` logger. 2: a DEBUG line
        per ``partial_fit`` batch too. See :mod:`kernelscale.progress`.
    random_state : int, Generator or None, default=None
        Seeds the random features and the reservoir sampler.

    Attributes
    ----------
    sketcher_ : StreamingMethod
        The fitted SKPCA, RNCA or StreamingNystrom object.
    components_ : ndarray of shape (n_components, m or c)
        Top directions in the lifted space: rows of :math:`W^\\top` (skpca),
        eigenvectors of :math:`Z^\\top Z` (rnca), or :math:`V w^{-1/2}` of
        :math:`K_{SS}` (nystrom); zero rows where the sketch holds fewer directions.
        ``transform(X) = lift(X) @ components_.T``.
        Computed lazily: ``partial_fit`` only feeds the sketch, and the
        decomposition (an l x m SVD for skpca, an m x m eigendecomposition for
        rnca, a c x c one for nystrom) runs on the first read of
        ``components_`` / ``eigenvalues_`` or the first ``transform`` after it,
        then is cached until the next ``partial_fit``. ``fit`` computes it once
        at the end. Each read returns a new array.
    eigenvalues_ : ndarray of shape (n_components,)
        Approximate top eigenvalues of the kernel matrix (0 where the sketch has
        fewer directions). Lazy, like ``components_``.
    gamma_ : float
        The kernel parameter used (``gamma``, or its default for the kernel).
    n_samples_seen_ : int
        Points fed so far, over every ``partial_fit`` (or the one ``fit``).
    space_words_ : int
        Words held by the method (004's space count).
    n_features_in_ : int
        Number of features seen in the first batch.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of the features seen in the first batch; defined only when ``X``
        has string column names.

    Warns
    -----
    UserWarning
        When the decomposition is computed (at the end of ``fit``, or on the
        first read or ``transform`` after ``partial_fit``) and the sketch holds
        fewer non-zero directions than ``n_components``: the missing components
        are zero and score 0. With the paper's shrink this happens whenever
        ``n_components >= sketch_size // 2`` and the stream ends just after a
        shrink; increase ``sketch_size`` to at least ``2 * n_components + 2`` or
        use ``shrink='classic'``.

    See Also
    --------
    SKPCA : The sketch behind ``method='skpca'`` (random features + Frequent Directions).
    RNCA : The baseline of ``method='rnca'`` (the m x m covariance of random features).
    StreamingNystrom : The baseline of ``method='nystrom'`` (a reservoir of landmarks).
    streaming_kpca_distributed : One SKPCA sketch per worker, merged at the master.
    sklearn.decomposition.IncrementalPCA : Linear PCA fed in batches.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelscale import StreamingKernelPCA
    >>> X = np.random.default_rng(0).standard_normal((1000, 4))
    >>> est = StreamingKernelPCA(n_components=3, n_random_features=300, random_state=0)
    >>> for batch in np.array_split(X, 10):
    ...     est = est.partial_fit(batch)
    >>> est.transform(X[:5]).shape
    (5, 3)
    >>> est.n_samples_seen_
    1000
    """

    _parameter_constraints: dict = {
        "n_components": [POSITIVE_INT],
        "kernel": [kernel_names()],  # which ones a method takes: checked by the method
        "gamma": [POSITIVE_REAL, None],
        "n_random_features": [POSITIVE_INT],
        "sketch_size": [POSITIVE_INT],
        "n_landmarks": [POSITIVE_INT, None],
        "method": [StrOptions(set(METHODS))],
        "shrink": [StrOptions({"modified", "classic"})],
        "batch_size": [POSITIVE_INT],
        "verbose": ["verbose"],
        "random_state": RANDOM_STATE,
    }

    def __init__(
        self,
        n_components: int = 2,
        *,
        kernel: str = "rbf",
        gamma: float | None = None,
        n_random_features: int = 500,
        sketch_size: int = 20,
        n_landmarks: int | None = None,
        method: str = "skpca",
        shrink: str = "modified",
        batch_size: int = 1024,
        verbose: int = 0,
        random_state=None,
    ):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.n_random_features = n_random_features
        self.sketch_size = sketch_size
        self.n_landmarks = n_landmarks
        self.method = method
        self.shrink = shrink
        self.batch_size = batch_size
        self.verbose = verbose
        self.random_state = random_state

    def _check_sizes(self) -> None:
        """``n_components`` against the method's sketch (each parameter alone is checked
        by ``_parameter_constraints``)."""
        k = self.n_components
        limit = {
            "skpca": ("sketch_size", self.sketch_size),
            "rnca": ("n_random_features", self.n_random_features),
            "nystrom": (
                "n_landmarks",
                self.n_random_features if self.n_landmarks is None else self.n_landmarks,
            ),
        }[self.method]
        if k > limit[1]:
            raise ValueError(
                f"n_components={k} exceeds {limit[0]}={limit[1]}; the {self.method} sketch "
                f"holds at most {limit[1]} directions."
            )
        if self.method == "skpca" and self.shrink == "modified" and 2 * k >= self.sketch_size:
            warnings.warn(
                f"n_components={k} is not below sketch_size/2 = {self.sketch_size / 2:g}: "
                "Frequent Directions' error bound (paper 004) needs k < l/2, and the paper's "
                f"('modified') shrink keeps at most sketch_size//2 - 1 = "
                f"{self.sketch_size // 2 - 1} directions after each shrink; increase "
                f"sketch_size to at least 2*n_components + 2 = {2 * k + 2}, or use "
                "shrink='classic'.", UserWarning, stacklevel=4)

    def _start(self, X, batch_rows: int) -> None:
        """Build the sketch for ``X``'s features, once its memory is known to fit."""
        self._check_sizes()
        n_features = X.shape[1]
        check_streaming_memory(self.method, n_features, n_random_features=self.n_random_features,
                               sketch_size=self.sketch_size, n_landmarks=self.n_landmarks,
                               batch_size=batch_rows, kernel=self.kernel,
                               sparse=sp.issparse(X))
        seed = int(as_generator(self.random_state).integers(2**63))
        self.sketcher_ = build_method(
            self.method, n_features, self.kernel, self.gamma, self.n_random_features,
            self.sketch_size, self.n_landmarks, self.shrink, seed,
        )

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None) -> StreamingKernelPCA:
        """Feed one batch of points; returns self.

        Only the sketch is updated; ``components_`` and ``eigenvalues_`` are
        recomputed lazily, on their next read or the next ``transform``.

        Parameters
        ----------
        X : array-like or CSR matrix of shape (n_samples, n_features)
            The next batch of the stream.
        y : None
            Ignored.

        Returns
        -------
        self : StreamingKernelPCA
            The estimator, its sketch updated.
        """
        first = not hasattr(self, "sketcher_")
        check_real(X)
        X = validate_data(self, X, reset=first, accept_sparse="csr",
                          dtype=[np.float64, np.float32])
        if first:
            self._start(X, batch_rows=X.shape[0])
        self.sketcher_.partial_fit(X)
        self._update_counts()
        LOGGER.debug("%s(%s): batch of %d points; %d seen", type(self).__name__, self.method,
                     X.shape[0], self.n_samples_seen_)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None) -> StreamingKernelPCA:
        """Fit from scratch on ``X``, fed in batches of ``batch_size`` rows; returns self.

        The decomposition is computed once at the end (and warns if the sketch
        holds fewer than ``n_components`` directions).

        Parameters
        ----------
        X : array-like or CSR matrix of shape (n_samples, n_features)
            The whole stream, fed in order.
        y : None
            Ignored.

        Returns
        -------
        self : StreamingKernelPCA
            The fitted estimator.
        """
        check_real(X)
        X = validate_data(self, X, reset=True, accept_sparse="csr",
                          dtype=[np.float64, np.float32])
        self._start(X, batch_rows=min(self.batch_size, X.shape[0]))
        desc = f"{type(self).__name__}({self.method})"
        with verbosity(self.verbose):
            began = time.perf_counter()
            batches = range(0, X.shape[0], self.batch_size)
            with progress_bar(self.verbose, total=math.ceil(X.shape[0] / self.batch_size),
                              desc=desc, unit="batch") as bar:
                for start in batches:
                    self.sketcher_.partial_fit(X[start : start + self.batch_size])
                    bar.update()
            self._update_counts()
            self._eigen()
            LOGGER.info("%s: %d points in %d batches, %s words of space, %.2f s", desc,
                        X.shape[0], len(batches), f"{self.space_words_:,}",
                        time.perf_counter() - began)
        return self

    def _update_counts(self) -> None:
        # The cheap fitted attributes, kept current after every batch.
        self.n_samples_seen_ = self.sketcher_.n_samples_seen
        self.gamma_ = self.sketcher_.params()["gamma"]
        self.space_words_ = self.sketcher_.space_words

    def _eigen(self, stacklevel: int = 3) -> tuple[np.ndarray, np.ndarray]:
        """The sketcher's decomposition, computed if stale (cached by the sketcher,
        which forgets it on every ``partial_fit``); warns when it is computed with
        fewer directions than ``n_components``."""
        check_is_fitted(self, "sketcher_")
        fresh = self.sketcher_._eigen is None
        values, basis = self.sketcher_.eigen()
        if fresh and values.size < self.n_components:
            warnings.warn(self._short_sketch_message(values.size), UserWarning,
                          stacklevel=stacklevel)
        return values, basis

    def _short_sketch_message(self, n_directions: int) -> str:
        k = self.n_components
        msg = (
            f"The {self.method} sketch holds only {n_directions} non-zero direction(s) but "
            f"n_components={k}: components {n_directions + 1}..{k} are zero and score 0 in "
            "transform. "
        )
        if self.method == "skpca" and self.shrink == "modified" and k >= self.sketch_size // 2:
            return msg + (
                f"The paper's ('modified') shrink keeps at most sketch_size//2 - 1 = "
                f"{self.sketch_size // 2 - 1} directions after each shrink; increase "
                f"sketch_size to at least 2*n_components + 2 = {2 * k + 2}, or use "
                "shrink='classic'."
            )
        return msg + (
            f"The {self.n_samples_seen_} point(s) seen so far span fewer directions than "
            "that in the method's feature space; feed more (distinct) points or lower "
            "n_components."
        )

    def _padded(self) -> tuple[np.ndarray, np.ndarray]:
        values, basis = self._eigen(stacklevel=4)  # user -> property -> _padded -> _eigen
        k = min(values.size, self.n_components)
        top = np.zeros(self.n_components)
        top[:k] = values[:k]
        components = np.zeros((self.n_components, basis.shape[0]))
        components[:k] = basis[:, :k].T
        return top, components

    @property
    def eigenvalues_(self) -> np.ndarray:
        """Approximate top kernel eigenvalues (n_components,), computed on first read."""
        return self._padded()[0]

    @property
    def components_(self) -> np.ndarray:
        """Top directions in the lifted space (n_components, m or c), computed on first read."""
        return self._padded()[1]

    def transform(self, X) -> np.ndarray:
        """Scores on the top ``n_components`` kernel principal directions.

        Parameters
        ----------
        X : array-like or CSR matrix of shape (n_samples, n_features)
            Points to project (lifted by the method's feature map).

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
            Their scores; 0 on components the sketch does not hold.
        """
        check_is_fitted(self, "sketcher_")
        check_real(X)
        X = validate_data(self, X, reset=False, accept_sparse="csr",
                          dtype=[np.float64, np.float32])
        self._eigen()
        return like_input(self.sketcher_.transform(X, self.n_components), X)

    @property
    def _n_features_out(self) -> int:
        return self.n_components

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return preserved_dtypes(tags)


def streaming_state(estimator: StreamingKernelPCA) -> tuple[dict, dict]:
    """The fitted sketch as plain arrays and its parameters (the random-feature seed
    included, from which the feature map is rebuilt): what the model file holds
    beyond the estimator's parameters (:mod:`kernelscale.model_registry`)."""
    return estimator.sketcher_.to_arrays(), {"sketcher": estimator.sketcher_.params()}


def restore_streaming(estimator: StreamingKernelPCA, arrays: dict, meta: dict) -> None:
    """Set the fitted sketch of :func:`streaming_state` on ``estimator``."""
    sketcher_params = meta["sketcher"]
    estimator.sketcher_ = METHODS[sketcher_params["method"]].from_state(sketcher_params, arrays)
    estimator._update_counts()


register_estimator(StreamingKernelPCA, streaming_state, restore_streaming,
                   model_type=MODEL_TYPE, fitted_attribute="sketcher_")


def save_streaming_model(estimator: StreamingKernelPCA, path) -> None:
    """:func:`kernelscale.save_model` for a fitted ``StreamingKernelPCA`` (``.npz`` added
    to a path without it).

    The file holds the estimator's parameters and the sketch's (including the
    random-feature seed, from which the feature map is rebuilt), as plain arrays
    and JSON; no pickle. It is written under a temporary name and renamed into
    place, so a crash never leaves half a file.

    Parameters
    ----------
    estimator : StreamingKernelPCA
        A fitted estimator.
    path : str or pathlib.Path
        Where to write it (``.npz``).

    Returns
    -------
    None

    See Also
    --------
    load_streaming_model : Reads it back.
    """
    if not isinstance(estimator, StreamingKernelPCA):
        raise TypeError(
            f"save_streaming_model saves a StreamingKernelPCA, not a "
            f"{type(estimator).__name__}; save any fitted estimator or model with "
            "kernelscale.save_model.")
    if not str(path).endswith(".npz"):  # np.savez's rule, which this function kept
        path = f"{path}.npz"
    save_model(estimator, path)


def load_streaming_model(path) -> StreamingKernelPCA:
    """:func:`kernelscale.load_model` of a file that holds a ``StreamingKernelPCA``.

    The returned estimator can ``transform`` and keep streaming with
    ``partial_fit``. A file that holds another model is a ``ValueError`` naming it.

    Parameters
    ----------
    path : str or pathlib.Path
        A file written by :func:`save_streaming_model`.

    Returns
    -------
    estimator : StreamingKernelPCA
        The fitted estimator, its sketch restored.

    See Also
    --------
    save_streaming_model : Writes the file.
    kernelscale.load_model : Reads this file too, and every other model file.
    """
    return load_model(path, expected_type=StreamingKernelPCA)
