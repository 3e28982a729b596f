"""What the word-budget benchmarks share, and nothing else uses.

Code that only studies the planner lives here, not in the installed package:
the grid's sets, kernels, budgets, fits and cache (:mod:`budget_shared.budget_grid`),
the pilot variants of the sampler benchmarks (:mod:`budget_shared.pilot_variants`)
and the choice of the pilot rule's constants from forced fits
(:mod:`budget_shared.constant_search`). The scripts ``benchmarks/budget*.py``
import it by its name (their folder is on the path when they run); the data,
kernels and exact references they share with ``benchmarks/sampler.py`` stay in
:mod:`kernelscale.bench.settings`.
"""
