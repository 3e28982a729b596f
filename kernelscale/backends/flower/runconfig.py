"""The run config of the fitting ServerApp: which estimator, its parameters, where the model goes.

Kept apart from :mod:`~kernelscale.backends.flower.fitting` (the ServerApp) so that
``kernelscale flower-app`` can write an app's default run config without
importing Flower. See that module for the keys.
"""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path

#: The estimators a run may name, and where they live.
ESTIMATORS = {
    "FederatedKernelKMeans": "kernelscale.federated",
    "DistributedSpectralClustering": "kernelscale.federated",
    "DistributedKernelPCA": "kernelscale.horizontal",
    "VerticalKernelPCA": "kernelscale.vertical",
}
#: The run's own keys and their defaults (the rest are estimator parameters).
RUN_DEFAULTS = {
    "estimator": "FederatedKernelKMeans",
    "output": "",
    "overwrite": False,
    "n-workers": 0,
    "data-key": "partition-path",
    "timeout": 600.0,
    "start-timeout": 180.0,
    "lost": "error",
    "secure-rounds": "",
    "secure-range": 1e4,
}
#: Estimator parameters that a run does not take: the cluster is the run's, and
#: an array (``landmarks``) does not fit in a run config.
NOT_FROM_RUN = {"backend", "client", "n_workers", "retry_lost", "timeout", "n_jobs",
                "partition", "feature_blocks", "landmarks", "verbose"}
UNSET = ""  # an estimator parameter at its default

#: The ``pyproject.toml`` of a kernelscale Flower app (no code: the SuperLink and the
#: SuperNodes run the kernelscale installed beside them), filled by :func:`app_pyproject`.
APP_PYPROJECT = """\
{comment}[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "{name}"
version = "{version}"
description = "{description}"
license = "BSD-3-Clause"
dependencies = []

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "kernelscale"

[tool.flwr.app.components]
serverapp = "kernelscale.backends.flower.app:{serverapp}"
clientapp = "kernelscale.backends.flower.app:client_app"

[tool.flwr.app.config]
{config}"""


def toml_value(value) -> str:
    """``value`` as a TOML value (booleans, numbers, else a basic string)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))  # a TOML basic string


def app_pyproject(name: str, description: str, serverapp: str, config: dict,
                  comment: str = "") -> str:
    """The ``pyproject.toml`` of an app whose ServerApp is ``app:<serverapp>`` and whose
    default run config is ``config``; ``comment`` lines go on top."""
    import kernelscale

    lines = "".join(f"{key} = {toml_value(value)}\n" for key, value in config.items())
    return APP_PYPROJECT.format(comment=comment, name=name, version=kernelscale.__version__,
                                description=description, serverapp=serverapp, config=lines)


def estimator_class(name: str):
    """The allow-listed estimator class called ``name`` (ValueError for any other)."""
    import importlib

    if name not in ESTIMATORS:
        raise ValueError(f"estimator={name!r} is not one that runs on Flower; use one of "
                         f"{', '.join(ESTIMATORS)}.")
    return getattr(importlib.import_module(ESTIMATORS[name]), name)


def run_parameters(cls) -> list[str]:
    """The parameters of ``cls`` that a run config may set (snake_case)."""
    return [p for p in inspect.signature(cls).parameters if p not in NOT_FROM_RUN]


def all_parameter_keys() -> list[str]:
    """Every estimator parameter of every allow-listed estimator, in kebab-case."""
    keys: set[str] = set()
    for name in ESTIMATORS:
        keys.update(p.replace("_", "-") for p in run_parameters(estimator_class(name)))
    return sorted(keys - set(RUN_DEFAULTS))


def ledger_path(output) -> Path:
    """Where the run's ledger goes beside the model: ``model.npz`` -> ``model.ledger.csv``."""
    output = Path(output)
    return output.with_name(output.stem + ".ledger.csv")


def build_estimator(config: dict):
    """``(estimator, run options)`` from a run config; every parameter checked, nothing run."""
    config = dict(config)
    options = {key: config.pop(key, default) for key, default in RUN_DEFAULTS.items()}
    cls = estimator_class(str(options["estimator"]))
    allowed = set(run_parameters(cls))
    params, refused = {}, []
    for key, value in config.items():
        if key.startswith("kernelscale-") or value == UNSET:
            continue
        name = key.replace("-", "_")
        if name in allowed:
            params[name] = value
        else:
            refused.append(key)
    if refused:
        raise ValueError(f"{cls.__name__} has no parameter {', '.join(map(repr, refused))} "
                         f"that a run can set; it takes "
                         f"{', '.join(sorted(p.replace('_', '-') for p in allowed))}.")
    estimator = cls(**params)
    estimator._validate_params()  # scikit-learn's check, as fit does it
    output = str(options["output"])
    if not output:
        raise ValueError("output is empty: give the path of the model file on the SuperLink's "
                         "machine, e.g. --run-config 'output=\"/srv/models/model.npz\"'.")
    path = Path(output).expanduser()
    for target in (path, ledger_path(path)):
        if target.exists() and not options["overwrite"]:
            raise FileExistsError(f"{target} exists; give another output or overwrite=true.")
    if not path.parent.is_dir() or not os.access(path.parent, os.W_OK):
        raise PermissionError(f"output {path}: the folder {path.parent} does not exist or is "
                              "not writable on the SuperLink's machine.")
    if int(options["n-workers"]) < 0:
        raise ValueError(f"n-workers must be >= 0 (0: every node connected), got "
                         f"{options['n-workers']}.")
    options["output"] = path
    return estimator, options


__all__ = ["ESTIMATORS", "NOT_FROM_RUN", "RUN_DEFAULTS", "UNSET", "all_parameter_keys",
           "build_estimator", "estimator_class", "ledger_path", "run_parameters"]
