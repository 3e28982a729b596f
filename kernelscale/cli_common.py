"""What every ``kernelscale`` subcommand shares: one error form, checked flag values,
the data-file options.

* Errors, warnings and notes are one line on stderr, ``kernelscale: error: ...``,
  ``kernelscale: warning: ...``, ``kernelscale: note: ...``, whichever
  subcommand prints them; a mistake on
  the command line itself (:class:`ArgumentParser`) adds where the help is,
  ``; see 'kernelscale fit --help'``, instead of argparse's usage block.
* Numbers that must be positive are checked by argparse (:func:`positive_int`,
  :func:`positive_float`), so the error names the flag the user typed.
* ``--header`` / ``--no-header`` (:func:`add_header_arg`) override the CSV
  header rule of :func:`kernelscale.datasets.load_csv` (:func:`load_options`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


class UsageError(Exception):
    """A mistake of the user's: one line on stderr, exit code 2."""


def _one_line(message) -> str:
    """``message`` on a single line (exception texts may hold newlines)."""
    return " ".join(str(message).split())


def print_error(message) -> None:
    """``kernelscale: error: <message>`` on stderr, on one line (every subcommand's form)."""
    print(f"kernelscale: error: {_one_line(message)}", file=sys.stderr)


def print_warning(message) -> None:
    """``kernelscale: warning: <message>`` on stderr, on one line."""
    print(f"kernelscale: warning: {_one_line(message)}", file=sys.stderr)


def print_note(message) -> None:
    """``kernelscale: note: <message>`` on stderr, on one line."""
    print(f"kernelscale: note: {_one_line(message)}", file=sys.stderr)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line: the error and where the help is.

    Subparsers are of the same class (``add_subparsers`` uses the parent's class).
    """

    def error(self, message: str):
        print_error(f"{message}; see '{self.prog} --help'")
        self.exit(2)

    def parse_args(self, args=None, namespace=None):
        """As argparse's, but unknown options are the subcommand's error (its --help)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self
            for action in self._actions:
                if isinstance(action, argparse._SubParsersAction):
                    parser = action.choices.get(getattr(parsed, action.dest, None), self)
            parser.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number above 0."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


#: The data files every subcommand reads (kernelscale.datasets.load).
DATA_HELP = (".npy (memory-mapped), .csv/.txt, LIBSVM (.svm, .libsvm, .svmlight) or Parquet "
             "(.parquet) file")

#: Extensions read as delimited text, where ``--header`` / ``--no-header`` apply.
TEXT_EXTENSIONS = (".csv", ".txt")


def add_header_arg(p: argparse.ArgumentParser) -> None:
    """``--header`` / ``--no-header``: override the CSV header rule (default: the rule)."""
    p.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                   help="CSV/text input: the first row is a header (--header) or data "
                   "(--no-header); default: a header when all its fields are non-numeric, "
                   "an error when it mixes numbers and text")


def load_options(paths: list, header: bool | None) -> list[dict]:
    """Loader keyword arguments for each of ``paths`` from ``--header`` / ``--no-header``.

    The flag applies to the CSV/text files; given for none of them, it is an error.
    """
    is_text = [Path(path).suffix.lower() in TEXT_EXTENSIONS for path in paths]
    if header is not None and not any(is_text):
        raise UsageError(f"--header/--no-header apply to CSV/text files "
                         f"({', '.join(TEXT_EXTENSIONS)}), not {', '.join(map(str, paths))}")
    return [{"header": header} if text and header is not None else {} for text in is_text]
