"""The baselines of paper 004, with the interface of :class:`~.skpca.StreamingMethod`.

* :class:`RNCA` (Lopez-Paz et al. 2014): random Fourier features ``Z`` and the
  exact m x m covariance ``Z^T Z`` summed over the stream, eigendecomposed once
  at the end (O(n m^2) train time, m^2 + m d space). ``G' = Z Z^T``.
* :class:`StreamingNystrom` (Drineas & Mahoney 2005 in a stream): a reservoir
  sample S of c points (uniform, which is the 004 sampling distribution for
  shift-invariant kernels), then the eigendecomposition of ``K_SS``.
  ``G' = K_XS K_SS^+ K_SX``; a new point costs O(c d + c^2) (c^2 + c d space).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from kernelscale.kernels import KERNELS, make_kernel
from kernelscale.linalg import gram, pack_symmetric, thresholded_eigh, unpack_symmetric
from kernelscale.streaming.skpca import (
    DEFAULT_CHUNK_SIZE,
    RandomFeatureMethod,
    StreamingMethod,
    check_positive_int,
)


class RNCA(RandomFeatureMethod):
    """Randomized nonlinear component analysis: exact PCA of random Fourier features.

    Parameters
    ----------
    n_features_in : int
    n_random_features : int, default=1000
        Number of random Fourier features m.
    kernel : {'rbf', 'laplacian'}, default='rbf'
    gamma : float, default=1.0
    seed : int, default=0
        Seed of the random features.
    chunk_size : int, default=4096

    Examples
    --------
    Its state is the features' covariance, a sum over points, so two halves of a stream
    merge into the model of the whole:

    >>> import numpy as np
    >>> from kernelscale.streaming import RNCA
    >>> X = np.random.default_rng(0).standard_normal((300, 5))
    >>> whole = RNCA(5, n_random_features=100, gamma=0.1).partial_fit(X)
    >>> first = RNCA(5, n_random_features=100, gamma=0.1).partial_fit(X[:150])
    >>> second = RNCA(5, n_random_features=100, gamma=0.1).partial_fit(X[150:])
    >>> bool(np.allclose(first.merge(second).covariance, whole.covariance))
    True
    >>> whole.transform(X[:3], n_components=2).shape
    (3, 2)
    """

    method = "rnca"

    def __init__(
        self,
        n_features_in: int,
        n_random_features: int = 1000,
        kernel: str = "rbf",
        gamma: float = 1.0,
        seed: int = 0,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ):
        super().__init__(n_features_in, n_random_features, kernel, gamma, seed, chunk_size)
        self.covariance = np.zeros((self.n_random_features, self.n_random_features))

    def _feed(self, chunk) -> None:
        # Sum of the n outer products z_i z_i^T, one chunk at a time (GEMM, no SYRK).
        self.covariance += gram(self._lift(chunk), chunk_size=self.chunk_size)

    def _decompose(self):
        return thresholded_eigh(self.covariance, rtol=1e-12)

    def merge(self, other: RNCA) -> RNCA:
        """Add the covariance of other points lifted by the same features; returns self."""
        self._check_mergeable(other)
        self.covariance += other.covariance
        self.n_samples_seen += other.n_samples_seen
        self._eigen = None
        return self

    @property
    def space_words(self) -> int:
        """Space of 004 section 3: ``m^2 + m d``."""
        m = self.n_random_features
        return m * m + m * self.n_features_in

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"covariance_packed": pack_symmetric(self.covariance)}

    @classmethod
    def from_state(cls, params: dict, arrays: dict) -> RNCA:
        keys = ("n_random_features", "kernel", "gamma", "seed", "chunk_size")
        new = cls(params["n_features_in"], **{k: params[k] for k in keys})
        new.covariance = unpack_symmetric(
            np.asarray(arrays["covariance_packed"]), new.n_random_features
        )
        new.n_samples_seen = int(params["n_samples_seen"])
        return new


class StreamingNystrom(StreamingMethod):
    """Nystrom kernel PCA on a reservoir sample of ``n_landmarks`` points.

    Parameters
    ----------
    n_features_in : int
    n_landmarks : int, default=1000
        Reservoir size c.
    kernel : str, default='rbf'
        Any kernel of :func:`kernelscale.kernels.make_kernel`.
    gamma : float, default=1.0
    degree, coef0 : kernel parameters for 'poly'.
    seed : int, default=0
        Seed of the reservoir sampler.
    chunk_size : int, default=4096

    Examples
    --------
    >>> import numpy as np
    >>> from kernelscale.streaming import StreamingNystrom
    >>> X = np.random.default_rng(0).standard_normal((300, 5))
    >>> nystrom = StreamingNystrom(5, n_landmarks=50, gamma=0.1).partial_fit(X)
    >>> nystrom.landmarks.shape
    (50, 5)
    >>> nystrom.transform(X[:3], n_components=2).shape
    (3, 2)
    """

    method = "nystrom"
    # Reservoirs drawn with different seeds merge (independent samplers are fine).
    _merge_ignores = ("n_samples_seen", "chunk_size", "seed")

    def __init__(
        self,
        n_features_in: int,
        n_landmarks: int = 1000,
        kernel: str = "rbf",
        gamma: float | None = 1.0,
        degree: int = 3,
        coef0: float = 1.0,
        seed: int = 0,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
    ):
        super().__init__(n_features_in, chunk_size)
        if kernel not in KERNELS:
            raise ValueError(f"Unknown kernel {kernel!r}; choose one of {KERNELS}.")
        self.kernel = make_kernel(kernel, gamma=gamma, degree=degree, coef0=coef0,
                                  n_features=self.n_features_in)
        self.n_landmarks = check_positive_int(n_landmarks, "n_landmarks")
        self.seed = int(seed)
        self._rng = np.random.default_rng(self.seed)
        self.reservoir = np.zeros((self.n_landmarks, self.n_features_in))

    @property
    def landmarks(self) -> np.ndarray:
        """The sampled points (min(c, n_seen) x d)."""
        return self.reservoir[: min(self.n_landmarks, self.n_samples_seen)]

    def partial_fit(self, X) -> StreamingNystrom:
        X = self._check_X(X)
        c, seen = self.n_landmarks, self.n_samples_seen
        # Fill the reservoir with the first c points of the stream.
        fill = min(max(c - seen, 0), X.shape[0])
        if fill:
            self.reservoir[seen : seen + fill] = _dense(X[:fill])
        # Algorithm R: the point at stream position t replaces slot j ~ U{0..t} if j < c.
        # One uniform double per point, so any split into batches draws the same slots.
        rest = X.shape[0] - fill
        if rest:
            positions = np.arange(seen + fill, seen + X.shape[0])
            slots = np.floor(self._rng.random(rest) * (positions + 1)).astype(np.int64)
            hits = np.flatnonzero(slots < c)
            # Later points overwrite earlier ones in the same slot: keep the last hit.
            _, last = np.unique(slots[hits][::-1], return_index=True)
            winners = hits[::-1][last]
            self.reservoir[slots[winners]] = _dense(X[fill + winners])
        self.n_samples_seen += X.shape[0]
        self._eigen = None
        return self

    def _lift(self, chunk) -> np.ndarray:
        return self.kernel(chunk, self.landmarks)

    def _decompose(self):
        # G' = K_XS V diag(1/w) V^T K_SX: basis V w^-1/2; eigenvalues of G' ~ (n/c) w.
        landmarks = self.landmarks
        w, V = thresholded_eigh(self.kernel(landmarks, landmarks), rtol=1e-10)
        scale = self.n_samples_seen / landmarks.shape[0]
        return scale * w, V / np.sqrt(w)

    def merge(self, other: StreamingNystrom) -> StreamingNystrom:
        """Uniform sample of the union of both streams from the two reservoirs; returns self.

        The number kept from this reservoir is hypergeometric (n_1 good, n_2 bad,
        min(c, n_1 + n_2) draws), then each side contributes a uniform subset.
        """
        self._check_mergeable(other)
        n1, n2, c = self.n_samples_seen, other.n_samples_seen, self.n_landmarks
        total = min(c, n1 + n2)
        take_mine = int(self._rng.hypergeometric(n1, n2, total)) if n1 and n2 else min(n1, total)
        mine = self._rng.choice(self.landmarks.shape[0], take_mine, replace=False)
        theirs = self._rng.choice(other.landmarks.shape[0], total - take_mine, replace=False)
        merged = np.vstack([self.landmarks[np.sort(mine)], other.landmarks[np.sort(theirs)]])
        self.reservoir = np.zeros_like(self.reservoir)
        self.reservoir[:total] = merged
        self.n_samples_seen = n1 + n2
        self._eigen = None
        return self

    @property
    def space_words(self) -> int:
        """Space of 004 section 3: ``c^2 + c d``."""
        c = self.n_landmarks
        return c * c + c * self.n_features_in

    def params(self) -> dict:
        k = self.kernel
        return {
            "method": self.method,
            "n_features_in": self.n_features_in,
            "n_landmarks": self.n_landmarks,
            "kernel": k.name,
            "gamma": k.gamma,
            "degree": k.degree,
            "coef0": k.coef0,
            "seed": self.seed,
            "chunk_size": self.chunk_size,
            "n_samples_seen": self.n_samples_seen,
        }

    def to_arrays(self) -> dict[str, np.ndarray]:
        # The sampler's state travels as integers, so a loaded model can keep streaming.
        state = self._rng.bit_generator.state
        inner = state["state"]
        return {
            "landmarks": self.landmarks.copy(),
            "rng_state": np.array(
                [inner["state"], inner["inc"], state["has_uint32"], state["uinteger"]],
                dtype=object,
            ).astype(str),
        }

    @classmethod
    def from_state(cls, params: dict, arrays: dict) -> StreamingNystrom:
        keys = ("n_landmarks", "kernel", "gamma", "degree", "coef0", "seed", "chunk_size")
        new = cls(params["n_features_in"], **{k: params[k] for k in keys})
        landmarks = np.asarray(arrays["landmarks"], dtype=np.float64)
        new.reservoir[: landmarks.shape[0]] = landmarks
        new.n_samples_seen = int(params["n_samples_seen"])
        s, inc, has, uint = (int(v) for v in np.asarray(arrays["rng_state"]))
        new._rng.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": s, "inc": inc},
            "has_uint32": has,
            "uinteger": uint,
        }
        return new


def _dense(rows) -> np.ndarray:
    return rows.toarray() if sp.issparse(rows) else np.asarray(rows, dtype=np.float64)
