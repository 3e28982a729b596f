"""What a model file's arrays must be, checked before any of them is read.

Each model type says which arrays its file holds, of which dtypes, and how
their shapes follow from each other and from the JSON header
(:class:`ModelLayout`): ``coef`` is |Y| x k where the header says |Y| landmarks,
a streaming sketch has as many columns as the header's random features, and
so on. :func:`kernelscale.load_model` runs those checks on the shapes the
``.npy`` headers declare (:func:`kernelscale.model_format.open_model_file`),
then checks that the model (its arrays and what restoring it allocates, such as
a random feature map) fits in the memory available, and only then reads the
arrays; their values are checked next (finite numbers, indices in range).
:func:`kernelscale.save_model` runs the same checks on the arrays it is about
to write, so it never writes a file that :func:`~kernelscale.load_model` would
refuse.
"""

from __future__ import annotations

from collections.abc import Callable
from numbers import Integral, Real

import numpy as np

from kernelscale.model_format import ArraySpec

#: Dtypes of float arrays (no float16: nothing is saved in it).
FLOATS = (np.dtype(np.float64), np.dtype(np.float32))
#: Dtypes of index and count arrays.
INTS = (np.dtype(np.int64), np.dtype(np.int32))
#: The dtype of a JSON text kept as an array (a Nystrom sampler's state).
TEXT = ("U",)

#: A dimension a header states: a non-negative integer below this.
MAX_DIMENSION = 2**48


class ModelLayout:
    """The arrays of one model file, checked against what each model type needs.

    Parameters
    ----------
    path : path-like
        The file (named in every message).
    what : str
        What the file holds (``DistributedKernelPCA``), named in every message.
    declared : dict of str to ArraySpec
        Every array's shape and dtype, from the ``.npy`` headers (or, on saving, from
        the arrays themselves).
    saving : bool, default=False
        The arrays are about to be written: an error says the model cannot be saved.
    """

    def __init__(self, path, what: str, declared: dict[str, ArraySpec],
                 saving: bool = False):
        self.path, self.what, self.declared = path, what, dict(declared)
        self.saving = saving
        self.used: set[str] = set()
        self.allocations: list[tuple[str, int]] = []  # what restoring allocates
        self._value_checks: list[Callable[[dict], None]] = []

    def error(self, problem: str) -> ValueError:
        """The error for a file of this layout: the file, what it holds, the problem."""
        if self.saving:
            return ValueError(f"This {self.what} cannot be saved to {self.path}: {problem} "
                              "(load_model would refuse such a file).")
        return ValueError(f"{self.path} is a damaged {self.what} file: {problem}.")

    def array(self, name: str, shape: tuple, dtypes=FLOATS, *,
              optional: bool = False) -> ArraySpec | None:
        """Require member ``name``: ``shape`` gives each dimension (an int, or None for
        any), ``dtypes`` the dtypes allowed (or ``TEXT``). Returns its spec (None when an
        optional member is absent)."""
        spec = self.declared.get(name)
        if spec is None:
            if optional:
                return None
            raise self.error(f"member {name}.npy is missing")
        self.used.add(name)
        if dtypes is TEXT:
            allowed = spec.dtype.kind == "U"
            expected = "text"
        else:
            allowed = spec.dtype in dtypes
            expected = " or ".join(np.dtype(d).name for d in dtypes)
        if not allowed:
            raise self.error(f"member {name}.npy holds {spec.dtype.name} values where "
                             f"{expected} is expected")
        if len(spec.shape) != len(shape) or any(
                want is not None and got != want
                for got, want in zip(spec.shape, shape, strict=True)):
            wanted = " x ".join("any" if n is None else f"{n:,}" for n in shape) or "a scalar"
            dims = {0: "", 1: " (one dimension)"}.get(len(shape), f" ({len(shape)} dimensions)")
            raise self.error(f"member {name}.npy is {spec.describe()}; its header implies "
                             f"{wanted}{dims}")
        return spec

    def allocates(self, what: str, nbytes: int) -> None:
        """Restoring the model allocates ``nbytes`` more (a feature map, a buffer)."""
        self.allocations.append((what, int(nbytes)))

    def check_values(self, check: Callable[[dict], None]) -> None:
        """Run ``check(arrays)`` once the arrays are read (indices in range...)."""
        self._value_checks.append(check)

    def finish(self) -> None:
        """Every member must belong to the layout (nothing is read for nothing)."""
        extra = sorted(set(self.declared) - self.used)
        if extra:
            raise self.error(f"member {extra[0]}.npy is not part of a {self.what} file")

    def validate_values(self, arrays: dict) -> None:
        """Finite floats everywhere, then the type's own value checks."""
        for name, value in arrays.items():
            if value.dtype.kind == "f" and not np.isfinite(value).all():
                bad = int(np.size(value) - np.count_nonzero(np.isfinite(value)))
                raise self.error(f"member {name}.npy holds {bad:,} NaN or infinite "
                                 f"value{'s' if bad > 1 else ''}")
        for check in self._value_checks:
            check(arrays)

    # --- header values ------------------------------------------------------------

    def count(self, value, name: str, minimum: int = 0) -> int:
        """A header's integer ``name`` (at least ``minimum``; bounded), or the error."""
        if isinstance(value, bool) or not isinstance(value, Integral) \
                or not minimum <= value < MAX_DIMENSION:
            raise self.error(f"its header's {name} is {value!r}, not an integer from "
                             f"{minimum:,}")
        return int(value)

    def seed(self, value, name: str) -> int:
        """A header's random seed ``name``: an integer from 0 to 2**64 - 1."""
        if isinstance(value, bool) or not isinstance(value, Integral) \
                or not 0 <= value < 2**64:
            raise self.error(f"its header's {name} is {value!r}, not a seed")
        return int(value)

    def number(self, value, name: str, positive: bool = False) -> float:
        """A header's finite number ``name`` (positive when asked), or the error."""
        if isinstance(value, bool) or not isinstance(value, Real) or not np.isfinite(value) \
                or (positive and not value > 0):
            raise self.error(f"its header's {name} is {value!r}, not a finite"
                             f"{' positive' if positive else ''} number")
        return float(value)

    def indices_within(self, name: str, upper: int) -> None:
        """Member ``name`` holds indices from 0 to ``upper - 1`` (checked once read)."""
        def check(arrays):
            values = arrays[name]
            if values.size and (values.min() < 0 or values.max() >= upper):
                raise self.error(f"member {name}.npy holds indices outside 0 to {upper - 1:,}")
        self.check_values(check)


def declare_kernel(layout: ModelLayout, described, where: str = "kernel") -> dict:
    """The header's kernel, as a dict :func:`kernelscale.kernels.make_kernel` takes;
    refuses code (a callable) and parameters it would refuse."""
    from kernelscale.kernels import make_kernel

    if not isinstance(described, dict):
        raise layout.error(f"its header's {where} is {described!r}, not a kernel")
    if described.get("name") == "callable":
        raise layout.error("its header names a callable kernel; a model file never loads code")
    try:
        make_kernel(**described)
    except (TypeError, ValueError) as exc:
        raise layout.error(f"its header's {where} {described!r} is not a kernel ({exc})") \
            from exc
    return described


def check_csr(layout: ModelLayout, arrays: dict, name: str, n_features: int) -> None:
    """A CSR matrix's index arrays (``name_indptr``, ``name_indices``) are consistent."""
    indptr, indices = arrays[f"{name}_indptr"], arrays[f"{name}_indices"]
    if indptr[0] != 0 or indptr[-1] != indices.size or np.any(np.diff(indptr) < 0):
        raise layout.error(f"member {name}_indptr.npy is not a CSR row pointer (from 0 to "
                           f"{indices.size:,}, never decreasing)")
    if indices.size and (indices.min() < 0 or indices.max() >= n_features):
        raise layout.error(f"member {name}_indices.npy holds column indices outside 0 to "
                           f"{n_features - 1:,}")


def check_kernel_finite(layout: ModelLayout, described: dict, Y) -> None:
    """The model's kernel gives finite values on its own landmarks (a polynomial degree
    changed to a huge one overflows there, and every score would be NaN)."""
    from kernelscale.kernels import make_kernel

    kernel = make_kernel(**described)
    with np.errstate(over="ignore", invalid="ignore"):
        diag = kernel.diag(Y)
    if not np.isfinite(diag).all():
        raise layout.error(f"its {kernel.name} kernel ({_kernel_text(kernel)}) overflows on "
                           f"its own landmarks: k(y, y) is not finite for "
                           f"{int(np.sum(~np.isfinite(diag))):,} of them")


def _kernel_text(kernel) -> str:
    if kernel.name == "poly":
        return f"degree {kernel.degree}, gamma {kernel.gamma:g}, coef0 {kernel.coef0:g}"
    return f"gamma {kernel.gamma:g}" if kernel.gamma is not None else "no parameters"
