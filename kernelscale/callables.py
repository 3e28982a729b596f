"""Callables named to another process: an import path, or a token of this process.

A callable kernel travels between master and workers as a name, never as code
(:meth:`kernelscale.kernels.Kernel.to_dict`): its import path ``module:qualname``
when importing it gives the same function back, which any process that can import
the module resolves; otherwise (a lambda, a local function, a function of
``__main__``) a token that only this process resolves. In-process workers use
either; Dask workers need the import path (:func:`is_importable` tells which).
"""

from __future__ import annotations

import importlib
import itertools
import weakref
from collections.abc import Callable

# A callable kernel without an import path is sent as a token of this process.
_LOCAL_PREFIX = "@local:"
_local_tokens = itertools.count()
_local_by_token: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_token_by_function: dict = {}
_strong_functions: dict = {}  # tokens of callables that take no weak reference


def _import_path(function: Callable) -> str | None:
    """``module:qualname`` when importing it gives back ``function`` (not for ``__main__``)."""
    module = getattr(function, "__module__", None)
    qualname = getattr(function, "__qualname__", None)
    if not module or not qualname or module == "__main__" or "<" in qualname:
        return None
    try:
        found = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError):
        return None
    return f"{module}:{qualname}" if found is function else None


def function_reference(function: Callable) -> str:
    """How a callable kernel travels in a message: its import path, or a local token.

    A token (for a lambda, a local function or one defined in ``__main__``) is
    resolved only in this process: in-process workers can use it, Dask workers
    cannot (:func:`is_importable` tells which).

    Parameters
    ----------
    function : callable
        The kernel's function ``f(x, y) -> float``.

    Returns
    -------
    reference : str
        ``module:qualname``, or ``@local:N`` (the same token each time for the same
        function); :func:`resolve_function` gives the function back.
    """
    path = _import_path(function)
    if path is not None:
        return path
    key = id(function)
    token = _token_by_function.get(key)
    registered = None if token is None else (_local_by_token.get(token)
                                              or _strong_functions.get(token))
    if registered is not function:
        token = f"{_LOCAL_PREFIX}{next(_local_tokens)}"
        try:
            _local_by_token[token] = function
        except TypeError:  # not weak-referenceable: keep it for the process's life
            _strong_functions[token] = function
        _token_by_function[key] = token
    return token


def is_importable(function: Callable) -> bool:
    """Whether a callable kernel can be named to another process (``module:qualname``).

    Parameters
    ----------
    function : callable
        The kernel's function.

    Returns
    -------
    importable : bool
        True when importing ``module:qualname`` gives ``function`` back.
    """
    return _import_path(function) is not None


def resolve_function(reference: str) -> Callable:
    """The callable that :func:`function_reference` named (an import path or a local token).

    Parameters
    ----------
    reference : str
        ``module:qualname``, or a token ``@local:N`` of this process.

    Returns
    -------
    function : callable
        The function it names.

    Raises
    ------
    ValueError
        If the reference is a token of another process, does not import, or names
        something that is not callable.
    """
    if reference.startswith(_LOCAL_PREFIX):
        function = _local_by_token.get(reference) or _strong_functions.get(reference)
        if function is None:
            raise ValueError(
                "This callable kernel is a lambda, a local function or a function of "
                "__main__: it exists only in the process that made the kernel, so this "
                "worker cannot use it. Define it at module level in a module the workers "
                "can import (it then travels as module:qualname), or run in-process."
            )
        return function
    module, _, qualname = reference.partition(":")
    try:
        found = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"Cannot import the callable kernel {reference!r}: {exc}") from exc
    if not callable(found):
        raise ValueError(f"{reference!r} is not callable; it cannot be a kernel.")
    return found
