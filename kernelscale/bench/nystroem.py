"""scikit-learn's ``Nystroem`` + ``PCA`` as a landmark model, to be judged like ours.

``Nystroem(n_components=m)`` draws m distinct rows Y uniformly and maps
``z(x) = N k(Y, x)`` with ``N = K_YY^{-1/2}`` (its ``normalization_``, transposed):
the coordinates of ``phi(x)`` projected on span(phi(Y)), in an orthonormal
basis. ``PCA(k)`` on ``z`` then finds the best rank-k subspace of span(phi(Y))
for all the data, which is what disLR computes over the workers
(``method='uniform_dislr'`` at |Y| = m). As a landmark model:
``C = N^T W`` (``W`` the PCA components, m x k) and the centre ``mean_a k(Y, a)``,
so ``model.transform(x) = (k(x, Y) - mean) C`` is ``pca.transform(z(x))``.
"""

from __future__ import annotations

import numpy as np
from sklearn.decomposition import PCA
from sklearn.kernel_approximation import Nystroem

from kernelscale.kernels import Kernel
from kernelscale.model import KernelPCAModel


def nystroem_pca_model(X: np.ndarray, kernel: Kernel, n_landmarks: int, n_components: int,
                       random_state: int = 0) -> KernelPCAModel:
    """Fit ``Nystroem(n_components=n_landmarks)`` + ``PCA(n_components)`` on ``X``.

    ``kernel`` is one of scikit-learn's named kernels with its parameters
    (:class:`~kernelscale.kernels.Kernel`: rbf, laplacian, poly, linear...).
    Returns the equivalent centred :class:`~kernelscale.model.KernelPCAModel`.
    """
    params = {"gamma": kernel.gamma, "degree": kernel.degree, "coef0": kernel.coef0}
    name = {"poly": "polynomial"}.get(kernel.name, kernel.name)
    nystroem = Nystroem(kernel=name, n_components=n_landmarks, random_state=random_state,
                        **{p: v for p, v in params.items() if v is not None})
    Z = nystroem.fit_transform(X)
    pca = PCA(n_components, svd_solver="full").fit(Z)
    coef = nystroem.normalization_.T @ pca.components_.T
    Y = nystroem.components_
    center = np.zeros(Y.shape[0])
    for start in range(0, X.shape[0], 4096):  # mean_a k(Y, a), blockwise
        center += kernel(X[start:start + 4096], Y).sum(axis=0)
    return KernelPCAModel(kernel=kernel, landmarks=Y, coef=coef,
                          eigenvalues=pca.explained_variance_ * (X.shape[0] - 1),
                          center=center / X.shape[0], info={"method": "nystroem+pca"})
