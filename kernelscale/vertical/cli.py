"""``kernelscale vertical``: one-shot kernel PCA over parties holding different features.

    kernelscale vertical --data X.npy --blocks 4 --kernel rbf --gamma 0.01 \\
        --n-components 5 --n-local-components 20 --out embedding.npy
    kernelscale vertical --data party0.npy party1.npy party2.csv --kernel linear

One file is split into feature blocks by ``--blocks`` (an int for even blocks or
comma-separated sizes); several files are the parties' own blocks (same rows, in
the same order), each read by its party: with ``--scheduler`` / ``--dask-workers``
on its Dask worker, so the file must be readable there and its rows never pass
through this machine. Writes the training samples' coordinates (``--out``,
``.npy``) and prints one summary line (parties, samples, words, eigenvalues);
``--verbose`` adds the communication ledger.
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np

from kernelscale.backends.dask.cli import add_dask_args, cli_client
from kernelscale.cli_common import (
    UsageError,
    add_force_arg,
    add_header_arg,
    check_coef0,
    check_degree,
    check_output,
    flag_names,
    load_options,
    positive_float,
    positive_int,
    print_error,
)
from kernelscale.files import write_npy_atomically
from kernelscale.runtime import WorkerError
from kernelscale.vertical.oneshot import VERTICAL_KERNELS


def _blocks(text: str):
    parts = [p for p in text.split(",") if p.strip()]
    try:
        sizes = [int(p) for p in parts]
    except ValueError:
        raise ValueError(
            f"--blocks must be an int or comma-separated ints, got {text!r}."
        ) from None
    if len(sizes) == 1 and sizes[0] < 1:
        raise ValueError(f"--blocks must be a positive integer, got {sizes[0]}.")
    return sizes[0] if len(sizes) == 1 else sizes


def add_subcommand(subparsers) -> None:
    """Register ``vertical`` on an ``argparse`` subparsers object."""
    p = subparsers.add_parser(
        "vertical",
        help="one-shot kernel PCA over parties holding different features (paper 002)",
        description="Each party sends the top eigenpairs of its local kernel once; the "
        "centre fuses them (sum for linear, Hadamard product for rbf/laplacian).",
    )
    p.add_argument(
        "--data",
        nargs="+",
        required=True,
        help="one .npy, .csv/.txt or Parquet file (split by --blocks) or one file per "
        "party (same rows, same order); dense data only",
    )
    add_header_arg(p)
    p.add_argument("--blocks", default="2",
                   help="parties: an int (even) or sizes '3,5,2' (default 2; with several "
                   "--data files, one party per file)")
    p.add_argument("--kernel", default="rbf", choices=list(VERTICAL_KERNELS),
                   help="kernel function (default rbf)")
    p.add_argument(
        "--gamma",
        type=positive_float,
        default=None,
        help="kernel scale (default 1/d); the paper's exp(-|x-y|^2/s^2) is 1/s^2",
    )
    p.add_argument("--degree", type=int, default=3, help="poly degree (default 3)")
    p.add_argument("--coef0", type=float, default=1.0,
                   help="poly/sigmoid: the constant c added to gamma <x, y> (default 1)")
    p.add_argument("--n-components", type=positive_int, default=2,
                   help="k, the number of principal components (default 2)")
    p.add_argument(
        "--n-local-components",
        type=positive_int,
        default=None,
        help="eigenpairs each party sends (default n-components + 1)",
    )
    p.add_argument("--no-center", action="store_true", help="do not centre the fused kernel")
    p.add_argument("--out", default=None,
                   help="write the training embedding (.npy; default: not written); "
                   "written whole or not at all")
    add_force_arg(p)
    p.add_argument("--verbose", action="store_true",
                   help="also print the communication ledger (every round's count and words)")
    add_dask_args(p)
    p.set_defaults(func=run, flag_names=flag_names(
        p, {"feature_blocks": "--blocks", "center": "--no-center", "n_jobs": "--jobs"}))


def run(args: argparse.Namespace) -> int:
    """Fit :class:`VerticalKernelPCA` on the files; exit code (2 on user mistakes)."""
    if not hasattr(args, "client"):  # not run through kernelscale.cli.main
        with cli_client(args) as args.client:
            return run(args)
    from kernelscale.datasets import load
    from kernelscale.vertical.estimator import VerticalKernelPCA

    try:
        check_degree(args.kernel, args.degree)
        check_coef0(args.kernel, args.coef0)
        if args.out:
            check_output(args.out, args.data, args.force, suffixes=(".npy",))
        options = load_options(args.data, args.header)
        if len(args.data) == 1:
            X = load(args.data[0], **options[0])
            if not isinstance(X, np.ndarray):
                raise ValueError(
                    "vertical kernel PCA needs dense data; sparse files are not supported."
                )
            if args.kernel == "poly" and X.ndim == 2 and X.shape[1]:
                from kernelscale.cli_checks import check_kernel_values
                from kernelscale.kernels import make_kernel

                check_kernel_values(make_kernel("poly", gamma=args.gamma, degree=args.degree,
                                                coef0=args.coef0, n_features=X.shape[1]),
                                    X, args.data[0])
        else:  # one file per party, read by the party (paths or partials are loaders)
            X = [partial(load, path, **opts) if opts else path
                 for path, opts in zip(args.data, options, strict=True)]
        blocks = _blocks(args.blocks)
        estimator = VerticalKernelPCA(
            n_components=args.n_components,
            n_local_components=args.n_local_components,
            kernel=args.kernel,
            gamma=args.gamma,
            degree=args.degree,
            coef0=args.coef0,
            center=not args.no_center,
            feature_blocks=blocks,
            backend="local" if args.client is None else "dask",
            client=args.client,
            timeout=args.timeout,
            n_jobs=args.jobs,
        )
        estimator.fit(X)
    except (ValueError, TypeError, OSError, WorkerError, UsageError) as exc:
        print_error(exc, getattr(args, "flag_names", None))
        return 2
    embedding = estimator.model_.training_embedding()
    if args.out:
        try:
            write_npy_atomically(args.out, embedding)
        except OSError as exc:
            print_error(f"cannot write {args.out}: {exc.strerror or exc}")
            return 2
    ledger = estimator.communication_
    words, rounds = ledger.total_words(phase=None), ledger.n_rounds(phase=None)
    written = f"; embedding written to {args.out}" if args.out else ""
    print(f"vertical: {len(estimator.feature_blocks_)} parties (feature blocks "
          f"{[len(c) for c in estimator.feature_blocks_]}), {embedding.shape[0]} samples, "
          f"{words:,} words in {rounds} rounds; eigenvalues "
          + ", ".join(f"{v:.6g}" for v in estimator.eigenvalues_) + written)
    if args.verbose:
        print(estimator.communication_.summary(phase=None))
    return 0
