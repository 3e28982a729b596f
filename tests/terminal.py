"""A stand-in for an interactive terminal on stderr (tests only)."""

from __future__ import annotations


class Terminal:
    """stderr as an interactive terminal (tqdm asks ``isatty``); what was written is in
    ``text``."""

    def __init__(self):
        self.text = []

    def write(self, text):
        self.text.append(text)

    def flush(self):
        pass

    def isatty(self):
        return True
