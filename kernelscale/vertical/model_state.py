"""A fitted ``VerticalKernelPCA`` in a model file (:mod:`kernelscale.model_registry`).

The file keeps the fusion centre's model (``model_``), the parties' feature
blocks and their training blocks (``X_fit_blocks_``, which ``transform`` needs:
each party projects new samples against its own training rows). A training
block on a party's Flower node is kept as its node-config key; one given as a
loader is kept as its file path, with the file's size and
SHA-256 hash: the loaded estimator's ``X_fit_blocks_`` holds a
:class:`PartyFile` for it, which refuses the file once it changed (a changed
file would give other scores without a word). A callable loader cannot be saved
(a model file holds no code). :func:`vertical_layout` says what the file's
arrays must be.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from kernelscale.files import fingerprint
from kernelscale.kernels import Kernel
from kernelscale.model_layout import INTS, declare_kernel
from kernelscale.model_registry import register_layout
from kernelscale.vertical.nodes import NodeBlock
from kernelscale.vertical.oneshot import VerticalKPCAModel


@dataclass(frozen=True)
class PartyFile:
    """A party's training block file as a saved model recorded it: loaded only unchanged.

    A loader (a picklable callable, so on Dask it runs on the party's worker):
    calling it checks the file's size and SHA-256 hash against the record, then
    loads it (:func:`kernelscale.datasets.load`).

    Attributes
    ----------
    path : str
    size : int
        Bytes, when the model was saved.
    sha256 : str
        The hex digest, when the model was saved.
    """

    path: str
    size: int
    sha256: str

    def check(self, party: int | None = None) -> None:
        """Raise a ``ValueError`` when the file is not the one the model recorded."""
        who = f"party {party}'s training block " if party is not None else "the training block "
        try:
            size, digest = fingerprint(self.path)
        except OSError as exc:
            raise ValueError(f"{who}{self.path} cannot be read ({exc.strerror or exc}); the "
                             "model needs that file as it was saved") from exc
        if (size, digest) != (self.size, self.sha256):
            change = (f"{size:,} bytes, the model recorded {self.size:,}" if size != self.size
                      else "same size, other content (its SHA-256 differs)")
            raise ValueError(
                f"{who}{self.path} changed since the model was saved ({change}): its scores "
                "would not be the model's. Restore the file, or fit the model again.")

    def __call__(self):
        from kernelscale.datasets import load

        self.check()
        return load(self.path)


def _saved_block(party: int, block) -> dict | None:
    """A training block's file record (path, size, hash), None for an array, or a clear
    error for anything else (None too for a block on a Flower node: kept by its key)."""
    if isinstance(block, NodeBlock):
        return None
    if isinstance(block, PartyFile):  # from a loaded model: the record it was fitted with
        return {"path": block.path, "size": block.size, "sha256": block.sha256}
    if isinstance(block, (str, os.PathLike)):
        path = os.fspath(block)
        try:
            size, digest = fingerprint(path)
        except OSError as exc:
            raise ValueError(
                f"This VerticalKernelPCA's party {party} holds its training block as the file "
                f"{path}, which cannot be read here ({exc.strerror or exc}): a model file "
                "records its size and hash, to refuse it once changed. Save where the file "
                "is readable, or fit on arrays.") from exc
        return {"path": path, "size": size, "sha256": digest}
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
    return arrays[f"training_block.{party}"] if path is None else _party_file(path)


def _party_file(record) -> PartyFile | str:
    """The loader of a saved training block file (a bare path from a file written before
    kernelscale recorded sizes and hashes)."""
    if isinstance(record, str):
        return record
    return PartyFile(record["path"], int(record["size"]), record["sha256"])


def _path_record(layout, j: int, record) -> None:
    """A ``training_block_paths`` entry: None, a path, or {path, size, sha256}."""
    if record is None or isinstance(record, str):
        return
    if not (isinstance(record, dict) and isinstance(record.get("path"), str)
            and isinstance(record.get("sha256"), str) and len(record["sha256"]) == 64):
        raise layout.error(f"its header's training block {j} is {record!r}, not a file record")
    layout.count(record.get("size"), f"training block {j}'s size")


def vertical_layout(layout, state: dict, header: dict) -> None:
    """Check a ``VerticalKernelPCA`` file's arrays against its header (see
    :mod:`kernelscale.model_layout`); once read, a training block file that is readable
    here must be the one the model recorded."""
    described = state.get("model")
    if not isinstance(described, dict):
        raise layout.error("its header has no model")
    declare_kernel(layout, described.get("kernel"))
    if not isinstance(described.get("center"), bool):
        raise layout.error(f"its header's center is {described.get('center')!r}")
    layout.number(described.get("fit_mean"), "fit_mean")
    layout.count(described.get("n_local_components"), "n_local_components", 1)
    sizes = described.get("block_sizes")
    if not isinstance(sizes, list) or not sizes:
        raise layout.error(f"its header's block_sizes are {sizes!r}")
    sizes = [layout.count(b, "block size", 1) for b in sizes]
    n_features = header["n_features_in"]
    if sum(sizes) != n_features:
        raise layout.error(f"its parties hold {sum(sizes):,} features, its header says "
                           f"n_features_in = {n_features:,}")
    paths = state.get("training_block_paths")
    if not isinstance(paths, list) or len(paths) != len(sizes):
        raise layout.error(f"its header's training_block_paths are not one per party "
                           f"({len(sizes)})")
    keys = state.get("training_block_keys") or [None] * len(sizes)
    if not isinstance(keys, list) or len(keys) != len(sizes) or not all(
            key is None or isinstance(key, str) for key in keys):
        raise layout.error(f"its header's training_block_keys are {keys!r}, not one "
                           f"node-config key (or null) per party ({len(sizes)})")
    n_samples, k = layout.array("eigenvectors", (None, None)).shape
    if k != header["params"].get("n_components"):
        raise layout.error(f"its model has {k:,} components, its parameters say "
                           f"n_components = {header['params'].get('n_components')!r}")
    layout.array("eigenvalues", (k,))
    layout.array("fit_column_means", (n_samples,))
    layout.array("fused_kernel", (n_samples, n_samples), optional=True)
    for j, (size, record, key) in enumerate(zip(sizes, paths, keys, strict=True)):
        layout.array(f"feature_block.{j}", (size,), INTS)
        layout.indices_within(f"feature_block.{j}", n_features)
        _path_record(layout, j, record)
        if record is None and key is None:
            layout.array(f"training_block.{j}", (n_samples, size))

    def one_party_per_feature(arrays) -> None:
        columns = np.concatenate([arrays[f"feature_block.{j}"] for j in range(len(sizes))])
        if not np.array_equal(np.sort(columns), np.arange(n_features)):
            raise layout.error(f"its feature blocks do not split the {n_features:,} features "
                               "between the parties (a feature twice, or none)")
    layout.check_values(one_party_per_feature)

    def unchanged_files(arrays) -> None:
        for j, record in enumerate(paths):
            if isinstance(record, dict) and os.path.exists(record["path"]):
                try:
                    _party_file(record).check(party=j)
                except ValueError as exc:
                    raise ValueError(f"{layout.path} cannot be loaded: {exc}") from None
    layout.check_values(unchanged_files)


register_layout("vertical_kpca", vertical_layout)
