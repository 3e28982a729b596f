"""One-shot distributed kernel PCA over vertical partitions (Algorithm 1 of paper 002).

Every party (worker) holds the same ``n`` samples but only its own block of
features: ``state.data`` is an ``n x d_j`` matrix. Party ``j`` computes its local
kernel ``K_j`` and sends its top ``D = n_local_components`` eigenpairs to the
fusion centre (the master), ``D (n + 1)`` words, once. The centre rebuilds the
global kernel from the local rank-``D`` approximations ``K_j ~ V_j diag(l_j) V_j^T``:

* ``linear``             ``K = sum_j K_j``                              (eq. (4), (5))
* ``rbf``, ``laplacian`` ``K = K_1 o K_2 o ... o K_J`` (Hadamard)        (eq. (6)-(8))
* ``poly``               ``K = (gamma * sum_j L_j + coef0) ** degree``, with ``L_j`` the
  parties' *linear* kernels (beyond the paper: the fused linear kernel, then the
  elementwise power at the centre),
* ``sigmoid``            ``K = tanh(gamma * sum_j L_j + coef0)``, the same linear fusion,
* ``chi2``               ``K = K_1 o ... o K_J`` (Hadamard): scikit-learn's
  ``exp(-gamma sum_f (x_f - y_f)^2 / (x_f + y_f))`` is a product over feature blocks,

optionally centres it (``H K_hat H`` after fusion) and returns its top
``n_components`` eigenpairs. No input row ever leaves a party.

Memory: the method is an eigenproblem on ``n x n`` kernels by design (paper 002,
section III): each party holds its local ``n x n`` kernel (evaluated in row chunks)
and the centre holds ``K_hat``. It suits up to a few ten thousand samples, not more.

Kernel conventions. The library follows scikit-learn: ``rbf`` is
``exp(-gamma ||x - y||^2)``. Paper 002 writes ``exp(-||x - y||^2 / (2 sigma^2))`` in
its text (gamma = 1 / (2 sigma^2)) and ``exp(-||x - y||^2 / sigma^2)`` in its code
(``cal_RBF.m``), for which **gamma = 1 / sigma^2**. The bandwidth is global: every
party uses the same ``gamma`` on its own features, so the Hadamard product of the
local kernels is exactly the global kernel.

Why ``n_local_components > n_components`` with centring. The uncentred local
RBF/Laplacian kernels have entries in (0, 1], so their leading eigenvector is
close to the constant vector and carries most of the energy; after fusion,
centring (``H K_hat H``) removes exactly that direction. With ``D = n_components``
the centre would keep one informative direction fewer than it needs, so take
``D`` at least ``n_components + 1`` (more is better: the error bound of Lemma 2
of 002 falls with the local eigenvalue ``lambda_{D+1}``).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel, make_kernel
from kernelscale.linalg import top_eigh
from kernelscale.runtime import Cluster, Tagged
from kernelscale.runtime.steps import worker_step
from kernelscale.runtime.validation import as_float_matrix, count_nonfinite

#: The kernels the vertical one-shot KPCA can fuse from the parties' local kernels.
VERTICAL_KERNELS = ("linear", "rbf", "laplacian", "poly", "sigmoid", "chi2")
#: Kernels fused as the Hadamard product of the parties' own kernels.
PRODUCT_KERNELS = ("rbf", "laplacian", "chi2")
#: Kernels that are a function of the fused linear kernel (each party evaluates <x_j, y_j>).
LINEAR_FUSION_KERNELS = ("poly", "sigmoid")


@dataclass(frozen=True)
class VerticalInfo:
    """What the centre knows about the parties after validation."""

    n_samples: int
    block_sizes: tuple[int, ...]
    is_sparse: bool

    @property
    def n_parties(self) -> int:
        return len(self.block_sizes)

    @property
    def n_features(self) -> int:
        return int(sum(self.block_sizes))


@dataclass
class VerticalKPCAModel:
    """The fitted subspace of the one-shot vertical kernel PCA.

    Attributes
    ----------
    kernel : Kernel
        The global kernel (its parameters are the same on every party).
    eigenvalues : ndarray of shape (n_components,)
        Top eigenvalues of the fused (centred) kernel ``K_hat``, descending.
    eigenvectors : ndarray of shape (n_samples, n_components)
        The matching unit eigenvectors (signs fixed).
    center : bool
        Whether ``K_hat`` was centred after fusion.
    fit_column_means : ndarray of shape (n_samples,)
        Column means of the uncentred ``K_hat`` (used to centre new kernel rows).
    fit_mean : float
        Mean of all entries of the uncentred ``K_hat``.
    block_sizes : tuple of int
        Number of features of each party.
    n_local_components : int
        ``D``, the eigenpairs each party sent.
    fused_kernel : ndarray or None
        The uncentred ``K_hat`` (n x n), kept only when asked for (small data).
    """

    kernel: Kernel
    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    center: bool
    fit_column_means: np.ndarray
    fit_mean: float
    block_sizes: tuple[int, ...]
    n_local_components: int
    fused_kernel: np.ndarray | None = None
    info: dict = field(default_factory=dict)

    @property
    def n_samples(self) -> int:
        return self.eigenvectors.shape[0]

    @property
    def n_components(self) -> int:
        return self.eigenvectors.shape[1]

    def training_embedding(self) -> np.ndarray:
        """The training samples' coordinates ``V sqrt(lambda)`` (as KernelPCA.fit_transform)."""
        return self.eigenvectors * np.sqrt(np.maximum(self.eigenvalues, 0.0))

    def inverse_sqrt_eigenvalues(self) -> np.ndarray:
        """``1 / sqrt(lambda)``, zero where ``lambda <= 0`` (as scikit-learn's KernelPCA)."""
        scale = np.zeros_like(self.eigenvalues)
        positive = self.eigenvalues > 0
        scale[positive] = 1.0 / np.sqrt(self.eigenvalues[positive])
        return scale

    def project_kernel_rows(self, kernel_rows: np.ndarray) -> np.ndarray:
        """Coordinates of new samples from their kernel rows ``k(y, x_i)`` (n_new x n)."""
        product = kernel_rows @ self.eigenvectors
        if self.center:
            row_means = kernel_rows.mean(axis=1)
            product = self._centre_product(product, row_means)
        return product * self.inverse_sqrt_eigenvalues()

    def _centre_product(self, product: np.ndarray, row_means: np.ndarray) -> np.ndarray:
        # (k - 1 m^T - (k 1/n) 1^T + mean 1 1^T) V, with k V and k 1 / n known.
        ones_v = self.eigenvectors.sum(axis=0)
        means_v = self.fit_column_means @ self.eigenvectors
        return product - means_v[None, :] - np.outer(row_means - self.fit_mean, ones_v)


# ----------------------------------------------------------------------------- checks


def check_vertical_kernel(kernel: Kernel) -> Kernel:
    """The kernels that split over feature blocks: ``VERTICAL_KERNELS``."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a kernelscale Kernel, got {type(kernel).__name__}.")
    if kernel.name not in VERTICAL_KERNELS:
        raise ValueError(
            f"Kernel {kernel.name!r} does not split over feature blocks; "
            f"choose one of {', '.join(VERTICAL_KERNELS)}."
        )
    return kernel


@worker_step(discloses="aggregates")
def describe_block(state) -> np.ndarray:
    """Worker step: normalise the party's block, report (rows, features, sparse, non-finite)."""
    state.data = as_float_matrix(state.data)
    X = state.data
    return np.array(
        [X.shape[0], X.shape[1], int(sp.issparse(X)), count_nonfinite(X)], dtype=np.int64
    )


def validate_vertical(cluster: Cluster) -> VerticalInfo:
    """Check the parties' feature blocks (phase "setup"); raise ValueError on bad data.

    Every party must hold at least one row and one feature, the same number of
    rows (the same samples), and only finite values.

    Parameters
    ----------
    cluster : Cluster
        One worker per party.

    Returns
    -------
    info : VerticalInfo
        The samples' count and each party's number of features.
    """
    with cluster.phase("setup"):
        replies = cluster.broadcast_map(
            describe_block, round="describe feature blocks", reply_kind="scalars"
        )
    rows = [int(r[0]) for r in replies]
    for party, reply in enumerate(replies):
        if reply[0] == 0 or reply[1] == 0:
            raise ValueError(
                f"Party {party} holds an empty block of shape ({reply[0]}, {reply[1]}); "
                "every party needs at least one sample and one feature."
            )
        if reply[3] > 0:
            raise ValueError(
                f"Party {party} holds {reply[3]} NaN or infinite values; "
                "remove or impute them first."
            )
    if len(set(rows)) > 1:
        raise ValueError(
            f"Parties hold different numbers of samples {rows}; in the vertical setting "
            "every party holds its features of the same samples, in the same order."
        )
    return VerticalInfo(
        n_samples=rows[0],
        block_sizes=tuple(int(r[1]) for r in replies),
        is_sparse=any(bool(r[2]) for r in replies),
    )


def kernel_on_party(kernel: Kernel) -> Kernel:
    """The kernel each party evaluates on its block (the linear one for ``poly``, ``sigmoid``)."""
    return make_kernel("linear") if kernel.name in LINEAR_FUSION_KERNELS else kernel


# ----------------------------------------------------------------------------- worker steps


@worker_step(discloses="per-row")
def local_eigenpairs(state, kernel_params: dict, n_local_components: int, chunk_size: int):
    """Worker step 1 (Algorithm 1 of 002): top-D eigenpairs of the local kernel ``K_j``."""
    kernel = kernel_on_party(Kernel.from_dict(kernel_params))
    local_kernel = kernel(state.data, state.data, chunk_size=chunk_size)
    eigenvalues, eigenvectors = top_eigh(local_kernel, n_local_components)
    return Tagged(sketch=eigenvectors, scalars=eigenvalues)


# ----------------------------------------------------------------------------- master side


def fuse_local_kernels(eigenpairs, kernel: Kernel) -> np.ndarray:
    """Step 2 (Algorithm 1 of 002): ``K_hat`` from the parties' ``(eigenvalues, eigenvectors)``.

    Sum of the local approximations for ``linear`` (eq. (5)), their Hadamard product
    for ``rbf``, ``laplacian`` and ``chi2`` (eq. (8)), and the elementwise power (the
    tanh) of the fused linear kernel for ``poly`` (``sigmoid``).

    Parameters
    ----------
    eigenpairs : list of tuple of ndarray
        Per party, its top eigenvalues (D,) and eigenvectors (n, D).
    kernel : Kernel
        The kernel, which says how the local kernels combine.

    Returns
    -------
    K_hat : ndarray of shape (n, n)
        The fused kernel matrix (symmetric).
    """
    fused = None
    for eigenvalues, eigenvectors in eigenpairs:
        local = (eigenvectors * eigenvalues) @ eigenvectors.T
        local = (local + local.T) / 2.0
        if fused is None:
            fused = local
        elif kernel.name in PRODUCT_KERNELS:
            fused *= local
        else:
            fused += local
    if kernel.name == "poly":
        fused = (kernel.gamma * fused + kernel.coef0) ** kernel.degree
    elif kernel.name == "sigmoid":
        fused = np.tanh(kernel.gamma * fused + kernel.coef0)
    return fused


def centre_kernel(K: np.ndarray) -> np.ndarray:
    """``H K H`` with ``H = I - 11^T / n`` (no explicit H).

    Parameters
    ----------
    K : ndarray of shape (n, n)
        A kernel matrix.

    Returns
    -------
    K_centred : ndarray of shape (n, n)
        The kernel matrix of the points centred in feature space.

    Examples
    --------
    >>> import numpy as np
    >>> K = np.array([[2.0, 1.0], [1.0, 2.0]])
    >>> centre_kernel(K)
    array([[ 0.5, -0.5],
           [-0.5,  0.5]])
    """
    column_means = K.mean(axis=0)
    return K - column_means[None, :] - column_means[:, None] + column_means.mean()


def one_shot_kpca(
    cluster: Cluster,
    kernel: Kernel,
    n_components: int,
    n_local_components: int | None = None,
    center: bool = True,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    keep_fused_kernel: bool = False,
    info: VerticalInfo | None = None,
) -> VerticalKPCAModel:
    """One-shot distributed kernel PCA over vertical partitions (Algorithm 1 of 002).

    Parameters
    ----------
    cluster : Cluster
        One worker per party; party ``j`` holds its ``n x d_j`` block of the same
        ``n`` samples.
    kernel : Kernel
        One of ``VERTICAL_KERNELS`` (scikit-learn conventions; for the paper's code
        ``exp(-||x - y||^2 / sigma^2)`` use ``gamma = 1 / sigma^2``).
    n_components : int
        Number of principal components returned.
    n_local_components : int, optional
        ``D``, the eigenpairs each party sends (``D (n + 1)`` words). Defaults to
        ``n_components + 1`` when centring (centring removes the near-constant
        leading direction of the fused kernel) and ``n_components`` otherwise.
        With ``center=True`` and an ``rbf`` or ``laplacian`` kernel, a ``D <=
        n_components`` (below ``n_samples``) raises a ``UserWarning``: take
        ``D > n_components``.
    center : bool
        Centre the fused kernel (``H K_hat H``) before its eigen-decomposition.
    chunk_size : int
        Rows per block when a party evaluates its kernel.
    keep_fused_kernel : bool
        Keep the uncentred ``K_hat`` on the model (for tests on small data).
    info : VerticalInfo, optional
        The blocks' shapes, when the cluster was validated for this fit already
        (the estimator's: no second 'describe feature blocks' round); ``None``
        resets and validates the cluster first.

    Returns
    -------
    VerticalKPCAModel
    """
    check_vertical_kernel(kernel)
    if info is None:
        cluster.reset()
        info = validate_vertical(cluster)
    n = info.n_samples
    if int(n_components) != n_components or not 1 <= n_components <= n:
        raise ValueError(f"n_components must be an integer in [1, {n}], got {n_components!r}.")
    if n_local_components is None:
        n_local_components = min(n, n_components + 1 if center else n_components)
    if int(n_local_components) != n_local_components or not 1 <= n_local_components <= n:
        raise ValueError(
            f"n_local_components must be an integer in [1, n_samples={n}], "
            f"got {n_local_components!r}."
        )
    if (
        center
        and kernel.name in PRODUCT_KERNELS
        and n_components >= n_local_components
        and n_local_components < n
    ):
        warnings.warn(
            f"n_local_components={int(n_local_components)} <= n_components="
            f"{int(n_components)} with center=True and the {kernel.name} kernel: each "
            "party's uncentred local kernel has a leading, nearly constant eigenvector, "
            "which centring removes after fusion, so fewer than n_components useful "
            "directions reach the centre and the estimate is poor. Use n_local_components "
            "> n_components (the default is n_components + 1; larger is more accurate).",
            UserWarning,
            stacklevel=2,
        )
    if not kernel.accepts_sparse and info.is_sparse:
        raise ValueError(f"The {kernel.name} kernel needs dense blocks; convert with .toarray().")

    # Step 1: each party sends the top-D eigenpairs of its local kernel (Algorithm 1 of 002).
    replies = cluster.broadcast_map(
        local_eigenpairs,
        kernel.to_dict(),
        int(n_local_components),
        int(chunk_size),
        round="local eigenpairs",
        kind="model",
    )
    eigenpairs = [(r["scalars"], r["sketch"]) for r in replies]

    # Step 2: the fusion centre rebuilds K_hat (eq. (5) linear, eq. (8) Hadamard).
    fused = fuse_local_kernels(eigenpairs, kernel)
    column_means = fused.mean(axis=0)
    fit_mean = float(column_means.mean())

    # Step 3: leading eigenvectors of the (centred) K_hat.
    target = centre_kernel(fused) if center else fused
    eigenvalues, eigenvectors = top_eigh(target, int(n_components))
    return VerticalKPCAModel(
        kernel=kernel,
        eigenvalues=eigenvalues,
        eigenvectors=eigenvectors,
        center=bool(center),
        fit_column_means=column_means,
        fit_mean=fit_mean,
        block_sizes=info.block_sizes,
        n_local_components=int(n_local_components),
        fused_kernel=fused if keep_fused_kernel else None,
    )
