"""Declarative experiment specs: what to run, not how.

An :class:`Experiment` names a dataset (a name of
:data:`kernelscale.datasets.DATASETS` or a factory), a kernel rule, the methods,
the swept landmark budget, the seeds, the worker counts and the partition
rule. :func:`kernelscale.bench.runner.run_experiment` turns it into one CSV
row per (workers, method, budget, seed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from kernelscale.datasets import DATASETS, load_dataset

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


def word_methods(**paper) -> tuple[Method, ...]:
    """The methods of a word-budget sweep: disKPCA (ridge and paper samplers) and its baselines.

    ``paper`` holds the paper sampler's options (``embedding_dim``,
    ``row_sketch_dim``, ``n_random_features``, ``embedding_dtype``).
    """
    paper = {"sampler": "paper", **paper}
    return (
        Method("diskpca ridge (gram)", "diskpca", {"sampler": "ridge", "messages": "gram"}),
        Method("diskpca paper (gram)", "diskpca", {"messages": "gram", **paper}),
        Method("diskpca paper (sketch)", "diskpca", {"messages": "sketch", **paper}),
        Method("uniform + disLR", "uniform_dislr", {"messages": "gram"}),
        Method("uniform + batch", "uniform_batch"),
    )


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
    dataset : str or callable
        A name of :data:`kernelscale.datasets.DATASETS` (``'letter'``,
        ``'spam'``...), loaded by :func:`kernelscale.datasets.load_dataset`
        with :attr:`dataset_options`; or ``dataset() -> X`` (dense array or
        CSR), deterministic.
    kernel : dict
        :func:`kernelscale.kernels.make_kernel` arguments; ``sigma_scale`` (with
        ``name='rbf'``) means ``sigma = sigma_scale x`` the median pairwise
        distance of a subset (:func:`kernelscale.kernels.median_heuristic`).
    methods : tuple of Method
    budgets : tuple of int
        The swept ``n_landmarks`` values (|Y|), when :attr:`word_budgets` is empty.
    word_budgets : tuple of int
        Fit-word budgets B: when given, every budgeted method runs at the
        largest |Y| whose forecast fit words fit in each B
        (:mod:`kernelscale.bench.sweep`), so all methods cover the same words.
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
        Field overrides for ``--quick`` (a smoke run of a few seconds), e.g.
        ``{"dataset_options": {"n_samples": 2000}}`` for a subset of a named set.
    dataset_options : dict
        Options for :func:`~kernelscale.datasets.load_dataset` when
        ``dataset`` is a name (``n_samples``, ``random_state``, ``standardize``...).
    reference_cache : str
        Path prefix of cached exact references (``<prefix>_uncentred.npz`` /
        ``_centred.npz`` with ``trace``, ``opt``, ``center_norm_sq`` and the
        data's ``fingerprint``, as ``benchmarks/sampler.py`` writes them), used
        when the fingerprint matches instead of recomputing the optimum.
    downstream : str
        ``'kmeans'``: after each fit the workers project their rows on the k
        components and run distributed k-means (k clusters) on them (paper 001,
        Figure 8); ``''``: none.
    coreset_size : int
        Coreset size of the distributed k-means.
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
    dataset_options: dict = field(default_factory=dict)
    word_budgets: tuple = ()
    reference_cache: str = ""
    downstream: str = ""
    coreset_size: int = 1000

    def __post_init__(self) -> None:
        if isinstance(self.dataset, str):
            if self.dataset not in DATASETS:
                raise ValueError(f"Unknown data set {self.dataset!r}; choose one of "
                                 f"{', '.join(DATASETS)}.")
        elif not callable(self.dataset):
            raise TypeError(f"dataset must be a data set name or a callable, got "
                            f"{self.dataset!r}")
        elif self.dataset_options:
            raise ValueError("dataset_options apply to a named data set only; "
                             "bind a callable's arguments with functools.partial")
        if self.downstream not in ("", "kmeans"):
            raise ValueError(f"downstream must be '' or 'kmeans', got {self.downstream!r}")

    def load_data(self, return_labels: bool = False):
        """The experiment's data ``X`` (``(X, y)`` with ``return_labels``).

        ``y`` is None where there are no labels: a callable dataset, or a named
        set without labels (``'sparse_bow'``).
        """
        if isinstance(self.dataset, str):
            X, y = load_dataset(self.dataset, **self.dataset_options)
        else:
            X, y = self.dataset(), None
        return (X, y) if return_labels else X

    def quick_version(self) -> Experiment:
        """The ``--quick`` variant: this spec with :attr:`quick` applied.

        ``dataset_options`` in :attr:`quick` update the spec's own (a quick run
        of ``standardize=True`` data stays standardised).
        """
        overrides = dict(self.quick)
        if "dataset_options" in overrides and "dataset" not in overrides:
            overrides["dataset_options"] = {**self.dataset_options,
                                            **overrides["dataset_options"]}
        return replace(self, **overrides, quick={})
