"""What the real-data benchmark scripts under ``benchmarks/`` share: their options and CSV reading.

>>> args, out = script_arguments("demo", ["letter", "spam"], "/tmp/results/demo",
...                              ["--quick", "--datasets", "spam"], make_dir=False)
>>> args.datasets, args.seeds, str(out)
(['spam'], [0], '/tmp/results/demo/quick')
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Callable, Sequence
from pathlib import Path

__all__ = ["read_rows", "script_arguments", "verdict"]


def script_arguments(doc: str, datasets: Sequence[str], out, argv=None, make_dir: bool = True,
                     extra: Callable[[argparse.ArgumentParser], None] | None = None,
                     ) -> tuple[argparse.Namespace, Path]:
    """Parse a script's options; return them and its output folder.

    Options: ``--quick`` (a smoke run of seconds, written to ``OUT/quick``),
    ``--datasets`` (a subset of ``datasets``), ``--seeds N`` (seeds 0..N-1, 5 by
    default; ``--quick`` uses seed 0), ``--summary-only`` (rebuild the summary and
    plots from the CSV files already written) and ``--out`` (instead of ``out``).
    ``args.seeds`` is the list of seeds. ``extra(parser)`` adds a script's own options.
    """
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small smoke run (seconds)")
    parser.add_argument("--datasets", nargs="+", choices=list(datasets), default=list(datasets))
    parser.add_argument("--seeds", type=int, default=5, help="number of seeds (0, 1, ...)")
    parser.add_argument("--summary-only", action="store_true",
                        help="rebuild summary.md and the plots from the CSV files")
    parser.add_argument("--out", type=Path, default=Path(out))
    if extra is not None:
        extra(parser)
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error(f"--seeds must be at least 1, got {args.seeds}")
    args.seeds = [0] if args.quick else list(range(args.seeds))
    folder = args.out / "quick" if args.quick else args.out
    if make_dir:
        folder.mkdir(parents=True, exist_ok=True)
    return args, folder


def _value(text: str):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def read_rows(path) -> list[dict]:
    """Rows of a CSV written by :func:`kernelscale.bench.write_rows`, numbers as int or float.

    A field that parses as an int becomes an int, else as a float a float; the
    rest (names, labels, empty fields) stay strings.
    """
    with open(path, newline="") as handle:
        return [{key: _value(value) for key, value in row.items()}
                for row in csv.DictReader(handle)]


def verdict(holds: bool) -> str:
    """A summary's verdict on a paper's claim: ``'**holds**'`` or ``'**does not hold**'``."""
    return "**holds**" if holds else "**does not hold**"
