"""The operator's settings, on the SuperLink's side: the roster of nodes and the model folder.

They are the operator's, not the run's: a run config comes from whoever submits
the run, so it can say neither which node holds which partition nor where on
the operator's machine a file goes. The ServerApp runs in a process started by
the SuperLink's SuperExec, on the operator's machine, with the environment of
the command that started it; so the operator sets two environment variables
where they start the SuperLink (or, with ``--isolation process``, the
SuperExec):

``KERNELSCALE_FLOWER_ROSTER``
    A TOML file that binds each partition to the registered node that holds it,
    by the node id that ``flwr supernode register`` printed::

        # partition id = Flower node id
        [partitions]
        0 = 3104387296138456069
        1 = 8245003214766390351

    The ServerApp sends the run's messages to these nodes only (any other node
    is ignored), and refuses the run, before any round, when a rostered node
    says it holds another partition. Without a roster, the nodes' own
    ``partition-id`` claims are used, and two nodes claiming one partition
    refuse the run, naming both.
``KERNELSCALE_FLOWER_MODELS``
    The folder where runs write their model files. A run's ``output`` is a plain
    file name in it (``fk.npz``); a path, ``..`` or a hidden name is refused
    before any round, and without this folder no run writes a model.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

#: The environment variable naming the operator's roster file.
ROSTER_ENV = "KERNELSCALE_FLOWER_ROSTER"
#: The environment variable naming the operator's model folder.
MODELS_ENV = "KERNELSCALE_FLOWER_MODELS"
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]*")


class Roster(dict):
    """``{partition id: Flower node id}``, as the operator's roster file says.

    Parameters
    ----------
    partitions : dict
        Partition id (int) to node id (int); no node may hold two partitions.
    source : str
        Where it came from (for messages).
    """

    def __init__(self, partitions: dict, source: str = "the roster"):
        super().__init__({int(p): int(n) for p, n in partitions.items()})
        self.source = source
        holders: dict[int, int] = {}
        for partition, node in sorted(self.items()):
            if node in holders:
                raise ValueError(f"{source} gives node {node} two partitions, "
                                 f"{holders[node]} and {partition}: a node holds one.")
            holders[node] = partition

    @classmethod
    def read(cls, path) -> Roster:
        """The roster in the TOML file ``path``: ``<partition id> = <node id>`` lines
        under ``[partitions]``."""
        import tomllib

        path = Path(path)
        try:
            table = tomllib.loads(path.read_text())
        except OSError as exc:
            raise ValueError(f"the roster {path} cannot be read: {exc}") from None
        except tomllib.TOMLDecodeError as exc:
            raise ValueError(f"the roster {path} is not valid TOML: {exc}") from None
        partitions = table.get("partitions")
        if not isinstance(partitions, dict) or not partitions:
            raise ValueError(f"the roster {path} has no [partitions] table of "
                             "'<partition id> = <node id>' lines.")
        parsed = {}
        for key, node in partitions.items():
            if not key.isdigit() or isinstance(node, bool) or not isinstance(node, int):
                raise ValueError(f"the roster {path}: '{key} = {node!r}' is not "
                                 "'<partition id> = <node id>' (two whole numbers).")
            parsed[int(key)] = node
        return cls(parsed, source=f"the roster {path}")

    def to_toml(self) -> str:
        """The roster as the TOML file :meth:`read` reads."""
        lines = ["# partition id = Flower node id", "[partitions]"]
        lines += [f"{partition} = {node}" for partition, node in sorted(self.items())]
        return "\n".join(lines) + "\n"


def operator_roster(environ=None) -> Roster | None:
    """The roster named by ``KERNELSCALE_FLOWER_ROSTER`` (None when it is not set)."""
    environ = os.environ if environ is None else environ
    path = environ.get(ROSTER_ENV, "")
    return Roster.read(path) if path else None


def models_folder(environ=None) -> Path:
    """The operator's model folder (``KERNELSCALE_FLOWER_MODELS``); ``PermissionError``
    when it is not set or not a writable folder."""
    environ = os.environ if environ is None else environ
    folder = environ.get(MODELS_ENV, "")
    if not folder:
        raise PermissionError(
            f"this federation's operator has set no model folder ({MODELS_ENV} is not set "
            "where the SuperLink runs), so no run may write a model; the operator starts the "
            f"SuperLink with {MODELS_ENV}=/srv/kernelscale/models (docs/flower.md).")
    path = Path(folder)
    if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
        raise PermissionError(f"the operator's model folder {path} ({MODELS_ENV}) does not "
                              "exist or is not writable by the ServerApp.")
    return path


def check_output_name(name) -> str:
    """``name`` if it is a plain file name (no folder, no ``..``, not hidden), else ValueError."""
    if not isinstance(name, str):
        raise ValueError(f"output must be a file name (a string), not {name!r}.")
    if not name:
        raise ValueError("output is empty: give the model's file name, e.g. "
                         "--run-config 'output=\"fk.npz\"'; it is written in the operator's "
                         "model folder.")
    if "/" in name or "\\" in name or os.sep in name or ".." in name:
        raise ValueError(f"output={name!r} is a path; give a plain file name (e.g. "
                         f"\"{Path(name.replace(chr(92), '/')).name or 'model.npz'}\"): the "
                         "model is written in the operator's model folder, nowhere else.")
    if not _PLAIN_NAME.fullmatch(name):
        raise ValueError(f"output={name!r}: a model file name holds letters, digits and "
                         "_ . + - only, and does not start with a dot.")
    return name


__all__ = ["MODELS_ENV", "ROSTER_ENV", "Roster", "check_output_name", "models_folder",
           "operator_roster"]
