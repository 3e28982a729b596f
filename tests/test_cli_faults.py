"""The command line under faults and bad input (issue 21): nothing lost, one clear line.

Every case runs the real command (:func:`kernelscale.cli.main`) on real files.
"""

from __future__ import annotations

import numpy as np
import pytest

from kernelscale.cli import main
from kernelscale.model import load_model, save_model

FIT = ["--n-components", "2", "--workers", "2", "--landmarks", "10", "--gamma", "0.1",
       "--quiet"]
STREAM = ["--n-components", "2", "--n-random-features", "20", "--sketch-size", "6",
          "--gamma", "0.1", "--quiet"]
MODEL_COMMANDS = {"fit": FIT, "stream": STREAM}


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "v.npy"
    np.save(path, np.random.default_rng(0).standard_normal((40, 4)))
    return path


def one_error_line(argv, capsys) -> str:
    """Run ``main(argv)``: exit code 2 and exactly one stderr line, returned."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("kernelscale: error: "), err
    return lines[0]


# --- 1. data loss -------------------------------------------------------------------------

@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_out_onto_the_data_file_is_refused_and_the_data_kept(command, data, capsys):
    """``fit --data v.npy --out v.npy`` wrote the model over the data and exited 0."""
    before = data.read_bytes()
    line = one_error_line([command, "--data", str(data), "--out", str(data),
                           *MODEL_COMMANDS[command]], capsys)
    assert "--out must end in .npz" in line
    assert data.read_bytes() == before


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_out_that_is_the_input_under_another_name_is_refused(command, data, tmp_path, capsys):
    """A link named like a model still points at the data: refused, even with --force."""
    alias = tmp_path / "model.npz"
    alias.symlink_to(data)
    before = data.read_bytes()
    line = one_error_line([command, "--data", str(data), "--out", str(alias), "--force",
                           *MODEL_COMMANDS[command]], capsys)
    assert "is the input file" in line and "--out" in line
    assert data.read_bytes() == before


@pytest.mark.parametrize("command", ["transform", "vertical"])
def test_other_outputs_never_overwrite_an_input(command, data, tmp_path, capsys):
    before = data.read_bytes()
    if command == "transform":
        model = tmp_path / "m.npz"
        assert main(["fit", "--data", str(data), "--out", str(model), *FIT]) == 0
        argv = ["transform", "--model", str(model), "--data", str(data), "--out", str(data)]
    else:
        argv = ["vertical", "--data", str(data), "--gamma", "0.1", "--out", str(data)]
    capsys.readouterr()
    assert "is the input file" in one_error_line(argv, capsys)
    assert data.read_bytes() == before


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_a_file_that_is_not_a_model_is_replaced_only_with_force(command, data, tmp_path,
                                                                 capsys):
    precious = tmp_path / "results.npz"
    np.savez(precious, scores=np.arange(5.0))  # a user's own archive, not a model
    before = precious.read_bytes()
    argv = [command, "--data", str(data), "--out", str(precious), *MODEL_COMMANDS[command]]
    line = one_error_line(argv, capsys)
    assert "exists and is not a kernelscale model file" in line and "--force" in line
    assert precious.read_bytes() == before
    assert main([*argv, "--force"]) == 0
    load_model(precious)  # now a model


@pytest.mark.parametrize("command", MODEL_COMMANDS)
def test_an_existing_model_is_replaced_without_force(command, data, tmp_path):
    out = tmp_path / "m.npz"
    argv = [command, "--data", str(data), "--out", str(out), *MODEL_COMMANDS[command]]
    assert main(argv) == 0
    assert main(argv) == 0
    load_model(out)


class _FailsWhenWritten:
    """An array-like whose conversion fails: the write breaks off half-way through."""

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError("disk full")


def test_a_write_that_breaks_off_leaves_the_old_model_whole(data, tmp_path):
    """Models are written to a temporary name and renamed: a crash keeps the old file."""
    out = tmp_path / "m.npz"
    assert main(["fit", "--data", str(data), "--out", str(out), *FIT]) == 0
    before = out.read_bytes()
    model = load_model(out)
    model.eigenvalues = _FailsWhenWritten()  # written after 'coef': the archive is open
    with pytest.raises(RuntimeError, match="disk full"):
        save_model(model, out)
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.npz", "v.npy"]  # no leftovers


def test_fit_out_must_carry_the_model_extension(data, tmp_path, capsys):
    line = one_error_line(["fit", "--data", str(data), "--out", str(tmp_path / "model"),
                           *FIT], capsys)
    assert line.endswith("--out must end in .npz (a model file, as 'kernelscale transform "
                         "--model' reads), got model")
    assert not (tmp_path / "model").exists()
