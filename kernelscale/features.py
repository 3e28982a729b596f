"""Oblivious random feature maps: random Fourier, TensorSketch, arc-cosine.

A feature map ``z: R^d -> R^m`` with ``E[<z(x), z(y)>] = k(x, y)`` is fully
determined by its parameters and a seed: the constructor draws every random
number once from ``np.random.default_rng(seed)``, and :meth:`FeatureMap.transform`
is then a pure function. A worker that rebuilds the map from the seed the master
broadcast applies the identical operator (paper 001, section 5.1: the kernel
subspace embedding ``E_i = phi_hat(A_i) @ T`` starts from such a map).

``transform`` walks the rows in chunks, so a CSR input is never densified more
than ``chunk_size`` rows at a time, and each chunk costs ``O(nnz(chunk) m)``.
"""

from __future__ import annotations

from numbers import Real

import numpy as np
import scipy.sparse as sp

from kernelscale.kernels import Kernel
from kernelscale.sketches import _check_positive_int, _check_seed

DEFAULT_CHUNK_SIZE = 4096


class FeatureMap:
    """Base class of seeded feature maps.

    Attributes
    ----------
    n_features_in : int
        Input dimension ``d``.
    n_components : int
        Output dimension ``m``.
    seed : int or None
        Seed of the random data (``None`` for deterministic maps).
    """

    def __init__(self, n_features_in: int, n_components: int, seed: int | None) -> None:
        self.n_features_in = _check_positive_int(n_features_in, "n_features_in")
        self.n_components = _check_positive_int(n_components, "n_components")
        self.seed = None if seed is None else _check_seed(seed)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(n_features_in={self.n_features_in}, "
            f"n_components={self.n_components}, seed={self.seed})"
        )

    def transform(self, X, chunk_size: int = DEFAULT_CHUNK_SIZE, dtype=np.float64) -> np.ndarray:
        """Map the rows of ``X``, ``chunk_size`` rows at a time.

        Parameters
        ----------
        X : array or sparse matrix of shape (n_samples, n_features_in)
            Sparse input is converted to CSR and densified one chunk at a time
            at most.
        chunk_size : int
            Rows per chunk.
        dtype : numpy dtype
            Output dtype. float32 computes dense chunks in float32 where the
            map supports it (random Fourier features: about 5x faster cosines);
            everything else is computed in float64.

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        chunk_size = _check_positive_int(chunk_size, "chunk_size")
        if sp.issparse(X):
            X = X.tocsr()
        else:
            X = np.asarray(X)
            if X.ndim != 2:
                raise ValueError(
                    f"X must be 2-D (n_samples, n_features), got shape {X.shape}; "
                    "reshape a single point with x.reshape(1, -1)."
                )
        if X.shape[1] != self.n_features_in:
            raise ValueError(
                f"X has {X.shape[1]} features but this {type(self).__name__} was built "
                f"for n_features_in={self.n_features_in}; rebuild the map for "
                f"{X.shape[1]} features or pass data with {self.n_features_in}."
            )
        out = np.empty((X.shape[0], self.n_components), dtype=dtype)
        work = np.float32 if np.dtype(dtype) == np.float32 and self._fast_float32 else np.float64
        for start in range(0, X.shape[0], chunk_size):
            chunk = X[start : start + chunk_size]
            if chunk.dtype != work:
                chunk = chunk.astype(work)
            out[start : start + chunk_size] = self._transform_chunk(chunk)
        return out

    __call__ = transform

    _fast_float32 = False  # whether _transform_chunk computes float32 chunks in float32

    def _transform_chunk(self, chunk) -> np.ndarray:  # chunk: float64 dense or CSR
        raise NotImplementedError


def _check_gamma(gamma) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, Real) or not np.isfinite(gamma):
        raise ValueError(f"gamma must be a finite number >= 0, got {gamma!r}.")
    if gamma < 0:  # 0, as scikit-learn allows: a constant kernel (rbf), every feature alike
        raise ValueError(f"gamma must be a finite number >= 0, got {gamma!r}.")
    return float(gamma)


def _dense(M) -> np.ndarray:
    return M.toarray() if sp.issparse(M) else np.asarray(M)


class RandomFourierFeatures(FeatureMap):
    """Random Fourier features (Rahimi & Recht 2007) for shift-invariant kernels.

    ``z(x) = sqrt(2/m) cos(W^T x + b)`` with ``b ~ U[0, 2 pi)`` and the columns
    of ``W`` drawn from the kernel's spectral density (Bochner): ``N(0, 2 gamma I)``
    for ``rbf`` ``exp(-gamma ||x - y||^2)``, i.i.d. Cauchy with scale ``gamma``
    per coordinate for ``laplacian`` ``exp(-gamma ||x - y||_1)``.

    Parameters
    ----------
    n_features_in : int
    n_components : int
        Number of random features ``m``.
    gamma : float
        Positive kernel scale.
    kernel : {'rbf', 'laplacian'}
    seed : int
    """

    def __init__(
        self,
        n_features_in: int,
        n_components: int,
        gamma: float,
        kernel: str = "rbf",
        seed: int = 0,
    ) -> None:
        super().__init__(n_features_in, n_components, _check_seed(seed))
        if kernel not in ("rbf", "laplacian"):
            raise ValueError(
                f"RandomFourierFeatures supports 'rbf' and 'laplacian', got {kernel!r}."
            )
        self.gamma = _check_gamma(gamma)
        self.kernel = kernel
        rng = np.random.default_rng(self.seed)
        shape = (self.n_features_in, self.n_components)
        if kernel == "rbf":
            self.weights_ = rng.normal(0.0, np.sqrt(2.0 * self.gamma), size=shape)
        else:
            self.weights_ = self.gamma * rng.standard_cauchy(size=shape)
        self.offset_ = rng.uniform(0.0, 2.0 * np.pi, size=self.n_components)

    _fast_float32 = True

    def _transform_chunk(self, chunk) -> np.ndarray:
        weights, offset = self.weights_, self.offset_
        if chunk.dtype == np.float32:
            if getattr(self, "_weights32", None) is None:
                self._weights32 = weights.astype(np.float32)
                self._offset32 = offset.astype(np.float32)
            weights, offset = self._weights32, self._offset32
        proj = _dense(chunk @ weights)
        proj += offset
        np.cos(proj, out=proj)
        proj *= proj.dtype.type(np.sqrt(2.0 / self.n_components))
        return proj


class TensorSketch(FeatureMap):
    """TensorSketch (Pham & Pagh 2013) for ``k(x, y) = (gamma <x, y> + coef0)^degree``.

    With ``u(x) = [sqrt(gamma) x, sqrt(coef0)]`` the kernel is ``<u(x), u(y)>^degree``,
    the inner product of ``degree``-fold tensor powers of ``u``. Each of ``degree``
    independent CountSketches ``C_j`` (hash ``h_j``, sign ``s_j``) maps ``u(x)`` to
    ``R^m``, and the CountSketch of the tensor power is their circular convolution:
    ``TS(x) = irfft(prod_j rfft(C_j u(x)))``. Each ``C_j`` is a sparse
    ``(d + 1) x m`` matrix, so a CSR chunk costs ``O(degree (nnz + m log m))``
    per row.

    Parameters
    ----------
    n_features_in : int
    n_components : int
        Sketch size ``m``.
    degree : int
        Polynomial degree (>= 1).
    gamma : float
        Positive scale.
    coef0 : float
        Constant term (>= 0).
    seed : int
    """

    def __init__(
        self,
        n_features_in: int,
        n_components: int,
        degree: int = 3,
        gamma: float = 1.0,
        coef0: float = 1.0,
        seed: int = 0,
    ) -> None:
        super().__init__(n_features_in, n_components, _check_seed(seed))
        self.degree = _check_positive_int(degree, "degree")
        self.gamma = _check_gamma(gamma)
        if isinstance(coef0, bool) or not isinstance(coef0, Real) or not coef0 >= 0:
            raise ValueError(f"coef0 must be a finite number >= 0, got {coef0!r}.")
        if not np.isfinite(coef0):
            raise ValueError(f"coef0 must be a finite number >= 0, got {coef0!r}.")
        self.coef0 = float(coef0)
        rng = np.random.default_rng(self.seed)
        d1, m = self.n_features_in + 1, self.n_components
        self.hash_ = rng.integers(0, m, size=(self.degree, d1))
        self.sign_ = rng.choice(np.array([-1.0, 1.0]), size=(self.degree, d1))
        # Fold u(x)'s scaling into the sketches: rows 0..d-1 scaled by sqrt(gamma);
        # the constant coordinate becomes a fixed row added to every point.
        scale = np.full(d1, np.sqrt(self.gamma))
        scale[-1] = np.sqrt(self.coef0)
        self._sketches = [
            sp.csr_matrix(
                (scale[:-1] * self.sign_[j, :-1], (np.arange(d1 - 1), self.hash_[j, :-1])),
                shape=(d1 - 1, m),
            )
            for j in range(self.degree)
        ]
        self._constant = np.zeros((self.degree, m))
        for j in range(self.degree):
            self._constant[j, self.hash_[j, -1]] = scale[-1] * self.sign_[j, -1]

    def _transform_chunk(self, chunk) -> np.ndarray:
        m = self.n_components
        spectrum = None
        for j, sketch in enumerate(self._sketches):
            counted = _dense(chunk @ sketch) + self._constant[j]
            if self.degree == 1:
                return counted
            f = np.fft.rfft(counted, axis=1)
            spectrum = f if spectrum is None else spectrum * f
        return np.fft.irfft(spectrum, n=m, axis=1)


class ArcCosineFeatures(FeatureMap):
    """Random features for the arc-cosine kernel of order 0, 1 or 2 (Cho & Saul 2009).

    ``z(x) = sqrt(2/m) max(0, W^T x)^order`` (order 0: the step ``1[W^T x > 0]``)
    with ``W ~ N(0, I)`` of shape (d, m); Cho & Saul eq. (1) gives
    ``k_n(x, y) = 2 E_w[step(w.x) step(w.y) (w.x)^n (w.y)^n]``. At ``x = 0`` the
    order-0 features are all 0 while the kernel's convention gives 1.

    Parameters
    ----------
    n_features_in : int
    n_components : int
    order : {0, 1, 2}
    seed : int
    """

    def __init__(
        self, n_features_in: int, n_components: int, order: int = 1, seed: int = 0
    ) -> None:
        super().__init__(n_features_in, n_components, _check_seed(seed))
        if order not in (0, 1, 2) or isinstance(order, bool):
            raise ValueError(f"The arc-cosine kernel has order 0, 1 or 2, got {order!r}.")
        self.order = int(order)
        rng = np.random.default_rng(self.seed)
        self.weights_ = rng.standard_normal((self.n_features_in, self.n_components))

    def _transform_chunk(self, chunk) -> np.ndarray:
        proj = _dense(chunk @ self.weights_)
        if self.order == 0:
            feats = (proj > 0).astype(np.float64)
        else:
            feats = np.maximum(proj, 0.0) ** self.order
        return np.sqrt(2.0 / self.n_components) * feats


class IdentityFeatures(FeatureMap):
    """The exact feature map of the linear kernel: ``z(x) = x`` (densified by chunk).

    Parameters
    ----------
    n_features_in : int
    """

    def __init__(self, n_features_in: int) -> None:
        super().__init__(n_features_in, n_features_in, None)

    def _transform_chunk(self, chunk) -> np.ndarray:
        return _dense(chunk)


def feature_map_size(kernel: Kernel, n_features_in: int, n_components: int) -> int:
    """m, the features of :func:`make_feature_map`'s map, without drawing its random data.

    ``n_components``, except for the linear kernel, whose exact map has
    ``n_features_in`` components.
    """
    return int(n_features_in if kernel.name == "linear" else n_components)


def make_feature_map(
    kernel: Kernel, n_features_in: int, n_components: int, seed: int
) -> FeatureMap:
    """The random feature map whose inner products approximate ``kernel``.

    Parameters
    ----------
    kernel : Kernel
        From :func:`kernelscale.kernels.make_kernel`.
    n_features_in : int
    n_components : int
        Number of random features (ignored for the linear kernel, whose exact
        map has ``n_features_in`` components).
    seed : int
        The broadcast seed; the same seed gives the same map on every worker.

    Returns
    -------
    FeatureMap
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a Kernel (see make_kernel), got {type(kernel).__name__}.")
    if kernel.name in ("rbf", "laplacian"):
        return RandomFourierFeatures(n_features_in, n_components, kernel.gamma, kernel.name, seed)
    if kernel.name == "poly":
        return TensorSketch(
            n_features_in, n_components, kernel.degree, kernel.gamma, kernel.coef0, seed
        )
    if kernel.name == "arccos":
        return ArcCosineFeatures(n_features_in, n_components, kernel.order, seed)
    if kernel.name == "linear":
        _check_seed(seed)
        return IdentityFeatures(n_features_in)
    raise ValueError(f"No random feature map for kernel {kernel.name!r}.")
