"""scikit-learn's ``KernelPCA`` face on a fitted kernel PCA model, shared by the estimators.

:class:`KernelPCABase` holds what a fitted estimator does with its model
(``model_``, a :class:`~kernelscale.model.KernelPCAModel` or
:class:`~kernelscale.model.RandomFeaturePCAModel`): the fitted attributes derived
from it, ``transform``, the pre-image map behind ``inverse_transform``,
``approximation_error`` and scikit-learn's tags. How the model is fitted is each
estimator's own: :class:`~kernelscale.horizontal.estimator.DistributedKernelPCA`
runs a protocol over workers.
"""

from __future__ import annotations

import functools
import types

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from kernelscale.arrays import (
    accept_device_input,
    device_transform,
    is_device_array,
    to_device_of,
    to_host,
)
from kernelscale.backends.local import LocalCluster
from kernelscale.horizontal.evaluate import distributed_error
from kernelscale.horizontal.preimage import apply_preimage, fit_preimage
from kernelscale.horizontal.sklearn_api import (
    eigensolver_options,
    fit_precomputed,
    validate_kernel_matrix,
)
from kernelscale.kernels import Kernel, kernel_name, make_kernel
from kernelscale.linalg import like_input, preserved_dtypes
from kernelscale.metrics.lowrank import (
    EXACT_REFERENCE_MAX_SAMPLES,
    error_ratio,
    exact_kpca_reference,
    excess_energy_ratio,
    kernel_mean_norm_sq,
)
from kernelscale.model import energy_shares
from kernelscale.partition import make_partition, split
from kernelscale.runtime.inputs import is_partition_list
from kernelscale.runtime.ledger import Ledger
from kernelscale.runtime.validation import check_real


class _WithPreimageMap:
    """A method that exists only with ``fit_inverse_transform=True`` (``inverse_transform``).

    Without the map, the attribute itself raises scikit-learn's ``NotFittedError``
    (an ``AttributeError``): ``hasattr`` is then False, as scikit-learn's checks
    expect of a method that cannot run, and a call gets the error scikit-learn's
    ``KernelPCA`` raises. (scikit-learn's ``available_if`` would turn it into a
    plain ``AttributeError``.) On the class it is the function, for the docs.
    """

    def __init__(self, method):
        self.method = method
        functools.update_wrapper(self, method)

    def __get__(self, estimator, owner=None):
        if estimator is None:
            return self.method
        if not (hasattr(estimator, "dual_coef_") or (
                estimator.fit_inverse_transform and not hasattr(estimator, "model_"))):
            raise NotFittedError("The fit_inverse_transform parameter was not set to True "
                                 "when fitting, so the inverse transform is not available.")
        return types.MethodType(self.method, estimator)


class KernelPCABase(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """A kernel PCA estimator's fitted face: what it does with ``model_``.

    Subclasses fit ``model_`` (and set ``n_features_in_``, ``method_``,
    ``communication_``, ``lost_workers_``), then call
    :meth:`_derive_fitted_attributes`. A model file restores an estimator the
    same way, from ``model_``, ``n_features_in_`` and the parameters.
    """

    def fit_transform(self, X, y=None, **params):
        """Fit on ``X`` and return its scores.

        For 'exact' on one matrix, the scores come from the eigenvectors
        (``eigenvectors_ * sqrt(eigenvalues_)``, scikit-learn's), without a second
        pass over the kernel; otherwise ``fit(X).transform(X)``.

        Parameters
        ----------
        X : array or CSR (n_samples, n_features)
            As for :meth:`fit` (one matrix: the scores are those of its rows).
        y : array, optional
            Labels, used only by ``partition='label'``.

        Returns
        -------
        ndarray of shape (n_samples, n_components)
        """
        self.fit(X, y)
        rows = getattr(self, "_fit_rows", None)
        if self.method_ == "exact" and rows is not None and not self.lost_workers_:
            scores = self.eigenvectors_ * np.sqrt(self.eigenvalues_)
            if not np.array_equal(rows, np.arange(rows.size)):  # the workers' order: X's
                scores[rows] = scores.copy()
            return like_input(scores, X)
        return self.transform(X)


    def _fit_precomputed(self, K, rng) -> None:
        """``kernel='precomputed'``: the exact fit of the kernel matrix, at one place."""
        K = validate_kernel_matrix(K, copy=self.copy_X)
        self.n_features_in_ = K.shape[1]
        self.model_ = fit_precomputed(K, self.n_components, bool(self.center),
                                      eigensolver_options(self, rng), self.remove_zero_eig)
        self.kernel_ = self.model_.kernel
        self.method_ = "exact"
        self.communication_ = Ledger()  # nothing is sent
        self.lost_workers_ = []
        self._fit_rows = np.arange(K.shape[0])

    def _derive_fitted_attributes(self, preimage=None) -> None:
        """Every fitted attribute that follows from ``model_`` (and the parameters).

        ``eigenvalues_``, ``explained_variance_ratio_``, ``landmarks_``,
        ``landmark_coef_``, ``gamma_``, ``n_iter_`` and, for 'exact', ``X_fit_``
        and ``eigenvectors_``; with ``fit_inverse_transform``, the pre-image map
        (``X_transformed_fit_``, ``dual_coef_``): ``preimage``, the map a
        distributed fit learnt on every worker's rows
        (:func:`~kernelscale.horizontal.preimage.preimage_round`), or for 'exact'
        scikit-learn's, computed here from every point. A model file restores an
        estimator through this method from ``model_``, ``n_features_in_``, the
        parameters and the map it kept.
        """
        model = self.model_
        self.kernel_ = model.kernel
        if not hasattr(self, "method_"):  # a restored model: what ran is in its info
            self.method_ = model.info.get("method")
        self.gamma_ = 1.0 / self.n_features_in_ if self.gamma is None else self.gamma
        self.eigenvalues_ = model.eigenvalues
        self.explained_variance_ratio_ = energy_shares(self.eigenvalues_, model.trace)
        for name in ("landmarks_", "landmark_coef_", "X_fit_", "eigenvectors_",
                     "X_transformed_fit_", "dual_coef_", "n_iter_"):  # from an earlier fit
            self.__dict__.pop(name, None)
        if hasattr(model, "landmarks"):
            self.landmarks_ = model.landmarks
            self.landmark_coef_ = model.coef
        if self.method_ == "exact":
            self.X_fit_ = model.landmarks
            # C = V Lambda^-1/2 on the non-zero eigenvalues (zero columns elsewhere)
            self.eigenvectors_ = model.coef * np.sqrt(np.maximum(model.eigenvalues, 0.0))
        if "n_iter" in model.info:  # the master's eigensolver (absent from older model files)
            self.n_iter_ = int(model.info["n_iter"])
        if self.fit_inverse_transform:
            self._set_preimage_map(preimage)
        self._n_features_out = model.n_components

    def _set_preimage_map(self, preimage) -> None:
        """``X_transformed_fit_`` and ``dual_coef_``: the map given, or the one the master
        computes: for 'exact' scikit-learn's, from every point and its score
        ``eigenvectors_ * sqrt(eigenvalues_)``; for a distributed model file written
        before the map was learnt on every row, the landmarks' own map."""
        if preimage is None:
            if self.method_ == "exact":
                points = self.X_fit_
                scores = self.eigenvectors_ * np.sqrt(self.eigenvalues_)
            else:
                points = self.model_.landmarks
                scores = self.model_.transform(points, chunk_size=self.chunk_size)
            preimage = scores, fit_preimage(self.kernel_, scores, points, self.alpha,
                                            self.chunk_size)
        self.X_transformed_fit_, self.dual_coef_ = preimage

    def transform(self, X):
        """Project ``X`` on the components.

        Parameters
        ----------
        X : array or CSR (n_samples, n_features)
            New points; for ``kernel='precomputed'``, their kernel values against
            the training points, shape (n_samples, n_samples_fit).

        Returns
        -------
        ndarray of shape (n_samples, n_components)
            The scores, in the input's float dtype (float32 stays float32).
        """
        check_is_fitted(self)
        X = accept_device_input(X)
        if is_device_array(X):  # under array API dispatch: on X's device, X's namespace
            return device_transform(self.model_, X, self.n_features_in_, self.chunk_size)
        check_real(X)
        X = validate_data(self, X, accept_sparse="csr", reset=False,
                          dtype=[np.float64, np.float32])
        return like_input(self.model_.transform(X, chunk_size=self.chunk_size), X)

    @_WithPreimageMap
    def inverse_transform(self, X):
        """Map scores back to input space with the learnt pre-image map.

        As scikit-learn's ``KernelPCA.inverse_transform``: ``k(X, S) @ B`` with
        ``S`` the landmarks' scores (``X_transformed_fit_``) and ``B`` the kernel
        ridge coefficients (``dual_coef_``; ``fit_inverse_transform=True``). As
        in scikit-learn, the map regresses the (uncentred) landmarks on their
        scores with the model's kernel and no intercept: with the linear kernel
        it cannot reconstruct the data's mean (use scikit-learn's ``PCA`` there).

        Parameters
        ----------
        X : array of shape (n_samples, n_components)
            Scores, e.g. from ``transform``.

        Returns
        -------
        ndarray of shape (n_samples, n_features)
            Points in input space.
        """
        check_is_fitted(self)
        on_device = is_device_array(X)
        Z = to_host(X) if on_device else X
        check_real(Z)
        Z = check_array(Z, dtype=[np.float64, np.float32])
        k = self.X_transformed_fit_.shape[1]
        if Z.shape[1] != k:
            raise ValueError(f"X has {Z.shape[1]} columns; inverse_transform takes the "
                             f"scores of the {k} components.")
        out = like_input(apply_preimage(self.kernel_, self.X_transformed_fit_,
                                        self.dual_coef_, Z, self.chunk_size), Z)
        return to_device_of(out, X) if on_device else out


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

        Parameters
        ----------
        X : array or CSR (n_samples, n_features), or a list of them
            The points to evaluate on (the training data, or held-out points).
        reference : bool, optional
            Also compute the exact optimum (default: when n <= 20,000).

        Returns
        -------
        dict
            ``error`` (the squared feature-space residual summed over ``X``),
            ``trace`` (the total energy, centred when ``center=True``) and, with
            ``reference``, ``opt``, ``ratio`` and ``excess_ratio``.
        """
        check_is_fitted(self)
        if self.kernel == "precomputed":
            raise ValueError("approximation_error needs k(a, a) and the kernel between the "
                             "points of X, which kernel='precomputed' does not have: compute "
                             "it from the eigenvalues (their sum against the trace of the "
                             "centred kernel matrix) or fit with the kernel itself.")
        parts = list(X) if is_partition_list(X) else [X]
        check_real(parts)
        parts = [check_array(to_host(p), accept_sparse="csr") for p in parts]  # on the host
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
        if name == "callable":  # scikit-learn's kernel_params: the callable's arguments
            return make_kernel(self.kernel, params=self.kernel_params)
        degree = self.degree
        if degree is None:
            degree = 2 if name == "arccos" else 3
        if name == "arccos":
            return make_kernel("arccos", order=degree)
        return make_kernel(name, gamma=self.gamma, degree=degree, coef0=self.coef0,
                           n_features=n_features)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A precomputed kernel matrix is pairwise: cross-validation splits its rows and
        # columns alike (scikit-learn's KernelPCA's tag).
        tags.input_tags.pairwise = self.kernel == "precomputed"
        # CSR input, except for the kernels that need dense rows (Laplacian, chi2).
        try:
            name = kernel_name(self.kernel)
        except ValueError:  # an unknown kernel, or 'precomputed' (a dense matrix)
            name = "laplacian" if self.kernel == "precomputed" else "rbf"
        tags.input_tags.sparse = Kernel(name=name).accepts_sparse
        return preserved_dtypes(tags)


