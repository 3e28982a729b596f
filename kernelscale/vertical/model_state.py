"""A fitted ``VerticalKernelPCA`` in a model file (:mod:`kernelscale.model_registry`).

The file keeps the fusion centre's model (``model_``), the parties' feature
blocks and their training blocks (``X_fit_blocks_``, which ``transform`` needs:
each party projects new samples against its own training rows). A training
block given as a loader is kept as its file path, one on a party's Flower node
as its node-config key; a callable loader cannot be saved (a model file holds
no code).
"""

from __future__ import annotations

import os

import numpy as np

from kernelscale.kernels import Kernel
from kernelscale.vertical.nodes import NodeBlock
from kernelscale.vertical.oneshot import VerticalKPCAModel


def _saved_block(party: int, block) -> str | None:
    """A training block's file path, None for an array (or a block on a Flower node),
    or a clear error for anything else."""
    if isinstance(block, NodeBlock):  # kept by its node-config key
        return None
    if isinstance(block, (str, os.PathLike)):
        return os.fspath(block)
    if isinstance(block, np.ndarray) and block.dtype.kind in "biuf":
        return None
    what = ("a callable loader, which a model file cannot keep (it holds no code)"
            if callable(block) else f"a {type(block).__name__}, which a model file cannot keep")
    raise ValueError(
        f"This VerticalKernelPCA's party {party} holds its training block through {what}; "
        "fit on arrays or on file paths to save the model.")


def vertical_state(estimator) -> tuple[dict, dict]:
    """``(arrays, meta)`` of a fitted ``VerticalKernelPCA``."""
    model = estimator.model_
    paths = [_saved_block(j, block) for j, block in enumerate(estimator.X_fit_blocks_)]
    # A block on a party's Flower node: the node-config key of its file, on the node.
    keys = [block.key if isinstance(block, NodeBlock) else None
            for block in estimator.X_fit_blocks_]
    arrays = {"eigenvalues": model.eigenvalues, "eigenvectors": model.eigenvectors,
              "fit_column_means": model.fit_column_means}
    if model.fused_kernel is not None:
        arrays["fused_kernel"] = model.fused_kernel
    for j, (cols, block) in enumerate(zip(estimator.feature_blocks_, estimator.X_fit_blocks_,
                                          strict=True)):
        arrays[f"feature_block.{j}"] = cols
        if paths[j] is None and keys[j] is None:
            arrays[f"training_block.{j}"] = block
    meta = {
        "model": {"kernel": model.kernel.to_dict(), "center": bool(model.center),
                  "fit_mean": float(model.fit_mean),
                  "block_sizes": [int(b) for b in model.block_sizes],
                  "n_local_components": int(model.n_local_components)},
        "training_block_paths": paths,
    }
    if any(key is not None for key in keys):
        meta["training_block_keys"] = keys
    return arrays, meta


def restore_vertical(estimator, arrays: dict, meta: dict) -> None:
    """Set the fitted attributes of :func:`vertical_state`'s ``(arrays, meta)``."""
    described = meta["model"]
    estimator.model_ = VerticalKPCAModel(
        kernel=Kernel.from_dict(described["kernel"]), eigenvalues=arrays["eigenvalues"],
        eigenvectors=arrays["eigenvectors"], center=bool(described["center"]),
        fit_column_means=arrays["fit_column_means"], fit_mean=float(described["fit_mean"]),
        block_sizes=tuple(int(b) for b in described["block_sizes"]),
        n_local_components=int(described["n_local_components"]),
        fused_kernel=arrays.get("fused_kernel"))
    paths = meta["training_block_paths"]
    estimator.feature_blocks_ = [arrays[f"feature_block.{j}"] for j in range(len(paths))]
    keys = meta.get("training_block_keys") or [None] * len(paths)
    estimator.X_fit_blocks_ = [_restored_block(arrays, j, path, key)
                               for j, (path, key) in enumerate(zip(paths, keys, strict=True))]
    estimator.eigenvalues_ = estimator.model_.eigenvalues
    estimator.eigenvectors_ = estimator.model_.eigenvectors
    estimator._n_features_out = int(estimator.n_components)


def _restored_block(arrays: dict, party: int, path, key):
    """A party's training block as saved: on its Flower node (key), a file, or an array."""
    if key is not None:
        return NodeBlock(str(key))
    return arrays[f"training_block.{party}"] if path is None else path
