"""``DistributedKernelPCA``: the scikit-learn face of disKPCA and its baselines."""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from kernelscale.horizontal.baselines import (
    exact_kpca,
    random_features_pca,
    uniform_batch,
    uniform_dislr,
)
from kernelscale.horizontal.diskpca import SAMPLERS, diskpca
from kernelscale.horizontal.evaluate import distributed_error
from kernelscale.kernels import KERNELS, Kernel, make_kernel
from kernelscale.linalg import as_generator
from kernelscale.metrics.lowrank import (
    EXACT_REFERENCE_MAX_SAMPLES,
    error_ratio,
    exact_kpca_reference,
    excess_energy_ratio,
    kernel_mean_norm_sq,
)
from kernelscale.partition import make_partition, split
from kernelscale.runtime import Cluster, LocalCluster
from kernelscale.runtime.build import estimator_cluster, is_partition_list

METHODS = {
    "diskpca": diskpca,
    "uniform_dislr": uniform_dislr,
    "uniform_batch": uniform_batch,
    "exact": exact_kpca,
    "random_features": random_features_pca,
}


class DistributedKernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Kernel PCA over data split across workers, with every word of communication counted.

    ``fit(X)`` splits ``X`` over ``n_workers`` simulated workers (``partition``);
    ``fit([X_1, ..., X_s])`` takes the workers' partitions as they are, and so do
    a list of loaders (file paths or picklable callables, run on the workers) and
    a dask array (its row chunks). The protocol runs in-process by default, or on
    a Dask cluster (``backend='dask'``).

    Parameters
    ----------
    n_components : int, default=10
        Number of principal components k. When the fitted subspace has
        numerical rank r < k (e.g. a linear kernel on data of rank r), a
        ``UserWarning`` says so and the last k - r components are zero:
        ``transform`` still returns k columns, with eigenvalue 0 for the extra ones.
    kernel : {'rbf', 'laplacian', 'poly', 'linear', 'arccos'}, default='rbf'
    gamma : float, optional
        Kernel scale; default ``1 / n_features`` (scikit-learn's). For the papers'
        bandwidth use ``kernelscale.kernels.median_heuristic``: gamma = 1 / (2 sigma^2).
    degree : int, optional
        Polynomial degree (default 3) or arc-cosine order (default 2).
    coef0 : float, default=1.0
        Polynomial constant term.
    n_workers : int, default=5
        Workers to split ``X`` over (ignored when partitions are given).
    partition : {'power_law', 'uniform', 'label'}, default='power_law'
        How ``X`` is split ('label' needs ``y``). Power law with exponent 2 is
        the papers' setting.
    method : {'diskpca', 'uniform_dislr', 'uniform_batch', 'exact', 'random_features'}
    n_landmarks : int, default=400
        |Y|: the exact number of representative points (the communication
        budget), all distinct; fewer only when the data has fewer distinct
        points (capped at n with a warning). When disKPCA's adaptive weights
        run out first (all remaining points in the span of the sampled ones),
        the rest is drawn uniformly.
    n_leverage : int, optional
        |P|, the first stage's points out of ``n_landmarks``: the uniform
        pilot of ``sampler='ridge'`` (default ``ceil(|Y| / 4)``, at least k) or
        the leverage-sampled points of ``sampler='paper'`` (default
        ``ceil(2 k ln k)``, at most half the budget); the rest adaptively.
    embedding_dim : int, default=50
        t, the kernel subspace embedding dimension.
    row_sketch_dim : int, default=250
        p, rows of the sketch of the embedded data when ``messages='sketch'``.
    n_random_features : int, default=2000
        m, random features behind the embedding (and of 'random_features').
    embedding_dtype : {'float64', 'float32'}, default='float64'
        Precision of the random features behind disKPCA's leverage-score
        embedding. It only sets sampling probabilities (everything after
        sampling is float64): 'float32' halves the embedding's memory and is
        several times faster at scale, at the cost of one config word per
        worker. Ignored by the other methods.
    messages : {'gram', 'sketch'}, default='gram'
        Exact Gram messages (fewer words) or the paper's sketched messages.
    center : bool, default=False
        Centre in feature space (paper 001 does not).
    chunk_size : int, default=4096
        Rows a worker processes at once.
    backend : {'local', 'dask'}, default='local'
    client : distributed.Client, optional
        The Dask client for ``backend='dask'``.
    retry_lost : bool, default=False
        Dask only: when a worker dies, re-create its partition on a live worker
        (reloaded from its loader, scattered again from the client's array, or
        recomputed by Dask for a dask array chunk), replay its earlier steps and
        repeat the round; the extra traffic is counted under the phase 'recovery'.
    timeout : float, optional
        Dask only: seconds a round may take before it fails with a
        ``WorkerError`` (default: the runtime's 600 s).
    random_state : int, Generator or None
    sampler : {'ridge', 'paper'}, default='ridge'
        How disKPCA draws its landmarks. 'ridge': a uniform pilot, then two
        rounds of ridge-leverage sampling (Musco and Musco 2017), within a few
        words per worker of uniform + disLR. 'paper': Algorithm 2 of paper 001,
        leverage scores of a kernel subspace embedding (``embedding_dim``,
        ``row_sketch_dim``, ``n_random_features``, ``embedding_dtype``), then
        adaptive sampling. Ignored by the other methods.

    Attributes
    ----------
    model_ : KernelPCAModel or RandomFeaturePCAModel
    landmarks_ : array or CSR (n_landmarks, n_features)
        Y (absent for 'random_features').
    dual_coef_ : ndarray (n_landmarks, n_components)
        C, with ``transform(x) = C^T k(Y, x)`` when ``center=False``.
    eigenvalues_ : ndarray (n_components,)
    communication_ : Ledger
        Every message of the fit (phases 'setup' and 'fit').
    kernel_ : Kernel
    n_features_in_ : int
    """

    def __init__(self, n_components=10, *, kernel="rbf", gamma=None, degree=None, coef0=1.0,
                 n_workers=5, partition="power_law", method="diskpca", n_landmarks=400,
                 n_leverage=None, embedding_dim=50, row_sketch_dim=250, n_random_features=2000,
                 embedding_dtype="float64", messages="gram", center=False, chunk_size=4096,
                 backend="local", client=None, retry_lost=False, timeout=None,
                 random_state=None, sampler="ridge"):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_workers = n_workers
        self.partition = partition
        self.method = method
        self.n_landmarks = n_landmarks
        self.n_leverage = n_leverage
        self.embedding_dim = embedding_dim
        self.row_sketch_dim = row_sketch_dim
        self.n_random_features = n_random_features
        self.embedding_dtype = embedding_dtype
        self.messages = messages
        self.center = center
        self.chunk_size = chunk_size
        self.backend = backend
        self.client = client
        self.retry_lost = retry_lost
        self.timeout = timeout
        self.random_state = random_state
        self.sampler = sampler

    def fit(self, X, y=None):
        """Fit on ``X`` (split over ``n_workers``) or on a list of partitions.

        Parameters
        ----------
        X : array or CSR (n_samples, n_features), a list of them (one per worker),
            a list of loaders (file paths or callables, loaded on the workers)
            or a dask array (its row chunks are the partitions)
        y : array, optional
            Labels, used only by ``partition='label'``.
        """
        if self.method not in METHODS:
            raise ValueError(f"Unknown method {self.method!r}; choose one of {list(METHODS)}.")
        if self.kernel not in KERNELS:
            raise ValueError(f"Unknown kernel {self.kernel!r}; choose one of {KERNELS}.")
        if self.sampler not in SAMPLERS:
            raise ValueError(f"sampler must be one of {SAMPLERS}, got {self.sampler!r}.")
        if self.embedding_dtype not in ("float64", "float32"):
            raise ValueError("embedding_dtype must be 'float64' or 'float32', got "
                             f"{self.embedding_dtype!r}.")
        rng = as_generator(self.random_state)
        cluster = self._make_cluster(X, y, rng)
        try:
            self.kernel_ = self._make_kernel(self.n_features_in_)
            self.model_ = METHODS[self.method](
                cluster, self.kernel_, n_components=self.n_components,
                n_landmarks=self.n_landmarks, n_leverage=self.n_leverage,
                embedding_dim=self.embedding_dim, row_sketch_dim=self.row_sketch_dim,
                n_random_features=self.n_random_features, messages=self.messages,
                center=self.center, chunk_size=self.chunk_size, random_state=rng,
                embedding_dtype=self.embedding_dtype, sampler=self.sampler)
        finally:
            cluster.close()
        self.communication_ = cluster.ledger
        self.eigenvalues_ = self.model_.eigenvalues
        if hasattr(self.model_, "landmarks"):
            self.landmarks_ = self.model_.landmarks
            self.dual_coef_ = self.model_.coef
        self._n_features_out = self.model_.n_components
        return self

    def transform(self, X):
        """Project ``X`` on the components: shape (n_samples, n_components)."""
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse="csr", reset=False,
                          dtype=[np.float64, np.float32])
        return self.model_.transform(X, chunk_size=self.chunk_size)

    def approximation_error(self, X, reference: bool | None = None) -> dict:
        """Low-rank approximation error of the fit on ``X``, through the runtime.

        ``X`` is split like the training data (or given as partitions) and the
        error ``sum_a ||phi(a) - V V^T phi(a)||^2`` is computed by the workers
        under the phase 'evaluate'. With ``center=True``, ``phi(a)`` is centred
        on the mean of ``X`` itself (not the training mean):
        ``sum_a ||(phi(a) - mu_X) - V V^T (phi(a) - mu_X)||^2``, what centred KPCA
        of ``X`` minimises, so ``ratio >= 1`` on held-out data too; on the
        training data it is the model's reconstruction error (see
        :mod:`kernelscale.metrics.lowrank`). ``||mu_X||^2`` is computed here, on
        the stacked ``X`` (O(n^2) kernel evaluations). With ``reference=True``
        (default when n <= 20,000) the exact optimum is computed too, with
        ``opt``, ``ratio`` (err / opt, NaN when opt <= 0) and ``excess_ratio``
        ((err - opt) / (trace - opt)).
        """
        check_is_fitted(self)
        parts = list(X) if is_partition_list(X) else [X]
        parts = [check_array(p, accept_sparse="csr") for p in parts]
        X_all = sp.vstack(parts, format="csr") if sp.issparse(parts[0]) else np.vstack(parts)
        n = X_all.shape[0]
        if reference is None:
            reference = n <= EXACT_REFERENCE_MAX_SAMPLES
        center_norm_sq = kernel_mean_norm_sq(X_all, self.kernel_) if self.center else None
        if len(parts) == 1:
            k = min(self.n_workers, n)
            parts = split(X_all, make_partition(n, k, "uniform", random_state=0))
        result = distributed_error(LocalCluster(parts), self.model_, center_norm_sq,
                                   self.chunk_size)
        if reference:
            ref = exact_kpca_reference(X_all, self.kernel_, self.model_.n_components,
                                       self.center)
            result.update(opt=ref["opt"], ratio=error_ratio(result["error"], ref["opt"]),
                          excess_ratio=excess_energy_ratio(result["error"], ref["opt"],
                                                           ref["trace"]))
        return result

    def _make_kernel(self, n_features):
        degree = self.degree
        if degree is None:
            degree = 2 if self.kernel == "arccos" else 3
        if self.kernel == "arccos":
            return make_kernel("arccos", order=degree)
        return make_kernel(self.kernel, gamma=self.gamma, degree=degree, coef0=self.coef0,
                           n_features=n_features)

    def _make_cluster(self, X, y, rng) -> Cluster:
        def split_rows(n_samples):
            n_workers = self.n_workers
            if n_workers > n_samples:
                warnings.warn(f"n_workers={n_workers} exceeds the {n_samples} samples; "
                              f"using {n_samples} workers.", stacklevel=5)
                n_workers = n_samples
            return make_partition(n_samples, n_workers, self.partition, labels=y,
                                  random_state=rng)

        return estimator_cluster(self, X, split_rows, min_samples=2)[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # CSR input, except for the Laplacian kernel (its L1 distances would densify).
        tags.input_tags.sparse = Kernel(name=self.kernel).accepts_sparse
        return tags
