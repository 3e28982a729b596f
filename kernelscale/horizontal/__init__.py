"""Kernel PCA over horizontal partitions: disKPCA and its baselines (papers 000/001)."""

from kernelscale._lazy import lazy_exports
from kernelscale.horizontal.baselines import (
    exact_kpca,
    random_features_pca,
    uniform_batch,
    uniform_dislr,
)
from kernelscale.horizontal.budget import BudgetPlan, WordBudgetError, plan_budget
from kernelscale.horizontal.diskpca import diskpca
from kernelscale.horizontal.evaluate import distributed_error
from kernelscale.horizontal.exact_memory import ExactFitMemoryError
from kernelscale.horizontal.forecast import Forecast, forecast_words
from kernelscale.horizontal.landmarks import landmark_batch, landmark_dislr

# The estimators (scikit-learn classes) load on first use.
__getattr__, __dir__ = lazy_exports(__name__, {
    "DistributedKernelPCA": "kernelscale.horizontal.estimator",
    "KernelPCA": "kernelscale.horizontal.kernel_pca",
})

__all__ = [
    "BudgetPlan",
    "DistributedKernelPCA",
    "ExactFitMemoryError",
    "Forecast",
    "KernelPCA",
    "WordBudgetError",
    "diskpca",
    "distributed_error",
    "exact_kpca",
    "forecast_words",
    "landmark_batch",
    "landmark_dislr",
    "plan_budget",
    "random_features_pca",
    "uniform_batch",
    "uniform_dislr",
]
