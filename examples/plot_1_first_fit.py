"""
A first fit and its ledger
==========================

:class:`~kernelscale.horizontal.DistributedKernelPCA` is scikit-learn's ``KernelPCA``
for rows spread over several servers. Here the 1,797 bundled digits are split over five
simulated workers of very different sizes (a power law, as in paper 001), the estimator
learns ten kernel principal components, and its ledger shows every word the protocol
sent: per round, per direction and per kind of message.
"""

import textwrap

import matplotlib.pyplot as plt

from kernelscale import DistributedKernelPCA, median_heuristic
from kernelscale.datasets import load_digits_standardized

X, y = load_digits_standardized()
# The papers' narrow bandwidth: 0.2 x the median distance between points.
sigma = median_heuristic(X, scale=0.2, random_state=0)
params = dict(
    n_components=10,
    kernel="rbf",
    gamma=1 / (2 * sigma**2),
    n_workers=5,
    partition="power_law",
    n_landmarks=200,
    random_state=0,
)
kpca = DistributedKernelPCA(**params).fit(X)
Z = kpca.transform(X)
print(Z.shape)

# %%
# What ran, and why
# -----------------
# With no ``method=``, the estimator does not run disKPCA blindly: it first draws a
# small uniform *pilot* of points and looks at their kernel matrix. Where the energy is
# spread over many directions (as with this narrow RBF bandwidth), chosen points buy
# little and it may switch to a uniform baseline that spends the same words on more
# points. ``method_`` says which protocol ran, and ``budget_plan_.reason`` why.
print("method_:", kpca.method_)
plan = getattr(kpca, "budget_plan_", None)
reason = plan.reason if plan is not None else "method given explicitly"
print(textwrap.fill("reason: " + reason, width=80, subsequent_indent="  "))

# %%
# The ledger
# ----------
# Every message of the fit is counted in words (one float or one index is one word),
# with its round, direction (``down``: master to workers, ``up``: workers to master)
# and kind. ``raw_points`` are actual input rows. Which rows travel depends on the
# method that ran: a uniform + batch fit ships its uniform sample up to the master and,
# with the model, back down to every worker; disKPCA ships only its sampled landmarks.
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
# ``(err - opt) / (trace - opt)`` is the share of the energy that the best rank-10
# subspace captures which this fit misses (0 is exact kernel PCA).
quality = kpca.approximation_error(X)
print(quality)
best_share = (quality["trace"] - quality["opt"]) / quality["trace"]
print(
    f"the best rank-10 subspace captures {best_share:.1%} of the trace;"
    f" this fit misses {quality['excess_ratio']:.1%} of that"
)

# %%
# The excess is large because the bandwidth is narrow (0.2 x the median distance, the
# papers' setting): every point is almost its own direction, the top ten components hold
# only a few percent of the total energy, and a sample of a few hundred of 1,797 points
# spans only part of them. A wider bandwidth, or more landmarks, lowers it (see the
# next example, and :doc:`/methods`).
#
# disKPCA's own ledger
# --------------------
# To see what disKPCA itself sends, ask for it. Its only raw rows are its sampled
# landmarks: each goes up once from the worker that holds it, then down to every
# worker for the disLR round. The ridge rounds and disLR send kernel sums
# (``sketch``), never rows.
diskpca = DistributedKernelPCA(method="diskpca", **params).fit(X)
d = X.shape[1]
n_landmarks = diskpca.landmarks_.shape[0]
raw = diskpca.communication_.total_words("fit", kind="raw_points")
print(diskpca.communication_.summary(times=False))
print(
    f"raw words {raw:,} = {n_landmarks} landmarks x {d} features"
    " x (1 up + 5 down):",
    raw == n_landmarks * d * (1 + 5),
)
excess = diskpca.approximation_error(X)["excess_ratio"]
words = diskpca.communication_.total_words("fit")
print(
    f"excess: {kpca.method_} {quality['excess_ratio']:.3f}"
    f" for {ledger.total_words('fit'):,} words;"
    f" diskpca {excess:.3f} for {words:,} words"
)

# %%
# Compare the two excesses: at this narrow bandwidth chosen landmarks buy little over a
# uniform sample for the same words, which is why the default fit looks at a pilot
# before it spends (:doc:`/budget`).
#
# The first two components of the first fit, coloured by digit.
fig, ax = plt.subplots(figsize=(6, 5))
points = ax.scatter(Z[:, 0], Z[:, 1], c=y, cmap="tab10", s=8)
fig.colorbar(points, ax=ax, label="digit")
ax.set_xlabel("component 1")
ax.set_ylabel("component 2")
ax.set_title("digits on the first two distributed kernel PCs")
plt.show()
