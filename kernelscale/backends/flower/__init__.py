"""The Flower backend: :class:`FlowerCluster`, every worker a Flower SuperNode.

``cluster``: the cluster (the master's side); ``app``: the ServerApp (a relay) and
the ClientApp (the worker); ``secagg``: summed rounds through SecAgg+; ``wire``:
what both sides share (message names, records); ``local``: a federation on one
machine (:class:`LocalFederation`); ``supernode``: the SuperNode launcher (process
isolation, short waits); ``executor``: the long-lived ClientApp process beside
each node. Needs ``kernelscale[flower]``; nothing here imports Flower until
it is used.
"""

from __future__ import annotations

from kernelscale._lazy import lazy_exports

_EXPORTS = {
    "FlowerCluster": "kernelscale.backends.flower.cluster",
    "LocalFederation": "kernelscale.backends.flower.local",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
