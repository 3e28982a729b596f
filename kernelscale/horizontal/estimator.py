"""``DistributedKernelPCA``: the scikit-learn face of disKPCA and its baselines."""

from __future__ import annotations

import time
import warnings
from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from kernelscale.backends.local import LocalCluster
from kernelscale.cluster_factory import CLUSTER_PARAMETER_CONSTRAINTS, estimator_cluster
from kernelscale.constraints import (
    FINITE_REAL,
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    POSITIVE_REAL,
    RANDOM_STATE,
    Interval,
    StrOptions,
    kernel_names,
)
from kernelscale.horizontal.baselines import (
    exact_kpca,
    random_features_pca,
    uniform_batch,
    uniform_dislr,
)
from kernelscale.horizontal.budget import plan_budget
from kernelscale.horizontal.diskpca import SAMPLERS, diskpca
from kernelscale.horizontal.evaluate import distributed_error
from kernelscale.horizontal.forecast import MIN_FIT_ROWS, max_row_nnz_of
from kernelscale.horizontal.landmarks import landmark_batch, landmark_dislr
from kernelscale.horizontal.model_state import diskpca_state, restore_diskpca
from kernelscale.horizontal.pilot import piloted_fit
from kernelscale.horizontal.preimage import apply_preimage, fit_preimage
from kernelscale.kernels import KERNELS, Kernel, is_importable, kernel_name, make_kernel
from kernelscale.linalg import as_generator, like_input, preserved_dtypes
from kernelscale.metrics.lowrank import (
    EXACT_REFERENCE_MAX_SAMPLES,
    error_ratio,
    exact_kpca_reference,
    excess_energy_ratio,
    kernel_mean_norm_sq,
)
from kernelscale.model_registry import register_estimator
from kernelscale.partition import PARTITIONS, make_partition, split
from kernelscale.progress import get_logger, track_rounds, verbosity
from kernelscale.runtime.inputs import is_partition_list
from kernelscale.runtime.validation import check_real

METHODS = {
    "diskpca": diskpca,
    "uniform_dislr": uniform_dislr,
    "uniform_batch": uniform_batch,
    "exact": exact_kpca,
    "random_features": random_features_pca,
}
#: Methods that need a random feature map of the kernel (``KERNELS`` have one).
FEATURE_MAP_METHODS = ("diskpca", "random_features")
#: Methods that evaluate the kernel directly, so any kernel (or callable) works.
DIRECT_KERNEL_METHODS = ("uniform_dislr", "uniform_batch", "exact")
#: Methods that take ``landmarks=`` (disLR or batch KPCA on them, without sampling).
LANDMARK_METHODS = ("diskpca", "uniform_dislr", "uniform_batch")
#: Methods whose model holds landmarks, from which the pre-image map is learnt.
INVERSE_METHODS = ("diskpca", "uniform_dislr", "uniform_batch", "exact")

LOGGER = get_logger("horizontal")


def _quoted(names) -> str:
    return ", ".join(repr(n) for n in names)



def _max_row_nnz(X) -> int:
    """The most nonzeros of a row of sparse data the estimator holds (for a word budget)."""
    parts = list(X) if is_partition_list(X) else [X]
    if not all(sp.issparse(p) for p in parts):
        raise ValueError(
            "max_words with sparse partitions that stay on the workers (loaders, a dask "
            "array) cannot bound the words of a sparse row before sending anything; pass "
            "the sparse matrices themselves, or fit without max_words.")
    return max(max_row_nnz_of(p) for p in parts)


def _energy_shares(eigenvalues: np.ndarray, trace: float | None) -> np.ndarray:
    """``eigenvalues / trace`` (zeros when the trace is unknown or not positive)."""
    if trace is None or not trace > 0:
        return np.zeros_like(eigenvalues)
    return eigenvalues / trace


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
    kernel : str or callable, default='rbf'
        'rbf', 'laplacian', 'poly' (or 'polynomial'), 'linear' and 'arccos' work
        with every method. scikit-learn's other ``pairwise_kernels`` ('sigmoid',
        'cosine', 'chi2', 'additive_chi2') and a callable ``f(x, y) -> float`` on
        two rows (scikit-learn's convention: called once per pair of rows, so
        slow) have no random feature map: they work with the methods that
        evaluate the kernel directly ('uniform_dislr', 'uniform_batch', 'exact',
        and 'diskpca' given ``landmarks``). A callable travels to the workers as
        its import path ``module:qualname`` (one word): on Dask, 'uniform_dislr'
        (and 'diskpca' with landmarks) needs one defined at module level in a
        module the workers can import; a lambda or a local function works
        in-process, and with 'uniform_batch' and 'exact' (which evaluate the
        kernel at the master only) everywhere. A model with a callable kernel
        cannot be saved (a model file holds no code). 'sigmoid' and
        'additive_chi2' are not positive semi-definite: only the positive part
        of the spectrum is used.
    gamma : float, optional
        Kernel scale; default ``1 / n_features`` (scikit-learn's). For the papers'
        bandwidth use ``kernelscale.kernels.median_heuristic``: gamma = 1 / (2 sigma^2).
    degree : int, optional
        Polynomial degree (default 3) or arc-cosine order (default 2).
    coef0 : float, default=1.0
        Polynomial constant term; sigmoid offset.
    n_workers : int, default=5
        Workers to split ``X`` over (ignored when partitions are given).
    partition : {'power_law', 'uniform', 'label'}, default='power_law'
        How ``X`` is split ('label' needs ``y``). Power law with exponent 2 is
        the papers' setting.
    method : {'diskpca', 'uniform_dislr', 'uniform_batch', 'exact', 'random_features'}, \
default=None
        The protocol. None: 'diskpca' at ``n_landmarks``, unless the pilot
        rule of :mod:`kernelscale.horizontal.pilot` shows, from the ridge
        sampler's uniform pilot, that the energy is spread (a narrow RBF): then
        'uniform_batch' or 'uniform_dislr' at the same words (dense data, a
        kernel with a random feature map; the choice is in ``budget_plan_``).
        With ``max_words``, the method the word forecast and the pilot choose
        (:func:`kernelscale.horizontal.budget.plan_budget`).
    max_words : int, optional
        A word budget B for the fit (both directions, every message of the
        phase 'fit' counted by the ledger). Before anything is sent, the fit
        forecasts each method's words from the partition sizes, d, k and |Y|
        (:func:`kernelscale.horizontal.forecast.forecast_words`) and runs the
        method and the largest |Y| (m for 'random_features') that the rule of
        :func:`~kernelscale.horizontal.budget.plan_budget` picks within B:
        'exact' when all the data and its model fit in B, else disKPCA at the
        most landmarks B buys (``method`` restricts the choice to one method,
        sized to B; ``n_landmarks`` is then ignored). When that choice is
        disKPCA with the ridge sampler (and ``method`` is None), the fit first
        draws the sampler's uniform pilot (counted in B) and, where the pilot's
        kernel matrix shows the energy spread (a narrow RBF), switches to
        uniform + batch KPCA or uniform + disLR resized to B, the pilot being
        the first part of their sample (:mod:`kernelscale.horizontal.pilot`);
        the choice and its reason are in ``budget_plan_`` and the INFO log.
        Its sampling never draws
        again for copies of drawn points held by other workers (Y is then a few
        points short), so the ledger shows at most B words; sparse rows are
        forecast at the largest row's size. A budget below what k components
        cost raises a ``WordBudgetError`` (a ``ValueError``) before any work.
        The plan is kept in ``budget_plan_``.
    n_landmarks : int, default=400
        |Y|: the exact number of representative points (the communication
        budget), all distinct; fewer only when the data has fewer distinct
        points (capped at n with a warning). When disKPCA's adaptive weights
        run out first (all remaining points in the span of the sampled ones),
        the rest is drawn uniformly. Ignored when ``landmarks`` is given.
    landmarks : array or CSR matrix of shape (n_landmarks, n_features), optional
        Y given by the user: no sampling. 'diskpca' and 'uniform_dislr' run disLR
        on Y (the best rank-k subspace of span(phi(Y)) for all the data; Y is
        sent to every worker once, counted under the kind 'model', since these
        are the user's points and not the workers' data, so the fit sends no
        'raw_points'); 'uniform_batch' runs exact kernel PCA of Y itself at the
        master (the workers' data are validated but not used; no fit words).
        'exact' and 'random_features' take no landmarks. Y must be finite, with
        the data's feature count and at least ``n_components`` rows.
    n_leverage : int, optional
        |P|, the first stage's points out of ``n_landmarks``: the uniform
        pilot of ``sampler='ridge'`` (default ``ceil(|Y| / 4)``, at least k,
        with RBF and Laplacian kernels; k with the others) or
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
        worker. Ignored by the other methods. The kernel blocks themselves
        follow the data: float32 input gives float32 blocks (about twice as
        fast; the Gram and the residuals are still summed in float64).
    messages : {'gram', 'sketch'}, default='gram'
        Exact Gram messages (fewer words) or the paper's sketched messages.
    center : bool, default=True
        Centre in feature space, as scikit-learn's ``KernelPCA`` does. The
        papers (001) do not centre: ``center=False`` is their setting (the
        benchmarks use it), with ``transform(x) = C^T k(Y, x)``.
    fit_inverse_transform : bool, default=False
        Learn a pre-image map for ``inverse_transform``, as scikit-learn's
        ``KernelPCA``: kernel ridge regression from the scores back to input
        space, learnt at the master from what it already holds, the landmarks
        Y and their scores ``transform(Y)`` (no extra communication). It costs
        the |Y| x |Y| kernel of the scores and one |Y| x |Y| solve at the
        master (``O(|Y|^2 k + |Y|^3 + |Y|^2 d)`` time, ``|Y|^2 + |Y| d`` floats of
        memory, kept for ``inverse_transform``). Needs a method with landmarks
        (not 'random_features'). With method='exact', Y is all the data and the
        map is scikit-learn's.
    alpha : float, default=1.0
        Ridge of the pre-image map (``fit_inverse_transform=True``).
    chunk_size : int, default=4096
        Rows a worker processes at once.
    backend : {'local', 'dask', 'flower'}, default='local'
        Workers in-process, in Dask actors, or on Flower SuperNodes (``fit(None)``:
        ``n_workers`` SuperNodes hold the data, see ``docs/federated.md``).
    client : distributed.Client, str or FlowerCluster, optional
        The Dask client for ``backend='dask'``. For ``backend='flower'``: the
        SuperLink's ``host:port``, or a ready cluster to use its options, e.g.
        ``client=FlowerCluster("127.0.0.1:9093", n_workers=3, secure_rounds="all",
        lost="drop")`` (SecAgg+ sums, within its ``secure_range``, and dropping
        lost nodes; see :class:`~kernelscale.backends.flower.cluster.FlowerCluster`): the fit runs
        on it as it is (its workers and ``timeout``, not ``n_workers`` /
        ``timeout`` here) and closes it at the end, so give a new one to each fit.
    retry_lost : bool, default=False
        Dask only: when a worker dies, re-create its partition on a live worker
        (reloaded from its loader, scattered again from the client's array, or
        recomputed by Dask for a dask array chunk), replay its earlier steps and
        repeat the round; the extra traffic is counted under the phase 'recovery'.
    timeout : float, optional
        Dask and Flower (with ``client='host:port'``): seconds a round may take
        before it fails with a ``WorkerError`` (default: the runtime's 600 s).
    n_jobs : int or None, default=None
        In-process only: threads for the workers' steps and their row chunks,
        with scikit-learn's meaning (``None``: 1, ``-1``: every core). The
        model and the ledger do not depend on it.
    verbose : int, default=0
        0: silent. 1: a tqdm progress bar over the protocol's rounds on stderr
        and one INFO line per fit on the ``kernelscale.horizontal`` logger. 2: a
        DEBUG line per round too. See :mod:`kernelscale.progress`.
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
        C, with ``transform(x) = C^T k(Y, x)`` when ``center=False``. (Not
        scikit-learn's ``KernelPCA.dual_coef_``, the pre-image map, which is
        ``inverse_dual_coef_`` here.)
    eigenvalues_ : ndarray (n_components,)
        Energy each component captures: the eigenvalues of the (centred) kernel
        matrix of the training data as the method estimates them (of the
        sample, for 'uniform_batch'; of the random features, for
        'random_features').
    explained_variance_ratio_ : ndarray (n_components,)
        ``eigenvalues_`` as shares of the total energy in feature space, the
        trace of the kernel matrix (centred when ``center=True``) over the same
        points. disLR methods ('diskpca', 'uniform_dislr') learn the trace from
        one word per worker, added to the disLR round's reply; centred, they
        use the mean's projection on span(phi(Y)) (the exact mean's norm would
        need every pair of points across workers), which can only lower the
        shares, by ``n ||mu - P_Y mu||^2 / trace`` (0 when Y spans the mean).
        'exact' and 'uniform_batch' use the trace of the kernel matrix they
        hold (all data, the sample); 'random_features' that of its features.
    X_transformed_fit_ : ndarray (n_landmarks, n_components)
        The landmarks' scores, inputs of the pre-image map
        (``fit_inverse_transform=True``).
    inverse_dual_coef_ : ndarray (n_landmarks, n_features)
        The pre-image map: ``inverse_transform(Z) = k(Z, X_transformed_fit_) @
        inverse_dual_coef_`` (``fit_inverse_transform=True``).
    communication_ : Ledger
        Every message of the fit (phases 'setup' and 'fit').
    lost_workers_ : list of int
        Workers (partition ids) lost during the fit and left out of it
        (``backend='flower'`` with ``client=FlowerCluster(..., lost="drop")``):
        the model comes from the other workers' rows, summed rounds estimated
        by ``N / N_answered`` times their sum; each was announced by a
        :class:`~kernelscale.runtime.LostWorkerWarning` naming it and the round.
        Empty on the local and Dask backends.
    method_ : str
        The method that ran (``method``, or the budget's choice).
    budget_plan_ : BudgetPlan
        With ``max_words``: the chosen method, its forecast and every method's
        largest setting within the budget; ``pilot`` and ``reason`` say what
        the pilot showed. A fit with ``method=None`` and no budget that drew
        the pilot keeps its plan too (``max_words`` there is the default's words).
    kernel_ : Kernel
    n_features_in_ : int
    """

    _parameter_constraints: dict = {
        "n_components": [POSITIVE_INT],
        "kernel": [kernel_names(), callable],
        "gamma": [POSITIVE_REAL, None],
        "degree": [NON_NEGATIVE_INT, None],
        "coef0": [FINITE_REAL],
        "n_workers": [POSITIVE_INT],
        "partition": [StrOptions(set(PARTITIONS))],
        "method": [StrOptions(set(METHODS)), None],
        "max_words": [POSITIVE_INT, None],
        "n_landmarks": [POSITIVE_INT],
        "landmarks": ["array-like", "sparse matrix", None],
        "n_leverage": [POSITIVE_INT, None],
        "embedding_dim": [POSITIVE_INT],
        "row_sketch_dim": [POSITIVE_INT],
        "n_random_features": [POSITIVE_INT],
        "embedding_dtype": [StrOptions({"float64", "float32"})],
        "messages": [StrOptions({"gram", "sketch"})],
        "center": ["boolean"],
        "fit_inverse_transform": ["boolean"],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "chunk_size": [POSITIVE_INT],
        **CLUSTER_PARAMETER_CONSTRAINTS,
        "verbose": ["verbose"],
        "random_state": RANDOM_STATE,
        "sampler": [StrOptions(set(SAMPLERS))],
    }

    def __init__(self, n_components=10, *, kernel="rbf", gamma=None, degree=None, coef0=1.0,
                 n_workers=5, partition="power_law", method=None, max_words=None,
                 n_landmarks=400, landmarks=None, n_leverage=None, embedding_dim=50,
                 row_sketch_dim=250, n_random_features=2000, embedding_dtype="float64",
                 messages="gram",
                 center=True, fit_inverse_transform=False, alpha=1.0, chunk_size=4096,
                 backend="local", client=None, retry_lost=False, timeout=None, n_jobs=None,
                 verbose=0, random_state=None, sampler="ridge"):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_workers = n_workers
        self.partition = partition
        self.method = method
        self.max_words = max_words
        self.n_landmarks = n_landmarks
        self.landmarks = landmarks
        self.n_leverage = n_leverage
        self.embedding_dim = embedding_dim
        self.row_sketch_dim = row_sketch_dim
        self.n_random_features = n_random_features
        self.embedding_dtype = embedding_dtype
        self.messages = messages
        self.center = center
        self.fit_inverse_transform = fit_inverse_transform
        self.alpha = alpha
        self.chunk_size = chunk_size
        self.backend = backend
        self.client = client
        self.retry_lost = retry_lost
        self.timeout = timeout
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.random_state = random_state
        self.sampler = sampler

    @_fit_context(prefer_skip_nested_validation=True)
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
        self._check_params()
        with verbosity(self.verbose):
            return self._fit(X, y)

    def _fit(self, X, y):
        start = time.perf_counter()
        rng = as_generator(self.random_state)
        cluster, info = self._make_cluster(X, y, rng)
        try:
            self.kernel_ = self._make_kernel(self.n_features_in_)
            plan = self._plan_budget(X, info, cluster) if self.max_words is not None else None
            if plan is None and self._default_draws_pilot(info, cluster):
                plan = self._default_plan(info)
            self.method_ = plan.method if plan else (self.method or "diskpca")
            desc = f"{type(self).__name__}({self.method_})"
            with track_rounds(cluster, LOGGER, desc, self.verbose):
                if plan is not None and self._draws_pilot(plan):
                    self.model_, plan = piloted_fit(
                        cluster, self.kernel_, plan, messages=self.messages,
                        center=bool(self.center), chunk_size=self.chunk_size,
                        n_leverage=self.n_leverage, random_state=rng,
                        redraw=self.max_words is None)
                    self.method_ = plan.method
                else:
                    self.model_ = self._run_method(cluster, rng, plan)
        finally:
            cluster.close()
        self.communication_ = cluster.ledger
        self.lost_workers_ = sorted(cluster.lost_workers)
        self.__dict__.pop("budget_plan_", None)
        if plan is not None:
            self.budget_plan_ = plan
            if self.max_words is not None:
                self._check_budget_kept()
        self.eigenvalues_ = self.model_.eigenvalues
        self.explained_variance_ratio_ = _energy_shares(self.eigenvalues_, self.model_.trace)
        if hasattr(self.model_, "landmarks"):
            self.landmarks_ = self.model_.landmarks
            self.dual_coef_ = self.model_.coef
        for name in ("X_transformed_fit_", "inverse_dual_coef_"):  # from an earlier fit
            self.__dict__.pop(name, None)
        if self.fit_inverse_transform:
            self._fit_inverse_transform()
        self._n_features_out = self.model_.n_components
        choice = ""
        if plan is not None and plan.pilot is not None:  # the pilot's choice and its reason
            choice = (f"; after a pilot of {plan.pilot['n_pilot']} points, {plan.method} with "
                      f"{plan.forecast.setting}: {plan.reason}")
        LOGGER.info("%s: %d samples over %d workers, %s fit words, %.2f s%s",
                    f"{type(self).__name__}({self.method_})", info.n_samples, info.n_workers,
                    f"{self.communication_.total_words('fit'):,}", time.perf_counter() - start,
                    choice)
        return self

    def _check_params(self) -> None:
        """Errors between parameters, raised before any work starts (each parameter
        alone is checked by ``_parameter_constraints``)."""
        method = self.method or "diskpca"
        name = kernel_name(self.kernel)
        uses_landmarks = self.landmarks is not None
        if self.max_words is not None:
            self._check_max_words(uses_landmarks)
            if self.method is None:
                method = "uniform_dislr"  # the plan needs no feature map from the kernel
        if uses_landmarks and method not in LANDMARK_METHODS:
            raise ValueError(
                f"method={method!r} takes no landmarks; landmarks= works with the "
                f"methods {_quoted(LANDMARK_METHODS)}."
            )
        needs_map = method in FEATURE_MAP_METHODS and not (
            uses_landmarks and method == "diskpca")
        if needs_map and name not in KERNELS:
            kernel = "a callable kernel" if name == "callable" else f"kernel={self.kernel!r}"
            raise ValueError(
                f"method={method!r} needs a random feature map of the kernel, which "
                f"{kernel} does not have (only {_quoted(KERNELS)} do). Use one of the "
                f"methods that evaluate the kernel directly: {_quoted(DIRECT_KERNEL_METHODS)}."
            )
        if (name == "callable" and self.backend == "dask" and not is_importable(self.kernel)
                and method not in ("uniform_batch", "exact")):
            raise ValueError(
                f"method={method!r} evaluates the kernel on the Dask workers, which "
                "receive a callable kernel by its import path (module:qualname); this one "
                "(a lambda, a local function or one of __main__) has none. Define it at "
                "module level in a module the workers can import, use backend='local', or "
                "method='uniform_batch' or 'exact' (the kernel runs at the master only)."
            )
        if self.fit_inverse_transform:
            if method not in INVERSE_METHODS:
                raise ValueError(
                    f"fit_inverse_transform=True learns the pre-image map from the "
                    f"landmarks and their scores; method={method!r} has no landmarks. "
                    f"Use one of {_quoted(INVERSE_METHODS)}."
                )
            if name in ("chi2", "additive_chi2"):
                raise ValueError(
                    f"fit_inverse_transform=True evaluates the kernel on the scores, which "
                    f"can be negative; the {name} kernel takes non-negative inputs only."
                )

    def _run_method(self, cluster, rng, plan=None):
        """The method's master function on the cluster (disLR/batch on Y with ``landmarks``)."""
        common = {"n_components": self.n_components, "messages": self.messages,
                  "center": bool(self.center), "chunk_size": self.chunk_size,
                  "random_state": rng}
        if self.landmarks is not None:
            run = landmark_batch if self.method_ == "uniform_batch" else landmark_dislr
            return run(cluster, self.kernel_, self.landmarks, **common)
        sizes = {"n_landmarks": self.n_landmarks, "n_random_features": self.n_random_features}
        if plan is not None:  # the budget's sizes; no top-up draws beyond the forecast
            sizes = {"n_landmarks": max(plan.forecast.n_landmarks, 1),
                     "n_random_features": plan.forecast.n_random_features or
                     self.n_random_features, "redraw": False}
        return METHODS[self.method_](
            cluster, self.kernel_, n_leverage=self.n_leverage,
            embedding_dim=self.embedding_dim, row_sketch_dim=self.row_sketch_dim,
            embedding_dtype=self.embedding_dtype, sampler=self.sampler, **sizes, **common)

    def _draws_pilot(self, plan) -> bool:
        """Whether a budgeted fit draws a pilot: the forecast chose disKPCA (ridge) freely."""
        return (self.method is None and plan.method == "diskpca" and self.sampler == "ridge")

    def _default_draws_pilot(self, info, cluster) -> bool:
        """Whether a fit with ``method=None`` and no budget applies the pilot rule.

        At the words of the default (disKPCA, ridge sampler, ``n_landmarks``),
        on dense data with at least ``n_landmarks`` rows and a kernel with a
        random feature map; the fit is then the default's, or the method the
        pilot shows at the same words.
        """
        return (self.method is None and self.landmarks is None and self.sampler == "ridge"
                and kernel_name(self.kernel) in KERNELS and not info.is_sparse
                and info.n_samples >= self.n_landmarks >= self.n_components
                and min(info.n_rows) >= 1 and getattr(cluster, "secure_rounds", None) is None)

    def _default_plan(self, info):
        """The default's words as a budget: disKPCA (ridge) at ``n_landmarks`` within it."""
        from kernelscale.horizontal.forecast import forecast_words

        options = dict(kernel=self.kernel_, center=bool(self.center), messages=self.messages,
                       n_leverage=self.n_leverage, chunk_size=self.chunk_size)
        words = forecast_words("diskpca", info.n_rows, info.n_features, self.n_components,
                               self.n_landmarks, **options).words
        return plan_budget(words, info.n_rows, info.n_features, self.n_components,
                           methods=["diskpca", "uniform_dislr", "uniform_batch"], **options)

    def _check_max_words(self, uses_landmarks: bool) -> None:
        if uses_landmarks:
            raise ValueError("max_words chooses the landmarks within the budget; give "
                             "either max_words or landmarks, not both.")

    def _plan_budget(self, X, info, cluster):
        """The budget's method and sizes, from the partition sizes (no word sent)."""
        if getattr(cluster, "secure_rounds", None) is not None:
            raise ValueError(
                "max_words forecasts the protocol's messages, not SecAgg+'s own (keys, "
                "shares, masked uploads); fit with secure_rounds=None, or without max_words.")
        options = {}
        if info.is_sparse:
            options["max_row_nnz"] = _max_row_nnz(X)
        if self.sampler == "paper":
            options.update(sampler="paper", embedding_dim=self.embedding_dim,
                           row_sketch_dim=self.row_sketch_dim,
                           embedding_dtype=self.embedding_dtype)
        plan = plan_budget(
            int(self.max_words), info.n_rows, info.n_features, self.n_components,
            kernel=self.kernel_, center=bool(self.center),
            has_feature_map=kernel_name(self.kernel) in KERNELS,
            methods=None if self.method is None else [self.method],
            messages=self.messages, n_leverage=self.n_leverage, chunk_size=self.chunk_size,
            **options)
        LOGGER.info("max_words=%s: %s with %s (forecast %s words; %s)%s", f"{self.max_words:,}",
                    plan.method, plan.forecast.setting, f"{plan.forecast.words:,}",
                    plan.reason, "; its uniform pilot may change the method"
                    if self._draws_pilot(plan) else "")
        return plan

    def _check_budget_kept(self) -> None:
        words = self.communication_.total_words("fit")
        if words > self.max_words:  # a forecast that missed a message: never silent
            raise RuntimeError(
                f"The fit sent {words:,} words, above max_words={self.max_words:,} (forecast "
                f"{self.budget_plan_.forecast.words:,}); the word forecast missed a message. "
                "Please report this with the ledger (communication_.summary()).")

    def _fit_inverse_transform(self) -> None:
        """The pre-image map from the landmarks and their scores (no communication)."""
        Y = self.model_.landmarks
        self.X_transformed_fit_ = self.model_.transform(Y, chunk_size=self.chunk_size)
        self.inverse_dual_coef_ = fit_preimage(self.kernel_, self.X_transformed_fit_, Y,
                                               self.alpha, self.chunk_size)

    def transform(self, X):
        """Project ``X`` on the components: shape (n_samples, n_components)."""
        check_is_fitted(self)
        check_real(X)
        X = validate_data(self, X, accept_sparse="csr", reset=False,
                          dtype=[np.float64, np.float32])
        return like_input(self.model_.transform(X, chunk_size=self.chunk_size), X)

    def inverse_transform(self, X):
        """Map scores back to input space with the learnt pre-image map.

        As scikit-learn's ``KernelPCA.inverse_transform``: ``k(X, S) @ B`` with
        ``S`` the landmarks' scores and ``B`` the kernel ridge coefficients
        (``fit_inverse_transform=True``). As in scikit-learn, the map regresses
        the (uncentred) landmarks on their scores with the model's kernel and no
        intercept: with the linear kernel it cannot reconstruct the data's mean
        (use scikit-learn's ``PCA`` there).

        Parameters
        ----------
        X : array of shape (n_samples, n_components)
            Scores, e.g. from ``transform``.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
        """
        check_is_fitted(self)
        if not hasattr(self, "inverse_dual_coef_"):
            raise NotFittedError(
                "The fit_inverse_transform parameter was not set to True when fitting, "
                "so the inverse transform is not available."
            )
        check_real(X)
        Z = check_array(X, dtype=[np.float64, np.float32])
        k = self.X_transformed_fit_.shape[1]
        if Z.shape[1] != k:
            raise ValueError(f"X has {Z.shape[1]} columns; inverse_transform takes the "
                             f"scores of the {k} components.")
        return like_input(apply_preimage(self.kernel_, self.X_transformed_fit_,
                                         self.inverse_dual_coef_, Z, self.chunk_size), Z)

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
        check_real(parts)
        parts = [check_array(p, accept_sparse="csr") for p in parts]
        X_all = sp.vstack(parts, format="csr") if sp.issparse(parts[0]) else np.vstack(parts)
        n = X_all.shape[0]
        if reference is None:
            reference = n <= EXACT_REFERENCE_MAX_SAMPLES
        center_norm_sq = kernel_mean_norm_sq(X_all, self.kernel_) if self.center else None
        if len(parts) == 1:
            k = min(self.n_workers, n)
            parts = split(X_all, make_partition(n, k, "uniform", random_state=0))
        result = distributed_error(LocalCluster(parts, n_jobs=self.n_jobs), self.model_,
                                   center_norm_sq,
                                   self.chunk_size)
        if reference:
            ref = exact_kpca_reference(X_all, self.kernel_, self.model_.n_components,
                                       self.center)
            result.update(opt=ref["opt"], ratio=error_ratio(result["error"], ref["opt"]),
                          excess_ratio=excess_energy_ratio(result["error"], ref["opt"],
                                                           ref["trace"]))
        return result

    def _make_kernel(self, n_features):
        name = kernel_name(self.kernel)
        if name == "callable":
            return make_kernel(self.kernel)
        degree = self.degree
        if degree is None:
            degree = 2 if name == "arccos" else 3
        if name == "arccos":
            return make_kernel("arccos", order=degree)
        return make_kernel(name, gamma=self.gamma, degree=degree, coef0=self.coef0,
                           n_features=n_features)

    def _make_cluster(self, X, y, rng):
        def split_rows(n_samples):
            n_workers = self.n_workers
            if n_workers > n_samples:
                warnings.warn(f"n_workers={n_workers} exceeds the {n_samples} samples; "
                              f"using {n_samples} workers.", stacklevel=5)
                n_workers = n_samples
            return make_partition(n_samples, n_workers, self.partition, labels=y,
                                  random_state=rng)

        check_real(X)
        return estimator_cluster(self, X, split_rows, min_samples=MIN_FIT_ROWS)[:2]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # CSR input, except for the kernels that need dense rows (Laplacian, chi2).
        try:
            name = kernel_name(self.kernel)
        except ValueError:  # an unknown kernel: fit says so
            name = "rbf"
        tags.input_tags.sparse = Kernel(name=name).accepts_sparse
        return preserved_dtypes(tags)


# Model files (kernelscale.save_model / load_model) hold this estimator too.
register_estimator(DistributedKernelPCA, diskpca_state, restore_diskpca,
                   model_type="distributed_kpca")
