"""
A stream: partial_fit, and merging sketches
===========================================

:class:`~kernelscale.streaming.StreamingKernelPCA` computes kernel principal components
in one pass (SKPCA of paper 004: random Fourier features fed into a Frequent Directions
sketch), in memory that does not grow with the stream. Feed it batch by batch with
``partial_fit``. Sketches are mergeable: two sites can sketch their own streams and
send only the sketches.
"""

import matplotlib.pyplot as plt
import numpy as np

from kernelscale import StreamingKernelPCA
from kernelscale.datasets import load_digits_standardized
from kernelscale.streaming import SKPCA

X, y = load_digits_standardized()
gamma = 1 / (2 * X.shape[1])

est = StreamingKernelPCA(
    n_components=5,
    n_random_features=1000,
    sketch_size=20,
    gamma=gamma,
    random_state=0,
)
for batch in np.array_split(X, 20):  # any iterable of (rows, d) arrays
    est.partial_fit(batch)
print(
    est.n_samples_seen_,
    "points seen; the model holds",
    est.space_words_,
    "words",
)

# %%
# Any batch split gives the result of ``fit`` on the whole stream:
whole = StreamingKernelPCA(**est.get_params()).fit(X)
print(
    "same as fit():",
    np.allclose(np.abs(est.transform(X)), np.abs(whole.transform(X))),
)

# %%
# Two sites, one merged sketch
# ----------------------------
# Both sketches must use the same random features: the same seed. Each site sketches
# its own half; merging keeps the Frequent Directions bound for the union.
site_a, site_b = (
    SKPCA(X.shape[1], n_random_features=1000, sketch_size=20, gamma=gamma, seed=7)
    for _ in range(2)
)
site_a.partial_fit(X[::2])
site_b.partial_fit(X[1::2])
merged = site_a.merge(site_b)
Z = merged.transform(X, 2)

fig, ax = plt.subplots(figsize=(6, 5))
points = ax.scatter(Z[:, 0], Z[:, 1], c=y, cmap="tab10", s=8)
fig.colorbar(points, ax=ax, label="digit")
ax.set_xlabel("component 1")
ax.set_ylabel("component 2")
ax.set_title("two merged SKPCA sketches (uncentred, as in paper 004)")
plt.show()
