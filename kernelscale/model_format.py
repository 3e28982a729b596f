"""The kernelscale model file: an ``.npz`` archive of plain arrays with a JSON header.

The header (the ``__header__`` entry, a JSON object) holds ``format_version``,
``model_type`` and what that type needs; the arrays are numbers only. Files are
read with ``allow_pickle=False``: loading a model can never run code. What goes
in the file is :mod:`kernelscale.model`'s business (a model) or the registered
estimator's (:mod:`kernelscale.model_registry`).

Format versions: 1 held models (``KernelPCAModel``, ``RandomFeaturePCAModel``)
and, in a file of its own with a ``params`` entry instead of the header, a
``StreamingKernelPCA``; 2 holds every fitted estimator too, with its ledger.
Both are read.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from kernelscale import __version__
from kernelscale.files import write_npz_atomically

#: The version this kernelscale writes (it reads 1 to this).
FORMAT_VERSION = 2


def is_model_file(path) -> bool:
    """Whether ``path`` is a kernelscale model file: a zip archive of ``.npy`` members
    holding the header of :func:`save_model` or the ``params`` of a streaming model
    written before format version 2."""
    path = Path(path)
    if not path.is_file() or not zipfile.is_zipfile(path):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            names = set(archive.namelist())
    except (OSError, zipfile.BadZipFile):
        return False
    return "__header__.npy" in names or "params.npy" in names


def write_model_file(path, header: dict, arrays: dict) -> None:
    """Write ``arrays`` and the JSON ``header`` (with ``format_version``) atomically.

    Every array must hold numbers, booleans or text: ``np.savez`` would pickle an
    object array, which the file never holds (it loads with ``allow_pickle=False``).
    """
    for name, value in arrays.items():
        kind = np.asarray(value).dtype.kind if not hasattr(value, "nnz") else "O"
        if kind not in "biufcU":
            raise TypeError(f"A model file holds arrays of numbers only; {name!r} is a "
                            f"{type(value).__name__} of {np.asarray(value).dtype}.")
    header = {"format_version": FORMAT_VERSION, **header}
    write_npz_atomically(path, __header__=np.array(json.dumps(header)), **arrays)


def read_model_file(path) -> tuple[dict, dict]:
    """``(header, arrays)`` of a model file, or a ``ValueError`` that says what it is.

    A streaming model of format version 1 (a ``params`` entry) comes back with the
    header of version 2: ``params``, ``n_features_in`` and the sketch's ``state``.
    """
    path = Path(path)
    not_a_model = (f"{path} is not a kernelscale model file (.npz); write one with "
                   "'kernelscale fit' or save_model.")
    # np.load also reads a plain .npy (an array, not an archive) and text files
    # raise their own confusing errors: only a zip archive can be a model.
    if not path.is_file() or not zipfile.is_zipfile(path):
        raise ValueError(not_a_model)
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {k: npz[k] for k in npz.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"{not_a_model[:-1]} ({exc}).") from exc
    entry = "__header__" if "__header__" in arrays else "params" if "params" in arrays else None
    if entry is None:
        raise ValueError(f"{not_a_model[:-1]} (it has no kernelscale header).")
    try:
        header = json.loads(str(arrays.pop(entry)))
    except ValueError as exc:
        raise ValueError(f"{path} has a damaged header (not JSON): {exc}") from exc
    if not isinstance(header, dict):
        raise ValueError(f"{path} has a damaged header (not a JSON object).")
    if entry == "params":  # a streaming model written before format version 2
        shared = ("model_type", "format_version", "estimator", "n_features_in")
        header = {"format_version": header.get("format_version", 1),
                  "model_type": header.get("model_type"),
                  "params": header.get("estimator"),
                  "n_features_in": header.get("n_features_in"),
                  "state": {k: v for k, v in header.items() if k not in shared}}
    version = header.get("format_version")
    version = None if isinstance(version, bool) else version
    if isinstance(version, int) and version > FORMAT_VERSION:
        raise ValueError(
            f"{path} was written by a newer kernelscale (model file format {version}; this "
            f"kernelscale {__version__} reads formats 1 to {FORMAT_VERSION}): upgrade "
            "kernelscale to load it.")
    if not isinstance(version, int) or version < 1:
        raise ValueError(f"{path} has a damaged header: format version {version!r} is not "
                         f"one of 1 to {FORMAT_VERSION}.")
    return header, arrays
