"""The kernelscale model file: an ``.npz`` archive of plain arrays with a JSON header.

The header (the ``__header__`` entry, a JSON object) holds ``format_version``,
``model_type`` and what that type needs; the arrays are numbers only. Files are
read with ``allow_pickle=False``: loading a model can never run code. What goes
in the file is :mod:`kernelscale.model`'s business (a model) or the registered
estimator's (:mod:`kernelscale.model_registry`).

A file is read in two steps, so that nothing is allocated before it is known to
be whole and of a sane size: :func:`open_model_file` reads the archive's
directory, the JSON header and the ``.npy`` header of every array (its shape and
dtype, not its data), and refuses a duplicated member, a member that is not an
``.npy`` array, an array of objects or records, a member whose bytes do not match
what its ``.npy`` header declares, and a header too large or nested too deeply;
:meth:`ModelFile.load` then reads the arrays. What each model type's arrays must
be (shapes against each other and against the header) is checked between the two
(:mod:`kernelscale.model_layout`).

Format versions: 1 held models (``KernelPCAModel``, ``RandomFeaturePCAModel``)
and, in a file of its own with a ``params`` entry instead of the header, a
``StreamingKernelPCA``; 2 holds every fitted estimator too, with its ledger.
Both are read.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kernelscale import __version__
from kernelscale.files import write_npz_atomically

#: The version this kernelscale writes (it reads 1 to this).
FORMAT_VERSION = 2
#: The most characters a model file's JSON header may hold (its feature names and
#: ledger names are the large parts).
MAX_HEADER_CHARS = 16 * 2**20
#: The deepest nesting of lists and objects a header may have (a written one has 5).
MAX_HEADER_DEPTH = 32
#: The ``model_type`` of the streaming files of format version 1 (a ``params`` entry).
LEGACY_MODEL_TYPES = ("streaming_kpca",)
#: ``.npy`` header bytes read at most per member (numpy's own default bound).
_MAX_NPY_HEADER = 10_000


@dataclass(frozen=True)
class ArraySpec:
    """What an array member declares in its ``.npy`` header: shape and dtype."""

    shape: tuple[int, ...]
    dtype: np.dtype

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=object)) * self.dtype.itemsize

    def describe(self) -> str:
        """``21 x 3 float64``, ``60 float64 values``, ``a float64 scalar``."""
        if not self.shape:
            return f"a {self.dtype.name} scalar"
        if len(self.shape) == 1:
            return f"{self.shape[0]:,} {self.dtype.name} values"
        return " x ".join(f"{n:,}" for n in self.shape) + f" {self.dtype.name}"


def spec_of(array) -> ArraySpec:
    """The :class:`ArraySpec` of an array about to be written."""
    array = np.asarray(array)
    return ArraySpec(tuple(int(n) for n in array.shape), array.dtype)


def not_a_model_message(path) -> str:
    return (f"{path} is not a kernelscale model file (.npz); write one with 'kernelscale fit' "
            "or save_model")


class ModelFile:
    """A model file whose directory, JSON header and array headers were checked.

    Attributes
    ----------
    path : Path
    header : dict
        The JSON header (a format 1 streaming file's ``params`` come back in the
        header of format 2).
    declared : dict of str to ArraySpec
        Every array member's declared shape and dtype, by name (no ``.npy``).
    """

    def __init__(self, path: Path, header: dict, declared: dict, members: dict):
        self.path, self.header, self.declared = path, header, declared
        self._members = members  # name -> ZipInfo

    def load(self) -> dict:
        """Read every array (``allow_pickle=False``); each is exactly its declared size."""
        arrays = {}
        try:
            with zipfile.ZipFile(self.path) as archive:
                for name, info in self._members.items():
                    with archive.open(info) as fh:
                        arrays[name] = np.lib.format.read_array(
                            fh, allow_pickle=False, max_header_size=_MAX_NPY_HEADER)
        except (ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
            raise ValueError(f"{self.path} is damaged: its arrays cannot be read ({exc}).") \
                from exc
        return arrays


def _json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON ``text`` (outside its strings), in
    one vectorised pass: ``json.loads`` itself recurses, and fails deep inside."""
    # JSON's structural characters are ASCII, which UTF-8 never uses inside another.
    codes = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    n = codes.size
    # A quote is escaped when an odd run of backslashes ends just before it.
    slash = codes == ord("\\")
    starts = np.flatnonzero(slash & ~np.r_[False, slash[:-1]])
    ends = np.flatnonzero(slash & ~np.r_[slash[1:], False])
    after_odd = ends[(ends - starts) % 2 == 0] + 1
    escaped = np.zeros(n, dtype=bool)
    escaped[after_odd[after_odd < n]] = True
    quotes = (codes == ord('"')) & ~escaped
    inside = (np.cumsum(quotes, dtype=np.int32) % 2 == 1) & ~quotes
    step = np.isin(codes, np.frombuffer(b"[{", np.uint8)).astype(np.int32) \
        - np.isin(codes, np.frombuffer(b"]}", np.uint8)).astype(np.int32)
    step[inside] = 0
    return int(np.cumsum(step, dtype=np.int32).max(initial=0))


def parse_header(text: str, path) -> dict:
    """The JSON object of a model file's header, with its size and depth bounded."""
    if len(text) > MAX_HEADER_CHARS:
        raise ValueError(f"{path} has a damaged header: {len(text):,} characters, more than "
                         f"a model file's {MAX_HEADER_CHARS:,}.")
    depth = _json_depth(text)
    if depth > MAX_HEADER_DEPTH:
        raise ValueError(f"{path} has a damaged header: its JSON is nested {depth:,} deep; a "
                         f"model file's is at most {MAX_HEADER_DEPTH} deep.")
    try:
        header = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path} has a damaged header (not JSON): {exc}") from exc
    if not isinstance(header, dict):
        raise ValueError(f"{path} has a damaged header (not a JSON object).")
    return header


def _array_header(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path) -> ArraySpec:
    """The shape and dtype a member declares, checked against the bytes it holds."""
    member = info.filename
    try:
        with archive.open(info) as fh:
            version = np.lib.format.read_magic(fh)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f".npy format version {version}")
            read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                    else np.lib.format.read_array_header_2_0)
            shape, fortran_order, dtype = read(fh, max_header_size=_MAX_NPY_HEADER)
            header_bytes = fh.tell()
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, SyntaxError) as exc:
        raise ValueError(f"{path} is damaged: member {member} is not a readable .npy array "
                         f"({exc}).") from exc
    if dtype.hasobject or dtype.names is not None or dtype.subdtype is not None \
            or dtype.kind not in "biufU":
        raise ValueError(f"{path} is damaged: member {member} holds {dtype} values; a model "
                         "file holds arrays of numbers and text only.")
    if any(not isinstance(n, int) or n < 0 for n in shape):
        raise ValueError(f"{path} is damaged: member {member} declares the shape {shape}.")
    spec = ArraySpec(tuple(shape), dtype)
    if info.file_size != header_bytes + spec.nbytes:
        raise ValueError(
            f"{path} is damaged: member {member} declares {spec.describe()} "
            f"({spec.nbytes:,} bytes) but holds {max(info.file_size - header_bytes, 0):,}.")
    return spec


def open_model_file(path) -> ModelFile:
    """A model file's header and its arrays' declared shapes, read without their data.

    Raises a ``ValueError`` that names the file (and the member) for anything that
    is not a whole kernelscale model file: not a zip archive, a member that is not
    an ``.npy`` array or appears twice, an array of objects or records, a member
    whose size disagrees with its declared shape, a header that is not a JSON
    object, too large or too deep, or of an unknown format version.
    """
    path = Path(path)
    if not path.is_file() or not zipfile.is_zipfile(path):
        raise ValueError(f"{not_a_model_message(path)}.")
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            names = [info.filename for info in infos]
            twice = sorted({n for n in names if names.count(n) > 1}) if len(set(names)) \
                < len(names) else []
            if twice:
                raise ValueError(f"{path} is damaged: member {twice[0]} appears "
                                 f"{names.count(twice[0])} times (a model file holds each "
                                 "array once).")
            odd = [n for n in names if not n.endswith(".npy") or "/" in n]
            if odd:
                raise ValueError(f"{not_a_model_message(path)} (member {odd[0]} is not an "
                                 ".npy array).")
            members = {info.filename[:-4]: info for info in infos}
            entry = "__header__" if "__header__" in members else \
                "params" if "params" in members else None
            if entry is None:
                raise ValueError(f"{not_a_model_message(path)} (it has no kernelscale "
                                 "header).")
            text = _header_text(archive, members.pop(entry), path)
            declared = {name: _array_header(archive, info, path)
                        for name, info in members.items()}
    except (OSError, zipfile.BadZipFile, EOFError) as exc:
        raise ValueError(f"{not_a_model_message(path)} ({exc}).") from exc
    header = parse_header(text, path)
    if entry == "params":  # a streaming model written before format version 2
        header = _legacy_header(header)
    check_format_version(header, path)
    return ModelFile(path, header, declared, members)


def _header_text(archive: zipfile.ZipFile, info: zipfile.ZipInfo, path) -> str:
    """The text of the header member: one string, at most :data:`MAX_HEADER_CHARS`."""
    spec = _array_header(archive, info, path)
    if spec.shape != () or spec.dtype.kind != "U":
        raise ValueError(f"{path} has a damaged header: {info.filename} holds "
                         f"{spec.describe()}, not one JSON text.")
    if spec.dtype.itemsize // 4 > MAX_HEADER_CHARS:
        raise ValueError(f"{path} has a damaged header: {spec.dtype.itemsize // 4:,} "
                         f"characters, more than a model file's {MAX_HEADER_CHARS:,}.")
    with archive.open(info) as fh:
        return str(np.lib.format.read_array(fh, allow_pickle=False))


def _legacy_header(params: dict) -> dict:
    """A format 1 streaming file's ``params`` as the header of format 2."""
    shared = ("model_type", "format_version", "estimator", "n_features_in")
    return {"format_version": params.get("format_version", 1),
            "model_type": params.get("model_type"),
            "params": params.get("estimator"),
            "n_features_in": params.get("n_features_in"),
            "state": {k: v for k, v in params.items() if k not in shared}}


def check_format_version(header: dict, path) -> None:
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


def read_model_file(path) -> tuple[dict, dict]:
    """``(header, arrays)`` of a model file, or a ``ValueError`` that says what it is.

    A streaming model of format version 1 (a ``params`` entry) comes back with the
    header of version 2: ``params``, ``n_features_in`` and the sketch's ``state``.
    Only the archive's own consistency is checked here; :func:`kernelscale.load_model`
    also checks each array against the model type before reading any.
    """
    model_file = open_model_file(path)
    return model_file.header, model_file.load()


def is_model_file(path, accepts=None) -> bool:
    """Whether ``path`` is a file that kernelscale wrote as a model.

    Only the header is read: a zip archive of ``.npy`` arrays, each once, whose
    header (the ``__header__`` entry, or the ``params`` entry of a streaming model
    written before format version 2) is a JSON object with kernelscale's format
    version and a model type (``accepts(header)``, when given, says whether it
    names one kernelscale knows). A user's own ``np.savez`` archive with a member
    of either name is not one.
    """
    path = Path(path)
    try:
        if not path.is_file() or not zipfile.is_zipfile(path):
            return False
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
            if len(set(names)) < len(names) or any(not n.endswith(".npy") for n in names):
                return False
            entry = "__header__.npy" if "__header__.npy" in names else "params.npy"
            if entry not in names:
                return False
            header = parse_header(_header_text(archive, archive.getinfo(entry), path), path)
    except (ValueError, OSError, zipfile.BadZipFile, EOFError):
        return False
    if entry == "params.npy":
        return header.get("model_type") in LEGACY_MODEL_TYPES \
            and header.get("format_version") == 1
    version, model_type = header.get("format_version"), header.get("model_type")
    return (isinstance(version, int) and not isinstance(version, bool) and version >= 1
            and isinstance(model_type, str) and (accepts is None or bool(accepts(header))))


def write_model_file(path, header: dict, arrays: dict, *, overwrite: bool = True) -> None:
    """Write ``arrays`` and the JSON ``header`` (with ``format_version``) atomically.

    Every array must hold numbers, booleans or text: ``np.savez`` would pickle an
    object array, which the file never holds (it loads with ``allow_pickle=False``).
    With ``overwrite=False`` an existing ``path`` is never replaced
    (:func:`kernelscale.files.write_atomically`).
    """
    for name, value in arrays.items():
        kind = np.asarray(value).dtype.kind if not hasattr(value, "nnz") else "O"
        if kind not in "biufcU":
            raise TypeError(f"A model file holds arrays of numbers only; {name!r} is a "
                            f"{type(value).__name__} of {np.asarray(value).dtype}.")
    header = {"format_version": FORMAT_VERSION, **header}
    write_npz_atomically(path, overwrite=overwrite, __header__=np.array(json.dumps(header)),
                         **arrays)
