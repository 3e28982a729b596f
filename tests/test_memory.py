"""Every memory-heavy choice is checked before the work starts (issue 47, item 4).

Each plan that ran out of memory half-way (a MemoryError traceback after
minutes, or a machine filled) is now refused up front, with what it needs, what
is available and what fits. ``KERNELSCALE_MEMORY_LIMIT`` fixes the memory
available, so that every case refuses the same way on any machine; nothing
here allocates more than a few MiB.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp
from cli_errors import one_error_line

from kernelscale import (
    DistributedKernelPCA,
    FederatedKernelKMeans,
    StreamingKernelPCA,
    VerticalKernelPCA,
)
from kernelscale.backends.local import LocalCluster
from kernelscale.memory import (
    MAX_LOCAL_WORKERS,
    MEMORY_LIMIT_ENV,
    MemoryLimitError,
    available_memory,
    parse_bytes,
)
from kernelscale.memory_plans import horizontal_need


@pytest.fixture
def limit(monkeypatch):
    """Set the memory available to kernelscale (on top of what the machine has)."""
    def set_limit(text: str) -> int:
        monkeypatch.setenv(MEMORY_LIMIT_ENV, text)
        return parse_bytes(text)
    return set_limit


@pytest.fixture
def clusters(monkeypatch):
    """The in-process clusters made during a test (to see that none sent anything)."""
    made = []
    init = LocalCluster.__init__

    def recording(self, *args, **kwargs):
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(LocalCluster, "__init__", recording)
    return made


def _rows(n: int, d: int = 4, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, d))


def _wide(n: int, d: int = 1_000_000) -> sp.csr_matrix:
    """n sparse rows of d columns, 20 nonzeros each, the last column used."""
    rng = np.random.default_rng(0)
    columns = np.sort(rng.integers(0, d - 1, size=(n, 20)), axis=1)
    columns[0, -1] = d - 1
    X = sp.csr_matrix((rng.random(20 * n), columns.ravel(), np.arange(0, 20 * n + 1, 20)),
                      shape=(n, d))
    X.sum_duplicates()
    return X


def _number(pattern: str, text: str) -> int:
    return int(re.search(pattern, text).group(1).replace(",", ""))


def test_a_word_budget_that_buys_more_landmarks_than_fit_is_refused_with_the_budget_that_fits(
        limit, clusters, tmp_path, capsys):
    """--max-words 1e12 planned 20,000 landmarks on 40,000 rows: every in-process worker
    then held its own |Y|^2 Gram, and a MemoryError traceback came after 240 s."""
    limit("8G")
    data = tmp_path / "x.npy"
    np.save(data, _rows(40_000, 3))
    line = one_error_line(["fit", "--data", str(data), "--out", str(tmp_path / "m.npz"),
                           "--max-words", "1e12", "--gamma", "0.5", "--quiet"], capsys)
    assert "--method 'diskpca' with --landmarks 20,000 on 5 workers needs about" in line
    assert "more than the 8.0 GiB available; the largest --max-words that fits is about" in line
    fits = _number(r"\(diskpca with \|Y\| = ([\d,]+)\)", line)
    assert 1000 < fits < 20_000
    assert all(not cluster.ledger.rounds() for cluster in clusters)  # nothing was sent
    assert not (tmp_path / "m.npz").exists()


def test_the_largest_landmarks_that_fit_is_the_bound_itself(limit, tmp_path, capsys):
    """The n_landmarks the message names fits the memory available, and one more does not."""
    available = limit("1G")
    data = tmp_path / "x.npy"
    np.save(data, _rows(16_000))
    line = one_error_line(["fit", "--data", str(data), "--out", str(tmp_path / "m.npz"),
                           "--method", "uniform_dislr", "--landmarks", "15000", "--gamma",
                           "0.5", "--jobs", "1", "--partition", "uniform", "--quiet"], capsys)
    fits = _number(r"the largest --landmarks that fits is ([\d,]+)", line)
    rows = [len(p) for p in np.array_split(np.arange(16_000), 5)]

    def need(y):
        return horizontal_need("uniform_dislr", rows, 4, n_landmarks=y).total

    assert need(fits) <= available < need(fits + 1)


@pytest.mark.parametrize("make, pattern", [
    (lambda: DistributedKernelPCA(method="exact", n_workers=2, gamma=0.5),
     r"method='exact' on 12,000 points on 2 workers needs about 4\.3 GiB .* the exact fit "
     r"holds all n x n kernel values at the master: at most [\d,]+ points fit"),
    (lambda: DistributedKernelPCA(method="random_features", n_random_features=30_000,
                                  gamma=0.5, n_workers=2),
     r"method='random_features' with n_random_features=30,000 .* the largest "
     r"n_random_features that fits is [\d,]+"),
    (lambda: VerticalKernelPCA(n_components=2, gamma=0.5),
     r"the vertical kernel PCA of 12,000 samples over 2 parties needs about .* at most "
     r"[\d,]+ samples fit"),
    (lambda: FederatedKernelKMeans(n_clusters=3, n_random_features=40_000, n_workers=2),
     r"FederatedKernelKMeans with n_random_features=40,000 .* the largest n_random_features "
     r"that fits is [\d,]+"),
    (lambda: StreamingKernelPCA(n_random_features=3_000_000, random_state=0),
     r"streaming method='skpca' with n_random_features=3,000,000 .* the largest "
     r"n_random_features that fits with sketch_size=20 is [\d,]+"),
    (lambda: StreamingKernelPCA(method="rnca", n_random_features=20_000, random_state=0),
     r"the 20,000 x 20,000 covariance .* the largest n_random_features that fits is"),
], ids=["exact", "random-features", "vertical", "fk-kmeans", "skpca", "rnca"])
def test_every_setting_refuses_before_its_first_round(limit, clusters, make, pattern):
    limit("1G")
    X = _rows(12_000)
    with pytest.raises(MemoryLimitError, match=pattern) as info:
        make().fit(X)
    assert isinstance(info.value, MemoryError) and isinstance(info.value, ValueError)
    assert "more than the 1.0 GiB available" in str(info.value)
    assert all(not cluster.ledger.rounds() for cluster in clusters)


def test_random_features_on_wide_sparse_rows_counts_the_feature_map(limit):
    """random_features on 10^6 sparse columns: each worker's map holds d x m frequencies."""
    limit("2G")
    X = _wide(50)
    with pytest.raises(MemoryLimitError, match=r"its feature map \(1,000,000 x 2,000 "
                                               r"frequencies\), its 2,000 x 2,000 feature "
                                               r"covariance and blocks: [\d.]+ GiB") as info:
        DistributedKernelPCA(method="random_features", n_components=2, n_workers=2,
                             gamma=0.5).fit(X)
    assert "the largest n_random_features that fits is" in str(info.value)


def test_stream_of_wide_sparse_rows_is_refused_or_said_before_it_starts(limit, tmp_path,
                                                                        monkeypatch, capsys):
    """stream of a 10-row, 10^6-column sparse file took 4.1 GB and exited 0 without a word:
    its feature map holds 10^6 x m frequencies. Beyond the memory: refused, naming the
    flags; within it, a note says what it takes before the work."""
    from sklearn.datasets import dump_svmlight_file

    import kernelscale.memory as memory

    data = tmp_path / "wide.svm"
    X = _wide(10)
    dump_svmlight_file(X, np.zeros(10), str(data), zero_based=False)
    limit("2G")
    line = one_error_line(["stream", "--data", str(data), "--out", str(tmp_path / "s.npz"),
                           "--quiet"], capsys)
    assert ("streaming --method 'skpca' with --n-random-features 500 and --sketch-size 20 on "
            "1,000,000 features needs about 3.8 GiB (the random feature map (1,000,000 x 500 "
            "frequencies): 3.7 GiB") in line
    assert "the largest --n-random-features that fits with --sketch-size 20 is" in line
    assert "grow with the 1,000,000 features of these sparse rows" in line
    limit("8G")  # fits: said, and run (with a note's threshold below this small map)
    monkeypatch.setattr(memory, "NOTE_BYTES", 2**20)
    from kernelscale.cli import main

    assert main(["stream", "--data", str(data), "--out", str(tmp_path / "s.npz"),
                 "--n-random-features", "20", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("kernelscale: note: streaming --method 'skpca' with "
                          "--n-random-features 20 and --sketch-size 20 on 1,000,000 features "
                          "needs about 216.6 MiB (the random feature map (1,000,000 x 20 "
                          "frequencies): 152.6 MiB"), err


def test_vertical_on_two_parties_of_40000_rows_is_refused_up_front(limit, tmp_path, capsys):
    """vertical on 2 x 40k rows failed only once the memory ran out."""
    limit("16G")
    parties = [tmp_path / "a.npy", tmp_path / "b.npy"]
    X = _rows(40_000, 4)
    np.save(parties[0], X[:, :2])
    np.save(parties[1], X[:, 2:])
    line = one_error_line(["vertical", "--data", *map(str, parties), "--gamma", "0.5"], capsys)
    assert "the vertical kernel PCA of 40,000 samples over 2 parties needs about" in line
    assert "holds n x n kernels by design (paper 002): at most" in line


def test_a_million_workers_on_200000_rows_are_refused_instead_of_running_for_hours(
        tmp_path, capsys):
    data = tmp_path / "x.npy"
    np.save(data, _rows(200_000, 2))
    line = one_error_line(["fit", "--data", str(data), "--out", str(tmp_path / "m.npz"),
                           "--workers", "1000000", "--gamma", "1", "--quiet"], capsys)
    assert (f"--workers 1,000,000 means 200,000 in-process workers (one per row of 200,000); "
            f"kernelscale simulates at most {MAX_LOCAL_WORKERS:,} in one process") in line


def test_the_python_api_refuses_too_many_in_process_workers():
    with pytest.warns(UserWarning, match="exceeds the 10001 samples"), \
            pytest.raises(MemoryLimitError, match=r"n_workers=10,001 in-process workers: "
                                                  r"kernelscale simulates at most 10,000"):
        DistributedKernelPCA(n_workers=20_000, gamma=1.0).fit(_rows(10_001, 2))


def test_the_memory_limit_variable(monkeypatch):
    assert parse_bytes("4G") == 4 * 2**30
    assert parse_bytes("512MiB") == 512 * 2**20
    assert parse_bytes("1.5e9") == 1_500_000_000
    for bad in ("lots", "-1G", "0", "inf"):
        with pytest.raises(ValueError, match="is not an amount of memory"):
            parse_bytes(bad)
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "64M")
    assert available_memory() == 64 * 2**20


def test_a_sketch_too_large_for_the_memory_names_both_sizes_that_fit(limit, tmp_path, capsys):
    """A large --sketch-size failed only once memory ran out."""
    limit("1G")
    data = tmp_path / "x.npy"
    np.save(data, _rows(50))
    line = one_error_line(["stream", "--data", str(data), "--out", str(tmp_path / "s.npz"),
                           "--sketch-size", "100000000", "--quiet"], capsys)
    assert "the 100,000,000 x 500 sketch and its shrinking SVD: 1.5 TiB" in line
    assert re.search(r"more than the 1.0 GiB available; the largest --sketch-size that fits "
                     r"with --n-random-features 500 is [\d,]+\.$", line), line
