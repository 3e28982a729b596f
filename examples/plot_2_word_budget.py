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
fig, ax = plt.subplots(figsize=(6, 4))
styles = {"diskpca": "o-", "uniform_dislr": "s--", "uniform_batch": "^:"}
for method, style in styles.items():
    words = [
        forecast_words(method, n_rows, X.shape[1], 10, m, center=True).words
        for m in sizes
    ]
    ax.plot(sizes, words, style, label=method)
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
