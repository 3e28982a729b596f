"""``flower-supernode`` with a shorter idle wait, for a federation on one machine.

Flower 1.41's SuperNode sleeps a fixed 3 s whenever a poll of the SuperLink
finds no message (``flwr/supernode/start_client_internal.py``). In a protocol
of many short rounds that wait comes twice per round (before the node pulls the
round's message, and before it pushes the reply, which is not ready at the
pull), so a round of milliseconds of work takes 3-7 s. This launcher runs the
same SuperNode, with the same arguments, and only that idle wait shortened to
``KERNELSCALE_SUPERNODE_IDLE_SECONDS`` (default 0.1 s).
:class:`~kernelscale.backends.flower.local.LocalFederation` starts its nodes
through it (tests, demos); a real deployment runs ``flower-supernode`` itself::

    python -m kernelscale.backends.flower.supernode --insecure --superlink 127.0.0.1:9093 ...
"""

from __future__ import annotations

import os
import sys
import time
import warnings

IDLE_ENV = "KERNELSCALE_SUPERNODE_IDLE_SECONDS"
FLOWER_IDLE_SECONDS = 3  # the fixed wait of Flower 1.41


class _ShortIdle:
    """The ``time`` module as the SuperNode's loop sees it: its 3 s idle wait shortened."""

    def __init__(self, idle_seconds: float, clock=time):
        self.idle_seconds = idle_seconds
        self._clock = clock

    def __getattr__(self, name):
        return getattr(self._clock, name)

    def sleep(self, seconds: float) -> None:
        self._clock.sleep(self.idle_seconds if seconds == FLOWER_IDLE_SECONDS else seconds)


def main() -> int:
    from flwr.supernode import start_client_internal
    from flwr.supernode.cli import flower_supernode

    idle = float(os.environ.get(IDLE_ENV, "0.1"))
    if getattr(start_client_internal, "time", None) is time:
        start_client_internal.time = _ShortIdle(idle)
    else:  # another Flower layout: run it unchanged
        warnings.warn("This Flower version's SuperNode loop is not the one this launcher "
                      "knows; running it with its own idle wait.", RuntimeWarning, stacklevel=1)
    sys.argv[0] = "flower-supernode"
    return flower_supernode()


if __name__ == "__main__":
    sys.exit(main())
