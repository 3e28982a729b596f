"""Can a uniform pilot tell spam from the sets where uniform samples win? (issue 20)

The word budget's pilot rule (:mod:`kernelscale.horizontal.pilot`) leaves the
ridge sampler for uniform samples where the pilot's energy is spread (its
flatness phi < 0.33). With the RBF kernel at 0.2 x the median distance that is
right on digits, letter, satellite and insurance, where uniform + batch KPCA is
best at 3e5 and 1e6 words, and wrong on spam, where disKPCA (ridge) is best
and uniform + batch loses by 1.7-2x (``results/budget/summary.md``). This
script measures, on pilots of the sizes the budget draws there (45 points at
3e5 words, 93 at 1e6: a quarter of the ridge plan's |Y|), the signals a rule
could read, 20 pilots each:

* ``phi``: the rule's flatness;
* ``leverage cv``: the coefficient of variation of the pilot's own ridge
  leverage scores, at the ridge of :func:`kernelscale.horizontal.samplers.pilot_ridge`;
* ``batch loss``: split the pilot in halves A and B; one minus the energy of
  B captured by A's top-j kernel principal components over the energy of B
  captured by the best j directions in span(phi(A)): what batch KPCA loses by
  estimating the subspace from its sample rather than from all rows;
* ``l1, l5, l10``: the pilot's 1st, 5th and 10th centred eigenvalues over
  their mean;
* ``residual spread``: not a statistic of the pilot but of every row, what
  the ridge sampler's first round computes: each row's ridge residual r to
  span(phi(P)) (:func:`kernelscale.horizontal.sampling.ridge_residual_step`,
  at the pilot's ridge), and their effective share (sum r)^2 / (n sum r^2),
  1 when every row weighs the same and small when a few rows hold the
  residual. A reply of sum r^2 beside sum r (one word more per worker) would
  carry it to the master.

and, for spam and letter (the sets with the most duplicated rows: a point of
spam has 69 copies), the excess of batch KPCA on a uniform sample of distinct
points, plain and weighted by the copies: a uniform sample holds each distinct
point once, which under-weights duplicated rows in batch KPCA (disLR projects
every row and is not affected).

    python benchmarks/budget_pilot_signals.py     # about a minute

Writes ``benchmarks/results/budget/pilot_signals.md``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from kernelscale.bench.settings import load_set, make_setting_kernel
from kernelscale.horizontal.pilot import flatness
from kernelscale.horizontal.samplers import pilot_ridge
from kernelscale.linalg import ridge_whitening

OUT = Path(__file__).parent / "results" / "budget"
DATASETS = ("spam", "digits", "letter", "satellite", "insurance")
K = 10
PILOTS = (45, 93)
N_PILOTS = 20


def centred(K: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """``K`` centred in feature space (by the weighted mean when ``weights`` are given)."""
    p = np.full(K.shape[0], 1.0 / K.shape[0]) if weights is None else weights / weights.sum()
    m = K @ p
    return K - m[None, :] - m[:, None] + p @ m


def batch_loss(kernel, P: np.ndarray, rng) -> float:
    """1 - (B's energy in A's top-j components) / (B's energy in the best j of span A)."""
    order = rng.permutation(P.shape[0])
    A, B = P[order[: P.shape[0] // 2]], P[order[P.shape[0] // 2:]]
    j = min(K, A.shape[0] // 3)
    w, V = np.linalg.eigh(centred(kernel(A, A)))
    keep = w > 1e-10 * w.max()
    w, V = w[keep][::-1], V[:, keep][:, ::-1]
    KBA = kernel(B, A)
    KBA = KBA - KBA.mean(axis=0)[None, :] - KBA.mean(axis=1)[:, None] + KBA.mean()
    Z = KBA @ (V / np.sqrt(w))  # B in an orthonormal basis of span(phi(A)), A's order
    best = np.sum(np.linalg.svd(Z, compute_uv=False)[:j] ** 2)
    return float(1.0 - np.sum(Z[:, :j] ** 2) / best)


def residual_spread(kernel, X: np.ndarray, P: np.ndarray, mu: float) -> float:
    """(sum r)^2 / (n sum r^2) of the rows' ridge residuals r to span(phi(P)) at ridge mu."""
    r = np.maximum(kernel.diag(X) - np.sum((kernel(X, P) @ ridge_whitening(kernel(P, P), mu))
                                           ** 2, axis=1), 0.0)
    return float(r.sum() ** 2 / (X.shape[0] * np.sum(r ** 2)))


def pilot_signals(kernel, X: np.ndarray, P: np.ndarray, rng) -> list[float]:
    Kp = kernel(P, P)
    mu = pilot_ridge(kernel, P, K, True)
    leverage = np.diag(np.linalg.solve(Kp + mu * np.eye(P.shape[0]), Kp))
    w = np.maximum(np.linalg.eigvalsh(centred(Kp)), 0.0)[::-1]
    mean = w.sum() / P.shape[0]
    return [flatness(Kp, K), leverage.std() / leverage.mean(), batch_loss(kernel, P, rng),
            w[0] / mean, w[4] / mean, w[9] / mean, residual_spread(kernel, X, P, mu)]


def weighted_batch_excess(kernel, X, S, weights, opt, trace) -> float:
    """Excess on X of the top-k centred KPCA of S weighted by ``weights``."""
    p = weights / weights.sum()
    KS = kernel(S, S)
    KSc = centred(KS, weights)
    root = np.sqrt(p)
    ev, V = np.linalg.eigh(root[:, None] * KSc * root[None, :])
    C = root[:, None] * V[:, ::-1][:, :K] / np.sqrt(np.maximum(ev[::-1][:K], 1e-300))
    KXS = kernel(X, S)
    mean_X = KXS.mean(axis=0)  # <mu_X, phi(s)>
    inner = KXS - (KXS @ p)[:, None] - mean_X[None, :] + mean_X @ p  # <phi(x)-mu_X, phi(s)-mu_S>
    Z = inner @ C
    captured = np.trace(np.linalg.pinv(C.T @ KSc @ C) @ (Z.T @ Z))
    return float((trace - captured - opt) / (trace - opt))


def duplicates_rows(name: str, X: np.ndarray, kernel) -> list[str]:
    Kc = centred(kernel(X, X))
    w = np.linalg.eigvalsh(Kc)[::-1]
    trace, opt = float(w.sum()), float(w[K:].sum())
    _, inverse, counts = np.unique(X, axis=0, return_inverse=True, return_counts=True)
    inverse = inverse.ravel()
    rows = []
    for size in (400, 1332):
        excess = {"plain": [], "copies": [], "inclusion": []}
        for seed in range(3):
            order = np.random.default_rng(seed).permutation(X.shape[0])
            _, first = np.unique(inverse[order], return_index=True)
            positions = np.sort(first)[:size]
            chosen = order[positions]  # the first `size` distinct points of a row permutation
            copies = counts[inverse[chosen]].astype(float)
            rate = (positions[-1] + 1) / X.shape[0]  # rows passed over: a row sample at `rate`
            weights = {"plain": np.ones(size), "copies": copies,
                       # a point with c copies is in the sample with probability
                       # 1 - (1 - rate)^c: the Horvitz-Thompson weight c / that
                       "inclusion": copies / (1.0 - (1.0 - rate) ** copies)}
            for name_, w in weights.items():
                excess[name_].append(weighted_batch_excess(kernel, X, X[chosen], w, opt, trace))
        rows.append(f"| {name} | {size:,} | " + " | ".join(
            f"{np.mean(v):.3f}" for v in excess.values()) + " |")
    return rows


def main() -> int:
    lines = ["# Pilot signals: spam against the sets where uniform samples win (issue 20)", "",
             "Written by `benchmarks/budget_pilot_signals.py`. Medians over 20 uniform pilots "
             "(10th-90th percentile in brackets), RBF kernel at 0.2 and 1.0 x the median "
             "distance, centred, k = 10. At RBF 0.2 the best method at 3e5 and 1e6 words "
             "(`summary.md`) is disKPCA (ridge) on spam and uniform + batch on the other sets.",
             "", "| set | kernel | pilot | phi | leverage cv | batch loss | l1 | l5 | l10 | "
             "residual spread |", "|---|---|---|---|---|---|---|---|---|---|"]
    for name in DATASETS:
        X = load_set(name)
        for which in ("rbf0.2", "rbf1.0"):
            kernel = make_setting_kernel(X, which)
            for size in PILOTS:
                values = np.array([
                    pilot_signals(kernel, X, X[np.random.default_rng(s).choice(
                        X.shape[0], size, replace=False)], np.random.default_rng(100 + s))
                    for s in range(N_PILOTS)])
                cells = [f"{np.median(v):.2f} [{np.percentile(v, 10):.2f}, "
                         f"{np.percentile(v, 90):.2f}]" for v in values.T]
                lines.append(f"| {name} | {which} | {size} | " + " | ".join(cells) + " |")
    lines += ["", "Batch KPCA on distinct uniform points (the first ones of a random order of "
              "the rows), plain, weighted by each point's copies c in the data, and weighted "
              "by c over its inclusion probability (RBF 0.2 x median, centred, mean excess "
              "over 3 samples; letter on 6,000 of its rows):", "",
              "| set | points | plain | copies | copies / inclusion |", "|---|---|---|---|---|"]
    for name in ("spam", "letter"):
        X = load_set(name)
        if name == "letter":  # 6,000 rows keep the exact reference small
            X = X[np.random.default_rng(0).permutation(X.shape[0])[:6000]]
        lines += duplicates_rows(name, X, make_setting_kernel(X, "rbf0.2"))
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "pilot_signals.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
