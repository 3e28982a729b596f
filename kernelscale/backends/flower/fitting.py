"""``fit_app``: a ServerApp that fits a kernelscale estimator on the federation, by itself.

The way a Flower user fits: ``flwr run DIR <connection> --run-config '...'``
from any machine, over the user's own (TLS) connection, where ``DIR`` holds the
app that ``kernelscale flower-app DIR`` writes. The SuperLink starts this
ServerApp on its machine; it builds the estimator named in the run config, fits
it on a :class:`~kernelscale.backends.flower.grid.GridCluster` (the master
function runs here and talks to the SuperNodes through the Grid, nothing else),
and writes the fitted estimator as a kernelscale model file
(:func:`kernelscale.model.save_model`) at ``output``, a path on the SuperLink's
machine, and the ledger beside it (every message, CSV: ``model.npz`` ->
``model.ledger.csv``). The run's log (``flwr log <run-id> --stream``, or ``flwr run
--stream``) shows the settings, one line per round, the ledger's summary and
where the model was written.

The run config::

    estimator = "FederatedKernelKMeans"   # one of runconfig.ESTIMATORS; nothing else
    output = "/srv/models/fk.npz"         # the model file (refused if it exists
    overwrite = false                     #   unless overwrite = true)
    n-workers = 3                         # SuperNodes with partition-id 0..n-1
    data-key = "partition-path"           # the node-config key of their data file
    timeout = 600.0                       # seconds a round may take
    lost = "error"                        # or "drop" (see FlowerCluster)
    secure-rounds = ""                    # "all", or round names, comma-separated
    secure-range = 10000.0
    n-clusters = 10                       # the estimator's parameters, kebab-case
    random-state = 0

An estimator parameter left at ``""`` (the app's default for each of them)
keeps the estimator's own default. The parameters are checked as the
estimator checks them (scikit-learn's ``_validate_params``) before any round;
a parameter that the chosen estimator does not have is refused.
"""

from __future__ import annotations

import time

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from kernelscale.backends.flower.runconfig import build_estimator, ledger_path


def _secure_rounds(text: str):
    text = str(text).strip()
    if not text:
        return None
    return "all" if text == "all" else [r.strip() for r in text.split(",") if r.strip()]


def _n_workers(grid, wanted: int, timeout: float) -> int:
    """``wanted``, or (0) the number of nodes once one is connected."""
    if wanted:
        return wanted
    deadline = time.monotonic() + timeout
    while not (nodes := list(grid.get_node_ids())):
        if time.monotonic() > deadline:
            raise TimeoutError(f"No SuperNode connected within {timeout:g} s.")
        time.sleep(0.2)
    return len(nodes)


def fit_on_grid(grid, config: dict, say=print):
    """Fit the estimator that ``config`` names on ``grid``'s nodes and save it; return it."""
    from kernelscale.backends.flower.grid import GridCluster
    from kernelscale.model import save_model

    estimator, options = build_estimator(config)
    name = type(estimator).__name__
    n_workers = _n_workers(grid, int(options["n-workers"]), float(options["start-timeout"]))
    say(f"kernelscale: fitting {name} on {n_workers} SuperNodes (data key "
        f"{options['data-key']!r}); parameters: {estimator.get_params()}")
    cluster = GridCluster(grid, n_workers, data_key=str(options["data-key"]),
                          timeout=float(options["timeout"]), lost=str(options["lost"]),
                          start_timeout=float(options["start-timeout"]),
                          secure_rounds=_secure_rounds(options["secure-rounds"]),
                          secure_range=float(options["secure-range"]))
    say(f"kernelscale: nodes {cluster.node_ids} hold partitions 0..{n_workers - 1}")
    count = [0]

    def progress(round, phase, seconds):
        count[0] += 1
        say(f"kernelscale: round {count[0]} {round!r} ({phase}) {seconds:.3f} s")

    cluster.add_listener(progress)
    estimator.set_params(backend="flower", client=cluster)
    start = time.perf_counter()
    if name == "VerticalKernelPCA":  # one party per node; the blocks stay on the nodes
        estimator.fit([f"flower:{options['data-key']}"] * n_workers)
    else:
        estimator.fit(None)
    seconds = time.perf_counter() - start
    estimator.set_params(client=None)  # the model file holds no cluster
    ledger = estimator.communication_
    say(f"kernelscale: {name} fitted in {seconds:.2f} s, {ledger.total_words('fit'):,} fit "
        "words; the ledger:\n" + ledger.summary(phase=None, times=False))
    save_model(estimator, options["output"])
    ledger_file = ledger_path(options["output"])
    temporary = ledger_file.with_name(f".{ledger_file.name}.tmp")
    temporary.write_text(ledger.to_csv())
    temporary.replace(ledger_file)
    say(f"kernelscale: model written to {options['output']} and its ledger (every message, "
        f"CSV) to {ledger_file}, on the SuperLink's machine; load the model with "
        "kernelscale.model.load_model")
    return estimator


fit_app = ServerApp()


@fit_app.main()
def fit_main(grid: Grid, context: Context) -> None:
    """The ServerApp's main: :func:`fit_on_grid` with the run's config."""
    def say(text: str) -> None:
        print(text, flush=True)

    fit_on_grid(grid, dict(context.run_config), say)


__all__ = ["fit_app", "fit_on_grid"]
