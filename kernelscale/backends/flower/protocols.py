"""What each estimator runs on a federation: its protocols' worker steps and what they disclose.

The code's own table, :data:`PROTOCOLS`: for every estimator that runs on Flower
and every option that changes its messages, the worker steps its fit (or its
transform, where that runs on the parties) sends, in the order they first run,
each with what its reply discloses for the arguments that protocol gives it
(:func:`kernelscale.runtime.steps.step_disclosure`), and the names of its summed
rounds (those that ``secure-rounds`` may send through SecAgg+).

A party's node uses it to serve only some estimators (its node config's
``estimators="..."``, :mod:`~kernelscale.backends.flower.policy`): it decides
from the step it is asked to run, looked up here, never from a claim in the
message. The documentation's disclosure table is generated from it. It is
checked against the estimators themselves by ``tests/test_flower_policy.py``,
which runs every protocol below in-process, as a Flower fit runs it, and
records its steps: a protocol that changes its steps fails that test until
this table says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class Protocol:
    """One estimator's protocol for some options.

    Attributes
    ----------
    estimator : str
        The estimator's class name.
    options : tuple of (str, object)
        The parameters that select this protocol (the others at their defaults).
    steps : tuple of (str, str)
        ``(registered step name, disclosure)`` in the order the steps first run.
    summed : tuple of str
        The rounds whose replies the master only sums (``reduce="sum"``).
    call : str
        ``"fit"``, or ``"transform"`` for the projection rounds after a fit.
    """

    estimator: str
    options: tuple
    steps: tuple
    summed: tuple = ()
    call: str = "fit"

    @property
    def label(self) -> str:
        """The options as the estimator takes them, e.g. ``method='diskpca'``."""
        text = ", ".join(f"{name}={value!r}" for name, value in self.options) or "defaults"
        return text if self.call == "fit" else f"transform, {text}"


#: Every estimator that runs on Flower, for every option that changes what it sends.
PROTOCOLS: tuple[Protocol, ...] = (
    Protocol('DistributedKernelPCA', (('method', 'diskpca'),), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.horizontal.draws:uniform_first_sample_step', 'rows'),
        ('kernelscale.horizontal.sampling:ridge_residual_step', 'aggregates'),
        ('kernelscale.horizontal.sampling:adaptive_sample_step', 'rows'),
        ('kernelscale.horizontal.draws:uniform_sample_step', 'rows'),
        ('kernelscale.horizontal.dislr:projection_step', 'aggregates'),
        ('kernelscale.horizontal.dislr:store_model_step', 'nothing'),
    ), summed=('disLR: k(Y,A_i) k(A_i,Y)',)),
    Protocol('DistributedKernelPCA', (('method', 'diskpca'), ('messages', 'sketch')), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.horizontal.draws:uniform_first_sample_step', 'rows'),
        ('kernelscale.horizontal.sampling:ridge_residual_step', 'aggregates'),
        ('kernelscale.horizontal.sampling:adaptive_sample_step', 'rows'),
        ('kernelscale.horizontal.draws:uniform_sample_step', 'rows'),
        ('kernelscale.horizontal.dislr:projection_step', 'per-row'),
        ('kernelscale.horizontal.dislr:store_model_step', 'nothing'),
    ), summed=()),
    Protocol('DistributedKernelPCA', (('method', 'diskpca'), ('sampler', 'paper')), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.horizontal.sampling:embed_step', 'aggregates'),
        ('kernelscale.horizontal.sampling:leverage_scores_step', 'aggregates'),
        ('kernelscale.horizontal.sampling:leverage_sample_step', 'rows'),
        ('kernelscale.horizontal.sampling:residual_step', 'aggregates'),
        ('kernelscale.horizontal.sampling:adaptive_sample_step', 'rows'),
        ('kernelscale.horizontal.dislr:projection_step', 'aggregates'),
        ('kernelscale.horizontal.dislr:store_model_step', 'nothing'),
    ), summed=('leverage scores: E_i^T E_i', 'disLR: k(Y,A_i) k(A_i,Y)')),
    Protocol('DistributedKernelPCA', (
        ('method', 'diskpca'),
        ('sampler', 'paper'),
        ('messages', 'sketch'),
    ), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.horizontal.sampling:embed_step', 'per-row'),
        ('kernelscale.horizontal.sampling:leverage_scores_step', 'aggregates'),
        ('kernelscale.horizontal.sampling:leverage_sample_step', 'rows'),
        ('kernelscale.horizontal.sampling:residual_step', 'aggregates'),
        ('kernelscale.horizontal.sampling:adaptive_sample_step', 'rows'),
        ('kernelscale.horizontal.dislr:projection_step', 'per-row'),
        ('kernelscale.horizontal.dislr:store_model_step', 'nothing'),
    ), summed=()),
    Protocol('DistributedKernelPCA', (('method', 'uniform_dislr'),), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.horizontal.draws:uniform_first_sample_step', 'rows'),
        ('kernelscale.horizontal.dislr:projection_step', 'aggregates'),
        ('kernelscale.horizontal.dislr:store_model_step', 'nothing'),
    ), summed=('disLR: k(Y,A_i) k(A_i,Y)',)),
    Protocol('DistributedKernelPCA', (('method', 'uniform_batch'),), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.horizontal.draws:uniform_first_sample_step', 'rows'),
        ('kernelscale.horizontal.draws:sent_copies_step', 'per-row'),
        ('kernelscale.horizontal.baselines:store_landmark_model_step', 'nothing'),
    ), summed=()),
    Protocol('DistributedKernelPCA', (('method', 'exact'),), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.horizontal.baselines:_send_all_step', 'rows'),
        ('kernelscale.horizontal.baselines:store_landmark_model_step', 'nothing'),
    ), summed=()),
    Protocol('DistributedKernelPCA', (('method', 'random_features'),), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.horizontal.baselines:random_features_step', 'aggregates'),
        ('kernelscale.horizontal.baselines:store_components_step', 'nothing'),
    ), summed=('random features: Z_i^T Z_i',)),
    Protocol('FederatedKernelKMeans', (), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.federated.fkkmeans:moment_step', 'aggregates'),
        ('kernelscale.federated.pipelined:pipelined_iteration_step', 'aggregates'),
        ('kernelscale.federated.pipelined:h_kmeans_step', 'per-row'),
        ('kernelscale.federated.kmeans:lloyd_step', 'aggregates'),
        ('kernelscale.federated.kmeans:assign_step', 'nothing'),
        ('kernelscale.federated.kmeans:collect_labels_step', 'per-row'),
    ), summed=('gamma: moments', 'dspgd: iteration', 'kmeans: Lloyd refinement')),
    Protocol('FederatedKernelKMeans', (('gamma', 0.5), ('n_refine', 0)), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.federated.pipelined:pipelined_iteration_step', 'aggregates'),
        ('kernelscale.federated.pipelined:h_kmeans_step', 'per-row'),
        ('kernelscale.federated.kmeans:assign_step', 'nothing'),
        ('kernelscale.federated.kmeans:collect_labels_step', 'per-row'),
    ), summed=('dspgd: iteration',)),
    Protocol('FederatedKernelKMeans', (('protocol', 'paper'),), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.federated.fkkmeans:moment_step', 'aggregates'),
        ('kernelscale.federated.fkkmeans:setup_step', 'nothing'),
        ('kernelscale.federated.fkkmeans:iteration_step', 'nothing'),
        ('kernelscale.federated.fkkmeans:gram_matvec_step', 'aggregates'),
        ('kernelscale.federated.fkkmeans:project_step', 'nothing'),
        ('kernelscale.federated.kmeans:local_solution_step', 'aggregates'),
        ('kernelscale.federated.kmeans:coreset_step', 'per-row'),
        ('kernelscale.federated.kmeans:lloyd_step', 'aggregates'),
        ('kernelscale.federated.kmeans:assign_step', 'nothing'),
        ('kernelscale.federated.kmeans:collect_labels_step', 'per-row'),
    ), summed=('gamma: moments', 'dspgd: lanczos step', 'kmeans: Lloyd refinement')),
    Protocol('FederatedKernelKMeans', (('protocol', 'lanczos'),), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.federated.fkkmeans:moment_step', 'aggregates'),
        ('kernelscale.federated.pipelined:pipelined_iteration_step', 'nothing'),
        ('kernelscale.federated.fkkmeans:gram_matvec_step', 'aggregates'),
        ('kernelscale.federated.pipelined:h_kmeans_step', 'per-row'),
        ('kernelscale.federated.kmeans:lloyd_step', 'aggregates'),
        ('kernelscale.federated.kmeans:assign_step', 'nothing'),
        ('kernelscale.federated.kmeans:collect_labels_step', 'per-row'),
    ), summed=(
        'gamma: moments',
        'dspgd: iteration',
        'dspgd: lanczos step',
        'kmeans: Lloyd refinement',
    )),
    Protocol('FederatedKernelKMeans', (('aggregates_only', True),), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.federated.fkkmeans:moment_step', 'aggregates'),
        ('kernelscale.federated.pipelined:pipelined_iteration_step', 'aggregates'),
        ('kernelscale.federated.pipelined:h_kmeans_step', 'aggregates'),
        ('kernelscale.federated.kmeans:lloyd_step', 'aggregates'),
        ('kernelscale.federated.kmeans:assign_step', 'nothing'),
    ), summed=('gamma: moments', 'dspgd: iteration', 'kmeans: Lloyd refinement')),
    Protocol('DistributedSpectralClustering', (), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.federated.fkkmeans:moment_step', 'aggregates'),
        ('kernelscale.horizontal.draws:uniform_first_sample_step', 'rows'),
        ('kernelscale.horizontal.sampling:ridge_residual_step', 'aggregates'),
        ('kernelscale.horizontal.sampling:adaptive_sample_step', 'rows'),
        ('kernelscale.horizontal.draws:uniform_sample_step', 'rows'),
        ('kernelscale.horizontal.dislr:projection_step', 'aggregates'),
        ('kernelscale.federated.baselines:kpca_kmeans_step', 'per-row'),
        ('kernelscale.federated.kmeans:lloyd_step', 'aggregates'),
        ('kernelscale.federated.kmeans:assign_step', 'nothing'),
        ('kernelscale.federated.kmeans:collect_labels_step', 'per-row'),
    ), summed=('gamma: moments', 'disLR: k(Y,A_i) k(A_i,Y)', 'kmeans: Lloyd refinement')),
    Protocol('DistributedSpectralClustering', (
        ('gamma', 0.5),
        ('messages', 'sketch'),
        ('n_refine', 0),
    ), (
        ('kernelscale.runtime.validation:describe_partition', 'aggregates'),
        ('kernelscale.horizontal.draws:uniform_first_sample_step', 'rows'),
        ('kernelscale.horizontal.sampling:ridge_residual_step', 'aggregates'),
        ('kernelscale.horizontal.sampling:adaptive_sample_step', 'rows'),
        ('kernelscale.horizontal.draws:uniform_sample_step', 'rows'),
        ('kernelscale.horizontal.dislr:projection_step', 'per-row'),
        ('kernelscale.federated.baselines:kpca_kmeans_step', 'per-row'),
        ('kernelscale.federated.kmeans:assign_step', 'nothing'),
        ('kernelscale.federated.kmeans:collect_labels_step', 'per-row'),
    ), summed=()),
    Protocol('VerticalKernelPCA', (), (
        ('kernelscale.vertical.oneshot:describe_block', 'aggregates'),
        ('kernelscale.vertical.oneshot:local_eigenpairs', 'per-row'),
    ), summed=()),
    Protocol('VerticalKernelPCA', (('kernel', 'rbf'),), (
        ('kernelscale.vertical.oneshot:describe_block', 'aggregates'),
        ('kernelscale.vertical.projection:partial_kernel_statistic', 'per-row'),
    ), summed=('partial distances',), call='transform'),
    Protocol('VerticalKernelPCA', (('kernel', 'linear'),), (
        ('kernelscale.vertical.oneshot:describe_block', 'aggregates'),
        ('kernelscale.vertical.projection:partial_linear_projection', 'per-row'),
    ), summed=('partial projections',), call='transform'),
)


def protocol_estimators() -> tuple[str, ...]:
    """The estimators of :data:`PROTOCOLS`, in table order."""
    return tuple(dict.fromkeys(p.estimator for p in PROTOCOLS))


@cache
def _users() -> dict[str, frozenset]:
    users: dict[str, set] = {}
    for protocol in PROTOCOLS:
        for name, _ in protocol.steps:
            users.setdefault(name, set()).add(protocol.estimator)
    return {name: frozenset(found) for name, found in users.items()}


def estimators_running(step: str) -> frozenset:
    """The estimators whose protocols send the step registered as ``step``."""
    return _users().get(step, frozenset())


def summed_rounds(estimator: str) -> tuple[str, ...]:
    """Every summed round of ``estimator``'s protocols (what ``secure-rounds`` may name)."""
    rounds = [r for p in PROTOCOLS if p.estimator == estimator for r in p.summed]
    return tuple(dict.fromkeys(rounds))


__all__ = ["PROTOCOLS", "Protocol", "estimators_running",
           "protocol_estimators", "summed_rounds"]
