"""Which SuperNode holds which partition: the operator's roster, the nodes' hello.

:class:`PartitionNodes` is the part of
:class:`~kernelscale.backends.flower.rounds.FlowerRounds` that maps partition ids
to Flower node ids before the first round (``node_ids``), through the same
transport as the rounds (``_list_nodes`` and ``_round``). The operator's roster
(:class:`~kernelscale.backends.flower.operator_settings.Roster`) binds them when
there is one; otherwise each node's ``partition-id`` claim does. Either way two
nodes claiming one partition of the run refuse it, naming both: no node silently
takes another party's place.
"""

from __future__ import annotations

import time

from kernelscale.backends.flower.operator_settings import ROSTER_ENV

#: Seconds the hello waits at least for the nodes that had not answered once every
#: partition has a node (a second claim on a partition must not go unseen).
HELLO_GRACE_SECONDS = 2.0
WAITING_SAY_SECONDS = 10.0  # how often a run waiting for its nodes says which are missing


class PartitionNodes:
    """Finds ``node_ids`` (and each node's policy, ``node_policies``) for ``n_workers``
    partitions; needs ``roster``, ``data_key``, ``say``, ``where``, ``_list_nodes``,
    ``_round`` and ``_records`` from the cluster it is part of."""

    def find_nodes(self, timeout: float = 180.0) -> None:
        """Find again which SuperNode holds which partition (``node_ids``).

        A SuperNode started again after it stopped or was killed gets a new node id
        from the SuperLink, so the rounds of this cluster no longer reach it; call
        this before the next fit.

        Parameters
        ----------
        timeout : float, default=180
            Seconds to wait until a node holds every partition (a node started
            again may still be connecting); then ``TimeoutError`` (too few nodes)
            or ``ValueError`` naming the partitions that no node holds.
        """
        self._find_nodes(time.monotonic() + float(timeout))

    def _find_nodes(self, deadline: float) -> None:
        """Map partition ids to node ids (``node_ids``): the operator's roster, else the
        nodes' own claims (hello); two nodes claiming one partition refuse the run.

        With a roster (``self.roster``, ``{partition: node}``) the rostered nodes of
        partitions 0 to ``n_workers - 1`` are asked first, once all of them are
        connected, and each must say it holds its rostered partition; only they are
        used. Without one, the first nodes to answer for every partition are. Either
        way the other connected nodes (a node killed recently is still listed until its
        heartbeat is overdue, and answers nothing) then get a short hello (twice as long
        as the first took, at least :data:`HELLO_GRACE_SECONDS`): one that claims a
        partition of the run, beside the node that holds it, refuses the run naming both,
        never silently replaces it.
        """
        wanted = self._rostered_nodes()
        listed = self._wait_for_nodes(deadline, wanted)
        hello = self._records({"op": "hello", "data-key": wire_key(self.data_key)})
        nodes = sorted(wanted.values()) if wanted is not None else listed
        start = time.monotonic()
        events = self._round("hello", [(n, hello) for n in nodes],
                             max(1.0, deadline - time.monotonic()),
                             need=len(nodes) if wanted is not None else self.n_workers,
                             joined=None if wanted is not None else nodes)
        claims = self._claims(nodes, events)
        others = [n for n in (listed if wanted is not None else nodes) if n not in claims
                  and (wanted is None or n not in wanted.values())]
        if others:  # as long as twice the first hello took: a slow machine is slow for all
            grace = max(HELLO_GRACE_SECONDS, 2.0 * (time.monotonic() - start))
            late = self._round("hello", [(n, hello) for n in others],
                               min(grace, max(0.1, deadline - time.monotonic())))
            claims.update(self._claims(others, late, strict=wanted is None))
        self.node_ids, self.node_policies = self._assign(claims, wanted)

    def _rostered_nodes(self) -> dict | None:
        """``{partition: node}`` of the roster for partitions 0..n_workers-1 (None: no roster)."""
        if self.roster is None:
            return None
        missing = [p for p in range(self.n_workers) if p not in self.roster]
        if missing:
            raise ValueError(f"{self.roster.source} binds no node to partition(s) {missing}; "
                             f"this run needs partitions 0 to {self.n_workers - 1}.")
        return {p: int(self.roster[p]) for p in range(self.n_workers)}

    def _wait_for_nodes(self, deadline: float, wanted: dict | None) -> list[int]:
        """The listed nodes, once ``n_workers`` of them (the rostered ones) are connected;
        says every 10 s which are missing."""
        next_say = time.monotonic() + WAITING_SAY_SECONDS
        while True:
            nodes = sorted(self._list_nodes())
            if wanted is None:
                if len(nodes) >= self.n_workers:
                    return nodes
                missing = f"{self.n_workers - len(nodes)} more"
            else:
                absent = {p: n for p, n in wanted.items() if n not in nodes}
                if not absent:
                    return nodes
                missing = ", ".join(f"node {n} (partition {p})" for p, n in absent.items())
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"Only {len(nodes)} SuperNodes are connected to {self.where} and this run "
                    f"needs {missing}: is every party's node running, with its key "
                    "registered (flwr supernode register)? start-timeout sets this wait.")
            if time.monotonic() > next_say:
                self.say(f"kernelscale: waiting for SuperNodes: {missing} "
                         f"({max(0.0, deadline - time.monotonic()):.0f} s left)")
                next_say = time.monotonic() + WAITING_SAY_SECONDS
            time.sleep(0.2)

    @staticmethod
    def _claims(nodes: list[int], events: dict, strict: bool = True) -> dict:
        """``{node: (partition id, policy)}`` of the nodes that answered the hello; a node
        that answered with an error fails the run (``strict``) or is left out."""
        claims = {}
        for index, (event, content) in sorted(events.items()):
            failed = (content if event == "error" else content["kernelscale"].get("error")
                      if event == "reply" else None)
            if failed is not None:
                if strict:
                    raise RuntimeError(f"SuperNode {nodes[index]} did not say hello: {failed}")
                continue
            if event == "reply":
                header = content["kernelscale"]
                claims[nodes[index]] = (int(header["partition-id"]),
                                        str(header.get("policy", "")))
        return claims

    def _assign(self, claims: dict, wanted: dict | None) -> tuple[list[int], list[str]]:
        """Node ids and policies of partitions 0..n_workers-1 from the nodes' claims."""
        if wanted is not None:
            for partition, node in wanted.items():
                if node in claims and claims[node][0] != partition:
                    raise ValueError(
                        f"SuperNode {node} holds partition-id {claims[node][0]} in its node "
                        f"config, but {self.roster.source} binds it to partition {partition}; "
                        "the operator's roster and the party's node config must agree.")
        by_partition: dict[int, list[int]] = {}
        for node, (partition, _) in sorted(claims.items(), key=lambda c: (
                wanted is None or c[0] not in wanted.values(), c[0])):
            if partition < self.n_workers:  # the rostered node first, then any other
                by_partition.setdefault(partition, []).append(node)
        doubled = {p: n for p, n in by_partition.items() if len(n) > 1}
        if doubled:
            partition, both = min(doubled.items())
            how = (f"{self.roster.source} binds partition {partition} to node {both[0]}; "
                   "the operator unregisters the other (flwr supernode unregister) or stops it"
                   if wanted is not None else
                   f"the operator binds each node to its partition with a roster ({ROSTER_ENV}, "
                   "docs/flower.md), or stops the node that should not be there")
            raise ValueError(
                f"SuperNodes {' and '.join(map(str, both))} both claim partition-id "
                f"{partition}: the run is refused before any round, since either could hold "
                f"another party's rows; {how}.")
        missing = [i for i in range(self.n_workers) if i not in by_partition]
        if missing:
            raise ValueError(
                f"No SuperNode holds partition(s) {missing}; the nodes hold "
                f"{sorted(by_partition)}. Start each node with --node-config "
                f"'partition-id=<i> {wire_key(self.data_key)}=\"<file>\"'.")
        nodes = [by_partition[i][0] for i in range(self.n_workers)]
        return nodes, [claims[n][1] for n in nodes]



def check_data_key(value):
    """A node-config key (str), or a tuple of them (files stacked row-wise on the node)."""
    if isinstance(value, str) and value:
        return value
    if (isinstance(value, (tuple, list)) and value
            and all(isinstance(k, str) and k for k in value)):
        return tuple(value) if len(value) > 1 else value[0]
    raise ValueError(f"data_key must be a node-config key (a non-empty str) or a tuple of "
                     f"them, not {value!r}.")


def wire_key(data_key):
    """The data key as a message header holds it (a list for several keys)."""
    return list(data_key) if isinstance(data_key, tuple) else data_key


__all__ = ["HELLO_GRACE_SECONDS", "PartitionNodes", "check_data_key", "wire_key"]
