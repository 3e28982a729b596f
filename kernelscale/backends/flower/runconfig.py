"""The run config of the fitting ServerApp: which estimator, its parameters, where the model goes.

Kept apart from :mod:`~kernelscale.backends.flower.fitting` (the ServerApp) so that
``kernelscale flower-app`` can write an app's default run config without
importing Flower. See that module for the keys.
"""

from __future__ import annotations

import inspect
import json
import math
from pathlib import Path

from kernelscale.backends.flower.operator_settings import check_output_name, models_folder
from kernelscale.runtime.lost import LOST_POLICIES

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


def run_record_path(output) -> Path:
    """Where the run's record goes beside the model: ``model.npz`` -> ``model.run.json``."""
    output = Path(output)
    return output.with_name(output.stem + ".run.json")


def _check_run_options(options: dict) -> None:
    """Every run key by type, before anything runs (``"false"`` is a string, not false)."""
    def number(key, positive=True):
        value = options[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not math.isfinite(value) or (positive and value <= 0):
            raise ValueError(f"{key}={value!r}: give a positive number of seconds, unquoted "
                             f"(e.g. {key}={RUN_DEFAULTS[key]!r}).")

    if not isinstance(options["estimator"], str):
        raise ValueError(f"estimator={options['estimator']!r}: give the estimator's name, "
                         f"quoted, one of {', '.join(ESTIMATORS)}.")
    if not isinstance(options["overwrite"], bool):
        raise ValueError(f"overwrite={options['overwrite']!r}: give true or false, unquoted "
                         "(overwrite=true); a quoted \"false\" is a string.")
    workers = options["n-workers"]
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"n-workers={workers!r}: give a whole number >= 0, unquoted (0: every "
                         "node of the roster, or every node connected without one).")
    if not isinstance(options["data-key"], str) or not options["data-key"]:
        raise ValueError(f"data-key={options['data-key']!r}: give the node-config key of the "
                         "parties' data files, quoted, e.g. data-key=\"partition-path\".")
    number("timeout")
    number("start-timeout")
    if options["lost"] not in LOST_POLICIES:
        raise ValueError(f"lost={options['lost']!r}: give \"error\" (a lost node fails the "
                         "run) or \"drop\" (the fit goes on without it).")
    if not isinstance(options["secure-rounds"], str):
        raise ValueError(f"secure-rounds={options['secure-rounds']!r}: give \"all\" or the "
                         "names of summed rounds, quoted and comma-separated.")
    value = options["secure-range"]
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not math.isfinite(value) or value <= 0:
        raise ValueError(f"secure-range={value!r}: give a positive number, unquoted (every "
                         "number of a secure reply lies within +-secure-range).")


def secure_round_names(text: str, estimator: str):
    """``None``, ``"all"`` or the summed rounds named in ``text``; a name that is not a
    summed round of ``estimator``'s protocols is refused, naming those rounds."""
    from kernelscale.backends.flower.protocols import summed_rounds

    text = text.strip()
    if not text:
        return None
    if text == "all":
        return "all"
    known = summed_rounds(estimator)
    names, unknown, pieces = [], [], []
    for piece in text.split(","):  # a round's own name may hold commas: k(Y,A_i)
        pieces.append(piece)
        name = ",".join(pieces).strip()
        if name in known:
            names.append(name)
        elif any(k.startswith(name + ",") for k in known):
            continue  # the rest of a name with a comma follows
        elif name:
            unknown.append(name)
        pieces = []
    if pieces:
        unknown.append(",".join(pieces).strip())
    if unknown:
        raise ValueError(
            f"secure-rounds names {', '.join(map(repr, unknown))}, which "
            f"{'is' if len(unknown) == 1 else 'are'} not a summed round of {estimator}; its "
            f"summed rounds are {', '.join(map(repr, known)) or 'none'} (or give \"all\").")
    return names


def output_target(name, overwrite: bool, environ=None) -> Path:
    """The model file ``name`` in the operator's model folder, checked before any round."""
    folder = models_folder(environ)
    path = folder / check_output_name(name)
    for target in (path, ledger_path(path), run_record_path(path)):
        if target.is_dir():
            raise IsADirectoryError(f"output {name!r}: {target} is a folder in the operator's "
                                    "model folder; give another file name.")
        if (target.exists() or target.is_symlink()) and not overwrite:
            raise FileExistsError(f"output {name!r}: {target.name} exists in the operator's "
                                  "model folder; give another name, or overwrite=true.")
    return path


def build_estimator(config: dict, environ=None):
    """``(estimator, run options)`` from a run config; every value checked, nothing run.

    ``environ`` (default ``os.environ``) holds the operator's settings
    (:mod:`~kernelscale.backends.flower.operator_settings`): the model folder
    that ``output`` names a file in.
    """
    config = dict(config)
    unknown = [key for key in config if key.startswith("kernelscale-")]
    if unknown:
        raise ValueError(f"{', '.join(unknown)}: keys of the relay ServerApp, not of the "
                         "fitting app.")
    options = {key: config.pop(key, default) for key, default in RUN_DEFAULTS.items()}
    _check_run_options(options)
    cls = estimator_class(str(options["estimator"]))
    allowed = set(run_parameters(cls))
    params, refused = {}, []
    for key, value in config.items():
        if value == UNSET:
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
    options["secure-rounds"] = secure_round_names(options["secure-rounds"], cls.__name__)
    options["output"] = output_target(options["output"], options["overwrite"], environ)
    return estimator, options


__all__ = ["ESTIMATORS", "NOT_FROM_RUN", "RUN_DEFAULTS", "UNSET", "all_parameter_keys",
           "build_estimator", "estimator_class", "ledger_path", "output_target",
           "run_parameters", "run_record_path", "secure_round_names"]
