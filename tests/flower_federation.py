"""A LocalFederation whose nodes hold the tests' partitions, for the Flower test modules."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from kernelscale.backends.flower.local import LocalFederation


@contextmanager
def running_federation(folder, rows, blocks, **options):
    """Node i holds ``rows[i]`` (``partition-path``) and ``blocks[i]`` (``block-path``);
    every process it started has ended when the block exits."""
    configs = []
    for i, (part, block) in enumerate(zip(rows, blocks, strict=True)):
        np.save(folder / f"rows{i}.npy", part)
        np.save(folder / f"block{i}.npy", block)
        configs.append({"partition-id": i, "partition-path": str(folder / f"rows{i}.npy"),
                        "block-path": str(folder / f"block{i}.npy")})
    federation = LocalFederation(configs, folder / "processes", **options)
    try:
        federation.start()
        yield federation
    finally:
        federation.stop()
    assert all(p.poll() is not None for p in [federation.superlink, *federation.nodes])
