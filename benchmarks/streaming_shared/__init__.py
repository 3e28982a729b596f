"""What the streaming benchmarks share, kept out of the installed package.

:mod:`streaming_shared.sweep`: the sweep of SKPCA, RNCA and streaming Nystrom
against the sample size, used by ``benchmarks/streaming.py`` and
``benchmarks/streaming_real.py``, which import it by its name (their folder is on
the path when they run).
"""
