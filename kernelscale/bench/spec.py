"""Declarative experiment specs: what to run, not how.

An :class:`Experiment` names a dataset factory, a kernel rule, the methods,
the swept landmark budget, the seeds, the worker counts and the partition
rule. :func:`kernelscale.bench.runner.run_experiment` turns it into one CSV
row per (workers, method, budget, seed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

METHOD_FUNCTIONS = ("diskpca", "uniform_dislr", "uniform_batch", "exact", "random_features",
                    "sklearn_kpca")


@dataclass(frozen=True)
class Method:
    """One method of an experiment.

    Parameters
    ----------
    label : str
        Name in the CSV and the legends (e.g. ``'diskpca (gram)'``).
    function : str
        One of :data:`METHOD_FUNCTIONS`.
    options : dict
        Extra keyword arguments for the function (``messages='sketch'``...).
    budgeted : bool
        Whether the method takes ``n_landmarks``; unbudgeted methods run once
        per (workers, seed) with ``budget`` left empty in the CSV.
    """

    label: str
    function: str
    options: dict = field(default_factory=dict)
    budgeted: bool = True

    def __post_init__(self) -> None:
        if self.function not in METHOD_FUNCTIONS:
            raise ValueError(f"Unknown method function {self.function!r}; choose one of "
                             f"{', '.join(METHOD_FUNCTIONS)}.")


def diskpca_methods(**options) -> tuple[Method, ...]:
    """disKPCA as the paper has it (its sampler; gram and sketch messages) and its baselines."""
    options = {"sampler": "paper", **options}
    return (
        Method("diskpca (gram)", "diskpca", {"messages": "gram", **options}),
        Method("diskpca (sketch)", "diskpca", {"messages": "sketch", **options}),
        Method("uniform + disLR", "uniform_dislr", {"messages": "gram"}),
        Method("uniform + batch", "uniform_batch"),
    )


@dataclass(frozen=True)
class Experiment:
    """A benchmark experiment.

    Parameters
    ----------
    name : str
        Results go to ``benchmarks/results/<name>/``.
    dataset : callable
        ``dataset() -> X`` (dense array or CSR), deterministic.
    kernel : dict
        :func:`kernelscale.kernels.make_kernel` arguments; ``sigma_scale`` (with
        ``name='rbf'``) means ``sigma = sigma_scale x`` the median pairwise
        distance of a subset (:func:`kernelscale.kernels.median_heuristic`).
    methods : tuple of Method
    budgets : tuple of int
        The swept ``n_landmarks`` values (|Y|).
    seeds : tuple of int
        Each seed draws the partition and the algorithm's randomness.
    workers : tuple of int
        Numbers of workers (one sweep per value).
    partition : str
        ``'power_law'`` or ``'uniform'`` (:func:`kernelscale.partition.make_partition`).
    n_components : int
        k.
    center : bool
        Centre in feature space (needed for the scikit-learn comparison).
    reference : bool
        Compute the exact optimum (needs the n x n kernel matrix; small n only).
    description : str
        One line for the summary.
    quick : dict
        Field overrides for ``--quick`` (a smoke run of a few seconds).
    """

    name: str
    dataset: Callable
    kernel: dict
    methods: tuple
    budgets: tuple = (50, 100, 200, 400)
    seeds: tuple = (0, 1, 2, 3, 4)
    workers: tuple = (50,)
    partition: str = "power_law"
    n_components: int = 10
    center: bool = False
    reference: bool = False
    description: str = ""
    quick: dict = field(default_factory=dict)

    def quick_version(self) -> Experiment:
        """The ``--quick`` variant: this spec with :attr:`quick` applied."""
        return replace(self, **self.quick, quick={})
