"""``VerticalKernelPCA``: the one-shot vertical kernel PCA as a scikit-learn estimator."""

from __future__ import annotations

import functools
import time

import numpy as np
import scipy.sparse as sp
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
    _fit_context,
)
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from kernelscale.backends.local import effective_n_jobs
from kernelscale.cluster_factory import (
    CLUSTER_PARAMETER_CONSTRAINTS,
    cluster_options,
    make_cluster,
)
from kernelscale.constraints import (
    FINITE_REAL,
    POSITIVE_INT,
    POSITIVE_REAL,
    RANDOM_STATE,
    kernel_names,
)
from kernelscale.kernels import DEFAULT_CHUNK_SIZE, kernel_name, make_kernel
from kernelscale.linalg import like_input, preserved_dtypes
from kernelscale.memory_plans import check_vertical_memory
from kernelscale.model_registry import register_estimator
from kernelscale.partition import feature_block_partition
from kernelscale.progress import get_logger, track_rounds, verbosity
from kernelscale.runtime import Ledger
from kernelscale.runtime.inputs import is_loader, is_loader_list, load_partition
from kernelscale.runtime.validation import check_real
from kernelscale.vertical.model_state import restore_vertical, vertical_state
from kernelscale.vertical.nodes import NodeBlock
from kernelscale.vertical.oneshot import (
    VERTICAL_KERNELS,
    VerticalInfo,
    one_shot_kpca,
    validate_vertical,
)
from kernelscale.vertical.projection import vertical_transform

LOGGER = get_logger("vertical")


def _is_block_list(X) -> bool:
    return isinstance(X, (list, tuple)) and len(X) > 0 and all(np.ndim(b) == 2 for b in X)


def stack_rows(train, new):
    """A party's block for a transform: its training rows, then the new samples' rows.

    Either part may be a loader (a path or a callable, see
    :func:`kernelscale.make_cluster`); ``functools.partial(stack_rows, ...)``
    is itself a picklable loader, so on Dask the party loads its training block on
    its own worker.
    """
    train = load_partition(train) if is_loader(train) else train
    new = load_partition(new) if is_loader(new) else new
    if np.ndim(new) != 2 or new.shape[1] != train.shape[1]:
        raise ValueError(
            f"The new samples' block has shape {np.shape(new)}; this party holds "
            f"{train.shape[1]} features."
        )
    if sp.issparse(train) or sp.issparse(new):
        return sp.vstack([sp.csr_matrix(train), sp.csr_matrix(new)], format="csr")
    train = np.asarray(train)
    return np.vstack([train, np.asarray(new).astype(train.dtype, copy=False)])


class VerticalKernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Kernel PCA over parties that hold different features of the same samples (paper 002).

    Each party (a worker of the in-process runtime) sends the top
    ``n_local_components`` eigenpairs of its local kernel matrix, once; the fusion
    centre rebuilds the global kernel (sum for ``linear``, Hadamard product for
    ``rbf``, ``laplacian`` and ``chi2``, elementwise power (tanh) of the fused
    linear kernel for ``poly`` (``sigmoid``)) and keeps its top ``n_components``
    eigenvectors. New samples are projected by a distributed computation (eq. (9),
    (10) of 002) in which the parties send partial inner products or partial
    distances, never their features.

    Parameters
    ----------
    n_components : int, default=2
        Number of principal components. Each costs every party ``n + 1`` words
        (a local eigenvector holds a value per sample), hence a smaller default
        than ``DistributedKernelPCA``'s 10.
    n_local_components : int or None, default=None
        Eigenpairs each party sends (``D``; ``D (n + 1)`` words per party). ``None``:
        ``n_components + 1`` with ``center=True`` (centring removes the leading,
        nearly constant direction of the fused kernel, so ``D > n_components`` is
        needed), ``n_components`` otherwise.
    kernel : {'rbf', 'linear', 'laplacian', 'poly', 'sigmoid', 'chi2'}, default='rbf'
        scikit-learn conventions: ``rbf`` is :math:`\\exp(-\\gamma \\lVert x - y \\rVert^2)`.
        Paper 002's code uses :math:`\\exp(-\\lVert x - y \\rVert^2 / \\sigma^2)`: take
        :math:`\\gamma = 1 / \\sigma^2`. The
        kernels that split over feature blocks (a product of the parties' kernels,
        or a function of the summed inner products); 'polynomial' is an alias of
        'poly'. Other kernels (cosine, additive_chi2, callables) do not split and
        raise an error naming these.
    gamma : float or None, default=None
        Kernel scale, the same on every party; ``None`` means ``1 / n_features``
        (all features, over all parties).
    degree : int, default=3
        Degree of ``poly``.
    coef0 : float, default=1.0
        Constant term of ``poly``; offset of ``sigmoid``.
    center : bool, default=True
        Centre the fused kernel (after fusion), as kernel PCA does.
    feature_blocks : int, list of int, list of index arrays, or None, default=None
        How ``fit(X)`` splits the columns of ``X`` over parties: ``J`` even blocks,
        block sizes, or explicit column indices. ``None``: two even blocks (one if
        ``X`` has a single feature). Ignored when ``fit`` gets the blocks.
    chunk_size : int, default=4096
        Rows per block of kernel evaluation and per projection round.
    backend : {'local', 'dask', 'flower'}, default='local'
        Run the parties in-process, each in a Dask actor, or each on its Flower
        SuperNode (same result, same words). On Flower the blocks stay on the
        nodes: ``fit(key)`` and ``transform(key)`` name the node-config key of
        the parties' files (the training blocks, then the new samples' blocks).
    client : distributed.Client, str, dict or FlowerCluster, optional
        The Dask client for ``backend='dask'``; for ``backend='flower'``, the
        SuperLink as :func:`~kernelscale.backends.flower.cluster.flower_cluster`
        takes it (``"host:port"``, a connection name, a dict of options, or a
        ready ``FlowerCluster``). The number of parties is the cluster's, or
        ``feature_blocks`` (an int).
    retry_lost : bool, default=False
        Dask only: rebuild a party whose worker died on a live worker (reloaded from
        its loader or scattered again; the extra words go to the phase 'recovery')
        instead of raising ``WorkerError``.
    timeout : float, optional
        Dask only: seconds a round may take before it fails (default 600).
    n_jobs : int or None, default=None
        In-process only: threads for the workers' steps and their row chunks,
        with scikit-learn's meaning (``None``: 1, ``-1``: every core). The
        model and the ledger do not depend on it.
    verbose : int, default=0
        0: silent. 1: a tqdm progress bar over the protocol's rounds (fit, and
        the projection rounds of ``transform``) on stderr, and one INFO line per
        fit on the ``kernelscale.vertical`` logger. 2: a DEBUG line per round too.
        See :mod:`kernelscale.progress`.
    random_state : int, Generator or None, default=None
        Unused by the one-shot algorithm (it is deterministic); kept for the API.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (n_components,)
        The top eigenvalues of the fused (and, with ``center=True``, centred) kernel
        matrix, in decreasing order.
    eigenvectors_ : ndarray of shape (n_samples, n_components)
        The matching unit eigenvectors, one value per training sample (signs fixed
        so that the output is deterministic).
    model_ : VerticalKPCAModel
        What the fusion centre keeps: the fused eigenpairs, the kernel and its
        parameters, the centring terms; ``transform`` runs on it.
    feature_blocks_ : list of ndarray
        Column indices of each party in the full ``X`` (contiguous when fitted on blocks).
    X_fit_blocks_ : list of ndarray or of loaders
        The parties' training blocks (or their loaders), needed by ``transform``.
    communication_ : Ledger
        The messages of the fit (phases ``setup`` and ``fit``).
    n_features_in_ : int
        Number of features seen during ``fit``, over all parties.
    feature_names_in_ : ndarray of shape (n_features,)
        Names of the features seen during ``fit``; defined only when ``X`` has
        string column names (a pandas DataFrame).

    See Also
    --------
    one_shot_kpca : The protocol itself, on a cluster of parties.
    dpca : Paper 002's DPCA baseline (a consensus over the parties).
    DistributedKernelPCA : Rows, not features, spread over workers (disKPCA).
    sklearn.decomposition.KernelPCA : Exact kernel PCA of a table held in one place.

    Notes
    -----
    ``fit_transform`` is ``fit`` followed by the distributed ``transform`` of the
    training samples (exact kernel rows), so both agree as scikit-learn requires;
    ``model_.training_embedding()`` gives :math:`V \\sqrt{\\Lambda}` from the fused kernel.
    Dense input only. The estimator keeps the parties' training blocks
    (``X_fit_blocks_``), like ``KernelPCA`` keeps ``X_fit_``: they stand for the
    parties' own storage and are never sent.

    ``fit`` and ``transform`` also take one loader per party (a file path or a
    picklable callable, as in :func:`kernelscale.make_cluster`): on Dask each
    party loads its block on its own worker, and ``X_fit_blocks_`` keeps the
    loaders, so ``transform`` has each party reload its training block there and
    append the new samples' block (given as arrays, sent to the party that holds
    those features, or as loaders too). The block sizes are then learnt through
    the runtime: the ``setup`` phase holds one more ``describe feature blocks``
    round than a fit on arrays; the ``fit`` words are the same.

    Examples
    --------
    >>> import numpy as np
    >>> from kernelscale import VerticalKernelPCA
    >>> X = np.random.default_rng(0).normal(size=(50, 6))
    >>> est = VerticalKernelPCA(n_components=2, kernel="rbf", gamma=0.1,
    ...                         n_local_components=8, feature_blocks=3).fit(X)
    >>> est.transform(X[:4]).shape
    (4, 2)
    >>> est.communication_.upload_words(phase="fit") == 3 * 8 * (50 + 1)
    True
    """

    _parameter_constraints: dict = {
        "n_components": [POSITIVE_INT],
        "n_local_components": [POSITIVE_INT, None],
        "kernel": [kernel_names(), callable],  # the ones that split: checked in fit
        "gamma": [POSITIVE_REAL, None],
        "degree": [POSITIVE_INT],
        "coef0": [FINITE_REAL],
        "center": ["boolean"],
        "feature_blocks": [POSITIVE_INT, "array-like", None],
        "chunk_size": [POSITIVE_INT],
        **CLUSTER_PARAMETER_CONSTRAINTS,
        "verbose": ["verbose"],
        "random_state": RANDOM_STATE,
    }

    def __init__(
        self,
        n_components=2,
        n_local_components=None,
        kernel="rbf",
        gamma=None,
        degree=3,
        coef0=1.0,
        center=True,
        feature_blocks=None,
        chunk_size=DEFAULT_CHUNK_SIZE,
        backend="local",
        client=None,
        retry_lost=False,
        timeout=None,
        n_jobs=None,
        verbose=0,
        random_state=None,
    ):
        self.n_components = n_components
        self.n_local_components = n_local_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.center = center
        self.feature_blocks = feature_blocks
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
        """Fit on ``X`` (split by ``feature_blocks``) or on the parties' blocks or loaders.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features), list of arrays, list of loaders, \
str or None
            All features of the training samples (split over parties by
            ``feature_blocks``), or one block per party (the same samples in the same
            order, each party's columns), or one loader per party. With
            ``backend='flower'``: the node-config key of the parties' block files
            (None: the client cluster's own key).
        y : None
            Ignored.

        Returns
        -------
        self : VerticalKernelPCA
            The fitted estimator.
        """
        with verbosity(self.verbose):
            return self._fit(X)

    def _fit(self, X):
        if kernel_name(self.kernel) not in VERTICAL_KERNELS:  # raises on unknown names
            what = "A callable kernel" if callable(self.kernel) else f"Kernel {self.kernel!r}"
            raise ValueError(
                f"{what} does not split over feature blocks; the vertical setting takes "
                f"{', '.join(VERTICAL_KERNELS)}."
            )
        if self.backend == "flower":
            return self._fit_on_nodes(X)
        if is_loader_list(X):
            return self._fit_loaders(list(X))
        if _is_block_list(X):
            check_real(X)
            blocks = [check_array(b, dtype=[np.float64, np.float32]) for b in X]
            sizes = [b.shape[1] for b in blocks]
            self.feature_blocks_ = feature_block_partition(sum(sizes), sizes)
            self.n_features_in_ = int(sum(sizes))
            rows = {b.shape[0] for b in blocks}
            if len(rows) > 1:
                raise ValueError(
                    f"The blocks hold different numbers of samples {sorted(rows)}; every party "
                    "must hold its features of the same samples."
                )
        else:
            check_real(X)
            X = validate_data(self, X, dtype=[np.float64, np.float32], ensure_min_samples=2)
            blocks_spec = min(2, X.shape[1]) if self.feature_blocks is None else self.feature_blocks
            self.feature_blocks_ = feature_block_partition(X.shape[1], blocks_spec)
            blocks = [np.ascontiguousarray(X[:, cols]) for cols in self.feature_blocks_]
        info = VerticalInfo(n_samples=int(blocks[0].shape[0]),
                            block_sizes=tuple(int(b.shape[1]) for b in blocks),
                            is_sparse=any(sp.issparse(b) for b in blocks))
        return self._fit_cluster(self._make_cluster(blocks), info, blocks)

    def _fit_loaders(self, loaders, cluster=None):
        """Fit on one loader per party: the blocks are loaded (on Dask: on the workers;
        on Flower they are the nodes' files, ``cluster`` given)."""
        cluster = self._make_cluster(loaders) if cluster is None else cluster
        try:
            info = validate_vertical(cluster)
        except BaseException:
            cluster.close()
            raise
        self.feature_blocks_ = feature_block_partition(sum(info.block_sizes),
                                                       list(info.block_sizes))
        self.n_features_in_ = int(sum(info.block_sizes))
        if hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        return self._fit_cluster(cluster, info, loaders)

    def _flower_parties(self) -> int:
        """How many SuperNodes hold a block: the client cluster's, or ``feature_blocks``."""
        from kernelscale.runtime import Cluster

        if isinstance(self.client, Cluster):
            return self.client.n_workers
        if isinstance(self.feature_blocks, int) and not isinstance(self.feature_blocks, bool):
            return int(self.feature_blocks)
        raise ValueError("With backend='flower' give the number of parties: "
                         "feature_blocks=<number of SuperNodes>, or client=FlowerCluster(..., "
                         "n_workers=<number>).")

    def _node_cluster(self, n_parties: int, data_key):
        from kernelscale.backends.flower.cluster import flower_cluster

        return flower_cluster(n_parties, self.client, data_key, **cluster_options(self))

    def _fit_on_nodes(self, key):
        """Fit on the blocks the parties' SuperNodes hold under the node-config key ``key``."""
        if key is not None and not isinstance(key, str):
            raise TypeError("With backend='flower' the blocks stay on the SuperNodes: "
                            "fit('<node-config key>') (or fit(None) for the cluster's own "
                            f"key), not {type(key).__name__}.")
        cluster = self._node_cluster(self._flower_parties(), key)
        return self._fit_loaders([NodeBlock(str(cluster.data_key))] * cluster.n_workers,
                                 cluster)

    def _fit_cluster(self, cluster, info, fit_blocks):
        """Run the one-shot protocol on the parties' cluster (closed afterwards), whose
        blocks were validated already (``info``: their shapes)."""
        start = time.perf_counter()
        n_samples = info.n_samples
        desc = f"{type(self).__name__}({self.kernel})"
        try:
            if n_samples < 2:
                raise ValueError(f"n_samples={n_samples}: kernel PCA needs at least 2 samples.")
            if self.n_components > n_samples:
                raise ValueError(
                    f"n_components={self.n_components} exceeds n_samples={n_samples}."
                )
            kernel = make_kernel(
                kernel_name(self.kernel),
                gamma=self.gamma,
                degree=self.degree,
                coef0=self.coef0,
                n_features=self.n_features_in_,
            )
            check_vertical_memory(n_samples, cluster.n_workers, self.n_features_in_,
                                  n_jobs=effective_n_jobs(self.n_jobs),
                                  in_process=self.backend == "local")  # n x n, before any round
            with track_rounds(cluster, LOGGER, desc, self.verbose):
                self.model_ = one_shot_kpca(
                    cluster,
                    kernel,
                    int(self.n_components),
                    n_local_components=self.n_local_components,
                    center=bool(self.center),
                    chunk_size=int(self.chunk_size),
                    info=info,
                )
        finally:
            cluster.close()
        self.X_fit_blocks_ = fit_blocks
        self.communication_ = cluster.ledger
        self.eigenvalues_ = self.model_.eigenvalues
        self.eigenvectors_ = self.model_.eigenvectors
        self._n_features_out = int(self.n_components)
        LOGGER.info("%s: %d samples over %d parties, %s fit words, %.2f s", desc, n_samples,
                    cluster.n_workers, f"{self.communication_.total_words('fit'):,}",
                    time.perf_counter() - start)
        return self

    def distributed_transform(self, X) -> tuple[np.ndarray, Ledger]:
        """Project new samples through the parties; also return the ledger of that run.

        Parameters
        ----------
        X : array-like of shape (n_new, n_features), list of arrays, list of loaders or str
            The new samples (all features), their blocks (one per party, the columns
            of ``feature_blocks_``) or one loader per party. With
            ``backend='flower'``: the node-config key under which every party's
            SuperNode holds its block of the new samples.

        Returns
        -------
        Z : ndarray of shape (n_new, n_components)
            The new samples' coordinates, as ``transform`` returns them.
        ledger : Ledger
            The messages of this projection: the parties' partial inner products or
            distances, never their features.
        """
        check_is_fitted(self)
        if self.backend == "flower":
            return self._transform_on_nodes(X)
        if is_loader_list(X):
            if len(X) != len(self.feature_blocks_):
                raise ValueError(
                    f"Got {len(X)} loaders for {len(self.feature_blocks_)} parties."
                )
            new_blocks = list(X)
        elif _is_block_list(X):
            check_real(X)
            new_blocks = [check_array(b, dtype=[np.float64, np.float32]) for b in X]
            sizes = tuple(b.shape[1] for b in new_blocks)
            if sizes != tuple(len(c) for c in self.feature_blocks_):
                raise ValueError(
                    f"The new blocks have {list(sizes)} features; the parties were fitted on "
                    f"{[len(c) for c in self.feature_blocks_]}."
                )
        else:
            check_real(X)
            X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
            new_blocks = [X[:, cols] for cols in self.feature_blocks_]
        pairs = list(zip(self.X_fit_blocks_, new_blocks, strict=True))
        if any(is_loader(part) for pair in pairs for part in pair):
            # Each party stacks its own rows (on Dask: on its worker).
            parties = [functools.partial(stack_rows, train, new) for train, new in pairs]
        else:
            parties = [stack_rows(train, new) for train, new in pairs]
        cluster = self._make_cluster(parties)
        desc = f"{type(self).__name__}.transform"
        try:
            with verbosity(self.verbose), track_rounds(cluster, LOGGER, desc, self.verbose):
                Z = vertical_transform(cluster, self.model_, chunk_size=int(self.chunk_size))
        finally:
            cluster.close()
        return like_input(Z, new_blocks[0]), cluster.ledger

    def _transform_on_nodes(self, key) -> tuple[np.ndarray, Ledger]:
        """Each party's node stacks its training block and its block of new samples
        (node-config key ``key``) and sends only partial statistics (eq. (9), (10))."""
        if not isinstance(key, str) or not key:
            raise TypeError("With backend='flower' the new samples are on the SuperNodes: "
                            "transform('<node-config key of their blocks>'), not "
                            f"{type(key).__name__}.")
        trained = {getattr(block, "key", None) for block in self.X_fit_blocks_}
        if len(trained) != 1 or None in trained:
            raise ValueError("This VerticalKernelPCA was not fitted on Flower SuperNodes (its "
                             "training blocks are not on the nodes); transform it with the "
                             "backend it was fitted on.")
        cluster = self._node_cluster(len(self.feature_blocks_), (trained.pop(), key))
        desc = f"{type(self).__name__}.transform"
        try:
            with verbosity(self.verbose), track_rounds(cluster, LOGGER, desc, self.verbose):
                Z = vertical_transform(cluster, self.model_, chunk_size=int(self.chunk_size))
        finally:
            cluster.close()
        return Z, cluster.ledger

    def _make_cluster(self, blocks):
        return make_cluster(blocks, self.backend, self.client, **cluster_options(self))

    def transform(self, X):
        """Coordinates of new samples on the fitted components (distributed eq. (9)/(10)).

        Parameters
        ----------
        X : array-like of shape (n_new, n_features), list of arrays, list of loaders or str
            The new samples, as for :meth:`distributed_transform`.

        Returns
        -------
        Z : ndarray of shape (n_new, n_components)
            The projections on the fitted components.
        """
        return self.distributed_transform(X)[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return preserved_dtypes(tags)


# Model files (kernelscale.save_model / load_model) hold this estimator too.
register_estimator(VerticalKernelPCA, vertical_state, restore_vertical,
                   model_type="vertical_kpca")
