"""``kernelscale plan``: each method's fit words and rounds for data files, forecast without
fitting.

    kernelscale plan --data letter.csv --workers 10
    kernelscale plan --data digits.npy spam.csv --max-words 100000

Without ``--max-words`` it prints, for each file, the words each method's fit
would send at the ``--landmarks`` values (and 'random_features' at
``--random-features``); with it, each method's largest setting within the budget
and the method ``kernelscale fit --max-words`` would choose for the same options.
The rows are split as ``fit`` splits them (``--workers``, ``--partition``,
``--seed``), so the forecast is the ledger's count of that fit (to the word for
dense rows distinct across workers; see :mod:`kernelscale.horizontal.forecast`).
"""

from __future__ import annotations

import argparse

import scipy.sparse as sp

from kernelscale.cli_common import (
    DATA_HELP,
    UsageError,
    add_header_arg,
    flag_names,
    in_flags,
    positive_int,
    seed_int,
)
from kernelscale.horizontal.forecast import (
    FORECAST_METHODS,
    MIN_FIT_ROWS,
    forecast_words,
    max_row_nnz_of,
)


def add_subcommand(subparsers) -> None:
    """Register ``plan`` on an ``argparse`` subparsers object."""
    from kernelscale.cli import _add_kernel_args

    p = subparsers.add_parser(
        "plan", help="forecast each method's fit words for data files, without fitting",
        description="The words each method's fit would send (both directions), from the "
        "partition sizes, the features and |Y|, by the ledger's rules; nothing is fitted.")
    p.add_argument("--data", nargs="+", required=True,
                   help=f"one or more data files, each planned on its own: {DATA_HELP}")
    add_header_arg(p)
    p.add_argument("--max-words", type=positive_int,
                   help="a word budget: each method's largest |Y| (m) within it, and the "
                   "method 'kernelscale fit --max-words' would choose")
    p.add_argument("--landmarks", type=positive_int, nargs="+", default=[50, 100, 200, 400],
                   help="|Y| values to forecast without --max-words (default 50 100 200 400)")
    p.add_argument("--random-features", type=positive_int, default=2000,
                   help="m of 'random_features' without --max-words (default 2000)")
    p.add_argument("--n-components", type=positive_int, default=10,
                   help="k, the number of principal components (default 10)")
    p.add_argument("--workers", type=positive_int, default=5,
                   help="workers the rows are split over, as in fit (default 5)")
    p.add_argument("--partition", default="power_law", choices=["power_law", "uniform"],
                   help="how fit splits the rows (default power_law)")
    p.add_argument("--seed", "--random-state", type=seed_int, default=0, dest="seed",
                   help="fit's seed: the split (default 0)")
    p.add_argument("--messages", default="gram", choices=["gram", "sketch"],
                   help="disKPCA's and disLR's messages (default gram)")
    p.add_argument("--sampler", default="ridge", choices=["ridge", "paper"],
                   help="disKPCA's landmark sampler (default ridge)")
    p.add_argument("--center", action=argparse.BooleanOptionalAction, default=True,
                   help="centred, as fit (default); --no-center is the papers' setting")
    _add_kernel_args(p)
    p.set_defaults(func=run_plan, flag_names=flag_names(
        p, {"n_workers": "--workers", "n_landmarks": "--landmarks",
            "n_random_features": "--random-features", "random_state": "--seed"}))


def run_plan(args) -> int:
    from kernelscale.cli import _load
    from kernelscale.cli_common import check_coef0, check_degree

    check_degree(args.kernel, args.degree)
    check_coef0(args.kernel, args.coef0)
    for i, path in enumerate(args.data):
        if i:
            print()
        X = _load(path, args.header)
        if X.shape[0] < MIN_FIT_ROWS:  # what fit refuses, plan does not forecast
            raise UsageError(f"{path} holds no rows" if X.shape[0] == 0 else
                             f"{path}: the data has {X.shape[0]} row(s); at least "
                             f"{MIN_FIT_ROWS} are needed to fit")
        print_plan(path, X, args)
    return 0


def print_plan(path: str, X, args) -> None:
    """One file's forecast table on stdout."""
    n, d = X.shape
    n_rows, options = _fit_setting(X, args)
    sparse = f", {X.nnz:,} nonzeros (each sampled row charged 2 x its row's size at most)" \
        if sp.issparse(X) else ""
    print(f"{path}: {n:,} x {d:,}{sparse}; {len(n_rows)} "
          f"{args.partition.replace('_', '-')} workers (seed {args.seed}), "
          f"k = {args.n_components}, {'centred' if args.center else 'uncentred'}, "
          f"kernel {args.kernel}")
    if args.max_words is not None:
        _print_budget(n_rows, d, args, options)
        return
    sizes = sorted(set(args.landmarks))
    print(f"{'method':<16} " + " ".join(f"{'|Y| = ' + str(y):>16}" for y in sizes))
    for method in FORECAST_METHODS:
        if method in ("exact", "random_features"):
            size = {} if method == "exact" else {"n_random_features": args.random_features}
            f = forecast_words(method, n_rows, d, args.n_components, **size, **options)
            what = "all n points" if method == "exact" else f"m = {f.n_random_features}"
            print(f"{method:<16} {_cell(f):>16}  ({what})")
            continue
        cells = [_cell(forecast_words(method, n_rows, d, args.n_components, n_landmarks=y,
                                      **options)) for y in sizes]
        print(f"{method:<16} " + " ".join(f"{c:>16}" for c in cells))
    print("fit words, both directions / rounds (ledger.total_words('fit') / "
          f"ledger.n_rounds('fit')); the data set itself: {_data_words(X):,} words")


def _cell(forecast) -> str:
    """A forecast's words and rounds, ``'99,346 / 9'``."""
    return f"{forecast.words:,} / {forecast.n_rounds}"


def _print_budget(n_rows, d, args, options) -> None:
    from kernelscale.horizontal.budget import (
        WordBudgetError,
        largest_within,
        pilot_sizes,
        plan_budget,
    )

    measured = (args.sampler == "ridge" and args.messages == "gram"
                and options["kernel"].is_shift_invariant)  # as choice.measures
    print(f"{'method':<16} {'largest setting':>16} {'fit words':>12} {'upload words':>13} "
          f"{'rounds':>7}")
    for method in FORECAST_METHODS:
        f = largest_within(method, args.max_words, n_rows, d, args.n_components,
                           measured=measured, **options)
        if f is None:
            why = "all the data and its model" if method == "exact" else "k components"
            print(f"{method:<16} {'-':>16}   ({why} cost more than {args.max_words:,} words)")
            continue
        print(f"{method:<16} {f.setting:>16} {f.words:>12,} {f.upload_words:>13,} "
              f"{f.n_rounds:>7}")
    try:
        plan = plan_budget(args.max_words, n_rows, d, args.n_components, measured=measured,
                           **options)
    except WordBudgetError as exc:
        print(f"fit --max-words {args.max_words} stops with an error: "
              f"{in_flags(exc, getattr(args, 'flag_names', None))}")
        return
    print(f"fit --max-words {args.max_words} runs {plan.method} with {plan.forecast.setting} "
          f"({plan.forecast.words:,} words, {plan.forecast.n_rounds} rounds): {plan.reason}")
    if plan.method == "diskpca" and args.sampler == "ridge":
        from kernelscale.horizontal.pilot import (
            FLAT,
            MIN_BATCH_PILOT,
            MIN_PILOT,
            PEAKED,
            too_small_for_batch,
            too_small_to_read,
        )
        from kernelscale.horizontal.samplers import ridge_schedule

        kernel = options["kernel"]
        n_pilot = ridge_schedule(kernel, args.n_components, plan.n_landmarks)[0]
        # as choose_after_pilot: an RBF or Laplacian pilot is read whatever its size
        if not kernel.is_shift_invariant and too_small_to_read(n_pilot, args.n_components):
            print(f"  its uniform pilot of {n_pilot} points is too few to read the spectrum "
                  f"(fewer than {MIN_PILOT} k = {MIN_PILOT * args.n_components}): the fit "
                  "keeps this plan")
            return
        after = pilot_sizes(plan, n_pilot)
        no_batch = ""
        if too_small_for_batch(n_pilot):  # as choose_after_pilot
            after.pop("uniform_batch", None)
            no_batch = f", not uniform_batch (its pilot would need {MIN_BATCH_PILOT} points)"
        options = ", ".join(f"{m} with {f.setting}" for m, f in after.items() if f is not None)
        print(f"  its uniform pilot of {n_pilot} points can change this: where the "
              f"pilot's energy is spread (flatness < {FLAT}), the fit runs "
              f"{options or 'no other method'} instead{no_batch} (the pilot's points count "
              f"towards their sample); where it is concentrated (flatness >= {PEAKED}), the "
              "ridge rounds draw by the plain residual")
        if measured:
            print("  its ridge rounds measure as they go: disLR's Gram comes in parts with "
                  "each round's points, and where round 1's ridge points added clearly less "
                  "energy over every row than its uniform ones, round 2 draws uniformly")


def _fit_setting(X, args) -> tuple[list[int], dict]:
    """The partition sizes and forecast options of ``kernelscale fit`` with these options."""
    from kernelscale.horizontal.estimator import DistributedKernelPCA
    from kernelscale.linalg import as_generator
    from kernelscale.partition import make_partition

    n, d = X.shape
    parts = make_partition(n, min(args.workers, n), args.partition,
                           random_state=as_generator(args.seed))
    n_rows = [len(p) for p in parts]
    # The kernel's scale does not change a word count; fit sets it from the data.
    gamma = args.gamma
    if gamma is None and args.kernel in ("rbf", "laplacian"):
        gamma = 1.0  # fit's bandwidth heuristic gives a number: one word, as this one
    estimator = DistributedKernelPCA(kernel=args.kernel, gamma=gamma, degree=args.degree,
                                     coef0=args.coef0)
    options = {"kernel": estimator._make_kernel(d), "center": args.center,
               "messages": args.messages, "sampler": args.sampler}
    if sp.issparse(X):
        options["max_row_nnz"] = max_row_nnz_of(X)
    return n_rows, options


def _data_words(X) -> int:
    from kernelscale.runtime.ledger import count_words

    return count_words(X)
