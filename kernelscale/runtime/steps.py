"""The registry of worker steps: what a remote worker agrees to run, by name.

A backend whose workers must not run code sent to them (a federated client
that only trusts kernelscale itself, as on Flower) sends a step's *name*, and
the worker looks the function up here. Only functions decorated with
:func:`worker_step` in a kernelscale module can be found: a name outside the
``kernelscale`` package, or of a function that is not a registered step, is
refused, and nothing received is ever unpickled into code.

>>> from kernelscale.runtime.steps import resolve_step, step_name
>>> from kernelscale.runtime.validation import describe_partition
>>> step_name(describe_partition)
'kernelscale.runtime.validation:describe_partition'
>>> resolve_step(step_name(describe_partition)) is describe_partition
True
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

_REGISTRY: dict[str, Callable] = {}
PACKAGE = "kernelscale"


def worker_step(function: Callable) -> Callable:
    """Register ``function`` as a worker step (a decorator); returns it unchanged."""
    name = f"{function.__module__}:{function.__qualname__}"
    if not function.__module__.split(".")[0] == PACKAGE:
        raise ValueError(f"Only kernelscale's own functions are worker steps, not {name}.")
    _REGISTRY[name] = function
    return function


def step_name(step: Callable) -> str:
    """The registered name of ``step``; ValueError if it is not a registered step."""
    name = f"{getattr(step, '__module__', '?')}:{getattr(step, '__qualname__', repr(step))}"
    if _REGISTRY.get(name) is not step:
        raise ValueError(
            f"{name} is not a registered worker step: this backend runs only kernelscale's "
            "own steps (decorated with kernelscale.runtime.steps.worker_step).")
    return name


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


__all__ = ["resolve_step", "step_name", "worker_step"]
