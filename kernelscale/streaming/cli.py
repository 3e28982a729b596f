"""``kernelscale stream``: streaming kernel PCA of a file in one pass, bounded memory.

    kernelscale stream --data big.npy --out model.npz --n-components 5 \\
        --n-random-features 1000 --sketch-size 20 --gamma 0.1

Reads ``.npy`` (memory-mapped), ``.csv`` or LIBSVM in chunks through
:func:`kernelscale.datasets.iter_chunks`, shows points/s on stderr, writes a
pickle-free ``.npz`` model (``"model_type": "streaming_kpca"``).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

from kernelscale.streaming.estimator import METHODS, StreamingKernelPCA, save_streaming_model


class Progress:
    """A one-line progress report on stderr: points seen and points per second."""

    def __init__(self, stream=None, enabled: bool = True, every: float = 0.5):
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.every = every
        self.start = time.perf_counter()
        self.last = 0.0
        self.points = 0
        self.shown = False

    def update(self, n_points: int) -> None:
        self.points += n_points
        now = time.perf_counter() - self.start
        if self.enabled and now - self.last >= self.every:
            self.last = now
            self._write(now, end="")

    def close(self) -> None:
        if self.enabled:
            self._write(time.perf_counter() - self.start, end="\n")

    def _write(self, elapsed: float, end: str) -> None:
        self.shown = True
        rate = self.points / elapsed if elapsed > 0 else 0.0
        print(f"\rstream: {self.points:,} points  {rate:,.0f} points/s  {elapsed:.1f} s",
              end=end, file=self.stream, flush=True)


def add_subcommand(subparsers) -> None:
    """Register ``stream`` on a ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "stream",
        help="streaming kernel PCA (SKPCA, RNCA, Nystrom) of a file in one pass",
        description="Kernel PCA of a file read in chunks, in memory independent of its length "
        "(paper 004). Writes a .npz model usable by 'kernelscale transform'.",
    )
    p.add_argument("--data", required=True, help="input file: .npy, .csv/.txt or LIBSVM")
    p.add_argument("--out", required=True, help="model file to write (.npz)")
    p.add_argument("--method", default="skpca", choices=sorted(METHODS))
    p.add_argument("--n-components", type=int, default=2)
    p.add_argument("--kernel", default="rbf", choices=["rbf", "laplacian"])
    p.add_argument("--gamma", type=float, default=None, help="kernel scale (default 1/d)")
    p.add_argument("--n-random-features", type=int, default=500, help="m (or c for nystrom)")
    p.add_argument("--sketch-size", type=int, default=20, help="l, rows of the FD sketch")
    p.add_argument("--shrink", default="modified", choices=["modified", "classic"])
    p.add_argument("--chunk-size", type=int, default=10_000, help="rows read at a time")
    p.add_argument("--random-state", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Stream the file into a :class:`StreamingKernelPCA` and save it; exit code."""
    from kernelscale.datasets import iter_chunks

    estimator = StreamingKernelPCA(
        n_components=args.n_components, kernel=args.kernel, gamma=args.gamma,
        n_random_features=args.n_random_features, sketch_size=args.sketch_size,
        method=args.method, shrink=args.shrink, batch_size=args.chunk_size,
        random_state=args.random_state,
    )
    progress = Progress(enabled=not args.quiet)
    try:
        for block in iter_chunks(args.data, chunk_size=args.chunk_size):
            estimator.partial_fit(block)
            progress.update(block.shape[0])
    except (OSError, ValueError, TypeError) as exc:
        if progress.shown:
            print(file=sys.stderr)
        print(f"kernelscale stream: error: {exc}", file=sys.stderr)
        return 2
    progress.close()
    if not hasattr(estimator, "sketcher_"):
        print(f"kernelscale stream: error: {args.data} holds no rows.", file=sys.stderr)
        return 2
    # One decomposition at the end of the stream, only to say when the sketch holds
    # fewer directions than --n-components (partial_fit itself does not decompose).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        estimator.eigenvalues_  # noqa: B018
    for warning in caught:
        print(f"kernelscale stream: warning: {warning.message}", file=sys.stderr)
    try:
        save_streaming_model(estimator, args.out)
    except OSError as exc:
        print(f"kernelscale stream: error: cannot write {args.out}: {exc}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(
            f"stream: {estimator.method} model of {estimator.n_samples_seen_:,} points, "
            f"{estimator.space_words_:,} words, written to {args.out}",
            file=sys.stderr,
        )
    return 0
