"""
A run on a Dask cluster
=======================

Every distributed algorithm runs unchanged on a ``dask.distributed`` cluster: each
partition lives in an actor pinned to one worker, only the protocol's messages cross
the network, and for the same ``random_state`` the model and the ledger are the same as
in-process. Here a local cluster of two worker processes stands in for real machines
(on several machines: ``dask scheduler`` and ``dask worker``, see the user guide).
"""

import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster

from kernelscale import DistributedKernelPCA
from kernelscale.datasets import load_digits_standardized

X, y = load_digits_standardized()

if __name__ == "__main__":  # worker processes re-import this file
    with (
        LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
        ) as dask_cluster,
        Client(dask_cluster) as client,
    ):
        on_dask = DistributedKernelPCA(
            n_components=10,
            gamma=0.01,
            n_landmarks=200,
            backend="dask",
            client=client,
            random_state=0,
        ).fit(X)
    in_process = DistributedKernelPCA(
        n_components=10, gamma=0.01, n_landmarks=200, random_state=0
    ).fit(X)

    # The same model and the same words, word for word:
    print(
        "same words:",
        on_dask.communication_.total_words("fit"),
        in_process.communication_.total_words("fit"),
    )
    print(
        "same model:",
        np.allclose(on_dask.transform(X), in_process.transform(X)),
    )
    print(on_dask.communication_.summary(times=False))

    # The two ledgers, round by round (a log scale: the rounds span five decades): the
    # Dask run's points sit on the in-process run's, because the protocol, not the
    # engine, decides what is sent.
    rounds = list(in_process.communication_.words_by_round("fit"))
    on_dask_words = on_dask.communication_.words_by_round("fit")
    in_process_words = in_process.communication_.words_by_round("fit")
    position = np.arange(len(rounds))
    fig, ax = plt.subplots(figsize=(7, 4))
    runs = (
        ("in-process", in_process_words, dict(marker="o", ms=11, alpha=0.4)),
        ("Dask, 2 worker processes", on_dask_words, dict(marker="x", ms=7)),
    )
    for label, table, style in runs:
        totals = [sum(table[name].values()) for name in rounds]
        ax.plot(totals, position, linestyle="none", label=label, **style)
    ax.set_yticks(position, rounds)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("words in the round (both directions, all workers)")
    ax.set_title("the same fit on Dask and in-process")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="lower left")
    fig.tight_layout()
    plt.show()
