"""scikit-learn estimators: federated kernel k-means and distributed spectral clustering."""

from __future__ import annotations

import time
from numbers import Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    ClusterMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils.validation import check_is_fitted, validate_data

from kernelscale.backends.local import effective_n_jobs
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
from kernelscale.federated.baselines import SPECTRAL_PROTOCOLS, distributed_spectral_clustering
from kernelscale.federated.fk import PROTOCOLS, fk_kmeans
from kernelscale.federated.model_state import (
    fk_kmeans_state,
    restore_fk_kmeans,
    restore_spectral,
    spectral_state,
)
from kernelscale.federated.pipelined import DEFAULT_ROUND_COST
from kernelscale.kernels import KERNELS, kernel_name, make_kernel
from kernelscale.linalg import as_generator, like_input, preserved_dtypes
from kernelscale.memory_plans import check_federated_memory, check_landmark_memory
from kernelscale.model_registry import register_estimator
from kernelscale.partition import PARTITIONS, make_partition
from kernelscale.progress import get_logger, track_rounds, verbosity
from kernelscale.runtime.validation import check_real

LOGGER = get_logger("federated")


def _cluster(estimator, X, y, rng):
    """The clients' cluster (see ``kernelscale.cluster_factory.estimator_cluster``)."""

    def split_rows(n_samples):
        if n_samples < estimator.n_workers:
            raise ValueError(
                f"n_samples={n_samples} is smaller than n_workers={estimator.n_workers}: "
                "every client needs at least one point."
            )
        return make_partition(n_samples, estimator.n_workers, estimator.partition,
                              labels=y, random_state=rng)

    check_real(X)
    return estimator_cluster(estimator, X, split_rows)


def _log_fit(estimator, info, start: float) -> None:
    ledger = estimator.communication_
    LOGGER.info("%s: %d samples over %d workers, %d fit rounds, %s fit words, %.2f s",
                type(estimator).__name__, info.n_samples, info.n_workers, ledger.n_rounds("fit"),
                f"{ledger.total_words('fit'):,}", time.perf_counter() - start)


def _in_input_order(indices, labels):
    """Labels in the order of the rows of ``X``; partitions given: their concatenated order."""
    labels = np.asarray(labels, dtype=np.int64)
    if indices is None:
        return labels
    out = np.empty(labels.shape[0], dtype=np.int64)
    out[np.concatenate(indices)] = labels
    return out


class _EmbeddingClustering(ClassNamePrefixFeaturesOutMixin, TransformerMixin, ClusterMixin,
                           BaseEstimator):
    """Clusters as centres in an embedding: ``transform`` embeds, ``predict`` takes the nearest.

    Subclasses fit ``cluster_centers_`` and implement ``_embed(X)`` on validated ``X``.
    """

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return preserved_dtypes(tags)

    @property
    def _n_features_out(self):
        return self.cluster_centers_.shape[1]

    def transform(self, X):
        """Coordinates of ``X`` in the embedding the centres live in.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            New points, with the training data's features.

        Returns
        -------
        H : ndarray of shape (n_samples, n_components)
            Their embedding (the rows of H for FK k-means, the kernel principal
            components for spectral clustering), where ``cluster_centers_`` live.
        """
        check_is_fitted(self)
        check_real(X)
        X = validate_data(self, X, accept_sparse="csr", reset=False,
                          dtype=[np.float64, np.float32])
        return like_input(self._embed(X), X)

    def predict(self, X):
        """Cluster of each row of ``X``: the nearest centre in the embedding.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            New points, with the training data's features.

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            Index of the nearest row of ``cluster_centers_``.
        """
        H, centers = self.transform(X), self.cluster_centers_
        d2 = -2.0 * H @ centers.T + np.einsum("ij,ij->i", centers, centers)
        return np.argmin(d2, axis=1)


class FederatedKernelKMeans(_EmbeddingClustering):
    """Federated kernel k-means (FK k-means, Algorithm 1 of paper 003) with the RBF kernel.

    ``fit(X)`` splits ``X`` over ``n_workers`` simulated clients and runs DSPGD
    with CEM (fresh random features every iteration, distributed Lanczos on a
    ``(D + r_t)``-square matrix), then the coreset k-means on the rows of ``H``.
    No client sends a data row. ``fit`` also takes the clients' own partitions:
    a list of matrices, a list of loaders (paths or picklable callables, run on
    the Dask workers so the rows never pass through the client) or a dask array
    (one client per row chunk); ``labels_`` are then in the order of the
    partitions, concatenated.

    Parameters
    ----------
    n_clusters : int, default=8
        k.
    n_eigenvectors : int, optional
        s, columns of H (default ``n_clusters``).
    n_random_features : int, default=50
        D, random Fourier features per iteration (at least ``n_clusters + 2``).
    max_iter : int, default=20
        T, DSPGD iterations.
    coreset_size : int, default=1000
        C, points of the distributed k-means coreset.
    n_refine : int, default=10
        Lloyd refinement rounds after the coreset solution (0: the paper's protocol).
    gamma : float, optional
        RBF parameter; default the paper's
        :math:`N^2 / \\bigl(2 \\sum_{ij} \\lVert x_i - x_j \\rVert^2\\bigr)`.
    protocol : {'auto', 'gram', 'block', 'lanczos', 'paper'}, default='auto'
        How the rounds run; the model is Algorithm 1's whichever. ``'paper'``:
        as the paper runs it, a round per seed, per Lanczos step and per update
        of B (hundreds of rounds with the defaults). The others send each DSPGD
        iteration as one message (the update of B, the fresh seed) and the
        k-means' first two rounds as one (:mod:`kernelscale.federated.pipelined`):
        ``'gram'`` each client's :math:`W_t^\\top W_t` in the iteration's own round (the
        exact eigenpairs; fewer words than Lanczos at small D), ``'block'`` a few
        block Krylov rounds, ``'lanczos'`` the paper's Lanczos steps;
        ``'auto'`` picks per iteration by words plus ``round_cost`` per round
        (the Gram message at the default D). See ``docs/federated.md``.
    round_cost : float, default=1e5
        What one round costs, in words, for ``protocol='auto'``: the network's
        round-trip time times its bandwidth, at 8 bytes a word (the default:
        50 ms at 128 Mbit/s). 0 counts words alone.
    aggregates_only : bool, default=False
        Every reply a client sends is a sum over its rows (or nothing): the
        k-means starts from the clients' local centres (sums and counts) and
        refines them with ``n_refine`` distributed Lloyd rounds (sums and
        counts); no coreset row and no label leaves a client. ``labels_`` is
        then not set (each client keeps its rows' labels); ``predict`` labels
        the rows you hold. What a node that answers aggregates only accepts.
    n_workers : int, default=5
        Clients (M = 5 in the paper's experiments).
    partition : {'uniform', 'power_law', 'label'}, default='uniform'
    dropout : float, default=0.0
        Fraction of clients that do not answer a round.
    chunk_size : int, default=4096
    backend : {'local', 'dask', 'flower'}, default='local'
        Run the clients in-process, each in a Dask actor, or each on a Flower
        SuperNode (same result, same words). With ``'flower'``, ``fit(None)``:
        ``n_workers`` SuperNodes hold the data (see ``docs/federated.md``).
    client : distributed.Client, str, dict or FlowerCluster, optional
        The Dask client for ``backend='dask'``. For ``backend='flower'``: the
        SuperLink's ``host:port`` (no TLS: localhost), the name of a connection
        of your Flower configuration (its address and CA certificate), a dict of
        ``FlowerCluster`` options (``{"superlink": "host:port",
        "root_certificates": "ca.crt"}``), or a ready cluster to use its options, e.g.
        ``client=FlowerCluster("127.0.0.1:9093", n_workers=3, secure_rounds="all",
        lost="drop")`` (SecAgg+ sums, within its ``secure_range``, and dropping
        lost nodes; see :class:`~kernelscale.backends.flower.cluster.FlowerCluster`): the fit runs
        on it as it is (its workers and ``timeout``, not ``n_workers`` /
        ``timeout`` here) and closes it at the end, so give a new one to each fit.
    retry_lost : bool, default=False
        Dask only: rebuild a partition whose worker died on a live worker (replaying
        its earlier steps; the extra words go to the phase 'recovery') instead of
        raising ``WorkerError``.
    timeout : float, optional
        Dask and Flower (with ``client='host:port'``): seconds a round may take
        before it fails (default 600).
    n_jobs : int or None, default=None
        In-process only: threads for the workers' steps and their row chunks,
        with scikit-learn's meaning (``None``: 1, ``-1``: every core). The
        model and the ledger do not depend on it.
    verbose : int, default=0
        0: silent. 1: a tqdm progress bar over the protocol's rounds on stderr and
        one INFO line per fit on the ``kernelscale.federated`` logger. 2: a DEBUG
        line per round too. See :mod:`kernelscale.progress`.
    random_state : int, RandomState, Generator or None

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        In the order of the rows of ``X``, or of the given partitions concatenated.
        The rows of a client lost during the fit (``backend='flower'`` with
        ``client=FlowerCluster(..., lost="drop")``) are labelled -1
        (``kernelscale.federated.kmeans.LOST_LABEL``): ``labels_ == -1``.
        Not set with ``aggregates_only=True``.
    lost_workers_ : list of int
        Clients (partition ids) lost during the fit and left out of it; each
        was announced by a :class:`~kernelscale.runtime.LostWorkerWarning`
        naming it and the round. Empty on the local and Dask backends.
    cluster_centers_ : ndarray of shape (n_clusters, n_eigenvectors)
        Centres in the space of the rows of H.
    model_ : FKKMeansModel
        Seeds and projections: embeds and labels new points.
    gamma_ : float
        The RBF parameter used (``gamma``, or the paper's rule computed from the
        clients' sums).
    threshold_ : float
        lambda, the (k+2)-th eigenvalue of the first iteration.
    eigenvalues_ : ndarray of shape (n_eigenvectors,)
        Estimated top eigenvalues of the kernel matrix.
    ranks_ : list of int
        Rank r_t of Z_t per iteration.
    lanczos_steps_ : list of int
        Products of the eigen-solver per iteration: Lanczos steps, block Krylov
        rounds, 0 for the Gram message.
    eigensolvers_ : list of str
        The eigen-solver of each iteration: ``'lanczos'``, ``'gram'`` or ``'block'``.
    communication_ : Ledger
        Every message and round (phases 'setup', 'fit', and 'collect' for the
        labels); ``communication_.n_rounds()`` counts the fit's rounds.
    n_iter_ : int
        DSPGD iterations run (``max_iter``).
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of the features seen during ``fit``; defined only when ``X`` has
        string column names.

    See Also
    --------
    fk_kmeans : The protocol itself, on a cluster of clients.
    DistributedSpectralClustering : disKPCA, then the same coreset k-means (paper 001).
    distributed_kmeans : The coreset k-means of the last step, on any rows.
    sklearn.cluster.KMeans : Linear k-means of data held in one place.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from kernelscale import FederatedKernelKMeans
    >>> X, _ = make_blobs(200, centers=3, random_state=0)
    >>> fk = FederatedKernelKMeans(n_clusters=3, max_iter=5, random_state=0).fit(X)
    >>> fk.labels_.shape
    (200,)
    >>> fk.communication_.total_words(kind="raw_points")
    0
    >>> fk.predict(X[:3]).shape
    (3,)
    """

    _parameter_constraints: dict = {
        "n_clusters": [POSITIVE_INT],
        "n_eigenvectors": [POSITIVE_INT, None],
        "n_random_features": [POSITIVE_INT],
        "max_iter": [POSITIVE_INT],
        "coreset_size": [POSITIVE_INT],
        "n_refine": [NON_NEGATIVE_INT],
        "gamma": [POSITIVE_REAL, None],
        "protocol": [StrOptions(set(PROTOCOLS))],
        "round_cost": [Interval(Real, 0, None, closed="left")],
        "aggregates_only": ["boolean"],
        "n_workers": [POSITIVE_INT],
        "partition": [StrOptions(set(PARTITIONS))],
        "dropout": [Interval(Real, 0, 1, closed="left")],
        "chunk_size": [POSITIVE_INT],
        **CLUSTER_PARAMETER_CONSTRAINTS,
        "verbose": ["verbose"],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, n_clusters=8, *, n_eigenvectors=None, n_random_features=50, max_iter=20,
                 coreset_size=1000, n_refine=10, gamma=None, protocol="auto",
                 round_cost=DEFAULT_ROUND_COST, aggregates_only=False, n_workers=5,
                 partition="uniform", dropout=0.0, chunk_size=4096, backend="local",
                 client=None, retry_lost=False, timeout=None, n_jobs=None, verbose=0,
                 random_state=None):
        self.n_clusters = n_clusters
        self.n_eigenvectors = n_eigenvectors
        self.n_random_features = n_random_features
        self.max_iter = max_iter
        self.coreset_size = coreset_size
        self.n_refine = n_refine
        self.gamma = gamma
        self.protocol = protocol
        self.round_cost = round_cost
        self.aggregates_only = aggregates_only
        self.n_workers = n_workers
        self.partition = partition
        self.dropout = dropout
        self.chunk_size = chunk_size
        self.backend = backend
        self.client = client
        self.retry_lost = retry_lost
        self.timeout = timeout
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Run FK k-means on ``X`` split over ``n_workers`` clients, or on given partitions.

        Parameters
        ----------
        X : array or CSR (n_samples, n_features), a list of them (one per client),
            a list of loaders (file paths or picklable callables, loaded on the
            workers) or a dask array (its row chunks are the clients' partitions)
        y : array, optional
            Labels, used only by ``partition='label'``.

        Returns
        -------
        self : FederatedKernelKMeans
            The fitted estimator; ``labels_`` hold the clusters of the training rows.
        """
        with verbosity(self.verbose):
            return self._fit(X, y)

    def _fit(self, X, y):
        start = time.perf_counter()
        rng = as_generator(self.random_state)
        cluster, info, indices = _cluster(self, X, y, rng)
        try:
            check_federated_memory(info.n_rows, info.n_features, self.n_random_features,
                                   self.n_eigenvectors or self.n_clusters,
                                   n_jobs=effective_n_jobs(self.n_jobs),
                                   in_process=self.backend == "local")  # before any round
            with track_rounds(cluster, LOGGER, type(self).__name__, self.verbose):
                result = fk_kmeans(
                    cluster, self.n_clusters, n_eigenvectors=self.n_eigenvectors,
                    n_random_features=self.n_random_features, max_iter=self.max_iter,
                    coreset_size=self.coreset_size, n_refine=self.n_refine,
                    gamma=self.gamma, dropout=self.dropout, protocol=self.protocol,
                    round_cost=self.round_cost, aggregates_only=self.aggregates_only,
                    partitions=info, chunk_size=self.chunk_size, random_state=rng,
                )
        finally:
            cluster.close()
        if hasattr(self, "labels_"):  # a refit with aggregates_only keeps no stale labels
            del self.labels_
        if result.labels is not None:
            self.labels_ = _in_input_order(indices, result.labels)
        self.lost_workers_ = sorted(cluster.lost_workers)
        self.model_ = result.model
        self.cluster_centers_ = result.model.centers
        self.gamma_ = result.gamma
        self.threshold_ = result.dspgd.threshold
        self.eigenvalues_ = result.dspgd.eigenvalues
        self.ranks_ = result.dspgd.ranks
        self.lanczos_steps_ = result.dspgd.lanczos_steps
        self.eigensolvers_ = result.dspgd.solvers
        self.n_iter_ = len(result.dspgd.ranks)
        self.communication_ = cluster.ledger
        _log_fit(self, info, start)
        return self

    def fit_predict(self, X, y=None):
        """Fit, then the labels of the training rows (``labels_``).

        Parameters
        ----------
        X, y : as in :meth:`fit`

        Returns
        -------
        labels : ndarray of shape (n_samples,)
            ``labels_``; with ``aggregates_only=True`` the labels stay on the
            clients, so ``predict(X)`` labels ``X`` from the model instead (``X``
            being rows you hold).
        """
        self.fit(X, y)
        if self.aggregates_only:
            return self.predict(X)
        return self.labels_

    def _embed(self, X):
        # Rows of H for X: the clients' embedding, replayed from the seeds.
        return self.model_.embed(X, self.chunk_size)


class DistributedSpectralClustering(_EmbeddingClustering):
    """disKPCA, then the coreset k-means on the projections (section 6.6 of paper 001).

    Parameters
    ----------
    n_clusters : int, default=8
        k, the number of clusters.
    n_components : int, optional
        Rank of the kernel PCA (default ``n_clusters``).
    kernel : {'rbf', 'laplacian', 'poly', 'linear', 'arccos'}, default='rbf'
        The kernel (the ones with a random feature map, for disKPCA's sampler).
    gamma : float, optional
        For 'rbf' default the gamma rule of paper 003 (from per-worker sums);
        otherwise scikit-learn's default.
    degree, coef0 : kernel parameters
    n_landmarks, n_leverage, embedding_dim, row_sketch_dim, n_random_features, messages :
        disKPCA parameters (see :class:`kernelscale.horizontal.DistributedKernelPCA`).
    coreset_size : int, default=1000
        Points of the distributed k-means coreset.
    n_refine : int, default=10
        Lloyd refinement rounds after the coreset solution.
    protocol : {'auto', 'paper'}, default='auto'
        ``'paper'``: disKPCA, its components to every worker, the projections,
        the coreset k-means' two rounds. ``'auto'``: the same in two rounds fewer
        (the components, the projections and the k-means' local solution and
        coreset in one message).
    n_workers : int, default=5
        Workers ``fit(X)`` splits ``X`` over.
    partition : {'power_law', 'uniform', 'label'}, default='power_law'
        How ``fit(X)`` splits the rows (``'label'`` needs ``y``).
    backend : {'local', 'dask', 'flower'}, default='local'
        As in :class:`FederatedKernelKMeans`.
    client : distributed.Client, str or FlowerCluster, optional
        As in :class:`FederatedKernelKMeans` (a ready ``FlowerCluster`` brings
        its secure sums and ``lost`` policy).
    retry_lost : bool, default=False
        Dask only: rebuild a partition whose worker died on a live worker (replaying
        its earlier steps; the extra words go to the phase 'recovery') instead of
        raising ``WorkerError``.
    timeout : float, optional
        Dask and Flower (with ``client='host:port'``): seconds a round may take
        before it fails (default 600).
    n_jobs : int or None, default=None
        In-process only: threads for the workers' steps and their row chunks,
        with scikit-learn's meaning (``None``: 1, ``-1``: every core). The
        model and the ledger do not depend on it.
    verbose : int, default=0
        As in :class:`FederatedKernelKMeans`.
    random_state : int, RandomState, Generator or None
        Seeds every random choice (sampling, feature maps, the coreset).

    Attributes
    ----------
    labels_ : ndarray of shape (n_samples,)
        Cluster of each training row, in the order of the rows of ``X`` or of the
        given partitions concatenated; the rows of a client lost during the fit
        (``lost="drop"``) are labelled -1.
    cluster_centers_ : ndarray of shape (n_clusters, n_components)
        Centres in the space of the kernel principal components.
    model_ : KernelPCAModel
        The disKPCA model (landmarks and coefficients) that embeds new points.
    kernel_ : Kernel
        The kernel used, with its parameters resolved (``gamma`` from the rule).
    communication_ : Ledger
        Every message of the fit (disKPCA's rounds, then the k-means rounds); the
        sampled landmarks are its only ``raw_points``.
    n_features_in_ : int
        Number of features seen during ``fit``.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of the features seen during ``fit``; defined only when ``X`` has
        string column names.
    lost_workers_ : list of int
        Clients lost during the fit and left out of it (as in
        :class:`FederatedKernelKMeans`); the model comes from the others.

    See Also
    --------
    FederatedKernelKMeans : Clustering that sends no input row (paper 003).
    distributed_spectral_clustering : The protocol itself, on a cluster of workers.
    DistributedKernelPCA : The disKPCA step alone.
    sklearn.cluster.SpectralClustering : Spectral clustering of data held in one place.

    Notes
    -----
    ``fit`` takes what :class:`FederatedKernelKMeans` takes: one matrix (split over
    ``n_workers``), a list of partitions, a list of loaders or a dask array.

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> from kernelscale import DistributedSpectralClustering
    >>> X, _ = make_blobs(300, centers=3, random_state=0)
    >>> sc = DistributedSpectralClustering(n_clusters=3, n_landmarks=50,
    ...                                    random_state=0).fit(X)
    >>> sc.labels_.shape, sc.cluster_centers_.shape
    ((300,), (3, 3))
    >>> sc.communication_.total_words("fit", kind="raw_points")  # 50 x 2 up, then to 5 workers
    600
    >>> sc.communication_.n_rounds()  # gamma, disKPCA's 8, the model and coresets, Lloyd's 10...
    21
    """

    _parameter_constraints: dict = {
        "n_clusters": [POSITIVE_INT],
        "n_components": [POSITIVE_INT, None],
        "kernel": [kernel_names(KERNELS)],  # the kernels with a random feature map
        "gamma": [POSITIVE_REAL, None],
        "degree": [NON_NEGATIVE_INT, None],
        "coef0": [FINITE_REAL],
        "n_landmarks": [POSITIVE_INT],
        "n_leverage": [POSITIVE_INT, None],
        "embedding_dim": [POSITIVE_INT],
        "row_sketch_dim": [POSITIVE_INT],
        "n_random_features": [POSITIVE_INT],
        "messages": [StrOptions({"gram", "sketch"})],
        "coreset_size": [POSITIVE_INT],
        "n_refine": [NON_NEGATIVE_INT],
        "protocol": [StrOptions(set(SPECTRAL_PROTOCOLS))],
        "n_workers": [POSITIVE_INT],
        "partition": [StrOptions(set(PARTITIONS))],
        **CLUSTER_PARAMETER_CONSTRAINTS,
        "verbose": ["verbose"],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, n_clusters=8, *, n_components=None, kernel="rbf", gamma=None,
                 degree=None, coef0=1.0, n_landmarks=400, n_leverage=None, embedding_dim=50,
                 row_sketch_dim=250, n_random_features=2000, messages="gram",
                 coreset_size=1000, n_refine=10, protocol="auto", n_workers=5,
                 partition="power_law",
                 backend="local", client=None, retry_lost=False, timeout=None, n_jobs=None,
                 verbose=0, random_state=None):
        self.n_clusters = n_clusters
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.n_landmarks = n_landmarks
        self.n_leverage = n_leverage
        self.embedding_dim = embedding_dim
        self.row_sketch_dim = row_sketch_dim
        self.n_random_features = n_random_features
        self.messages = messages
        self.coreset_size = coreset_size
        self.n_refine = n_refine
        self.protocol = protocol
        self.n_workers = n_workers
        self.partition = partition
        self.backend = backend
        self.client = client
        self.retry_lost = retry_lost
        self.timeout = timeout
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """disKPCA + distributed k-means on ``X`` split over ``n_workers`` workers.

        Parameters
        ----------
        X : array or CSR (n_samples, n_features), a list of them (one per worker),
            a list of loaders (file paths or picklable callables, loaded on the
            workers) or a dask array (its row chunks are the partitions)
        y : array, optional
            Labels, used only by ``partition='label'``.

        Returns
        -------
        self : DistributedSpectralClustering
            The fitted estimator; ``labels_`` hold the clusters of the training rows.
        """
        with verbosity(self.verbose):
            return self._fit(X, y)

    def _fit(self, X, y):
        start = time.perf_counter()
        rng = as_generator(self.random_state)
        cluster, info, indices = _cluster(self, X, y, rng)
        try:
            with track_rounds(cluster, LOGGER, type(self).__name__, self.verbose):
                result = self._run(cluster, info, rng)
        finally:
            cluster.close()
        self.labels_ = _in_input_order(indices, result.labels)
        self.lost_workers_ = sorted(cluster.lost_workers)
        self.cluster_centers_ = result.centers
        self.model_ = result.model
        self.kernel_ = result.model.kernel
        self.communication_ = cluster.ledger
        _log_fit(self, info, start)
        return self

    def _run(self, cluster, info, rng):
        if self.n_clusters > info.n_samples:
            raise ValueError(f"n_clusters={self.n_clusters} exceeds the number of "
                             f"samples {info.n_samples}.")
        kernel = None
        if self.kernel != "rbf" or self.gamma is not None:
            params = {}
            if self.degree is not None:
                params = {"order" if self.kernel == "arccos" else "degree": self.degree}
            kernel = make_kernel(kernel_name(self.kernel), gamma=self.gamma, coef0=self.coef0,
                                 n_features=info.n_features, **params)
        n_landmarks = min(self.n_landmarks, info.n_samples)
        check_landmark_memory(info.n_rows, info.n_features, n_landmarks, sampler="ridge",
                              n_random_features=self.n_random_features,
                              embedding_dim=self.embedding_dim, messages=self.messages,
                              n_jobs=effective_n_jobs(self.n_jobs),
                              in_process=self.backend == "local")  # before any round
        return distributed_spectral_clustering(
            cluster, self.n_clusters, kernel=kernel, n_components=self.n_components,
            coreset_size=self.coreset_size, n_refine=self.n_refine, protocol=self.protocol,
            random_state=rng, n_landmarks=n_landmarks, n_leverage=self.n_leverage,
            embedding_dim=self.embedding_dim, row_sketch_dim=self.row_sketch_dim,
            n_random_features=self.n_random_features, messages=self.messages,
        )

    def _embed(self, X):
        # Coordinates of X on the kernel principal components.
        return self.model_.transform(X)


# Model files (kernelscale.save_model / load_model) hold these estimators too.
register_estimator(FederatedKernelKMeans, fk_kmeans_state, restore_fk_kmeans,
                   model_type="federated_kernel_kmeans")
register_estimator(DistributedSpectralClustering, spectral_state, restore_spectral,
                   model_type="distributed_spectral_clustering")
