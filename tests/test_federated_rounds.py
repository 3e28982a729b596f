"""FK k-means in a handful of rounds (issue 45): the pipelined protocol, its solvers,
the aggregates-only variant, and the rounds each one takes."""

import numpy as np
import pytest
import scipy.linalg as sla
from sklearn.datasets import make_blobs
from sklearn.metrics import normalized_mutual_info_score

from kernelscale.backends.local import LocalCluster
from kernelscale.federated import FederatedKernelKMeans, fk_kmeans
from kernelscale.federated.pipelined import (
    DEFAULT_ROUND_COST,
    block_krylov,
    choose_solver,
    solver_costs,
)
from kernelscale.partition import make_partition, split
from kernelscale.runtime.steps import AGGREGATES, NOTHING, step_disclosure


def _blobs(n=300, seed=0):
    return make_blobs(n, n_features=5, centers=4, cluster_std=1.5, random_state=seed)


def _cluster(X, n_workers=4, seed=0):
    idx = make_partition(X.shape[0], n_workers, "uniform", random_state=seed)
    return LocalCluster(split(X, idx)), np.concatenate(idx)


class DisclosureLog(LocalCluster):
    """Records what each round's step declares for each worker's arguments."""

    def __init__(self, parts):
        super().__init__(parts)
        self.declared = []

    def _run(self, step, per_worker_args, round, deliver):
        if round != "reset":
            self.declared.append((round, self.current_phase,
                                  {step_disclosure(step, args) for args in per_worker_args}))
        return super()._run(step, per_worker_args, round, deliver)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_block_krylov_finds_the_top_eigenpairs_in_a_few_products(seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((300, 120)) * np.geomspace(10, 0.01, 120)
    G = A.T @ A.copy()
    w = sla.eigvalsh(G)[::-1]
    omega = rng.standard_normal((120, 20))
    products = []

    def product(Q):
        products.append(Q.shape[1])
        return G @ Q

    result = block_krylov(G @ omega, omega, product, n_wanted=6, threshold=w[8], tol=1e-8)
    assert len(result.eigenvalues) >= 9  # every one above the threshold, and the next
    np.testing.assert_allclose(result.eigenvalues, w[: len(result.eigenvalues)], rtol=1e-7)
    V = result.eigenvectors
    np.testing.assert_allclose(V.T @ V, np.eye(V.shape[1]), atol=1e-8)
    np.testing.assert_allclose(G @ V, V * result.eigenvalues, atol=1e-6 * w[0])
    assert result.n_steps == 1 + len(products) < 120 / 20  # before the space is exhausted


@pytest.mark.parametrize("seed", [0, 1])
def test_the_gram_message_gives_the_papers_model(seed):
    # The paper's distributed Lanczos draws its start vector from each iteration's seed, so
    # both protocols draw the same seeds: the server's own eigen-solution of the summed Gram
    # then follows the paper's DSPGD iteration for iteration, to Lanczos' tolerance.
    X, _ = _blobs(240, seed=seed)
    runs = {}
    for protocol in ("paper", "gram", "block"):
        cluster, _ = _cluster(X, seed=seed)
        runs[protocol] = fk_kmeans(cluster, 4, n_random_features=20, max_iter=6,
                                   coreset_size=60, random_state=seed, protocol=protocol)
    paper = runs["paper"]
    H = paper.model.embed(X)
    for protocol in ("gram", "block"):
        other = runs[protocol]
        assert other.dspgd.model.seeds == paper.dspgd.model.seeds
        assert other.dspgd.ranks == paper.dspgd.ranks
        assert other.dspgd.threshold == pytest.approx(paper.dspgd.threshold, rel=1e-9)
        np.testing.assert_allclose(other.dspgd.eigenvalues, paper.dspgd.eigenvalues,
                                   rtol=1e-8)
        H_other = other.model.embed(X)
        signs = np.sign(np.sum(H * H_other, axis=0))  # an eigenvector's sign is free
        np.testing.assert_allclose(H_other * signs, H, atol=1e-6 * np.abs(H).max())


@pytest.mark.parametrize("seed", [0, 1])
def test_gram_and_block_fit_the_same_model(seed):
    # The block solver draws its start from the seed: the same random stream as the Gram
    # message, so the same seeds, eigenpairs, projections and labels.
    X, _ = _blobs(300, seed=seed)
    results = {}
    for protocol in ("gram", "block"):
        cluster, _ = _cluster(X, seed=seed)
        results[protocol] = fk_kmeans(cluster, 4, n_random_features=20, max_iter=6,
                                      coreset_size=80, random_state=seed, protocol=protocol)
    gram, block = results["gram"], results["block"]
    assert gram.dspgd.solvers == ["gram"] * 6 and block.dspgd.solvers == ["block"] * 6
    assert gram.dspgd.ranks == block.dspgd.ranks
    H_gram, H_block = gram.model.embed(X), block.model.embed(X)
    # each column of H is an eigenvector up to its sign
    signs = np.sign(np.sum(H_gram * H_block, axis=0))
    np.testing.assert_allclose(H_block * signs, H_gram, atol=1e-6 * np.abs(H_gram).max())


@pytest.mark.parametrize("n_refine", [0, 3])
def test_pipelined_rounds_are_one_per_iteration(n_refine):
    X, _ = _blobs(240)
    cluster, _ = _cluster(X)
    T = 7
    fk_kmeans(cluster, 4, n_random_features=20, max_iter=T, coreset_size=60,
              n_refine=n_refine, random_state=0)
    ledger = cluster.ledger
    # gamma, T iterations, H and the coresets, the Lloyd refinements, the centres
    assert ledger.n_rounds("fit") == 1 + T + 1 + n_refine + 1
    assert ledger.rounds_by_name("fit")["dspgd: iteration"] == T
    assert ledger.n_rounds("collect") == 1  # the labels
    paper, _ = _cluster(X)
    fk_kmeans(paper, 4, n_random_features=20, max_iter=T, coreset_size=60,
              n_refine=n_refine, random_state=0, protocol="paper")
    # the paper's: a round per seed, Lanczos step and update of B; two for the coreset
    assert paper.ledger.n_rounds("fit") > 1 + T * (4 + 3)


def test_auto_sends_the_gram_at_small_d_and_block_products_at_large_d():
    # 67 x 67 at D = 50: 2,278 words a client, in the iteration's own round
    assert choose_solver("auto", 67, 19, 17, 5, DEFAULT_ROUND_COST) == "gram"
    # 2,017 x 2,017 at D = 2,000: block products are 5x fewer words for 2 more rounds
    assert choose_solver("auto", 2017, 19, 17, 5, DEFAULT_ROUND_COST) == "block"
    # words alone: Lanczos, even charged at its fewest steps, is the cheapest there
    assert choose_solver("auto", 2017, 19, 17, 5, 0.0) == "lanczos"
    costs = solver_costs(67, 19, 17, 5, 0.0)
    assert costs["gram"] == 5 * 67 * 68 / 2
    assert choose_solver("block", 67, 19, 17, 5, 0.0) == "block"


def test_the_gram_reply_has_the_words_the_choice_counted():
    X, _ = _blobs(240)
    cluster, _ = _cluster(X)
    D = 20
    result = fk_kmeans(cluster, 4, n_random_features=D, max_iter=3, coreset_size=60,
                       random_state=0)
    ups = [m.words for m in cluster.ledger.rounds("fit")
           if m.round == "dspgd: iteration" and m.direction == "worker->master"]
    dims = [D + r for r in [0] + result.dspgd.ranks[:-1]]
    assert ups == [d * (d + 1) // 2 for d in dims for _ in range(4)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_aggregates_only_replies_are_sums_and_the_labels_stay_on_the_clients(seed):
    X, y = make_blobs(400, n_features=5, centers=4, cluster_std=1.0, random_state=seed)
    idx = make_partition(400, 4, "uniform", random_state=seed)
    order = np.concatenate(idx)
    cluster = DisclosureLog(split(X, idx))
    result = fk_kmeans(cluster, 4, n_random_features=20, max_iter=5, coreset_size=100,
                       n_refine=5, aggregates_only=True, random_state=seed)
    assert result.labels is None
    for round, phase, declared in cluster.declared:
        assert declared <= {NOTHING, AGGREGATES}, (round, phase, declared)
    assert cluster.ledger.phases() == ["setup", "fit"]  # nothing collected
    # the clients' own labels are the model's: what predict gives on their rows
    kept = np.concatenate([state.kmeans_labels for state in cluster.states])
    np.testing.assert_array_equal(result.model.predict(X[order]), kept)
    assert normalized_mutual_info_score(y[order], kept) > 0.9


def test_the_default_discloses_per_row_values_only_in_the_coreset_round():
    X, _ = _blobs(240)
    idx = make_partition(240, 4, "uniform", random_state=0)
    cluster = DisclosureLog(split(X, idx))
    fk_kmeans(cluster, 4, n_random_features=20, max_iter=3, coreset_size=60, random_state=0)
    per_row = {(r, p) for r, p, declared in cluster.declared if declared - {NOTHING, AGGREGATES}}
    assert per_row == {("fk: H and local coresets", "fit"), ("kmeans: labels", "collect")}


def test_estimator_reports_rounds_and_keeps_predict_with_aggregates_only():
    X, _ = _blobs(300, seed=3)
    fk = FederatedKernelKMeans(4, n_random_features=20, max_iter=4, coreset_size=60,
                               n_refine=2, n_workers=3, random_state=0).fit(X)
    assert fk.eigensolvers_ == ["gram"] * 4
    assert fk.communication_.n_rounds() == 1 + 4 + 1 + 2 + 1
    assert "rounds" in fk.communication_.summary().splitlines()[1]
    agg = FederatedKernelKMeans(4, n_random_features=20, max_iter=4, coreset_size=60,
                                n_refine=2, n_workers=3, aggregates_only=True,
                                random_state=0)
    labels = agg.fit_predict(X)
    assert not hasattr(agg, "labels_")
    np.testing.assert_array_equal(labels, agg.predict(X))
    assert normalized_mutual_info_score(fk.labels_, labels) > 0.8
