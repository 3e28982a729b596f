"""``fit_app``: a ServerApp that fits a kernelscale estimator on the federation, by itself.

The way a Flower user fits: ``flwr run DIR <connection> --run-config '...'``
(or ``kernelscale flower run``, which exits non-zero when the run fails) from
any machine, over the user's own (TLS) connection, where ``DIR`` holds the app
that ``kernelscale flower-app DIR`` writes. The SuperLink starts this ServerApp
on its machine; it builds the estimator named in the run config, fits it on a
:class:`~kernelscale.backends.flower.grid.GridCluster` (the master function
runs here and talks to the SuperNodes through the Grid, nothing else), and
writes the fitted estimator as a kernelscale model file
(:func:`kernelscale.model.save_model`) under ``output``, a plain file name in
the operator's model folder, with the ledger beside it (every message, CSV:
``model.npz`` -> ``model.ledger.csv``) and the run's record (``model.run.json``:
which node held which partition, each party's policy, the run's options). The
run's log (``flwr log <run-id> --stream``) shows the settings, which node holds
which partition, one line per round, the ledger's summary and where the model
was written.

The run config::

    estimator = "FederatedKernelKMeans"   # one of runconfig.ESTIMATORS; nothing else
    output = "fk.npz"                     # a file name in the operator's model folder
    overwrite = false                     #   (refused if it exists, unless overwrite = true)
    n-workers = 3                         # partitions 0..n-1 (0: the roster's, or every node)
    data-key = "partition-path"           # the node-config key of the parties' data files
    timeout = 600.0                       # seconds a round may take
    start-timeout = 180.0                 # seconds to wait for the nodes
    lost = "error"                        # or "drop" (see FlowerCluster)
    secure-rounds = ""                    # "all", or summed round names, comma-separated
    secure-range = 10000.0
    n-clusters = 10                       # the estimator's parameters, kebab-case
    random-state = 0

Every value is checked, by type, before any round: a quoted ``"false"`` is a
string and is refused, as is a ``secure-rounds`` name that is not a summed round
of the estimator's protocols. An estimator parameter left at ``""`` (the app's
default for each of them) keeps the estimator's own default; the parameters are
checked as the estimator checks them (scikit-learn's ``_validate_params``); a
parameter that the chosen estimator does not have is refused.

What is the operator's, not the run's
(:mod:`~kernelscale.backends.flower.operator_settings`): the model folder
(``KERNELSCALE_FLOWER_MODELS``) and the roster of nodes
(``KERNELSCALE_FLOWER_ROSTER``), from the environment of the SuperLink (or
SuperExec) that started this ServerApp. What each party answers is the party's
(:mod:`~kernelscale.backends.flower.policy`).
"""

from __future__ import annotations

import json
import time

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from kernelscale.backends.flower.operator_settings import operator_roster
from kernelscale.backends.flower.runconfig import build_estimator, ledger_path, run_record_path


def _n_workers(grid, wanted: int, roster, timeout: float) -> int:
    """``wanted``, or (0) the roster's partitions, or the number of nodes once one is connected."""
    if wanted:
        return wanted
    if roster is not None:
        return len(roster)
    deadline = time.monotonic() + timeout
    while not (nodes := list(grid.get_node_ids())):
        if time.monotonic() > deadline:
            raise TimeoutError(f"No SuperNode connected within {timeout:g} s.")
        time.sleep(0.2)
    return len(nodes)


def _write_beside(path, text: str) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(text)
    temporary.replace(path)


def fit_on_grid(grid, config: dict, say=print, environ=None):
    """Fit the estimator that ``config`` names on ``grid``'s nodes and save it; return it.

    ``environ`` (default ``os.environ``) holds the operator's settings.
    """
    from kernelscale.backends.flower.grid import GridCluster
    from kernelscale.model import save_model

    estimator, options = build_estimator(config, environ)
    roster = operator_roster(environ)
    name = type(estimator).__name__
    n_workers = _n_workers(grid, int(options["n-workers"]), roster,
                           float(options["start-timeout"]))
    # The model records the fit's true count of parties, not the estimator's default.
    if "n_workers" in estimator.get_params():
        estimator.set_params(n_workers=n_workers)
    elif name == "VerticalKernelPCA" and estimator.feature_blocks is None:
        estimator.set_params(feature_blocks=n_workers)  # one block per party
    say(f"kernelscale: fitting {name} on {n_workers} SuperNodes (data key "
        f"{options['data-key']!r}); parameters: {estimator.get_params()}")
    say("kernelscale: partitions bound to nodes by "
        + (roster.source if roster is not None else
           "the nodes' own partition-id (no roster: the operator sets KERNELSCALE_FLOWER_ROSTER)"))
    cluster = GridCluster(grid, n_workers, data_key=str(options["data-key"]),
                          timeout=float(options["timeout"]), lost=str(options["lost"]),
                          start_timeout=float(options["start-timeout"]),
                          secure_rounds=options["secure-rounds"],
                          secure_range=float(options["secure-range"]), roster=roster, say=say)
    for partition, (node, policy) in enumerate(zip(cluster.node_ids, cluster.node_policies,
                                                   strict=True)):
        say(f"kernelscale: partition {partition}: node {node}, policy {policy}")
    count = [0]

    def progress(round, phase, seconds):
        count[0] += 1
        say(f"kernelscale: round {count[0]} {round!r} ({phase}) {seconds:.3f} s")

    cluster.add_listener(progress)
    estimator.set_params(backend="flower", client=cluster)
    start = time.perf_counter()
    if name == "VerticalKernelPCA":  # one party per node; the blocks stay on the nodes
        estimator.fit(options["data-key"])
    else:
        estimator.fit(None)
    seconds = time.perf_counter() - start
    estimator.set_params(client=None)  # the model file holds no cluster
    ledger = estimator.communication_
    say(f"kernelscale: {name} fitted in {seconds:.2f} s, {ledger.total_words('fit'):,} fit "
        "words; the ledger:\n" + ledger.summary(phase=None, times=False))
    output = options["output"]
    save_model(estimator, output)
    _write_beside(ledger_path(output), ledger.to_csv())
    record = {"estimator": name, "output": output.name, "n_workers": n_workers,
              "data_key": options["data-key"],
              "partitions": {str(p): {"node": int(n), "policy": policy} for p, (n, policy)
                             in enumerate(zip(cluster.node_ids, cluster.node_policies,
                                              strict=True))},
              "bound_by": roster.source if roster is not None else "the nodes' partition-id",
              "lost_workers": sorted(int(w) for w in cluster.lost_workers),
              "options": {k: v for k, v in options.items() if k not in ("output",)},
              "fit_seconds": round(seconds, 3)}
    _write_beside(run_record_path(output), json.dumps(record, indent=1, default=str) + "\n")
    say(f"kernelscale: model written to {output.name} in the operator's model folder, with "
        f"its ledger ({ledger_path(output).name}: every message, CSV) and the run's record "
        f"({run_record_path(output).name}); load the model with kernelscale.model.load_model")
    return estimator


fit_app = ServerApp()


@fit_app.main()
def fit_main(grid: Grid, context: Context) -> None:
    """The ServerApp's main: :func:`fit_on_grid` with the run's config."""
    from kernelscale.backends.flower.submit import FAILED_MARK

    def say(text: str) -> None:
        print(text, flush=True)

    try:
        fit_on_grid(grid, dict(context.run_config), say)
    except Exception as exc:  # one line that `kernelscale flower run` reports
        say(f"{FAILED_MARK}{type(exc).__name__}: {exc}")
        raise


__all__ = ["fit_app", "fit_on_grid"]
