"""VerticalKernelPCA (scikit-learn contract, blocks vs split X) and ``kernelscale vertical``."""


import numpy as np
import pytest
from sklearn.decomposition import KernelPCA
from sklearn.utils.estimator_checks import parametrize_with_checks

from kernelscale.vertical.estimator import VerticalKernelPCA


def data(seed, n=50, d=8):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 2)) @ rng.normal(size=(2, d)) + 0.2 * rng.normal(size=(n, d))


@parametrize_with_checks([VerticalKernelPCA(), VerticalKernelPCA(kernel="linear", n_components=1)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_fit_on_blocks_equals_fit_on_split_x(seed):
    X = data(seed)
    cols = [np.array([0, 5, 2]), np.array([1, 3, 4, 6, 7])]
    on_x = VerticalKernelPCA(3, 6, kernel="rbf", gamma=0.1, feature_blocks=cols).fit(X)
    on_blocks = VerticalKernelPCA(3, 6, kernel="rbf", gamma=0.1).fit([X[:, c] for c in cols])
    np.testing.assert_allclose(on_x.eigenvalues_, on_blocks.eigenvalues_)
    new = data(seed + 10)[:6]
    np.testing.assert_allclose(
        on_x.transform(new), on_blocks.transform([new[:, c] for c in cols]), atol=1e-12
    )
    assert on_x.communication_.upload_words() == 2 * 6 * (X.shape[0] + 1)
    assert "raw_points" not in on_x.communication_.words_by_kind(phase=None)


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly"])
def test_exact_local_rank_matches_kernel_pca(kernel):
    X, new = data(3), data(4)[:7]
    est = VerticalKernelPCA(3, X.shape[0], kernel=kernel, gamma=0.1, feature_blocks=[3, 5])
    Z_fit = est.fit_transform(X)
    ref = KernelPCA(3, kernel=kernel, gamma=0.1, degree=3, coef0=1.0).fit(X)
    np.testing.assert_allclose(est.eigenvalues_, ref.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(np.abs(Z_fit), np.abs(ref.transform(X)), atol=1e-7)
    np.testing.assert_allclose(np.abs(est.transform(new)), np.abs(ref.transform(new)), atol=1e-7)
    Z, ledger = est.distributed_transform(new)
    assert ledger.upload_words(phase="transform") > 0
    assert "raw_points" not in ledger.words_by_kind(phase=None)


def test_estimator_bad_input():
    X = data(0)
    with pytest.raises(ValueError, match="'kernel' parameter .* Got 'sigmoidal'"):
        VerticalKernelPCA(kernel="sigmoidal").fit(X)
    with pytest.raises(ValueError, match="'cosine' does not split over feature blocks; the "
                                         "vertical setting takes linear, rbf"):
        VerticalKernelPCA(kernel="cosine").fit(X)
    with pytest.raises(ValueError, match="n_components"):
        VerticalKernelPCA(n_components=X.shape[0] + 1).fit(X)
    with pytest.raises(ValueError, match="gamma"):
        VerticalKernelPCA(gamma=-1.0).fit(X)
    with pytest.raises(ValueError, match="different numbers of samples"):
        VerticalKernelPCA().fit([X[:, :3], X[:-2, 3:]])
    with pytest.raises(ValueError, match="at least one feature"):
        VerticalKernelPCA(feature_blocks=20).fit(X)
    est = VerticalKernelPCA(feature_blocks=[3, 5]).fit(X)
    with pytest.raises(ValueError, match="features"):
        est.transform([X[:, :4], X[:, 4:]])
    with pytest.raises(ValueError, match="features"):
        est.transform(X[:, :5])


def run_cli(argv):
    from kernelscale.cli import main

    return main(["vertical", *argv])


def test_cli_fits_files(tmp_path, capsys):
    X = data(5)
    np.save(tmp_path / "x.npy", X)
    np.save(tmp_path / "a.npy", X[:, :3])
    np.save(tmp_path / "b.npy", X[:, 3:])
    out = tmp_path / "z.npy"
    assert (
        run_cli(
            [
                "--data",
                str(tmp_path / "x.npy"),
                "--blocks",
                "3,5",
                "--gamma",
                "0.1",
                "--n-local-components",
                "6",
                "--out",
                str(out),
                "--verbose",
            ]
        )
        == 0
    )
    assert "local eigenpairs" in capsys.readouterr().out
    two = tmp_path / "z2.npy"
    assert (
        run_cli(
            [
                "--data",
                str(tmp_path / "a.npy"),
                str(tmp_path / "b.npy"),
                "--gamma",
                "0.1",
                "--n-local-components",
                "6",
                "--out",
                str(two),
            ]
        )
        == 0
    )
    np.testing.assert_allclose(np.load(out), np.load(two))


@pytest.mark.parametrize(
    "argv",
    [["--data", "missing.npy"], ["--blocks", "x"], ["--blocks", "100"], ["--gamma", "-2"]],
)
def test_cli_user_mistakes_exit_2(tmp_path, capsys, argv):
    np.save(tmp_path / "x.npy", data(6))
    if argv[0] != "--data":
        argv = ["--data", str(tmp_path / "x.npy"), *argv]
    else:
        argv = ["--data", str(tmp_path / argv[1])]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kernelscale: error: ") and err.count("\n") == 1
