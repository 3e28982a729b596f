"""``kernelscale stream``: streaming kernel PCA of a file in one pass, bounded memory.

    kernelscale stream --data big.npy --out model.npz --n-components 5 \\
        --n-random-features 1000 --sketch-size 20 --gamma 0.1

Reads ``.npy`` (memory-mapped), ``.csv`` or LIBSVM in chunks through
:func:`kernelscale.datasets.iter_chunks`, shows a progress bar of points read
(and points/s) on stderr unless ``--quiet``, writes a pickle-free ``.npz`` model
(``"model_type": "streaming_kpca"``) and says so on stdout.
"""

from __future__ import annotations

import argparse
import warnings

from kernelscale.cli_common import (
    DATA_HELP,
    UsageError,
    add_force_arg,
    add_header_arg,
    check_model_out,
    flag_names,
    load_options,
    positive_float,
    positive_int,
    print_error,
    print_warning,
    seed_int,
)
from kernelscale.progress import progress_bar
from kernelscale.streaming.methods import METHODS


def add_subcommand(subparsers) -> None:
    """Register ``stream`` on a ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "stream",
        help="streaming kernel PCA (SKPCA, RNCA, Nystrom) of a file in one pass",
        description="Kernel PCA of a file read in chunks, in memory independent of its length "
        "(paper 004). Writes a .npz model usable by 'kernelscale transform'.",
    )
    p.add_argument("--data", required=True, help=f"input: {DATA_HELP}, read in chunks")
    add_header_arg(p)
    p.add_argument("--out", required=True,
                   help="model file to write (.npz); written whole or not at all")
    add_force_arg(p)
    p.add_argument("--method", default="skpca", choices=sorted(METHODS),
                   help="skpca: random features + Frequent Directions (paper 004, default); "
                   "rnca: random features, exact covariance; nystrom: first points as landmarks")
    p.add_argument("--n-components", type=positive_int, default=2,
                   help="k, the number of principal components (default 2)")
    p.add_argument("--kernel", default="rbf", choices=["rbf", "laplacian"],
                   help="kernel function (default rbf)")
    p.add_argument("--gamma", type=positive_float, default=None,
                   help="kernel scale (default 1/d)")
    p.add_argument("--n-random-features", type=positive_int, default=500,
                   help="m random features (c landmarks for nystrom; default 500)")
    p.add_argument("--sketch-size", type=positive_int, default=20,
                   help="l, rows of the Frequent Directions sketch (default 20)")
    p.add_argument("--shrink", default="modified", choices=["modified", "classic"],
                   help="Frequent Directions shrink: by the (l/2)-th singular value (paper 004, "
                   "default) or by the smallest (Liberty 2013)")
    p.add_argument("--chunk-size", type=positive_int, default=10_000,
                   help="rows read at a time (default 10000)")
    p.add_argument("--seed", "--random-state", type=seed_int, default=0, dest="seed",
                   help="random seed of the features (default 0)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run, flag_names=flag_names(p, {"batch_size": "--chunk-size",
                                                        "random_state": "--seed"}))


def run(args: argparse.Namespace) -> int:
    """Stream the file into a :class:`StreamingKernelPCA` and save it; exit code."""
    from kernelscale.datasets import iter_chunks
    from kernelscale.runtime.validation import check_magnitude
    from kernelscale.streaming.estimator import StreamingKernelPCA, save_streaming_model

    flags = getattr(args, "flag_names", None)  # errors name --sketch-size, not sketch_size

    estimator = StreamingKernelPCA(
        n_components=args.n_components, kernel=args.kernel, gamma=args.gamma,
        n_random_features=args.n_random_features, sketch_size=args.sketch_size,
        method=args.method, shrink=args.shrink, batch_size=args.chunk_size,
        random_state=args.seed,
    )
    try:
        check_model_out(args.out, [args.data], args.force)
        (options,) = load_options([args.data], args.header)
        blocks = iter_chunks(args.data, chunk_size=args.chunk_size, **options)
        # A tqdm bar of points read (and points/s) on stderr; none with --quiet.
        with progress_bar(not args.quiet, desc="stream", unit=" points",
                          unit_scale=True) as bar:
            try:
                for block in blocks:
                    check_magnitude([block], names=[f"{args.data}"])
                    estimator.partial_fit(block)
                    bar.update(block.shape[0])
            except BaseException:
                bar.leave = False  # the error says what happened; no half-done bar
                raise
    except (OSError, ValueError, TypeError, UsageError) as exc:
        print_error(exc, flags)
        return 2
    if not hasattr(estimator, "sketcher_"):
        print_error(f"{args.data} holds no rows.")
        return 2
    # One decomposition at the end of the stream, only to say when the sketch holds
    # fewer directions than --n-components (partial_fit itself does not decompose).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        estimator.eigenvalues_  # noqa: B018
    for warning in caught:
        print_warning(warning.message, flags)
    try:
        save_streaming_model(estimator, args.out)
    except OSError as exc:
        print_error(f"cannot write {args.out}: {exc}")
        return 2
    print(f"stream: {estimator.method} model of {estimator.n_samples_seen_:,} points, "
          f"{estimator.space_words_:,} words, written to {args.out}")
    return 0
