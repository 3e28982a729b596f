"""
Choosing by a word budget
=========================

A user of a distributed method usually holds a communication budget, not a number of
landmarks. ``max_words=B`` makes :class:`~kernelscale.horizontal.DistributedKernelPCA`
pick the method and the number of landmarks |Y| that spend at most B words, from a
forecast made before anything is sent. :func:`~kernelscale.horizontal.forecast_words`
is that forecast, one message at a time, and the command ``kernelscale plan`` prints it
for data files.
"""

import matplotlib.pyplot as plt
from matplotlib.ticker import NullFormatter

from kernelscale import DistributedKernelPCA
from kernelscale.datasets import load_digits_standardized
from kernelscale.horizontal import forecast_words, plan_budget

X, y = load_digits_standardized()

# %%
# What each method costs
# ----------------------
# The forecast needs only the partition sizes, d, k and |Y|. Here: five equal workers.
n_rows = [len(X) // 5] * 4 + [len(X) - 4 * (len(X) // 5)]
sizes = [25, 50, 100, 200, 400]
# disKPCA and uniform + disLR send nearly the same words at the same |Y|
# (disKPCA's ridge rounds add a few words per worker): disKPCA is drawn
# thick and underneath, uniform + disLR thin on top, so both lines show.
styles = {
    "diskpca": dict(
        marker="o", linewidth=5, markersize=10, alpha=0.45, zorder=1
    ),
    "uniform_dislr": dict(marker="s", linestyle="--", markersize=4, zorder=2),
    "uniform_batch": dict(marker="^", linestyle=":", zorder=2),
}
fig, ax = plt.subplots(figsize=(6, 4))
for method, style in styles.items():
    words = [
        forecast_words(method, n_rows, X.shape[1], 10, m, center=True).words
        for m in sizes
    ]
    ax.plot(sizes, words, label=method, **style)
    print(method, words)
ax.set_xscale("log")
ax.set_xticks(sizes, [str(m) for m in sizes])
ax.xaxis.set_minor_formatter(NullFormatter())
ax.set_yscale("log")
ax.set_xlabel("landmarks |Y|")
ax.set_ylabel("forecast fit words")
ax.set_title("digits, 5 workers, k = 10")
ax.legend()
plt.show()

# %%
# The plan for a budget, and the fit that keeps to it
# ---------------------------------------------------
plan = plan_budget(100_000, n_rows, X.shape[1], 10)
print("chosen:", plan.method, "-", plan.reason)
for method, forecast in plan.candidates.items():
    if forecast is None:
        print(f"  {method:16s} does not fit in the budget")
    else:
        print(
            f"  {method:16s} {forecast.setting:10s} {forecast.words:8,d} words"
        )

kpca = DistributedKernelPCA(
    n_components=10, max_words=100_000, random_state=0
).fit(X)
print(kpca.method_, kpca.budget_plan_.n_landmarks)
print(
    "ledger:", kpca.communication_.total_words("fit"), "words (budget 100,000)"
)

# %%
# What each budget buys
# ---------------------
# Words alone do not choose a method: what matters is the error they buy. For a few
# budgets, the budgeted fit (the planner's choice) and each method sized to the same
# budget by ``method=``, judged by their excess ``(err - opt) / (trace - opt)`` against
# exact kernel PCA (computed once, the data being small). The methods draw their
# landmarks at random, so each point is the mean over five seeds.
import numpy as np  # noqa: E402

from kernelscale.metrics import (  # noqa: E402
    exact_kpca_reference,
    excess_energy_ratio,
)

budgets = [30_000, 100_000, 300_000]
seeds = range(5)
reference = None
lines = {"budget (planner's choice)": None, "diskpca": "diskpca",
         "uniform_dislr": "uniform_dislr", "uniform_batch": "uniform_batch"}
mean_excess = {}
fig, ax = plt.subplots(figsize=(6, 4))
for label, method in lines.items():
    excess = []
    for budget in budgets:
        runs = []
        for seed in seeds:
            fit = DistributedKernelPCA(
                n_components=10, max_words=budget, method=method, random_state=seed
            ).fit(X)
            if reference is None:
                reference = exact_kpca_reference(
                    X, fit.kernel_, 10, center=fit.center
                )
            error = fit.approximation_error(X, reference=False)["error"]
            runs.append(
                excess_energy_ratio(error, reference["opt"], reference["trace"])
            )
        excess.append(float(np.mean(runs)))
    mean_excess[label] = excess
    print(f"{label:26s}", ", ".join(f"{e:.4f}" for e in excess))
    if method is None:  # the budgeted fit: thick, under the others
        style = dict(marker="o", linewidth=4, alpha=0.5)
    else:
        style = dict(marker=".")
    ax.plot(budgets, excess, label=label, **style)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xticks(budgets, [f"{b:,}" for b in budgets])
ax.xaxis.set_minor_formatter(NullFormatter())
ax.set_xlabel("word budget B (every fit's ledger stays within it)")
ax.set_ylabel("mean excess over 5 seeds")
ax.set_title("digits, 5 workers, k = 10, default RBF kernel")
ax.legend()
fig.tight_layout()
plt.show()

# %%
# The budgeted fit against the best method sized to each budget:
for i, budget in enumerate(budgets):
    best = min(v[i] for k, v in mean_excess.items() if k != "budget (planner's choice)")
    ratio = mean_excess["budget (planner's choice)"][i] / best
    print(f"B = {budget:>7,}: budgeted / best = {ratio:.2f}")

# %%
# How to read it: the thick line is the budgeted fit; where it runs on one method's
# line, that is the method the planner chose at that budget (``method_`` above). Read
# the ratios printed last. Over these five seeds the planner is within 1.1x of the best
# method at 30,000 and 100,000 words; at 300,000 words uniform + batch, whose sample
# is larger at the same words, does better than the disKPCA the planner kept (about
# 1.2x). Five seeds on one small data set are still noisy (a single seed put the
# planner at 1.5x there). The full study, nine data sets, four kernels, 208 cells and
# 10 to 100 seeds per cell, with the cells the planner misses, is on :doc:`/budget`.
