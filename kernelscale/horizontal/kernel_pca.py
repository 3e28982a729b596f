"""``kernelscale.KernelPCA``: scikit-learn's ``KernelPCA``, going on where it runs out of memory."""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils.validation import validate_data

from kernelscale.cluster_factory import CLUSTER_PARAMETER_CONSTRAINTS
from kernelscale.constraints import POSITIVE_INT, RANDOM_STATE, Interval, StrOptions, kernel_names
from kernelscale.horizontal.baselines import kernel_matrix_kpca
from kernelscale.horizontal.estimator import DistributedKernelPCA
from kernelscale.horizontal.exact_memory import (
    ExactFitMemoryError,
    available_memory_bytes,
    exact_fit_bytes,
    gib,
)
from kernelscale.horizontal.kpca_base import KernelPCABase
from kernelscale.horizontal.model_state import diskpca_state, restore_diskpca
from kernelscale.horizontal.sklearn_api import (
    SKLEARN_PARAMETER_CONSTRAINTS,
    eigensolver_options,
    fit_precomputed,
)
from kernelscale.kernels import DEFAULT_CHUNK_SIZE
from kernelscale.linalg import as_generator
from kernelscale.model_registry import register_estimator
from kernelscale.runtime.ledger import Ledger


class KernelPCA(KernelPCABase):
    """Kernel PCA: scikit-learn's ``KernelPCA``, and a distributed plan where it would not fit.

    A drop-in for :class:`sklearn.decomposition.KernelPCA`: the same
    parameters, defaults, fitted attributes and numbers. Wherever the exact fit
    fits in this machine's memory it is scikit-learn's computation, at one
    place: the n x n kernel matrix, centred, and its top eigenpairs by the named
    eigensolver, then scikit-learn's pre-image map (``fit_inverse_transform``).
    Where it would not (8 n^2 bytes for the kernel matrix and as much again for
    the eigensolver's copy, more than the memory available), the fit says so
    before allocating anything and, given ``n_components``, fits a distributed
    plan instead (:class:`~kernelscale.horizontal.estimator.DistributedKernelPCA`
    over ``n_workers`` in-process workers, within ``max_words`` when given): a
    ``UserWarning`` and ``method_`` say what ran. With ``n_components=None``
    (every non-zero component of the exact kernel matrix) there is no plan to
    fall back to: an :class:`~kernelscale.horizontal.ExactFitMemoryError`.

    The memory available is the operating system's (``MemAvailable``), or the
    environment variable ``KERNELSCALE_MEMORY_LIMIT`` where it is lower
    (:mod:`kernelscale.horizontal.exact_memory`). For data spread over places
    (partitions, loaders, Dask or Flower workers) use ``DistributedKernelPCA``.

    Parameters
    ----------
    n_components : int, default=None
        Number of components. None: every component of non-zero eigenvalue.
    kernel : {'linear', 'poly', 'rbf', 'sigmoid', 'cosine', 'precomputed'} or callable, \
default='linear'
        The kernel (scikit-learn's names; kernelscale's 'laplacian', 'chi2',
        'additive_chi2' and 'arccos' work too). A callable ``f(x, y) -> float``
        on two rows, with ``kernel_params`` as its keyword arguments.
        'precomputed': ``fit(K)`` on the n x n kernel matrix and ``transform(K_new)``
        on the kernel values of new points against the training points.
    gamma : float, default=None
        Scale of 'rbf', 'poly', 'sigmoid', 'laplacian' and 'chi2' (>= 0);
        None: ``1 / n_features``.
    degree : int, default=3
        Degree of 'poly' (an int >= 1 here: kernelscale's polynomial kernel has
        an exact random feature map only for those); order of 'arccos' (0, 1, 2).
    coef0 : float, default=1
        Constant term of 'poly' (>= 0) and 'sigmoid'.
    kernel_params : dict, default=None
        Keyword arguments of a callable kernel (ignored by the named kernels).
    alpha : float, default=1.0
        Ridge of the pre-image map (``fit_inverse_transform=True``).
    fit_inverse_transform : bool, default=False
        Learn the pre-image map behind ``inverse_transform``: kernel ridge
        regression from the training points' scores back to the points
        (Bakir et al. 2004); on a distributed plan, the same regression over
        every row with the landmarks' scores as centres.
    eigen_solver : {'auto', 'dense', 'arpack', 'randomized'}, default='auto'
        The eigensolver ('auto': ARPACK for fewer than 10 components of more
        than 200 points, LAPACK's dense solver otherwise); on a distributed
        plan, the solver of its master's |Y| x |Y| problem.
    tol : float, default=0
        ARPACK's convergence tolerance (0: machine precision).
    max_iter : int, default=None
        ARPACK's most iterations (None: ARPACK's own).
    iterated_power : int >= 0 or 'auto', default='auto'
        Power iterations of the randomized solver ('auto': 7 when
        ``n_components < 0.1 n``, else 4).
    remove_zero_eig : bool, default=False
        Drop the components of eigenvalue 0 (``transform`` may then return
        fewer than ``n_components`` columns).
    random_state : int, RandomState instance or None, default=None
        ARPACK's start vector and the randomized solver's draws, as in
        scikit-learn; a distributed plan's sampling too.
    copy_X : bool, default=True
        Keep a copy of ``X`` as ``X_fit_`` (False: ``X`` itself, which must
        then not change).
    n_jobs : int, default=None
        Threads of a distributed plan's in-process workers (scikit-learn's
        meaning; the exact fit's kernel runs on BLAS's threads).
    max_words : int, default=None
        kernelscale's: a word budget for a distributed plan, when the exact fit
        does not fit in memory (:class:`~kernelscale.horizontal.estimator.DistributedKernelPCA`'s
        ``max_words``); without it, disKPCA with 400 landmarks (not the
        default's pilot, which may switch to uniform + batch at up to n points,
        as much memory as the exact fit). No effect on an exact fit.
    n_workers : int, default=1
        kernelscale's: the in-process workers a distributed plan splits ``X``
        over (its words are counted over them). No effect on an exact fit.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (n_components,)
        Eigenvalues of the centred kernel matrix, descending (round-off of zero
        set to 0); a distributed plan's estimates.
    eigenvectors_ : ndarray of shape (n_samples, n_components)
        Eigenvectors of the centred kernel matrix (exact fits; zero columns for
        eigenvalue 0 where scikit-learn keeps an arbitrary null-space vector,
        which no score uses).
    dual_coef_ : ndarray of shape (n_samples, n_features)
        The pre-image map's coefficients (``fit_inverse_transform=True``).
    X_transformed_fit_ : ndarray of shape (n_samples, n_components)
        The training points' scores, ``eigenvectors_`` times :math:`\\sqrt{\\lambda}`
        (``fit_inverse_transform=True``); the landmarks' on a distributed plan.
    X_fit_ : ndarray of shape (n_samples, n_features)
        The training data (the kernel matrix for 'precomputed'); exact fits.
    gamma_ : float
        The kernel scale used.
    n_iter_ : int
        The eigensolver's iterations: 1 for the dense solver, the products with
        the kernel matrix for ARPACK, the power iterations for the randomized one.
    method_ : str
        'exact', or the distributed plan's method.
    communication_ : Ledger
        A distributed plan's messages between its in-process workers; empty for
        an exact fit (nothing is sent).
    budget_plan_ : BudgetPlan
        A distributed plan's choice and its reason, where one was made.
    model_ : KernelPCAModel
        The fitted model (what a model file keeps).
    landmarks_, landmark_coef_ : arrays
        The model's points Y and coefficients C:
        :math:`\\mathrm{transform}(x) = C^\\top (k(Y, x) - m)`.
    explained_variance_ratio_ : ndarray of shape (n_components,)
        ``eigenvalues_`` as shares of the centred kernel matrix's trace.
    kernel_ : Kernel
        The kernel with its parameters resolved.
    n_features_in_ : int
        Number of features seen in ``fit``.
    feature_names_in_ : ndarray of str
        Names of the features seen in ``fit``, when ``X`` had string column names.

    See Also
    --------
    sklearn.decomposition.KernelPCA : The class this one stands in for.
    kernelscale.horizontal.estimator.DistributedKernelPCA : Kernel PCA of data spread over
        workers, with every word counted and a choice of methods.

    Examples
    --------
    scikit-learn's numbers, with only the import changed:

    >>> import numpy as np
    >>> from sklearn.datasets import make_circles
    >>> from sklearn import decomposition
    >>> from kernelscale import KernelPCA
    >>> X, _ = make_circles(n_samples=300, factor=0.3, noise=0.05, random_state=0)
    >>> ours = KernelPCA(kernel="rbf", gamma=10, fit_inverse_transform=True, alpha=0.1)
    >>> theirs = decomposition.KernelPCA(kernel="rbf", gamma=10, fit_inverse_transform=True,
    ...                                  alpha=0.1)
    >>> Z_ours, Z_theirs = ours.fit_transform(X), theirs.fit_transform(X)
    >>> Z_ours.shape == Z_theirs.shape, ours.method_
    (True, 'exact')
    >>> bool(np.allclose(np.abs(Z_ours[:, :2]), np.abs(Z_theirs[:, :2])))
    True
    >>> bool(np.allclose(ours.inverse_transform(Z_ours), theirs.inverse_transform(Z_theirs)))
    True
    """

    #: scikit-learn's KernelPCA centres in feature space; rows processed at once.
    center = True
    chunk_size = DEFAULT_CHUNK_SIZE

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [kernel_names(), StrOptions({"precomputed"}), callable],
        "gamma": [Interval(Real, 0, None, closed="left"), None],
        "degree": [Interval(Integral, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "fit_inverse_transform": ["boolean"],
        **SKLEARN_PARAMETER_CONSTRAINTS,
        "random_state": RANDOM_STATE,
        "n_jobs": CLUSTER_PARAMETER_CONSTRAINTS["n_jobs"],
        "max_words": [POSITIVE_INT, None],
        "n_workers": [POSITIVE_INT],
    }

    def __init__(self, n_components=None, *, kernel="linear", gamma=None, degree=3, coef0=1,
                 kernel_params=None, alpha=1.0, fit_inverse_transform=False,
                 eigen_solver="auto", tol=0, max_iter=None, iterated_power="auto",
                 remove_zero_eig=False, random_state=None, copy_X=True, n_jobs=None,
                 max_words=None, n_workers=1):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.fit_inverse_transform = fit_inverse_transform
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.iterated_power = iterated_power
        self.remove_zero_eig = remove_zero_eig
        self.random_state = random_state
        self.copy_X = copy_X
        self.n_jobs = n_jobs
        self.max_words = max_words
        self.n_workers = n_workers

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit the model from ``X``: exactly where it fits in memory, else a distributed plan.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data; for ``kernel='precomputed'``, the n x n kernel matrix.
        y : None
            Ignored.

        Returns
        -------
        self : KernelPCA
            The fitted estimator.
        """
        rng = as_generator(self.random_state)
        self._fit_rows = None
        self.__dict__.pop("budget_plan_", None)
        preimage = None
        if self.kernel == "precomputed":
            self._fit_precomputed_matrix(X, rng)
        else:
            X = validate_data(self, X, accept_sparse="csr", copy=self.copy_X,
                              dtype=[np.float64, np.float32])
            self.kernel_ = self._make_kernel(X.shape[1])
            need = exact_fit_bytes(*X.shape, self.n_components, self.fit_inverse_transform)
            have = available_memory_bytes()
            if have is None or need <= have:
                self._fit_exact(X, rng)
            else:
                preimage = self._fit_distributed(X, need, have)
        self._derive_fitted_attributes(preimage)
        return self

    def _fit_exact(self, X, rng) -> None:
        """scikit-learn's computation at one place: the centred kernel matrix's eigenpairs."""
        self.model_ = kernel_matrix_kpca(self.kernel_(X, X), X, self.kernel_, self.n_components,
                                         center=True, eigensolver=eigensolver_options(self, rng),
                                         remove_zero_eig=self.remove_zero_eig, warn_rank=False)
        self.model_.info |= {"method": "exact"}
        self.method_ = "exact"
        self.communication_ = Ledger()  # one place: nothing is sent
        self.lost_workers_ = []
        self._fit_rows = np.arange(X.shape[0])

    def _fit_precomputed_matrix(self, K, rng) -> None:
        """``kernel='precomputed'``: the exact fit of the given matrix (nothing to distribute)."""
        if self.fit_inverse_transform:
            raise ValueError("Cannot fit_inverse_transform with a precomputed kernel: the "
                             "pre-image map regresses the input points on their scores, and "
                             "a kernel matrix holds no input points.")
        K = validate_data(self, K, dtype=np.float64, copy=self.copy_X)
        n = K.shape[0]
        if K.shape[1] != n:
            raise ValueError(f"kernel='precomputed' fits on the n x n kernel matrix of the "
                             f"training points; got a {n} x {K.shape[1]} matrix.")
        need, have = exact_fit_bytes(n, 0, self.n_components) - 8 * n * n, \
            available_memory_bytes()
        if have is not None and need > have:
            raise ExactFitMemoryError(
                f"The eigensolver of a {n:,} x {n:,} precomputed kernel matrix needs about "
                f"{gib(need)} more than the matrix itself, and {gib(have)} are available. A "
                "precomputed matrix has no distributed plan: give the data and the kernel "
                "instead (a name or a callable), with n_components.")
        self.model_ = fit_precomputed(K, self.n_components, True,
                                      eigensolver_options(self, rng), self.remove_zero_eig)
        self.kernel_ = self.model_.kernel
        self.method_ = "exact"
        self.communication_ = Ledger()
        self.lost_workers_ = []
        self._fit_rows = np.arange(n)

    def _fit_distributed(self, X, need: int, have: int):
        """The exact fit would not fit in memory: a distributed plan over in-process workers.

        Returns the plan's pre-image map (``None`` without ``fit_inverse_transform``).
        """
        n = X.shape[0]
        why = (f"the exact fit of {n:,} points needs about {gib(need)} (the {n:,} x {n:,} "
               f"kernel matrix and its eigensolver's copy), more than the {gib(have)} "
               "available")
        if self.n_components is None:
            raise ExactFitMemoryError(
                f"KernelPCA: {why}. n_components=None keeps every component of the exact "
                "kernel matrix, which only the exact fit can give: set n_components (and "
                "max_words, a word budget) to fit a distributed plan whose memory does not "
                "grow with n^2, or use DistributedKernelPCA.")
        plan = DistributedKernelPCA(
            self.n_components, kernel=self.kernel, gamma=self.gamma, degree=self.degree,
            coef0=self.coef0, kernel_params=self.kernel_params, alpha=self.alpha,
            fit_inverse_transform=self.fit_inverse_transform, eigen_solver=self.eigen_solver,
            tol=self.tol, max_iter=self.max_iter, iterated_power=self.iterated_power,
            remove_zero_eig=self.remove_zero_eig, random_state=self.random_state,
            n_jobs=self.n_jobs, max_words=self.max_words, n_workers=self.n_workers,
            partition="uniform",
            # Without a word budget the default's pilot may switch to uniform + batch
            # at up to n points, whose master holds what the exact fit would: disKPCA.
            method=None if self.max_words is not None else "diskpca").fit(X)
        for name in ("model_", "method_", "communication_", "lost_workers_", "budget_plan_"):
            if hasattr(plan, name):
                setattr(self, name, getattr(plan, name))
        warnings.warn(
            f"KernelPCA: {why}; fitted {plan.method_!r} with |Y| = "
            f"{plan.landmarks_.shape[0] if hasattr(plan, 'landmarks_') else 0:,} over "
            f"{min(self.n_workers, n)} in-process worker(s) instead (method_={plan.method_!r}; "
            f"{plan.communication_.total_words('fit'):,} words): its components approximate "
            "the exact ones, and its master holds |Y| x |Y| matrices. DistributedKernelPCA "
            "chooses the method and its size.", UserWarning, stacklevel=3)
        if self.fit_inverse_transform:
            return plan.X_transformed_fit_, plan.dual_coef_
        return None


# Model files (kernelscale.save_model / load_model) hold this estimator too.
register_estimator(KernelPCA, diskpca_state, restore_diskpca, model_type="kernel_pca")
