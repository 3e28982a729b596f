"""The deployment guide of ``docs/flower.md``, run as written, each party on its own network.

The commands are read from the guide's named blocks (``guide-*``), so the guide
cannot drift from what works: the operator in one Linux network namespace, three
parties in three more, joined by a bridge on a private subnet, the SuperLink's
host name (``superlink.example.org``) resolved on every namespace's own
``/etc/hosts`` (``ip netns exec`` mounts ``/etc/netns/<ns>/hosts`` over it). Only
the guide's placeholders change: the operator's folder, each party's files and
partition id, the node ids in the roster. TLS, SuperNode authentication, the
SuperExec's shared secret, the Control and Runtime APIs on the operator's loopback
and the Fleet API alone on the host name, telemetry off, the SuperLink's database.

One deployment for the module (one SuperLink, one SuperExec, three nodes), and
the runs it proves:

* a fourth party whose key the operator registered, outside the roster, claiming
  partition 1 with partition 0's rows: the guide's FK k-means run is refused before
  any round, naming both nodes;
* the guide's runs: FK k-means and the vertical KPCA complete under the default
  policy and equal the in-process fits; DistributedKernelPCA is refused by the
  parties (raw rows) and writes no model; and a run whose output is ``../...`` is
  refused before any round;
* every run's ServerApp is forked by the guide's warm ServerApp process;
* a party cannot use the Control API (the Fleet address serves the Fleet API only,
  and the operator's address is not on the parties' network).

Each party runs as root here: the Python the suite runs lives under ``/root``
(mode 0700), so other Unix users could not start it. The module is skipped, with
the reason, where network namespaces cannot be made (not root, no ``ip``, a
container without the capability); CI runs the suite as root.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr", reason="the deployment needs flwr: pip install kernelscale[flower]")
psutil = pytest.importorskip("psutil")

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "flower.md"
HOST = "superlink.example.org"
SUBNET = "10.231.77"
TIMEOUT = 600  # seconds a command of the guide may take (a loaded machine is slow)
PARTIES = 3
ROGUE = PARTIES  # a fourth party, outside the roster, claiming partition 1


def guide_blocks(text: str) -> dict[str, str]:
    """``{name: body}`` of the guide's ``{code-block}`` blocks named ``guide-*``."""
    found = re.findall(r"```\{code-block\} \w+\n:name: (guide-[\w-]+)\n\n(.*?)\n```", text,
                       re.S)
    return dict(found)


def commands(block: str) -> list[str]:
    """The block's shell commands: continuation lines joined, comment lines dropped."""
    joined = re.sub(r"\\\n\s*", "", block)
    return [line.strip() for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs the suite as root)"
    for tool in ("ip", "openssl", "ssh-keygen", "bash"):
        if shutil.which(tool) is None:
            return f"the guide's deployment needs {tool!r} on PATH"
    probe = f"ksprobe{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    if made.returncode != 0:
        return f"network namespaces cannot be made here: {made.stderr.strip()}"
    return None


class Deployment:
    """Namespaces on a private bridge, one per role, and the processes started in them."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.tag = uuid.uuid4().hex[:4]
        self.names = {"op": f"ks{self.tag}op", **{i: f"ks{self.tag}p{i}"
                                                 for i in range(PARTIES + 1)}}
        self.lan = f"ks{self.tag}lan"
        self.processes: list[subprocess.Popen] = []
        self.made: list[str] = []
        import kernelscale

        path = os.environ.get("PYTHONPATH", "")
        self.env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}"
                    f"{os.environ.get('PATH', '')}",
                    "PYTHONPATH": str(Path(kernelscale.__file__).resolve().parents[1])
                    + (os.pathsep + path if path else ""), "PYTHONUNBUFFERED": "1"}
        self.env.pop("KERNELSCALE_FLOWER_ROSTER", None)
        self.env.pop("KERNELSCALE_FLOWER_MODELS", None)

    # ---------------------------------------------------------------- the network
    def ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True)

    def build(self) -> None:
        self.ip("netns", "add", self.lan)
        self.made.append(self.lan)
        self.ip("-n", self.lan, "link", "add", "br0", "type", "bridge")
        self.ip("-n", self.lan, "link", "set", "br0", "up")
        for index, (role, ns) in enumerate(self.names.items()):
            self.ip("netns", "add", ns)
            self.made.append(ns)
            inside, outside = f"ks{self.tag}v{index}a", f"ks{self.tag}v{index}b"
            self.ip("link", "add", inside, "type", "veth", "peer", "name", outside)
            self.ip("link", "set", inside, "netns", ns)
            self.ip("link", "set", outside, "netns", self.lan)
            self.ip("-n", self.lan, "link", "set", outside, "master", "br0", "up")
            address = f"{SUBNET}.{1 if role == 'op' else 10 + role}"
            self.ip("-n", ns, "addr", "add", f"{address}/24", "dev", inside)
            self.ip("-n", ns, "link", "set", inside, "up")
            self.ip("-n", ns, "link", "set", "lo", "up")
            hosts = Path("/etc/netns") / ns
            hosts.mkdir(parents=True, exist_ok=True)
            (hosts / "hosts").write_text(f"127.0.0.1 localhost\n{SUBNET}.1 {HOST}\n")

    def destroy(self) -> None:
        for process in self.processes:
            try:
                left = psutil.Process(process.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                left = []
            if process.poll() is None:
                process.terminate()
            for child in left:
                try:
                    child.terminate()
                except psutil.NoSuchProcess:
                    pass
            _, alive = psutil.wait_procs(left, timeout=10)
            for child in alive:
                child.kill()
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        for ns in reversed(self.made):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
            shutil.rmtree(Path("/etc/netns") / ns, ignore_errors=True)

    # ---------------------------------------------------------------- commands
    def run(self, role, command: str, cwd: Path, env: dict | None = None,
            check: bool = True) -> subprocess.CompletedProcess:
        """A command of the guide in ``role``'s namespace, in bash (``<(...)`` and all)."""
        done = subprocess.run(["ip", "netns", "exec", self.names[role], "bash", "-c", command],
                              cwd=cwd, env=env or self.env, capture_output=True, text=True,
                              timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        if check and done.returncode != 0:
            raise AssertionError(f"the guide's command failed in {role}: {command}\n"
                                 f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
        return done

    def start(self, role, command: str, cwd: Path, env: dict, log: str) -> subprocess.Popen:
        """A command of the guide that ends with ``&``: started, and stopped at the end."""
        # `A=1 B=2 exec cmd`: the process is the command itself (bash execs it)
        assignments, rest = re.match(r"((?:\w+=\S+\s+)*)(.*)", command).groups()
        with open(self.folder / f"{log}.log", "wb") as out:
            process = subprocess.Popen(
                ["ip", "netns", "exec", self.names[role], "bash", "-c",
                 f"{assignments}exec {rest}"],
                cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.processes.append(process)
        return process

    def block(self, role, block: str, cwd: Path, env: dict, log: str,
              replace=()) -> list[subprocess.Popen]:
        """Every command of a guide block: ``cd`` and ``export`` as a shell does them,
        ``cmd &`` started in the background, the others run to the end."""
        started = []
        for command in commands(block):
            for old, new in replace:
                command = command.replace(old, new)
            if command.startswith("cd "):
                cwd = Path(command[3:].strip())
            elif command.startswith("export "):
                for assignment in command[len("export "):].split():
                    key, _, value = assignment.partition("=")
                    env[key] = value
            elif command.endswith("&"):
                started.append(self.start(role, command[:-1].strip(), cwd, env,
                                          f"{log}-{len(started)}"))
            else:
                self.run(role, command, cwd, env)
        return started

    def log(self, name: str) -> str:
        path = self.folder / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""


def _wait_for_superlink(deployment, env, cwd) -> None:
    """Until the operator's address answers (TLS with the CA), inside its namespace."""
    script = ("import ssl, time, urllib.request\n"
              "context = ssl.create_default_context(cafile='ca.crt')\n"
              "for _ in range(600):\n"
              "    try:\n"
              "        urllib.request.urlopen('https://127.0.0.1:9093/health', timeout=1,"
              " context=context); break\n"
              "    except OSError: time.sleep(0.1)\n"
              "else: raise SystemExit('the SuperLink did not answer')\n")
    deployment.run("op", f"python -c \"{script}\"", cwd, env)


def _data():
    from sklearn.datasets import load_digits

    digits = load_digits().data / 16.0
    X, new = digits[:240], digits[240:252]
    columns = [slice(0, 21), slice(21, 42), slice(42, 64)]
    return X, [X[i::3] for i in range(3)], [X[:, c] for c in columns], \
        [new[:, c] for c in columns]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    blocks = guide_blocks(GUIDE.read_text())
    folder = tmp_path_factory.mktemp("netns")
    operator, scientist = folder / "srv", folder / "scientist"
    for path in (operator, scientist, folder / "flwr-home"):
        path.mkdir()
    _, rows, blocks_, news = _data()
    deployment = Deployment(folder)
    try:
        deployment.build()
        operator_env = {**deployment.env, "FLWR_HOME": str(folder / "flwr-home")}
        on_operator = [("/srv/kernelscale", str(operator))]
        # The operator: keys, the SuperLink and its SuperExec, its Flower connection.
        deployment.block("op", blocks["guide-operator-keys"], operator, operator_env,
                         "keys", on_operator)
        deployment.block("op", blocks["guide-operator-superlink"], operator,
                         dict(operator_env), "operator", on_operator)
        (folder / "flwr-home" / "config.toml").write_text(
            blocks["guide-connection"].replace("/srv/kernelscale", str(operator)))
        _wait_for_superlink(deployment, operator_env, operator)
        # Each party (and the rogue): a key, sent to the operator, who registers it.
        parties, ids = [], []
        for i in range(PARTIES + 1):
            party = folder / f"party{i}"
            party.mkdir()
            shutil.copy(operator / "ca.crt", party / "ca.crt")
            party_env = {**deployment.env, "FLWR_HOME": str(party / "flwr-home")}
            deployment.block(i, blocks["guide-party-key"], party, dict(party_env),
                             f"party{i}-key")
            shutil.copy(party / "node.pub", operator / f"party{i}.pub")
            done = deployment.run("op", commands(blocks["guide-operator-register"])[0]
                                  .split("#")[0].replace("party0.pub", f"party{i}.pub"),
                                  operator, operator_env)
            ids.append(int(json.loads(done.stdout[done.stdout.index("{"):])["node-id"]))
            parties.append(party)
        # The roster: the three parties, not the rogue.
        roster = iter(ids[:PARTIES])
        (operator / "roster.toml").write_text(re.sub(
            r"(?m)^(\d+) = \d+$", lambda m: f"{m.group(1)} = {next(roster)}",
            blocks["guide-roster"]))
        # Each party's node; the rogue holds party 0's rows and claims partition 1.
        for i, party in enumerate(parties):
            source = 0 if i == ROGUE else i
            np.save(party / "part.npy", rows[source])
            np.save(party / "block.npy", blocks_[source])
            np.save(party / "new.npy", news[source])
            claimed = 1 if i == ROGUE else i
            deployment.block(i, blocks["guide-party-node"], party,
                             {**deployment.env, "FLWR_HOME": str(party / "flwr-home")},
                             f"party{i}-node", [
                                 ("partition-id=0", f"partition-id={claimed}"),
                                 ("/data/part0.npy", str(party / "part.npy")),
                                 ("/data/block0.npy", str(party / "block.npy")),
                                 ("/data/new0.npy", str(party / "new.npy"))])
        yield deployment, blocks, operator, scientist, operator_env, ids
    finally:
        deployment.destroy()


def _flower_run(deployment, command: str, scientist, env, name: str):
    """A data scientist's command, once its ServerApp has started (its first line) or it
    ended: Flower 1.42 gives a ServerApp 30 s from the claim of its task to its first
    call, and several starting at once on a loaded machine miss it again and again."""
    log = deployment.folder / f"run-{name}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(["ip", "netns", "exec", deployment.names["op"], "bash",
                                    "-c", command], cwd=scientist, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    for _ in range(TIMEOUT * 10):
        if process.poll() is not None or "kernelscale: " in \
                log.read_text(errors="replace").split("its log follows", 1)[-1]:
            break
        time.sleep(0.1)
    return process, log


def _finish(started) -> tuple[int, str]:
    process, log = started
    try:
        process.wait(TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        pytest.fail(f"a run of the guide did not end within {TIMEOUT} s:\n"
                    f"{log.read_text(errors='replace')[-3000:]}")
    return process.returncode, log.read_text(errors="replace")


@pytest.fixture(scope="module")
def runs(deployment):
    """The guide's runs: first with the rogue node up (refused), then, the rogue stopped,
    all of them at once with a run whose output leaves the model folder."""
    deployment, blocks, operator, scientist, env, ids = deployment
    app, *guide_runs = commands(blocks["guide-scientist-runs"])
    deployment.run("op", app, scientist, env)
    fk = next(c for c in guide_runs if "FederatedKernelKMeans" in c)
    results = {"rogue": _finish(_flower_run(deployment, fk.replace("fk.npz", "rogue.npz"),
                                            scientist, env, "rogue"))}
    rogue = deployment.processes[-1]  # the last node started
    rogue.send_signal(signal.SIGTERM)
    rogue.wait(60)
    started = {name: _flower_run(deployment, command, scientist, env, name)
               for name, command in [(re.search(r'estimator="(\w+)"', c).group(1), c)
                                     for c in guide_runs]}
    started["escape"] = _flower_run(deployment, fk.replace('output="fk.npz"',
                                                           'output="../escape.npz"'),
                                    scientist, env, "escape")
    results.update({name: _finish(process) for name, process in started.items()})
    return results, operator, fk, guide_runs


def test_a_node_outside_the_roster_claiming_a_partition_refuses_the_run(runs, deployment):
    results, operator, *_ = runs
    ids = deployment[-1]
    code, out = results["rogue"]
    assert code == 1, out
    assert f"SuperNodes {min(ids[1], ids[ROGUE])} and {max(ids[1], ids[ROGUE])} both claim " \
           "partition-id 1" in out or (f"SuperNodes {ids[1]} and {ids[ROGUE]} both claim "
                                       "partition-id 1") in out, out
    assert "round 1" not in out and not (operator / "models" / "rogue.npz").exists()


def test_fk_kmeans_and_the_vertical_kpca_run_under_the_default_policy(runs):
    from flwr.common.config import parse_config_args

    from kernelscale import FederatedKernelKMeans, VerticalKernelPCA
    from kernelscale.model import load_model

    results, operator, _, guide_runs = runs
    X, rows, blocks, _ = _data()
    for name, cls, data in [("FederatedKernelKMeans", FederatedKernelKMeans, rows),
                            ("VerticalKernelPCA", VerticalKernelPCA, blocks)]:
        code, out = results[name]
        assert code == 0 and "finished:completed" in out, out
        config = parse_config_args([re.search(r"-c '(.*)'", next(
            c for c in guide_runs if f'"{name}"' in c)).group(1)])
        model = load_model(operator / "models" / config.pop("output"))
        params = {k.replace("-", "_"): v for k, v in config.items()
                  if k not in ("estimator", "data-key")}
        local = cls(**params).fit(data)
        if name == "FederatedKernelKMeans":
            np.testing.assert_array_equal(model.labels_, local.labels_)
            np.testing.assert_array_equal(model.predict(X), local.predict(X))
        else:
            np.testing.assert_allclose(model.eigenvalues_, local.eigenvalues_, rtol=1e-10)
            np.testing.assert_allclose(np.abs(model.eigenvectors_),
                                       np.abs(local.eigenvectors_), atol=1e-10)
        assert model.communication_.copy("fit") == local.communication_.copy("fit")


def test_the_parties_refuse_raw_rows_and_no_model_is_written(runs):
    results, operator, *_ = runs
    code, out = results["DistributedKernelPCA"]
    assert code == 1, out
    assert "PolicyRefusal: SuperNode" in out and "allow-rows=true" in out
    assert not (operator / "models" / "diskpca.npz").exists()


def test_an_output_outside_the_model_folder_is_refused_before_any_round(runs):
    results, operator, *_ = runs
    code, out = results["escape"]
    assert code == 1 and "output='../escape.npz' is a path" in out, out
    assert "round 1" not in out and not (operator / "escape.npz").exists()


def test_every_run_s_serverapp_was_forked_by_the_warm_process(deployment, runs):
    """The guide's two warm_serverapp lines: the SuperExec found the stand-in first on its
    PATH, and the warm process (the operator's second background command) forked one
    ServerApp per run: the rogue's, the guide's and the escaping one."""
    deployment = deployment[0]
    results = runs[0]
    forked = re.findall(r"warm ServerApp process \d+ started", deployment.log("operator-1"))
    assert len(forked) == len(results), deployment.log("operator-1")


def test_a_party_cannot_reach_the_control_api(deployment, runs):
    """The Fleet address answers the Control API with 404 (`flwr ls` fails there), and
    the operator's address is not on the parties' network at all."""
    deployment, _, operator, _, _, _ = deployment
    home = deployment.folder / "party-home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "fleet"\n\n[superlink.fleet]\naddress = "{HOST}:9092"\n'
        f'root-certificates = "{operator / "ca.crt"}"\n')
    done = deployment.run(0, "flwr ls --format json", deployment.folder,
                          {**deployment.env, "FLWR_HOME": str(home)}, check=False)
    # flwr 1.42 exits 0 with --format json and says the failure in the JSON
    answer = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
    assert done.returncode != 0 or answer.get("success") is False, (done.stdout, done.stderr)
    assert "run-id" not in done.stdout and "404" in done.stdout + done.stderr
    refused = deployment.run(0, f"python -c \"import socket; socket.create_connection(("
                             f"'{HOST}', 9093), 5)\"", deployment.folder, check=False)
    assert refused.returncode != 0 and "ConnectionRefusedError" in refused.stderr
