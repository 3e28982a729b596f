"""The learnt pre-image map of kernel PCA (Bakir, Weston, Schoelkopf 2004), as scikit-learn's.

Kernel ridge regression from the scores back to input space, with the model's
kernel applied to scores. scikit-learn's ``KernelPCA`` learns it from all its
training points ``X`` and their scores ``S``: ``B = (k(S, S) + alpha I)^-1 X``
and ``preimage(Z) = k(Z, S) B`` (:func:`fit_preimage`, :func:`apply_preimage`);
an exact fit (every point at the master) does the same.

A distributed fit cannot hold the n x n matrix ``k(S, S)``. It learns the
same regression over every worker's rows with the landmarks' scores
``S_Y = transform(Y)`` as the centres (the subset-of-regressors form of kernel
ridge regression): with ``c(a) = k(S_Y, transform(a))``, the coefficients

    B = (sum_a c(a) c(a)^T + alpha k(S_Y, S_Y))^-1 sum_a c(a) a^T

minimise ``sum_a ||a - B^T c(a)||^2 + alpha tr(B^T k(S_Y, S_Y) B)`` over all the
rows, and equal scikit-learn's map when Y is all the data. Each worker sends
its two sums, ``sum c c^T`` (|Y|(|Y|+1)/2 words, packed) and ``sum c a^T``
(|Y| d words), in one round ('pre-image: sums over rows', :func:`preimage_round`);
the workers already hold the model, so they compute ``S_Y`` and the scores
themselves and only the kernel's parameters travel down. The master solves
one |Y| x |Y| system (O(|Y|^3 + |Y|^2 d) time).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from kernelscale.arrays import rows, to_host
from kernelscale.kernels import DEFAULT_CHUNK_SIZE, Kernel
from kernelscale.linalg import pack_symmetric, unpack_symmetric, whitening
from kernelscale.runtime import Cluster, Tagged
from kernelscale.runtime.chunks import map_chunks
from kernelscale.runtime.steps import worker_step

#: The round of :func:`preimage_round` (in the ledger and the forecast).
PREIMAGE_ROUND = "pre-image: sums over rows"


def fit_preimage(kernel: Kernel, scores: np.ndarray, points, alpha: float,
                 chunk_size: int = DEFAULT_CHUNK_SIZE) -> np.ndarray:
    """``B = (k(S, S) + alpha I)^-1 X``: scikit-learn's coefficients (n_points, n_features)."""
    K = kernel(scores, scores, chunk_size=chunk_size)
    K.flat[:: K.shape[0] + 1] += alpha
    targets = points.toarray() if sp.issparse(points) else np.asarray(points, dtype=np.float64)
    return _solve(K, targets)


def _solve(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """``A^-1 B`` for a symmetric ``A``: Cholesky, else the symmetric solver (a kernel
    that is not positive definite, such as sigmoid), else least squares (singular)."""
    for assume_a in ("pos", "sym"):
        try:
            return sla.solve(A, B, assume_a=assume_a)
        except (sla.LinAlgError, ValueError):
            continue
    return sla.lstsq(A, B)[0]


def apply_preimage(kernel: Kernel, scores: np.ndarray, coef: np.ndarray, Z,
                   chunk_size: int = DEFAULT_CHUNK_SIZE) -> np.ndarray:
    """``k(Z, S) B``: points in input space for the scores ``Z``."""
    return kernel(Z, scores, chunk_size=chunk_size) @ coef


def _landmark_scores(state, kernel: Kernel) -> np.ndarray:
    """``transform(Y)`` from the model the worker holds (Y, C and the centre m)."""
    block = kernel(state.landmarks, state.landmarks)
    if state.center is not None:
        block -= state.center
    return block @ state.coef


@worker_step(discloses="aggregates")
def preimage_sums_step(state, message):
    """Worker: ``sum_a c(a) c(a)^T`` (packed) and ``sum_a c(a) a^T`` over its rows.

    ``c(a) = k(S_Y, transform(a))``, with ``S_Y = transform(Y)``, both from the
    model the worker keeps since the fit's last round (or the one in the
    message, for a model the workers were never sent).
    """
    config = message["model"]
    if "landmarks" in config:  # a model the workers do not hold (batch KPCA of given Y)
        state.landmarks, state.coef, state.center = (config["landmarks"], config["coef"],
                                                     config["center"])
    if getattr(state, "coef", None) is None or getattr(state, "landmarks", None) is None:
        raise RuntimeError("The pre-image round needs the fitted model on the worker "
                           "(its landmarks and coefficients); this worker holds none.")
    kernel = Kernel.from_dict(config["kernel"])
    centres = _landmark_scores(state, kernel)
    X = state.data
    n_y = centres.shape[0]
    gram, cross = np.zeros((n_y, n_y)), np.zeros((n_y, X.shape[1]))

    def chunk_sums(start, stop):
        block = to_host(rows(X, start, stop))
        K = kernel(block, state.landmarks)
        if state.center is not None:
            K -= state.center
        C = kernel(K @ state.coef, centres)  # c(a) for each row a, as rows
        return C.T @ C, np.asarray((block.T @ C).T)  # sparse rows: a dense |Y| x d product

    for *_, (chunk_gram, chunk_cross) in map_chunks(chunk_sums, X.shape[0],
                                                     config["chunk_size"]):
        gram += chunk_gram
        cross += chunk_cross
    return Tagged(sketch=[pack_symmetric(gram), cross])


def preimage_round(cluster: Cluster, model, alpha: float, chunk_size: int = DEFAULT_CHUNK_SIZE,
                   send_model: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """The pre-image map learnt on every worker's rows: ``(S_Y, B)``.

    One round ('pre-image: sums over rows'): the kernel's parameters and the
    chunk size down (the workers hold the model since the fit's last round;
    with ``send_model`` the model's Y, C and centre go down too, counted as
    ``model``), each worker's two sums up (``sketch``: |Y|(|Y|+1)/2 + |Y| d
    words). ``inverse_transform(Z) = k(Z, S_Y) B``.

    Parameters
    ----------
    cluster : Cluster
        The fit's workers.
    model : KernelPCAModel
        The fitted model, with landmarks Y.
    alpha : float
        The ridge (scikit-learn's ``alpha``).
    chunk_size : int
        Rows a worker processes at once.
    send_model : bool
        Send Y, C and the centre with the request.

    Returns
    -------
    scores : ndarray of shape (n_landmarks, n_components)
        ``S_Y = transform(Y)``, the map's centres (``X_transformed_fit_``).
    coef : ndarray of shape (n_landmarks, n_features)
        ``B`` (``dual_coef_``).
    """
    kernel = model.kernel
    config = {"kernel": kernel.to_dict(), "chunk_size": int(chunk_size)}
    if send_model:
        config.update(landmarks=model.landmarks, coef=model.coef, center=model.center)
    total = cluster.broadcast_map(preimage_sums_step, Tagged(model=config),
                                  round=PREIMAGE_ROUND, reply_kind="sketch", reduce="sum")
    packed, cross = total["sketch"]
    scores = model.transform(model.landmarks, chunk_size=chunk_size)
    return scores, ridge_coefficients(unpack_symmetric(packed, scores.shape[0]), cross,
                                      kernel(scores, scores), alpha)


def ridge_coefficients(gram: np.ndarray, cross: np.ndarray, centres_kernel: np.ndarray,
                       alpha: float, rtol: float = 1e-12) -> np.ndarray:
    """``B`` minimising ``||X - C B||^2 + alpha tr(B^T K B)`` from ``C^T C``, ``C^T X`` and K.

    Solved in the Nystroem coordinates of the centres, ``Phi = C F`` with
    ``F^T K F = I`` on K's numerical range (:func:`~kernelscale.linalg.whitening`):
    ``W = (F^T C^T C F + alpha I)^-1 F^T C^T X`` and ``B = F W``. The same minimiser
    as ``(C^T C + alpha K)^-1 C^T X``, without squaring K's condition number (an RBF
    kernel matrix of many scores is numerically singular).
    """
    F = whitening(centres_kernel, rtol)
    system = F.T @ gram @ F
    system = (system + system.T) / 2.0
    system.flat[:: system.shape[0] + 1] += alpha
    return F @ _solve(system, F.T @ cross)
