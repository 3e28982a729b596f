"""Flower as its users deploy it: TLS, authenticated SuperNodes, runs a party can trust.

One federation for the module, on 127.0.0.1: a SuperLink over TLS (a throwaway
CA) with SuperNode authentication and the operator's settings (a model folder, a
roster binding each registered node to its partition), three SuperNodes under the
default policy (no raw rows), each holding a horizontal partition, a vertical block
of the same 240 digits rows and its block of 12 new samples.
``kernelscale flower run`` of the app written by ``kernelscale flower-app`` submits
the module's runs when the federation starts, one after the other (each once the
previous ServerApp has started), and they run beside the next tests, as several
users' runs would:

* FK k-means and the vertical one-shot KPCA complete (exit 0): their model files
  load to the in-process fits (labels equal; eigenvectors to 1e-10), their ledgers
  are the in-process ledgers message for message, the roster's nodes were used, and
  the vertical model transforms new samples through the parties
  (a FlowerCluster over the federation's named TLS connection) as in-process;
* DistributedKernelPCA (sampled raw rows) is refused by the nodes: exit 1 naming the
  node, the step and allow-rows, and no model; a run naming an estimator outside the
  allow-list fails before any round (exit 1).

A connection whose CA does not match fails to submit (exit 2) naming the
certificate; a FlowerCluster that cannot connect fails at once naming its cause; a
node whose key is not registered is refused and says so; a script with a
LocalFederation stops it on SIGTERM and SIGHUP.
"""

from __future__ import annotations

import csv
import io
import json
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pytest.importorskip("flwr", reason="backend='flower' needs flwr: pip install kernelscale[flower]")
psutil = pytest.importorskip("psutil")

from flower_federation import running_federation  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

from kernelscale import VerticalKernelPCA  # noqa: E402
from kernelscale.backends.flower.certificates import make_tls_files  # noqa: E402
from kernelscale.backends.flower.cli import write_fit_app  # noqa: E402
from kernelscale.backends.flower.cluster import FlowerCluster  # noqa: E402
from kernelscale.backends.flower.connection import connection_toml  # noqa: E402
from kernelscale.backends.flower.processes import wait_ended  # noqa: E402
from kernelscale.backends.flower.runconfig import ledger_path, run_record_path  # noqa: E402
from kernelscale.federated import FederatedKernelKMeans  # noqa: E402
from kernelscale.model import load_model  # noqa: E402

TOL = 1e-10
RUN_TIMEOUT = 300  # seconds a run's command may take before the test fails
DIGITS = load_digits().data / 16.0
X, NEW = DIGITS[:240], DIGITS[240:252]
ROWS = [X[i::3] for i in range(3)]  # horizontal: three clients
COLUMNS = [slice(0, 21), slice(21, 42), slice(42, 64)]
BLOCKS = [X[:, c] for c in COLUMNS]  # vertical: three parties, same samples
NEW_BLOCKS = [NEW[:, c] for c in COLUMNS]
FK = {"n-clusters": 4, "gamma": 0.05, "n-random-features": 6, "max-iter": 1,
      "coreset-size": 30, "n-refine": 0, "random-state": 0}
VERTICAL = {"n-components": 2, "kernel": "rbf", "gamma": 0.05, "n-local-components": 4}


def _snake(params: dict) -> dict:
    return {k.replace("-", "_"): v for k, v in params.items()}


def _run_config(params: dict) -> str:
    def toml(v):
        return f'"{v}"' if isinstance(v, str) else repr(v)

    return " ".join(f"{k}={toml(v)}" for k, v in params.items())


RUNS = {  # the runs of the module, submitted together (see `started`)
    "fk": {"estimator": "FederatedKernelKMeans", **FK, "output": "fk.npz"},
    "vertical": {"estimator": "VerticalKernelPCA", **VERTICAL, "data-key": "block-path",
                 "output": "vertical.npz"},
    "rows": {"estimator": "DistributedKernelPCA", "n-components": 2, "output": "dk.npz"},
    "refused": {"estimator": "KMeans", "output": "km.npz"},
}


class Run:
    """``kernelscale flower run APP kernelscale-local -c ...``, started at once; :meth:`wait`
    waits for the command (at most RUN_TIMEOUT) and gives its exit code and output."""

    def __init__(self, federation, app, folder, name: str, params: dict, connection=None):
        self.log_file = folder / f"{name}.log"
        self.output = federation.models / str(params.get("output", ""))
        with open(self.log_file, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "kernelscale", "flower", "run", str(app),
                 connection or federation.connection, "-c", _run_config(params)],
                env=federation.flwr_env(), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)

    def wait_started(self) -> None:
        """Until the run's ServerApp has started (its first line) or the command ended.

        Flower 1.42 gives a ServerApp 30 s from the claim of its task to its first call;
        several starting at once on a loaded 2-core machine miss it, their tasks are
        claimed again by new ServerApps, and so on: the runs start one at a time."""
        for _ in range(RUN_TIMEOUT * 10):
            if self.process.poll() is not None or "kernelscale: " in \
                    self.log_file.read_text(errors="replace").split("its log follows", 1)[-1]:
                return
            time.sleep(0.1)

    def wait(self) -> tuple[int, str]:
        try:
            code = self.process.wait(RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.stop()
            pytest.fail(f"the run did not end within {RUN_TIMEOUT} s:\n"
                        f"{self.log_file.read_text(errors='replace')[-3000:]}")
        return code, self.log_file.read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class Runs:
    """The runs of RUNS, submitted one after the other by a thread (each once the previous
    ServerApp has started, see :meth:`Run.wait_started`) while the module's other tests
    go on; ``runs[name]`` waits until that run is submitted."""

    def __init__(self, federation, app, folder):
        self._runs: dict = {}
        self._stopped = False
        self._thread = threading.Thread(target=self._submit, args=(federation, app, folder),
                                        daemon=True)
        self._thread.start()

    def _submit(self, federation, app, folder) -> None:
        for name, params in RUNS.items():
            if self._stopped:
                return
            run = Run(federation, app, folder, name, params)
            self._runs[name] = run
            run.wait_started()

    def __getitem__(self, name: str) -> Run:
        for _ in range(RUN_TIMEOUT * 10):
            if name in self._runs or not self._thread.is_alive():
                break
            time.sleep(0.1)
        return self._runs[name]

    def stop(self) -> None:
        self._stopped = True
        self._thread.join(RUN_TIMEOUT)
        for run in self._runs.values():
            run.stop()


@pytest.fixture(scope="module")
def started(tmp_path_factory):
    """The module's federation, and the runs of RUNS, submitted as several data scientists
    would: they run side by side while the next tests use the federation, and the tests
    that read their results wait for them (those tests come last)."""
    folder = tmp_path_factory.mktemp("flower-secure")
    with running_federation(folder, ROWS, BLOCKS, NEW_BLOCKS, tls=True,
                            node_auth=True) as federation:
        app = write_fit_app(folder / "app" / "fit-app").parent
        runs = Runs(federation, app, folder)
        try:
            yield federation, runs, app
        finally:
            runs.stop()


@pytest.fixture(scope="module")
def federation(started):
    return started[0]


@pytest.fixture(scope="module")
def runs(started):
    return started[1]


def _fit_rows(ledger_csv) -> list[dict]:
    rows = csv.DictReader(io.StringIO(ledger_csv.read_text()))
    return [row for row in rows if row["phase"] == "fit"]


def test_the_secure_federation_starts_with_tls_registered_nodes_and_a_roster(federation):
    assert federation.tls and federation.node_auth
    assert federation.root_certificates.is_file()
    superlink = " ".join(federation.commands[0])
    assert "--enable-supernode-auth" in superlink and "--insecure" not in superlink
    assert "--ssl-certfile" in superlink
    for args in federation.commands[1:]:
        assert "--insecure" not in args and "--auth-supernode-private-key" in args
        assert args[args.index("--root-certificates") + 1] == str(federation.root_certificates)
        assert "--ssl-certfile" in args  # its Runtime API too
    roster = federation.roster_file.read_text()
    assert all(f"{i} = {node}" in roster for i, node in enumerate(federation.node_ids))


def test_a_run_that_cannot_connect_fails_at_once_with_its_cause(federation):
    """No CA certificate for a TLS SuperLink: refused at once, naming the certificate
    that did not verify (before, after `flwr run`'s retries), not at start_timeout."""
    with pytest.raises(RuntimeError, match=r"The SuperLink of 127\.0\.0\.1:\d+ cannot be used: "
                                           r"the SuperLink's TLS certificate was not verified"):
        FlowerCluster(federation.address, 3, insecure=False, start_timeout=600)
    with pytest.raises(FileNotFoundError, match="root_certificates"):
        FlowerCluster(federation.address, 3, root_certificates="/nonexistent/ca.crt")
    with pytest.raises(ValueError, match="not both"):
        FlowerCluster(federation.address, 3, connection="kernelscale-local")


def test_a_run_with_another_ca_cannot_be_submitted_and_says_why(federation, started,
                                                               tmp_path):
    """`kernelscale flower run` over a connection whose CA did not sign the SuperLink's
    certificate: exit 2, and the cause (flwr itself says only "unavailable")."""
    other = make_tls_files(tmp_path / "other")
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text(connection_toml("other", federation.address,
                                                      other["ca"]))
    done = subprocess.run([sys.executable, "-m", "kernelscale", "flower", "run",
                           str(started[2]), "other", "-c", 'output="x.npz"'],
                          env=dict(federation.flwr_env(), FLWR_HOME=str(home)),
                          capture_output=True, text=True, timeout=RUN_TIMEOUT)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "could not submit the run" in done.stderr
    assert "certificate was not verified" in done.stderr


def _command_line(process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.NoSuchProcess:  # a child that has just ended (a zombie too)
        return ""


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
    assert "so it refused this node's key" in log  # the launcher says why


def test_flower_app_command_writes_a_runnable_app(tmp_path):
    from kernelscale.cli import main

    assert main(["flower-app", str(tmp_path / "a"), "--estimator", "VerticalKernelPCA"]) == 0
    text = (tmp_path / "a" / "pyproject.toml").read_text()
    assert 'serverapp = "kernelscale.backends.flower.app:fit_app"' in text
    assert 'estimator = "VerticalKernelPCA"' in text and 'n-clusters = ""' in text
    assert main(["flower-app", str(tmp_path / "a")]) == 2  # no silent overwrite
    assert main(["flower-app", str(tmp_path / "b"), "--estimator", "KMeans"]) == 2


STOPPED_BY_SIGNAL = """
import sys, time
import numpy as np
from kernelscale.backends.flower.local import LocalFederation

folder = sys.argv[1]
np.save(folder + "/p.npy", np.ones((4, 2)))
with LocalFederation([{"partition-id": 0, "partition-path": folder + "/p.npy"}],
                     folder + "/processes", node_idle_seconds=0.05,
                     warm_serverapp=sys.argv[2] == "warm"):
    print("started", flush=True)
    time.sleep(600)
"""


def test_a_script_that_gets_sigterm_or_sighup_stops_its_federation(tmp_path):
    """Issue 47.5: the SuperLink, its SuperExec and the SuperNode (and the warm
    ServerApp process, started by the SIGTERM script) all end with a script (inside ``with
    LocalFederation``) that was sent SIGTERM or SIGHUP; the script then ends as the signal
    says. Both scripts run side by side."""
    scripts, started = {}, {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        folder = tmp_path / sig.name
        folder.mkdir()
        warm = "warm" if sig == signal.SIGTERM else "cold"
        scripts[sig] = subprocess.Popen([sys.executable, "-c", STOPPED_BY_SIGNAL, str(folder),
                                         warm],
                                        stdout=subprocess.PIPE, text=True,
                                        start_new_session=True)
    try:
        for sig, script in scripts.items():
            assert script.stdout.readline().strip() == "started"
            process = psutil.Process(script.pid)
            for _ in range(300):  # the node and the SuperLink's SuperExec
                started[sig] = process.children(recursive=True)
                names = " ".join(_command_line(p) for p in started[sig])
                if "supernode" in names and "superexec" in names:
                    break
                psutil.wait_procs([process], timeout=0.1)
            assert "supernode" in names and "superexec" in names, names
            assert ("warm_serverapp" in names) == (sig == signal.SIGTERM), names
        for sig, script in scripts.items():
            script.send_signal(sig)
        for sig, script in scripts.items():
            assert script.wait(60) == -sig
            assert not wait_ended(started[sig], 30), f"left running after {sig.name}"
    finally:  # whatever is left (on code that lets the federation run on)
        for process in [p for found in started.values() for p in found]:
            try:
                process.kill()
            except psutil.NoSuchProcess:
                pass
        for script in scripts.values():
            if script.poll() is None:
                script.kill()
                script.wait()
            script.stdout.close()


# The tests below read the module's runs (submitted when the federation started).

def test_flwr_run_fits_fk_kmeans_to_the_in_process_model_on_the_rostered_nodes(runs,
                                                                               federation):
    code, log = runs["fk"].wait()
    output = runs["fk"].output
    assert code == 0 and output.is_file(), log
    local = FederatedKernelKMeans(**_snake(FK), n_workers=3).fit(ROWS)
    model = load_model(output)
    assert isinstance(model, FederatedKernelKMeans)
    assert model.n_workers == 3  # the fit's true count, not the estimator's default
    np.testing.assert_array_equal(model.labels_, local.labels_)
    np.testing.assert_array_equal(model.predict(X), local.predict(X))
    expected = list(csv.DictReader(io.StringIO(local.communication_.copy("fit").to_csv())))
    assert _fit_rows(ledger_path(output)) == expected
    assert model.communication_.copy("fit") == local.communication_.copy("fit")
    record = json.loads(run_record_path(output).read_text())
    assert [record["partitions"][str(i)]["node"] for i in range(3)] == federation.node_ids[:3]
    assert record["bound_by"].startswith("the roster")
    # the run's log: progress by round, the ledger's summary, where the model went
    assert "by kind:" in log and "model written to fk.npz" in log
    # five round trips in all (issue 45): the shapes, the DSPGD iteration, H with the
    # local coresets, the centres, the labels
    rounds = re.findall(r"kernelscale: round (\d+) '([^']+)' \((\w+)\)", log)
    assert [name for _, name, _ in rounds] == [
        "describe partitions", "dspgd: iteration", "fk: H and local coresets",
        "kmeans: centres", "kmeans: labels"]
    assert "finished:completed" in log


def test_a_protocol_sending_raw_rows_is_refused_by_the_parties(runs):
    """The default node policy: DistributedKernelPCA's sampled landmarks are raw rows."""
    code, log = runs["rows"].wait()
    assert code == 1, log
    assert "PolicyRefusal: SuperNode" in log and "allow-rows=true" in log
    assert "uniform_first_sample_step would reply raw feature rows" in log
    assert not runs["rows"].output.exists()
    assert "finished:failed" in log


def test_a_run_that_cannot_work_fails_before_any_round_naming_the_cause(runs):
    """(An output with `..` too: tests/test_flower_runconfig.py, and as a real run in
    tests/test_flower_netns.py.)"""
    code, log = runs["refused"].wait()
    assert code == 1 and "estimator='KMeans' is not one that runs on Flower" in log
    assert "round 1" not in log and not runs["refused"].output.exists()


def test_flwr_run_fits_the_vertical_kpca_which_transforms_through_the_parties(runs,
                                                                              federation,
                                                                              monkeypatch):
    code, log = runs["vertical"].wait()
    output = runs["vertical"].output
    assert code == 0 and output.is_file(), log
    local = VerticalKernelPCA(**_snake(VERTICAL)).fit(BLOCKS)
    model = load_model(output)
    assert model.feature_blocks == 3  # the parties of the fit, not the default
    np.testing.assert_allclose(model.eigenvalues_, local.eigenvalues_, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(np.abs(model.eigenvectors_), np.abs(local.eigenvectors_),
                               atol=TOL)
    expected = list(csv.DictReader(io.StringIO(local.communication_.copy("fit").to_csv())))
    assert _fit_rows(ledger_path(output)) == expected
    assert all(row["kind"] != "raw_points" for row in expected)
    # each party projects its block of the new samples: a FlowerCluster over the named
    # TLS connection of the federation's Flower configuration
    monkeypatch.setenv("FLWR_HOME", str(federation.flwr_home))
    model.set_params(client=federation.connection, timeout=120)
    scores, ledger = model.distributed_transform("new-block-path")
    np.testing.assert_allclose(np.abs(scores), np.abs(local.transform(NEW_BLOCKS)), atol=1e-8)
    assert ledger.total_words(kind="raw_points") == 0


def test_every_run_s_serverapp_was_forked_warm(runs, federation):
    """LocalFederation's default: the SuperExec starts the stand-in flwr-serverapp, and the
    warm process forks each run's ServerApp (at least one per run of RUNS, which have all
    ended; the tests above may have opened more)."""
    for name in RUNS:
        runs[name].wait()
    forked = re.findall(r"warm ServerApp process \d+ started", federation.log("warm-serverapp"))
    assert len(forked) >= len(RUNS), federation.log("warm-serverapp")
