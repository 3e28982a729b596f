"""verbose= on every estimator: the "kernelscale" logger, tqdm bars, the runtime's listener."""

import logging
import tomllib
from pathlib import Path

import numpy as np
import pytest
from terminal import Terminal

import kernelscale
from kernelscale import (
    DistributedKernelPCA,
    DistributedSpectralClustering,
    FederatedKernelKMeans,
    LocalCluster,
    StreamingKernelPCA,
    VerticalKernelPCA,
)
from kernelscale.cli import main
from kernelscale.horizontal import uniform_dislr
from kernelscale.kernels import make_kernel
from kernelscale.progress import LOGGER, verbosity

X = np.random.default_rng(0).standard_normal((120, 4))

ESTIMATORS = {
    "horizontal": lambda v: DistributedKernelPCA(3, n_landmarks=20, embedding_dim=8,
                                                 n_random_features=40, n_workers=3,
                                                 random_state=0, verbose=v),
    "vertical": lambda v: VerticalKernelPCA(2, gamma=0.2, feature_blocks=2, verbose=v),
    "streaming": lambda v: StreamingKernelPCA(2, n_random_features=50, batch_size=40,
                                              random_state=0, verbose=v),
    "federated": lambda v: FederatedKernelKMeans(3, max_iter=3, n_workers=3, coreset_size=50,
                                                 random_state=0, verbose=v),
    "spectral": lambda v: DistributedSpectralClustering(3, n_landmarks=20, embedding_dim=8,
                                                        n_random_features=40,
                                                        coreset_size=50, n_workers=3,
                                                        random_state=0, verbose=v),
}


@pytest.mark.parametrize("name", ESTIMATORS)
def test_verbose_0_is_silent_and_1_shows_a_bar_and_one_info_line(name, capsys, caplog,
                                                                 monkeypatch):
    make = ESTIMATORS[name]
    make(0).fit(X)
    captured = capsys.readouterr()
    assert captured.out == captured.err == ""
    assert not [r for r in caplog.records if r.name.startswith("kernelscale")]
    make(1).fit(X)  # stderr is not a terminal here: no bar (issue 34), the INFO line only
    assert "\r" not in capsys.readouterr().err
    caplog.clear()
    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    est = make(1).fit(X)
    err = "".join(screen.text)
    assert type(est).__name__ in err and ("round" in err or "batch" in err)  # the tqdm bar
    logger = "kernelscale." + ("federated" if name == "spectral" else name)
    infos = [r for r in caplog.records if r.name == logger]
    assert [r.levelno for r in infos] == [logging.INFO]
    assert type(est).__name__ in infos[0].getMessage()
    assert LOGGER.level == logging.NOTSET  # verbose changed it for the call only


def test_verbose_2_logs_every_round_with_its_phase_and_seconds(caplog):
    est = ESTIMATORS["horizontal"](2).fit(X)
    rounds = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    fit_rounds = [m for m in rounds if "(phase fit)" in m]
    names = {m.round for m in est.communication_.rounds("fit")}
    assert {m.split("round ")[1].split(" (phase")[0].strip("'") for m in fit_rounds} == names
    assert any("disLR: k(Y,A_i) k(A_i,Y)" in m for m in fit_rounds)


def test_verbose_respects_a_level_the_application_set(caplog):
    LOGGER.setLevel(logging.WARNING)
    try:
        ESTIMATORS["horizontal"](2).fit(X)
    finally:
        LOGGER.setLevel(logging.NOTSET)
    assert not [r for r in caplog.records if r.name.startswith("kernelscale")]


def test_without_logging_configured_the_lines_go_to_stderr(capsys):
    root_handlers = logging.root.handlers[:]
    logging.root.handlers = []  # as in a script that never configured logging
    try:
        with verbosity(1):
            logging.getLogger("kernelscale.test").info("hello")
        logging.getLogger("kernelscale.test").info("not shown")
    finally:
        logging.root.handlers = root_handlers
    err = capsys.readouterr().err
    assert "kernelscale.test: hello" in err and "not shown" not in err
    assert not LOGGER.handlers


def test_the_listener_hears_every_round_once():
    heard = []
    cluster = LocalCluster([X[:50], X[50:]])
    cluster.add_listener(lambda round, phase, seconds: heard.append((round, phase, seconds)))
    uniform_dislr(cluster, make_kernel("rbf", gamma=0.2), n_components=2, n_landmarks=10,
                  random_state=0)
    names = [m.round for m in cluster.ledger.rounds("fit")]
    # One call per round, in order, after its replies are recorded.
    assert [r for r, p, _ in heard if p == "fit"] == list(dict.fromkeys(names))
    assert [r for r, p, _ in heard if p == "setup"] == ["describe partitions"]
    assert all(seconds >= 0 for _, _, seconds in heard)


def test_cli_fit_shows_a_progress_bar_on_a_terminal_unless_quiet(tmp_path, capsys, caplog,
                                                                  monkeypatch):
    data = tmp_path / "X.npy"
    np.save(data, X)
    argv = ["fit", "--data", str(data), "--out", str(tmp_path / "m.npz"), "--landmarks", "20",
            "--workers", "3"]
    assert main(argv) == 0  # in a pipe: the one INFO line (here to pytest's log), no bar
    assert "round" not in capsys.readouterr().err
    assert [r.getMessage()[:21] for r in caplog.records
            if r.name == "kernelscale.horizontal"] == ["DistributedKernelPCA("]
    screen = Terminal()
    monkeypatch.setattr("sys.stderr", screen)
    assert main(argv) == 0
    assert "round" in "".join(screen.text)
    screen.text.clear()
    assert main([*argv, "--quiet"]) == 0
    assert "round" not in "".join(screen.text)


def test_py_typed_ships_with_the_package():
    package = Path(kernelscale.__file__).parent
    assert (package / "py.typed").is_file()
    pyproject = tomllib.loads((package.parent / "pyproject.toml").read_text())
    assert "py.typed" in pyproject["tool"]["setuptools"]["package-data"]["kernelscale"]



class _SlowCluster(LocalCluster):
    show_progress = True  # as FlowerCluster: rounds of seconds


@pytest.mark.parametrize("terminal", [True, False])
def test_a_slow_cluster_shows_progress_at_verbose_0_in_a_terminal_only(terminal, monkeypatch,
                                                                        capsys):
    parts = [X[i::3] for i in range(3)]
    screen = Terminal()
    if terminal:
        monkeypatch.setattr("sys.stderr", screen)
    FederatedKernelKMeans(3, max_iter=2, coreset_size=50, random_state=0, n_refine=0,
                          backend="flower", client=_SlowCluster(parts)).fit(None)
    shown = "".join(screen.text) + capsys.readouterr().err
    if terminal:  # the rounds done, the round just finished, the elapsed time
        assert "FederatedKernelKMeans" in shown and "round" in shown
        assert "kmeans: labels" in shown and "00:0" in shown
    else:
        assert shown == ""
