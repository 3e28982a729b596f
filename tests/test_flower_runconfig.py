"""The fitting app's run config, checked before any round (issue 43.3, issue 47.6); no processes.

Every run key is checked by type (a quoted ``"false"`` is a string, not false), a
``secure-rounds`` name must be a summed round of the estimator's protocols, and
the model goes only into the operator's model folder (``KERNELSCALE_FLOWER_MODELS``),
under a plain file name. The real ``flwr run`` of these refusals is in
``tests/test_flower_deploy.py``.
"""

from __future__ import annotations

import pytest

from kernelscale.backends.flower.operator_settings import MODELS_ENV, check_output_name
from kernelscale.backends.flower.runconfig import build_estimator


@pytest.fixture
def models(tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    return folder


def _build(models, **config):
    config.setdefault("output", "m.npz")
    return build_estimator(config, {MODELS_ENV: str(models)})


@pytest.mark.parametrize("config, error, match", [
    ({"estimator": "DistributedKernelPCA", "n-clusters": 3}, ValueError,
     "DistributedKernelPCA has no parameter 'n-clusters'"),
    ({"estimator": "FederatedKernelKMeans", "n-clusters": 0}, ValueError,
     "'n_clusters' parameter of FederatedKernelKMeans must be an int in the range"),
    ({"estimator": "VerticalKernelPCA", "client": "x"}, ValueError, "no parameter 'client'"),
    ({"estimator": "KMeans"}, ValueError, "estimator='KMeans' is not one that runs on Flower"),
    ({"overwrite": "false"}, ValueError, "overwrite='false': give true or false, unquoted"),
    ({"overwrite": 1}, ValueError, "overwrite=1"),
    ({"timeout": "soon"}, ValueError, "timeout='soon': give a positive number of seconds"),
    ({"timeout": -1.0}, ValueError, "timeout=-1.0"),
    ({"start-timeout": float("inf")}, ValueError, "start-timeout=inf"),
    ({"secure-range": -5.0}, ValueError, "secure-range=-5.0: give a positive number"),
    ({"secure-range": "1e4"}, ValueError, "secure-range='1e4'"),
    ({"lost": "ignore"}, ValueError, "lost='ignore': give \"error\".*or \"drop\""),
    ({"n-workers": "3"}, ValueError, "n-workers='3': give a whole number >= 0, unquoted"),
    ({"n-workers": True}, ValueError, "n-workers=True"),
    ({"n-workers": -1}, ValueError, "n-workers=-1"),
    ({"data-key": ""}, ValueError, "data-key='': give the node-config key"),
    ({"secure-rounds": 3}, ValueError, "secure-rounds=3"),
    ({"secure-rounds": "gama: moments"}, ValueError,
     "secure-rounds names 'gama: moments', which is not a summed round of "
     "FederatedKernelKMeans; its summed rounds are 'gamma: moments', 'dspgd: iteration'"),
    ({"estimator": "VerticalKernelPCA", "secure-rounds": "gamma: moments"}, ValueError,
     "not a summed round of VerticalKernelPCA; its summed rounds are 'partial distances'"),
    ({"kernelscale-relay": "127.0.0.1:1"}, ValueError, "keys of the relay ServerApp"),
])
def test_a_run_config_that_cannot_work_is_refused_before_any_round(models, config, error,
                                                                   match):
    with pytest.raises(error, match=match):
        _build(models, **config)


def test_a_run_config_sets_the_estimator_and_keeps_its_defaults(models):
    estimator, options = _build(models, **{
        "estimator": "DistributedKernelPCA", "n-components": 3, "max-words": 100000,
        "gamma": "", "secure-rounds": "disLR: k(Y,A_i) k(A_i,Y)", "output": "dk.npz"})
    assert estimator.n_components == 3 and estimator.max_words == 100000
    assert estimator.gamma is None  # "" keeps the default
    assert options["n-workers"] == 0 and options["data-key"] == "partition-path"
    assert options["secure-rounds"] == ["disLR: k(Y,A_i) k(A_i,Y)"]
    assert options["output"] == models / "dk.npz"
    assert _build(models, **{"secure-rounds": "all"})[1]["secure-rounds"] == "all"
    assert _build(models)[1]["secure-rounds"] is None


@pytest.mark.parametrize("name", ["../m.npz", "/etc/passwd", "sub/m.npz", "..", "a..b.npz",
                                  ".hidden.npz", "m\\x.npz", "", "m npz", 3])
def test_an_output_that_is_not_a_plain_file_name_is_refused(models, name):
    with pytest.raises(ValueError, match="output"):
        _build(models, output=name)
    with pytest.raises(ValueError):
        check_output_name(name)


def test_the_output_goes_only_into_the_operators_folder(models, tmp_path):
    (models / "old.npz").write_bytes(b"mine")
    with pytest.raises(FileExistsError, match="old.npz exists in the operator's model folder"):
        _build(models, output="old.npz")
    with pytest.raises(FileExistsError, match="overwrite=true"):
        _build(models, output="old.npz", overwrite=False)
    assert _build(models, output="old.npz", overwrite=True)[1]["output"] == models / "old.npz"
    (models / "fk.ledger.csv").write_text("")
    with pytest.raises(FileExistsError, match="fk.ledger.csv exists"):
        _build(models, output="fk.npz")
    (models / "dir.npz").mkdir()
    with pytest.raises(IsADirectoryError, match="is a folder"):
        _build(models, output="dir.npz", overwrite=True)
    with pytest.raises(PermissionError, match="set no model folder"):
        build_estimator({"output": "m.npz"}, {})
    with pytest.raises(PermissionError, match="does not exist or is not writable"):
        build_estimator({"output": "m.npz"}, {MODELS_ENV: str(tmp_path / "missing")})
