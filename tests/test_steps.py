"""The registry of worker steps: every protocol runs only registered kernelscale steps."""

import numpy as np
import pytest

from kernelscale import make_kernel
from kernelscale.backends.local import LocalCluster
from kernelscale.datasets import load_digits_standardized
from kernelscale.federated import distributed_spectral_clustering, fk_kmeans, rfk_kmeans
from kernelscale.federated.dspgd_plain import dspgd_without_cem
from kernelscale.horizontal import (
    diskpca,
    distributed_error,
    exact_kpca,
    random_features_pca,
    uniform_batch,
    uniform_dislr,
)
from kernelscale.partition import make_partition, split
from kernelscale.runtime import WorkerError
from kernelscale.runtime.steps import (
    _DISCLOSES,
    DISCLOSURES,
    PER_ROW,
    ROWS,
    registered_steps,
    resolve_step,
    step_disclosure,
    step_name,
    worker_step,
)
from kernelscale.streaming import streaming_kpca_distributed
from kernelscale.vertical import dpca, one_shot_kpca, vertical_transform


class RegisteredStepsOnly(LocalCluster):
    """Runs a step only through its registered name, as a remote worker would."""

    def _run(self, step, per_worker_args, round, deliver):
        resolved = resolve_step(step_name(step))
        assert resolved is step
        return super()._run(resolved, per_worker_args, round, deliver)


@pytest.fixture(scope="module")
def parts():
    X, _ = load_digits_standardized()
    X = X[:300]
    return split(X, make_partition(X.shape[0], 4, "power_law", random_state=0))


RBF = make_kernel("rbf", gamma=0.02)

HORIZONTAL = [
    lambda c: diskpca(c, RBF, 3, n_landmarks=30, center=True, random_state=0),
    lambda c: diskpca(c, RBF, 3, n_landmarks=30, messages="sketch", random_state=0),
    lambda c: uniform_dislr(c, RBF, 3, n_landmarks=30, random_state=0),
    lambda c: uniform_batch(c, RBF, 3, n_landmarks=30, random_state=0),
    lambda c: exact_kpca(c, RBF, 3),
    lambda c: random_features_pca(c, RBF, 3, n_random_features=50, random_state=0),
    lambda c: fk_kmeans(c, 4, n_random_features=20, max_iter=3, coreset_size=50,
                        n_refine=2, dropout=0.3, random_state=0),
    lambda c: fk_kmeans(c, 4, n_random_features=20, max_iter=2, coreset_size=50,
                        n_refine=1, random_state=0, protocol="paper"),
    lambda c: fk_kmeans(c, 4, n_random_features=20, max_iter=2, n_refine=1,
                        aggregates_only=True, random_state=0, protocol="block"),
    lambda c: fk_kmeans(c, 4, n_random_features=20, max_iter=2, n_refine=1,
                        aggregates_only=True, random_state=0, protocol="paper"),
    lambda c: dspgd_without_cem(c, 4, 4, gamma=0.02, n_random_features=20, max_iter=2,
                                random_state=0),
    lambda c: distributed_spectral_clustering(c, 4, kernel=RBF, n_landmarks=30,
                                              coreset_size=50, random_state=0),
    lambda c: rfk_kmeans(c, 4, n_random_features=20, coreset_size=50, random_state=0),
    lambda c: streaming_kpca_distributed(c, gamma=0.02, n_random_features=50, sketch_size=6,
                                         random_state=0),
]


@pytest.mark.parametrize("fit", range(len(HORIZONTAL)))
def test_horizontal_and_federated_protocols_use_registered_steps(parts, fit):
    cluster = RegisteredStepsOnly(parts)
    model = HORIZONTAL[fit](cluster)
    if hasattr(model, "coef") or hasattr(model, "components"):
        distributed_error(cluster, model, 1.0)


def test_vertical_protocols_use_registered_steps(parts):
    X = np.vstack(parts)
    blocks = [X[:200, :30], X[:200, 30:]]
    model = one_shot_kpca(RegisteredStepsOnly(blocks), RBF, 3, n_local_components=8)
    vertical_transform(RegisteredStepsOnly([X[:, :30], X[:, 30:]]), model)
    dpca(RegisteredStepsOnly([X[:100, :30], X[:100, 30:]]), 2, n_inner=2, n_outer=2,
         random_state=0)


def test_registry_refuses_what_is_not_a_kernelscale_step():
    with pytest.raises(ValueError, match="only kernelscale's own steps"):
        resolve_step("os:system")
    with pytest.raises(ValueError, match="not a registered worker step"):
        resolve_step("kernelscale.linalg:whitening")  # a kernelscale function, not a step
    with pytest.raises(ValueError, match="no module"):
        resolve_step("kernelscale.nowhere:step")
    with pytest.raises(ValueError, match="not a registered worker step"):
        step_name(lambda state: 0)
    with pytest.raises(ValueError, match="Only kernelscale's own functions"):
        worker_step(pytest.approx, discloses="nothing")
    with pytest.raises(ValueError, match="discloses must be one of"):
        worker_step(discloses="a little")


def step_modules() -> dict[str, int]:
    """Every kernelscale module whose source defines worker steps, and how many."""
    from pathlib import Path

    import kernelscale

    root = Path(kernelscale.__file__).parent
    found = {}
    for path in root.rglob("*.py"):
        count = path.read_text().count("\n@worker_step(")
        if count:
            module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
            found[module] = count
    return found


def test_every_registered_step_declares_what_it_discloses():
    import importlib

    modules = step_modules()
    for module in modules:
        importlib.import_module(module)
    steps = registered_steps()
    assert len(steps) == sum(modules.values()) >= 48
    for name in steps:
        declared = _DISCLOSES[name]
        assert callable(declared) or declared in DISCLOSURES, name
    # the raw-row samplers say so; a Gram reply does not
    assert step_disclosure("kernelscale.horizontal.draws:uniform_sample_step") == ROWS
    assert step_disclosure("kernelscale.horizontal.baselines:_send_all_step") == ROWS
    assert step_disclosure("kernelscale.federated.fkkmeans:gram_matvec_step") == "aggregates"
    # a coreset of the raw rows discloses rows; of an embedding, per-row values
    coreset = "kernelscale.federated.kmeans:coreset_step"
    assert step_disclosure(coreset, (5, 1.0, 10, None, "raw_points")) == ROWS
    assert step_disclosure(coreset, (5, 1.0, 10, "embedding", "sketch")) == PER_ROW


def test_a_reply_of_raw_rows_from_a_step_that_does_not_declare_them_fails_the_round(
        parts, monkeypatch):
    from kernelscale.horizontal.draws import uniform_sample_step, uniform_setup_step

    name = step_name(uniform_sample_step)
    cluster = LocalCluster(parts)
    cluster.scatter_map(uniform_setup_step, [(i,) for i in range(4)], round="setup")
    monkeypatch.setitem(_DISCLOSES, name, "aggregates")  # a wrong declaration
    with pytest.raises(WorkerError, match="does not declare discloses='rows'"):
        cluster.broadcast_map(uniform_sample_step, 2, round="sample")
    monkeypatch.setitem(_DISCLOSES, name, "rows")
    replies = cluster.broadcast_map(uniform_sample_step, 2, round="sample")
    assert all(r["raw_points"].shape == (2, 64) for r in replies)


def test_a_worker_process_loads_its_protocol_modules_without_scikit_learn():
    """A Flower ClientApp is a new process per message: importing the steps' modules and
    the data loaders must stay light (scikit-learn alone takes about a second)."""
    import subprocess
    import sys

    modules = ["kernelscale", "kernelscale.runtime", "kernelscale.datasets",
               "kernelscale.horizontal.sampling", "kernelscale.horizontal.draws",
               "kernelscale.horizontal.dislr",
               "kernelscale.horizontal.evaluate", "kernelscale.federated.fkkmeans",
               "kernelscale.federated.kmeans", "kernelscale.vertical.oneshot",
               "kernelscale.vertical.projection", "kernelscale.streaming.distributed"]
    code = (f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'sklearn'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]", out
