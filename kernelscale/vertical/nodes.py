"""A vertical party's block held on its Flower SuperNode, named by its node-config key."""

from __future__ import annotations

from typing import NamedTuple


class NodeBlock(NamedTuple):
    """A party's block held on its Flower SuperNode: the node-config key naming its file.

    What ``VerticalKernelPCA.X_fit_blocks_`` holds after a fit with
    ``backend="flower"``: the block stays on the party's node, and a ``transform``
    asks each node to stack it with its block of the new samples (another key of
    its node config). A model file keeps the key.
    """

    key: str


__all__ = ["NodeBlock"]
