"""The Dask backend: :class:`DaskCluster` (one actor per partition) and its client helpers.

``cluster``: the cluster; ``actor``: what runs on a Dask worker; ``client``:
:func:`dask_client`, the scheduler probe and the worker allocator environment;
``cli``: the command line's ``--scheduler`` / ``--dask-workers`` / ``--timeout``.
``dask[distributed]`` is optional: nothing here imports it until it is used.
"""

from __future__ import annotations

from kernelscale._lazy import lazy_exports

_EXPORTS = {
    "DaskCluster": "kernelscale.backends.dask.cluster",
    "NotDaskError": "kernelscale.backends.dask.client",
    "WORKER_MALLOC_ENV": "kernelscale.backends.dask.client",
    "dask_client": "kernelscale.backends.dask.client",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
