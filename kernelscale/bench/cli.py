"""``kernelscale bench NAME [--quick] [--plot]``: run a registered experiment."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelscale.bench.experiments import EXPERIMENTS, get_experiment
from kernelscale.bench.plot import plot_results, write_summary
from kernelscale.bench.runner import RESULTS_ROOT, run_experiment
from kernelscale.cli_common import UsageError, add_force_arg, check_output, print_error

#: The files a run writes in its results directory (figures aside).
RESULT_FILES = ("results.csv", "summary.md", "meta.json")


def _is_bench_csv(path: Path) -> bool:
    """Whether ``path`` is a results.csv that a bench run wrote: its header is ours."""
    from kernelscale.bench.runner import COLUMNS

    try:
        with open(path, encoding="utf-8") as handle:
            return handle.readline().rstrip("\r\n") == ",".join(COLUMNS)
    except (OSError, UnicodeDecodeError):
        return False


def check_results_dir(out_dir: Path, force: bool) -> None:
    """The results directory may be written: what it holds is a bench run's, or ``force``.

    Its ``results.csv`` carries the bench's header when a run wrote it; the other
    files a run writes are replaced only beside such a CSV (or with ``--force``).
    """
    csv_path = out_dir / "results.csv"
    ours = _is_bench_csv(csv_path)
    for name in RESULT_FILES:
        check_output(out_dir / name, [], force or ours, flag="--out",
                     replaceable=None, create_parents=True)
    if not ours and not force and out_dir.is_dir() \
            and any(p.suffix == ".png" for p in out_dir.iterdir()):
        raise UsageError(f"--out: {out_dir} holds figures but no results.csv of a bench run; "
                         "give --force to replace them, or choose another --out")


def add_subcommand(subparsers) -> None:
    """Register ``bench`` on an ``argparse`` subparsers object."""
    parser = subparsers.add_parser(
        "bench", help="run a benchmark experiment (paper 001, section 6)",
        description="Run a named experiment; write results.csv, summary.md (and PNG figures "
                    "with --plot) under benchmarks/results/<NAME>/.")
    parser.add_argument("name", help="experiment name, or 'list': "
                        + ", ".join(sorted(EXPERIMENTS)))
    parser.add_argument("--quick", action="store_true",
                        help="a small smoke run (written to <out>/<NAME>/quick/)")
    parser.add_argument("--plot", action="store_true", help="also draw the PNG figures")
    parser.add_argument("--plot-only", action="store_true",
                        help="redraw figures and summary from an existing results.csv")
    parser.add_argument("--out", default=str(RESULTS_ROOT),
                        help=f"results root directory (default {RESULTS_ROOT})")
    add_force_arg(parser, "results file (results.csv, summary.md, meta.json, figures)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--threads", type=int, default=1,
                        help="BLAS threads during the run (0: leave the default)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the experiment ``args.name``; returns an exit code."""
    if args.name == "list":
        for name in sorted(EXPERIMENTS):
            print(f"{name}: {EXPERIMENTS[name].description}")
        return 0
    try:
        experiment = get_experiment(args.name, quick=args.quick)
    except ValueError as exc:
        print_error(exc)
        return 2
    out_dir = Path(args.out) / args.name / ("quick" if args.quick else "")
    csv_path = out_dir / "results.csv"
    try:
        check_results_dir(out_dir, getattr(args, "force", False))
    except UsageError as exc:
        print_error(exc)
        return 2
    if getattr(args, "plot_only", False):
        if not csv_path.exists():
            print_error(f"no results at {csv_path}; run without --plot-only.")
            return 2
    else:
        threads = getattr(args, "threads", 1)
        csv_path = run_experiment(experiment, out_dir, quiet=args.quiet,
                                  blas_threads=threads if threads and threads > 0 else None)
    summary = write_summary(csv_path)
    print(f"results: {csv_path}\nsummary: {summary}")
    if args.plot or getattr(args, "plot_only", False):
        try:
            for path in plot_results(csv_path):
                print(f"figure: {path}")
        except ImportError as exc:
            print_error(exc)
            return 2
    return 0


def main(argv=None) -> int:
    """``python -m kernelscale.bench.cli bench NAME``: the same as ``kernelscale bench NAME``."""
    from kernelscale.cli import main as kernelscale_main

    return kernelscale_main(argv)


if __name__ == "__main__":
    sys.exit(main())
