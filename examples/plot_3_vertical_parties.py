"""
Vertical parties: each holds some features
==========================================

In the vertical setting every party holds the *same* samples but a different block of
features (a bank and a shop describing the same customers). The one-shot algorithm of
paper 002 (:class:`~kernelscale.vertical.VerticalKernelPCA`) has each party send the
top eigenpairs of its own kernel once; no input row leaves a party. The more
eigenpairs D a party sends, the closer the fused components come to kernel PCA of the
whole table.
"""

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import NullFormatter
from sklearn.decomposition import KernelPCA

from kernelscale import VerticalKernelPCA
from kernelscale.datasets import load_digits_standardized
from kernelscale.metrics import sin_theta_distance

X, y = load_digits_standardized()
X = X[:600]
gamma = 1 / X.shape[1]
blocks = np.array_split(
    np.arange(X.shape[1]), 4
)  # 4 parties, 16 features each
parties = [X[:, b] for b in blocks]

reference = (
    KernelPCA(n_components=5, kernel="rbf", gamma=gamma).fit(X).eigenvectors_
)

# %%
# One fit per number of local eigenpairs D, the same four parties each time.
local_sizes = [6, 10, 20, 40, 80]
distances, words = [], []
for D in local_sizes:
    est = VerticalKernelPCA(
        n_components=5, n_local_components=D, kernel="rbf", gamma=gamma
    ).fit(parties)
    distances.append(sin_theta_distance(est.eigenvectors_, reference))
    words.append(est.communication_.total_words("fit"))
    print(f"D = {D:3d}: {words[-1]:7,d} words, sin theta {distances[-1]:.3g}")
print(
    "no raw rows sent:",
    est.communication_.total_words("fit", kind="raw_points") == 0,
)

fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(words, distances, marker="o")
for D, w, s in zip(local_sizes, words, distances, strict=True):
    ax.annotate(f"D = {D}", (w, s), textcoords="offset points", xytext=(5, 5))
ax.set_xscale("log")
ax.xaxis.set_minor_formatter(NullFormatter())
ax.set_yscale("log")
ax.set_xlabel("words sent (all parties, once)")
ax.set_ylabel("sin theta distance to central KPCA")
ax.set_title("4 parties, 600 digits, RBF, k = 5")
ax.margins(x=0.15, y=0.15)  # room for the D = ... labels
fig.tight_layout()  # keeps the axis labels inside the figure
plt.show()
