"""disKPCA's default 'ridge' sampler: exact KPCA over seeds, its exact ledger, determinism,
the `sampler` parameter; the paper's sampler (Algorithm 2 of 001) stays available."""

import numpy as np
import pytest
import scipy.sparse as sp

from kernelscale import DistributedKernelPCA
from kernelscale.backends.local import LocalCluster
from kernelscale.datasets import load_digits_standardized
from kernelscale.horizontal import diskpca, sampling, uniform_dislr
from kernelscale.horizontal.pilot import MIN_PILOT
from kernelscale.horizontal.samplers import pilot_ridge, ridge_schedule
from kernelscale.horizontal.sampling import (
    defensive_share,
    defensive_split,
    residual_step,
    ridge_residual_step,
)
from kernelscale.kernels import make_kernel, median_heuristic
from kernelscale.linalg import (
    projected_sq_norms,
    ridge_factor,
    ridge_whitening,
    unique_rows,
    whitening,
)
from kernelscale.metrics.lowrank import exact_kpca_reference, excess_energy_ratio, lowrank_error
from kernelscale.partition import make_partition, split
from kernelscale.runtime import DOWN, UP, Tagged, WorkerState

SEEDS = [0, 1, 2, 3, 4]
RBF = make_kernel("rbf", gamma=0.2)


@pytest.fixture(scope="module")
def digits():
    return np.asarray(load_digits_standardized()[0])[:300]


def _fit(X, kernel, seed=0, n_workers=4, method="power_law", fit=diskpca, **kwargs):
    parts = split(X, make_partition(X.shape[0], n_workers, method, random_state=seed))
    cluster = LocalCluster(parts)
    params = {"n_components": 5, "n_landmarks": 60, "random_state": seed, **kwargs}
    return fit(cluster, kernel, **params), cluster, parts


def _excess(model, X, ref):
    return excess_energy_ratio(lowrank_error(model, X)["error"], ref["opt"], ref["trace"])


@pytest.mark.parametrize("center", [False, True])
def test_ridge_sampler_close_to_exact_kpca_over_seeds(digits, center):
    X = digits
    kernel = make_kernel("rbf", sigma=median_heuristic(X, scale=1.0, random_state=0))
    ref = exact_kpca_reference(X, kernel, 5, center=center)
    for seed in SEEDS:
        model, _, _ = _fit(X, kernel, seed=seed, center=center)
        assert model.info["sampler"] == "ridge"
        err = lowrank_error(model, X)["error"]
        assert err >= ref["opt"] * (1 - 1e-9)  # nothing beats the optimum
        # Stated bounds (observed: err/opt <= 1.034, excess <= 0.0092 / 0.042 centred).
        assert err / ref["opt"] < 1.05
        assert _excess(model, X, ref) < (0.06 if center else 0.015)


@pytest.mark.parametrize("kernel", [make_kernel("poly", degree=4, gamma=1 / 64, coef0=1.0),
                                    make_kernel("arccos", order=2)], ids=["poly", "arccos"])
def test_ridge_sampler_keeps_the_lead_where_few_points_carry_the_energy(digits, kernel):
    """Standardised digits: a few points carry most of the energy; uniform sampling misses them."""
    X = digits
    ref = exact_kpca_reference(X, kernel, 5)
    for seed in SEEDS[:3]:
        ridge, _, _ = _fit(X, kernel, seed=seed, n_landmarks=30)
        uniform, _, _ = _fit(X, kernel, seed=seed, n_landmarks=30, fit=uniform_dislr)
        # Observed: ridge <= 0.024, uniform >= 0.60.
        assert _excess(ridge, X, ref) < 0.05
        assert _excess(ridge, X, ref) < 0.1 * _excess(uniform, X, ref)


def test_ridge_schedule_depends_on_the_kernel_kind_k_and_budget_only():
    assert ridge_schedule(RBF, 10, 400) == [100, 200, 400]
    assert ridge_schedule(RBF, 10, 50) == [13, 26, 50]
    assert ridge_schedule(RBF, 10, 30) == [10, 20, 30]
    assert ridge_schedule(RBF, 10, 10) == [10]  # the pilot is the whole budget: no ridge round
    assert ridge_schedule(RBF, 5, 60, n_pilot=30) == [30, 60]
    assert ridge_schedule(RBF, 5, 60, n_pilot=1) == [1, 2, 4, 8, 16, 32, 60]
    # k(a, a) grows with the norm: a pilot of k points, then doubling residual rounds
    for kernel in (make_kernel("poly", degree=4, gamma=0.1), make_kernel("arccos", order=2),
                   make_kernel("linear")):
        assert ridge_schedule(kernel, 10, 400) == [10, 20, 40, 80, 160, 320, 400]
        assert ridge_schedule(kernel, 10, 400, n_pilot=100) == [100, 200, 400]
    assert ridge_schedule(make_kernel("laplacian", gamma=0.1), 10, 400)[0] == 100


def test_a_pilot_of_k_points_samples_by_the_plain_residual(digits):
    """With |P| = k the pilot has no eigenvalue beyond k: the ridge is 0 in every round."""
    kernel = make_kernel("poly", degree=4, gamma=1 / 64, coef0=1.0)
    model, cluster, _ = _fit(digits, kernel, seed=0, n_landmarks=40)
    assert model.info["ridge"] == 0.0
    assert model.info["n_leverage"] == 5
    rounds = [r for r in cluster.ledger.words_by_round("fit") if r.endswith(": residuals")]
    assert len(rounds) == len(ridge_schedule(kernel, 5, 40)) - 1 == 3


def test_ridge_scale_zero_draws_the_rbf_rounds_by_the_plain_residual(digits):
    """``ridge_scale=0``: the |Y|/4 pilot, then rounds with ridge 0 and no uniform share;
    the same words but the share's count per worker and round."""
    kernel = make_kernel("rbf", gamma=1 / (2 * median_heuristic(digits, 1.0, random_state=0)))
    model, cluster, _ = _fit(digits, kernel, seed=1, ridge_scale=0.0)
    plain, plain_cluster, _ = _fit(digits, kernel, seed=1)
    assert model.info["ridge"] == 0.0 < plain.info["ridge"]
    assert model.info["n_leverage"] == plain.info["n_leverage"] == 15
    np.testing.assert_array_equal(model.landmarks[:15], plain.landmarks[:15])  # one pilot
    rounds, plain_rounds = (c.ledger.words_by_round("fit") for c in (cluster, plain_cluster))
    shares = {name for name in plain_rounds if name.endswith(": uniform share")}
    assert shares and not shares & set(rounds)
    # every point the share drew uniformly, the plain residual draws in its round
    for name in shares:
        drawn = name.removesuffix(": uniform share")
        assert rounds[drawn][UP] == plain_rounds[drawn][UP] + plain_rounds[name][UP]
    assert {n: w for n, w in rounds.items() if n.endswith(": residuals")} == {
        n: w for n, w in plain_rounds.items() if n.endswith(": residuals")}
    assert cluster.ledger.total_words("fit") == plain_cluster.ledger.total_words("fit") - sum(
        plain_rounds[name][DOWN] for name in shares)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_ridge_scale_must_be_a_finite_number_at_least_zero(digits, bad):
    with pytest.raises(ValueError, match="ridge_scale must be a finite number >= 0"):
        _fit(digits, make_kernel("rbf", gamma=0.01), ridge_scale=bad)


def _expected_ridge_rounds(n_y, targets, s, d, k, center):
    """Words per round of the ridge sampler and disLR, from the protocol (dense rbf data)."""
    # the pilot: a seed and a count to every worker, in one round
    rounds = {"pilot sampling": {DOWN: 2 * s, UP: targets[0] * d}}
    # the pilot is too small to read: P goes down first
    floor = sampling.RIDGE_FLOOR and targets[0] < MIN_PILOT * k
    if floor:  # with the kernel (5 words), the chunk size and ridge 0; a residual sum up
        rounds["ridge sampling: pilot residuals"] = {DOWN: s * (targets[0] * d + 7), UP: 2 * s}
    for j in range(1, len(targets)):
        new = targets[j - 1] - (targets[j - 2] if j > 1 else 0)
        if j == 1 and floor:
            new = 0
        # kernel (5), chunk size and ridge; then the ridge
        config = 5 + 1 + 1 if j == 1 and not floor else 1
        rounds[f"ridge sampling {j}: residuals"] = {DOWN: s * (new * d + config), UP: 2 * s}
        by_residual, by_uniform = defensive_split(targets[j] - targets[j - 1],
                                                  defensive_share(RBF, targets[0], k))
        rounds[f"ridge sampling {j}"] = {DOWN: s, UP: by_residual * d}
        if by_uniform:  # the defensive share: one count per worker, the points up
            rounds[f"ridge sampling {j}: uniform share"] = {DOWN: s, UP: by_uniform * d}
    last = targets[-1] - targets[-2]
    gram_up = n_y * (n_y + 1) // 2 + (n_y if center else 0) + 1  # + 1: the trace
    rounds["disLR: k(Y,A_i) k(A_i,Y)"] = {DOWN: s * (last * d + 9 + 1), UP: s * gram_up}
    rounds["disLR: components"] = {DOWN: s * n_y * (k + (1 if center else 0)), UP: 0}
    return rounds


@pytest.mark.parametrize("center", [False, True])
@pytest.mark.parametrize("n_landmarks", [60, 13])
@pytest.mark.parametrize("floor", [False, True])
def test_ridge_ledger_counts_every_word(digits, center, n_landmarks, floor, monkeypatch):
    monkeypatch.setattr(sampling, "RIDGE_FLOOR", floor)
    X, s, k = digits, 4, 5
    model, cluster, _ = _fit(X, RBF, seed=1, center=center, n_landmarks=n_landmarks)
    targets = ridge_schedule(RBF, k, n_landmarks)
    expected = _expected_ridge_rounds(n_landmarks, targets, s, X.shape[1], k, center)
    assert cluster.ledger.words_by_round("fit") == expected
    # Every landmark travels up once and down once to each worker, as in uniform + disLR.
    assert cluster.ledger.upload_words("fit", kind="raw_points") == n_landmarks * X.shape[1]
    assert cluster.ledger.download_words("fit", kind="raw_points") == (
        s * n_landmarks * X.shape[1])
    # Against uniform + disLR at the same |Y|: per worker, the kernel and chunk size (6
    # words) once, then 4 words per ridge round (the ridge, the two-number reply, the count),
    # and one count more for a round with a defensive share.
    _, uniform, _ = _fit(X, RBF, seed=1, center=center, n_landmarks=n_landmarks,
                         fit=uniform_dislr)
    share = defensive_share(RBF, targets[0], k)
    shares = sum(defensive_split(b - a, share)[1] > 0 for a, b in zip(targets[:-1], targets[1:],
                                                                  strict=True))
    # the pilot residuals' ridge and reply
    floor = 3 if sampling.RIDGE_FLOOR and targets[0] < MIN_PILOT * k else 0
    extra = s * (6 + 4 * (len(targets) - 1) + shares + floor)
    assert cluster.ledger.total_words("fit") == uniform.ledger.total_words("fit") + extra
    assert model.info["n_leverage"] == targets[0]
    assert model.info["n_leverage"] + model.info["n_adaptive"] == n_landmarks


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_small_pilot_ridge_counts_the_energy_outside_its_span(digits, seed, monkeypatch):
    """A pilot under MIN_PILOT k points: mu = the pilot's tail / k + m E / (n k), with E the
    rows' total squared distance to span(phi(P)), computed here from all the data."""
    monkeypatch.setattr(sampling, "RIDGE_FLOOR", True)
    X, k, m = digits, 5, 5  # |Y| = 13: a pilot of max(k, ceil(13 / 4)) = 5 points
    model, cluster, _ = _fit(X, RBF, seed=seed, n_landmarks=13)
    assert "ridge sampling: pilot residuals" in cluster.ledger.words_by_round("fit")
    P = model.landmarks[:m]
    K_xp, K_pp = RBF(X, P), RBF(P, P)
    outside = float(np.sum(1.0 - np.einsum("ij,ij->i", K_xp @ np.linalg.pinv(K_pp), K_xp)))
    expected = pilot_ridge(RBF, P, k, center=False) + m * outside / (X.shape[0] * k)
    assert pilot_ridge(RBF, P, k, center=False) == 0.0  # m = k: the pilot reads no tail
    np.testing.assert_allclose(model.info["ridge"], expected, rtol=1e-8)
    assert model.info["ridge"] > 0.1  # a narrow kernel: most energy is outside 5 points


def test_no_defensive_share_with_polynomial_kernels_or_ridge_zero():
    poly, k = make_kernel("poly", degree=2, gamma=1.0, coef0=1.0), 5
    assert defensive_share(poly, 3, k) == defensive_share(poly, 50, k) == 0.0
    assert defensive_share(RBF, 5, k, ridge_scale=0.0) == 0.0
    assert defensive_share(RBF, 5, k) == sampling.DEFENSIVE_SHARE  # 5 < MIN_PILOT k
    assert defensive_share(RBF, MIN_PILOT * k, k) == sampling.READ_PILOT_SHARE
    assert defensive_share(RBF, sampling.TRUSTED_PILOT * k - 1, k) == sampling.READ_PILOT_SHARE
    assert defensive_share(RBF, sampling.TRUSTED_PILOT * k, k) == 0.0


def test_ridge_floor_off_keeps_the_pilots_ridge(digits, monkeypatch):
    """RIDGE_FLOOR = False (the default): the pilot's own tail, 0 from k points, and no
    extra round."""
    monkeypatch.setattr(sampling, "RIDGE_FLOOR", False)
    model, cluster, _ = _fit(digits, RBF, seed=0, n_landmarks=13)
    assert model.info["ridge"] == 0.0
    assert "ridge sampling: pilot residuals" not in cluster.ledger.words_by_round("fit")


def test_same_seed_same_model_and_ledger(digits):
    a, ca, _ = _fit(digits, RBF, seed=3)
    b, cb, _ = _fit(digits, RBF, seed=3)
    np.testing.assert_array_equal(a.landmarks, b.landmarks)
    np.testing.assert_array_equal(a.coef, b.coef)
    assert ca.ledger == cb.ledger
    c, _, _ = _fit(digits, RBF, seed=4)
    assert not np.array_equal(a.landmarks, c.landmarks)


def test_sampler_parameter_validation(digits):
    parts = split(digits, make_partition(300, 2, "uniform", random_state=0))
    with pytest.raises(ValueError, match="sampler must be one of"):
        diskpca(LocalCluster(parts), RBF, n_components=2, n_landmarks=10, sampler="leverage")
    with pytest.raises(ValueError, match=r"n_leverage must be an integer in \[1, n_landmarks\]"):
        diskpca(LocalCluster(parts), RBF, n_components=2, n_landmarks=10, n_leverage=0)
    with pytest.raises(ValueError, match=r"n_leverage must be an integer in \[0, n_landmarks\]"):
        diskpca(LocalCluster(parts), RBF, n_components=2, n_landmarks=10, n_leverage=11,
                sampler="paper")
    model = diskpca(LocalCluster(parts), RBF, n_components=2, n_landmarks=10, n_leverage=0,
                    sampler="paper", embedding_dim=10, n_random_features=50, random_state=0)
    assert model.info["n_leverage"] == 0 and model.landmarks.shape[0] == 10
    with pytest.raises(ValueError, match=r"'sampler' parameter of DistributedKernelPCA must be"):
        DistributedKernelPCA(3, sampler="uniform").fit(digits)


def test_estimator_exposes_the_sampler(digits):
    default = DistributedKernelPCA(3, n_landmarks=30, gamma=0.02, method="diskpca",
                                   random_state=0).fit(digits)
    assert default.get_params()["sampler"] == "ridge"
    rounds = default.communication_.words_by_round("fit")
    assert "ridge sampling 1: residuals" in rounds
    assert not any(r.startswith("leverage") for r in rounds)
    paper = DistributedKernelPCA(3, n_landmarks=30, gamma=0.02, sampler="paper",
                                 embedding_dim=10, n_random_features=50,
                                 random_state=0).fit(digits)
    assert paper.model_.info["sampler"] == "paper"
    assert "leverage scores: whitening" in paper.communication_.words_by_round("fit")
    # The other methods ignore it.
    uniform = DistributedKernelPCA(3, n_landmarks=30, gamma=0.02, method="uniform_dislr",
                                   sampler="paper", random_state=0).fit(digits)
    assert not any(r.startswith("leverage")
                   for r in uniform.communication_.words_by_round("fit"))


def test_pilot_ridge_is_the_pilots_tail_over_k():
    """mu = (1/k) sum_{i>k} lambda_i(K_PP); centred on P's mean when the fit is centred."""
    rng = np.random.default_rng(0)
    P = rng.standard_normal((12, 6))
    w = np.sort(np.linalg.eigvalsh(P @ P.T.copy()))[::-1]
    assert pilot_ridge(make_kernel("linear"), P, 2, center=False) == pytest.approx(
        w[2:].sum() / 2, rel=1e-10)
    Pc = P - P.mean(axis=0)
    wc = np.sort(np.linalg.eigvalsh(Pc @ Pc.T.copy()))[::-1]
    assert pilot_ridge(make_kernel("linear"), P, 2, center=True) == pytest.approx(
        wc[2:].sum() / 2, rel=1e-10)
    assert pilot_ridge(make_kernel("linear"), P[:2], 2, center=False) == 0.0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ridge_whitening(seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((8, 3))
    S = A @ A.T.copy()  # rank 3: singular
    F = ridge_whitening(S, 0.5)
    np.testing.assert_allclose(F @ F.T, np.linalg.inv(S + 0.5 * np.eye(8)), atol=1e-10)
    np.testing.assert_array_equal(ridge_whitening(S, 0.0), whitening(S))
    with pytest.raises(ValueError, match="ridge must be finite and >= 0"):
        ridge_whitening(S, -1.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_ridge_factor_gives_ridge_whitening_residuals(seed, dtype):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((8, 3))
    S = A @ A.T.copy()  # rank 3: singular
    G = ridge_factor(S, 0.5)
    np.testing.assert_array_equal(np.triu(G, 1), 0.0)
    np.testing.assert_allclose(G.T @ G, np.linalg.inv(S + 0.5 * np.eye(8)), atol=1e-10)
    block = rng.standard_normal((20, 8))
    expected = projected_sq_norms(block, ridge_whitening(S, 0.5))
    got = projected_sq_norms(block.astype(dtype), G.T.astype(dtype))
    assert got.dtype == dtype
    np.testing.assert_allclose(got, expected, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert ridge_factor(S, 0.0) is None


def test_ridge_residual_interpolates_adaptive_and_diagonal_sampling():
    """mu = 0: the paper's residual to span(phi(P)); mu -> infinity: k(a, a) (uniform for rbf)."""
    X = np.random.default_rng(1).standard_normal((40, 3))
    P = X[:5]

    def residuals(step, message, config=True):
        state = WorkerState(X, 0)
        state.sampled = np.zeros(40, dtype=bool)
        if config:
            state.config = {"kernel": RBF.to_dict(), "chunk_size": 7}
        step(state, message)
        return state.residual

    paper = residuals(residual_step, P)
    settings = {"kernel": RBF.to_dict(), "chunk_size": 7}
    np.testing.assert_allclose(
        residuals(ridge_residual_step, Tagged(raw_points=P, model={**settings, "ridge": 0.0}),
                  config=False), paper, atol=1e-12)
    wide = residuals(ridge_residual_step, Tagged(raw_points=P, model={**settings, "ridge": 1e9}),
                     config=False)
    np.testing.assert_allclose(wide, RBF.diag(X), rtol=1e-8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ridge_sampler_fills_the_budget_when_residuals_run_out(seed):
    """Linear kernel on rank-3 data: the pilot's tail is 0 (mu = 0) and every residual is 0."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((500, 3)) @ rng.standard_normal((3, 6))
    model, cluster, _ = _fit(X, make_kernel("linear"), seed=seed, n_components=3,
                             n_landmarks=50)
    assert model.landmarks.shape[0] == 50 == unique_rows(model.landmarks).size
    assert model.info["ridge"] == pytest.approx(0.0, abs=1e-9)
    assert model.info["n_uniform_fill"] > 0
    assert "ridge sampling 1: uniform fill" in cluster.ledger.words_by_round("fit")
    ref = exact_kpca_reference(X, make_kernel("linear"), 3)
    assert lowrank_error(model, X)["error"] <= 1e-8 * ref["trace"]


def test_ridge_sampler_on_duplicates_and_csr():
    base = np.random.default_rng(7).standard_normal((100, 5))
    X = np.vstack([base, base, base])
    for seed in (0, 1, 2):
        model, _, _ = _fit(X, RBF, seed=seed, n_workers=3, method="uniform", n_components=4)
        assert model.landmarks.shape[0] == 60 == unique_rows(model.landmarks).size
    S = sp.random(200, 30, density=0.2, format="csr", random_state=0)
    model, cluster, _ = _fit(S, make_kernel("rbf", gamma=0.5), n_workers=3, n_components=3,
                             n_landmarks=30)
    assert sp.issparse(model.landmarks) and model.landmarks.shape == (30, 30)
    assert cluster.ledger.upload_words("fit", kind="raw_points") == 2 * model.landmarks.nnz
    np.testing.assert_allclose(model.transform(S), model.transform(S.toarray()), atol=1e-10)


def test_cli_fit_takes_the_sampler(digits, tmp_path, monkeypatch):
    from kernelscale import cli

    seen = []
    original = cli._make_estimator

    def spy(args, X, *rest, **options):
        seen.append(args.sampler)
        return original(args, X, *rest, **options)

    monkeypatch.setattr(cli, "_make_estimator", spy)
    data = tmp_path / "X.npy"
    np.save(data, digits)
    for flag in ([], ["--sampler", "paper"]):
        assert cli.main(["fit", "--data", str(data), "--out", str(tmp_path / "m.npz"),
                         "--quiet", "--landmarks", "30", "--n-components", "3", *flag]) == 0
    assert seen == ["ridge", "paper"]


@pytest.mark.parametrize("share", [0.0, 0.5])
@pytest.mark.parametrize(("n_landmarks", "constant"), [(60, "READ_PILOT_SHARE"),
                                                       (13, "DEFENSIVE_SHARE")])
def test_defensive_share_draws_its_part_uniformly_and_the_forecast_follows(
        digits, share, n_landmarks, constant, monkeypatch):
    """Each ridge round draws floor(share x its new points) uniformly, in a round of its own
    that the word forecast counts; share 0 is the plain ridge sampler (no such round). A
    pilot of 15 points is read (2 k = 10), one of 5 is not."""
    from kernelscale.horizontal.forecast import forecast_words

    monkeypatch.setattr(sampling, constant, share)
    X, s, k = digits, 4, 5
    model, cluster, parts = _fit(X, RBF, seed=2, n_landmarks=n_landmarks)
    targets = ridge_schedule(RBF, k, n_landmarks)
    rounds = cluster.ledger.words_by_round("fit")
    for j in range(1, len(targets)):
        uniform = rounds.get(f"ridge sampling {j}: uniform share")
        if share == 0:
            assert uniform is None
        else:
            n_uniform = int(share * (targets[j] - targets[j - 1]))
            assert uniform == {DOWN: s, UP: n_uniform * X.shape[1]}
    assert model.landmarks.shape[0] == n_landmarks
    forecast = forecast_words("diskpca", [p.shape[0] for p in parts], X.shape[1], k,
                              n_landmarks, kernel=RBF)
    assert forecast.words_by_round() == rounds
