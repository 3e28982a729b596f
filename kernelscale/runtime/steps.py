"""The registry of worker steps: what a remote worker agrees to run, by name, and what it tells.

A backend whose workers must not run code sent to them (a federated client
that only trusts kernelscale itself, as on Flower) sends a step's *name*, and
the worker looks the function up here. Only functions decorated with
:func:`worker_step` in a kernelscale module can be found: a name outside the
``kernelscale`` package, or of a function that is not a registered step, is
refused, and nothing received is ever unpickled into code.

Every step also declares what its reply may disclose about the rows of the
worker's partition, one of :data:`DISCLOSURES`, from least to most:

``"nothing"``
    no reply (the step only keeps something in the worker's state);
``"aggregates"``
    sums or statistics over rows: Gram blocks, moments, sketches, row counts,
    per-centre sums;
``"per-row"``
    one value (or vector) per row derived from the data: labels, embeddings,
    local eigenvectors, distances to other samples;
``"rows"``
    raw feature rows of the partition (sampled points, landmarks).

A step whose reply depends on its arguments (a coreset of the raw rows or of an
embedding) declares a function of those arguments instead of a string;
:func:`step_disclosure` evaluates it. A node holding a party's data (on Flower,
the party's SuperNode) checks the disclosure against its own policy before it
runs the step, and the runtime checks every reply against its declaration: a
reply that carries ``raw_points`` from a step that did not declare ``"rows"``
fails the round.

>>> from kernelscale.runtime.steps import resolve_step, step_disclosure, step_name
>>> from kernelscale.runtime.validation import describe_partition
>>> step_name(describe_partition)
'kernelscale.runtime.validation:describe_partition'
>>> resolve_step(step_name(describe_partition)) is describe_partition
True
>>> step_disclosure(describe_partition)
'aggregates'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

#: The step's reply discloses nothing (it has none).
NOTHING = "nothing"
#: Sums or statistics over the partition's rows.
AGGREGATES = "aggregates"
#: One value per row, derived from the data.
PER_ROW = "per-row"
#: Raw feature rows of the partition.
ROWS = "rows"
#: What a step's reply may disclose, from least to most.
DISCLOSURES = (NOTHING, AGGREGATES, PER_ROW, ROWS)

_REGISTRY: dict[str, Callable] = {}
_DISCLOSES: dict[str, str | Callable] = {}
PACKAGE = "kernelscale"


def worker_step(function: Callable | None = None, *, discloses: str | Callable):
    """Register a worker step that discloses ``discloses`` (a decorator).

    Parameters
    ----------
    function : callable
        ``step(state, *args) -> reply``, defined in a kernelscale module.
    discloses : str or callable
        One of :data:`DISCLOSURES`, or a function of the step's arguments
        (without ``state``) that returns one, for a step whose reply depends on
        them.

    Returns
    -------
    The function, unchanged (or, without ``function``, a decorator).
    """
    if not (callable(discloses) or discloses in DISCLOSURES):
        raise ValueError(f"discloses must be one of {DISCLOSURES} or a function of the "
                         f"step's arguments, got {discloses!r}.")

    def register(step: Callable) -> Callable:
        name = f"{step.__module__}:{step.__qualname__}"
        if not step.__module__.split(".")[0] == PACKAGE:
            raise ValueError(f"Only kernelscale's own functions are worker steps, not {name}.")
        _REGISTRY[name] = step
        _DISCLOSES[name] = discloses
        return step

    return register if function is None else register(function)


def step_name(step: Callable) -> str:
    """The registered name of ``step``; ValueError if it is not a registered step."""
    name = f"{getattr(step, '__module__', '?')}:{getattr(step, '__qualname__', repr(step))}"
    if _REGISTRY.get(name) is not step:
        raise ValueError(
            f"{name} is not a registered worker step: this backend runs only kernelscale's "
            "own steps (decorated with kernelscale.runtime.steps.worker_step).")
    return name


def is_registered(step: Callable) -> bool:
    """Whether ``step`` is a registered worker step."""
    name = f"{getattr(step, '__module__', '?')}:{getattr(step, '__qualname__', repr(step))}"
    return _REGISTRY.get(name) is step


def resolve_step(name: str) -> Callable:
    """The step registered as ``name`` (its kernelscale module is imported first)."""
    module, _, qualname = str(name).partition(":")
    if module.split(".")[0] != PACKAGE or not qualname:
        raise ValueError(f"Refusing step {name!r}: only kernelscale's own steps run here.")
    if name not in _REGISTRY:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            raise ValueError(f"Unknown step {name!r}: no module {module}.") from exc
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"Unknown step {name!r}: not a registered worker step.") from None


def step_disclosure(step: Callable | str, args: tuple = ()) -> str:
    """What the reply of ``step`` (a registered step or its name) to ``args`` may disclose.

    Parameters
    ----------
    step : callable or str
        A registered worker step, or its registered name.
    args : tuple
        The step's arguments (without ``state``), for a step whose disclosure
        depends on them.

    Returns
    -------
    str
        One of :data:`DISCLOSURES`.
    """
    name = step if isinstance(step, str) else step_name(step)
    if name not in _DISCLOSES:
        resolve_step(name)
    declared = _DISCLOSES[name]
    disclosure = declared(*args) if callable(declared) else declared
    if disclosure not in DISCLOSURES:
        raise ValueError(f"step {name} declared the disclosure {disclosure!r} for its "
                         f"arguments; expected one of {DISCLOSURES}.")
    return disclosure


def registered_steps() -> dict[str, Callable]:
    """Every step registered so far, by name (import a protocol's module to register its)."""
    return dict(_REGISTRY)


def discloses_more(first: str, second: str) -> bool:
    """Whether disclosure ``first`` reveals more than ``second`` (:data:`DISCLOSURES` order)."""
    return DISCLOSURES.index(first) > DISCLOSURES.index(second)


__all__ = ["AGGREGATES", "DISCLOSURES", "NOTHING", "PER_ROW", "ROWS", "discloses_more",
           "is_registered", "registered_steps", "resolve_step", "step_disclosure", "step_name",
           "worker_step"]
