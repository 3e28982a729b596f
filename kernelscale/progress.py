"""Logging and progress bars: the ``"kernelscale"`` logger and tqdm bars over protocol rounds.

Every part of the library logs to a child of the ``"kernelscale"`` logger
(``"kernelscale.horizontal"``, ``"kernelscale.vertical"``, ``"kernelscale.federated"``,
``"kernelscale.streaming"``): one INFO line per fit (what ran, words, seconds) and
one DEBUG line per protocol round (its name, phase, seconds and the words so
far). Estimators take ``verbose``:

* ``0`` (default): nothing is shown; the lines still reach the logger, for an
  application that configures logging itself;
* ``1``: a tqdm progress bar over the protocol's rounds (the stream's batches
  for ``StreamingKernelPCA``) when stderr is a terminal or a notebook, and the
  INFO lines (in a pipe or a log file: the INFO lines only, no bar);
* ``2`` or more: the DEBUG lines too.

For the duration of the call, ``verbose`` lowers the ``"kernelscale"`` logger to
INFO (or DEBUG) unless the application has set a level on that logger; when
logging is not configured at all, the lines go to stderr through
``tqdm.write``, so they do not break the bar.

The bar counts rounds as they end; it is driven by the runtime's listener hook
(:meth:`kernelscale.runtime.Cluster.add_listener`). A cluster whose rounds take
seconds (``FlowerCluster``: a message through the SuperLink and back) sets
``show_progress = True``: its fits show the bar even at ``verbose=0`` when
stderr is an interactive terminal (rounds done, the round just finished, the
elapsed time). The rule is the same for every bar, the command line's
included (:func:`progress_bar`): a bar only on a terminal (or in a notebook),
never in a pipe, a log file or a test, where a bar's carriage returns would
pile hundreds of updates into one line.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tqdm.auto import tqdm

LOGGER = logging.getLogger("kernelscale")


def get_logger(name: str) -> logging.Logger:
    """The logger ``kernelscale.<name>`` (e.g. ``get_logger("horizontal")``)."""
    return logging.getLogger(f"{LOGGER.name}.{name}")


class _TqdmHandler(logging.Handler):
    """Writes records with ``tqdm.write``: above a running bar, not through it."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except Exception:  # logging's own contract: report, never raise
            self.handleError(record)


@contextmanager
def verbosity(verbose) -> Iterator[None]:
    """Show the library's log lines during the block, as ``verbose`` asks (module docstring)."""
    if not verbose:
        yield
        return
    level = logging.INFO if verbose == 1 else logging.DEBUG
    saved_level, handler = LOGGER.level, None
    if not LOGGER.hasHandlers():  # logging is not configured: show the lines on stderr
        handler = _TqdmHandler()
        handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
        LOGGER.addHandler(handler)
    if saved_level == logging.NOTSET and LOGGER.getEffectiveLevel() > level:
        LOGGER.setLevel(level)
    try:
        yield
    finally:
        if handler is not None:
            LOGGER.removeHandler(handler)
        LOGGER.setLevel(saved_level)


def on_terminal() -> bool:
    """Whether a progress bar belongs on stderr: an interactive terminal, or a notebook
    (whose bars are widgets); not a pipe, a log file or a captured stream."""
    if "ipykernel" in sys.modules:
        return True
    isatty = getattr(sys.stderr, "isatty", None)
    try:
        return bool(isatty is not None and isatty())
    except (ValueError, OSError):  # a closed stream
        return False


def progress_bar(verbose, **options) -> tqdm:
    """A tqdm bar on stderr when ``verbose`` and stderr is a terminal (:func:`on_terminal`);
    disabled otherwise, so a pipe or a log gets no bar (one rule for every command and
    estimator). ``options`` go to ``tqdm``."""
    return tqdm(file=sys.stderr, disable=not (verbose and on_terminal()), dynamic_ncols=True,
                **options)


class RoundProgress:
    """A cluster listener: one bar step and one DEBUG line per protocol round.

    Parameters
    ----------
    cluster : Cluster
        The listener is added to it; its ledger gives the words so far.
    logger : logging.Logger
    desc : str
        The bar's label, also the start of each log line.
    verbose : int
        0 disables the bar (the DEBUG lines still reach the logger), unless the
        cluster's ``show_progress`` is true and stderr is a terminal.
    """

    def __init__(self, cluster, logger: logging.Logger, desc: str, verbose):
        self.cluster, self.logger, self.desc = cluster, logger, desc
        show = verbose or getattr(cluster, "show_progress", False)
        self.bar = progress_bar(show, desc=desc, unit="round")
        cluster.add_listener(self)

    def __call__(self, round: str, phase: str, seconds: float) -> None:
        if self.logger.isEnabledFor(logging.DEBUG):
            words = self.cluster.ledger.total_words(phase)
            self.logger.debug("%s: round %r (phase %s) took %.3f s; %s %s words so far",
                              self.desc, round, phase, seconds, f"{words:,}", phase)
        self.bar.set_postfix_str(round, refresh=False)
        self.bar.update(1)  # redraws (at most every 0.1 s)

    def close(self) -> None:
        self.bar.close()


@contextmanager
def track_rounds(cluster, logger: logging.Logger, desc: str, verbose) -> Iterator[RoundProgress]:
    """A :class:`RoundProgress` on ``cluster`` during the block (closed after it).

    Use it inside :func:`verbosity`, which decides what the log lines reach.
    """
    progress = RoundProgress(cluster, logger, desc, verbose)
    try:
        yield progress
    except BaseException:
        progress.bar.leave = False  # the error says what happened; no half-done bar
        raise
    finally:
        progress.close()
