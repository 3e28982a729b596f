"""What ``benchmarks/federated.py`` draws and writes, kept out of the installed package.

:mod:`federated_shared.report`: the plot and the summary (tables and verdicts) of the
federated k-means benchmark. The script imports it by its name (its folder is on the
path when it runs).
"""
