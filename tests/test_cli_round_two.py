"""The command line under faults, round two (issue 34): no file lost by any command, no
header read as data, messages that name the real cause, and a command line that tells
the truth about itself (help, demo, progress bars).

Every case runs the real command (:func:`kernelscale.cli.main`) on real files.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest
from cli_errors import one_error_line
from terminal import Terminal

from kernelscale.cli import build_parser, main

FIT = ["--n-components", "2", "--workers", "2", "--landmarks", "10", "--gamma", "0.1",
       "--quiet"]
STREAM = ["--n-components", "2", "--n-random-features", "20", "--sketch-size", "6",
          "--gamma", "0.1", "--quiet"]


@pytest.fixture
def data(tmp_path):
    path = tmp_path / "v.npy"
    np.save(path, np.random.default_rng(0).standard_normal((40, 4)))
    return path


@pytest.fixture
def model(data, tmp_path, capsys):
    path = tmp_path / "m.npz"
    assert main(["fit", "--data", str(data), "--out", str(path), *FIT]) == 0
    capsys.readouterr()
    return path



def writers(data, model, out, extra=()):
    """Every command that writes a file, writing ``out`` (each its own kind of file)."""
    stem = str(out)
    return {
        "fit": ["fit", "--data", str(data), "--out", stem + ".npz", *FIT, *extra],
        "stream": ["stream", "--data", str(data), "--out", stem + ".npz", *STREAM, *extra],
        "transform": ["transform", "--model", str(model), "--data", str(data),
                      "--out", stem + ".csv", *extra],
        "transform-npy": ["transform", "--model", str(model), "--data", str(data),
                          "--out", stem + ".npy", *extra],
        "vertical": ["vertical", "--data", str(data), "--gamma", "0.1", "--out",
                     stem + ".npy", *extra],
    }


def out_of(argv) -> str:
    return argv[argv.index("--out") + 1]


# --- 1. data loss ---------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["fit", "stream", "transform", "transform-npy", "vertical"])
def test_no_command_replaces_a_file_it_did_not_write_unless_forced(command, data, model,
                                                                   tmp_path, capsys):
    """``echo "my thesis" > thesis.csv; kernelscale transform ... --out thesis.csv`` exited 0."""
    argv = writers(data, model, tmp_path / "thesis")[command]
    thesis = tmp_path / out_of(argv)
    thesis.write_text("my thesis\n")
    line = one_error_line(argv, capsys)
    assert "exists" in line and "--force" in line
    assert thesis.read_text() == "my thesis\n"
    assert main([*argv, "--force"]) == 0
    assert thesis.read_bytes() != b"my thesis\n"


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
@pytest.mark.parametrize("command", ["transform-npy", "vertical"])
def test_an_output_that_is_an_input_under_another_name_is_refused_even_forced(
        command, link, data, model, tmp_path, capsys):
    argv = writers(data, model, tmp_path / "alias", ["--force"])[command]
    alias = tmp_path / out_of(argv)
    (alias.symlink_to if link == "symlink" else alias.hardlink_to)(data)
    before = data.read_bytes()
    assert "is the input file" in one_error_line(argv, capsys)
    assert data.read_bytes() == before


def test_transform_onto_its_model_is_refused(data, model, tmp_path, capsys):
    alias = tmp_path / "scores.npy"
    alias.hardlink_to(model)
    line = one_error_line(["transform", "--model", str(model), "--data", str(data),
                           "--out", str(alias), "--force"], capsys)
    assert "is the input file" in line


@pytest.mark.parametrize("command", ["fit", "stream", "transform", "vertical"])
def test_an_unwritable_directory_is_refused_before_the_work(command, data, model, tmp_path,
                                                            capsys, monkeypatch):
    """The check comes first: nothing is fitted, loaded or transformed."""
    import kernelscale.datasets

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    if os.access(locked, os.W_OK):  # root ignores the mode: make the probe fail instead
        real_open = os.open

        def refuse(path, *args, **kwargs):
            if str(path).startswith(str(locked)):
                raise PermissionError(13, "Permission denied", str(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(os, "open", refuse)

    def no_work(*args, **kwargs):
        raise AssertionError("the data was read before the output was checked")

    monkeypatch.setattr(kernelscale.datasets, "load", no_work)
    monkeypatch.setattr(kernelscale.datasets, "iter_chunks", no_work)
    argv = writers(data, model, locked / "out")[command if command != "transform"
                                                else "transform-npy"]
    try:
        line = one_error_line(argv, capsys)
    finally:
        locked.chmod(0o700)
    assert "cannot write" in line and "Permission denied" in line
    assert list(locked.iterdir()) == []


@pytest.mark.parametrize("command", ["transform", "transform-npy", "vertical"])
def test_scores_are_written_whole_or_not_at_all(command, data, model, tmp_path, monkeypatch,
                                                capsys):
    """A write that breaks off half-way keeps the file that was there, and no temporary."""
    argv = writers(data, model, tmp_path / "scores", ["--force"])[command]
    out = tmp_path / out_of(argv)
    out.write_text("the old scores\n")
    names = sorted(p.name for p in tmp_path.iterdir())

    def half_then_full_disk(fh, *args, **kwargs):
        fh.write(b"half a file")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "save", half_then_full_disk)
    monkeypatch.setattr(np, "savetxt", half_then_full_disk)
    assert main(argv) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert out.read_text() == "the old scores\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def test_bench_refuses_a_results_directory_it_did_not_write(tmp_path, capsys):
    results = tmp_path / "diskpca_digits_rbf" / "quick"
    results.mkdir(parents=True)
    (results / "results.csv").write_text("my own results\n")
    line = one_error_line(["bench", "diskpca_digits_rbf", "--quick", "--out", str(tmp_path),
                           "--quiet"], capsys)
    assert "results.csv" in line and "--force" in line
    assert (results / "results.csv").read_text() == "my own results\n"


# --- 2. a header read as data ---------------------------------------------------------------

def pandas_csv(path, X):
    """What ``pandas.DataFrame(X).to_csv(path, index=False)`` writes: a header 0,1,...,d-1."""
    d = X.shape[1]
    rows = [",".join(map(str, range(d)))] + [",".join(repr(float(v)) for v in r) for r in X]
    path.write_text("\n".join(rows) + "\n")


def test_a_pandas_header_of_column_numbers_is_a_header_with_a_note(model, tmp_path, capsys):
    X = np.random.default_rng(2).standard_normal((60, 4))
    csv = tmp_path / "pandas.csv"
    pandas_csv(csv, X)
    out = tmp_path / "Z.csv"
    assert main(["transform", "--model", str(model), "--data", str(csv),
                 "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "wrote 60 x 2" in captured.out
    notes = [line for line in captured.err.splitlines() if line.startswith("kernelscale: note:")]
    assert len(notes) == 1 and "header" in notes[0] and "--no-header" in notes[0], captured.err
    assert np.loadtxt(out, delimiter=",").shape == (60, 2)
    # --no-header reads it as data (61 rows), --header as a header, both without a note.
    for flag, rows in (("--no-header", 61), ("--header", 60)):
        assert main(["transform", "--model", str(model), "--data", str(csv), "--out", str(out),
                     "--force", flag]) == 0
        captured = capsys.readouterr()
        assert f"wrote {rows} x 2" in captured.out and "note" not in captured.err


def test_the_column_number_rule_in_the_loaders(tmp_path):
    from kernelscale.datasets import iter_chunks, load

    X = np.random.default_rng(3).standard_normal((10, 3))
    csv = tmp_path / "pandas.csv"
    pandas_csv(csv, X)
    with pytest.warns(UserWarning, match=r"first row '0,1,2'.* header.*header=False"):
        np.testing.assert_array_equal(load(csv), X)
    with pytest.warns(UserWarning, match="header"):
        np.testing.assert_array_equal(np.vstack(list(iter_chunks(csv, chunk_size=4))), X)
    # Data whose first row merely counts like the rows below it stays data: 0,1,2 / 3,4,5.
    counting = tmp_path / "counting.csv"
    counting.write_text("0,1,2\n3,4,5\n6,7,8\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load(counting).shape == (3, 3)
        assert load(csv, header=False).shape == (11, 3)


# --- 4. messages that name the real cause ---------------------------------------------------

@pytest.fixture
def huge(tmp_path):
    path = tmp_path / "huge.npy"
    np.save(path, np.random.default_rng(0).uniform(0.5, 1, (40, 3)) * 1e308)
    return path


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "tiny.npy"
    np.save(path, np.random.default_rng(0).standard_normal((40, 3)) * 1e-308)
    return path


@pytest.mark.parametrize("argv", [["fit", "--quiet"], ["fit", "--gamma", "0.1", "--quiet"],
                                  ["stream", "--quiet"], ["stream", "--gamma", "0.1",
                                                          "--quiet"]])
def test_values_near_the_largest_float_say_they_overflow(argv, huge, tmp_path, capsys):
    line = one_error_line([argv[0], "--data", str(huge), "--out", str(tmp_path / "m.npz"),
                           *argv[1:]], capsys)
    assert "overflow" in line and "scale" in line, line
    assert "nan" not in line and "NaN" not in line and "converge" not in line


@pytest.mark.parametrize("command", ["fit", "stream"])
def test_values_near_the_smallest_float_say_they_underflow(command, tiny, tmp_path, capsys):
    line = one_error_line([command, "--data", str(tiny), "--out", str(tmp_path / "m.npz"),
                           "--quiet"], capsys)
    assert "underflow" in line and "scale" in line and "identical" not in line, line


def test_the_python_api_names_the_magnitude_and_the_partition():
    from kernelscale import DistributedKernelPCA, StreamingKernelPCA

    X = np.random.default_rng(0).standard_normal((30, 3))
    with pytest.raises(ValueError, match="Partition 1.*overflow"):
        DistributedKernelPCA(2, n_landmarks=10, gamma=0.1).fit([X, X * 1e300])
    with pytest.raises(ValueError, match="underflow"):
        StreamingKernelPCA(2, random_state=0).fit(X * 1e-300)
    DistributedKernelPCA(2, n_landmarks=10, gamma=0.1).fit([X, X * 1e-300])  # one tiny part


def test_a_libsvm_index_that_fits_int64_is_not_said_to_exceed_it(tmp_path, capsys):
    path = tmp_path / "wide.svm"
    path.write_text("1 1:2\n1 2:1\n0 3000000000:1\n")
    line = one_error_line(["fit", "--data", str(path), "--out", str(tmp_path / "m.npz"),
                           *FIT], capsys)
    assert "int64" not in line and "3000000000" in line and "2,147,483,64" in line, line


@pytest.mark.parametrize("kernel", ["poly"])
@pytest.mark.parametrize("command", ["fit", "vertical"])
def test_degree_zero_and_negative_get_the_same_message(command, kernel, data, tmp_path,
                                                       capsys):
    lines = []
    for degree in ("0", "-2"):
        argv = [command, "--data", str(data), "--kernel", kernel, "--degree", degree]
        if command == "fit":
            argv += ["--out", str(tmp_path / "m.npz"), *FIT]
        lines.append(one_error_line(argv, capsys))
    assert lines[0].replace("got 0", "got -2") == lines[1], lines
    assert "--degree must be a positive integer" in lines[0]


def test_arccos_degree_names_its_orders(data, tmp_path, capsys):
    line = one_error_line(["fit", "--data", str(data), "--kernel", "arccos", "--degree", "-2",
                           "--out", str(tmp_path / "m.npz"), *FIT], capsys)
    assert "--degree" in line and "0, 1 or 2" in line, line


def test_a_partition_list_mixing_2d_and_1d_names_the_partition():
    from kernelscale import DistributedKernelPCA

    X = np.random.default_rng(0).standard_normal((30, 3))
    with pytest.raises(ValueError, match=r"Partition 1 has shape \(3,\).*2-D"):
        DistributedKernelPCA(2, n_landmarks=10, gamma=0.1).fit([X[:20], X[20]])


def test_a_dataframe_with_a_string_column_names_the_column():
    pd = pytest.importorskip("pandas")
    from kernelscale import DistributedKernelPCA

    frame = pd.DataFrame(np.random.default_rng(0).standard_normal((30, 3)), columns=list("abc"))
    frame["city"] = ["Oslo"] * 30
    with pytest.raises(ValueError, match="'city'"):
        DistributedKernelPCA(2, n_landmarks=10, gamma=0.1).fit(frame)


@pytest.mark.parametrize("command", ["fit", "stream", "transform"])
def test_a_directory_as_data_says_it_is_a_directory(command, model, tmp_path, capsys):
    argv = writers(tmp_path, model, tmp_path / "o")[command]
    line = one_error_line(argv, capsys)
    assert "is a directory" in line and "extension" not in line, line


def test_trailing_commas_get_advice_that_helps(tmp_path, capsys):
    path = tmp_path / "trailing.csv"
    path.write_text("1,2,3,\n4,5,6,\n7,8,9,\n")
    line = one_error_line(["fit", "--data", str(path), "--out", str(tmp_path / "m.npz"),
                           *FIT], capsys)
    assert "trailing" in line and "--header" not in line, line


def test_a_sketch_too_small_for_its_components_is_said(data, tmp_path, capsys):
    """The docs require k < l/2 for Frequent Directions' bound (modified shrink)."""
    assert main(["stream", "--data", str(data), "--out", str(tmp_path / "s.npz"), "--quiet",
                 "--n-components", "3", "--sketch-size", "6", "--gamma", "0.1"]) == 0
    err = capsys.readouterr().err
    assert "kernelscale: warning:" in err and "--sketch-size" in err and "8" in err, err


# --- 5. the command line tells the truth about itself ---------------------------------------

def test_fit_help_says_what_the_default_does(capsys):
    assert main(["fit", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "pilot" in text and "printed" in text
    assert "disKPCA (default" not in text and "(default 400)" not in text


def test_fit_passes_landmarks_only_when_given(data, tmp_path, monkeypatch, capsys):
    import kernelscale

    given = []
    estimator = kernelscale.DistributedKernelPCA

    def spy(*args, **kwargs):
        given.append(kwargs.get("n_landmarks", "omitted"))
        return estimator(*args, **kwargs)

    monkeypatch.setattr(kernelscale, "DistributedKernelPCA", spy)
    argv = ["fit", "--data", str(data), "--out", str(tmp_path / "m.npz"), "--gamma", "0.1",
            "--n-components", "2", "--workers", "2", "--quiet"]
    assert main(argv) == 0
    assert main([*argv, "--landmarks", "12"]) == 0
    assert given == ["omitted", 12]
    capsys.readouterr()
    line = one_error_line([*argv, "--landmarks", "12", "--max-words", "100000"], capsys)
    assert "not both" in line


def test_fit_prints_the_chosen_method_and_why(tmp_path, capsys):
    """On digits over 8 workers the pilot picks uniform + batch: the output says so."""
    from kernelscale.datasets import load_digits_standardized

    X, _ = load_digits_standardized()
    np.save(tmp_path / "digits.npy", X)
    assert main(["fit", "--data", str(tmp_path / "digits.npy"), "--out",
                 str(tmp_path / "m.npz"), "--workers", "8", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "fitted uniform_batch" in out and "pilot" in out and "spread" in out, out
    # --landmarks set: honoured, not chosen (the line said 'chosen by the pilot rule')
    assert main(["fit", "--data", str(tmp_path / "digits.npy"), "--out",
                 str(tmp_path / "m2.npz"), "--workers", "8", "--landmarks", "40",
                 "--quiet"]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert line.startswith("method: diskpca with |Y| = 40: n_landmarks=40 was set"), line



@pytest.mark.parametrize("terminal", [True, False])
@pytest.mark.parametrize("command", ["stream", "fit"])
def test_a_bar_only_on_a_terminal(command, terminal, data, tmp_path, monkeypatch, capsys):
    screen = Terminal()
    if terminal:
        monkeypatch.setattr("sys.stderr", screen)
    argv = (FIT if command == "fit" else STREAM)[:-1]  # without --quiet
    assert main([command, "--data", str(data), "--out", str(tmp_path / "m.npz"), *argv]) == 0
    shown = "".join(screen.text) + capsys.readouterr().err
    if terminal:
        assert "\r" in shown, shown
    else:
        assert "\r" not in shown and len(shown.splitlines()) <= 3, shown


def test_parser_has_force_on_every_writer():
    parser = build_parser()
    for command in (["fit", "--data", "x", "--out", "m.npz"], ["stream", "--data", "x",
                    "--out", "m.npz"], ["transform", "--model", "m", "--data", "x", "--out",
                    "z.npy"], ["vertical", "--data", "x"], ["bench", "list"]):
        assert parser.parse_args([*command, "--force"]).force is True
