"""
Error against words on a real data set
======================================

Comparing distributed methods at an equal number of landmarks hides what they cost:
shipping |Y| raw points to the master costs about |Y| d words, while disLR's Gram
message costs |Y| (|Y| + 1) / 2 words per worker. So the library compares methods as
curves of error against the words each one sent, each method sweeping its own |Y|.

Here: the bundled digits (1,797 x 64, standardised), 5 power-law workers, k = 10,
uncentred as in paper 001, with the polynomial kernel (where a few points carry the
energy and disKPCA's sampling finds them) and a narrow RBF kernel (where the energy is
spread and shipping more uniform points wins). The error is the excess
``(err - opt) / (trace - opt)``: 0 is exact kernel PCA. The full study, on four real sets
and three kernels with five seeds, is ``kernelscale bench`` (see the user guide).
"""

import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter

from kernelscale import DistributedKernelPCA, make_kernel, median_heuristic
from kernelscale.datasets import load_digits_standardized
from kernelscale.metrics import exact_kpca_reference, excess_energy_ratio

X, y = load_digits_standardized()
sigma = median_heuristic(X, scale=0.2, random_state=0)
kernels = {
    "polynomial, q = 4": dict(
        kernel="poly", degree=4, gamma=1 / X.shape[1], coef0=1.0
    ),
    "RBF, sigma = 0.2 x median": dict(kernel="rbf", gamma=1 / (2 * sigma**2)),
}
# Each method sweeps its own |Y| so that all cover the same words: a uniform
# sample shipped to the master (uniform + batch) is cheap per point, so it
# takes more of them.
methods = {
    "diskpca": ("disKPCA (ridge sampler)", "o-", [25, 50, 100, 200, 400]),
    "uniform_dislr": ("uniform + disLR", "s--", [25, 50, 100, 200, 400]),
    "uniform_batch": ("uniform + batch", "^:", [50, 100, 200, 400, 800, 1600]),
}

# Each panel has its own error axis: the polynomial kernel's excesses span several
# decades, the RBF kernel's less than one, which a shared axis would flatten.
fig, axes = plt.subplots(1, 2, figsize=(10, 4))
for ax, (title, params) in zip(axes, kernels.items(), strict=True):
    ref = exact_kpca_reference(
        X,
        make_kernel(
            params["kernel"],
            **{key: value for key, value in params.items() if key != "kernel"},
        ),
        10,
    )
    for method, (label, style, landmarks) in methods.items():
        words, excess = [], []
        for m in landmarks:
            kpca = DistributedKernelPCA(
                n_components=10,
                method=method,
                n_landmarks=m,
                center=False,
                random_state=0,
                **params,
            ).fit(X)
            error = kpca.approximation_error(X, reference=False)["error"]
            words.append(kpca.communication_.total_words("fit"))
            excess.append(excess_energy_ratio(error, ref["opt"], ref["trace"]))
        ax.plot(words, excess, style, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1e4, 1e6)
    ax.xaxis.set_minor_formatter(NullFormatter())  # decades only: no overlap
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("fit words (both directions)")
    ax.set_ylabel("excess (err - opt) / (trace - opt)")
    ax.set_title(title)
axes[0].legend()
fig.suptitle("digits, 5 power-law workers, k = 10, one seed")
fig.tight_layout()
plt.show()
