"""The command line under faults and bad input (issue 21): nothing lost, one clear line.

Every case runs the real command (:func:`kernelscale.cli.main`) on real files.
"""

from __future__ import annotations

import numpy as np
import pytest
from cli_errors import one_error_line

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


def test_a_model_name_at_the_length_limit_is_written(data, tmp_path):
    """The temporary name must fit wherever the model's own name fits (255 bytes)."""
    out = tmp_path / ("m" * 251 + ".npz")
    assert main(["fit", "--data", str(data), "--out", str(out), *FIT]) == 0
    load_model(out)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([out.name, "v.npy"])


def test_fit_out_must_carry_the_model_extension(data, tmp_path, capsys):
    line = one_error_line(["fit", "--data", str(data), "--out", str(tmp_path / "model"),
                           *FIT], capsys)
    assert line.endswith("--out must end in .npz (a model file, as 'kernelscale transform "
                         "--model' reads), got model")
    assert not (tmp_path / "model").exists()


# --- 6. bad input that got a traceback or a wrong message ------------------------------------

def test_libsvm_index_beyond_int64_is_one_line_naming_the_line(tmp_path, capsys):
    path = tmp_path / "big.svm"
    path.write_text("1 1:2\n1 2:1\n0 99999999999999999999:1\n")
    for command in (["fit", "--out", str(tmp_path / "m.npz"), *FIT],
                    ["stream", "--out", str(tmp_path / "s.npz"), *STREAM]):
        line = one_error_line([command[0], "--data", str(path), *command[1:]], capsys)
        assert line == (f"kernelscale: error: {path}: line 3: malformed LIBSVM line "
                        "'0 99999999999999999999:1' (a feature index beyond the int64 range)")


@pytest.fixture
def csv_rows(tmp_path):
    """20 x 3 rows and their CSV text (no header)."""
    X = np.random.default_rng(1).standard_normal((20, 3))
    np.savetxt(tmp_path / "plain.csv", X, delimiter=",")
    return X, (tmp_path / "plain.csv").read_bytes()


@pytest.mark.parametrize("header", [[], ["--no-header"]])
def test_a_csv_with_a_utf8_byte_order_mark_is_read(csv_rows, tmp_path, header):
    """Spreadsheets save CSV with a BOM; its first field was 'not a number'."""
    from kernelscale.datasets import iter_chunks, load

    X, text = csv_rows
    path = tmp_path / "bom.csv"
    path.write_bytes(b"\xef\xbb\xbf" + text)
    np.testing.assert_array_equal(load(path), X)
    np.testing.assert_array_equal(np.vstack(list(iter_chunks(path, chunk_size=7))), X)
    assert main(["fit", "--data", str(path), "--out", str(tmp_path / "m.npz"), *header,
                 *FIT]) == 0
    named = tmp_path / "named.csv"  # and with a header row
    named.write_bytes(b"\xef\xbb\xbfa,b,c\n" + text)
    np.testing.assert_array_equal(load(named), X)


@pytest.mark.parametrize("name", ["x.csv.gz", "gzipped_but_named.csv", "x.txt.gz"])
def test_gzip_compressed_csv_is_read(csv_rows, tmp_path, name, capsys):
    """``.csv.gz`` (how the bundled real data ship) and gzip bytes behind a .csv name."""
    import gzip

    from kernelscale.datasets import iter_chunks, load

    X, text = csv_rows
    path = tmp_path / name
    path.write_bytes(gzip.compress(text))
    np.testing.assert_array_equal(load(path), X)
    np.testing.assert_array_equal(np.vstack(list(iter_chunks(path, chunk_size=6))), X)
    out = tmp_path / "m.npz"
    assert main(["fit", "--data", str(path), "--out", str(out), "--no-header", *FIT]) == 0
    assert main(["stream", "--data", str(path), "--out", str(tmp_path / "s.npz"),
                 *STREAM]) == 0
    assert main(["transform", "--model", str(out), "--data", str(path),
                 "--out", str(tmp_path / "Z.npy")]) == 0
    assert np.load(tmp_path / "Z.npy").shape == (20, 2)


def test_bytes_that_are_not_text_name_the_file(tmp_path, capsys):
    path = tmp_path / "binary.csv"
    path.write_bytes(b"1,2\n\xff\xfe,3\n")
    line = one_error_line(["fit", "--data", str(path), "--out", str(tmp_path / "m.npz"),
                           *FIT], capsys)
    assert line.startswith(f"kernelscale: error: {path}: not UTF-8 text")


def test_header_advice_names_the_flag_as_it_is_typed(tmp_path, capsys):
    path = tmp_path / "mixed.csv"
    path.write_text("a,1,2\n1,2,3\n4,5,6\n")
    line = one_error_line(["fit", "--data", str(path), "--out", str(tmp_path / "m.npz"),
                           *FIT], capsys)
    assert line.endswith("To skip it as a header, pass --header.")


@pytest.mark.parametrize("rows, message", [
    (0, "holds no rows"),
    (1, "the data has 1 row(s); at least 2 are needed to fit"),
])
def test_plan_refuses_what_fit_refuses(rows, message, tmp_path, capsys):
    """plan said '--workers must be a positive integer, got 0' on an empty file, and
    forecast an exact fit of one row that fit then refused."""
    path = tmp_path / "few.npy"
    np.save(path, np.ones((rows, 4)))
    assert message in one_error_line(["plan", "--data", str(path), "--gamma", "1"], capsys)
    assert main(["fit", "--data", str(path), "--out", str(tmp_path / "m.npz"), "--gamma",
                 "1", "--quiet"]) == 2


@pytest.mark.parametrize("method, extra", [
    ("uniform_batch", ["--landmarks", "20001"]),
    ("exact", []),
])
def test_batch_kpca_beyond_20000_points_is_refused_up_front_with_its_memory(
        method, extra, tmp_path, capsys):
    """--method uniform_batch --landmarks 30000 allocated 6.7 GiB and died with a traceback."""
    path = tmp_path / "n.npy"
    np.save(path, np.random.default_rng(0).standard_normal((20_001, 2)))
    line = one_error_line(["fit", "--data", str(path), "--out", str(tmp_path / "m.npz"),
                           "--method", method, "--gamma", "1", "--quiet", *extra], capsys)
    assert "builds the 20,001 x 20,001 kernel matrix at the master: 3.0 GiB" in line
    assert "limited to 20,000 points" in line


@pytest.mark.parametrize("method", ["diskpca", "uniform_dislr"])
def test_dislr_beyond_20000_landmarks_is_refused_up_front_with_its_memory(method, tmp_path,
                                                                           capsys):
    """disLR's master and workers hold |Y| x |Y| matrices: 20,001 landmarks were accepted
    and would allocate several 3 GiB matrices mid-fit."""
    path = tmp_path / "n.npy"
    np.save(path, np.random.default_rng(0).standard_normal((20_001, 2)))
    line = one_error_line(["fit", "--data", str(path), "--out", str(tmp_path / "m.npz"),
                           "--method", method, "--gamma", "1", "--quiet",
                           "--landmarks", "20001"], capsys)
    assert f"--method '{method}' with --landmarks 20,001" in line
    assert "(3.0 GiB each" in line and "limited to 20,000 landmarks" in line


@pytest.mark.parametrize("method,match", [
    ("uniform_dislr", "20,001 x 20,001 matrices at the master and on every"),
    ("uniform_batch", "20,001 x 20,001 kernel matrix at the master"),
])
def test_landmark_methods_refuse_too_many_given_landmarks(method, match):
    from kernelscale import DistributedKernelPCA

    X = np.random.default_rng(0).standard_normal((50, 2))
    Y = np.random.default_rng(1).standard_normal((20_001, 2))
    with pytest.raises(ValueError, match=match):
        DistributedKernelPCA(method=method, landmarks=Y, gamma=1.0, n_components=2).fit(X)


@pytest.mark.parametrize("words", ["1e6", "1E6", "2.5e5", "1_000_000"])
def test_max_words_in_scientific_notation(words, data, tmp_path, capsys):
    assert main(["fit", "--data", str(data), "--out", str(tmp_path / "m.npz"),
                 "--max-words", words, "--gamma", "0.1", "--quiet"]) == 0
    assert main(["plan", "--data", str(data), "--max-words", words, "--gamma", "0.1"]) == 0


@pytest.mark.parametrize("words", ["1.5e0", "1e-3", "1e999999999", "1,000"])
def test_max_words_that_is_not_an_exact_integer_is_refused(words, data, tmp_path, capsys):
    line = one_error_line(["fit", "--data", str(data), "--out", str(tmp_path / "m.npz"),
                           "--max-words", words], capsys)
    assert f"--max-words: must be a positive integer, got '{words}'" in line


def _estimators():
    from kernelscale import (
        DistributedKernelPCA,
        FederatedKernelKMeans,
        StreamingKernelPCA,
        VerticalKernelPCA,
    )

    return [DistributedKernelPCA(n_components=2), FederatedKernelKMeans(n_clusters=2),
            StreamingKernelPCA(n_components=2), VerticalKernelPCA(n_components=2)]


@pytest.mark.parametrize("estimator", _estimators(), ids=lambda e: type(e).__name__)
def test_complex_input_is_one_short_line(estimator):
    """scikit-learn's message prints the whole array (thousands of lines on real data)."""
    X = np.random.default_rng(0).standard_normal((500, 4)) + 1j
    with pytest.raises(ValueError) as info:
        estimator.fit(X)
    message = str(info.value)
    assert message.startswith("Complex data not supported: X has dtype complex128.")
    assert "\n" not in message and len(message) < 200
    estimator.fit(X.real)
    with pytest.raises(ValueError, match="^Complex data not supported"):
        estimator.transform(X)


# --- 5. errors name the flags ----------------------------------------------------------------

def test_jobs_zero_names_the_flag_not_the_parameter(data, tmp_path, capsys):
    line = one_error_line(["fit", "--data", str(data), "--out", str(tmp_path / "m.npz"),
                           "--jobs", "0"], capsys)
    assert "argument --jobs: must be a number of threads (1, 2, ...) or -1 for every core" \
        in line
    assert "None" not in line and "n_jobs" not in line


@pytest.mark.parametrize("blocks, message", [
    ("3,3", "--blocks [3, 3]: the sizes sum to 6, but the data has 5 features."),
    ("0", "--blocks must be a positive integer, got 0."),
    ("0,5", "--blocks sizes must be positive integers, got [0, 5]."),
])
def test_vertical_blocks_errors_name_the_flag(blocks, message, tmp_path, capsys):
    path = tmp_path / "v5.npy"
    np.save(path, np.random.default_rng(0).standard_normal((30, 5)))
    line = one_error_line(["vertical", "--data", str(path), "--blocks", blocks,
                           "--gamma", "0.1"], capsys)
    assert line == f"kernelscale: error: {message}"


# --- 7. newcomer consistency -----------------------------------------------------------------

def _subcommands():
    import argparse

    from kernelscale.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def test_every_default_is_shown_in_help():
    """'fit --help' did not say that --landmarks defaults to 400."""
    import argparse

    missing = [(name, action.option_strings[0])
               for name, parser in _subcommands().items() for action in parser._actions
               if action.option_strings and not isinstance(action, argparse._HelpAction)
               and action.default not in (None, False, argparse.SUPPRESS)
               and "default" not in (action.help or "").lower()]
    assert missing == []


def test_one_seed_flag_everywhere_with_the_other_as_alias():
    """--seed on fit, --random-state on stream: both now take both, --seed first."""
    for name, parser in _subcommands().items():
        seeds = [a for a in parser._actions
                 if {"--seed", "--random-state"} & set(a.option_strings)]
        if name in ("fit", "demo", "plan", "stream"):
            assert len(seeds) == 1 and seeds[0].option_strings == ["--seed", "--random-state"]


@pytest.mark.parametrize("flag", ["--seed", "--random-state"])
def test_stream_seed_and_its_alias_give_the_same_model(flag, data, tmp_path):
    from kernelscale import StreamingKernelPCA

    out = tmp_path / "s.npz"
    assert main(["stream", "--data", str(data), "--out", str(out), flag, "7", *STREAM]) == 0

    X = np.load(data)
    direct = StreamingKernelPCA(n_components=2, n_random_features=20, sketch_size=6,
                                gamma=0.1, random_state=7).fit(X)
    np.testing.assert_allclose(load_model(out).transform(X), direct.transform(X), atol=1e-10)


def test_poly_degree_default_is_the_estimators_everywhere(data, tmp_path):
    """fit used degree 4 for poly, vertical and DistributedKernelPCA 3."""
    from kernelscale import DistributedKernelPCA, VerticalKernelPCA

    out = tmp_path / "m.npz"
    assert main(["fit", "--data", str(data), "--out", str(out), "--kernel", "poly",
                 "--gamma", "0.1", "--quiet"]) == 0
    X = np.load(data)
    assert load_model(out).kernel.degree == 3
    with pytest.warns(UserWarning, match="n_landmarks=400 exceeds the 40 samples"):
        assert DistributedKernelPCA(kernel="poly", gamma=0.1).fit(X).kernel_.degree == 3
    assert _subcommands()["vertical"].get_default("degree") == 3
    assert VerticalKernelPCA().degree == 3


def test_fit_prints_one_summary_line_and_the_ledger_only_with_verbose(data, tmp_path,
                                                                      capsys):
    """fit printed about 25 lines of ledger to stderr unless --quiet."""
    argv = ["fit", "--data", str(data), "--out", str(tmp_path / "m.npz"), "--gamma", "0.1",
            "--landmarks", "30"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    # The summary, and the method the fit chose and why (issue 34).
    assert captured.out.count("\n") == 2 and captured.out.startswith("fitted diskpca")
    assert captured.out.splitlines()[1].startswith("method: diskpca")
    assert "communication (fit)" not in captured.err
    assert main([*argv, "--verbose"]) == 0
    assert "communication (fit)" in capsys.readouterr().err


def test_vertical_prints_one_line_and_the_ledger_only_with_verbose(data, tmp_path, capsys):
    argv = ["vertical", "--data", str(data), "--gamma", "0.1"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("vertical: 2 parties")
    assert main([*argv, "--verbose"]) == 0
    assert "local eigenpairs" in capsys.readouterr().out


@pytest.mark.parametrize("name, flag", [("feature_blocks", "--blocks"), ("gamma", "--gamma")])
def test_sklearn_parameter_errors_read_as_flags(name, flag):
    from kernelscale.cli_common import in_flags

    message = (f"The '{name}' parameter of VerticalKernelPCA must be a float in the range "
               f"(0, inf) or None. Got -1 instead.")
    assert in_flags(message, {name: flag}) == (
        f"{flag} must be a float in the range (0, inf) or None, got -1.")
