"""The command line's Dask options: ``--scheduler``, ``--dask-workers``, ``--timeout``, ``--jobs``.

The ``kernelscale`` command adds them with :func:`add_dask_args` and opens the
client they ask for with :func:`cli_client` around every subcommand.
"""

from __future__ import annotations

import contextlib

from kernelscale.backends.dask.client import NotDaskError, dask_client


def _positive_seconds(text: str) -> float:
    """argparse type of ``--timeout``: a finite number of seconds above 0."""
    import argparse

    from kernelscale.cli_common import positive_float

    try:
        return positive_float(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"must be a positive number of seconds, got {text!r}") from None


def _threads(text: str) -> int:
    """argparse type of ``--jobs``: a non-zero integer (-1: every core)."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value == 0:
        raise argparse.ArgumentTypeError(
            f"must be a number of threads (1, 2, ...) or -1 for every core, got {text!r}")
    return value


def add_dask_args(parser) -> None:
    """Add ``--scheduler`` / ``--dask-workers`` (exclusive), ``--timeout`` and ``--jobs``.

    The ``kernelscale`` command opens the client they ask for (``args.client``,
    ``None`` for in-process) around every subcommand.
    """
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--scheduler", help="run on an existing Dask cluster (tcp://host:8786)")
    group.add_argument("--dask-workers", type=int,
                       help="start a local Dask cluster of N single-threaded worker processes")
    parser.add_argument("--timeout", type=_positive_seconds, default=None,
                        help="Dask only: seconds to connect to --scheduler (default 30) and "
                        "that a round may take before it fails (default 600)")
    parser.add_argument("--jobs", type=_threads, default=-1,
                        help="in-process threads, as scikit-learn's n_jobs (default -1: every "
                        "core; 1: one thread); ignored on Dask")


@contextlib.contextmanager
def cli_client(args):
    """The Dask client asked for by ``--scheduler`` / ``--dask-workers`` (``None``: in-process).

    A context manager: a local cluster started for ``--dask-workers`` stops at exit.
    ``--timeout`` also bounds connecting to ``--scheduler`` (a hard deadline, see
    :func:`dask_client`); a scheduler that cannot be reached in time, or a listener
    that does not speak Dask's protocol, is an ``OSError`` naming the address.
    """
    scheduler, n_workers = getattr(args, "scheduler", None), getattr(args, "dask_workers", None)
    if scheduler is None and n_workers is None:
        yield None
        return
    timeout = getattr(args, "timeout", None)
    try:
        client = dask_client(scheduler, n_workers, timeout=timeout)
    except (OSError, ValueError) as exc:  # unreachable, silent, not Dask, or not an address
        if scheduler is None:
            raise
        reason = str(exc)
        if reason.startswith(f"{scheduler} "):  # dask_client's own errors name the address
            reason = f"it {reason[len(scheduler) + 1:]}"
        advice = ("check --scheduler (a Dask scheduler's address, tcp://host:8786)"
                  if isinstance(exc, (NotDaskError, ValueError)) else
                  "check --scheduler, or give it longer with --timeout")
        raise OSError(f"cannot connect to the Dask scheduler at {scheduler}: {reason}; "
                      f"{advice}") from exc
    with client:
        yield client



__all__ = ["add_dask_args", "cli_client"]
