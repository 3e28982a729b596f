"""Kernel functions, evaluated blockwise on dense or CSR rows.

Conventions follow scikit-learn's ``sklearn.metrics.pairwise`` so results can be
compared one to one:

* ``rbf``        k(x, y) = exp(-gamma ||x - y||^2)   (``sigma`` gives gamma = 1 / (2 sigma^2))
* ``laplacian``  k(x, y) = exp(-gamma ||x - y||_1)
* ``poly``       k(x, y) = (gamma <x, y> + coef0)^degree
* ``linear``     k(x, y) = <x, y>
* ``arccos``     the arc-cosine kernel of order 0, 1 or 2 (Cho & Saul, 2009)

Every evaluation walks the rows of ``X`` in chunks and multiplies two *different*
buffers (``X[i:j] @ Y.T``): numpy's bundled OpenBLAS computes a large ``A @ A.T``
(SYRK) wrongly on this platform (see DESIGN.md, "Known hazards").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils import check_random_state

KERNELS = ("rbf", "laplacian", "poly", "linear", "arccos")
DEFAULT_CHUNK_SIZE = 4096


@dataclass(frozen=True)
class Kernel:
    """A positive semi-definite kernel with fixed parameters.

    Build one with :func:`make_kernel`, which validates the parameters.

    Attributes
    ----------
    name : str
        One of ``KERNELS``.
    gamma : float or None
        Scale for ``rbf``, ``laplacian`` and ``poly``.
    degree : int
        Degree of ``poly``.
    coef0 : float
        Constant term of ``poly``.
    order : int
        Order of ``arccos`` (0, 1 or 2).
    """

    name: str
    gamma: float | None = None
    degree: int = 3
    coef0: float = 1.0
    order: int = 1

    @property
    def accepts_sparse(self) -> bool:
        """Whether CSR input is supported (L1 distances would densify every block)."""
        return self.name != "laplacian"

    @property
    def is_shift_invariant(self) -> bool:
        return self.name in ("rbf", "laplacian")

    def __call__(self, X, Y, chunk_size: int = DEFAULT_CHUNK_SIZE) -> np.ndarray:
        """Kernel block ``K[i, j] = k(X[i], Y[j])`` as a dense array."""
        _check_input(self, X)
        _check_input(self, Y)
        if X.shape[1] != Y.shape[1]:
            raise ValueError(
                f"X has {X.shape[1]} features but Y has {Y.shape[1]}; they must match."
            )
        Y = _distinct_buffer(X, Y)
        y_sq = row_sq_norms(Y) if self.name in ("rbf", "arccos") else None
        if X.shape[0] <= chunk_size:  # one block: no copy into a second buffer
            return self._block(X, Y, y_sq)
        out = np.empty((X.shape[0], Y.shape[0]), dtype=np.result_type(_dtype(X), _dtype(Y)))
        for start in range(0, X.shape[0], chunk_size):
            stop = min(start + chunk_size, X.shape[0])
            out[start:stop] = self._block(X[start:stop], Y, y_sq)
        return out

    def diag(self, X) -> np.ndarray:
        """The diagonal ``k(x_i, x_i)`` without forming any block."""
        _check_input(self, X)
        n = X.shape[0]
        if self.name in ("rbf", "laplacian"):
            return np.ones(n, dtype=_dtype(X))
        sq = row_sq_norms(X)
        if self.name == "linear":
            return sq
        if self.name == "poly":
            return (self.gamma * sq + self.coef0) ** self.degree
        # arccos: theta = 0, J_n(0) = pi for n = 0, 1, 2 ... times (1, 1, 3)
        return sq**self.order * _ARCCOS_J0[self.order] / np.pi

    def _block(self, Xc, Y, y_sq) -> np.ndarray:
        if self.name == "laplacian":
            from sklearn.metrics.pairwise import manhattan_distances

            return np.exp(-self.gamma * manhattan_distances(Xc, Y))
        inner = _dense(Xc @ Y.T)
        if self.name == "linear":
            return inner
        if self.name == "poly":
            return (self.gamma * inner + self.coef0) ** self.degree
        x_sq = row_sq_norms(Xc)
        if self.name == "rbf":
            # exp(-gamma max(||x||^2 + ||y||^2 - 2 <x, y>, 0)), in place on the block
            if inner.dtype.kind != "f":
                inner = inner.astype(np.float64)
            inner *= -2.0
            inner += x_sq[:, None]
            inner += y_sq[None, :]
            np.maximum(inner, 0.0, out=inner)
            inner *= -self.gamma
            return np.exp(inner, out=inner)
        return _arccos_block(inner, x_sq, y_sq, self.order)

    def to_dict(self) -> dict:
        """Parameters as plain JSON-serialisable values."""
        return asdict(self)

    @classmethod
    def from_dict(cls, params: dict) -> Kernel:
        return make_kernel(**params)


_ARCCOS_J0 = {0: np.pi, 1: np.pi, 2: 3.0 * np.pi}


def _arccos_block(inner, x_sq, y_sq, order) -> np.ndarray:
    # Cho & Saul (2009), eq. (1)-(3): k_n = ||x||^n ||y||^n J_n(theta) / pi.
    norms = np.sqrt(np.outer(x_sq, y_sq))
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(norms > 0, inner / np.where(norms > 0, norms, 1.0), 1.0)
    cos = np.clip(cos, -1.0, 1.0)
    theta = np.arccos(cos)
    sin = np.sqrt(1.0 - cos**2)
    if order == 0:
        j = np.pi - theta
    elif order == 1:
        j = sin + (np.pi - theta) * cos
    else:
        j = 3.0 * sin * cos + (np.pi - theta) * (1.0 + 2.0 * cos**2)
    return norms**order * j / np.pi


def make_kernel(
    name: str = "rbf",
    gamma: float | None = None,
    degree: int = 3,
    coef0: float = 1.0,
    order: int = 1,
    sigma: float | None = None,
    n_features: int | None = None,
) -> Kernel:
    """Validate parameters and build a :class:`Kernel`.

    Parameters
    ----------
    name : {'rbf', 'laplacian', 'poly', 'linear', 'arccos'}
    gamma : float, optional
        Positive scale. ``None`` means ``1 / n_features`` (scikit-learn's default),
        which needs ``n_features``.
    degree : int
        Polynomial degree (>= 1).
    coef0 : float
        Polynomial constant term (>= 0 keeps the kernel positive semi-definite).
    order : int
        Arc-cosine order, 0, 1 or 2.
    sigma : float, optional
        RBF bandwidth, the alternative to ``gamma``: gamma = 1 / (2 sigma^2).
    n_features : int, optional
        Number of input features, used for the default ``gamma``.
    """
    if name not in KERNELS:
        raise ValueError(f"Unknown kernel {name!r}; choose one of {', '.join(KERNELS)}.")
    if sigma is not None:
        if gamma is not None:
            raise ValueError("Give either gamma or sigma, not both.")
        if name != "rbf":
            raise ValueError(f"sigma is the RBF bandwidth; kernel {name!r} takes gamma.")
        if not isinstance(sigma, Real) or not np.isfinite(sigma) or sigma <= 0:
            raise ValueError(f"sigma must be a positive finite number, got {sigma!r}.")
        gamma = 1.0 / (2.0 * float(sigma) ** 2)
    if name in ("rbf", "laplacian", "poly"):
        if gamma is None:
            if n_features is None:
                raise ValueError(f"Kernel {name!r} needs gamma (or n_features for 1/n_features).")
            gamma = 1.0 / n_features
        if not isinstance(gamma, Real) or not np.isfinite(gamma) or gamma <= 0:
            raise ValueError(f"gamma must be a positive finite number, got {gamma!r}.")
        gamma = float(gamma)
    else:
        gamma = None
    if name == "poly":
        if int(degree) != degree or degree < 1:
            raise ValueError(f"degree must be a positive integer, got {degree!r}.")
        if not np.isfinite(coef0) or coef0 < 0:
            raise ValueError(f"coef0 must be a finite number >= 0, got {coef0!r}.")
    if name == "arccos" and order not in (0, 1, 2):
        raise ValueError(f"The arc-cosine kernel has order 0, 1 or 2, got {order!r}.")
    return Kernel(name=name, gamma=gamma, degree=int(degree), coef0=float(coef0), order=int(order))


def median_heuristic(X, scale: float = 0.2, n_subset: int = 2000, random_state=None) -> float:
    """RBF bandwidth ``sigma = scale x median pairwise distance`` of a random subset.

    This is the papers' rule (section 6.2 of paper 001 uses 0.2 x the median over
    a subset of 20,000 points). Pass the result as ``sigma`` to :func:`make_kernel`.

    Parameters
    ----------
    X : array or CSR matrix of shape (n_samples, n_features)
    scale : float
        Multiplier of the median distance.
    n_subset : int
        Number of rows drawn (without replacement) to estimate the median.
    random_state : int, Generator or None
    """
    n = X.shape[0]
    if n < 2:
        raise ValueError("median_heuristic needs at least 2 rows.")
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale!r}.")
    rng = check_random_state(random_state)
    idx = np.sort(rng.choice(n, size=min(n_subset, n), replace=False))
    sub = X[idx]
    sq = make_kernel("linear")(sub, sub)
    diag = np.diag(sq)
    dist2 = np.maximum(diag[:, None] + diag[None, :] - 2 * sq, 0.0)
    med = float(np.median(np.sqrt(dist2[np.triu_indices(len(idx), k=1)])))
    if med == 0.0:
        raise ValueError("All sampled rows are identical: the median distance is 0.")
    return scale * med


def row_sq_norms(X) -> np.ndarray:
    """Squared Euclidean norm of each row, dense or CSR."""
    if sp.issparse(X):
        return np.asarray(X.multiply(X).sum(axis=1)).ravel()
    return np.einsum("ij,ij->i", X, X)


def _check_input(kernel: Kernel, X) -> None:
    if sp.issparse(X) and not kernel.accepts_sparse:
        raise TypeError(
            f"The {kernel.name} kernel does not take sparse input (its L1 distances "
            "densify every block); pass a dense array or use the 'rbf' kernel."
        )


def _distinct_buffer(X, Y):
    # A product of an array with its own transpose goes to BLAS SYRK, which is
    # broken for large inputs with this numpy/OpenBLAS build (DESIGN.md hazards).
    if not sp.issparse(Y) and not sp.issparse(X) and np.may_share_memory(X, Y):
        return Y.copy()
    return Y


def _dense(M) -> np.ndarray:
    return M.toarray() if sp.issparse(M) else np.asarray(M)


def _dtype(X):
    return X.dtype if X.dtype in (np.float32, np.float64) else np.float64
