"""The main CLI: ``kernelscale demo``, ``fit`` and ``transform`` through ``main``.

A demo smoke run, fit/transform round trips on every file format, and the
project's rule for user mistakes: one line on stderr and exit code 2.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from cli_errors import one_error_line

from kernelscale.cli import DEMO_METHODS, build_parser, main
from kernelscale.datasets import load
from kernelscale.model import load_model

SMALL = ["--n-components", "3", "--workers", "3", "--landmarks", "30", "--seed", "1"]


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    X = load_digits().data[:200]
    return (X - X.mean(axis=0)) / np.maximum(X.std(axis=0), 1e-12)


@pytest.fixture
def data_npy(digits, tmp_path):
    path = tmp_path / "X.npy"
    np.save(path, digits)
    return path


@pytest.fixture
def model_npz(data_npy, tmp_path, capsys):
    path = tmp_path / "model.npz"
    assert main(["fit", "--data", str(data_npy), "--out", str(path), "--quiet", *SMALL]) == 0
    capsys.readouterr()
    return path


def write_data(X, path):
    if path.suffix == ".npy":
        np.save(path, X)
    elif path.suffix == ".csv":
        np.savetxt(path, X, delimiter=",")
    else:
        from sklearn.datasets import dump_svmlight_file

        dump_svmlight_file(X, np.zeros(X.shape[0]), str(path))



def test_demo_smoke(capsys):
    assert main(["demo", "--landmarks", "50", "--workers", "3", "--quiet"]) == 0
    out = capsys.readouterr().out
    # the header first, on stdout with the table (on stderr it printed after the table)
    assert out.startswith("digits: 1797 points x 64 features"), out
    rows = {}
    for line in out.splitlines():
        for method, messages in DEMO_METHODS:
            name = f"{method} ({messages})" if method == "diskpca" else method
            if line.startswith(name + " ") or line.startswith(name + "* "):
                rows[name] = line.split()
    expected = {f"{m} ({msg})" if m == "diskpca" else m for m, msg in DEMO_METHODS}
    assert set(rows) == expected, out
    # the exact method is the rank-k optimum: excess ratio 0, err/opt 1
    excess, ratio = rows["exact"][1:3]
    assert abs(float(excess)) < 1e-4 and abs(float(ratio) - 1) < 1e-4
    for name, cols in rows.items():
        assert int(cols[-3].replace(",", "")) > 0, name  # fit words
    # Issue 34: each column explained in one line, what to look at, a verdict, why exact
    # uploads fewer words on small data, and no -0.00000.
    assert "-0.0" not in out
    for column in ("excess ratio", "err/opt", "fit words", "upload", "seconds"):
        assert sum(line.lstrip().startswith(column) for line in out.splitlines()) == 1, column
    assert "look at" in out.lower() and "verdict" in out.lower()
    assert "Exact KPCA uploads every point once, 1,797 x 64 = 115,008 words" in out
    assert "small data" in out


@pytest.mark.parametrize("suffix", [".npy", ".csv", ".svm"])
@pytest.mark.parametrize("out_suffix", [".npy", ".csv"])
def test_fit_transform_round_trip(digits, tmp_path, capsys, suffix, out_suffix):
    data = tmp_path / f"X{suffix}"
    write_data(digits, data)
    model, out = tmp_path / "m.npz", tmp_path / f"Z{out_suffix}"
    assert main(["fit", "--data", str(data), "--out", str(model), "--quiet", *SMALL]) == 0
    assert "model written to" in capsys.readouterr().out
    assert main(["transform", "--model", str(model), "--data", str(data),
                 "--out", str(out)]) == 0
    assert capsys.readouterr().out.startswith("wrote 200 x 3")
    Z = np.load(out) if out_suffix == ".npy" else np.loadtxt(out, delimiter=",")
    expected = load_model(model).transform(load(data))
    np.testing.assert_allclose(Z, expected, rtol=1e-12, atol=1e-12)


def test_fit_methods_round_trip(data_npy, tmp_path, capsys):
    # random_features sized by a budget (m of about 250): the default m = 2,000 spent 27 of
    # the test's 28 s (loaded machine) on a 2,000 x 2,000 covariance for 200 rows.
    sizes = {"exact": SMALL, "random_features": [*SMALL[:4], *SMALL[6:], "--max-words",
                                                 "100000"]}
    for method in ("exact", "random_features"):
        model, out = tmp_path / f"{method}.npz", tmp_path / f"{method}.npy"
        assert main(["fit", "--data", str(data_npy), "--out", str(model), "--method", method,
                     "--quiet", *sizes[method]]) == 0
        assert main(["transform", "--model", str(model), "--data", str(data_npy),
                     "--out", str(out)]) == 0
        np.testing.assert_allclose(np.load(out), load_model(model).transform(np.load(data_npy)),
                                   rtol=1e-12, atol=1e-12)
    capsys.readouterr()


def test_missing_data_file(tmp_path, capsys):
    line = one_error_line(["fit", "--data", str(tmp_path / "nope.npy"),
                           "--out", str(tmp_path / "m.npz")], capsys)
    assert "nope.npy" in line


def test_missing_model_file(data_npy, tmp_path, capsys):
    line = one_error_line(["transform", "--model", str(tmp_path / "nope.npz"),
                           "--data", str(data_npy), "--out", str(tmp_path / "Z.npy")], capsys)
    assert "nope.npz" in line


def test_wrong_feature_count(digits, model_npz, tmp_path, capsys):
    np.save(tmp_path / "X5.npy", digits[:, :5])
    line = one_error_line(["transform", "--model", str(model_npz),
                           "--data", str(tmp_path / "X5.npy"),
                           "--out", str(tmp_path / "Z.npy")], capsys)
    assert "5 features" in line and "64" in line


def test_bad_out_suffix(data_npy, model_npz, tmp_path, capsys):
    line = one_error_line(["transform", "--model", str(model_npz), "--data", str(data_npy),
                           "--out", str(tmp_path / "Z.txt")], capsys)
    assert "--out must end in .npy or .csv" in line


@pytest.mark.parametrize("command", ["fit", "transform"])
def test_nan_in_data(digits, model_npz, tmp_path, capsys, command):
    X = digits.copy()
    X[3, 3] = np.nan
    np.save(tmp_path / "nan.npy", X)
    if command == "fit":
        argv = ["fit", "--data", str(tmp_path / "nan.npy"), "--out", str(tmp_path / "m2.npz")]
    else:
        argv = ["transform", "--model", str(model_npz), "--data", str(tmp_path / "nan.npy"),
                "--out", str(tmp_path / "Z.npy")]
    assert "NaN" in one_error_line(argv, capsys)


def test_zero_components(data_npy, tmp_path, capsys):
    line = one_error_line(["fit", "--data", str(data_npy), "--out", str(tmp_path / "m.npz"),
                           "--n-components", "0", "--quiet"], capsys)
    assert "argument --n-components: must be a positive integer, got '0'" in line


@pytest.mark.parametrize("kind", ["npy", "text", "directory", "zip"])
def test_model_path_not_a_model(data_npy, tmp_path, capsys, kind):
    if kind == "npy":
        model = data_npy  # a plain array file, not an npz archive
    elif kind == "text":
        model = tmp_path / "model.npz"
        model.write_text("not a model\n")
    elif kind == "directory":
        model = tmp_path / "dir.npz"
        model.mkdir()
    else:
        model = tmp_path / "other.npz"
        np.savez(model, a=np.arange(3))  # an npz, but not one of kernelscale's
    line = one_error_line(["transform", "--model", str(model), "--data", str(data_npy),
                           "--out", str(tmp_path / "Z.npy")], capsys)
    assert str(model) in line
    if kind != "zip":
        assert "is not a kernelscale model file (.npz)" in line


def test_load_model_rejects_plain_npy(data_npy):
    with pytest.raises(ValueError, match=r"is not a kernelscale model file \(\.npz\)"):
        load_model(data_npy)


@pytest.mark.parametrize("command", ["fit", "transform"])
def test_out_inside_a_file(data_npy, model_npz, tmp_path, capsys, command):
    if command == "fit":
        argv = ["fit", "--data", str(data_npy), "--out", str(data_npy / "m.npz"), "--quiet"]
    else:
        argv = ["transform", "--model", str(model_npz), "--data", str(data_npy),
                "--out", str(data_npy / "Z.npy")]
    assert "not a directory" in one_error_line(argv, capsys)
    assert data_npy.is_file()


def test_out_in_missing_directory(data_npy, tmp_path, capsys):
    one_error_line(["fit", "--data", str(data_npy), "--out", str(tmp_path / "no" / "m.npz"),
                    "--quiet", *SMALL], capsys)


def test_unwritable_out_is_an_error_not_a_traceback(data_npy, tmp_path, capsys, monkeypatch):
    """An OSError raised while writing (after the checks) is still one line, code 2."""
    import kernelscale.model

    def fail(model, path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(kernelscale.model, "save_model", fail)
    line = one_error_line(["fit", "--data", str(data_npy), "--out", str(tmp_path / "m.npz"),
                           "--quiet", *SMALL], capsys)
    assert "Permission denied" in line


def test_warning_is_one_line(data_npy, tmp_path, capsys):
    before = warnings.showwarning
    argv = ["fit", "--data", str(data_npy), "--out", str(tmp_path / "m.npz"), "--quiet",
            "--n-components", "3", "--workers", "3", "--landmarks", "5000"]
    assert main(argv) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "kernelscale: warning: --landmarks 5000 exceeds the 200 samples; using 200."
    assert len(err) == 2 and err[1].startswith("kernelscale: note: the fit sent ")
    assert warnings.showwarning is before  # restored after main


def test_parser_defaults():
    args = build_parser().parse_args(["fit", "--data", "x.npy", "--out", "m.npz"])
    # no --method: disKPCA, or with --max-words the forecast's choice
    assert args.n_components == 10 and args.method is None and args.max_words is None
    assert args.embedding_dtype == "float64"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_embedding_dtype_reaches_the_estimator(digits, dtype):
    from kernelscale.cli import _make_estimator

    for command in ("fit", "demo"):
        extra = ["--data", "x.npy", "--out", "m.npz"] if command == "fit" else []
        args = build_parser().parse_args([command, *extra, "--embedding-dtype", dtype])
        args.client = None
        assert _make_estimator(args, digits).embedding_dtype == dtype


def test_fit_with_float32_embedding(data_npy, tmp_path, capsys):
    model, out = tmp_path / "m.npz", tmp_path / "Z.npy"
    assert main(["fit", "--data", str(data_npy), "--out", str(model), "--quiet",
                 "--embedding-dtype", "float32", *SMALL]) == 0
    assert main(["transform", "--model", str(model), "--data", str(data_npy),
                 "--out", str(out)]) == 0
    capsys.readouterr()
    np.testing.assert_allclose(np.load(out), load_model(model).transform(np.load(data_npy)),
                               rtol=1e-12, atol=1e-12)


def test_jobs_defaults_to_every_core_and_reaches_the_estimator(monkeypatch, tmp_path):
    from kernelscale import DistributedKernelPCA
    from kernelscale.cli import build_parser

    for command in (["fit", "--data", "x.npy", "--out", "m.npz"], ["demo"],
                    ["vertical", "--data", "x.npy"]):
        assert build_parser().parse_args(command).jobs == -1
    seen = []
    original = DistributedKernelPCA.fit

    def spy(self, X, y=None):
        seen.append(self.n_jobs)
        return original(self, X, y)

    monkeypatch.setattr(DistributedKernelPCA, "fit", spy)
    np.save(tmp_path / "X.npy", np.random.default_rng(0).standard_normal((60, 4)))
    for jobs in (["--jobs", "1"], []):
        assert main(["fit", "--data", str(tmp_path / "X.npy"), "--out", str(tmp_path / "m.npz"),
                     "--n-components", "2", "--landmarks", "20", "--gamma", "0.1", "--quiet",
                     *jobs]) == 0
    assert seen == [1, -1]


# --------------------------------------------------------------------------- issue 13, part B
DATA_COMMANDS = ["fit", "transform", "stream", "vertical"]


def data_argv(command, data, tmp_path, model=None) -> list[str]:
    """A small run of ``command`` on ``data`` (for transform: with ``model``)."""
    if command == "fit":
        return ["fit", "--data", str(data), "--out", str(tmp_path / "m_new.npz"), "--quiet",
                "--n-components", "2", "--workers", "2", "--landmarks", "10", "--gamma", "0.1"]
    if command == "transform":
        return ["transform", "--model", str(model), "--data", str(data),
                "--out", str(tmp_path / "Z.npy"), "--force"]
    if command == "stream":
        return ["stream", "--data", str(data), "--out", str(tmp_path / "s.npz"), "--quiet",
                "--n-components", "2", "--n-random-features", "20", "--sketch-size", "6",
                "--gamma", "0.1"]
    return ["vertical", "--data", str(data), "--n-components", "2", "--gamma", "0.1"]


@pytest.fixture
def model4(tmp_path, capsys):
    """A model of 4 features, for transform."""
    np.save(tmp_path / "X4.npy", np.random.default_rng(0).standard_normal((30, 4)))
    path = tmp_path / "m4.npz"
    assert main(["fit", "--data", str(tmp_path / "X4.npy"), "--out", str(path), "--quiet",
                 "--n-components", "2", "--landmarks", "10", "--gamma", "0.1"]) == 0
    capsys.readouterr()
    return path


@pytest.mark.parametrize("command", DATA_COMMANDS)
def test_empty_npy_is_one_line(command, model4, tmp_path, capsys):
    (tmp_path / "empty.npy").write_bytes(b"")
    line = one_error_line(data_argv(command, tmp_path / "empty.npy", tmp_path, model4), capsys)
    assert line == f"kernelscale: error: {tmp_path / 'empty.npy'}: the file is empty (0 bytes); " \
        "it holds no data"


@pytest.mark.parametrize("command", DATA_COMMANDS)
def test_csv_header_rule_and_override(command, model4, tmp_path, capsys):
    X = np.random.default_rng(1).standard_normal((30, 4))
    body = "".join(",".join(f"{v:.17g}" for v in row) + "\n" for row in X)
    mixed = tmp_path / "mixed.csv"
    mixed.write_text("x1,2,x3,x4\n" + body)
    # A mixed first row: an error naming the line (it used to be dropped silently).
    line = one_error_line(data_argv(command, mixed, tmp_path, model4), capsys)
    assert "mixed.csv: line 1: the first row mixes numbers and text ('x1' is not a number)" \
        in line and "--header" in line
    # --header skips it; --no-header reads it as data, which names the field.
    assert main([*data_argv(command, mixed, tmp_path, model4), "--header"]) == 0
    capsys.readouterr()
    line = one_error_line([*data_argv(command, mixed, tmp_path, model4), "--no-header"], capsys)
    assert "mixed.csv: line 1: non-numeric value 'x1'" in line
    # An all-text first row is a header by the rule; a numeric one is data, unless --header.
    named = tmp_path / "named.csv"
    named.write_text("a,b,c,d\n" + body)
    plain = tmp_path / "plain.csv"
    plain.write_text(body)
    for argv in ([], ["--header"]):
        assert main([*data_argv(command, named, tmp_path, model4), *argv]) == 0
    assert main(data_argv(command, plain, tmp_path, model4)) == 0
    out = capsys.readouterr().out
    if command in ("fit", "transform", "stream"):
        assert out.count(" 30 x 4 ") + out.count("wrote 30 x") + out.count("of 30 points") == 3
    assert main([*data_argv(command, plain, tmp_path, model4), "--header"]) == 0
    out = capsys.readouterr().out
    assert {"fit": " 29 x 4 ", "transform": "wrote 29 x", "stream": "of 29 points",
            "vertical": " 29 samples,"}[command] in out


def test_header_flag_on_a_binary_file_is_an_error(data_npy, tmp_path, capsys):
    line = one_error_line(data_argv("fit", data_npy, tmp_path) + ["--no-header"], capsys)
    assert "--header/--no-header apply to CSV/text files" in line


@pytest.mark.parametrize(("argv", "message"), [
    (["fit", "--data", "x.npy", "--out", "m.npz", "--kernel", "sigmoid"],
     "argument --kernel: invalid choice: 'sigmoid' (choose from 'rbf', 'laplacian', 'poly', "
     "'linear', 'arccos'); see 'kernelscale fit --help'"),
    (["fit", "--data", "x.npy", "--out", "m.npz", "--gamma", "abc"],
     "argument --gamma: must be a positive number, got 'abc'; see 'kernelscale fit --help'"),
    (["stream", "--data", "x.npy", "--out", "m.npz", "--gamma", "abc"],
     "argument --gamma: must be a positive number, got 'abc'; see 'kernelscale stream --help'"),
    (["vertical", "--data", "x.npy", "--kernel", "rfb"],
     "argument --kernel: invalid choice: 'rfb'"),
    (["transform", "--model", "m.npz"],
     "the following arguments are required: --data, --out; see 'kernelscale transform --help'"),
    (["bench"], "the following arguments are required: name; see 'kernelscale bench --help'"),
    ([], "the following arguments are required: COMMAND; see 'kernelscale --help'"),
    (["nope"], "argument COMMAND: invalid choice: 'nope'"),
])
def test_invalid_arguments_are_one_line(argv, message, capsys):
    """No usage block: one line, the error and where the help is, exit code 2."""
    line = one_error_line(argv, capsys)
    assert message in line
    assert "usage" not in line


@pytest.mark.parametrize("argv", [
    ["bench", "nope"],
    ["vertical", "--data", "nope.npy"],
    ["stream", "--data", "nope.npy", "--out", "m.npz"],
    ["fit", "--data", "nope.npy", "--out", "m.npz"],
])
def test_every_subcommand_has_the_same_error_prefix(argv, capsys):
    one_error_line(argv, capsys)  # 'kernelscale: error: ...', one line, exit code 2


def test_stream_warning_prefix(tmp_path, capsys):
    np.save(tmp_path / "X.npy", np.random.default_rng(0).standard_normal((10, 3)))
    assert main(["stream", "--data", str(tmp_path / "X.npy"), "--out", str(tmp_path / "s.npz"),
                 "--n-components", "4", "--sketch-size", "6", "--n-random-features", "20",
                 "--quiet"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert all(line.startswith("kernelscale: warning: ") for line in lines)
    assert "kernelscale: warning: The skpca sketch holds only" in "\n".join(lines)


def test_version(capsys):
    import kernelscale

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"kernelscale {kernelscale.__version__}"


def test_python_dash_m_kernelscale(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    import kernelscale

    root = str(Path(kernelscale.__file__).parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "kernelscale", "--version"], env=env,
                          capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 0 and done.stdout.strip() == f"kernelscale {kernelscale.__version__}"
    done = subprocess.run([sys.executable, "-m", "kernelscale", "fit", "--gamma", "abc"],
                          env=env, capture_output=True, text=True, cwd=tmp_path, check=False)
    assert done.returncode == 2
    assert done.stderr.startswith("kernelscale: error: ") and done.stderr.count("\n") == 1


@pytest.mark.parametrize("quiet", [[], ["--quiet"]])
def test_stream_says_where_the_model_went_even_when_quiet(data_npy, tmp_path, capsys, quiet):
    out = tmp_path / "s.npz"
    assert main(["stream", "--data", str(data_npy), "--out", str(out), "--gamma", "0.01",
                 "--chunk-size", "50", *quiet]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("stream: skpca model of 200 points, ")
    assert captured.out.strip().endswith(f" words, written to {out}")
    assert "points/s" not in captured.err  # not a terminal: no bar (issue 34)


@pytest.mark.parametrize(("rows", "message"), [
    (np.ones((1, 3)), "the bandwidth heuristic (--bandwidth-scale, from pairwise distances) "
     "needs at least 2 rows, the data has 1; give --gamma to set the kernel scale directly"),
    (np.ones((20, 3)), "the bandwidth heuristic (--bandwidth-scale, from pairwise distances) "
     "cannot set the kernel scale (All sampled rows are identical: the median distance is 0); "
     "give --gamma to set it directly"),
    (np.ones((0, 3)), "X.npy holds no rows"),
])
def test_errors_name_the_users_concepts(rows, message, tmp_path, capsys):
    """Not 'median_heuristic needs at least 2 rows': what to change on the command line."""
    np.save(tmp_path / "X.npy", rows)
    line = one_error_line(["fit", "--data", str(tmp_path / "X.npy"),
                           "--out", str(tmp_path / "m.npz")], capsys)
    assert line.endswith(message)
    assert "median_heuristic" not in line


def test_errors_and_warnings_name_flags_not_parameters(tmp_path, capsys):
    """README: errors name flags. The estimators' n_workers= / n_components= read as
    --workers / --n-components on the command line."""
    np.save(tmp_path / "two.npy", np.random.default_rng(0).standard_normal((2, 5)))
    assert main(["fit", "--data", str(tmp_path / "two.npy"), "--out",
                 str(tmp_path / "m.npz"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["kernelscale: warning: --workers 5 exceeds the 2 samples; using 2 workers.",
                   "kernelscale: error: --n-components 10 exceeds the number of samples (2)."]
    assert not (tmp_path / "m.npz").exists()


def test_stream_errors_name_flags(tmp_path, capsys):
    np.save(tmp_path / "X.npy", np.random.default_rng(0).standard_normal((50, 3)))
    line = one_error_line(["stream", "--data", str(tmp_path / "X.npy"), "--out",
                           str(tmp_path / "s.npz"), "--n-components", "300", "--quiet"], capsys)
    assert line.startswith("kernelscale: error: --n-components 300 exceeds --sketch-size 20;")
    assert "sketch_size" not in line and "n_components" not in line


@pytest.mark.parametrize("argv", [["fit", "--gamma", "0.1", "--quiet"], ["vertical"]])
def test_too_few_rows_is_said_in_rows(argv, tmp_path, capsys):
    """Not scikit-learn's 'Found array with 1 sample(s) (shape=(1, 5)) while a minimum
    of 2 is required by DistributedKernelPCA.'"""
    np.save(tmp_path / "one.npy", np.ones((1, 5)))
    command, *rest = argv
    out = ["--out", str(tmp_path / "m.npz")] if command == "fit" else []
    line = one_error_line([command, "--data", str(tmp_path / "one.npy"), *out, *rest], capsys)
    assert line == "kernelscale: error: the data has 1 row(s); at least 2 are needed"


def test_python_api_messages_still_name_parameters():
    """Only the CLI translates: the estimators keep naming their Python parameters."""
    from kernelscale import DistributedKernelPCA

    with pytest.raises(ValueError, match=r"n_components=10 exceeds the number of samples"), \
            pytest.warns(UserWarning, match=r"n_workers=5 exceeds the 2 samples"):
        DistributedKernelPCA(n_components=10, gamma=0.1).fit(np.ones((2, 5)))
    with pytest.raises(ValueError, match=r"Found array with 1 sample\(s\)"):
        DistributedKernelPCA(gamma=0.1).fit(np.ones((1, 5)))


def test_in_flags_replaces_parameters_not_words():
    from kernelscale.cli_common import in_flags

    flags = {"n_workers": "--workers", "kernel": "--kernel", "sketch_size": "--sketch-size"}
    assert in_flags("kernel='x' is not a kernel; n_workers=3, sketch_size too small; "
                    "est.n_workers_ and my_kernel=1", flags) == (
        "--kernel 'x' is not a kernel; --workers 3, --sketch-size too small; "
        "est.n_workers_ and my_kernel=1")
    assert in_flags("Found array with 0 feature(s) (shape=(3, 0)) while a minimum of 1 is "
                    "required by VerticalKernelPCA.") == (
        "the data has 0 column(s); at least 1 are needed")


@pytest.mark.parametrize(("argv", "message"), [
    (["fit", "--workers", "0"], "argument --workers: must be a positive integer, got '0'"),
    (["fit", "--landmarks", "-3"], "argument --landmarks: must be a positive integer, got '-3'"),
    (["fit", "--bandwidth-scale", "0"], "argument --bandwidth-scale: must be a positive number"),
    (["fit", "--gamma", "nan"], "argument --gamma: must be a positive number, got 'nan'"),
    (["fit", "--timeout", "0"], "argument --timeout: must be a positive number of seconds"),
    (["stream", "--chunk-size", "0"], "argument --chunk-size: must be a positive integer"),
    (["vertical", "--n-local-components", "x"],
     "argument --n-local-components: must be a positive integer, got 'x'"),
    (["transform", "--model", "m.npz", "--quiet"],
     "unrecognized arguments: --quiet; see 'kernelscale transform --help'"),
])
def test_flag_values_are_checked_by_flag_name(argv, message, capsys):
    command, *rest = argv
    required = {"fit": ["--data", "x.npy", "--out", "m.npz"], "vertical": ["--data", "x.npy"],
                "stream": ["--data", "x.npy", "--out", "m.npz"],
                "transform": ["--data", "x.npy", "--out", "z.npy"]}[command]
    assert message in one_error_line([command, *required, *rest], capsys)


def test_a_foreign_npz_is_not_a_model(data_npy, tmp_path, capsys):
    np.savez(tmp_path / "other.npz", a=np.arange(3))
    line = one_error_line(["transform", "--model", str(tmp_path / "other.npz"), "--data",
                           str(data_npy), "--out", str(tmp_path / "Z.npy")], capsys)
    assert line.endswith("other.npz is not a kernelscale model file (.npz); write one with "
                         "'kernelscale fit' or save_model (it has no kernelscale header).")


def _parsers():
    """The kernelscale parser and each subcommand's, with their names."""
    import argparse

    parser = build_parser()
    yield "kernelscale", parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def test_every_option_has_a_help_text():
    missing = [f"{name} {action.option_strings or action.dest}"
               for name, parser in _parsers() for action in parser._actions
               if not (action.help or "").strip()]
    assert missing == []
    assert {name for name, _ in _parsers()} == {
        "kernelscale", "demo", "fit", "transform", "stream", "vertical", "bench", "plan",
        "flower-app", "flower"}


def test_help_names_the_data_formats_and_transforms_arguments(capsys):
    assert main(["fit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "Parquet" in text and "LIBSVM" in text and ".npy" in text and ".csv" in text
    assert main(["transform", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split()).split("options:", 1)[1]
    for option in ("--model MODEL", "--data DATA", "--out OUT"):
        described = text.split(option, 1)[1].split(" --", 1)[0].strip()
        assert len(described) > 10, (option, text)
    assert "Parquet" in text


def _fit_words(out: str) -> int:
    return int(out.split("; ")[1].split(" words")[0].replace(",", ""))


@pytest.mark.parametrize("suffix", [".npy", ".svm"])
def test_fit_says_when_it_sent_more_than_the_data(digits, tmp_path, capsys, suffix):
    data = tmp_path / f"X{suffix}"
    X = digits[:60] * (np.abs(digits[:60]) > 1)  # sparse enough for a LIBSVM file
    write_data(X, data)
    data_words = 60 * 64 if suffix == ".npy" else 2 * int(np.count_nonzero(X))
    argv = ["fit", "--data", str(data), "--out", str(tmp_path / "m.npz"), "--quiet",
            "--n-components", "2", "--workers", "3", "--landmarks", "20", "--gamma", "0.01"]
    assert main(argv) == 0  # disKPCA on 60 points: more words than the points themselves
    captured = capsys.readouterr()
    words = _fit_words(captured.out)
    assert words > data_words
    shape = "60 x 64 values" if suffix == ".npy" else f"2 x {data_words // 2:,} nonzeros"
    assert captured.err == (
        f"kernelscale: note: the fit sent {words:,} words, more than the {data_words:,} words "
        f"of the whole data set ({shape}); the protocol's fixed costs pay off on larger data\n")


def test_no_note_when_the_fit_sends_less_than_the_data(tmp_path, capsys):
    X = np.random.default_rng(0).standard_normal((3000, 20))
    np.save(tmp_path / "X.npy", X)
    assert main(["fit", "--data", str(tmp_path / "X.npy"), "--out", str(tmp_path / "m.npz"),
                 "--quiet", "--n-components", "2", "--workers", "2", "--landmarks", "10",
                 "--method", "uniform_batch", "--gamma", "0.05"]) == 0
    captured = capsys.readouterr()
    assert _fit_words(captured.out) < 3000 * 20 and captured.err == ""


def test_fit_centres_by_default_like_the_estimator():
    from kernelscale.cli import build_parser

    base = ["fit", "--data", "x.npy", "--out", "m.npz"]
    assert build_parser().parse_args(base).center is True
    assert build_parser().parse_args([*base, "--no-center"]).center is False
    assert build_parser().parse_args(["demo"]).center is True


def test_help_and_every_subcommands_help_load_without_scikit_learn():
    """The parser (every subcommand's options) builds without importing scikit-learn,
    which alone takes about a second; a command loads it when it fits."""
    import subprocess
    import sys

    code = ("import sys\nfrom kernelscale.cli import main\n"
            "for argv in (['--help'], ['stream', '--help'], ['plan', '--help']):\n"
            "    try:\n        main(argv)\n    except SystemExit:\n        pass\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'), "
            "file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert "usage: kernelscale" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr
