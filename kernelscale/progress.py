"""A minimal progress bar on stderr (no dependency): ``with Progress(total, "fit") as bar``."""

from __future__ import annotations

import sys
import time


class Progress:
    """Counts steps (or points) and redraws one stderr line with the rate.

    Parameters
    ----------
    total : int or None
        Expected count (None: unknown, no percentage).
    label : str
    unit : str
        What is counted ('runs', 'points', ...).
    stream : file, default sys.stderr
    enabled : bool
        False turns every call into a no-op (for ``--quiet``).
    """

    def __init__(self, total=None, label="", unit="steps", stream=None, enabled=True):
        self.total, self.label, self.unit = total, label, unit
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.count = 0
        self.start = time.perf_counter()
        self.status = ""

    def update(self, n: int = 1, status: str = "") -> None:
        self.count += n
        self.status = status
        if self.enabled:
            self._draw()

    def _draw(self) -> None:
        elapsed = max(time.perf_counter() - self.start, 1e-9)
        rate = self.count / elapsed
        done = f"{self.count:,}" + (f"/{self.total:,}" if self.total else "")
        pct = f" {100 * self.count / self.total:5.1f}%" if self.total else ""
        speed = f"[{rate:,.1f} {self.unit}/s, {elapsed:.1f}s]"
        line = f"\r{self.label} {done}{pct} {speed} {self.status}"
        self.stream.write(line[:120].ljust(80))
        self.stream.flush()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
