"""Tracebacks and wrong causes (issue 47, item 7): each now one line naming the real cause.

Every case runs the real command (:func:`kernelscale.cli.main`) or the estimator on
real files and arrays, with the input the issue names.
"""

from __future__ import annotations

import numpy as np
import pytest
from cli_errors import one_error_line

from kernelscale import (
    DistributedKernelPCA,
    DistributedSpectralClustering,
    FederatedKernelKMeans,
    StreamingKernelPCA,
    VerticalKernelPCA,
)
from kernelscale.cli import main

FIT = ["--n-components", "2", "--workers", "2", "--landmarks", "10", "--quiet"]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    path = tmp_path_factory.mktemp("round3") / "x.npy"
    np.save(path, np.random.default_rng(0).standard_normal((60, 4)))
    return path


def _fit(data, tmp_path, *extra) -> list[str]:
    return ["fit", "--data", str(data), "--out", str(tmp_path / "m.npz"), *FIT, *extra]


@pytest.mark.parametrize("scale, side", [("1e-300", "small"), ("1e300", "large")])
def test_an_extreme_bandwidth_scale_names_its_range(data, tmp_path, capsys, scale, side):
    """--bandwidth-scale 1e-300 / 1e300: a ZeroDivisionError / OverflowError traceback."""
    line = one_error_line(_fit(data, tmp_path, "--bandwidth-scale", scale), capsys)
    assert f"--bandwidth-scale {float(scale):g} is too {side}: sigma = " in line
    assert "gives gamma = 1 / (2 sigma^2) beyond the float range; choose --bandwidth-scale " \
           "between" in line and "or give --gamma" in line
    low, high = (float(v) for v in line.split("between ")[1].split(", or")[0].split(" and "))
    for inside in (low * 1.01, high * 0.99):  # the range it names does fit
        assert main(_fit(data, tmp_path, "--bandwidth-scale", f"{inside!r}")) == 0


@pytest.mark.parametrize("command", ["fit", "stream", "plan"])
def test_a_negative_seed_is_said_to_be_a_bad_seed(data, tmp_path, capsys, command):
    """--seed -1 was reported as a bandwidth problem."""
    argv = {"fit": _fit(data, tmp_path, "--gamma", "0.5"),
            "stream": ["stream", "--data", str(data), "--out", str(tmp_path / "s.npz")],
            "plan": ["plan", "--data", str(data)]}[command]
    line = one_error_line([*argv, "--seed", "-1"], capsys)
    assert "argument --seed/--random-state: must be an integer from 0 to 4294967295 (a " \
           "random seed), got '-1'" in line
    assert "bandwidth" not in line


@pytest.mark.parametrize("command", ["fit", "vertical"])
def test_a_huge_poly_degree_says_the_kernel_overflows(data, tmp_path, capsys, command):
    """--degree 1000000 was reported as "Eigenvalues did not converge"."""
    argv = (_fit(data, tmp_path) if command == "fit"
            else ["vertical", "--data", str(data)]) + ["--kernel", "poly"]
    line = one_error_line([*argv, "--degree", "1000000"], capsys)
    assert f"--degree 1000000 overflows the poly kernel on {data}: (gamma <x, x> + " \
           "coef0)^degree is beyond the float range for 60 of its 60 rows" in line
    line = one_error_line([*argv, "--degree", "1000000", "--gamma", "1e-4", "--coef0", "0"],
                          capsys)
    assert "underflows the poly kernel" in line and "is 0 for every row" in line


def test_the_python_api_names_the_overflowing_poly_kernel():
    X = np.random.default_rng(1).standard_normal((40, 3))
    with pytest.raises(ValueError, match=r"The poly kernel overflows float64 .* with "
                                         r"degree=1000000, gamma=0.5, coef0=1 is not finite"):
        DistributedKernelPCA(kernel="poly", degree=10**6, gamma=0.5, n_landmarks=10,
                             n_components=2, n_workers=2).fit(X)


@pytest.mark.parametrize("command", ["fit", "vertical"])
def test_a_negative_coef0_in_scientific_notation_is_read_as_a_number(data, tmp_path, capsys,
                                                                      command):
    """--coef0 -1e9 was "expected one argument": argparse took -1e9 for an option."""
    argv = (_fit(data, tmp_path) if command == "fit"
            else ["vertical", "--data", str(data)]) + ["--kernel", "poly"]
    line = one_error_line([*argv, "--coef0", "-1e9"], capsys)
    assert "--coef0 must be a finite number >= 0 for --kernel poly (a negative constant " \
           "term can make the kernel indefinite), got -1e+09" in line
    # where a negative constant is allowed, it is one
    assert main(["vertical", "--data", str(data), "--kernel", "sigmoid", "--gamma", "0.1",
                 "--coef0", "-1e-3"]) == 0


def test_wrong_model_arrays_name_the_file_and_the_member(data, tmp_path, capsys):
    """A 1-D or structured coef was an IndexError; a wrong shape a numpy broadcast message
    that named no file."""
    model = tmp_path / "m.npz"
    assert main(_fit(data, tmp_path, "--gamma", "0.5")) == 0
    capsys.readouterr()
    with np.load(model, allow_pickle=False) as saved:
        arrays = {name: saved[name] for name in saved.files}
    for name, coef, expected in (
            ("flat.npz", arrays["coef"].ravel(), "member coef.npy is 20 float64 values"),
            ("shape.npz", np.ones((11, 2)), "member coef.npy is 11 x 2 float64; its header "
                                            "implies 10 x any")):
        bad = tmp_path / name
        np.savez(bad, **{**arrays, "coef": coef})
        line = one_error_line(["transform", "--model", str(bad), "--data", str(data), "--out",
                               str(tmp_path / "z.npy")], capsys)
        assert f"{bad} is a damaged landmark_kpca file: {expected}" in line


def test_uniform_batch_over_every_point_says_so_not_a_ratio():
    """"uniform + batch ships 1250000000000.0x the points": its sample was the whole data
    (the finite population correction divides by 1 - m/n = 0)."""
    from kernelscale.horizontal.pilot import choose_after_pilot

    choice = choose_after_pilot(0.1, {"diskpca": 30, "uniform_dislr": 40,
                                      "uniform_batch": 500}, n_pilot=100, n_components=2,
                                n_samples=500)
    assert choice.method == "uniform_batch"
    assert "ships every one of the 500 points (the exact kernel PCA at the master), against " \
           "|Y| = 40 for uniform + disLR" in choice.reason
    assert "x the points" not in choice.reason


def test_duplicate_parquet_columns_name_the_column(tmp_path, capsys):
    """An arrow internals message ("Multiple matches for FieldRef.Name(a)...")."""
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "dup.parquet"
    pq.write_table(pa.table([pa.array(np.ones(5)), pa.array(np.zeros(5))], names=["a", "a"]),
                   path)
    for argv in (["fit", "--data", str(path), "--out", str(tmp_path / "m.npz"), "--gamma",
                  "1"], ["stream", "--data", str(path), "--out", str(tmp_path / "s.npz")]):
        line = one_error_line(argv, capsys)
        assert f"{path}: the column name 'a' appears 2 times; columns are read by name, so " \
               "each needs its own" in line
        assert "FieldRef" not in line


@pytest.mark.parametrize("estimator", [
    StreamingKernelPCA(), DistributedKernelPCA(), VerticalKernelPCA(),
    FederatedKernelKMeans(n_clusters=2), DistributedSpectralClustering(n_clusters=2)],
    ids=lambda e: type(e).__name__)
def test_a_generator_says_what_to_pass_instead(estimator):
    """StreamingKernelPCA.fit(generator): "float() argument must be a string or a real
    number, not 'generator'"; every estimator said the same."""
    rows = (np.ones(3) * i for i in range(10))
    with pytest.raises(TypeError, match=r"X is a generator, which is read once and has no "
                                        r"shape: pass an array, a CSR matrix or a list of "
                                        r"partitions .* StreamingKernelPCA.partial_fit"):
        estimator.fit(rows)


def test_transform_refuses_to_write_scores_that_are_not_finite(data, tmp_path, capsys):
    """A model that loads (its kernel finite on its landmarks) can still overflow on new
    rows: no NaN or inf scores are written with exit code 0."""
    model = tmp_path / "poly.npz"
    assert main(["fit", "--data", str(data), "--out", str(model), *FIT, "--kernel", "poly",
                 "--degree", "200", "--gamma", "0.02", "--method", "uniform_dislr"]) == 0
    capsys.readouterr()
    far = tmp_path / "far.npy"
    np.save(far, np.full((3, 4), 1e3))
    line = one_error_line(["transform", "--model", str(model), "--data", str(far), "--out",
                           str(tmp_path / "z.npy")], capsys)
    assert f"{far}: The poly kernel overflows float64" in line
    assert not (tmp_path / "z.npy").exists()
