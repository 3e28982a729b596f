"""What ``benchmarks/sampler.py`` writes, kept out of the installed package.

:mod:`sampler_shared.report`: the equal-words tables and verdicts of the
landmark-sampler benchmark. The script imports it by its name (its folder is on the
path when it runs).
"""
