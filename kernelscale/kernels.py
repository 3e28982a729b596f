"""Kernel functions, evaluated blockwise on dense or CSR rows.

Conventions follow scikit-learn's ``sklearn.metrics.pairwise`` so results can be
compared one to one:

* ``rbf``        k(x, y) = exp(-gamma ||x - y||^2)   (``sigma`` gives gamma = 1 / (2 sigma^2))
* ``laplacian``  k(x, y) = exp(-gamma ||x - y||_1)
* ``poly``       k(x, y) = (gamma <x, y> + coef0)^degree
* ``linear``     k(x, y) = <x, y>
* ``arccos``     the arc-cosine kernel of order 0, 1 or 2 (Cho & Saul, 2009)

These five have a random feature map (:mod:`kernelscale.features`), which
disKPCA's embedding and the random-features baseline need. The other kernels of
scikit-learn's :func:`~sklearn.metrics.pairwise.pairwise_kernels` are evaluated by
scikit-learn itself, block by block (``PAIRWISE_KERNELS``):

* ``sigmoid``        k(x, y) = tanh(gamma <x, y> + coef0)      (not positive semi-definite)
* ``cosine``         k(x, y) = <x, y> / (||x|| ||y||)
* ``chi2``           k(x, y) = exp(-gamma sum_f (x_f - y_f)^2 / (x_f + y_f))   (x, y >= 0)
* ``additive_chi2``  k(x, y) = -sum_f (x_f - y_f)^2 / (x_f + y_f)             (x, y >= 0)

and ``polynomial`` is an alias of ``poly``. A **callable** ``f(x, y) -> float`` on two
rows is a kernel too (scikit-learn's convention: it is called once per pair of
rows). Kernels travel between master and workers as their parameters
(:meth:`Kernel.to_dict`), never as code: a callable as its import path
``module:qualname`` (one word), which any process that can import the module
resolves; a lambda, a local function or a function of ``__main__`` has no import
path and is known only in the process that made the kernel (in-process workers
resolve it, Dask workers cannot; :mod:`kernelscale.callables` names and resolves
them). A model with a callable kernel cannot be saved (a model file holds no code).

Partitions on a device (the array API) get their blocks from
:mod:`kernelscale.device_kernels`, to which :meth:`Kernel.__call__` and
:meth:`Kernel.diag` dispatch.

Every evaluation walks the rows of ``X`` in chunks and multiplies two *different*
buffers (``X[i:j] @ Y.T``): numpy's bundled OpenBLAS computes a large ``A @ A.T``
(SYRK) wrongly on this platform (see DESIGN.md, "Known hazards").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from numbers import Real

import numpy as np
import scipy.sparse as sp

from kernelscale.arrays import is_device_array
from kernelscale.callables import function_reference, resolve_function
from kernelscale.device_kernels import ARCCOS_J0, device_block, device_diag

#: Kernels with a random feature map (disKPCA's embedding, the random-features baseline).
KERNELS = ("rbf", "laplacian", "poly", "linear", "arccos")
#: More kernels of scikit-learn's ``pairwise_kernels``, evaluated by scikit-learn.
PAIRWISE_KERNELS = ("sigmoid", "cosine", "chi2", "additive_chi2")
#: Other names scikit-learn accepts for the same kernels.
KERNEL_ALIASES = {"polynomial": "poly"}
#: Every kernel name, and ``"callable"`` (a user's function of two rows).
ALL_KERNELS = (*KERNELS, *PAIRWISE_KERNELS, "callable")
DEFAULT_CHUNK_SIZE = 4096


@dataclass(frozen=True)
class Kernel:
    """A positive semi-definite kernel with fixed parameters.

    Build one with :func:`make_kernel`, which validates the parameters.

    Attributes
    ----------
    name : str
        One of ``ALL_KERNELS``.
    gamma : float or None
        Scale for ``rbf``, ``laplacian``, ``poly``, ``sigmoid`` and ``chi2``.
    degree : int
        Degree of ``poly``.
    coef0 : float
        Constant term of ``poly`` and ``sigmoid``.
    order : int
        Order of ``arccos`` (0, 1 or 2).
    function : callable or None
        For ``name='callable'``: ``f(x, y) -> float`` on two rows.
    params : tuple of (str, value) pairs
        For ``name='callable'``: keyword arguments of every call
        (scikit-learn's ``kernel_params``), sorted by name.
    """

    name: str
    gamma: float | None = None
    degree: int = 3
    coef0: float = 1.0
    order: int = 1
    function: Callable | None = None
    params: tuple = ()

    @property
    def accepts_sparse(self) -> bool:
        """Whether CSR input is supported (L1 distances would densify every block;
        scikit-learn's chi2 kernels take dense input only)."""
        return self.name not in ("laplacian", "chi2", "additive_chi2")

    @property
    def has_feature_map(self) -> bool:
        """Whether a random feature map exists (disKPCA and random features need one)."""
        return self.name in KERNELS

    @property
    def is_shift_invariant(self) -> bool:
        return self.name in ("rbf", "laplacian")

    def __call__(self, X, Y, chunk_size: int = DEFAULT_CHUNK_SIZE, dtype=None) -> np.ndarray:
        """Kernel block ``K[i, j] = k(X[i], Y[j])`` as a dense array.

        ``dtype`` (float32 or float64) is the precision of the arithmetic and of
        the block for the kernels with a feature map; by default float32 when
        both inputs are float32, float64 otherwise. A device ``X`` (array API, see
        :mod:`kernelscale.arrays`) gives the block on its device
        (:mod:`kernelscale.device_kernels`); ``Y`` may be on the host.
        """
        if not isinstance(X, np.ndarray) and is_device_array(X):
            return device_block(self, X, Y, chunk_size, dtype)
        _check_input(self, X)
        _check_input(self, Y)
        if X.shape[1] != Y.shape[1]:
            raise ValueError(
                f"X has {X.shape[1]} features but Y has {Y.shape[1]}; they must match."
            )
        cast = self._caster(X, Y, dtype)
        Y = _distinct_buffer(X, cast(Y))
        y_sq = row_sq_norms(Y) if self.name in ("rbf", "arccos") else None
        block_of = lambda rows: self._block(cast(rows), Y, y_sq)  # noqa: E731
        if self.name == "rbf" and not (sp.issparse(X) or sp.issparse(Y)):
            Y_aug = _rbf_augmented(Y, y_sq, self.gamma)
            y_max = float(y_sq.max(initial=0.0))

            def block_of(rows):
                rows = cast(rows)
                x_sq = row_sq_norms(rows)
                # gamma ||x||^2 beyond the float range (a huge gamma): the GEMM's terms
                # would be inf - inf; distances first, then the scale (slower, exact).
                if 4.0 * self.gamma * (float(x_sq.max(initial=0.0)) + y_max) \
                        < float(np.finfo(Y_aug.dtype).max):
                    return _rbf_dense_block(rows, x_sq, Y_aug, self.gamma)
                return self._block(rows, Y, y_sq)
        if X.shape[0] <= chunk_size:  # one block: no copy into a second buffer
            return block_of(X)
        out = None
        for start in range(0, X.shape[0], chunk_size):
            stop = min(start + chunk_size, X.shape[0])
            block = block_of(X[start:stop])
            if out is None:
                out = np.empty((X.shape[0], Y.shape[0]), dtype=block.dtype)
            out[start:stop] = block
        return out

    def _caster(self, X, Y, dtype):
        """The map that puts rows in the working precision (identity for the inputs' own).

        In float32, RBF rows are first shifted by Y's mean (the kernel is
        shift-invariant): ``||x||^2 + ||y||^2 - 2 <x, y>`` then loses no digits
        to data far from the origin.
        """
        if self.name not in KERNELS:
            return _same
        work = np.result_type(_dtype(X), _dtype(Y)) if dtype is None else np.dtype(dtype)
        if work not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {dtype!r}.")
        if work == np.float32 and self.name == "rbf" and not (sp.issparse(X)
                                                              or sp.issparse(Y)):
            shift = np.asarray(Y, dtype=np.float64).mean(axis=0)
            return lambda rows: _shifted32(rows, shift)
        return lambda rows: rows if _dtype(rows) == work else rows.astype(work)

    def diag(self, X) -> np.ndarray:
        """The diagonal ``k(x_i, x_i)`` without forming any block (on X's device)."""
        if not isinstance(X, np.ndarray) and is_device_array(X):
            return device_diag(self, X)
        _check_input(self, X)
        n = X.shape[0]
        if self.name in ("rbf", "laplacian"):
            return np.ones(n, dtype=_dtype(X))
        sq = row_sq_norms(X)
        if self.name == "linear":
            return sq
        if self.name == "poly":
            return (self.gamma * sq + self.coef0) ** self.degree
        if self.name == "sigmoid":
            return np.tanh(self.gamma * sq + self.coef0)
        if self.name == "cosine":  # scikit-learn's cosine_similarity: 0 for a zero row
            return (sq > 0).astype(_dtype(X))
        if self.name == "chi2":
            return np.ones(n, dtype=_dtype(X))
        if self.name == "additive_chi2":
            return np.zeros(n, dtype=_dtype(X))
        if self.name == "callable":  # f(x, x), with the rows scikit-learn would pass
            params = dict(self.params)
            return np.array([self.function(X[i], X[i], **params) for i in range(n)],
                            dtype=np.float64)
        # arccos: theta = 0, J_n(0) = pi for n = 0, 1, 2 ... times (1, 1, 3)
        return sq**self.order * ARCCOS_J0[self.order] / np.pi

    def _block(self, Xc, Y, y_sq) -> np.ndarray:
        if self.name in PAIRWISE_KERNELS or self.name == "callable":
            return self._pairwise(Xc, Y)
        if self.name == "laplacian":
            from sklearn.metrics.pairwise import manhattan_distances

            return np.exp(-self.gamma * manhattan_distances(Xc, Y))
        inner = _dense(Xc @ Y.T)
        if self.name == "linear":
            return inner
        if self.name == "poly":
            with np.errstate(over="ignore", invalid="ignore"):
                block = (self.gamma * inner + self.coef0) ** self.degree
            if not np.isfinite(block).all():
                raise ValueError(poly_overflow_message(self))
            return block
        x_sq = row_sq_norms(Xc)
        if self.name == "rbf":
            # exp(-gamma max(||x||^2 + ||y||^2 - 2 <x, y>, 0)), in place on the block
            if inner.dtype.kind != "f":
                inner = inner.astype(np.float64)
            discount = _norm_discount(inner, Xc.shape[1])  # exact 0 for identical rows
            inner *= -2.0
            inner += discount * x_sq[:, None]
            inner += discount * y_sq[None, :]
            np.maximum(inner, 0.0, out=inner)
            with np.errstate(over="ignore"):  # -inf for a huge gamma: exp gives 0
                inner *= -self.gamma
            return np.exp(inner, out=inner)
        return _arccos_block(inner, x_sq, y_sq, self.order)

    def _pairwise(self, Xc, Y) -> np.ndarray:
        """scikit-learn's ``pairwise_kernels`` on one block of rows."""
        from sklearn.metrics.pairwise import pairwise_kernels  # on first use: a slow import

        if self.name == "callable":
            return pairwise_kernels(Xc, Y, metric=self.function, **dict(self.params))
        params = {"gamma": self.gamma, "coef0": self.coef0}
        return pairwise_kernels(Xc, Y, metric=self.name, filter_params=True, **params)

    def to_dict(self) -> dict:
        """Parameters as plain JSON-serialisable values (what workers and files receive).

        A callable is given by its import path ``module:qualname``, or, without one
        (a lambda, a local function), by a token this process alone resolves.
        """
        if self.name == "callable":
            out = {"name": "callable", "function": function_reference(self.function)}
            return {**out, "params": dict(self.params)} if self.params else out
        return {"name": self.name, "gamma": self.gamma, "degree": self.degree,
                "coef0": self.coef0, "order": self.order}

    @classmethod
    def from_dict(cls, params: dict) -> Kernel:
        return make_kernel(**params)



def poly_overflow_message(kernel: Kernel, where: str = "these rows") -> str:
    """What to say when ``(gamma <x, y> + coef0)^degree`` leaves the float range."""
    return (f"The poly kernel overflows float64 on {where}: (gamma <x, y> + coef0)^degree "
            f"with degree={kernel.degree}, gamma={kernel.gamma:g}, coef0={kernel.coef0:g} "
            "is not finite; lower degree or gamma, or scale the data.")


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


def kernel_name(kernel) -> str:
    """The canonical name of a kernel parameter: a name, an alias or a callable."""
    if callable(kernel):
        return "callable"
    if not isinstance(kernel, str):
        raise ValueError(f"kernel must be a name or a callable, got {kernel!r}.")
    name = KERNEL_ALIASES.get(kernel, kernel)
    if name not in ALL_KERNELS or name == "callable":
        raise ValueError(
            f"Unknown kernel {kernel!r}; choose one of "
            f"{', '.join(n for n in ALL_KERNELS if n != 'callable')}, or pass a callable."
        )
    return name


def make_kernel(
    name="rbf",
    gamma: float | None = None,
    degree: int = 3,
    coef0: float = 1.0,
    order: int = 1,
    sigma: float | None = None,
    n_features: int | None = None,
    function=None,
    params: dict | None = None,
) -> Kernel:
    """Validate parameters and build a :class:`Kernel`.

    Parameters
    ----------
    name : str or callable
        One of ``ALL_KERNELS`` ('rbf', 'laplacian', 'poly' (alias 'polynomial'),
        'linear', 'arccos', 'sigmoid', 'cosine', 'chi2', 'additive_chi2'), or a
        callable ``f(x, y) -> float`` on two rows (scikit-learn's convention).
    gamma : float, optional
        Scale, >= 0 (scikit-learn allows 0: a constant kernel for 'rbf').
        ``None`` means ``1 / n_features`` (scikit-learn's default), which needs
        ``n_features``.
    degree : int
        Polynomial degree (>= 1).
    coef0 : float
        Polynomial constant term (>= 0 keeps the kernel positive semi-definite);
        sigmoid offset.
    order : int
        Arc-cosine order, 0, 1 or 2.
    sigma : float, optional
        RBF bandwidth, the alternative to ``gamma``: gamma = 1 / (2 sigma^2).
    n_features : int, optional
        Number of input features, used for the default ``gamma``.
    function : callable or str, optional
        With ``name='callable'``: the function, or its reference from
        :meth:`Kernel.to_dict` (an import path or a token of this process).
    params : dict, optional
        With a callable: keyword arguments passed to it on every call
        (scikit-learn's ``kernel_params``); ignored by the named kernels, as in
        scikit-learn.

    Returns
    -------
    kernel : Kernel
        The validated kernel (a frozen dataclass: its name and parameters), which
        every estimator and protocol function takes.

    See Also
    --------
    median_heuristic : The papers' RBF bandwidth rule, to pass as ``sigma``.

    Examples
    --------
    >>> make_kernel("rbf", sigma=2.0).gamma
    0.125
    >>> make_kernel("poly", degree=4, n_features=64).gamma
    0.015625
    """
    if name == "callable" or callable(name):
        function = name if callable(name) else function
        if isinstance(function, str):
            function = resolve_function(function)
        if not callable(function):
            raise ValueError("A callable kernel needs its function f(x, y) -> float.")
        return Kernel(name="callable", function=function,
                      params=tuple(sorted((params or {}).items())))
    name = kernel_name(name)
    if sigma is not None:
        if gamma is not None:
            raise ValueError("Give either gamma or sigma, not both.")
        if name != "rbf":
            raise ValueError(f"sigma is the RBF bandwidth; kernel {name!r} takes gamma.")
        if not isinstance(sigma, Real) or not np.isfinite(sigma) or sigma <= 0:
            raise ValueError(f"sigma must be a positive finite number, got {sigma!r}.")
        gamma = 1.0 / (2.0 * float(sigma) ** 2)
    if name in ("rbf", "laplacian", "poly", "sigmoid", "chi2"):
        if gamma is None:
            if n_features is None:
                raise ValueError(f"Kernel {name!r} needs gamma (or n_features for 1/n_features).")
            gamma = 1.0 / n_features
        if not isinstance(gamma, Real) or not np.isfinite(gamma) or gamma < 0:
            raise ValueError(f"gamma must be a finite number >= 0, got {gamma!r}.")
        gamma = float(gamma)
    else:
        gamma = None
    if name == "poly":
        if int(degree) != degree or degree < 1:
            raise ValueError(f"degree must be a positive integer, got {degree!r}.")
        if not np.isfinite(coef0) or coef0 < 0:
            raise ValueError(f"coef0 must be a finite number >= 0, got {coef0!r}.")
    if name == "sigmoid" and (not isinstance(coef0, Real) or not np.isfinite(coef0)):
        raise ValueError(f"coef0 must be a finite number, got {coef0!r}.")
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
        Seeds the subset.

    Returns
    -------
    sigma : float
        The bandwidth; ``gamma = 1 / (2 sigma^2)`` in scikit-learn's convention.

    See Also
    --------
    make_kernel : Takes the result as ``sigma``.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(500, 2))
    >>> sigma = median_heuristic(X, scale=0.2, random_state=0)
    >>> 0.2 < sigma < 0.4  # 0.2 x a median distance near sqrt(2) * 1.18
    True
    """
    n = X.shape[0]
    if n < 2:
        raise ValueError("median_heuristic needs at least 2 rows.")
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale!r}.")
    from sklearn.utils import check_random_state  # slow import: on first use

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


def _norm_discount(A, n_features: int | None = None) -> float:
    """``1 - c eps``: the factor on squared norms that makes round-off distances exactly 0.

    ``||x||^2 + ||y||^2 - 2 <x, y>`` loses about ``eps (||x||^2 + ||y||^2)`` to
    round-off (measured: at most ``0.25 sqrt(d) eps`` times that here), so a pair
    of identical rows comes out as a tiny non-zero distance, and with a large
    gamma ``k(x, x)`` as anything in ``[0, 1)``. Discounting both squared norms by
    ``c eps`` with ``c = 2 sqrt(d + 2) + 2`` (8x the measured worst case) turns every
    distance below that round-off into a value <= 0, which the clip makes exactly
    0: ``k(x, x) = 1`` exactly, and a distance above it is shortened by no more
    than the computation's own round-off. The factor folds into the norms that
    the block needs anyway, so it costs nothing per kernel entry.
    """
    d = A.shape[1] if n_features is None else n_features
    eps = np.finfo(_dtype(A)).eps
    return 1.0 - (2.0 * np.sqrt(d + 2.0) + 2.0) * eps


def _rbf_augmented(Y, y_sq, gamma: float) -> np.ndarray:
    """``[y, -gamma ||y||^2, 1]`` per row of a dense Y (see :func:`_rbf_dense_block`),
    the squared norm discounted by :func:`_norm_discount`."""
    Y_aug = np.empty((Y.shape[0], Y.shape[1] + 2), dtype=_dtype(Y))
    Y_aug[:, :-2] = Y
    with np.errstate(over="ignore"):  # a huge gamma: unused, the caller checks the range
        Y_aug[:, -2] = (-gamma * _norm_discount(Y)) * y_sq
    Y_aug[:, -1] = 1.0
    return Y_aug


def _rbf_dense_block(Xc, x_sq, Y_aug, gamma: float) -> np.ndarray:
    """RBF block of dense rows: one GEMM and two passes over the block.

    With ``[2 gamma x, 1, -gamma ||x||^2]`` against ``[y, -gamma ||y||^2, 1]`` the
    GEMM gives ``-gamma ||x - y||^2`` directly (the squared norms discounted by
    :func:`_norm_discount`, so that identical rows give exactly 0); clipping it at
    0 (round-off) and the exponential are the only elementwise passes.
    """
    X_aug = np.empty((Xc.shape[0], Y_aug.shape[1]), dtype=Y_aug.dtype)
    np.multiply(Xc, 2.0 * gamma, out=X_aug[:, :-2], casting="unsafe")
    X_aug[:, -2] = 1.0
    X_aug[:, -1] = (-gamma * _norm_discount(Y_aug, Y_aug.shape[1] - 2)) * x_sq
    exponent = X_aug @ Y_aug.T
    np.minimum(exponent, 0.0, out=exponent)
    return np.exp(exponent, out=exponent)


def _same(rows):
    return rows


def _shifted32(rows, shift: np.ndarray) -> np.ndarray:
    return (rows - shift).astype(np.float32)


def _dense(M) -> np.ndarray:
    return M.toarray() if sp.issparse(M) else np.asarray(M)


def _dtype(X):
    return X.dtype if X.dtype in (np.float32, np.float64) else np.float64
