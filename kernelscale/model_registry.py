"""Fitted estimators in model files: the registry that each setting fills.

:func:`kernelscale.model.save_model` writes a fitted estimator as plain arrays
plus a JSON header, and :func:`kernelscale.model.load_model` builds it back.
Each setting registers its estimator class here with two functions of its own
(:func:`register_estimator`), so this module and :mod:`kernelscale.model` import
no setting:

* ``state(estimator) -> (arrays, meta)``: the fitted state that defines the
  estimator (``meta`` JSON-able, ``arrays`` numeric numpy arrays);
* ``restore(estimator, arrays, meta)``: set the fitted attributes on an
  estimator built from the saved parameters.

What every estimator shares is kept here: the constructor parameters (the
JSON-able ones: a parameter that holds an array, a generator or a client object
is left out and comes back as its default), ``n_features_in_``,
``feature_names_in_`` and the ledger ``communication_`` (every message and
round time of the fit).

A model file names its estimator by its public name in :mod:`kernelscale`
(``"estimator": "FederatedKernelKMeans"``); loading looks the name up there,
which imports the estimator's module and so registers it. Only the public
estimators that registered themselves can be loaded: a file cannot name
arbitrary code.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import kernelscale
from kernelscale.runtime.ledger import Ledger, Message, RoundTime

#: Names of the arrays the registry itself writes (a setting's arrays must avoid them).
LEDGER_MESSAGES, LEDGER_TIMES, LEDGER_TIME_KEYS = ("ledger.messages", "ledger.times",
                                                   "ledger.time_keys")
#: ``model_type`` of the files written by ``save_streaming_model`` before the one format
#: (a ``params`` entry instead of a header), and the estimator each of them holds.
LEGACY_ESTIMATORS = {"streaming_kpca": "StreamingKernelPCA"}


@dataclass(frozen=True)
class RegisteredEstimator:
    """An estimator class and the functions that save and restore its fitted state."""

    cls: type
    model_type: str
    state: Callable
    restore: Callable
    fitted_attribute: str


class UnloadableModel(ValueError):
    """A model file that is whole but cannot be loaded here; the message follows its path."""


_BY_TYPE: dict[str, RegisteredEstimator] = {}
_BY_CLASS: dict[type, RegisteredEstimator] = {}
_LAYOUTS: dict[str, Callable] = {}


def register_estimator(cls: type, state: Callable, restore: Callable, *,
                       model_type: str | None = None,
                       fitted_attribute: str = "model_") -> None:
    """Let model files hold fitted ``cls`` estimators.

    Parameters
    ----------
    cls : type
        A scikit-learn style estimator class, public in :mod:`kernelscale` under
        its own name.
    state : callable
        ``state(estimator) -> (arrays, meta)``: the fitted state, as a dict of
        numeric arrays and a JSON-able dict.
    restore : callable
        ``restore(estimator, arrays, meta)``: sets the fitted attributes on an
        estimator built from the saved parameters (``n_features_in_`` and
        ``feature_names_in_`` are already set).
    model_type : str, optional
        The ``model_type`` of its files (default: the class name).
    fitted_attribute : str, default='model_'
        The attribute that a fitted estimator has (checked before saving).
    """
    entry = RegisteredEstimator(cls, model_type or cls.__name__, state, restore,
                                fitted_attribute)
    _BY_TYPE[entry.model_type] = entry
    _BY_CLASS[cls] = entry


def register_layout(model_type: str, layout: Callable) -> None:
    """Say what the arrays of a registered estimator's files must be.

    ``layout(check, state, header)`` checks the shapes and dtypes the file's
    members declare against its header's ``state`` (and the whole ``header``)
    through ``check``, a :class:`kernelscale.model_layout.ModelLayout`, before any
    array is read; :func:`kernelscale.save_model` runs it on the arrays it writes.
    """
    _LAYOUTS[model_type] = layout


def registered_model_types() -> list[str]:
    """The ``model_type`` of every estimator registered so far."""
    return list(_BY_TYPE)


def is_registered_estimator(obj) -> bool:
    """Whether ``obj`` is an estimator whose class registered its state functions."""
    return type(obj) in _BY_CLASS


def estimator_name(model_type: str, header: dict) -> str | None:
    """The public class name of the estimator that a file's header describes (or None)."""
    if model_type in _BY_TYPE:
        return _BY_TYPE[model_type].cls.__name__
    name = header.get("estimator")
    return name if isinstance(name, str) else LEGACY_ESTIMATORS.get(model_type)


def _entry(model_type: str, header: dict) -> RegisteredEstimator | None:
    """The registered estimator of ``model_type``, importing it by its public name."""
    if model_type not in _BY_TYPE:
        name = estimator_name(model_type, header)
        if name in kernelscale.__all__:
            getattr(kernelscale, name)  # imports its module, which registers it
    return _BY_TYPE.get(model_type)


def to_json_value(value):
    """``value`` (a number, string, None or a list of them, numpy scalars included) as
    plain JSON data; ``TypeError`` for anything else."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    raise TypeError(type(value).__name__)


def json_params(estimator) -> tuple[dict, list[str]]:
    """The estimator's JSON-able constructor parameters, and the names left out."""
    params, dropped = {}, []
    for name, value in estimator.get_params(deep=False).items():
        try:
            params[name] = to_json_value(value)
        except TypeError:
            dropped.append(name)
    return params, dropped


def check_savable(estimator) -> RegisteredEstimator:
    """The registry entry of a fitted, savable estimator, or a clear error."""
    entry = _BY_CLASS.get(type(estimator))
    if entry is None:
        raise TypeError(
            f"{type(estimator).__name__} cannot be saved as a kernelscale model file; "
            "save_model takes a fitted kernelscale estimator "
            f"({', '.join(sorted(e.cls.__name__ for e in _BY_CLASS.values()))}) or a "
            "KernelPCAModel / RandomFeaturePCAModel.")
    if callable(getattr(estimator, "kernel", None)):
        raise ValueError(
            f"A {entry.cls.__name__} with a callable kernel cannot be saved: model "
            "files hold parameters and arrays only, never code (they load with "
            "allow_pickle=False). Use a named kernel to save the model.")
    if not hasattr(estimator, entry.fitted_attribute):
        raise ValueError(f"This {entry.cls.__name__} is not fitted yet; call fit before "
                         "saving it.")
    return entry


def estimator_to_arrays(estimator, ledger: bool = True) -> tuple[dict, dict]:
    """A fitted registered estimator as ``(arrays, header)`` (no format version).

    With ``ledger=True`` the ledger ``communication_`` is kept too, when the
    estimator has one.
    """
    entry = check_savable(estimator)
    arrays, state = entry.state(estimator)
    clash = set(arrays) & {LEDGER_MESSAGES, LEDGER_TIMES, LEDGER_TIME_KEYS}
    if clash:  # a setting's bug, not the user's
        raise RuntimeError(f"{entry.cls.__name__}'s state uses reserved names {sorted(clash)}.")
    params, dropped = json_params(estimator)
    header = {
        "model_type": entry.model_type,
        "estimator": entry.cls.__name__,
        "kernelscale_version": kernelscale.__version__,
        "params": params,
        "dropped_params": dropped,
        "n_features_in": int(estimator.n_features_in_),
        "state": state,
    }
    if hasattr(estimator, "feature_names_in_"):
        header["feature_names_in"] = [str(name) for name in estimator.feature_names_in_]
    if ledger and isinstance(getattr(estimator, "communication_", None), Ledger):
        ledger_arrays, header["ledger"] = ledger_to_arrays(estimator.communication_)
        arrays = {**arrays, **ledger_arrays}
    return arrays, header


def declare_estimator(layout, header: dict) -> None:
    """Check a registered estimator's file before its arrays are read: its parameters
    (as ``fit`` would), ``n_features_in``, the feature names, the ledger and the
    setting's own arrays (:func:`register_layout`).

    Raises :class:`UnloadableModel` as :func:`estimator_from_arrays` does, and the
    ``layout``'s error for anything damaged.
    """
    model_type = header.get("model_type")
    entry = _entry(model_type, header)
    if entry is None:
        raise UnloadableModel(f"holds an estimator of unknown type {model_type!r} "
                              f"({header.get('estimator')!r})")
    _estimator_of(entry, header)
    n_features = layout.count(header.get("n_features_in"), "n_features_in", 1)
    names = header.get("feature_names_in")
    if names is not None and (not isinstance(names, list) or len(names) != n_features
                              or not all(isinstance(n, str) for n in names)):
        raise layout.error(f"its header's feature_names_in are not {n_features:,} names")
    if "ledger" in header:
        declare_ledger(layout, header["ledger"])
    state = header.get("state")
    if not isinstance(state, dict):
        raise layout.error("its header has no state")
    if entry.model_type in _LAYOUTS:
        _LAYOUTS[entry.model_type](layout, state, header)


def _estimator_of(entry: RegisteredEstimator, header: dict):
    """An estimator built from the header's parameters, checked as ``fit`` checks them."""
    known = set(entry.cls().get_params(deep=False))
    params = header.get("params")
    if not isinstance(params, dict):
        raise ValueError(f"params {params!r} are not a JSON object")
    unknown = sorted(set(params) - known)
    if unknown:
        written = header.get("kernelscale_version", "an older version")
        raise UnloadableModel(
            f"holds a {entry.cls.__name__} with parameters {unknown} that this "
            f"kernelscale ({kernelscale.__version__}) does not know (written by kernelscale "
            f"{written})")
    estimator = entry.cls(**params)
    estimator._validate_params()  # scikit-learn's constraints, as fit checks them
    return estimator


def estimator_from_arrays(arrays: dict, header: dict):
    """The fitted estimator of :func:`estimator_to_arrays`'s ``(arrays, header)``.

    Raises :class:`UnloadableModel` for a ``model_type`` that no public estimator
    registered, or parameters that this version's estimator does not take.
    """
    model_type = header.get("model_type")
    entry = _entry(model_type, header)
    if entry is None:
        raise UnloadableModel(f"holds an estimator of unknown type {model_type!r} "
                              f"({header.get('estimator')!r})")
    estimator = _estimator_of(entry, header)
    estimator.n_features_in_ = int(header["n_features_in"])
    if "feature_names_in" in header:
        estimator.feature_names_in_ = np.asarray(header["feature_names_in"], dtype=object)
    entry.restore(estimator, arrays, header["state"])
    if "ledger" in header:
        estimator.communication_ = ledger_from_arrays(arrays, header["ledger"])
    return estimator


# ----------------------------------------------------------------------------- the ledger


def _codes(values: list[str]) -> tuple[list[str], list[int]]:
    names = list(dict.fromkeys(values))
    index = {name: i for i, name in enumerate(names)}
    return names, [index[v] for v in values]


def ledger_to_arrays(ledger: Ledger) -> tuple[dict, dict]:
    """A ledger as integer and float arrays plus its distinct names (JSON)."""
    messages, times = ledger.rounds(), ledger.times(phase=None)
    names = {}
    columns = []
    for field in ("round", "phase", "direction", "kind"):
        names[field], codes = _codes([getattr(m, field) for m in messages])
        columns.append(codes)
    columns += [[m.worker for m in messages], [m.words for m in messages],
                [m.nbytes for m in messages]]
    names["time_round"], round_codes = _codes([t.round for t in times])
    names["time_phase"], phase_codes = _codes([t.phase for t in times])
    arrays = {
        LEDGER_MESSAGES: np.array(columns, dtype=np.int64).reshape(7, -1).T.copy(),
        LEDGER_TIME_KEYS: np.array([round_codes, phase_codes], dtype=np.int64).reshape(2, -1).T
        .copy(),
        LEDGER_TIMES: np.array([[t.master_seconds, t.wall_seconds, t.slowest_worker_seconds,
                                 t.worker_seconds] for t in times], dtype=float).reshape(-1, 4),
    }
    return arrays, names


#: The name lists a saved ledger keeps (its codes index them).
LEDGER_NAME_FIELDS = ("round", "phase", "direction", "kind", "time_round", "time_phase")
#: Bytes a ledger message takes in memory once loaded (a ``Message`` and its list slot).
MESSAGE_BYTES = 250


def declare_ledger(layout, names) -> None:
    """Check a saved ledger (:func:`ledger_to_arrays`): its name lists, its arrays'
    shapes, and, once read, codes that index the names, directions and kinds the
    ledger knows, non-negative workers, words, bytes and seconds."""
    from kernelscale.model_layout import FLOATS, INTS
    from kernelscale.runtime.ledger import DOWN, KINDS, UP

    if not isinstance(names, dict) or any(
            not isinstance(names.get(f), list) or not all(isinstance(v, str) for v in names[f])
            for f in LEDGER_NAME_FIELDS):
        raise layout.error("its header's ledger names are not lists of names")
    for field, allowed in (("direction", (UP, DOWN)), ("kind", KINDS)):
        odd = [v for v in names[field] if v not in allowed]
        if odd:
            raise layout.error(f"its ledger names the {field} {odd[0]!r}, not one of "
                               f"{', '.join(allowed)}")
    n_messages = layout.array(LEDGER_MESSAGES, (None, 7), INTS).shape[0]
    n_times = layout.array(LEDGER_TIME_KEYS, (None, 2), INTS).shape[0]
    layout.array(LEDGER_TIMES, (n_times, 4), FLOATS)
    layout.allocates("its ledger", MESSAGE_BYTES * (n_messages + n_times))

    def check(arrays):
        columns = (("round", LEDGER_MESSAGES, 0), ("phase", LEDGER_MESSAGES, 1),
                   ("direction", LEDGER_MESSAGES, 2), ("kind", LEDGER_MESSAGES, 3),
                   ("time_round", LEDGER_TIME_KEYS, 0), ("time_phase", LEDGER_TIME_KEYS, 1))
        for field, member, column in columns:
            codes = arrays[member][:, column]
            if codes.size and (codes.min() < 0 or codes.max() >= len(names[field])):
                raise layout.error(f"member {member}.npy holds {field} codes outside 0 to "
                                   f"{len(names[field]) - 1}")
        for member, what in ((LEDGER_MESSAGES, "workers, words and bytes"),
                             (LEDGER_TIMES, "seconds")):
            values = arrays[member][:, 4:] if member == LEDGER_MESSAGES else arrays[member]
            if values.size and values.min() < 0:
                raise layout.error(f"member {member}.npy holds negative {what}")

    layout.check_values(check)


def ledger_from_arrays(arrays: dict, names: dict) -> Ledger:
    """The ledger of :func:`ledger_to_arrays` (equal messages, equal round times)."""
    ledger = Ledger()
    ledger.extend(
        Message(names["round"][r], names["phase"][p], names["direction"][d], names["kind"][k],
                int(worker), int(words), int(nbytes))
        for r, p, d, k, worker, words, nbytes in arrays[LEDGER_MESSAGES].tolist())
    keys, seconds = arrays[LEDGER_TIME_KEYS].tolist(), arrays[LEDGER_TIMES].tolist()
    # Round times are not messages: the ledger keeps them in a list of its own.
    ledger._times = [RoundTime(names["time_round"][r], names["time_phase"][p], *row)
                     for (r, p), row in zip(keys, seconds, strict=True)]
    return ledger
