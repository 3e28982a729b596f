"""
A run on a Dask cluster
=======================

Every distributed algorithm runs unchanged on a ``dask.distributed`` cluster: each
partition lives in an actor pinned to one worker, only the protocol's messages cross
the network, and for the same ``random_state`` the model and the ledger are the same as
in-process. Here a local cluster of two worker processes stands in for real machines
(on several machines: ``dask scheduler`` and ``dask worker``, see the user guide).
"""

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
