"""
A first fit and its ledger
==========================

:class:`~kernelscale.horizontal.DistributedKernelPCA` is scikit-learn's ``KernelPCA``
for rows spread over several servers. Here the 1,797 bundled digits are split over five
simulated workers of very different sizes (a power law, as in paper 001), the estimator
learns ten kernel principal components, and its ledger shows every word the protocol
sent: per round, per direction and per kind of message.
"""

import matplotlib.pyplot as plt

from kernelscale import DistributedKernelPCA, median_heuristic
from kernelscale.datasets import load_digits_standardized

X, y = load_digits_standardized()
sigma = median_heuristic(
    X, scale=0.2, random_state=0
)  # the papers' bandwidth rule
kpca = DistributedKernelPCA(
    n_components=10,
    kernel="rbf",
    gamma=1 / (2 * sigma**2),
    n_workers=5,
    partition="power_law",
    n_landmarks=200,
    random_state=0,
).fit(X)
Z = kpca.transform(X)
print(Z.shape)

# %%
# The ledger
# ----------
# Every message of the fit is counted in words (one float or one index is one word),
# with its round, direction and kind. ``raw_points`` are actual input rows: disKPCA
# sends exactly its sampled landmarks and nothing else raw.
ledger = kpca.communication_
print(ledger.summary(times=False))
print("fit words, both directions:", ledger.total_words("fit"))
print(
    "of which raw input rows:   ", ledger.total_words("fit", kind="raw_points")
)

# %%
# How good is it?
# ---------------
# ``approximation_error`` measures the low-rank error through the same workers, under
# a separate phase (``evaluate``) so it never inflates the fit's cost. The *excess*
# ``(err - opt) / (trace - opt)`` is the share of the best rank-10 subspace's energy
# that the fit misses (0 is the exact kernel PCA).
print(kpca.approximation_error(X))

# %%
# The first two components, coloured by digit.
fig, ax = plt.subplots(figsize=(6, 5))
points = ax.scatter(Z[:, 0], Z[:, 1], c=y, cmap="tab10", s=8)
fig.colorbar(points, ax=ax, label="digit")
ax.set_xlabel("component 1")
ax.set_ylabel("component 2")
ax.set_title("digits on the first two distributed kernel PCs")
plt.show()
