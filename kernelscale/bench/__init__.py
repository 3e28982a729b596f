"""Benchmark harness: declarative experiments, a runner writing CSV, plots and summaries.

>>> from kernelscale.bench import get_experiment, run_experiment  # doctest: +SKIP
>>> csv_path = run_experiment(get_experiment("diskpca_digits_rbf", quick=True))  # doctest: +SKIP
"""

from kernelscale.bench.experiments import EXPERIMENTS, get_experiment
from kernelscale.bench.plot import plot_results, read_results, write_summary
from kernelscale.bench.runner import (
    COLUMNS,
    check_gram_entries,
    exact_reference,
    resolve_kernel,
    run_experiment,
    write_rows,
)
from kernelscale.bench.spec import Experiment, Method, diskpca_methods

__all__ = [
    "COLUMNS",
    "EXPERIMENTS",
    "Experiment",
    "Method",
    "check_gram_entries",
    "diskpca_methods",
    "exact_reference",
    "get_experiment",
    "plot_results",
    "read_results",
    "resolve_kernel",
    "run_experiment",
    "write_rows",
    "write_summary",
]
