"""No result is lost (issue 47, items 2 and 5): one writer per output, signals clean up.

Two commands writing the same file at once: the second is refused before its
work (the first holds a claim on it), and publishing never replaces a file
that appeared meanwhile. SIGTERM and SIGHUP during a write clean up as Ctrl-C
does. A full standard output is said to be one, after the result was written.
Real processes, real signals; the moments are fixed by the processes telling
each other where they are (no sleeping).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from cli_errors import one_error_line

from kernelscale.cli import main
from kernelscale.files import claim_output, lock_path
from kernelscale.model import load_model

ROOT = Path(__file__).resolve().parents[1]
FIT = ["--n-components", "2", "--workers", "2", "--landmarks", "10", "--gamma", "0.1",
       "--quiet"]


def _python(code: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], env=env,
                            text=True, **kwargs)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A data file and a model fitted on it."""
    folder = tmp_path_factory.mktemp("outputs")
    data = folder / "x.npy"
    np.save(data, np.random.default_rng(0).standard_normal((40, 4)))
    model = folder / "m.npz"
    assert main(["fit", "--data", str(data), "--out", str(model), *FIT]) == 0
    return data, model


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(".kernelscale-"))


def test_two_transforms_to_one_file_at_once_cannot_both_succeed(fitted, tmp_path, capsys):
    """Both reported success and one result was lost: the check came before the work, the
    publish was os.replace. The second is now refused while the first works."""
    data, model = fitted
    out = tmp_path / "scores.npy"
    first = _python(f"""
        import sys
        import kernelscale.model as km
        from kernelscale.cli import main
        transform = km.KernelPCAModel.transform
        def waiting(self, X, **kw):
            print("working", flush=True)
            sys.stdin.readline()  # until the other command has tried
            return transform(self, X, **kw)
        km.KernelPCAModel.transform = waiting
        sys.exit(main(["transform", "--model", {str(model)!r}, "--data", {str(data)!r},
                       "--out", {str(out)!r}]))
        """, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert first.stdout.readline().strip() == "working"
        line = one_error_line(["transform", "--model", str(model), "--data", str(data),
                               "--out", str(out)], capsys)
        assert f"--out {out}: another kernelscale command (process {first.pid} on " in line
        assert "is writing it now" in line and "wait for it, or choose another --out" in line
        assert not out.exists()
        stdout, stderr = first.communicate("go\n", timeout=120)
    finally:
        first.kill()
    assert first.returncode == 0, stderr
    assert f"wrote 40 x 2 to {out}" in stdout
    np.testing.assert_allclose(np.load(out), load_model(model).transform(np.load(data)))
    assert _leftovers(tmp_path) == []  # its lock is gone


def test_a_lock_left_by_a_killed_command_is_taken_over(fitted, tmp_path):
    data, model = fitted
    out = tmp_path / "scores.npy"
    dead = _python("pass")
    dead.wait()
    import socket
    lock_path(out).write_text(f"{dead.pid} {socket.gethostname()}\n")
    assert main(["transform", "--model", str(model), "--data", str(data), "--out",
                 str(out)]) == 0
    assert out.exists() and _leftovers(tmp_path) == []


def test_a_file_that_appears_while_the_result_is_computed_is_kept(fitted, tmp_path,
                                                                 monkeypatch, capsys):
    """The publish replaces nothing it did not claim: another program's file stays."""
    import kernelscale.model as km

    data, model = fitted
    out = tmp_path / "scores.npy"
    transform = km.KernelPCAModel.transform

    def meanwhile(self, X, **kwargs):
        out.write_text("another program's file")
        return transform(self, X, **kwargs)

    monkeypatch.setattr(km.KernelPCAModel, "transform", meanwhile)
    line = one_error_line(["transform", "--model", str(model), "--data", str(data), "--out",
                           str(out)], capsys)
    assert "a file appeared there while the result was computed; it is kept" in line
    assert out.read_text() == "another program's file"
    assert _leftovers(tmp_path) == []


class _NotHandled(Exception):
    """The signal reached the test's own handler: the command had none."""


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_sigterm_and_sighup_during_a_write_leave_no_half_file(fitted, tmp_path, monkeypatch,
                                                              capsys, signum):
    """A hidden half-written .kernelscale-*.tmp stayed (SIGINT alone was handled). The
    signal is real, sent to this process mid-write; the command's handler turns it into
    its cleanup and exit code 128 + signal."""
    data, model = fitted
    old = tmp_path / "scores.npy"
    np.save(old, np.arange(3.0))
    before = old.read_bytes()
    save = np.save

    def interrupted(fh, array, **kwargs):
        fh.write(b"half a file")
        os.kill(os.getpid(), signum)
        save(fh, array, **kwargs)

    def not_handled(*_):
        raise _NotHandled

    monkeypatch.setattr(np, "save", interrupted)
    saved = signal.signal(signum, not_handled)  # never the default: it would end pytest
    try:
        code = main(["transform", "--model", str(model), "--data", str(data), "--out",
                     str(old), "--force"])
    finally:
        signal.signal(signum, saved)
    assert code == 128 + signum
    assert capsys.readouterr().err == f"kernelscale: terminated by {signum.name}\n"
    assert old.read_bytes() == before
    assert _leftovers(tmp_path) == []  # no temporary, no lock


def test_save_model_in_a_script_cleans_up_on_sigterm_then_ends_by_it(tmp_path):
    """A script with the default SIGTERM handler: the temporary is removed, then the
    process ends by the signal, as it would have."""
    child = _python(f"""
        import os, signal
        import numpy as np
        from kernelscale.kernels import make_kernel
        from kernelscale.model import KernelPCAModel, save_model
        model = KernelPCAModel(make_kernel("rbf", gamma=1.0), np.eye(3), np.eye(3),
                               np.ones(3))
        def interrupted(fh, **arrays):
            fh.write(b"half a file")
            os.kill(os.getpid(), signal.SIGTERM)
        np.savez = interrupted
        save_model(model, {str(tmp_path / "m.npz")!r})
        print("not reached")
        """, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    stdout, stderr = child.communicate(timeout=120)
    assert child.returncode == -signal.SIGTERM, stderr
    assert "not reached" not in stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("earlier_writes", [0, 150])
def test_a_full_stdout_is_named_after_the_model_was_written(fitted, tmp_path, monkeypatch,
                                                            capsys, earlier_writes):
    """'No space left on device' after the model was written read as if the model had
    not been (also after more earlier writes in the process than the list of the last
    ones keeps)."""
    from kernelscale import files

    for _ in range(earlier_writes):  # as write_atomically records a write
        files.WRITTEN.append((files.writes_so_far() + 1, tmp_path / "earlier.npy"))
    data, _ = fitted
    model = tmp_path / "m.npz"
    with open("/dev/full", "w") as full:
        monkeypatch.setattr(sys, "stdout", full)
        code = main(["fit", "--data", str(data), "--out", str(model), *FIT])
    assert code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        f"kernelscale: error: cannot write to standard output (No space left on device); "
        f"{model} was written whole")
    load_model(model)


@pytest.mark.parametrize("command, options", [
    ("fit", FIT),
    ("stream", ["--n-random-features", "20", "--sketch-size", "6", "--gamma", "0.1",
                "--quiet"]),
])
def test_a_users_archive_named_like_ours_is_not_replaced_without_force(
        fitted, tmp_path, command, options, capsys):
    """fit/stream --out r.npz replaced a user's np.savez(params=..., weights=...): any zip
    with a member named params.npy or __header__.npy was taken for a model."""
    data, _ = fitted
    own = tmp_path / "r.npz"
    np.savez(own, params=np.arange(4.0), weights=np.ones(3))
    before = own.read_bytes()
    line = one_error_line([command, "--data", str(data), "--out", str(own), *options], capsys)
    assert f"--out {own} exists and is not a kernelscale model file; give --force" in line
    assert own.read_bytes() == before


def test_claims_are_per_output_and_released(tmp_path):
    claim = claim_output(tmp_path / "a.npy", replace=False)
    assert lock_path(tmp_path / "a.npy").exists()
    assert claim_output(tmp_path / "a.npy", replace=True) is claim  # this process again
    with claim_output(tmp_path / "b.npy", replace=False):
        assert lock_path(tmp_path / "b.npy").exists()
    assert not lock_path(tmp_path / "b.npy").exists()
    claim.release()
    assert _leftovers(tmp_path) == []
