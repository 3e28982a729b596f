"""What a word budget measures before it spends the rest: candidates' energy on every row.

The master and the workers hold landmarks S (a budgeted fit's uniform pilot P,
then the ridge rounds' points). Given the workers' summed Gram
``G = sum_i k(S, A_i) k(A_i, S)``, the row sums ``r = sum_a k(S, a)`` and n, the
master knows, for any subspace ``V = phi(S) C`` of span(phi(S)), the energy it
captures over every row of every worker::

    captured(C) = tr(C^T (G - n m m^T) C),   m = r / n    (centred fits; uncentred: G),

exactly: disLR (Algorithm 3 of paper 001) is the C of orthonormal columns in
span(phi(S)) that maximises it. A budgeted fit sends these sums anyway (they are
disLR's message, sent in parts as the landmarks arrive,
:mod:`kernelscale.horizontal.measured`), so the master can compare candidates
built from subsets of S on all the data, not on a sample: here, the ridge
rounds' points against as many uniform ones drawn in the same round
(:func:`ridge_against_uniform`).

A larger captured energy is a smaller error ``trace - captured``; no optimum
is needed to compare candidates.
"""

from __future__ import annotations

import numpy as np

from kernelscale.kernels import Kernel
from kernelscale.linalg import whitening
from kernelscale.runtime.cluster import one_blas_thread

__all__ = ["SpanGram", "ridge_against_uniform"]


class SpanGram:
    """The master's view of span(phi(S)) over every row: ``K_SS`` and the centred Gram.

    Parameters
    ----------
    S : ndarray or CSR matrix of shape (|S|, d)
        The landmarks, in the order the workers hold them.
    kernel : Kernel
    gram : ndarray of shape (|S|, |S|)
        ``sum_i k(S, A_i) k(A_i, S)`` over every worker.
    row_sums : ndarray of shape (|S|,) or None
        ``sum_a k(S, a)`` over every row; None for an uncentred fit.
    n_samples : int
        n, the rows summed.
    """

    def __init__(self, S, kernel: Kernel, gram: np.ndarray, row_sums, n_samples: int):
        self.S, self.kernel = S, kernel
        self.K = kernel(S, S, dtype=np.float64)
        self.center = row_sums is not None
        self.G = np.array(gram, dtype=np.float64)
        if self.center:
            mean = np.asarray(row_sums, dtype=np.float64) / n_samples
            self.G -= n_samples * np.outer(mean, mean)
        self.G = (self.G + self.G.T) / 2.0

    def __len__(self) -> int:
        return self.K.shape[0]

    def captured(self, idx, coef: np.ndarray) -> float:
        """The energy over every row of ``phi(S[idx]) coef`` (columns orthonormal)."""
        G = self.G[np.ix_(idx, idx)]
        return float(np.einsum("ij,ij->", coef, G @ coef))

    def dislr(self, idx, n_components: int) -> float:
        """The energy disLR on the landmarks ``S[idx]`` captures: its top-k eigenvalues."""
        idx = np.asarray(idx)
        with one_blas_thread():
            F = whitening(self.K[np.ix_(idx, idx)])
            if F.shape[1] == 0:
                return 0.0
            w = np.linalg.eigvalsh(F.T @ self.G[np.ix_(idx, idx)] @ F)
        return float(np.maximum(w[::-1][:n_components], 0.0).sum())


def ridge_against_uniform(span: SpanGram, base, ridge, uniform, n_components: int) -> float:
    """What the ridge rounds' points add over as many uniform ones: the ratio of the gains.

    ``base``, ``ridge``, ``uniform``: indices into S of the landmarks held before
    a ridge round, the points it drew by the ridge residual and those it drew
    uniformly (its defensive share). The larger group is cut to the smaller's
    size (its first points). Returns ``gain(ridge) / gain(uniform)``, each the
    energy disLR captures with ``base`` and the group over that with ``base``
    alone: above 1 where the ridge residual chose better points than chance.
    """
    size = min(len(ridge), len(uniform))
    base = list(base)
    before = span.dislr(base, n_components)
    gain_ridge = span.dislr(base + list(ridge)[:size], n_components) - before
    gain_uniform = span.dislr(base + list(uniform)[:size], n_components) - before
    if gain_uniform <= 0:
        return np.inf if gain_ridge > 0 else 1.0
    return float(gain_ridge / gain_uniform)
