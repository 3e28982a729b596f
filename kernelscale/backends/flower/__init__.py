"""The Flower backend: every worker a Flower SuperNode.

``rounds``: what every Flower cluster shares (Messages per round, lost nodes,
SecAgg+ rounds); ``grid``: :class:`GridCluster`, the rounds on a ServerApp's
Grid; ``fitting`` and ``runconfig``: the ServerApp that fits an estimator named
in the run config (``flwr run``), and its run config; ``cli``: ``kernelscale
flower-app``; ``cluster``: :class:`FlowerCluster`, rounds driven from a Python
process on the SuperLink's machine through a relay ServerApp; ``connection``:
Flower connections, TLS options and what answers at an address; ``app``: the
ClientApp (the worker) and the ServerApps; ``secagg``: summed rounds through
SecAgg+; ``wire``: what both sides share (message names, records); ``local``: a
federation on one machine (:class:`LocalFederation`, with TLS and node
authentication on request; ``certificates`` makes its throwaway keys);
``supernode``: the SuperNode launcher (short waits; ``in_node``: the ClientApp
run in the node's own process); ``superlink``:
the SuperLink launcher with the Fleet API alone on the parties' address.
Who decides what: ``policy`` (what a party's node answers, from its own node
config), ``protocols`` (the table of what each estimator runs), ``hello`` (which
node holds which partition), ``operator_settings`` (the operator's roster and
model folder); ``submit``: ``kernelscale flower run``. Needs
``kernelscale[flower]``; nothing here imports Flower until it is used.
"""

from __future__ import annotations

from kernelscale._lazy import lazy_exports

_EXPORTS = {
    "FlowerCluster": "kernelscale.backends.flower.cluster",
    "GridCluster": "kernelscale.backends.flower.grid",
    "LocalFederation": "kernelscale.backends.flower.local",
}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
