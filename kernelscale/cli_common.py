"""What every ``kernelscale`` subcommand shares: one error form, checked flag values,
the data-file options.

* Errors, warnings and notes are one line on stderr, ``kernelscale: error: ...``,
  ``kernelscale: warning: ...``, ``kernelscale: note: ...``, whichever
  subcommand prints them; a mistake on
  the command line itself (:class:`ArgumentParser`) adds where the help is,
  ``; see 'kernelscale fit --help'``, instead of argparse's usage block.
* The estimators' messages name Python parameters; printed by a subcommand
  they name its flags instead (:func:`flag_names`, :func:`in_flags`:
  ``n_workers=5`` reads ``--workers 5``), and scikit-learn's minimum-samples
  message reads "the data has 1 row(s); at least 2 are needed".
* Numbers that must be positive are checked by argparse (:func:`positive_int`,
  :func:`positive_float`), so the error names the flag the user typed.
* ``--header`` / ``--no-header`` (:func:`add_header_arg`) override the CSV
  header rule of :func:`kernelscale.datasets.load_csv` (:func:`load_options`).
* Standard output is guarded (:class:`GuardedStdout`): a report that cannot be
  printed (a full disk, a closed pipe) is :class:`StdoutError`, said as such.
* Every command that writes a file checks it first with :func:`check_output`:
  never an input (under any name), an existing file replaced only when it is a
  kernelscale model file or with ``--force``, the directory writable before any
  work, and the output claimed so that a second command writing it at once is
  refused; the file is then written atomically (:mod:`kernelscale.files`).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path


class UsageError(Exception):
    """A mistake of the user's: one line on stderr, exit code 2."""


def _one_line(message) -> str:
    """``message`` on a single line (exception texts may hold newlines)."""
    return " ".join(str(message).split())


#: scikit-learn's check_array: too few samples or features for an estimator.
_SKLEARN_MINIMUM = re.compile(
    r"Found array with (\d+) (sample|feature)\(s\) \(shape=\([^)]*\)\) while a minimum "
    r"of (\d+) is required(?: by [\w.]+)?\.?")
#: scikit-learn's InvalidParameterError, once :func:`in_flags` has named the flag.
_SKLEARN_PARAMETER = re.compile(
    r"The '(--[\w-]+)' parameter of \w+ must be (.*)\. Got (.*) instead\.")


def flag_names(parser: argparse.ArgumentParser, renames: dict | None = None) -> dict:
    """``{Python parameter: flag}`` for a subcommand's ``parser``.

    Every long option maps from its ``dest`` (``--n-components`` from
    ``n_components``); ``renames`` adds the estimator parameters a flag sets
    under another name (``{"n_workers": "--workers"}``). A subcommand keeps it
    as its ``flag_names`` default, for :func:`in_flags`.
    """
    names = {}
    for action in parser._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if longs and action.dest not in ("help", "version"):
            names.setdefault(action.dest, longs[0])
    names.update(renames or {})
    return names


def in_flags(message, flags: dict | None = None) -> str:
    """``message`` as the command line says it: the flags for Python parameters.

    The estimators' messages name their parameters (right for the Python API);
    on the command line ``n_workers=5`` reads ``--workers 5``, ``header=True``
    reads ``--header`` (``=False``: ``--no-header``), and a parameter named alone
    (``sketch_size``) its flag. Only ``name=`` and names with an
    underscore are replaced, so that plain words (``kernel``, ``center``) in the
    prose stay. scikit-learn's "Found array with 1 sample(s) ... a minimum of 2
    is required by ..." reads "the data has 1 row(s); at least 2 are needed".
    """
    text = str(message)

    def minimum(match) -> str:
        what = "row(s)" if match.group(2) == "sample" else "column(s)"
        return f"the data has {match.group(1)} {what}; at least {match.group(3)} are needed"

    text = _SKLEARN_MINIMUM.sub(minimum, text)
    for name in sorted(flags or {}, key=len, reverse=True):
        flag = flags[name]
        # A switch: header=True reads --header, header=False --no-header.
        on, off = (f"--{flag[5:]}", flag) if flag.startswith("--no-") else (flag,
                                                                           f"--no-{flag[2:]}")
        text = re.sub(rf"(?<![-\w.]){re.escape(name)}=True\b", on, text)
        text = re.sub(rf"(?<![-\w.]){re.escape(name)}=False\b", off, text)
        text = re.sub(rf"(?<![-\w.]){re.escape(name)}=", f"{flag} ", text)
        if "_" in name:  # "2*n_components" reads "2 * --n-components"
            text = re.sub(rf"\*{re.escape(name)}(?![\w(])", f" * {flag}", text)
            text = re.sub(rf"(?<![-\w.]){re.escape(name)}(?![\w(])", flag, text)
        text = text.replace(f"The '{name}' parameter", f"The '{flag}' parameter")
    # "The '--gamma' parameter of X must be A. Got 0 instead." reads "--gamma must be A, got 0."
    return _SKLEARN_PARAMETER.sub(r"\1 must be \2, got \3.", text)


def print_error(message, flags: dict | None = None) -> None:
    """``kernelscale: error: <message>`` on stderr, on one line (every subcommand's form).

    ``flags``: the subcommand's :func:`flag_names`; the parameters in ``message``
    are then named by their flags (:func:`in_flags`).
    """
    print(f"kernelscale: error: {_one_line(in_flags(message, flags))}", file=sys.stderr)


def print_warning(message, flags: dict | None = None) -> None:
    """``kernelscale: warning: <message>`` on stderr, on one line (flags as in
    :func:`print_error`)."""
    print(f"kernelscale: warning: {_one_line(in_flags(message, flags))}", file=sys.stderr)


def print_note(message) -> None:
    """``kernelscale: note: <message>`` on stderr, on one line."""
    print(f"kernelscale: note: {_one_line(message)}", file=sys.stderr)


#: A negative number as a flag's value, scientific notation included (argparse's own
#: pattern takes ``-1e9`` for an option and says "expected one argument").
NEGATIVE_NUMBER = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$|^-inf(inity)?$",
                             re.IGNORECASE)


class ArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line: the error and where the help is.

    Subparsers are of the same class (``add_subparsers`` uses the parent's class).
    A value that is a negative number in any notation (``--coef0 -1e9``) is read
    as the value, so that the flag's own check can say what is wrong with it.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = NEGATIVE_NUMBER

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
    """argparse type: an integer from 1 to 2**63 - 1, also in scientific notation when
    exact (``1e6``, ``2.5e3``; not ``1.5``) and with ``_`` separators (``1_000_000``)."""
    try:
        number = Decimal(text.strip().replace("_", ""))
        exact = number.is_finite() and number.adjusted() < 19 \
            and number == number.to_integral_value()
        value = int(number) if exact and number < 2**63 else 0
    except (InvalidOperation, ValueError):
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


#: The seeds the command line takes: numpy's and scikit-learn's range.
MAX_SEED = 2**32 - 1


def seed_int(text: str) -> int:
    """argparse type: a random seed, an integer from 0 to 2**32 - 1."""
    try:
        value = int(text.strip().replace("_", ""))
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(
            f"must be an integer from 0 to {MAX_SEED} (a random seed), got {text!r}")
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


def check_degree(kernel: str, degree: int | None) -> None:
    """One message for every bad ``--degree`` of a kernel, before any work: a positive
    integer for ``poly``, the order 0, 1 or 2 for ``arccos``."""
    if degree is None:
        return
    if kernel == "poly" and degree < 1:
        raise UsageError(f"--degree must be a positive integer for --kernel poly (the "
                         f"polynomial's degree), got {degree}")
    if kernel == "arccos" and degree not in (0, 1, 2):
        raise UsageError(f"--degree is the arc-cosine order for --kernel arccos: 0, 1 or 2, "
                         f"got {degree}")


def check_coef0(kernel: str, coef0: float) -> None:
    """``--coef0`` of the polynomial kernel: a finite number >= 0 (a negative constant
    term can make the kernel indefinite), before any work."""
    if kernel == "poly" and not (0 <= coef0 < float("inf")):
        raise UsageError(f"--coef0 must be a finite number >= 0 for --kernel poly (a negative "
                         f"constant term can make the kernel indefinite), got {coef0:g}")


#: The data files every subcommand reads (kernelscale.datasets.load).
DATA_HELP = (".npy (memory-mapped), .csv/.txt (plain or .gz), LIBSVM (.svm, .libsvm, "
             ".svmlight) or Parquet (.parquet) file")

#: Extensions read as delimited text, where ``--header`` / ``--no-header`` apply.
TEXT_EXTENSIONS = (".csv", ".txt")


def add_header_arg(p: argparse.ArgumentParser) -> None:
    """``--header`` / ``--no-header``: override the CSV header rule (default: the rule)."""
    p.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                   help="CSV/text input: the first row is a header (--header) or data "
                   "(--no-header); default: a header when all its fields are non-numeric, "
                   "or when they are the column numbers 0,1,...,d-1 (or 1,...,d: pandas' "
                   "to_csv header) above a different row (a note says so); data when all "
                   "are numbers; an error when it mixes numbers and text")


def load_options(paths: list, header: bool | None) -> list[dict]:
    """Loader keyword arguments for each of ``paths`` from ``--header`` / ``--no-header``.

    The flag applies to the CSV/text files; given for none of them, it is an error.
    """
    from kernelscale.datasets.loaders import data_extension  # x.csv.gz is CSV too

    is_text = [data_extension(path) in TEXT_EXTENSIONS for path in paths]
    if header is not None and not any(is_text):
        raise UsageError(f"--header/--no-header apply to CSV/text files "
                         f"({', '.join(TEXT_EXTENSIONS)}), not {', '.join(map(str, paths))}")
    return [{"header": header} if text and header is not None else {} for text in is_text]


def check_not_an_input(out, inputs, flag: str = "--out") -> None:
    """An error when ``out`` is one of the files the command reads (it would be lost).

    The same file under another name (a relative path, a symbolic or hard link)
    counts too: ``os.path.samefile`` compares device and inode.
    """
    out = Path(out)
    if not out.exists():
        return
    for path in inputs:
        if isinstance(path, (str, os.PathLike)) and Path(path).exists() \
                and os.path.samefile(out, path):
            raise UsageError(f"{flag} {out} is the input file {path}: writing it would "
                             f"destroy the input; choose another {flag}")


def add_force_arg(p: argparse.ArgumentParser, what: str = "--out") -> None:
    """``--force``: let an output replace an existing file kernelscale did not write."""
    p.add_argument("--force", action="store_true",
                   help=f"replace an existing {what} that kernelscale cannot tell it wrote "
                   "(without it such a file is kept and the command stops before any work; "
                   "an input file is never replaced)")


def check_output(out, inputs, force: bool = False, *, suffixes=None, replaceable=None,
                 what: str = "", flag: str = "--out", create_parents: bool = False) -> Path:
    """Check and claim an output path before any work: the one rule of every command
    that writes.

    * ``suffixes``: the extensions the command writes (an error names them);
    * never one of ``inputs``, under any name (:func:`check_not_an_input`), even
      with ``--force``;
    * an existing file (or link) is replaced only when ``replaceable(out)`` says
      kernelscale wrote it (a model file carries its header) or with ``force``;
    * the directory must take a new file now (:func:`kernelscale.files.check_writable`),
      so a fit never runs for an output it cannot write;
    * the output is claimed for this process (:func:`kernelscale.files.claim_output`):
      a second command writing it at the same time is refused here, before its
      work, and a file that did not exist is never replaced by the publish.

    The file itself is then written atomically (:mod:`kernelscale.files`), which
    releases the claim (:func:`kernelscale.cli.main` releases any left).
    """
    from kernelscale.files import check_writable, claim_output

    out = Path(out)
    if suffixes and out.suffix not in suffixes:
        raise UsageError(f"{flag} must end in {' or '.join(suffixes)}, got {out.name}")
    check_not_an_input(out, inputs, flag)
    exists = os.path.lexists(out) and not out.is_dir()
    ours = exists and replaceable is not None and replaceable(out)
    if exists and not force and not ours:
        kind = "" if replaceable is None else f" and is not {what}"
        raise UsageError(f"{flag} {out} exists{kind}; give --force to replace it, or choose "
                         f"another {flag}")
    try:
        check_writable(out, create_parents=create_parents)
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from exc
    if not out.parent.is_dir():  # bench creates its directory later: nothing to lock yet
        return out
    try:
        claim_output(out, replace=force or ours)
    except FileExistsError as exc:
        raise UsageError(f"{flag} {out}: {exc.strerror}; wait for it, or choose another "
                         f"{flag}") from exc
    return out


def check_model_out(out, inputs, force: bool = False) -> Path:
    """Check a model ``--out`` before any work (:func:`check_output`): ``.npz``, not an
    input, and an existing file replaced only when it is a kernelscale model
    (:func:`kernelscale.model.is_model_file`) or with ``--force``.
    """
    from kernelscale.model import is_model_file

    if Path(out).suffix != ".npz":
        raise UsageError(f"--out must end in .npz (a model file, as 'kernelscale transform "
                         f"--model' reads), got {Path(out).name}")
    return check_output(out, inputs, force, replaceable=is_model_file,
                        what="a kernelscale model file")


class StdoutError(Exception):
    """Standard output cannot be written (a full disk, a closed pipe): the message says
    so, and which result files were written all the same."""


class GuardedStdout:
    """``sys.stdout`` whose write errors are :class:`StdoutError`, not a bare OSError that
    would read as if the result file could not be written."""

    def __init__(self, stream, written_before: int):
        self._stream, self._written_before = stream, written_before

    def _failed(self, exc: OSError) -> StdoutError:
        from kernelscale.files import written_since

        written = written_since(self._written_before)
        done = (f"; {', '.join(map(str, written))} {'was' if len(written) == 1 else 'were'} "
                "written whole" if written else "")
        return StdoutError(f"cannot write to standard output ({exc.strerror or exc}){done}")

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise self._failed(exc) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise self._failed(exc) from exc

    def __getattr__(self, name):
        return getattr(self._stream, name)


def discard_stdout(stream) -> None:
    """Point a failed stdout at the null device, so that the interpreter's last flush
    does not fail again with a second message."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # no file descriptor (a capture)
        pass
