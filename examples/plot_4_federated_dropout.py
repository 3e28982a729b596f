"""
Federated kernel k-means with dropout
=====================================

:class:`~kernelscale.federated.FederatedKernelKMeans` clusters data that stays on its
owners' devices (paper 003): fresh random features each iteration, an eigenproblem
whose size never depends on the number of points (each client sends its share of it
once per iteration: one round), then a coreset k-means. No client sends a data row.
Devices drop out: ``dropout=p`` lets a random fraction p of the clients miss each
round, and the server rescales what it got from the others.
"""

import matplotlib.pyplot as plt

from kernelscale import FederatedKernelKMeans
from kernelscale.datasets import load_digits_standardized
from kernelscale.metrics import nmi

X, y = load_digits_standardized()

rates = [0.0, 0.2, 0.4, 0.6]
scores, uploads = [], []
for p in rates:
    fk = FederatedKernelKMeans(
        n_clusters=10,
        n_random_features=50,
        max_iter=10,
        n_workers=10,
        dropout=p,
        random_state=0,
    ).fit(X)
    scores.append(nmi(y, fk.labels_))
    uploads.append(fk.communication_.upload_words())
    print(
        f"dropout {p:.0%}: NMI {scores[-1]:.3f}, {uploads[-1]:,d} words uploaded in "
        f"{fk.communication_.n_rounds()} rounds"
    )

print(fk.communication_.words_by_kind())  # no 'raw_points'

# %%
# NMI against the share of clients that miss each round (one seed: the benchmark
# ``benchmarks/federated.py`` averages five).
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot([100 * r for r in rates], scores, marker="o")
ax.set_xlabel("clients dropping out of each round (%)")
ax.set_ylabel("NMI against the digit labels")
ax.set_ylim(0, 1)
ax.set_title("FK k-means, digits, 10 clients")
plt.show()
