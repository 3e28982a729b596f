"""Connecting to Dask: :func:`dask_client`, the scheduler probe and the workers' environment.

``dask_client(scheduler)`` first asks the peer who it is, under a hard deadline
(:func:`_probe_scheduler`), because ``distributed.Client`` alone waits forever on
a listener that never answers; ``dask_client(n_workers=N)`` starts a local
cluster whose worker processes get :data:`WORKER_MALLOC_ENV`.
"""

from __future__ import annotations

import contextlib
import os


class _NotDask(Exception):
    """The peer answered, but not as a Dask scheduler does."""


class NotDaskError(OSError):
    """``--scheduler`` names a listener that answers, but not in Dask's protocol."""


async def _identify(address: str, timeout: float) -> None:
    """Connect to ``address``, ask for its identity, and check it is a Dask scheduler.

    At most ``timeout`` seconds and a half (``asyncio.wait_for``); the connection is closed
    whatever happens.
    """
    import asyncio

    from distributed.comm import connect
    from distributed.security import Security

    # As distributed.Client connects: TLS settings from Dask's configuration.
    connection_args = Security().get_connection_args("client")
    comm = None

    async def ask() -> None:
        nonlocal comm
        comm = await connect(address, timeout=timeout, **connection_args)
        await comm.write({"op": "identity", "reply": True})
        reply = await comm.read()
        kind = reply.get("type") if isinstance(reply, dict) else None
        if kind != "Scheduler":
            raise _NotDask(f"it answered as a Dask {kind}, not the scheduler" if kind
                           else "its reply is not a Dask scheduler's identity")

    try:
        # A half second's grace lets distributed's own connect timeout speak first
        # (its message says why: refused, no such host).
        await asyncio.wait_for(ask(), timeout + 0.5)
    finally:
        if comm is not None:
            comm.abort()


def _probe_scheduler(address: str, timeout: float) -> None:
    """Check within about ``timeout`` seconds that ``address`` is a Dask scheduler.

    Runs :func:`_identify` on an event loop of its own in a daemon thread, and
    gives up when the thread has not finished shortly after the deadline (a
    peer that never answers cannot hold the caller). Raises an ``OSError``
    naming ``address``: not reachable within ``timeout`` seconds (refused,
    silent, no such host) or not speaking Dask's protocol.
    """
    import asyncio
    import threading

    from distributed.comm import registry
    from distributed.comm.addressing import parse_address, parse_host_port

    try:  # what connect() checks before it opens anything (a mistake, not the peer's)
        scheme, location = parse_address(address)
        registry.get_backend(scheme)
        if scheme in ("tcp", "tls"):
            parse_host_port(location)
    except ValueError as exc:
        raise ValueError(f"{address} is not a Dask scheduler address, such as "
                         f"tcp://host:8786 ({exc})") from exc
    outcome: dict = {}

    def run() -> None:
        try:
            asyncio.run(_identify(address, timeout))
        except BaseException as exc:  # noqa: BLE001 - reported to the caller below
            outcome["error"] = exc
        else:
            outcome["ok"] = True

    thread = threading.Thread(target=run, name="kernelscale-dask-probe", daemon=True)
    thread.start()
    thread.join(timeout + 2.5)
    error = outcome.get("error")
    if outcome.get("ok"):
        return
    silent = (f"{address} is not a reachable Dask scheduler within {timeout:g} s "
              "(no Dask answer in that time)")
    if thread.is_alive() or isinstance(error, (asyncio.TimeoutError, TimeoutError)):
        raise OSError(silent) from error
    if isinstance(error, OSError):  # refused or no such host: distributed's own message
        raise OSError(f"{address} is not a reachable Dask scheduler within {timeout:g} s "
                      f"({error})") from error
    detail = str(error) if isinstance(error, _NotDask) else "its reply is not a Dask message"
    raise NotDaskError(f"{address} does not speak Dask's protocol ({detail})") from error


#: glibc's allocator settings for the worker processes of :func:`dask_client`'s local
#: cluster, set before they start (Dask's ``distributed.nanny.pre-spawn-environ``).
#: Dask sets ``MALLOC_TRIM_THRESHOLD_=65536``, which also fixes the mmap threshold at
#: 128 KiB: every kernel block (a 4096 x 400 chunk is 13 MiB) is then mapped, zero-filled
#: page by page and unmapped again, and a fit on 2 workers took 1.3x as long as in-process
#: (``benchmarks/dask_overhead.py``). These are glibc's own dynamic limits at their
#: maximum. For workers started by ``dask worker``, export the same two variables
#: before starting them.
WORKER_MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": 32 * 2**20, "MALLOC_TRIM_THRESHOLD_": 64 * 2**20}


def dask_client(scheduler: str | None = None, n_workers: int | None = None,
                timeout: float | None = None):
    """A ``distributed.Client``: to ``scheduler``, or to a new local cluster.

    Parameters
    ----------
    scheduler : str, optional
        Address of a running scheduler, e.g. ``"tcp://host:8786"`` (CLI ``--scheduler``).
    n_workers : int, optional
        Without ``scheduler``: start a local cluster of this many single-threaded
        worker processes (CLI ``--dask-workers``). Their allocator keeps freed
        blocks up to 32 MiB for reuse (:data:`WORKER_MALLOC_ENV`) where Dask's
        default returns every block over 64 KiB to the system at once, which
        made each kernel block a fresh page-faulted mapping (1.3x slower fits).
    timeout : float, optional
        Seconds to wait for the connection to ``scheduler`` (CLI ``--timeout``);
        default: Dask's ``distributed.comm.timeouts.connect`` (30 s). A hard
        deadline: no listener, or one that accepts and never answers, is an
        ``OSError`` after about this long; one that answers in another protocol is
        a :class:`NotDaskError` (an ``OSError``) at once; a malformed address a
        ``ValueError``.

    Returns
    -------
    distributed.Client
        Close it when done (this also stops a local cluster it started), or
        use it as a context manager.
    """
    try:
        from distributed import Client
    except ImportError as exc:  # the optional extra
        raise ImportError(
            "The Dask backend needs dask[distributed]: pip install 'kernelscale[dask]'."
        ) from exc
    if scheduler is not None:
        if timeout is not None and not timeout > 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}.")
        if timeout is None:
            import dask
            from dask.utils import parse_timedelta

            timeout = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
        # distributed.Client(address, timeout=) alone waits forever on a listener that
        # accepts and stays silent, and fails with a MemoryError on one that answers
        # in another protocol: ask the scheduler who it is first, under a hard deadline.
        _probe_scheduler(scheduler, float(timeout))
        try:
            return Client(scheduler, timeout=timeout)
        except OSError:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure to connect is the address's
            raise OSError(f"{scheduler} answered, but connecting a Dask client failed "
                          f"({type(exc).__name__}: {exc})") from exc
    if n_workers is None or n_workers < 1:
        raise ValueError("Give a scheduler address or a positive number of Dask workers.")
    # The client owns this local cluster: closing the client stops its workers.
    with _worker_malloc_environ():
        return Client(n_workers=int(n_workers), threads_per_worker=1, processes=True,
                      dashboard_address=":0")


@contextlib.contextmanager
def _worker_malloc_environ():
    """:data:`WORKER_MALLOC_ENV` for the worker processes started inside, whatever is set.

    Dask's nanny takes a variable from ``os.environ`` before its config, and
    leaves its own values there (a plain Dask cluster started earlier in this
    process leaves ``MALLOC_TRIM_THRESHOLD_=65536``): both are set for the
    spawn, and the environment is put back afterwards.
    """
    import dask

    saved = {name: os.environ.get(name) for name in WORKER_MALLOC_ENV}
    os.environ.update({name: str(value) for name, value in WORKER_MALLOC_ENV.items()})
    try:
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{name}": value
                              for name, value in WORKER_MALLOC_ENV.items()}):
            yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

__all__ = ["NotDaskError", "WORKER_MALLOC_ENV", "dask_client"]
