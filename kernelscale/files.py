"""Writing result files safely: whole or not at all, and only where it may.

:func:`write_atomically` writes a file under a temporary name beside its target
and renames it into place, so a crash, a full disk or Ctrl-C never leaves half a
file and never destroys the file that was there before; every file the command
line writes goes through it (models with :func:`write_npz_atomically`,
:func:`kernelscale.model.save_model`, :func:`kernelscale.streaming.save_streaming_model`;
scores and embeddings with :func:`write_npy_atomically`, :func:`write_csv_atomically`).
:func:`check_writable` says before any work whether a file can be written there.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np


def _temporary_name(path: Path) -> Path:
    # A fresh, short name beside the target (same file system, so the rename is
    # atomic; any valid target name leaves room for it).
    return path.with_name(f".kernelscale-{os.getpid()}-{secrets.token_hex(4)}.tmp")


def _open_exclusive(path: Path, target: Path) -> BinaryIO:
    """``path`` created for writing (never an existing file), with the umask's permissions;
    an error names ``target``, the file the user asked for, not the temporary."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise type(exc)(exc.errno, exc.strerror, str(target)) from exc
    return os.fdopen(fd, "wb")


def write_atomically(path, write: Callable[[BinaryIO], object]) -> None:
    """Call ``write(fh)`` on a temporary file beside ``path``, then rename it to ``path``.

    The file is moved into place only when ``write`` returned (``os.replace``),
    so a crash, a full disk or Ctrl-C never leaves half a file, and never
    destroys the file that was there before; the temporary is removed on failure.
    """
    path = Path(path)
    temporary = _temporary_name(path)
    fh = _open_exclusive(temporary, path)
    try:
        with fh:
            write(fh)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def write_npz_atomically(path, **arrays) -> None:
    """``np.savez`` to exactly ``path`` (no ``.npz`` added), through :func:`write_atomically`."""
    write_atomically(path, lambda fh: np.savez(fh, **arrays))


def write_npy_atomically(path, array) -> None:
    """``np.save`` to exactly ``path``, through :func:`write_atomically`."""
    write_atomically(path, lambda fh: np.save(fh, array, allow_pickle=False))


def write_csv_atomically(path, array) -> None:
    """``np.savetxt`` (comma-separated, full precision), through :func:`write_atomically`."""
    write_atomically(path, lambda fh: np.savetxt(fh, array, delimiter=","))


def check_writable(path, create_parents: bool = False) -> Path:
    """Raise an ``OSError`` now, before any work, when ``path`` cannot be written.

    The directory must exist (or, with ``create_parents``, its nearest existing
    ancestor must be a directory) and take a new file: a file is created there
    and removed at once, which answers for permissions, read-only file systems
    and full quotas alike. ``path`` itself must not be a directory.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(21, "it is a directory", str(path))
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        if not create_parents:
            break
        parent = parent.parent
    ancestor = parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if ancestor.exists() and not ancestor.is_dir():
        raise NotADirectoryError(20, f"{ancestor} is not a directory", str(path))
    if not parent.is_dir():
        raise FileNotFoundError(2, f"no directory {parent}", str(path))
    probe = _temporary_name(parent / path.name)
    with _open_exclusive(probe, path):
        pass
    probe.unlink()
    return path


__all__ = ["check_writable", "write_atomically", "write_csv_atomically",
           "write_npy_atomically", "write_npz_atomically"]
