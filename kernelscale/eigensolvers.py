"""The master's eigensolvers: scikit-learn's ``KernelPCA.eigen_solver`` for every method.

Every horizontal method ends with a small symmetric eigenproblem at the master
(the n x n kernel matrix of 'exact', the |Y| x |Y| matrices of disLR and batch
KPCA, the m x m covariance of random features). :func:`top_eigenpairs` solves
it with the solver the estimator names, with scikit-learn's meanings of
``eigen_solver``, ``tol``, ``max_iter``, ``iterated_power`` and
``random_state``, and reports its iterations (``n_iter_``):

* 'dense': LAPACK's ``syevr`` for the top k (one direct solve: 1 iteration);
* 'arpack': :func:`scipy.sparse.linalg.eigsh`, the k largest (``which='LA'``),
  to ``tol`` (0: machine precision) in at most ``max_iter`` Arnoldi iterations,
  from scikit-learn's start vector for ``random_state`` (its iterations: the
  products with the matrix ARPACK asked for);
* 'randomized': :func:`sklearn.utils.extmath.randomized_svd` with
  ``iterated_power`` power iterations (scikit-learn's ``_randomized_eigsh``
  with ``selection='module'``: each eigenvalue's sign from ``u_i . v_i``);
* 'auto': scikit-learn's rule, ARPACK for k < 10 of a matrix above 200 rows,
  the dense solver otherwise.

:func:`top_left_singular_vectors` is the same for the paper's sketched disLR
message, a |Y| x w block whose left singular vectors are wanted.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from kernelscale.linalg import flip_signs, top_eigh, top_left_singular

#: The eigensolvers of :func:`top_eigenpairs` (scikit-learn's ``KernelPCA.eigen_solver``).
EIGEN_SOLVERS = ("auto", "dense", "arpack", "randomized")


def resolve_eigen_solver(n: int, k: int, solver: str = "auto") -> str:
    """The solver that runs for the top ``k`` of an n x n matrix.

    'auto' is scikit-learn's rule for ``KernelPCA``: ARPACK for a few components
    (k < 10) of a matrix above 200 rows, LAPACK's dense solver otherwise.
    ARPACK needs k < n - 1 (scikit-learn's ``eigsh`` call falls back to LAPACK
    beyond it, with a warning): the dense solver runs there instead.
    """
    if solver not in EIGEN_SOLVERS:
        raise ValueError(f"eigen_solver must be one of {EIGEN_SOLVERS}, got {solver!r}.")
    if solver == "auto":
        solver = "arpack" if n > 200 and k < 10 else "dense"
    if solver == "arpack" and k >= n - 1:
        solver = "dense"
    return solver


def power_iterations(n: int, k: int, iterated_power="auto") -> int:
    """The power iterations of the randomized solver (``'auto'``: 7 when k < n / 10, else 4,
    :func:`~sklearn.utils.extmath.randomized_svd`'s rule)."""
    if iterated_power == "auto":
        return 7 if k < 0.1 * n else 4
    return int(iterated_power)


def top_eigenpairs(S: np.ndarray, k: int, solver: str = "dense", *, tol: float = 0.0,
                   max_iter: int | None = None, iterated_power="auto", random_state=None,
                   return_n_iter: bool = False):
    """Top ``k`` eigenpairs of a symmetric matrix by the named solver, descending, signs fixed.

    Parameters
    ----------
    S : ndarray of shape (n, n)
        Symmetric (only its lower triangle is read by the dense solver).
    k : int
        Eigenpairs wanted (at most n).
    solver : {'auto', 'dense', 'arpack', 'randomized'}, default='dense'
        See the module docstring.
    tol : float, default=0
        ARPACK's relative accuracy (0: machine precision).
    max_iter : int, optional
        ARPACK's most Arnoldi iterations (default: ARPACK's own, 10 n).
    iterated_power : int or 'auto', default='auto'
        Power iterations of the randomized solver (:func:`power_iterations`).
    random_state : int, RandomState, Generator or None
        ARPACK's start vector and the randomized solver's draws; an int or a
        ``RandomState`` draws what scikit-learn's ``KernelPCA`` draws for it.
    return_n_iter : bool, default=False
        Also return the solver's iterations (1 for 'dense', the products with
        ``S`` for 'arpack', the power iterations for 'randomized').

    Returns
    -------
    eigenvalues : ndarray of shape (min(k, n),)
        Descending.
    eigenvectors : ndarray of shape (n, min(k, n))
        Columns, signed by :func:`~kernelscale.linalg.flip_signs`.
    n_iter : int
        Only with ``return_n_iter``.
    """
    n = S.shape[0]
    k = min(int(k), n)
    solver = resolve_eigen_solver(n, k, solver)
    if k == 0:
        w, V, n_iter = np.zeros(0, dtype=S.dtype), np.zeros((n, 0), dtype=S.dtype), 1
    elif solver == "dense":
        w, V, n_iter = *_dense_top(S, k), 1
    elif solver == "arpack":
        w, V, n_iter = _arpack_top(S, k, tol, max_iter, random_state)
    else:
        w, V, n_iter = _randomized_top(S, k, iterated_power, random_state)
    if solver != "dense":
        order = np.argsort(w)[::-1]
        w, V = w[order], flip_signs(V[:, order])
    return (w, V, n_iter) if return_n_iter else (w, V)


def _dense_top(S, k):
    """LAPACK on the lower triangle as it is (scikit-learn's call), with the
    full-decomposition fallback of :func:`top_eigh` when ``syevr`` returns fewer pairs
    than asked (scipy issue 13913)."""
    n = S.shape[0]
    w, V = sla.eigh(S, subset_by_index=[n - k, n - 1])
    if w.size < k:
        return top_eigh(S, k)
    return w[::-1], flip_signs(V[:, ::-1])


def _legacy_state(random_state):
    """scikit-learn's draws for an int or a RandomState; a Generator draws from itself."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    from sklearn.utils import check_random_state

    return check_random_state(random_state)


def _arpack_top(S, k, tol, max_iter, random_state):
    """ARPACK's k largest, counting the products with ``S`` it asks for."""
    from scipy.sparse.linalg import LinearOperator, eigsh

    products = 0

    def matvec(x):
        nonlocal products
        products += 1
        return S @ x

    start = _legacy_state(random_state).uniform(-1.0, 1.0, S.shape[0])  # _init_arpack_v0
    operator = LinearOperator(S.shape, matvec=matvec, dtype=S.dtype)
    w, V = eigsh(operator, k, which="LA", tol=tol, maxiter=max_iter, v0=start)
    return w, V, products


def _randomized_top(S, k, iterated_power, random_state):
    """The k eigenpairs of largest modulus; each sign from ``u_i . v_i`` (a large negative
    eigenvalue comes back negative), as scikit-learn's ``_randomized_eigsh``."""
    from sklearn.utils.extmath import randomized_svd

    random_state = _legacy_state(random_state)
    if isinstance(random_state, np.random.Generator):
        random_state = int(random_state.integers(2**31 - 1))
    n_iter = power_iterations(S.shape[0], k, iterated_power)
    U, s, Vt = randomized_svd(S, k, n_iter=n_iter, random_state=random_state)
    return s * np.sign(np.einsum("ij,ji->j", U, Vt)), U, n_iter


def top_left_singular_vectors(B: np.ndarray, k: int, solver: str = "dense",
                              return_n_iter: bool = False, **options):
    """Top ``k`` left singular vectors of ``B`` and its squared singular values.

    The dense solver is LAPACK's SVD of ``B`` itself; 'arpack' and 'randomized'
    solve the eigenproblem of ``B B^T`` (|Y| x |Y|) by :func:`top_eigenpairs`
    with ``options``; 'auto' chooses by that matrix's size.
    """
    n = B.shape[0]
    if resolve_eigen_solver(n, min(int(k), n), solver) == "dense":
        w, U = top_left_singular(B, k)
        return (w, U, 1) if return_n_iter else (w, U)
    gram = B @ np.array(B.T, copy=True)  # two buffers: GEMM, not SYRK (DESIGN.md hazards)
    return top_eigenpairs(gram, k, solver, return_n_iter=return_n_iter, **options)


def psd_eigenvalues(w: np.ndarray) -> np.ndarray:
    """Eigenvalues of a matrix that should be PSD, checked and cleaned of round-off.

    A negative eigenvalue beyond round-off (below ``-ratio * max``, ratio 1e-5
    in float64 and 5e-3 in float32) means the matrix is not PSD: a
    ``ValueError`` that says so. Smaller negative ones, and positive ones below
    ``1e-12 * max`` (2e-7 in float32), are round-off of zero: set to 0. The same
    thresholds as scikit-learn's ``KernelPCA``, so both keep the same
    components.
    """
    w = np.array(w, copy=True)
    if w.size == 0:
        return w
    double = w.dtype == np.float64
    negative_ratio, zero_ratio = (1e-5, 1e-12) if double else (5e-3, 2e-7)
    largest = float(w.max())
    if largest < 0:
        raise ValueError(f"All the eigenvalues are negative (the largest is {largest:g}): the "
                         "kernel matrix is not positive semi-definite.")
    smallest = float(w.min())
    if smallest < -negative_ratio * largest:
        raise ValueError(
            f"There are significant negative eigenvalues ({-smallest / largest:g} of the "
            "largest positive one): the kernel matrix is not positive semi-definite. Ask "
            "for fewer components, or use a positive semi-definite kernel.")
    w[w < zero_ratio * largest] = 0.0
    return w
