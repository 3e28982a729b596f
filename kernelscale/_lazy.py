"""Names of a package that are imported on first use (PEP 562)."""

from __future__ import annotations

import importlib
import sys


def lazy_exports(package: str, exports: dict[str, str]):
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps a name to its module.

    Used for the estimators (they bring scikit-learn's base classes), so that a
    worker process that needs one protocol module (a Flower ClientApp is a new
    process for every message) does not import every estimator.
    """

    def __getattr__(name: str):
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
            setattr(sys.modules[package], name, value)  # later lookups skip this function
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
