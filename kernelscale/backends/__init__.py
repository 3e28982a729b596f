"""The engines a :class:`~kernelscale.runtime.Cluster` runs on, one place per engine.

* :mod:`kernelscale.backends.local`: :class:`LocalCluster`, workers in this process;
* :mod:`kernelscale.backends.dask`: :class:`DaskCluster`, one Dask actor per partition
  (needs ``kernelscale[dask]``);
* :mod:`kernelscale.backends.flower`: :class:`FlowerCluster`, one Flower SuperNode per
  partition (needs ``kernelscale[flower]``).

Each implements the core's ``Cluster._run`` and imports the core, never the other
way round. :func:`kernelscale.make_cluster` picks one from ``backend=``.
"""

from __future__ import annotations

from kernelscale._lazy import lazy_exports

_EXPORTS = {
    "DaskCluster": "kernelscale.backends.dask.cluster",
    "FlowerCluster": "kernelscale.backends.flower.cluster",
    "LocalCluster": "kernelscale.backends.local",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
