"""Writing result files safely: whole or not at all, only where it may, one writer at a time.

:func:`write_atomically` writes a file under a temporary name beside its target
and renames it into place, so a crash, a full disk, Ctrl-C, SIGTERM or SIGHUP
never leaves half a file and never destroys the file that was there before;
every file the command line writes goes through it (models with
:func:`write_npz_atomically`, :func:`kernelscale.model.save_model`; scores and
embeddings with :func:`write_npy_atomically`, :func:`write_csv_atomically`).

:func:`check_writable` says before any work whether a file can be written
there, and :func:`claim_output` reserves it for this process until its result
is written (a lock file beside it), so that two commands writing the same file
at once cannot both succeed: the second is refused before its work starts. A
claimed output that did not exist is published without replacing anything (a
file that appeared meanwhile is kept and the write fails).
"""

from __future__ import annotations

import atexit
import errno
import hashlib
import os
import secrets
import signal
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import numpy as np

#: The files this process wrote last (through :func:`write_atomically`), most recent last,
#: each with its number among all the writes of the process (from 1).
WRITTEN: deque[tuple[int, Path]] = deque(maxlen=100)
def writes_so_far() -> int:
    """How many files this process has written through :func:`write_atomically`."""
    return WRITTEN[-1][0] if WRITTEN else 0


def written_since(mark: int) -> list[Path]:
    """The files written after :func:`writes_so_far` returned ``mark`` (the last 100)."""
    return [path for number, path in WRITTEN if number > mark]


#: The signals that end a write as Ctrl-C does: the temporary is removed first.
TERMINATING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                            if hasattr(signal, name))


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised where the program is so that its cleanup runs.

    A ``BaseException`` like ``KeyboardInterrupt``: code that catches
    ``Exception`` does not swallow it.
    """

    def __init__(self, signum: int):
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum


def _raise_terminated(signum, frame):
    raise Terminated(signum)


@contextmanager
def terminating_signals_raise(only_default: bool = False) -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` (main thread only).

    With ``only_default``, only signals whose handler is the default one (which
    would end the process without any cleanup) are taken; a program's own
    handlers, and ignored signals, are left alone. The handlers are restored on
    leaving.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {}
    for signum in TERMINATING_SIGNALS:
        current = signal.getsignal(signum)
        if only_default and current is not signal.SIG_DFL:
            continue
        saved[signum] = current
        signal.signal(signum, _raise_terminated)
    try:
        yield
    finally:
        for signum, handler in saved.items():
            signal.signal(signum, handler)


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


def _publish(temporary: Path, path: Path, overwrite: bool) -> None:
    """Move ``temporary`` to ``path``; without ``overwrite``, never over an existing file."""
    if overwrite:
        os.replace(temporary, path)
        return
    try:
        os.link(temporary, path)  # atomic, and fails if path exists
    except FileExistsError:
        raise FileExistsError(
            errno.EEXIST, "a file appeared there while the result was computed; it is kept "
            "and the result is not written", str(path)) from None
    except OSError:  # a file system without hard links: check, then rename
        if os.path.lexists(path):
            raise FileExistsError(errno.EEXIST, "a file appeared there while the result was "
                                  "computed; it is kept", str(path)) from None
        os.replace(temporary, path)
        return
    temporary.unlink()


def write_atomically(path, write: Callable[[BinaryIO], object], *,
                     overwrite: bool | None = None) -> None:
    """Call ``write(fh)`` on a temporary file beside ``path``, then rename it to ``path``.

    The file is moved into place only when ``write`` returned, so a crash, a full
    disk, Ctrl-C, SIGTERM or SIGHUP never leaves half a file, and never destroys the
    file that was there before; the temporary is removed on failure. (A SIGTERM or
    SIGHUP whose handler is the default one ends the process as it would have,
    once the temporary is gone.)

    Parameters
    ----------
    path : str or path-like
    write : callable
        Writes the file's content to the binary file object it is given.
    overwrite : bool, optional
        Whether an existing ``path`` may be replaced. By default: as
        :func:`claim_output` decided when this process claimed ``path``, and
        ``True`` when it did not.
    """
    path = Path(path)
    claim = _CLAIMS.get(_claim_key(path))
    if overwrite is None:
        overwrite = True if claim is None else claim.replace
    temporary = _temporary_name(path)
    try:
        with terminating_signals_raise(only_default=True):
            fh = _open_exclusive(temporary, path)
            try:
                with fh:
                    write(fh)
                _publish(temporary, path, overwrite)
            except BaseException:
                temporary.unlink(missing_ok=True)
                raise
    except Terminated as exc:
        if signal.getsignal(exc.signum) is signal.SIG_DFL:  # ours: end as the signal would
            signal.raise_signal(exc.signum)
        raise
    WRITTEN.append((writes_so_far() + 1, path))
    if claim is not None:
        claim.release()


def write_npz_atomically(path, *, overwrite: bool | None = None, **arrays) -> None:
    """``np.savez`` to exactly ``path`` (no ``.npz`` added), through :func:`write_atomically`."""
    write_atomically(path, lambda fh: np.savez(fh, **arrays), overwrite=overwrite)


def write_npy_atomically(path, array, *, overwrite: bool | None = None) -> None:
    """``np.save`` to exactly ``path``, through :func:`write_atomically`."""
    write_atomically(path, lambda fh: np.save(fh, array, allow_pickle=False),
                     overwrite=overwrite)


def write_csv_atomically(path, array, *, overwrite: bool | None = None) -> None:
    """``np.savetxt`` (comma-separated, full precision), through :func:`write_atomically`."""
    write_atomically(path, lambda fh: np.savetxt(fh, array, delimiter=","),
                     overwrite=overwrite)


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


def fingerprint(path) -> tuple[int, str]:
    """A file's size in bytes and the SHA-256 hex digest of its content."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(2**20), b""):
            digest.update(block)
    return os.path.getsize(path), digest.hexdigest()


# ----------------------------------------------------------------------------- claims


class OutputClaim:
    """An output file reserved by this process (:func:`claim_output`) until it is written.

    Attributes
    ----------
    path : Path
        The output.
    replace : bool
        Whether publishing may replace a file at ``path`` (it existed, and the
        command may replace it); otherwise a file that appears there meanwhile is
        kept and the write fails.
    lock : Path
        The lock file beside ``path`` that other processes see.
    """

    def __init__(self, path: Path, replace: bool, lock: Path):
        self.path, self.replace, self.lock = path, replace, lock

    def release(self) -> None:
        """Give the output up (the lock file is removed); idempotent."""
        if _CLAIMS.get(_claim_key(self.path)) is self:
            del _CLAIMS[_claim_key(self.path)]
            self.lock.unlink(missing_ok=True)

    def __enter__(self) -> OutputClaim:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


_CLAIMS: dict[str, OutputClaim] = {}


def _claim_key(path: Path) -> str:
    return os.path.normcase(os.path.abspath(path))


def lock_path(path) -> Path:
    """The lock file of an output: hidden beside it, a fixed-length name (any valid
    output name leaves room for it)."""
    path = Path(path)
    digest = hashlib.sha256(path.name.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return path.with_name(f".kernelscale-{digest}.lock")


def _holder(lock: Path) -> tuple[int | None, str | None]:
    """The process id and host written in a lock file (None where unreadable)."""
    try:
        pid, host = lock.read_text().split(maxsplit=1)
        return int(pid), host.strip()
    except (OSError, ValueError):
        return None, None


def _is_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: alive
        return True
    return True


def claim_output(path, replace: bool) -> OutputClaim:
    """Reserve ``path`` for this process's result, before the work that computes it.

    A lock file beside ``path`` (:func:`lock_path`), created exclusively, holds
    this process's id and host; it is removed when the result is written
    (:func:`write_atomically` of ``path`` publishes as ``replace`` says and
    releases the claim), by :meth:`OutputClaim.release`, or when the process
    exits. A lock left by a process that no longer runs on this host is taken
    over.

    Raises
    ------
    FileExistsError
        Another process is writing ``path`` now. (A second claim by this process
        returns its first, with ``replace`` updated.)
    """
    path = Path(path)
    key = _claim_key(path)
    if key in _CLAIMS:  # claimed again by this process (a second command in one session)
        _CLAIMS[key].replace = replace
        return _CLAIMS[key]
    lock = lock_path(path)
    host = socket.gethostname()
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            pid, holder_host = _holder(lock)
            if pid is not None and holder_host == host and not _is_alive(pid):
                lock.unlink(missing_ok=True)  # left by a process that was killed
                continue
            who = (f"process {pid} on {holder_host}" if pid is not None
                   else "another process")
            raise FileExistsError(
                errno.EEXIST, f"another kernelscale command ({who}) is writing it now (its "
                f"lock {lock.name}; remove that file if no such command runs)",
                str(path)) from None
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{os.getpid()} {host}\n")
        claim = OutputClaim(path, replace, lock)
        _CLAIMS[key] = claim
        return claim
    raise FileExistsError(errno.EEXIST, "its lock file could not be taken", str(path))


def release_claims() -> None:
    """Release every output this process still claims (the command line does on exit)."""
    for claim in list(_CLAIMS.values()):
        claim.release()


atexit.register(release_claims)


__all__ = ["OutputClaim", "Terminated", "check_writable", "claim_output", "fingerprint",
           "lock_path",
           "release_claims", "terminating_signals_raise", "write_atomically",
           "write_csv_atomically", "write_npy_atomically", "write_npz_atomically"]
