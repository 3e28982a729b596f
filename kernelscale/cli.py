"""The ``kernelscale`` command line.

``kernelscale demo`` runs disKPCA and each baseline on scikit-learn's bundled
digits over simulated power-law workers; ``fit`` and ``transform`` work on
files (.npy, .csv, LIBSVM); ``stream`` (streaming kernel PCA), ``vertical``
(feature-split kernel PCA) and ``bench`` (the benchmark experiments) come from
their packages. User mistakes print one line and exit with code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from kernelscale.runtime.build import add_dask_args, cli_client

SUBCOMMAND_MODULES: list[str] = [
    "kernelscale.streaming.cli",
    "kernelscale.vertical.cli",
    "kernelscale.bench.cli",
]

DEMO_METHODS = (
    ("diskpca", "gram"),
    ("diskpca", "sketch"),
    ("uniform_dislr", "gram"),
    ("uniform_batch", "gram"),
    ("random_features", "gram"),
    ("exact", "gram"),
)


class UsageError(Exception):
    """A mistake of the user's: one line on stderr, exit code 2."""


def _add_kernel_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kernel", default="rbf",
                   choices=["rbf", "laplacian", "poly", "linear", "arccos"])
    p.add_argument("--gamma", type=float, help="kernel scale (default: from --bandwidth-scale)")
    p.add_argument("--bandwidth-scale", type=float, default=0.2,
                   help="RBF/Laplacian: sigma = SCALE x median pairwise distance (paper: 0.2)")
    p.add_argument("--degree", type=int, help="poly degree (default 4 here) or arccos order (2)")
    p.add_argument("--coef0", type=float, default=1.0)


def _add_fit_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--n-components", type=int, default=10)
    p.add_argument("--workers", type=int, default=5)
    p.add_argument("--partition", default="power_law", choices=["power_law", "uniform"])
    p.add_argument("--landmarks", type=int, default=400, help="|Y|, the landmark budget")
    p.add_argument("--messages", default="gram", choices=["gram", "sketch"])
    p.add_argument("--embedding-dtype", default="float64", choices=["float64", "float32"],
                   help="precision of disKPCA's leverage-score embedding: float32 halves its "
                   "memory; it only sets sampling probabilities (default float64)")
    p.add_argument("--sampler", default="ridge", choices=["ridge", "paper"],
                   help="disKPCA's landmark sampler: ridge leverage (default) or the paper's "
                   "leverage + adaptive sampling")
    p.add_argument("--center", action="store_true")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_dask_args(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kernelscale",
        description="Kernel PCA and kernel clustering for data that cannot be brought "
        "to one place.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="disKPCA and its baselines on the bundled digits data")
    _add_kernel_args(demo)
    _add_fit_args(demo)
    demo.set_defaults(func=run_demo)

    fit = sub.add_parser("fit", help="fit a distributed kernel PCA on a data file")
    fit.add_argument("--data", required=True, help=".npy, .csv or LIBSVM file")
    fit.add_argument("--out", required=True, help="model file to write (.npz)")
    fit.add_argument("--method", default="diskpca",
                     choices=["diskpca", "uniform_dislr", "uniform_batch", "exact",
                              "random_features"])
    _add_kernel_args(fit)
    _add_fit_args(fit)
    fit.set_defaults(func=run_fit)

    transform = sub.add_parser("transform", help="project a data file with a saved model")
    transform.add_argument("--model", required=True)
    transform.add_argument("--data", required=True)
    transform.add_argument("--out", required=True, help="output .npy or .csv")
    transform.set_defaults(func=run_transform)

    for module in SUBCOMMAND_MODULES:
        importlib.import_module(module).add_subcommand(sub)
    return parser


def _make_estimator(args, X, method="diskpca", messages=None):
    from kernelscale import DistributedKernelPCA
    from kernelscale.kernels import median_heuristic

    gamma = args.gamma
    if gamma is None and args.kernel in ("rbf", "laplacian"):
        sigma = median_heuristic(X, scale=args.bandwidth_scale, n_subset=2000,
                                 random_state=args.seed)
        gamma = 1.0 / (2.0 * sigma**2)
    degree = args.degree if args.degree is not None else (4 if args.kernel == "poly" else None)
    return DistributedKernelPCA(
        n_components=args.n_components, kernel=args.kernel, gamma=gamma, degree=degree,
        coef0=args.coef0, n_workers=args.workers, partition=args.partition, method=method,
        n_landmarks=args.landmarks, messages=messages or args.messages, center=args.center,
        embedding_dtype=args.embedding_dtype, sampler=args.sampler,
        random_state=args.seed, backend="local" if args.client is None else "dask",
        client=args.client, timeout=args.timeout)


def run_demo(args) -> int:
    from kernelscale.datasets import load_digits_standardized
    from kernelscale.metrics.lowrank import exact_kpca_reference, excess_energy_ratio
    from kernelscale.progress import Progress

    X, _ = load_digits_standardized()
    print(f"digits: {X.shape[0]} points x {X.shape[1]} features (standardised), "
          f"{args.workers} {args.partition.replace('_', '-')} workers, kernel={args.kernel}, "
          f"k={args.n_components}, |Y|={args.landmarks}", file=sys.stderr)
    rows, reference = [], None
    with Progress(len(DEMO_METHODS), "demo", unit="methods", enabled=not args.quiet) as bar:
        for method, messages in DEMO_METHODS:
            est = _make_estimator(args, X, method, messages)
            start = time.perf_counter()
            est.fit(X)
            seconds = time.perf_counter() - start
            if reference is None:
                reference = exact_kpca_reference(X, est.kernel_, args.n_components, args.center)
            err = est.approximation_error(X, reference=False)["error"]
            name = f"{method} ({messages})" if method == "diskpca" else method
            rows.append((name + ("*" if method == "random_features" else ""),
                         excess_energy_ratio(err, reference["opt"], reference["trace"]),
                         err / reference["opt"], est.communication_.total_words("fit"),
                         est.communication_.upload_words("fit"), seconds))
            bar.update(status=method)
    print(f"{'method':<18} {'excess ratio':>12} {'err/opt':>9} {'fit words':>12} "
          f"{'upload':>12} {'seconds':>8}")
    for name, excess, ratio, words, up, seconds in rows:
        print(f"{name:<18} {excess:>12.5f} {ratio:>9.5f} {words:>12,} {up:>12,} {seconds:>8.2f}")
    print("excess ratio = (err - opt) / (trace - opt): 0 is the exact rank-k optimum.\n"
          "* random_features finds a subspace of its own random-feature space; its error is\n"
          "  measured there (sum ||z(a)||^2 - captured), so it can fall below the kernel optimum.")
    return 0


def _load(path):
    from kernelscale.datasets import load

    if not Path(path).exists():
        raise UsageError(f"no such file: {path}")
    return load(path)


def _check_out(path) -> Path:
    """Fail before the work, not after it, when ``path`` cannot be written."""
    out = Path(path)
    parent = out.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if parent.exists() and not parent.is_dir():
        raise UsageError(f"cannot write {path}: {parent} is not a directory")
    if not out.parent.is_dir():
        raise UsageError(f"cannot write {path}: no directory {out.parent}")
    if out.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory")
    return out


def run_fit(args) -> int:
    from kernelscale.model import save_model

    _check_out(args.out)
    X = _load(args.data)
    est = _make_estimator(args, X, args.method)
    start = time.perf_counter()
    est.fit(X)
    seconds = time.perf_counter() - start
    save_model(est.model_, args.out)
    if not args.quiet:
        print(est.communication_.summary("fit"), file=sys.stderr)
    print(f"fitted {args.method} on {X.shape[0]} x {X.shape[1]} in {seconds:.2f} s; "
          f"{est.communication_.total_words('fit'):,} words; model written to {args.out}")
    return 0


def run_transform(args) -> int:
    from kernelscale.model import load_model

    out = _check_out(args.out)
    if out.suffix not in (".npy", ".csv"):
        raise UsageError(f"--out must end in .npy or .csv, got {out.name}")
    model = load_model(args.model)
    X = _load(args.data)
    n_in = (getattr(model, "n_features_in", None) or getattr(model, "n_features_in_", None)
            or getattr(model, "landmarks", X).shape[1])
    if X.shape[1] != n_in:
        raise UsageError(f"{args.data} has {X.shape[1]} features; the model expects {n_in}.")
    Z = model.transform(X)
    if out.suffix == ".npy":
        np.save(out, Z)
    else:
        np.savetxt(out, Z, delimiter=",")
    print(f"wrote {Z.shape[0]} x {Z.shape[1]} to {out}")
    return 0


def _one_line(message) -> str:
    """``message`` on a single line (exception texts may hold newlines)."""
    return " ".join(str(message).split())


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """``warnings.showwarning`` for the CLI: one line, no source line."""
    print(f"kernelscale: warning: {_one_line(message)}", file=sys.stderr)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    saved_showwarning = warnings.showwarning
    try:
        # The Dask client of --scheduler / --dask-workers (None: in-process).
        with warnings.catch_warnings(), cli_client(args) as args.client:
            warnings.simplefilter("default")
            warnings.showwarning = _show_warning
            return args.func(args)
    except (UsageError, ValueError, TypeError, OSError, ImportError) as exc:
        # OSError: missing files, and paths that cannot be written (an --out
        # inside a file or a missing directory, no permission).
        print(f"kernelscale: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kernelscale: interrupted", file=sys.stderr)
        return 130
    finally:
        warnings.showwarning = saved_showwarning


if __name__ == "__main__":
    sys.exit(main())
