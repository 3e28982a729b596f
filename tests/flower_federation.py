"""A LocalFederation whose nodes hold the tests' partitions, for the Flower test modules."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from kernelscale.backends.flower.local import LocalFederation

# How long a SuperNode and its ClientApp process wait between two polls when idle. At
# LocalFederation's default, 0.02 s, an idle federation of three nodes kept 1.0-1.1 cores
# of this 2-core machine busy, 0.6 at 0.05 s; the rounds, which need the CPU, wait for
# it: FK fits took 10-20% less time at 0.05 s than at 0.02 s (alternated, side by side,
# on the shared machine at load 4-9).
IDLE_SECONDS = 0.05


@contextmanager
def running_federation(folder, rows, blocks, new_blocks=None, policy=None, **options):
    """Node i holds ``rows[i]`` (``partition-path``), ``blocks[i]`` (``block-path``) and,
    if given, ``new_blocks[i]`` (``new-block-path``: its block of new samples), with the
    node-config keys of ``policy`` (e.g. ``{"allow-rows": True}``); every process it
    started has ended when the block exits."""
    options.setdefault("node_idle_seconds", IDLE_SECONDS)
    configs = []
    for i, (part, block) in enumerate(zip(rows, blocks, strict=True)):
        np.save(folder / f"rows{i}.npy", part)
        np.save(folder / f"block{i}.npy", block)
        configs.append({"partition-id": i, "partition-path": str(folder / f"rows{i}.npy"),
                        "block-path": str(folder / f"block{i}.npy")})
        if new_blocks is not None:
            np.save(folder / f"new{i}.npy", new_blocks[i])
            configs[-1]["new-block-path"] = str(folder / f"new{i}.npy")
        configs[-1].update(policy or {})
    federation = LocalFederation(configs, folder / "processes", **options)
    try:
        federation.start()
        yield federation
    finally:
        federation.stop()
    assert all(p.poll() is not None for p in [federation.superlink, *federation.nodes])
