"""Writing result files safely: whole or not at all.

:func:`write_npz_atomically` writes an ``.npz`` archive under a temporary name
beside its target and renames it into place, so a crash, a full disk or Ctrl-C
never leaves half a file and never destroys the file that was there before.
Model files (:func:`kernelscale.model.save_model`,
:func:`kernelscale.streaming.save_streaming_model`) are written this way.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import numpy as np


def write_npz_atomically(path, **arrays) -> None:
    """``np.savez`` to exactly ``path``, through a temporary file renamed over it.

    The archive is written beside ``path`` and moved into place only when it is
    complete (``os.replace``), so a crash, a full disk or Ctrl-C never leaves half
    a file, and never destroys the file that was there before.
    """
    path = Path(path)
    # A fresh, short name beside the target (same file system, so the rename is
    # atomic; any valid target name leaves room for it), opened exclusively and
    # with the umask's permissions, as a plain open would.
    temporary = path.with_name(f".kernelscale-{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        fh = open(temporary, "xb")  # noqa: SIM115 - closed below, before the rename
    except OSError as exc:  # say which file could not be written, not the temporary
        raise type(exc)(exc.errno, exc.strerror, str(path)) from exc
    try:
        with fh:
            np.savez(fh, **arrays)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
