"""``DistributedKernelPCA``: the scikit-learn face of disKPCA and its baselines."""

from __future__ import annotations

import time
from numbers import Real

from sklearn.base import _fit_context

from kernelscale.cluster_factory import CLUSTER_PARAMETER_CONSTRAINTS
from kernelscale.constraints import (
    FINITE_REAL,
    NON_NEGATIVE_INT,
    POSITIVE_INT,
    RANDOM_STATE,
    Interval,
    StrOptions,
    kernel_names,
)
from kernelscale.horizontal.choice import check_budget_kept, choose_plan, draws_pilot
from kernelscale.horizontal.diskpca import SAMPLERS
from kernelscale.horizontal.fitting import describe_fit, fit_cluster, run_protocol
from kernelscale.horizontal.kpca_base import KernelPCABase
from kernelscale.horizontal.memory_check import check_fit_memory
from kernelscale.horizontal.model_state import diskpca_state, restore_diskpca
from kernelscale.horizontal.params import METHODS, check_parameters
from kernelscale.horizontal.preimage import preimage_round
from kernelscale.horizontal.sklearn_api import SKLEARN_PARAMETER_CONSTRAINTS
from kernelscale.linalg import as_generator
from kernelscale.model_registry import register_estimator
from kernelscale.partition import PARTITIONS
from kernelscale.progress import get_logger, track_rounds, verbosity

LOGGER = get_logger("horizontal")


class DistributedKernelPCA(KernelPCABase):
    """Kernel PCA over data split across workers, with every word of communication counted.

    ``fit(X)`` splits ``X`` over ``n_workers`` simulated workers (``partition``);
    ``fit([X_1, ..., X_s])`` takes the workers' partitions as they are, and so do
    a list of loaders (file paths or picklable callables, run on the workers) and
    a dask array (its row chunks). The protocol runs in-process by default, or on
    a Dask cluster (``backend='dask'``).

    It takes scikit-learn's ``KernelPCA`` parameters with their meanings
    (``eigen_solver``, ``tol``, ``max_iter``, ``iterated_power``,
    ``remove_zero_eig``, ``n_components=None``, ``kernel='precomputed'``,
    ``kernel_params``, ``copy_X``) and gives its fitted attributes
    (``eigenvalues_``, ``eigenvectors_``, ``dual_coef_``, ``X_transformed_fit_``,
    ``X_fit_``, ``gamma_``, ``n_iter_``), but its defaults are a distributed fit's
    (``n_components=10``, ``kernel='rbf'``, a method chosen for you, 5 workers).
    The drop-in for scikit-learn's class is :class:`~kernelscale.KernelPCA`;
    with ``method='exact', n_workers=1`` this class computes the same exact fit
    through one worker round (``docs/sklearn.md``).

    Parameters
    ----------
    n_components : int or None, default=10
        Number of principal components k. When the fitted subspace has
        numerical rank r < k (e.g. a linear kernel on data of rank r), a
        ``UserWarning`` says so and the last k - r components are zero:
        ``transform`` still returns k columns, with eigenvalue 0 for the extra ones
        (unless ``remove_zero_eig``). None (scikit-learn's default): every
        component of non-zero eigenvalue of the exact kernel matrix, for
        ``method='exact'`` and ``kernel='precomputed'`` only (the distributed
        methods need k to size their messages).
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
        of the spectrum is used ('exact' raises, as scikit-learn does, when one
        of the k components has a significantly negative eigenvalue).
        'precomputed': ``fit(K)`` on the n x n kernel matrix of the training
        points and ``transform(K_new)`` on the kernel values of new points
        against them (shape (n_new, n)), with ``method='exact'`` (or None,
        which then means 'exact'): the exact fit, at one place, of a matrix
        computed elsewhere. The distributed methods refuse it (they evaluate
        the kernel on points that the workers send each other); so do
        ``fit_inverse_transform``, ``max_words``, ``landmarks`` and
        ``approximation_error``.
    gamma : float, optional
        Kernel scale, >= 0 as in scikit-learn (0 makes the RBF kernel constant);
        default ``1 / n_features`` (scikit-learn's; the value used is
        ``gamma_``). For the papers'
        bandwidth use ``kernelscale.kernels.median_heuristic``: gamma = 1 / (2 sigma^2).
    degree : int, optional
        Polynomial degree (default 3) or arc-cosine order (default 2).
    coef0 : float, default=1.0
        Polynomial constant term; sigmoid offset.
    kernel_params : dict, optional
        Keyword arguments of a callable kernel, passed on every call
        (scikit-learn's meaning; ignored by the named kernels, as there). They
        travel with the kernel's import path to the workers.
    n_workers : int, default=5
        Workers to split ``X`` over (ignored when partitions are given).
    partition : {'power_law', 'uniform', 'label'}, default='power_law'
        How ``X`` is split ('label' needs ``y``). Power law with exponent 2 is
        the papers' setting.
    method : {'diskpca', 'uniform_dislr', 'uniform_batch', 'exact', 'random_features'}, \
default=None
        The protocol. An explicit method is the one that runs. None: chosen
        (:mod:`kernelscale.horizontal.choice`; what ran is ``method_``, why is
        ``budget_plan_.reason``). With ``n_landmarks`` unset too: 'diskpca' at
        the default fit's words (400 landmarks), unless the pilot rule of
        :mod:`kernelscale.horizontal.pilot` shows, from the ridge sampler's
        uniform pilot, that the energy is spread (a narrow RBF): then
        'uniform_batch' or 'uniform_dislr' at the same words (dense data, a
        kernel with a random feature map). With an explicit ``n_landmarks``:
        'diskpca' with exactly that |Y|, no pilot. With ``max_words``, see there.
        'exact' for ``kernel='precomputed'``.
    max_words : int, optional
        A word budget B for the fit (both directions, every message of the
        phase 'fit' counted by the ledger). Before anything is sent, the fit
        forecasts each method's words from the partition sizes, d, k and |Y|
        (:func:`kernelscale.horizontal.forecast.forecast_words`) and runs the
        method and the largest |Y| (m for 'random_features') that the rule of
        :func:`~kernelscale.horizontal.budget.plan_budget` picks within B:
        'exact' when all the data and its model fit in B, else disKPCA at the
        most landmarks B buys (``method`` restricts the choice to one method,
        sized to B). An explicit ``n_landmarks`` is honoured: exactly that |Y|,
        with ``method``, or with the first of 'diskpca', 'uniform_dislr' and
        'uniform_batch' whose forecast fits in B when ``method`` is None; a
        ``WordBudgetError`` when it does not fit. When the choice is
        disKPCA with the ridge sampler (and ``method`` and ``n_landmarks`` are
        None), the fit first
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
    n_landmarks : int or None, default=None
        |Y|: the exact number of representative points (the communication
        budget), all distinct; fewer only when the data has fewer distinct
        points (capped at n with a warning). When disKPCA's adaptive weights
        run out first (all remaining points in the span of the sampled ones),
        the rest is drawn uniformly. Ignored when ``landmarks`` is given, and by
        'exact' and 'random_features'. None: chosen. Without ``max_words``,
        400 landmarks with an explicit ``method``; with ``method=None``, the
        words of disKPCA at 400 landmarks, within which the pilot may choose
        another method and its |Y| (see ``method``). With ``max_words``, the
        largest |Y| the budget buys. An explicit value is always the |Y| used.
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
        benchmarks use it), with :math:`\\mathrm{transform}(x) = C^\\top k(Y, x)`.
    fit_inverse_transform : bool, default=False
        Learn a pre-image map for ``inverse_transform``, as scikit-learn's
        ``KernelPCA``: kernel ridge regression from the scores back to input
        space. With 'exact' it is scikit-learn's, learnt at the master from
        every point and its score. With the other landmark methods it is the
        same regression over every worker's rows, with the landmarks' scores
        ``transform(Y)`` as its centres
        (:func:`~kernelscale.horizontal.preimage.preimage_round`): one round
        more, 'pre-image: sums over rows', in which each worker sends
        :math:`|Y|(|Y|+1)/2 + |Y| d` words of sums (counted in ``max_words``, and in
        the forecast), then one |Y| x |Y| solve at the master (:math:`|Y|^2 + |Y| d`
        floats kept for ``inverse_transform``). Needs a method with landmarks
        (not 'random_features').
    alpha : float, default=1.0
        Ridge of the pre-image map (``fit_inverse_transform=True``).
    chunk_size : int, default=4096
        Rows a worker processes at once. On a GPU each chunk is one kernel
        block: give device partitions larger chunks (``benchmarks/gpu.py`` uses
        65,536), or the device waits on the launches between small blocks.
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
    eigen_solver : {'auto', 'dense', 'arpack', 'randomized'}, default='auto'
        The master's eigensolver, for every method (scikit-learn's meaning;
        :func:`kernelscale.eigensolvers.top_eigenpairs`): of the n x n kernel
        matrix of 'exact', the |Y| x |Y| matrix of the landmark methods, the
        m x m covariance of 'random_features'. LAPACK's dense solver, ARPACK
        (``scipy.sparse.linalg.eigsh``) or scikit-learn's randomized SVD; 'auto'
        takes ARPACK for k < 10 of a matrix above 200 rows, the dense solver
        otherwise. Its iterations are ``n_iter_``.
    tol : float, default=0
        ARPACK's convergence tolerance (0: machine precision).
    max_iter : int, optional
        ARPACK's most iterations (default: ARPACK's own, 10 n).
    iterated_power : int or 'auto', default='auto'
        Power iterations of the randomized solver ('auto': 7 when k < n / 10,
        else 4).
    remove_zero_eig : bool, default=False
        Drop the components of eigenvalue 0 ('exact'), so ``transform`` may return
        fewer than k columns; always done when ``n_components`` is None.
    copy_X : bool, default=True
        For ``kernel='precomputed'``: keep a copy of the kernel matrix as
        ``X_fit_`` (False: the given array itself, which must then not change).
        The other fits always hold copies: the workers' partitions, split from ``X``.

    Attributes
    ----------
    model_ : KernelPCAModel or RandomFeaturePCAModel
        The fitted model: what a model file keeps. Every other fitted array is
        derived from it (:meth:`_derive_fitted_attributes`), apart from the ledger.
    method_ : str
        The method that ran: ``method``, or what was chosen for it (see
        ``budget_plan_.reason``).
    budget_plan_ : BudgetPlan
        What was chosen and why (``reason``), when something was: with
        ``max_words``, the chosen method, its forecast and every method's
        largest setting within the budget (``pilot`` says what the pilot
        showed); with ``method=None`` and no budget (dense data, a kernel with a
        random feature map), the default's words as a budget and the pilot's
        choice, or, with an explicit ``n_landmarks``, disKPCA at that |Y|
        (``max_words`` there is the forecast's words). Absent when nothing was
        chosen (an explicit ``method``).
    eigenvalues_ : ndarray (n_components,)
        Energy each component captures: the eigenvalues of the (centred) kernel
        matrix of the training data as the method estimates them (of the
        sample, for 'uniform_batch'; of the random features, for
        'random_features'). For 'exact', scikit-learn's ``eigenvalues_``:
        those of the centred n x n kernel matrix, with round-off of zero set to 0.
    eigenvectors_ : ndarray (n_samples, n_components)
        'exact' only (scikit-learn's): the eigenvectors of the centred kernel
        matrix, one row per point of ``X_fit_``, unit norm; zero columns for
        eigenvalue 0 (scikit-learn keeps an arbitrary null-space vector there,
        which no score uses).
    X_fit_ : ndarray, CSR or ndarray (n_samples, n_samples)
        'exact' only (scikit-learn's): the training points (the kernel matrix for
        ``kernel='precomputed'``). One worker (``n_workers=1``) keeps the rows in
        the order of ``X``; with several workers, in the order of the workers'
        partitions stacked.
    gamma_ : float
        scikit-learn's: the kernel scale used, ``gamma`` or ``1 / n_features_in_``.
    n_iter_ : int
        The master's eigensolver's iterations: 1 for the dense solver, the
        products with the matrix for ARPACK, the power iterations for the
        randomized solver.
    dual_coef_ : ndarray (n_landmarks, n_features)
        scikit-learn's: the coefficients of the pre-image map,
        ``inverse_transform(Z) = k(Z, X_transformed_fit_) @ dual_coef_``
        (``fit_inverse_transform=True``). Until issue 33 this name held the
        projection coefficients, now ``landmark_coef_``.
    X_transformed_fit_ : ndarray (n_landmarks, n_components)
        The landmarks' scores, the centres of the pre-image map
        (``fit_inverse_transform=True``); for 'exact', scikit-learn's: the
        training points' scores, ``eigenvectors_`` times :math:`\\sqrt{\\lambda}`
        (``eigenvalues_``).
    landmarks_ : array or CSR (n_landmarks, n_features)
        Y, the representative points (all the data for 'exact'; absent for
        'random_features').
    landmark_coef_ : ndarray (n_landmarks, n_components)
        C, the projection coefficients: :math:`\\mathrm{transform}(x) = C^\\top (k(Y, x) - m)`
        (:math:`m` = ``model_.center``, the mean kernel row, when ``center=True``).
        Absent for 'random_features'.
    explained_variance_ratio_ : ndarray (n_components,)
        ``eigenvalues_`` as shares of the total energy in feature space, the
        trace of the kernel matrix (centred when ``center=True``) over the same
        points. disLR methods ('diskpca', 'uniform_dislr') learn the trace from
        one word per worker, added to the disLR round's reply; centred, they
        use the mean's projection on span(phi(Y)) (the exact mean's norm would
        need every pair of points across workers), which can only lower the
        shares, by :math:`n \\lVert \\mu - P_Y \\mu \\rVert^2 / \\mathrm{trace}` (0 when Y spans the
        mean).
        'exact' and 'uniform_batch' use the trace of the kernel matrix they
        hold (all data, the sample); 'random_features' that of its features.
    communication_ : Ledger
        Every message of the fit (phases 'setup' and 'fit'); empty for
        ``kernel='precomputed'``, which sends nothing.
    lost_workers_ : list of int
        Workers (partition ids) lost during the fit and left out of it
        (``backend='flower'`` with ``client=FlowerCluster(..., lost="drop")``):
        the model comes from the other workers' rows, summed rounds estimated
        by ``N / N_answered`` times their sum; each was announced by a
        :class:`~kernelscale.runtime.LostWorkerWarning` naming it and the round.
        Empty on the local and Dask backends.
    kernel_ : Kernel
        The kernel with its parameters resolved (gamma, degree, coef0), as the
        model evaluates it.
    n_features_in_ : int
        Number of features seen in ``fit`` (n for ``kernel='precomputed'``).
    feature_names_in_ : ndarray of str
        Names of the features seen in ``fit``, when ``X`` had string column names.

    See Also
    --------
    sklearn.decomposition.KernelPCA : Exact kernel PCA in one place; this
        estimator with ``method='exact', n_workers=1``.
    sklearn.kernel_approximation.Nystroem : Nystroem features; with ``PCA`` on
        top, the one-place analogue of ``method='uniform_dislr'`` (``docs/sklearn.md``).
    kernelscale.vertical.estimator.VerticalKernelPCA : Kernel PCA over features split
        across parties.
    kernelscale.streaming.StreamingKernelPCA : Kernel PCA of a stream.

    Examples
    --------
    scikit-learn's ``KernelPCA``, exactly, with every word counted:

    >>> import numpy as np
    >>> from sklearn.datasets import load_digits
    >>> from sklearn.decomposition import KernelPCA
    >>> from kernelscale import DistributedKernelPCA
    >>> X = load_digits().data[:300]
    >>> ours = DistributedKernelPCA(5, kernel="rbf", gamma=1e-3, method="exact",
    ...                             n_workers=1).fit(X)
    >>> theirs = KernelPCA(5, kernel="rbf", gamma=1e-3).fit(X)
    >>> bool(np.allclose(np.abs(ours.transform(X)), np.abs(theirs.transform(X))))
    True
    >>> bool(np.allclose(ours.eigenvalues_, theirs.eigenvalues_))
    True

    disKPCA over 4 workers with 60 landmarks:

    >>> est = DistributedKernelPCA(5, gamma=1e-3, n_workers=4, n_landmarks=60,
    ...                            random_state=0).fit(X)
    >>> est.method_, est.landmark_coef_.shape, est.transform(X).shape
    ('diskpca', (60, 5), (300, 5))
    >>> float(est.approximation_error(X)["ratio"]) < 1.1  # err / opt
    True
    """

    _parameter_constraints: dict = {
        "n_components": [POSITIVE_INT, None],
        "kernel": [kernel_names(), StrOptions({"precomputed"}), callable],
        "gamma": [Interval(Real, 0, None, closed="left"), None],
        "degree": [NON_NEGATIVE_INT, None],
        "coef0": [FINITE_REAL],
        "kernel_params": [dict, None],
        "n_workers": [POSITIVE_INT],
        "partition": [StrOptions(set(PARTITIONS))],
        "method": [StrOptions(set(METHODS)), None],
        "max_words": [POSITIVE_INT, None],
        "n_landmarks": [POSITIVE_INT, None],
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
        **SKLEARN_PARAMETER_CONSTRAINTS,
    }

    def __init__(self, n_components=10, *, kernel="rbf", gamma=None, degree=None, coef0=1.0,
                 kernel_params=None, n_workers=5, partition="power_law", method=None,
                 max_words=None, n_landmarks=None, landmarks=None, n_leverage=None,
                 embedding_dim=50, row_sketch_dim=250, n_random_features=2000,
                 embedding_dtype="float64", messages="gram", center=True,
                 fit_inverse_transform=False, alpha=1.0, chunk_size=4096,
                 backend="local", client=None, retry_lost=False, timeout=None, n_jobs=None,
                 verbose=0, random_state=None, sampler="ridge", eigen_solver="auto", tol=0,
                 max_iter=None, iterated_power="auto", remove_zero_eig=False, copy_X=True):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
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
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.iterated_power = iterated_power
        self.remove_zero_eig = remove_zero_eig
        self.copy_X = copy_X

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Fit on ``X`` (split over ``n_workers``) or on a list of partitions.

        Parameters
        ----------
        X : array or CSR (n_samples, n_features), a list of them (one per worker),
            a list of loaders (file paths or callables, loaded on the workers)
            or a dask array (its row chunks are the partitions); for
            ``kernel='precomputed'``, the n x n kernel matrix
        y : array, optional
            Labels, used only by ``partition='label'``.

        Returns
        -------
        self : DistributedKernelPCA
            The fitted estimator.
        """
        self._check_params()
        with verbosity(self.verbose):
            return self._fit(X, y)

    def _fit(self, X, y):
        start = time.perf_counter()
        rng = as_generator(self.random_state)
        self._fit_rows = None
        preimage = None
        if self.kernel == "precomputed":  # the exact fit of a kernel matrix, at one place
            self._fit_precomputed(X, rng)
            info, plan = None, None
        else:
            # Step 1: the workers and their partitions
            cluster, info, self._fit_rows = fit_cluster(self, X, y, rng)
            try:
                self.kernel_ = self._make_kernel(self.n_features_in_)
                # Step 2: what to run, where the user left it to the library
                plan = choose_plan(self, X, info, cluster)
                self.method_ = plan.method if plan else (self.method or "diskpca")
                check_fit_memory(self, info, plan)  # what the plan holds, before any round
                # Step 3: the protocol (disKPCA, Algorithm 1 of 001, or a baseline)
                piloted = draws_pilot(self, plan)  # the pilot may choose another method
                with track_rounds(cluster, LOGGER, f"{type(self).__name__}({self.method_})",
                                  self.verbose):
                    self.model_, plan = run_protocol(self, cluster, rng, info, plan)
                    if piloted:
                        self.method_ = plan.method
                    # Step 4: the pre-image map, learnt on every worker's rows
                    if self.fit_inverse_transform and self.method_ != "exact":
                        preimage = preimage_round(
                            cluster, self.model_, self.alpha, self.chunk_size,
                            send_model=self.landmarks is not None
                            and self.method_ == "uniform_batch")
            finally:
                cluster.close()
            self.communication_ = cluster.ledger
            self.lost_workers_ = sorted(cluster.lost_workers)
        self.__dict__.pop("budget_plan_", None)
        if plan is not None:
            self.budget_plan_ = plan
            if self.max_words is not None:
                check_budget_kept(self)
        self._derive_fitted_attributes(preimage)
        describe_fit(self, info, plan, time.perf_counter() - start)
        return self

    def _check_params(self) -> None:
        """Errors between parameters, raised before any work starts (each parameter
        alone is checked by ``_parameter_constraints``)."""
        check_parameters(self)


register_estimator(DistributedKernelPCA, diskpca_state, restore_diskpca,
                   model_type="distributed_kpca")

