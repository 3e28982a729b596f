"""The paper's gamma rule never uploads a client's raw row (issue 14, item 4)."""

from __future__ import annotations

import numpy as np
import pytest

from kernelscale.backends.local import LocalCluster
from kernelscale.federated import fk_kmeans, paper_gamma
from kernelscale.federated.fkkmeans import MIN_ROWS_FOR_GAMMA


def _blobs(seed):
    rng = np.random.default_rng(seed)
    return np.vstack([rng.normal(0, 0.3, (10, 3)), rng.normal(3, 0.3, (10, 3))])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_one_row_client_is_refused_before_anything_is_sent(seed):
    X = _blobs(seed)
    cluster = LocalCluster([X[:1], X[1:]])
    with pytest.raises(ValueError, match=r"Client\(s\) \[0\] hold fewer than 2 rows.*raw rows"):
        fk_kmeans(cluster, 2, n_random_features=6, max_iter=1, random_state=seed)
    assert cluster.ledger.total_words(phase="fit") == 0
    assert not [m for m in cluster.ledger.rounds() if m.round == "gamma: moments"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_an_explicit_gamma_or_larger_clients_still_fit(seed):
    X = _blobs(seed)
    one_row = fk_kmeans(LocalCluster([X[:1], X[1:]]), 2, gamma=0.5, n_random_features=6,
                        max_iter=1, random_state=seed)
    assert one_row.gamma == 0.5
    cluster = LocalCluster([X[:MIN_ROWS_FOR_GAMMA], X[MIN_ROWS_FOR_GAMMA:]])
    assert paper_gamma(cluster, (MIN_ROWS_FOR_GAMMA, len(X) - MIN_ROWS_FOR_GAMMA)) == \
        pytest.approx(paper_gamma(LocalCluster([X])), rel=1e-12)


def test_without_row_counts_the_rule_is_unchanged():
    X = _blobs(3)
    assert paper_gamma(LocalCluster([X[:1], X[1:]])) == pytest.approx(
        paper_gamma(LocalCluster([X])), rel=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_rfk_kmeans_refuses_a_one_row_client_too(seed):
    # (distributed spectral clustering does not: its disKPCA uploads raw rows by design)
    from kernelscale.federated import rfk_kmeans

    X = _blobs(seed)
    cluster = LocalCluster([X[:1], X[1:]])
    with pytest.raises(ValueError, match=r"Client\(s\) \[0\] hold fewer than 2 rows"):
        rfk_kmeans(cluster, 2, n_random_features=20, random_state=seed)
    assert not [m for m in cluster.ledger.rounds() if m.round == "gamma: moments"]
