"""Flower as its users deploy it: TLS, authenticated SuperNodes, a fit started with ``flwr run``.

One federation for the module, on 127.0.0.1: a SuperLink over TLS (a throwaway
CA) with SuperNode authentication, three SuperNodes whose keys were registered
with ``flwr supernode register``, each holding a horizontal partition and a
vertical block of the same 240 digits rows. ``flwr run`` of the app written by
``kernelscale flower-app`` (the fitting ServerApp) over the federation's own
Flower connection fits FK k-means and the vertical one-shot KPCA; the model files
it writes load to the in-process fits (labels equal; eigenvectors to 1e-10) and
its ledgers are the in-process ledgers, message for message. Those runs (and one
that the fitting app refuses) are submitted together when the federation starts
and run beside the next tests, as several users' runs would. A FlowerCluster
fits over TLS too; a run that cannot work fails at once naming its cause; a node
whose key is not registered is refused; a SuperNode's executor ends with its
node however the node was started, and serves on after a task that failed.
"""

from __future__ import annotations

import csv
import gc
import io
import re
import signal
import subprocess
import warnings

import numpy as np
import pytest

pytest.importorskip("flwr", reason="backend='flower' needs flwr: pip install kernelscale[flower]")
psutil = pytest.importorskip("psutil")

from flower_federation import running_federation  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

from kernelscale import VerticalKernelPCA  # noqa: E402
from kernelscale.backends.flower.certificates import make_node_key  # noqa: E402
from kernelscale.backends.flower.cli import write_fit_app  # noqa: E402
from kernelscale.backends.flower.cluster import FlowerCluster  # noqa: E402
from kernelscale.backends.flower.connection import flwr_command  # noqa: E402
from kernelscale.backends.flower.local import _wait_ended  # noqa: E402
from kernelscale.backends.flower.runconfig import ledger_path  # noqa: E402
from kernelscale.backends.local import LocalCluster  # noqa: E402
from kernelscale.federated import FederatedKernelKMeans  # noqa: E402
from kernelscale.kernels import make_kernel  # noqa: E402
from kernelscale.vertical.oneshot import one_shot_kpca  # noqa: E402

TOL = 1e-10
RUN_TIMEOUT = 300  # seconds a `flwr run` subprocess may take before the test fails
X = load_digits().data[:240] / 16.0
ROWS = [X[i::3] for i in range(3)]  # horizontal: three clients
COLUMNS = [slice(0, 21), slice(21, 42), slice(42, 64)]
BLOCKS = [X[:, c] for c in COLUMNS]  # vertical: three parties, same samples
FK = {"n-clusters": 4, "gamma": 0.05, "n-random-features": 6, "max-iter": 1,
      "coreset-size": 30, "n-refine": 0, "random-state": 0}
VERTICAL = {"n-components": 2, "kernel": "rbf", "gamma": 0.05, "n-local-components": 4}


def _snake(params: dict) -> dict:
    return {k.replace("-", "_"): v for k, v in params.items()}


def _run_config(params: dict) -> str:
    def toml(v):
        return f'"{v}"' if isinstance(v, str) else repr(v)

    return " ".join(f"{k}={toml(v)}" for k, v in params.items())


RUNS = {  # the `flwr run` fits of the module, submitted together (see `started`)
    "fk": {"estimator": "FederatedKernelKMeans", **FK, "n-workers": 3},
    "vertical": {"estimator": "VerticalKernelPCA", **VERTICAL, "n-workers": 3,
                 "data-key": "block-path"},
    "refused": {"estimator": "KMeans"},
}


class FlwrRun:
    """``flwr run APP kernelscale-local --stream --run-config ...``, started at once; the
    model goes to ``output``; :meth:`log` waits for the command (at most RUN_TIMEOUT)."""

    def __init__(self, federation, app, folder, name: str, params: dict):
        self.output = folder / f"{name}.npz"
        self.log_file = folder / f"{name}.log"
        config = _run_config({**params, "output": str(self.output)})
        with open(self.log_file, "wb") as log:
            self.process = subprocess.Popen(
                [flwr_command(), "run", str(app), federation.connection, "--stream",
                 "--run-config", config], env=federation.flwr_env(), stdout=log,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def log(self) -> str:
        try:
            self.process.wait(RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"`flwr run` did not end within {RUN_TIMEOUT} s:\n"
                        f"{self.log_file.read_text(errors='replace')[-3000:]}")
        return self.log_file.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """The module's federation, and the `flwr run` fits of RUNS submitted to it together,
    as several data scientists would: they run while the next tests use the federation
    (Flower serves runs side by side), and the tests that read their results wait for them."""
    folder = tmp_path_factory.mktemp("flower-secure")
    with running_federation(folder, ROWS, BLOCKS, tls=True, node_auth=True) as federation:
        app = write_fit_app(folder / "app" / "fit-app").parent
        runs = {}
        try:
            for name, params in RUNS.items():
                runs[name] = FlwrRun(federation, app, folder, name, params)
            yield federation, runs
        finally:
            for run in runs.values():
                run.stop()


@pytest.fixture(scope="module")
def federation(started):
    return started[0]


@pytest.fixture(scope="module")
def runs(started):
    return started[1]


def _fit_rows(ledger_csv) -> list[dict]:
    rows = csv.DictReader(io.StringIO(ledger_csv.read_text()))
    return [row for row in rows if row["phase"] == "fit"]


def test_the_secure_federation_starts_with_tls_and_registered_nodes(federation):
    assert federation.tls and federation.node_auth
    assert federation.root_certificates.is_file()
    superlink = " ".join(federation.commands[0])
    assert "--enable-supernode-auth" in superlink and "--insecure" not in superlink
    assert "--ssl-certfile" in superlink
    for args in federation.commands[1:]:
        assert "--insecure" not in args and "--auth-supernode-private-key" in args
        assert args[args.index("--root-certificates") + 1] == str(federation.root_certificates)
        assert "--ssl-certfile" in args  # its Runtime API too: the executor speaks TLS


@pytest.mark.parametrize("config, error, match", [
    ({"estimator": "DistributedKernelPCA", "n-clusters": 3}, ValueError,
     "DistributedKernelPCA has no parameter 'n-clusters'"),
    ({"estimator": "FederatedKernelKMeans", "n-clusters": 0}, ValueError,
     "'n_clusters' parameter of FederatedKernelKMeans must be an int in the range"),
    ({"estimator": "VerticalKernelPCA", "client": "x"}, ValueError, "no parameter 'client'"),
    ({"estimator": "DistributedKernelPCA", "output": ""}, ValueError, "output is empty"),
    ({"estimator": "DistributedKernelPCA", "output": "/nonexistent/m.npz"}, PermissionError,
     "/nonexistent does not exist or is not writable"),
])
def test_the_run_config_is_checked_before_any_round(config, error, match, tmp_path):
    from kernelscale.backends.flower.runconfig import build_estimator

    config = {"output": str(tmp_path / "m.npz"), **config}
    with pytest.raises(error, match=match):
        build_estimator(config)


def test_the_run_config_sets_the_estimator_and_keeps_its_defaults(tmp_path):
    from kernelscale.backends.flower.runconfig import build_estimator

    (tmp_path / "old.npz").write_bytes(b"mine")
    with pytest.raises(FileExistsError, match="overwrite=true"):
        build_estimator({"estimator": "DistributedKernelPCA",
                         "output": str(tmp_path / "old.npz")})
    estimator, options = build_estimator({
        "estimator": "DistributedKernelPCA", "n-components": 3, "max-words": 100000,
        "gamma": "", "output": str(tmp_path / "new.npz"), "kernelscale-relay": ""})
    assert estimator.n_components == 3 and estimator.max_words == 100000
    assert estimator.gamma is None  # "" keeps the default
    assert options["n-workers"] == 0 and options["data-key"] == "partition-path"


def test_a_flower_cluster_fits_over_tls(federation):
    kernel = make_kernel("rbf", gamma=0.05)
    local = LocalCluster(BLOCKS)
    expected = one_shot_kpca(local, kernel, 2, n_local_components=4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        with FlowerCluster(federation.address, 3, root_certificates=federation.root_certificates,
                           data_key="block-path", timeout=120) as cluster:
            got = one_shot_kpca(cluster, kernel, 2, n_local_components=4)
        gc.collect()
    assert not [w for w in caught if "flwr-run.log" in str(w.message)]  # the log was closed
    assert cluster.ledger == local.ledger
    np.testing.assert_allclose(got.eigenvalues, expected.eigenvalues, atol=TOL)
    np.testing.assert_allclose(np.abs(got.eigenvectors), np.abs(expected.eigenvectors),
                               atol=TOL)


def test_an_estimator_fits_through_a_named_flower_connection(federation, monkeypatch):
    """client="<connection name>": the address and the CA certificate come from the user's
    Flower configuration ($FLWR_HOME/config.toml), as for `flwr run`."""
    from kernelscale import DistributedKernelPCA

    monkeypatch.setenv("FLWR_HOME", str(federation.flwr_home))
    options = dict(n_components=2, gamma=0.05, method="random_features",
                   n_random_features=50, random_state=0, n_workers=3)
    local = DistributedKernelPCA(**options).fit(ROWS)
    flower = DistributedKernelPCA(**options, backend="flower", client=federation.connection,
                                  timeout=120).fit(None)
    assert flower.communication_.copy("fit") == local.communication_.copy("fit")
    np.testing.assert_allclose(flower.transform(X), local.transform(X), rtol=TOL, atol=TOL)


def test_a_run_that_cannot_connect_fails_at_once_with_its_cause(federation):
    """No CA certificate for a TLS SuperLink: `flwr run` fails; the error is its own output
    (certificate verification), raised when the command ends, not at start_timeout."""
    with pytest.raises(RuntimeError, match=r"(?s)`flwr run` on 127\.0\.0\.1:\d+ failed before "
                                           r".*(CERTIFICATE_VERIFY_FAILED|SSL|certificate)"):
        FlowerCluster(federation.address, 3, insecure=False, start_timeout=600)
    with pytest.raises(FileNotFoundError, match="root_certificates"):
        FlowerCluster(federation.address, 3, root_certificates="/nonexistent/ca.crt")
    with pytest.raises(ValueError, match="not both"):
        FlowerCluster(federation.address, 3, connection="kernelscale-local")


def test_flwr_run_fits_fk_kmeans_to_the_in_process_model(runs):
    from kernelscale.model import load_model

    output, log = runs["fk"].output, runs["fk"].log()
    assert output.is_file(), log
    local = FederatedKernelKMeans(**_snake(FK), n_workers=3).fit(ROWS)
    model = load_model(output)
    assert isinstance(model, FederatedKernelKMeans)
    np.testing.assert_array_equal(model.labels_, local.labels_)
    np.testing.assert_array_equal(model.predict(X), local.predict(X))
    expected = list(csv.DictReader(io.StringIO(local.communication_.copy("fit").to_csv())))
    assert _fit_rows(ledger_path(output)) == expected
    assert model.communication_.copy("fit") == local.communication_.copy("fit")
    # the run's log: progress by round, the ledger's summary, where the model went
    assert "round 1 'describe partitions'" in log and "'dspgd: iteration'" in log
    assert "by kind:" in log and f"model written to {output}" in log
    # five round trips in all (issue 45): the shapes, the DSPGD iteration, H with the
    # local coresets, the centres, the labels
    rounds = re.findall(r"kernelscale: round (\d+) '([^']+)' \((\w+)\)", log)
    assert [name for _, name, _ in rounds] == [
        "describe partitions", "dspgd: iteration", "fk: H and local coresets",
        "kmeans: centres", "kmeans: labels"]


def test_flwr_run_fits_the_vertical_kpca_to_the_in_process_model(runs):
    from kernelscale.model import load_model

    output, log = runs["vertical"].output, runs["vertical"].log()
    assert output.is_file(), log
    local = VerticalKernelPCA(**_snake(VERTICAL)).fit(BLOCKS)
    model = load_model(output)
    np.testing.assert_allclose(model.eigenvalues_, local.eigenvalues_, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(np.abs(model.eigenvectors_), np.abs(local.eigenvectors_),
                               atol=TOL)
    expected = list(csv.DictReader(io.StringIO(local.communication_.copy("fit").to_csv())))
    assert _fit_rows(ledger_path(output)) == expected
    assert model.communication_.copy("fit") == local.communication_.copy("fit")
    assert all(row["kind"] != "raw_points" for row in expected)


def test_a_run_config_outside_the_allow_list_fails_at_once_naming_it(runs):
    output, log = runs["refused"].output, runs["refused"].log()
    assert "estimator='KMeans' is not one that runs on Flower" in log
    assert "round 1" not in log and not output.exists()


def _command_line(process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.NoSuchProcess:  # a child that has just ended (a zombie too)
        return ""


def test_the_executor_ends_with_a_node_started_without_job_control(federation, runs, tmp_path):
    """A node started with `&` from a script (SIGINT ignored, as a non-interactive shell
    does) and killed: its long-lived ClientApp process must not run on."""
    for run in runs.values():  # a fit's hello must not meet this fourth node
        run.log()
    private, public = make_node_key(tmp_path, "extra")
    federation.register([public])
    args = federation.node_args({"partition-id": 9, "partition-path": str(tmp_path / "x.npy")},
                                private)
    script = " ".join(f"'{a}'" for a in args) + " >/dev/null 2>&1 & echo $!; wait"
    shell = subprocess.Popen(["sh", "-c", script], stdout=subprocess.PIPE, text=True,
                             env=dict(federation.env, FLWR_HOME=str(tmp_path)),
                             start_new_session=True)
    node = psutil.Process(int(shell.stdout.readline()))
    executors = []
    try:
        for _ in range(300):  # the launcher starts its executor at once
            executors = [p for p in node.children() if "executor" in _command_line(p)]
            if executors:
                break
            psutil.wait_procs([node], timeout=0.1)
        assert executors, "the launcher started no executor"
        node.send_signal(signal.SIGKILL)
        alive = _wait_ended(executors, 30)  # a zombie, waiting for init to reap it, has ended
        assert not alive, "the executor ran on after its node was killed"
    finally:  # whatever is left (the executor, on code that lets it run on)
        left = [*executors, node]
        try:
            left += node.children(recursive=True)
        except psutil.NoSuchProcess:  # the node has ended (and its shell reaped it)
            pass
        for process in left:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        shell.wait(30)
        shell.stdout.close()


def test_an_unregistered_node_is_refused(federation, tmp_path):
    """Its key was never registered: the SuperLink refuses it and it exits (one retry)."""
    process = federation.add_node({"partition-id": 7, "partition-path": str(tmp_path / "x")},
                                  register=False, extra=["--max-retries", "1"])
    try:
        code = process.wait(120)
    except subprocess.TimeoutExpired:
        pytest.fail("the unregistered node was not refused")
    assert code != 0
    log = federation.log(f"supernode-{len(federation.nodes) - 1}")
    assert "Failed to activate SuperNode" in log


def test_flower_app_command_writes_a_runnable_app(tmp_path):
    from kernelscale.cli import main

    assert main(["flower-app", str(tmp_path / "a"), "--estimator", "VerticalKernelPCA"]) == 0
    text = (tmp_path / "a" / "pyproject.toml").read_text()
    assert 'serverapp = "kernelscale.backends.flower.app:fit_app"' in text
    assert 'estimator = "VerticalKernelPCA"' in text and 'n-clusters = ""' in text
    assert main(["flower-app", str(tmp_path / "a")]) == 2  # no silent overwrite
    assert main(["flower-app", str(tmp_path / "b"), "--estimator", "KMeans"]) == 2


class _Stop(BaseException):
    """Ends the executor's loop in the test (its own errors are Exceptions)."""


def test_the_executor_serves_on_after_a_task_fails(monkeypatch, capsys):
    """A task whose reply cannot be pushed (Flower's ObjectPushError, for one) costs that
    round, not the node: the executor reports it and takes the next task."""
    from kernelscale.backends.flower import executor

    tokens, ran = iter(["first", "second", "third"]), []

    class Task:
        def __init__(self, token):
            self.token = token

        def HasField(self, name):
            return name == "task"

    class RuntimeAPI:
        def AcquireTask(self, request):
            token = next(tokens, None)
            if token is None:
                raise _Stop
            return Task(token)

    def run_task(address, token, client_app, fab_cache, **options):
        ran.append(token)
        if token == "first":
            raise RuntimeError("ObjectPushError: object not pre-registered")

    monkeypatch.setattr(executor, "_runtime_client",
                        lambda address, token=None, **tls: RuntimeAPI())
    monkeypatch.setattr(executor, "run_task", run_task)
    with pytest.raises(_Stop):
        executor.serve("127.0.0.1:9094")
    assert ran == ["first", "second", "third"]
    assert "ObjectPushError" in capsys.readouterr().err
