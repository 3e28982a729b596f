"""The named experiments of paper 001, section 6 (parameters of section 6.2).

k = 10 components, embedding t = 50, row sketch p = 250, m = 2000 random
features, RBF bandwidth sigma = 0.2 x the median pairwise distance, polynomial
degree q = 4, arc-cosine degree 2, power-law partitions. The paper sweeps
|Y| from 50 to 400 for every method; here every method sweeps its own |Y|
over a shared grid of fit-word budgets (:data:`WORD_BUDGETS`,
:mod:`kernelscale.bench.sweep`), so that all methods cover the same words and
error is read against words. Methods: disKPCA with the ridge sampler (the
default) and with the paper's sampler (gram and sketch messages), uniform +
disLR, uniform + batch and exact KPCA.

Real data (Figures 2, 3, 6): digits (5 power-law workers, as the paper's
small sets), the UCI sets letter, satellite and spam (10 workers) and paper
001's own insurance set (Figures 2 and 3 only, 5 workers as its Table 1), each
feature standardised, polynomial gamma = 1/d; the exact optimum comes from the
cache of ``benchmarks/sampler.py`` (same data, same kernels). Synthetic
stand-ins (Figures 4-6): the papers' large data sets cannot be downloaded
here; the Gaussian-mixture (HIGGS-like, d = 28) and Zipf bag-of-words
(d = 100,000) stand-ins of :mod:`kernelscale.datasets` replace them, 50
workers. Figure 8: kernel PCA then distributed k-means (k = 10 clusters) on
the projections, the feature-space k-means objective and NMI against the
words of both.

An experiment may also name its data: ``Experiment(dataset="letter", ...)``
loads any name of :data:`kernelscale.datasets.DATASETS` (the bundled UCI sets
letter, satellite and spam, digits, the stand-ins, the cached LIBSVM sets)
through :func:`kernelscale.datasets.load_dataset`, with ``dataset_options``
such as ``{"n_samples": 2000}`` (a random subset) for ``quick``.
"""

from __future__ import annotations

from functools import partial

from kernelscale.bench.spec import Experiment, Method, word_methods
from kernelscale.bench.sweep import word_grid
from kernelscale.datasets import load_dataset

PAPER = {"embedding_dim": 50, "row_sketch_dim": 250, "n_random_features": 2000}
# Large runs: leverage-score embedding in float32 (sampling probabilities only).
LARGE = {**PAPER, "embedding_dtype": "float32"}
N_LARGE = 50_000  # 200,000 in the paper's spirit; cut for the shared 2-core machine
#: Shared fit-word budgets: 10^4 .. 10^6.5, two per decade.
WORD_BUDGETS = word_grid(4.0, 6.5, 2)
RBF = {"name": "rbf", "sigma_scale": 0.2, "n_subset": 2000}
EXACT = Method("exact KPCA (all data to master)", "exact", budgeted=False)
REFS = "benchmarks/results/sampler/refs"
REAL = {"digits": 64, "letter": 16, "satellite": 36, "spam": 57, "insurance": 85}  # name: d
REAL_WORKERS = {"digits": 5, "letter": 10, "satellite": 10, "spam": 10, "insurance": 5}
#: Paper 001's own small set (Table 1: 9,822 x 85, 5 workers; Figures 2 and 3, polynomial
#: and RBF). Its exact optimum is cached by ``benchmarks/diskpca_insurance.py``.
INSURANCE_REFS = "benchmarks/results/diskpca_insurance/refs"
UCI = ("digits", "letter", "satellite", "spam")
#: 001's figure of each kernel: its larger sets (Figures 4-6, which the UCI sets stand in
#: for) and its small sets (Figures 2-3, insurance and har).
FIGURES = {"poly": "Figure 4", "rbf": "Figure 5", "arccos": "Figure 6"}
SMALL_SET_FIGURES = {"poly": "Figure 2", "rbf": "Figure 3"}


def figure_of(dataset: str, which: str) -> str:
    """001's figure that a run of ``which`` kernel on ``dataset`` reproduces."""
    return (SMALL_SET_FIGURES if dataset == "insurance" else FIGURES)[which]


def gaussian_mixture(n_samples: int):
    return load_dataset("gaussian_mixture", n_samples=n_samples, n_features=28, random_state=0)[0]


def sparse_bow(n_samples: int, n_features: int = 100_000):
    return load_dataset("sparse_bow", n_samples=n_samples, n_features=n_features,
                        nnz_per_row=100, random_state=0)[0]


def real_kernel(which: str, n_features: int) -> dict:
    """Kernel spec on a standardised real set, as ``benchmarks/sampler.py`` (its refs' key)."""
    if which == "poly":
        return {"name": "poly", "degree": 4, "gamma": 1.0 / n_features, "coef0": 1.0}
    return RBF if which == "rbf" else {"name": "arccos", "order": 2}


def _real(dataset: str, which: str, refs: str = REFS, **extra) -> Experiment:
    cache = {"poly": "poly", "rbf": "rbf0.2", "arccos": "arccos"}[which]
    options = {} if dataset == "digits" else {"standardize": True}
    methods = word_methods(**PAPER) + (EXACT,)
    if dataset != "digits":  # a 2,000-point quick subset has no cached optimum
        quick_data = {"dataset_options": {"n_samples": 2000}}
    else:
        quick_data = {}
    # letter: uniform + batch at 10^6.5 words would be an 11,000-point dense eigh per fit
    budgets = WORD_BUDGETS[:-1] if dataset == "letter" else WORD_BUDGETS
    return Experiment(
        name=f"diskpca_{dataset}_{which}", dataset=dataset, dataset_options=options,
        kernel=real_kernel(which, REAL[dataset]), methods=methods, word_budgets=budgets,
        seeds=(0, 1, 2, 3, 4), workers=(REAL_WORKERS[dataset],), reference=dataset == "digits",
        reference_cache=f"{refs}/{dataset}_{cache}",
        description=f"{figure_of(dataset, which)} of 001 on {dataset}: {which} kernel, error "
                    "against fit "
                    "words, every method sized to the same word budgets.",
        quick={"word_budgets": WORD_BUDGETS[1:3], "seeds": (0,), **quick_data}, **extra)


def _kmeans(dataset: str, which: str) -> Experiment:
    exp = _real(dataset, which)
    methods = tuple(m for m in exp.methods if m.function != "exact" or dataset == "digits")
    # 3 seeds and 10^4.5 .. 10^6 words: the k-means rounds triple a fit's time here
    return Experiment(**{**exp.__dict__, "name": f"diskpca_kmeans_{dataset}_{which}",
                         "methods": methods, "downstream": "kmeans", "seeds": (0, 1, 2),
                         "word_budgets": WORD_BUDGETS[1:5],
                         "description": f"Figure 8 of 001 on {dataset}: {which} kernel PCA "
                                        "(k = 10), then distributed k-means (10 clusters) on "
                                        "the projections; objective and NMI against PCA + "
                                        "k-means words."})


def _large(name, dataset, kernel, description, n_quick_dataset, **extra):
    return Experiment(
        name=name, dataset=dataset, kernel=kernel, methods=word_methods(**LARGE),
        word_budgets=WORD_BUDGETS, seeds=(0, 1, 2, 3, 4), workers=(50,),
        description=description,
        quick={"word_budgets": WORD_BUDGETS[2:4], "seeds": (0,), "dataset": n_quick_dataset},
        **extra)


EXPERIMENTS = {
    e.name: e for e in (
        *(_real(d, w) for d in UCI for w in FIGURES),
        *(_real("insurance", w, INSURANCE_REFS) for w in ("poly", "rbf")),
        *(_kmeans(d, w) for d in UCI for w in ("poly", "rbf")),
        _large("diskpca_gmm_rbf", partial(gaussian_mixture, N_LARGE), RBF,
               "Figure 5 of 001: RBF on the HIGGS-like Gaussian mixture (n = 50,000, d = 28), "
               "50 power-law workers.", partial(gaussian_mixture, 5_000)),
        _large("diskpca_gmm_poly", partial(gaussian_mixture, N_LARGE),
               {"name": "poly", "degree": 4, "gamma": 1 / 28, "coef0": 1.0},
               "Figure 4 of 001: polynomial (q = 4) on the HIGGS-like Gaussian mixture "
               "(n = 50,000, d = 28), 50 power-law workers.", partial(gaussian_mixture, 5_000)),
        _large("diskpca_bow_poly", partial(sparse_bow, N_LARGE),
               {"name": "poly", "degree": 4, "gamma": 1.0, "coef0": 1.0},
               "Figure 4 of 001: polynomial (q = 4) on the sparse bag-of-words stand-in "
               "(n = 50,000, d = 100,000, ~100 nonzeros per unit-norm row).",
               partial(sparse_bow, 3_000, 5_000)),
        _large("diskpca_gmm_arccos", partial(gaussian_mixture, N_LARGE),
               {"name": "arccos", "order": 2},
               "Figure 6 of 001: arc-cosine (degree 2) on the HIGGS-like Gaussian mixture "
               "(n = 50,000, d = 28).", partial(gaussian_mixture, 5_000)),
        Experiment(
            name="diskpca_workers", dataset=partial(gaussian_mixture, 200_000), kernel=RBF,
            methods=(Method("diskpca (gram)", "diskpca", {"messages": "gram", **LARGE}),
                     Method("uniform + disLR", "uniform_dislr", {"messages": "gram"})),
            budgets=(400,), seeds=(0,), workers=(5, 10, 25, 50, 100), partition="uniform",
            description="Figure 7 of 001: fit time vs number of workers (RBF, |Y| = 400, "
                        "HIGGS-like mixture n = 200,000, uniform partitions).",
            quick={"dataset": partial(gaussian_mixture, 5_000), "workers": (2, 5)}),
    )
}


def get_experiment(name: str, quick: bool = False) -> Experiment:
    """The registered experiment ``name`` (its ``--quick`` variant if asked)."""
    if name not in EXPERIMENTS:
        raise ValueError(f"Unknown experiment {name!r}; choose one of "
                         f"{', '.join(sorted(EXPERIMENTS))}.")
    exp = EXPERIMENTS[name]
    return exp.quick_version() if quick else exp
