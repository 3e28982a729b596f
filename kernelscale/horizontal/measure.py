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
built from subsets of S on all the data, not on a sample:

* uniform + disLR at any |Y| <= |S| (disLR on a uniform subset of P), and what
  batch KPCA makes of the same points (:func:`batch_exchange_rate`: how many
  disLR landmarks batch KPCA's points are worth);
* the ridge rounds' points against as many uniform ones drawn in the same
  round (:func:`ridge_against_uniform`).

A larger captured energy is a smaller error ``trace - captured``; no optimum
is needed to compare candidates.
"""

from __future__ import annotations

import numpy as np

from kernelscale.kernels import Kernel
from kernelscale.linalg import whitening
from kernelscale.runtime.cluster import one_blas_thread

__all__ = ["SpanGram", "batch_exchange_rate", "ridge_against_uniform"]

#: The disLR sizes at which :func:`batch_exchange_rate` measures uniform + disLR's energy.
CURVE_POINTS = 8
#: Random subsets of P averaged at each size.
CURVE_REPEATS = 6


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

    def batch(self, idx, n_components: int) -> float:
        """The energy batch KPCA of the points ``S[idx]`` captures over every row.

        The components are :func:`~kernelscale.horizontal.baselines.batch_kpca`'s of
        those points alone (unweighted), centred on their own mean where the fit is.
        """
        from kernelscale.horizontal.baselines import batch_kpca

        idx = np.asarray(idx)
        points = self.S[idx]
        with one_blas_thread(), np.errstate(all="ignore"):
            import warnings

            with warnings.catch_warnings():  # a rank below k: zero components, said elsewhere
                warnings.simplefilter("ignore", UserWarning)
                model = batch_kpca(points, self.kernel, n_components, self.center)
        return self.captured(idx, model.coef)


def _disLR_curve(span: SpanGram, sizes: np.ndarray, n_components: int, rng) -> np.ndarray:
    """disLR's mean energy on uniform subsets of S of each size (nested, several draws),
    made non-decreasing in the size (a larger uniform sample spans more on average)."""
    p = len(span)
    total = np.zeros(sizes.size)
    for _ in range(CURVE_REPEATS):
        order = rng.permutation(p)
        total += [span.dislr(order[:m], n_components) for m in sizes]
    return np.maximum.accumulate(total / CURVE_REPEATS)


def batch_exchange_rate(span: SpanGram, n_components: int, rng) -> float:
    """How many points of a uniform sample batch KPCA needs per landmark of uniform + disLR.

    Batch KPCA of all of S (a uniform sample of p points) captures some energy
    over every row; uniform + disLR captures as much with m* of them (m* <= p:
    disLR is the best subspace in their span). The rate is ``p / m*``: uniform +
    batch KPCA beats uniform + disLR at equal words where it ships more than
    that many times disLR's landmarks. m* is read off disLR's energy on random
    subsets of S of sizes k to p (:data:`CURVE_POINTS` sizes, spaced
    geometrically, :data:`CURVE_REPEATS` draws each), interpolated in log m;
    where batch captures less than disLR with k points, ``p / k`` (a lower bound).
    """
    p = len(span)
    k = int(n_components)
    if p <= k + 1:
        raise ValueError(f"the exchange rate needs more than k + 1 = {k + 1} points, got {p}.")
    sizes = np.unique(np.round(np.geomspace(k, p, CURVE_POINTS)).astype(int))
    curve = _disLR_curve(span, sizes, k, rng)
    batch = span.batch(np.arange(p), k)
    if batch <= curve[0]:
        return p / sizes[0]
    if batch >= curve[-1]:
        return 1.0
    j = int(np.searchsorted(curve, batch))  # curve[j - 1] < batch <= curve[j]
    low, high = curve[j - 1], curve[j]
    share = (batch - low) / (high - low) if high > low else 1.0
    m_star = np.exp(np.log(sizes[j - 1]) + share * (np.log(sizes[j]) - np.log(sizes[j - 1])))
    return float(p / m_star)


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
