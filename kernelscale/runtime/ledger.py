"""The communication ledger: every message of a protocol, counted in words.

Counting rules (DESIGN.md, "Counting communication"): a dense array costs its
``size``; a sparse matrix costs ``2 * nnz`` (its values plus one column index each,
the papers' rho); an int, a float or a string costs 1; containers cost the sum
of their items; ``None`` costs nothing. A broadcast to s workers is s messages.
"""

from __future__ import annotations

import csv
import io
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from numbers import Number

import numpy as np
import scipy.sparse as sp

#: The direction of a message from the master to a worker.
DOWN = "master->worker"
#: The direction of a message from a worker to the master (an upload).
UP = "worker->master"
#: What a message carries, one kind per ledger entry: ``seed``, ``scalars``, ``sketch``,
#: ``raw_points`` (input rows), ``model``, ``secure_sum`` (a masked upload of a securely
#: summed round, Flower's SecAgg+) and ``secagg`` (the secure aggregation protocol's own
#: messages: public keys, encrypted key shares, ...).
KINDS = ("seed", "scalars", "sketch", "raw_points", "model", "secure_sum", "secagg")
TIME_COLUMNS = ("master", "wall", "slowest worker", "workers")


@dataclass(frozen=True)
class RoundTime:
    """Where the time of one round went.

    Attributes
    ----------
    round, phase : str
    master_seconds : float
        The master's own work since the previous round ended (what it computed
        to send this round: a whitening factor, a sample allocation...).
    wall_seconds : float
        From sending the round to holding every reply (summed, for a reduction).
    slowest_worker_seconds : float
        The longest worker step of the round: with every worker on its own
        machine, the round takes at least this long.
    worker_seconds : float
        All workers' step time added up (the in-process work with one core).
    """

    round: str
    phase: str
    master_seconds: float
    wall_seconds: float
    slowest_worker_seconds: float
    worker_seconds: float


@dataclass(frozen=True, slots=True)
class Message:
    """One message between the master and one worker."""

    round: str
    phase: str
    direction: str
    kind: str
    worker: int
    words: int
    nbytes: int


class Tagged(dict):
    """A message made of parts of different kinds: ``Tagged(raw_points=Y, scalars=w)``.

    The runtime counts each part under its own kind; the receiver gets the dict.
    """

    def __init__(self, **parts):
        unknown = set(parts) - set(KINDS)
        if unknown:
            raise ValueError(f"Unknown message kinds {sorted(unknown)}; use {KINDS}.")
        super().__init__(**parts)


def count_words(obj) -> int:
    """Words in a payload, by the counting rules of the module docstring.

    Parameters
    ----------
    obj : object
        A message's payload: an array, a CSR matrix, a number, or a list, tuple
        or dict of them.

    Returns
    -------
    words : int
        A dense array counts its size, a CSR matrix its nonzeros twice (values and
        column indices), a number 1.

    Examples
    --------
    >>> import numpy as np
    >>> count_words(np.zeros((3, 4))), count_words(7), count_words([1.0, np.ones(2)])
    (12, 1, 3)
    """
    if obj is None:
        return 0
    if sp.issparse(obj):
        return 2 * int(obj.nnz)
    if isinstance(obj, np.ndarray):
        return int(obj.size)
    if isinstance(obj, (Number, str, np.generic)):
        return 1
    if isinstance(obj, Mapping):
        return sum(count_words(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(count_words(v) for v in obj)
    raise TypeError(f"Cannot count the words of a {type(obj).__name__} message.")


def count_bytes(obj) -> int:
    """Payload bytes of a message (array buffers; 8 bytes per scalar)."""
    if obj is None:
        return 0
    if sp.issparse(obj):
        csr = obj.tocsr()
        return int(csr.data.nbytes + csr.indices.nbytes + csr.indptr.nbytes)
    if isinstance(obj, np.ndarray):
        return int(obj.nbytes)
    if isinstance(obj, str):
        return len(obj.encode())
    if isinstance(obj, (Number, np.generic)):
        return 8
    if isinstance(obj, Mapping):
        return sum(count_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(count_bytes(v) for v in obj)
    raise TypeError(f"Cannot count the bytes of a {type(obj).__name__} message.")


class Ledger:
    """Every message of a protocol run, with its round, phase, direction and kind.

    Examples
    --------
    >>> ledger = Ledger()
    >>> ledger.record("leverage scores", "fit", UP, "sketch", worker=0, payload=np.ones((3, 3)))
    >>> ledger.total_words()
    9
    """

    def __init__(self):
        self._messages: list[Message] = []
        self._times: list[RoundTime] = []

    def record(self, round: str, phase: str, direction: str, kind: str, worker: int, payload):
        """Count one payload (a ``Tagged`` payload is split by kind)."""
        self._messages.extend(self.count(round, phase, direction, kind, worker, payload))

    @staticmethod
    def count(round: str, phase: str, direction: str, kind: str, worker: int,
              payload) -> list[Message]:
        """The messages :meth:`record` would add for ``payload``, without adding them."""
        if direction not in (DOWN, UP):
            raise ValueError(f"direction must be {DOWN!r} or {UP!r}, got {direction!r}.")
        if isinstance(payload, Tagged):
            return [m for part_kind, part in payload.items()
                    for m in Ledger.count(round, phase, direction, part_kind, worker, part)]
        if kind not in KINDS:
            raise ValueError(f"Unknown message kind {kind!r}; use one of {KINDS}.")
        words = count_words(payload)
        if words == 0:
            return []
        return [Message(round, phase, direction, kind, int(worker), words, count_bytes(payload))]

    def record_time(self, round: str, phase: str, master_seconds: float,
                    wall_seconds: float, worker_seconds) -> None:
        """Keep one round and its timing (``worker_seconds``: each worker's step time).

        Every round of a cluster is recorded here once, so :meth:`n_rounds` counts them.
        """
        worker_seconds = np.asarray(worker_seconds, dtype=float)
        slowest = float(worker_seconds.max()) if worker_seconds.size else 0.0
        self._times.append(RoundTime(round, phase, float(master_seconds), float(wall_seconds),
                                     slowest, float(worker_seconds.sum())))

    def times(self, phase: str | None = "fit") -> list[RoundTime]:
        """The timing of every round, in order, optionally of one phase."""
        return [t for t in self._times if phase is None or t.phase == phase]

    def seconds_by_round(self, phase: str | None = "fit") -> dict[str, dict[str, float]]:
        """``{round: {'master': s, 'wall': s, 'slowest worker': s, 'workers': s}}``.

        Rounds of the same name (top-ups, iterations) are added up.
        """
        table: dict[str, dict[str, float]] = {}
        for t in self.times(phase):
            row = table.setdefault(t.round, dict.fromkeys(TIME_COLUMNS, 0.0))
            row["master"] += t.master_seconds
            row["wall"] += t.wall_seconds
            row["slowest worker"] += t.slowest_worker_seconds
            row["workers"] += t.worker_seconds
        return table

    def n_rounds(self, phase: str | None = "fit") -> int:
        """Communication rounds of the phase: one per ``scatter_map`` (or secure sum), each a
        round trip from the master to every worker and back, whatever its words.

        Examples
        --------
        >>> ledger = Ledger()
        >>> ledger.record_time("a", "fit", 0.0, 0.1, [0.05, 0.04])
        >>> ledger.record_time("a", "fit", 0.0, 0.1, [0.05, 0.04])
        >>> ledger.n_rounds(), ledger.rounds_by_name()
        (2, {'a': 2})
        """
        return len(self.times(phase))

    def rounds_by_name(self, phase: str | None = "fit") -> dict[str, int]:
        """``{round name: rounds}`` in the order the names first appeared (a name repeats
        for iterations and top-ups)."""
        table: dict[str, int] = {}
        for t in self.times(phase):
            table[t.round] = table.get(t.round, 0) + 1
        return table

    def total_seconds(self, phase: str | None = "fit") -> float:
        """Master time plus round wall time over the phase: the protocol's elapsed time."""
        return sum(t.master_seconds + t.wall_seconds for t in self.times(phase))

    def time_summary(self, phase: str | None = "fit") -> str:
        """A readable table of where the time of each round went, in seconds."""
        rows = self.seconds_by_round(phase)
        if not rows:
            return f"time ({'all phases' if phase is None else phase}): no rounds"
        width = max([len("round")] + [len(r) for r in rows])
        lines = [f"{'round':<{width}}  " + "  ".join(f"{c:>14}" for c in TIME_COLUMNS)]
        totals = dict.fromkeys(TIME_COLUMNS, 0.0)
        for name, row in rows.items():
            lines.append(f"{name:<{width}}  " + "  ".join(f"{row[c]:>14.3f}" for c in TIME_COLUMNS))
            for c in TIME_COLUMNS:
                totals[c] += row[c]
        lines.append(f"{'total':<{width}}  " + "  ".join(f"{totals[c]:>14.3f}"
                                                         for c in TIME_COLUMNS))
        title = (f"time ({'all phases' if phase is None else phase}), in seconds: the master's "
                 "own work before each round, the round's wall time, its slowest worker step, "
                 "and all worker steps added up")
        return "\n".join([title, *lines])

    def extend(self, messages) -> None:
        """Append already counted messages (used by backends that merge ledgers)."""
        self._messages.extend(messages)

    def rounds(self, phase: str | None = None) -> list[Message]:
        """All messages in the order they were sent, optionally of one phase."""
        return [m for m in self._messages if phase is None or m.phase == phase]

    def _select(self, phase, direction=None, kind=None, round=None):
        for m in self._messages:
            if phase is not None and m.phase != phase:
                continue
            if direction is not None and m.direction != direction:
                continue
            if kind is not None and m.kind != kind:
                continue
            if round is not None and m.round != round:
                continue
            yield m

    def total_words(self, phase: str | None = "fit", kind: str | None = None) -> int:
        """Words sent in both directions (``phase=None``: every phase)."""
        return sum(m.words for m in self._select(phase, kind=kind))

    def upload_words(self, phase: str | None = "fit", kind: str | None = None) -> int:
        """Words sent from the workers to the master."""
        return sum(m.words for m in self._select(phase, UP, kind))

    def download_words(self, phase: str | None = "fit", kind: str | None = None) -> int:
        """Words sent from the master to the workers."""
        return sum(m.words for m in self._select(phase, DOWN, kind))

    def total_bytes(self, phase: str | None = "fit") -> int:
        """Payload bytes sent in both directions."""
        return sum(m.nbytes for m in self._select(phase))

    def round_words(self, round: str, phase: str | None = "fit", direction=None) -> int:
        """Words of one named round."""
        return sum(m.words for m in self._select(phase, direction, round=round))

    def words_by_round(self, phase: str | None = "fit") -> dict[str, dict[str, int]]:
        """``{round: {direction: words}}`` in the order rounds first appeared."""
        table: dict[str, dict[str, int]] = {}
        for m in self._select(phase):
            row = table.setdefault(m.round, {DOWN: 0, UP: 0})
            row[m.direction] += m.words
        return table

    def words_by_kind(self, phase: str | None = "fit", direction=None) -> dict[str, int]:
        """``{kind: words}``."""
        table: dict[str, int] = defaultdict(int)
        for m in self._select(phase, direction):
            table[m.kind] += m.words
        return dict(table)

    def phases(self) -> list[str]:
        return list(dict.fromkeys(m.phase for m in self._messages))

    def summary(self, phase: str | None = "fit", times: bool = True) -> str:
        """A readable table of each round's count and words per direction, then (``times``)
        of seconds.

        A name that repeats (iterations, top-ups) is one line whose ``rounds`` column
        counts its round trips; the last line holds :meth:`n_rounds` and the totals.
        """
        rows = self.words_by_round(phase)
        counts = self.rounds_by_name(phase)
        names = list(dict.fromkeys([*counts, *rows]))  # a round may send no word
        width = max([len("round")] + [len(r) for r in names])
        lines = [f"{'round':<{width}}  {'rounds':>6}  {'down':>12}  {'up':>12}  {'total':>12}"]
        for name in names:
            down, up = (rows[name][DOWN], rows[name][UP]) if name in rows else (0, 0)
            lines.append(f"{name:<{width}}  {counts.get(name, 0):>6,}  {down:>12,}  {up:>12,}  "
                         f"{down + up:>12,}")
        down, up = self.download_words(phase), self.upload_words(phase)
        lines.append(f"{'total':<{width}}  {self.n_rounds(phase):>6,}  {down:>12,}  {up:>12,}  "
                     f"{down + up:>12,}")
        kinds = ", ".join(f"{k}={v:,}" for k, v in self.words_by_kind(phase).items())
        title = f"communication ({'all phases' if phase is None else phase}), in rounds and words"
        text = "\n".join([title, *lines, f"by kind: {kinds or 'none'}"])
        if times and self.times(phase):
            text += "\n\n" + self.time_summary(phase)
        return text

    def to_csv(self) -> str:
        """Every message as CSV text (one row per message)."""
        buf = io.StringIO()
        fields = list(Message.__dataclass_fields__)
        writer = csv.DictWriter(buf, fieldnames=fields)
        writer.writeheader()
        for m in self._messages:
            writer.writerow(asdict(m))
        return buf.getvalue()

    def copy(self, phase: str | None = None) -> Ledger:
        """A new ledger with the messages of one phase (or all)."""
        other = Ledger()
        other.extend(self.rounds(phase))
        other._times = self.times(phase)
        return other

    def __len__(self) -> int:
        return len(self._messages)

    def __eq__(self, other) -> bool:
        """Same messages in the same order (timings are not compared)."""
        return isinstance(other, Ledger) and self._messages == other._messages

    def __repr__(self) -> str:
        return f"Ledger({len(self)} messages, {self.total_words(None):,} words)"
