"""What a party's node answers: its disclosure policy, from its own node config.

Every worker step declares what its reply discloses about the rows of the
partition (:mod:`kernelscale.runtime.steps`: ``"nothing"``, ``"aggregates"``,
``"per-row"``, ``"rows"``). A party's SuperNode checks that declaration, for the
step's actual arguments, against the policy in its own node config **before it
runs the step**, and checks the reply again before it is sent. The node config
is set by the party when it starts its node (``--node-config``); no run can
change it. The keys:

``allow-rows`` (bool, default ``false``)
    Answer steps whose reply holds raw feature rows of the partition (disKPCA's
    sampled landmarks, the exact method's rows, a coreset of the raw data).
    Without it those steps are refused.
``disclose`` (``"per-row"`` or ``"aggregates"``, default ``"per-row"``)
    The most a reply may disclose short of rows: ``"aggregates"`` refuses the
    per-row values too (labels, embeddings, local eigenvectors, partial
    distances) and answers only sums and statistics over rows.
``estimators`` (comma-separated names, default: every estimator)
    Answer only the steps of these estimators' protocols
    (:data:`~kernelscale.backends.flower.protocols.PROTOCOLS`, the code's table
    of what each estimator runs), e.g. ``"FederatedKernelKMeans,VerticalKernelPCA"``.
    The node decides from the step it is asked to run, never from what the
    message says it is for.

A refusal fails the run at once: the node replies one error naming itself
(its node id and partition id), the step, the round, what the reply would have
disclosed and the key that would allow it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kernelscale.runtime.steps import AGGREGATES, PER_ROW, ROWS, discloses_more

#: The node-config keys of a party's policy.
POLICY_KEYS = ("allow-rows", "disclose", "estimators")
#: What ``disclose`` may say (rows only with ``allow-rows=true``).
DISCLOSE_LEVELS = (AGGREGATES, PER_ROW)

_WHAT = {ROWS: "raw feature rows of the partition",
         PER_ROW: "one value per row of the partition (labels, embeddings, eigenvectors, "
                  "partial distances)",
         AGGREGATES: "sums or statistics over the partition's rows"}


class PolicyRefusal(PermissionError):
    """A party's node refused a step (or a reply) under its own policy."""


@dataclass(frozen=True)
class NodePolicy:
    """A party's policy: the most a reply may disclose, and the estimators it serves.

    Attributes
    ----------
    most : str
        ``"aggregates"``, ``"per-row"`` or ``"rows"``.
    estimators : frozenset of str or None
        The estimators whose protocols' steps are answered; None: every one.
    """

    most: str = PER_ROW
    estimators: frozenset | None = None

    @classmethod
    def from_node_config(cls, config: Mapping) -> NodePolicy:
        """The policy of a node config; ``ValueError`` naming the key for a wrong value."""
        allow_rows = config.get("allow-rows", False)
        if not isinstance(allow_rows, bool):
            raise ValueError(f"node config allow-rows={allow_rows!r}: give true or false, "
                             "unquoted (--node-config 'allow-rows=true').")
        disclose = config.get("disclose", PER_ROW)
        if disclose not in DISCLOSE_LEVELS:
            raise ValueError(f"node config disclose={disclose!r}: give \"per-row\" or "
                             "\"aggregates\" (raw rows are allowed with allow-rows=true only).")
        if allow_rows and "disclose" in config:
            raise ValueError(f"node config allow-rows=true and disclose={disclose!r} "
                             "contradict each other: keep one of them.")
        return cls(ROWS if allow_rows else disclose, _estimators(config.get("estimators")))

    def describe(self) -> str:
        """The policy in node-config words, e.g. ``disclose="per-row" (no rows)``."""
        most = ("allow-rows=true" if self.most == ROWS
                else f'disclose="{self.most}" (no raw rows)')
        served = ("every estimator" if self.estimators is None
                  else f'estimators="{",".join(sorted(self.estimators))}"')
        return f"{most}, {served}"

    def check_step(self, name: str, disclosure: str) -> None:
        """Raise :class:`PolicyRefusal` unless the step ``name`` that discloses
        ``disclosure`` (for its arguments) may run."""
        if self.estimators is not None:
            from kernelscale.backends.flower.protocols import estimators_running

            users = estimators_running(name)
            if not users & self.estimators:
                ran_by = ", ".join(sorted(users)) or "no estimator that runs on Flower"
                raise PolicyRefusal(
                    f"step {name} is not in the protocols of "
                    f"{', '.join(sorted(self.estimators))} (it belongs to {ran_by}); the "
                    "party serves other estimators by adding them to estimators=\"...\" "
                    "in its node config")
        if discloses_more(disclosure, self.most):
            raise PolicyRefusal(
                f"step {name} would reply {_WHAT[disclosure]}, and this party's node "
                f"answers at most {_WHAT[self.most]}; the party allows it with "
                f"{_allowing_key(disclosure)} in its node config")

    def check_reply(self, name: str, reply, reply_kind: str) -> None:
        """Raise :class:`PolicyRefusal` for a reply carrying raw rows under a no-rows
        policy, whatever the step declared (the declaration could be wrong)."""
        if self.most == ROWS or not carries_rows(reply, reply_kind):
            return
        raise PolicyRefusal(f"step {name} produced a reply holding raw rows of the partition "
                            "(kind raw_points) and this party's node answers no raw rows; "
                            "the reply was not sent")


def _estimators(text) -> frozenset | None:
    if text is None:
        return None
    from kernelscale.backends.flower.protocols import protocol_estimators

    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"node config estimators={text!r}: give a quoted, comma-separated "
                         "list of estimator names, e.g. estimators=\"FederatedKernelKMeans\".")
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    unknown = sorted(names - set(protocol_estimators()))
    if unknown:
        raise ValueError(f"node config estimators: {', '.join(unknown)} "
                         f"{'is' if len(unknown) == 1 else 'are'} not an estimator that runs "
                         f"on Flower; name some of {', '.join(protocol_estimators())}.")
    return names


def _allowing_key(disclosure: str) -> str:
    return "allow-rows=true" if disclosure == ROWS else f'disclose="{disclosure}"'


def carries_rows(reply, reply_kind: str) -> bool:
    """Whether ``reply`` holds raw rows: a ``raw_points`` part, or a whole reply of
    that kind, with at least one word."""
    from kernelscale.runtime.ledger import UP, Ledger

    return any(m.kind == "raw_points"
               for m in Ledger.count("check", "fit", UP, reply_kind, 0, reply))


__all__ = ["DISCLOSE_LEVELS", "NodePolicy", "POLICY_KEYS", "PolicyRefusal", "carries_rows"]
