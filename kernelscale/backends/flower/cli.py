"""``kernelscale flower-app DIR``: write a ready Flower app that fits with ``flwr run``.

The folder holds one ``pyproject.toml`` naming kernelscale's fitting ServerApp
(``kernelscale.backends.flower.app:fit_app``) and its ClientApp, with the default
run config: every run key and every parameter of the estimators that run on
Flower (an estimator parameter left at ``""`` keeps the estimator's default).
The bundle holds no code: the SuperLink and every SuperNode run the kernelscale
installed beside them. Then, with any connection of your Flower configuration::

    kernelscale flower-app fit-app
    kernelscale flower run fit-app my-federation -c \\
        'estimator="FederatedKernelKMeans" n-clusters=10 output="fk.npz"'

Importing this module does not import Flower.
"""

from __future__ import annotations

from pathlib import Path

from kernelscale.backends.flower.runconfig import (
    RUN_DEFAULTS,
    UNSET,
    all_parameter_keys,
    app_pyproject,
)
from kernelscale.files import write_atomically

#: The comment on top of the fitting app's ``pyproject.toml``.
FIT_APP_COMMENT = (
    "# A kernelscale app for Flower, written by `kernelscale flower-app` (kernelscale "
    "{version}).\n# flwr run <this folder> <connection> --stream --run-config "
    "'estimator=\"...\" output=\"...\"'\n")


def fit_app_toml(defaults: dict | None = None) -> str:
    """The ``pyproject.toml`` of the fitting app; ``defaults`` overrides run-config defaults."""
    import kernelscale

    config = {**RUN_DEFAULTS, **{key: UNSET for key in all_parameter_keys()}}
    for key, value in (defaults or {}).items():
        if key not in config:
            raise ValueError(f"{key!r} is not a key of the fitting app's run config.")
        config[key] = value
    return app_pyproject("kernelscale-fit", "Fit a kernelscale estimator on a Flower federation",
                         "fit_app", config,
                         comment=FIT_APP_COMMENT.format(version=kernelscale.__version__))


def write_fit_app(directory, defaults: dict | None = None, force: bool = False) -> Path:
    """Write the fitting app into ``directory`` (created); return its ``pyproject.toml``."""
    directory = Path(directory)
    target = directory / "pyproject.toml"
    if target.exists() and not force:
        raise FileExistsError(f"{target} exists; give another folder or --force.")
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"{directory} is a file, not a folder.")
    directory.mkdir(parents=True, exist_ok=True)
    text = fit_app_toml(defaults)
    write_atomically(target, lambda fh: fh.write(text.encode()))
    return target


def add_subcommand(subparsers) -> None:
    """Register ``flower-app`` and ``flower run`` on an ``argparse`` subparsers object."""
    from kernelscale.backends.flower import submit

    submit.add_subcommand(subparsers)
    p = subparsers.add_parser(
        "flower-app",
        help="write a Flower app folder that fits an estimator with `flwr run`",
        description="Write DIR/pyproject.toml: kernelscale's fitting ServerApp and its "
        "ClientApp, with every run-config key. Then: flwr run DIR <connection> --stream "
        "--run-config 'estimator=\"FederatedKernelKMeans\" n-clusters=10 "
        "output=\"model.npz\"' (a file name in the operator's model folder); "
        "kernelscale flower run DIR <connection> -c '...' does the same and exits non-zero "
        "when the run fails.",
    )
    p.add_argument("directory", metavar="DIR", help="the folder to write (created)")
    p.add_argument("--estimator", default=RUN_DEFAULTS["estimator"],
                   help="the default estimator of the app's run config "
                   f"(default {RUN_DEFAULTS['estimator']})")
    p.add_argument("--output", default="",
                   help="the default model file name, in the operator's model folder "
                   "(default: none, each run gives output=...)")
    p.add_argument("--force", action="store_true", help="replace DIR/pyproject.toml")
    p.set_defaults(func=run_flower_app)


def run_flower_app(args) -> int:
    from kernelscale.backends.flower.runconfig import estimator_class, run_parameters

    cls = estimator_class(args.estimator)  # one of the allow-list, or a clear error
    target = write_fit_app(args.directory, {"estimator": args.estimator,
                                            "output": args.output}, force=args.force)
    params = ", ".join(p.replace("_", "-") for p in run_parameters(cls))
    print(f"kernelscale: wrote {target}\nrun it with: kernelscale flower run {args.directory} "
          "<connection> -c 'output=\"model.npz\" n-workers=3 ...' (or flwr run, which exits 0 "
          f"even when the run fails)\n{args.estimator}'s parameters: {params}")
    return 0


__all__ = ["add_subcommand", "fit_app_toml", "write_fit_app"]
