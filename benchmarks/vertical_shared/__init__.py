"""What the vertical benchmarks share, kept out of the installed package.

:mod:`vertical_shared.blocks` (the parties' feature blocks and the exact
eigenvectors) for ``benchmarks/vertical.py`` and ``benchmarks/vertical_real.py``;
:mod:`vertical_shared.real_report` and :mod:`vertical_shared.real_plot`, the
summary and the figure of ``vertical_real.py``. The scripts import them by their
names (their folder is on the path when they run).
"""
