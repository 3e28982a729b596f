"""SKPCA: streaming kernel PCA by Frequent Directions on random Fourier features.

Algorithm 1 of paper 004 (Ghashami, Perry, Phillips, AISTATS 2016). Each point
``a_i`` is lifted to ``z_i = sqrt(2/m) [cos(r_j^T a_i + b_j)]_j`` (m random Fourier
features) and fed into a Frequent Directions sketch ``B`` (l x m) that shrinks by
its (l/2)-th squared singular value (``l//2`` for odd l). The answer is ``W`` (m x l), the right
singular vectors of ``B``: the kernel matrix is approximated by
``G~ = Z W W^T Z^T`` and a new point is mapped to ``z(x) W`` in O(dm + lm).

Points are lifted and fed in mini-batches of ``chunk_size`` rows; the memory held
is the feature map (m d words) and the sketch (l m words), whatever the number
of points fed.

All three streaming methods of 004 (this one, RNCA and streaming Nystrom in
:mod:`kernelscale.streaming.baselines`) share the :class:`StreamingMethod`
interface: ``partial_fit``, ``merge``, ``features`` (rows whose Gram matrix is
the method's kernel approximation ``G'``), ``transform`` (top-k scores),
``space_words`` (004's space count) and plain-array persistence.
"""

from __future__ import annotations

from numbers import Integral

import numpy as np
import scipy.sparse as sp

from kernelscale.features import RandomFourierFeatures
from kernelscale.streaming.frequent_directions import FrequentDirections

DEFAULT_CHUNK_SIZE = 4096
SHIFT_INVARIANT = ("rbf", "laplacian")


def check_positive_int(value, name: str, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``, or a clear error."""
    if isinstance(value, bool) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an int, got {value!r}.")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}.")
    return int(value)


class StreamingMethod:
    """Shared interface of the streaming kernel PCA methods of paper 004.

    Subclasses set ``method`` and implement ``_lift`` (a chunk of points to the
    method's m- or c-dimensional space), ``_decompose`` (eigenvalues and basis
    of that space), ``_feed``, ``merge``, ``space_words`` and persistence.
    """

    method = "base"

    def __init__(self, n_features_in: int, chunk_size: int = DEFAULT_CHUNK_SIZE):
        self.n_features_in = check_positive_int(n_features_in, "n_features_in")
        self.chunk_size = check_positive_int(chunk_size, "chunk_size")
        self.n_samples_seen = 0
        self._eigen = None

    def _check_X(self, X):
        if sp.issparse(X):
            X = X.tocsr()
        else:
            X = np.asarray(X)
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}.")
        if X.shape[1] != self.n_features_in:
            raise ValueError(
                f"X has {X.shape[1]} features but this {type(self).__name__} was built "
                f"for {self.n_features_in}."
            )
        values = X.data if sp.issparse(X) else X
        if not np.all(np.isfinite(values)):
            raise ValueError("X holds NaN or infinite values; remove or impute them first.")
        return X

    def partial_fit(self, X) -> StreamingMethod:
        """Feed a block of points (n_points, n_features_in), dense or CSR; returns self."""
        X = self._check_X(X)
        for start in range(0, X.shape[0], self.chunk_size):
            self._feed(X[start : start + self.chunk_size])
        self.n_samples_seen += X.shape[0]
        self._eigen = None
        return self

    def eigen(self) -> tuple[np.ndarray, np.ndarray]:
        """Approximate kernel eigenvalues (descending) and the basis of the lifted space."""
        if self._eigen is None:
            if self.n_samples_seen == 0:
                raise ValueError(f"This {type(self).__name__} has seen no points yet.")
            values, basis = self._decompose()
            from sklearn.utils.extmath import svd_flip  # slow import: on first use
            basis, _ = svd_flip(basis, np.zeros((basis.shape[1], 1)), u_based_decision=True)
            self._eigen = (values, basis)
        return self._eigen

    def features(self, X, n_components: int | None = None) -> np.ndarray:
        """Rows ``Y`` with ``Y Y^T = G'``, the method's kernel approximation (n x r).

        With ``n_components`` only the top directions are kept (``G'_k``).
        """
        X = self._check_X(X)
        _, basis = self.eigen()
        if n_components is not None:
            basis = basis[:, :n_components]
        out = np.empty((X.shape[0], basis.shape[1]))
        for start in range(0, X.shape[0], self.chunk_size):
            chunk = X[start : start + self.chunk_size]
            out[start : start + chunk.shape[0]] = self._lift(chunk) @ basis
        return out

    def transform(self, X, n_components: int) -> np.ndarray:
        """Scores of the points on the top ``n_components`` kernel principal directions.

        Directions the sketch does not hold (rank below ``n_components``) score 0.
        """
        scores = self.features(X, n_components)
        if scores.shape[1] < n_components:
            missing = n_components - scores.shape[1]
            scores = np.hstack([scores, np.zeros((scores.shape[0], missing))])
        return scores

    def _feed(self, chunk) -> None:
        raise NotImplementedError

    def _lift(self, chunk) -> np.ndarray:
        raise NotImplementedError

    def _decompose(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    # Parameters two sketches may differ in and still merge.
    _merge_ignores = ("n_samples_seen", "chunk_size")

    def _check_mergeable(self, other) -> None:
        if type(other) is not type(self):
            raise TypeError(f"Cannot merge a {type(other).__name__} into a {type(self).__name__}.")
        mine, theirs = self.params(), other.params()
        for key in self._merge_ignores:
            mine.pop(key)
            theirs.pop(key)
        if mine != theirs:
            diff = sorted(k for k in mine if mine[k] != theirs.get(k))
            raise ValueError(
                f"Cannot merge sketches built with different {', '.join(diff)}; "
                "build both with the same parameters and seed."
            )

    def params(self) -> dict:
        """JSON-serialisable parameters (enough, with :meth:`to_arrays`, to rebuild)."""
        raise NotImplementedError

    def to_arrays(self) -> dict[str, np.ndarray]:
        raise NotImplementedError


class RandomFeatureMethod(StreamingMethod):
    """A streaming method over m random Fourier features (SKPCA, RNCA of paper 004).

    Builds the feature map from its seed (shift-invariant kernels only), lifts
    chunks of points with it and reports the parameters both methods share.
    """

    def __init__(self, n_features_in: int, n_random_features: int, kernel: str, gamma: float,
                 seed: int, chunk_size: int):
        super().__init__(n_features_in, chunk_size)
        if kernel not in SHIFT_INVARIANT:
            raise ValueError(
                f"{self.method.upper()} needs a shift-invariant kernel {SHIFT_INVARIANT} for "
                f"random Fourier features, got {kernel!r}."
            )
        self.n_random_features = check_positive_int(n_random_features, "n_random_features")
        self.feature_map = RandomFourierFeatures(
            self.n_features_in, self.n_random_features, gamma, kernel=kernel, seed=seed
        )

    def _lift(self, chunk) -> np.ndarray:
        # z_i = sqrt(2/m) [f_1(a_i), ..., f_m(a_i)] (Algorithm 1 of 004)
        return self.feature_map.transform(chunk, chunk_size=self.chunk_size)

    def params(self) -> dict:
        fmap = self.feature_map
        return {
            "method": self.method,
            "n_features_in": self.n_features_in,
            "n_random_features": self.n_random_features,
            "kernel": fmap.kernel,
            "gamma": fmap.gamma,
            "seed": fmap.seed,
            "chunk_size": self.chunk_size,
            "n_samples_seen": self.n_samples_seen,
        }


class SKPCA(RandomFeatureMethod):
    """Streaming kernel PCA (Algorithm 1 of paper 004).

    Parameters
    ----------
    n_features_in : int
        Input dimension d.
    n_random_features : int, default=1000
        Number of random Fourier features m.
    sketch_size : int, default=20
        Rows l of the Frequent Directions sketch; the basis W has at most l columns.
        The paper's shrink subtracts the ``(l//2)``-th squared singular value
        (``l//2`` rounds down for odd l) and keeps at most ``l//2 - 1`` directions
        after each shrink; its bound covers ``k < l//2`` components.
    kernel : {'rbf', 'laplacian'}, default='rbf'
    gamma : float, default=1.0
        Kernel scale (``exp(-gamma ||x - y||^2)`` for rbf).
    shrink : {'modified', 'classic'}, default='modified'
        Frequent Directions shrink (see :mod:`kernelscale.streaming.frequent_directions`).
    seed : int, default=0
        Seed of the random Fourier features (shared by every sketch to be merged).
    chunk_size : int, default=4096
        Points lifted and fed at a time.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelscale.streaming import SKPCA
    >>> X = np.random.default_rng(0).standard_normal((300, 5))
    >>> sk = SKPCA(5, n_random_features=200, sketch_size=10, gamma=0.1).partial_fit(X)
    >>> sk.transform(X[:3], n_components=2).shape
    (3, 2)
    """

    method = "skpca"

    def __init__(
        self,
        n_features_in: int,
        n_random_features: int = 1000,
        sketch_size: int = 20,
        kernel: str = "rbf",
        gamma: float = 1.0,
        shrink: str = "modified",
        seed: int = 0,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ):
        super().__init__(n_features_in, n_random_features, kernel, gamma, seed, chunk_size)
        self.sketch = FrequentDirections(sketch_size, self.n_random_features, shrink)

    def _feed(self, chunk) -> None:
        # Step: insert the lifted rows into B, shrink when full (Algorithm 1 of 004)
        self.sketch.update(self._lift(chunk))

    def _decompose(self):
        # Return W: the right singular vectors of B (m x l)
        singular_values, W = self.sketch.right_singular()
        return singular_values**2, W

    @property
    def W(self) -> np.ndarray:
        """The answer of Algorithm 1 of 004: right singular vectors of B (m x r, r <= l)."""
        return self.eigen()[1]

    def merge(self, other: SKPCA) -> SKPCA:
        """Fold in a sketch of other points built with the same features; returns self."""
        self._check_mergeable(other)
        self.sketch.merge(other.sketch)
        self.n_samples_seen += other.n_samples_seen
        self._eigen = None
        return self

    @property
    def space_words(self) -> int:
        """Space of 004 section 3: ``m d + m l`` (feature functions plus sketch)."""
        return self.n_random_features * (self.n_features_in + self.sketch.sketch_size)

    @property
    def error_bound(self) -> float:
        """Certified ``||Z^T Z - B^T B||_2`` bound: the total Frequent Directions shrinkage."""
        return self.sketch.shrinkage

    def params(self) -> dict:
        return {**super().params(), "sketch_size": self.sketch.sketch_size,
                "shrink": self.sketch.shrink}

    def to_arrays(self) -> dict[str, np.ndarray]:
        return self.sketch.to_arrays()

    @classmethod
    def from_state(cls, params: dict, arrays: dict) -> SKPCA:
        """Rebuild from :meth:`params` and :meth:`to_arrays` (the features from the seed)."""
        keys = ("n_random_features", "sketch_size", "kernel", "gamma", "shrink", "seed")
        new = cls(params["n_features_in"], **{k: params[k] for k in keys},
                  chunk_size=params.get("chunk_size", DEFAULT_CHUNK_SIZE))
        new.sketch = FrequentDirections.from_arrays(
            arrays, new.sketch.sketch_size, new.n_random_features, new.sketch.shrink
        )
        new.n_samples_seen = int(params["n_samples_seen"])
        return new
